/**
 * What the client needs of node-postgres: anything with `query(text, values)` (a `pg.Client`,
 * a `pg.PoolClient`), or a pool (`pg.Pool`, anything with `connect()` that hands out clients with
 * `release()`). The package works with any of them; it never creates connections itself.
 *
 * @module
 */

/** The part of a query result the client reads. */
export interface QueryResultLike<R> {
  rows: R[];
}

/** A connection, or anything that runs a query: `pg.Client`, `pg.PoolClient`, `pg.Pool`. */
export interface Queryable {
  // `any` keeps node-postgres' own overloads (pg.Pool, pg.Client) assignable to this interface.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  query(text: string, values?: any[]): Promise<QueryResultLike<any>>;
}

/** A client checked out of a pool. */
export interface PoolClientLike extends Queryable {
  release(err?: Error | boolean): void;
}

/** A pool: `pg.Pool`. */
export interface PoolLike extends Queryable {
  connect(): Promise<PoolClientLike>;
}

/** Whether `db` is a pool (hands out clients) rather than one connection. */
export function isPool(db: Queryable): db is PoolLike {
  const d = db as Partial<PoolLike> & { totalCount?: unknown; release?: unknown };
  return typeof d.connect === "function" && typeof d.release !== "function" && typeof d.totalCount === "number";
}

/** Runs `work` on one connection: a client of the pool (released after), or `db` itself. */
export async function withConnection<T>(db: Queryable, work: (c: Queryable) => Promise<T>): Promise<T> {
  if (!isPool(db)) return serialized(db, () => work(db));
  const client = await db.connect();
  let broken: Error | undefined;
  try {
    return await work(client);
  } catch (e) {
    // A connection whose transaction could not be ended is not given back to the pool.
    if (e instanceof BrokenConnection) broken = e;
    throw e instanceof BrokenConnection ? e.cause : e;
  } finally {
    client.release(broken ?? false);
  }
}

/** Runs `work` in a transaction on one connection (BEGIN … COMMIT, ROLLBACK on error). */
export async function inTransaction<T>(db: Queryable, work: (c: Queryable) => Promise<T>): Promise<T> {
  return withConnection(db, async (c) => {
    await c.query("BEGIN");
    let result: T;
    try {
      result = await work(c);
    } catch (e) {
      try {
        await c.query("ROLLBACK");
      } catch {
        throw new BrokenConnection(e);
      }
      throw e;
    }
    await c.query("COMMIT");
    return result;
  });
}

class BrokenConnection extends Error {
  constructor(override readonly cause: unknown) {
    super("the connection's transaction could not be rolled back");
  }
}

// One connection runs one transaction at a time: calls sharing a pg.Client (a heartbeat loop and
// a checkpoint, say) take turns, so one's BEGIN … COMMIT never wraps the other's statements.
const queues = new WeakMap<object, Promise<unknown>>();

async function serialized<T>(conn: object, work: () => Promise<T>): Promise<T> {
  const before = queues.get(conn) ?? Promise.resolve();
  const mine = before.then(work, work);
  queues.set(
    conn,
    mine.then(
      () => undefined,
      () => undefined,
    ),
  );
  try {
    return await mine;
  } catch (e) {
    throw e instanceof BrokenConnection ? e.cause : e;
  }
}
