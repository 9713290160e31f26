-- cortex_buffer 0.10.0 -> 0.11.0: the opt-in partitioned layout. partition_events() converts
-- event and corrupt_line to range partitions of file_id (files_per_partition ids each), moving
-- the rows in one transaction; the indexer and cleanup_session_buffers() make partitions ahead
-- of new files (event_partition_create), and cleanup_session_buffers() drops a partition whole
-- once every file of its span is gone and past max_file_age (event_partition_drop), keeping a
-- deleted file's index rows, marked gone, until then. event_partitioning holds the settings.
-- partition_events() is for superusers; the two helpers for cortex_buffer_definer.
\echo Use "ALTER EXTENSION cortex_buffer UPDATE TO '0.11.0'" to load this file. \quit


-- The opt-in partitioned layout of event and corrupt_line (docs/operations.md: Partitioned
-- events): both tables partitioned by ranges of file_id, so that retention drops whole spans of
-- files instead of deleting their rows one by one. Files are numbered in discovery order, so a
-- span of ids is a span of time, and every lookup (which names its files) prunes to the spans
-- that hold them.

-- Present once partition_events() has converted the tables: how wide a span is and how many are
-- made ahead of the files.
CREATE TABLE cortex_buffer.event_partitioning (
    one                 boolean PRIMARY KEY DEFAULT true CHECK (one),
    files_per_partition bigint NOT NULL CHECK (files_per_partition OPERATOR(pg_catalog.>) 0),
    premake             integer NOT NULL CHECK (premake OPERATOR(pg_catalog.>=) 0),
    partitioned_at      timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.event_partitioning', '');
COMMENT ON TABLE cortex_buffer.event_partitioning IS
'The partitioned layout''s settings, one row once cortex_buffer.partition_events() has converted event and corrupt_line (no row: the tables are not partitioned).';
COMMENT ON COLUMN cortex_buffer.event_partitioning.one IS 'Always true: the table holds at most one row.';
COMMENT ON COLUMN cortex_buffer.event_partitioning.files_per_partition IS 'File ids per partition: a partition of event and of corrupt_line holds the rows of file ids [n × files_per_partition, (n + 1) × files_per_partition).';
COMMENT ON COLUMN cortex_buffer.event_partitioning.premake IS 'Partitions kept ready above the highest file id (the indexer and cleanup_session_buffers() make them).';
COMMENT ON COLUMN cortex_buffer.event_partitioning.partitioned_at IS 'When partition_events() converted the tables.';

-- Gives `target` the grants `source` has (its owner's own aside): a partition its parent's, a
-- converted table the plain one's. Internal; PUBLIC may not call it.
CREATE FUNCTION cortex_buffer.copy_table_grants(source regclass, target regclass) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    g record;
BEGIN
    FOR g IN
        SELECT a.grantee, a.privilege_type
          FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
         WHERE c.oid OPERATOR(pg_catalog.=) source AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
    LOOP
        EXECUTE pg_catalog.format('GRANT %s ON %s TO %s', g.privilege_type, target,
            CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                 ELSE g.grantee::pg_catalog.regrole::pg_catalog.text END);
    END LOOP;
END
$$;
COMMENT ON FUNCTION cortex_buffer.copy_table_grants(regclass, regclass) IS
'Internal (the partitioned layout): grants target every privilege source grants to roles other than its owner.';

-- Makes the partitions of event and corrupt_line for file ids [from_file_id, to_file_id), empty,
-- each created alone and attached (ATTACH takes a SHARE UPDATE EXCLUSIVE lock on the parent, so
-- readers and inserts into other partitions go on), with the parent's grants. Runs as the
-- extension's owner: only it may attach partitions to the extension's tables, and only
-- cortex_buffer_definer (the indexer's role) may call it.
CREATE FUNCTION cortex_buffer.event_partition_create(from_file_id bigint, to_file_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    parent text;
    leaf text;
    made boolean := false;
BEGIN
    IF from_file_id IS NULL OR to_file_id IS NULL OR from_file_id OPERATOR(pg_catalog.>=) to_file_id THEN
        RAISE EXCEPTION 'event_partition_create: the span [%, %) is empty', from_file_id, to_file_id
            USING ERRCODE = '22023', HINT = 'Pass from_file_id < to_file_id.';
    END IF;
    FOREACH parent IN ARRAY ARRAY['event', 'corrupt_line'] LOOP
        IF (SELECT c.relkind FROM pg_catalog.pg_class c
             WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.format('cortex_buffer.%I', parent)::pg_catalog.regclass)
           OPERATOR(pg_catalog.<>) 'p' THEN
            RAISE EXCEPTION 'cortex_buffer.% is not partitioned', parent
                USING ERRCODE = '55000', HINT = 'Convert the tables first: SELECT * FROM cortex_buffer.partition_events();';
        END IF;
        leaf := pg_catalog.format('%s_p%s', parent, from_file_id);
        -- Two transactions that need the same span make it once: the second waits for the
        -- first to end, then finds the partition.
        PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('cortex_buffer partition ' OPERATOR(pg_catalog.||) leaf, 0));
        IF pg_catalog.to_regclass(pg_catalog.format('cortex_buffer.%I', leaf)) IS NOT NULL THEN
            CONTINUE WHEN EXISTS (SELECT FROM pg_catalog.pg_inherits i
                                   WHERE i.inhrelid OPERATOR(pg_catalog.=) pg_catalog.format('cortex_buffer.%I', leaf)::pg_catalog.regclass
                                     AND i.inhparent OPERATOR(pg_catalog.=) pg_catalog.format('cortex_buffer.%I', parent)::pg_catalog.regclass);
            RAISE EXCEPTION 'cortex_buffer.% exists but is not a partition of cortex_buffer.%', leaf, parent
                USING ERRCODE = '55000', HINT = 'Attach it (ALTER TABLE ... ATTACH PARTITION), or rename or drop it, so that the span can be made.';
        END IF;
        EXECUTE pg_catalog.format(
            'CREATE TABLE cortex_buffer.%I (LIKE cortex_buffer.%I INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION)',
            leaf, parent);
        PERFORM cortex_buffer.copy_table_grants(pg_catalog.format('cortex_buffer.%I', parent)::pg_catalog.regclass,
                                                pg_catalog.format('cortex_buffer.%I', leaf)::pg_catalog.regclass);
        EXECUTE pg_catalog.format('ALTER TABLE cortex_buffer.%I ATTACH PARTITION cortex_buffer.%I FOR VALUES FROM (%s) TO (%s)',
            parent, leaf, from_file_id, to_file_id);
        made := true;
    END LOOP;
    RETURN made;
END
$$;
COMMENT ON FUNCTION cortex_buffer.event_partition_create(bigint, bigint) IS
'Internal (the indexer and cleanup_session_buffers() call it as cortex_buffer_definer): makes the empty partitions event_p<from_file_id> and corrupt_line_p<from_file_id> for file ids [from_file_id, to_file_id), with the parent''s grants. True when it made one.';

-- Drops one partition of event or corrupt_line (retention has decided that every file of its
-- span qualifies). Refuses anything that is not a plain partition of those two tables.
CREATE FUNCTION cortex_buffer.event_partition_drop(leaf regclass) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (
        SELECT FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.inhrelid
         WHERE i.inhrelid OPERATOR(pg_catalog.=) leaf
           AND i.inhparent OPERATOR(pg_catalog.=) ANY (ARRAY['cortex_buffer.event'::pg_catalog.regclass,
                                                             'cortex_buffer.corrupt_line'::pg_catalog.regclass])
           AND c.relkind OPERATOR(pg_catalog.=) 'r') THEN
        RAISE EXCEPTION '% is not a partition of cortex_buffer.event or cortex_buffer.corrupt_line', leaf
            USING ERRCODE = '42809', HINT = 'Only retention drops partitions, through cleanup_session_buffers().';
    END IF;
    EXECUTE pg_catalog.format('DROP TABLE %s', leaf);
END
$$;
COMMENT ON FUNCTION cortex_buffer.event_partition_drop(regclass) IS
'Internal (cleanup_session_buffers() calls it as cortex_buffer_definer): drops a partition of event or corrupt_line whose span of files retention has released.';

-- partition_events(): converts an installation's event and corrupt_line to the partitioned
-- layout, in one transaction, with a NOTICE per partition filled. Grants: none (superusers
-- only: it changes the extension's own tables).
CREATE FUNCTION cortex_buffer.partition_events(files_per_partition bigint DEFAULT 10000, premake integer DEFAULT 4)
RETURNS TABLE (partition text, from_file_id bigint, to_file_id bigint, rows_moved bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    parent text;
    old text;
    rel pg_catalog.regclass;
    o record;
    g record;
    views record;
    saved_views text[] := ARRAY[]::text[];
    defs text[];
    comments text[];
    first_id bigint;
    next_id bigint;
    lo bigint;
    spans bigint;
    n bigint;
    done bigint;
    leaf text;
BEGIN
    IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER) THEN
        RAISE EXCEPTION 'partition_events() may be called by superusers only'
            USING ERRCODE = '42501', HINT = 'It rebuilds the extension''s own tables; ask the database''s administrator.';
    END IF;
    IF files_per_partition IS NULL OR files_per_partition OPERATOR(pg_catalog.<) 1 OR premake IS NULL
       OR premake OPERATOR(pg_catalog.<) 0 THEN
        RAISE EXCEPTION 'partition_events: files_per_partition must be at least 1 and premake at least 0 (got %, %)',
            files_per_partition, premake
            USING ERRCODE = '22023', HINT = 'The default, 10000 files per partition, suits a fleet that starts thousands of sessions a day.';
    END IF;
    IF (SELECT c.relkind FROM pg_catalog.pg_class c
         WHERE c.oid OPERATOR(pg_catalog.=) 'cortex_buffer.event'::pg_catalog.regclass) OPERATOR(pg_catalog.=) 'p' THEN
        RAISE EXCEPTION 'cortex_buffer.event is already partitioned'
            USING ERRCODE = '55000', HINT = 'Nothing to do: cortex_buffer.event_partitioning holds its settings, and cleanup_session_buffers() makes and drops its partitions.';
    END IF;
    -- Nothing is indexed or read while the rows move. (session_file is not locked: a file
    -- numbered meanwhile has its partition made before its rows come, after the commit; the
    -- indexer makes sure of it before each file it reads. Locking session_file as well would let
    -- a transaction that holds it and then waits for event deadlock.)
    LOCK TABLE cortex_buffer.event, cortex_buffer.corrupt_line IN ACCESS EXCLUSIVE MODE;
    SELECT s.last_value OPERATOR(pg_catalog.+) (CASE WHEN s.is_called THEN 1 ELSE 0 END)
      INTO next_id FROM cortex_buffer.session_file_seq s;
    -- Every row must land in a span: the lowest and highest ids of all three tables count (rows
    -- whose session file is gone included).
    first_id := LEAST((SELECT pg_catalog.min(f.file_id) FROM cortex_buffer.session_file f),
                      (SELECT pg_catalog.min(e.file_id) FROM cortex_buffer.event e),
                      (SELECT pg_catalog.min(c.file_id) FROM cortex_buffer.corrupt_line c));
    first_id := COALESCE(first_id, next_id);
    next_id := GREATEST(next_id,
                        (SELECT pg_catalog.max(e.file_id) OPERATOR(pg_catalog.+) 1 FROM cortex_buffer.event e),
                        (SELECT pg_catalog.max(c.file_id) OPERATOR(pg_catalog.+) 1 FROM cortex_buffer.corrupt_line c));
    first_id := first_id OPERATOR(pg_catalog.-) (first_id OPERATOR(pg_catalog.%) files_per_partition);
    spans := (next_id OPERATOR(pg_catalog.-) first_id) OPERATOR(pg_catalog./) files_per_partition
             OPERATOR(pg_catalog.+) 1 OPERATOR(pg_catalog.+) premake;

    -- Views over the tables are re-pointed at the new ones (their text names the tables).
    FOR views IN
        SELECT DISTINCT r.ev_class AS oid
          FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_rewrite r ON r.oid OPERATOR(pg_catalog.=) d.objid
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND d.refobjid OPERATOR(pg_catalog.=) ANY (ARRAY['cortex_buffer.event'::pg_catalog.regclass,
                                                            'cortex_buffer.corrupt_line'::pg_catalog.regclass])
    LOOP
        saved_views := saved_views OPERATOR(pg_catalog.||) pg_catalog.format('CREATE OR REPLACE VIEW %s %s AS %s',
            views.oid::pg_catalog.regclass,
            (SELECT 'WITH (' OPERATOR(pg_catalog.||) pg_catalog.array_to_string(c.reloptions, ', ') OPERATOR(pg_catalog.||) ')'
               FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) views.oid AND c.reloptions IS NOT NULL),
            pg_catalog.pg_get_viewdef(views.oid));
    END LOOP;

    -- So are functions of the tables' row types (job_events returns SETOF event): made again as
    -- they are, with their owner, grants, comment and membership.
    FOR o IN
        SELECT p.oid, p.oid::pg_catalog.regprocedure::pg_catalog.text AS sig, pg_catalog.pg_get_functiondef(p.oid) AS def,
               p.proowner::pg_catalog.regrole::pg_catalog.text AS owner, p.proacl,
               pg_catalog.obj_description(p.oid, 'pg_proc') AS note
          FROM pg_catalog.pg_proc p
         WHERE EXISTS (SELECT FROM pg_catalog.pg_class c
                        WHERE c.oid OPERATOR(pg_catalog.=) ANY (ARRAY['cortex_buffer.event'::pg_catalog.regclass,
                                                                     'cortex_buffer.corrupt_line'::pg_catalog.regclass])
                          AND (c.reltype OPERATOR(pg_catalog.=) p.prorettype
                               OR c.reltype OPERATOR(pg_catalog.=) ANY (p.proargtypes::pg_catalog.oid[])
                               OR c.reltype OPERATOR(pg_catalog.=) ANY (COALESCE(p.proallargtypes, ARRAY[]::pg_catalog.oid[]))))
    LOOP
        saved_views := saved_views
            OPERATOR(pg_catalog.||) pg_catalog.format('ALTER EXTENSION cortex_buffer DROP FUNCTION %s', o.sig)
            OPERATOR(pg_catalog.||) pg_catalog.format('DROP FUNCTION %s', o.sig)
            OPERATOR(pg_catalog.||) o.def
            OPERATOR(pg_catalog.||) pg_catalog.format('ALTER FUNCTION %s OWNER TO %s', o.sig, o.owner)
            OPERATOR(pg_catalog.||) pg_catalog.format('COMMENT ON FUNCTION %s IS %L', o.sig, o.note)
            OPERATOR(pg_catalog.||) pg_catalog.format('ALTER EXTENSION cortex_buffer ADD FUNCTION %s', o.sig);
        IF o.proacl IS NOT NULL THEN
            saved_views := saved_views OPERATOR(pg_catalog.||) pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', o.sig);
            FOR g IN SELECT a.grantee FROM pg_catalog.aclexplode(o.proacl) a
                      WHERE a.grantee OPERATOR(pg_catalog.<>) (SELECT p.proowner FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=) o.oid) LOOP
                saved_views := saved_views OPERATOR(pg_catalog.||) pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s', o.sig,
                    CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                         ELSE g.grantee::pg_catalog.regrole::pg_catalog.text END);
            END LOOP;
        END IF;
    END LOOP;

    FOREACH parent IN ARRAY ARRAY['event', 'corrupt_line'] LOOP
        old := parent OPERATOR(pg_catalog.||) '_unpartitioned';
        rel := pg_catalog.format('cortex_buffer.%I', parent)::pg_catalog.regclass;
        -- The constraints and indexes as they are, to make again on the new table.
        defs := ARRAY(
            SELECT pg_catalog.format('ALTER TABLE cortex_buffer.%I ADD CONSTRAINT %I %s', parent, c.conname,
                                     pg_catalog.pg_get_constraintdef(c.oid))
              FROM pg_catalog.pg_constraint c
             WHERE c.conrelid OPERATOR(pg_catalog.=) rel AND c.contype OPERATOR(pg_catalog.=) ANY (ARRAY['p', 'u', 'c'])
            UNION ALL
            SELECT pg_catalog.pg_get_indexdef(i.indexrelid)
              FROM pg_catalog.pg_index i
             WHERE i.indrelid OPERATOR(pg_catalog.=) rel
               AND NOT EXISTS (SELECT FROM pg_catalog.pg_constraint c WHERE c.conindid OPERATOR(pg_catalog.=) i.indexrelid));
        comments := ARRAY(
            SELECT pg_catalog.format('COMMENT ON INDEX cortex_buffer.%I IS %L', ic.relname,
                                     pg_catalog.obj_description(ic.oid, 'pg_class'))
              FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid
             WHERE i.indrelid OPERATOR(pg_catalog.=) rel AND pg_catalog.obj_description(ic.oid, 'pg_class') IS NOT NULL);
        comments := comments OPERATOR(pg_catalog.||) pg_catalog.format('COMMENT ON TABLE cortex_buffer.%I IS %L', parent,
                                                               pg_catalog.obj_description(rel, 'pg_class'));
        -- Free the names.
        FOR o IN SELECT ic.relname FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid
                  WHERE i.indrelid OPERATOR(pg_catalog.=) rel LOOP
            EXECUTE pg_catalog.format('ALTER INDEX cortex_buffer.%I RENAME TO %I', o.relname,
                                      pg_catalog.left(o.relname, 40) OPERATOR(pg_catalog.||) '_unpartitioned');
        END LOOP;
        EXECUTE pg_catalog.format('ALTER TABLE cortex_buffer.%I RENAME TO %I', parent, old);
        EXECUTE pg_catalog.format('CREATE TABLE cortex_buffer.%I (LIKE cortex_buffer.%I INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION INCLUDING COMMENTS) PARTITION BY RANGE (file_id)',
                                  parent, old);
        EXECUTE pg_catalog.format('ALTER TABLE cortex_buffer.%I OWNER TO %s', parent,
                                  (SELECT c.relowner::pg_catalog.regrole::pg_catalog.text FROM pg_catalog.pg_class c
                                    WHERE c.oid OPERATOR(pg_catalog.=) rel));
        PERFORM cortex_buffer.copy_table_grants(rel, pg_catalog.format('cortex_buffer.%I', parent)::pg_catalog.regclass);
        FOR n IN 1 .. pg_catalog.array_length(defs, 1) LOOP
            EXECUTE defs[n];
        END LOOP;
        FOR n IN 1 .. pg_catalog.array_length(comments, 1) LOOP
            EXECUTE comments[n];
        END LOOP;

        -- Each span is filled while it stands alone, then attached: its indexes are built once,
        -- and the CHECK constraint spares ATTACH its scan.
        done := 0;
        FOR n IN 0 .. spans OPERATOR(pg_catalog.-) 1 LOOP
            lo := first_id OPERATOR(pg_catalog.+) (n OPERATOR(pg_catalog.*) files_per_partition);
            leaf := pg_catalog.format('%s_p%s', parent, lo);
            EXECUTE pg_catalog.format('CREATE TABLE cortex_buffer.%I (LIKE cortex_buffer.%I INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION)',
                                      leaf, parent);
            EXECUTE pg_catalog.format('INSERT INTO cortex_buffer.%I SELECT * FROM cortex_buffer.%I
                                        WHERE file_id OPERATOR(pg_catalog.>=) %s AND file_id OPERATOR(pg_catalog.<) %s',
                                      leaf, old, lo, lo OPERATOR(pg_catalog.+) files_per_partition);
            GET DIAGNOSTICS rows_moved = ROW_COUNT;
            EXECUTE pg_catalog.format('ALTER TABLE cortex_buffer.%I ADD CONSTRAINT %I CHECK (file_id OPERATOR(pg_catalog.>=) %s AND file_id OPERATOR(pg_catalog.<) %s)',
                                      leaf, leaf OPERATOR(pg_catalog.||) '_span', lo, lo OPERATOR(pg_catalog.+) files_per_partition);
            PERFORM cortex_buffer.copy_table_grants(rel, pg_catalog.format('cortex_buffer.%I', leaf)::pg_catalog.regclass);
            EXECUTE pg_catalog.format('ALTER TABLE cortex_buffer.%I ATTACH PARTITION cortex_buffer.%I FOR VALUES FROM (%s) TO (%s)',
                                      parent, leaf, lo, lo OPERATOR(pg_catalog.+) files_per_partition);
            EXECUTE pg_catalog.format('ALTER TABLE cortex_buffer.%I DROP CONSTRAINT %I', leaf, leaf OPERATOR(pg_catalog.||) '_span');
            done := done OPERATOR(pg_catalog.+) rows_moved;
            RAISE NOTICE 'partition_events: cortex_buffer.% (file ids % to %): % rows; partition % of % for %, % rows moved so far',
                leaf, lo, lo OPERATOR(pg_catalog.+) files_per_partition OPERATOR(pg_catalog.-) 1, rows_moved,
                n OPERATOR(pg_catalog.+) 1, spans, parent, done;
            partition := 'cortex_buffer.' OPERATOR(pg_catalog.||) leaf;
            from_file_id := lo;
            to_file_id := lo OPERATOR(pg_catalog.+) files_per_partition;
            RETURN NEXT;
        END LOOP;
        -- Anything the spans missed would be lost: there must be nothing.
        EXECUTE pg_catalog.format('SELECT pg_catalog.count(*) FROM cortex_buffer.%I', old) INTO n;
        IF n OPERATOR(pg_catalog.<>) done THEN
            RAISE EXCEPTION 'partition_events: % rows of cortex_buffer.% but % moved', n, old, done
                USING ERRCODE = 'XX000', HINT = 'Nothing was changed (the transaction is rolled back). Rows whose file_id is outside every session file''s span: check cortex_buffer.session_file_seq.';
        END IF;
        saved_views := saved_views OPERATOR(pg_catalog.||) pg_catalog.format('ALTER EXTENSION cortex_buffer DROP TABLE cortex_buffer.%I', old);
        saved_views := saved_views OPERATOR(pg_catalog.||) pg_catalog.format('DROP TABLE cortex_buffer.%I', old);
        saved_views := saved_views OPERATOR(pg_catalog.||) pg_catalog.format('ALTER EXTENSION cortex_buffer ADD TABLE cortex_buffer.%I', parent);
    END LOOP;
    -- The views and functions first (they still hold the old tables), then the old tables go.
    FOR n IN 1 .. COALESCE(pg_catalog.array_length(saved_views, 1), 0) LOOP
        EXECUTE saved_views[n];
    END LOOP;
    INSERT INTO cortex_buffer.event_partitioning (files_per_partition, premake)
    VALUES (partition_events.files_per_partition, partition_events.premake);
END
$$;
COMMENT ON FUNCTION cortex_buffer.partition_events(bigint, integer) IS
'Converts event and corrupt_line to the partitioned layout (docs/operations.md: Partitioned events): range partitions of files_per_partition file ids each, premake of them ready above the highest id; the rows move in one transaction that locks both tables, with a NOTICE per partition. Returns the partitions made. Superusers only; refuses (55000) when the tables are partitioned already.';

-- cleanup_session_buffers() gained the drop_partition action.
COMMENT ON FUNCTION cortex_buffer.cleanup_session_buffers(interval, interval, boolean, integer, double precision) IS
'Applies the retention policy (README: Retention): deletes job directories of jobs terminal for longer than post_terminal (cortex_buffer.keep_failed_for for failed ones, when longer) and of orphans whose newest file is older than post_terminal, files older than max_file_age (except those a live job''s recovery plan reads), index rows of files gone for cortex_buffer.gone_retention, and per-job rows of jobs gone or terminal past cortex_buffer.job_rows_retention. One row per action: delete_dir, delete_file, delete_rows, drop_partition, keep or error. Index rows go in the calling transaction; files are unlinked when it commits. In the partitioned layout (partition_events()) a deleted file''s index rows stay, marked gone, and its partition of event and corrupt_line is dropped whole once every file of its span is gone and older than max_file_age; each call also makes the partitions ahead of new files. Never follows symbolic links; locks no job row; refuses when most job ids are unknown to the job table (max_unknown_ratio). dry_run changes nothing and returns the same rows.';

-- Who may do what (README: Privileges): every grant and revoke of the extension's objects is
-- here. Runs last in a fresh install; the upgrade scripts set the same.
--
-- First, every object's privileges go back to its owner's alone (and PUBLIC's USAGE of the
-- types, PostgreSQL's default): whatever ALTER DEFAULT PRIVILEGES the installing role has set
-- (for itself, or for PUBLIC, on tables, sequences, functions or types) added nothing that the
-- grants below do not give. The schema's own USAGE is PUBLIC's (sql/bootstrap.sql).
DO $reset$
DECLARE
    o record;
BEGIN
    FOR o IN
        SELECT pg_catalog.format('TABLE %s', c.oid::pg_catalog.regclass) AS obj, a.grantee
          FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
         WHERE c.relnamespace OPERATOR(pg_catalog.=) 'cortex_buffer'::pg_catalog.regnamespace
           AND c.relkind OPERATOR(pg_catalog.=) ANY (ARRAY['r', 'v', 'm', 'p', 'f'])
           AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
        UNION
        SELECT pg_catalog.format('SEQUENCE %s', c.oid::pg_catalog.regclass), a.grantee
          FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
         WHERE c.relnamespace OPERATOR(pg_catalog.=) 'cortex_buffer'::pg_catalog.regnamespace
           AND c.relkind OPERATOR(pg_catalog.=) 'S' AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
        UNION
        SELECT pg_catalog.format('FUNCTION %s', p.oid::pg_catalog.regprocedure), a.grantee
          FROM pg_catalog.pg_proc p,
               pg_catalog.aclexplode(COALESCE(p.proacl, pg_catalog.acldefault('f', p.proowner))) a
         WHERE p.pronamespace OPERATOR(pg_catalog.=) 'cortex_buffer'::pg_catalog.regnamespace
           AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
        UNION
        SELECT pg_catalog.format('TYPE %s', t.oid::pg_catalog.regtype), a.grantee
          FROM pg_catalog.pg_type t, pg_catalog.aclexplode(t.typacl) a
         WHERE t.typnamespace OPERATOR(pg_catalog.=) 'cortex_buffer'::pg_catalog.regnamespace
           AND a.grantee OPERATOR(pg_catalog.<>) t.typowner AND a.grantee OPERATOR(pg_catalog.<>) 0
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM %s', o.obj,
            CASE WHEN o.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                 ELSE o.grantee::pg_catalog.regrole::pg_catalog.text END);
    END LOOP;
END
$reset$;

-- cortex_buffer_definer (NOLOGIN, not a superuser, no members) is the role the extension's
-- own writes run as: the functions switch to it for their statements on these tables, exactly
-- as a SECURITY DEFINER function owned by it would, and the background worker runs its
-- transactions as it. Statements on the bound job table run as the caller.
GRANT SELECT, INSERT, UPDATE, DELETE ON
    cortex_buffer.checkpoint_history, cortex_buffer.crash, cortex_buffer.job_wait,
    cortex_buffer.circuit, cortex_buffer.circuit_admission, cortex_buffer.circuit_outcome,
    cortex_buffer.job_usage, cortex_buffer.usage_ledger, cortex_buffer.agent_budget, cortex_buffer.budget_reservation,
    cortex_buffer.session_file, cortex_buffer.event, cortex_buffer.corrupt_line
  TO cortex_buffer_definer;
GRANT SELECT ON cortex_buffer.circuit_config TO cortex_buffer_definer;
GRANT USAGE ON SEQUENCE cortex_buffer.checkpoint_history_seq, cortex_buffer.crash_seq, cortex_buffer.usage_ledger_seq,
      cortex_buffer.session_file_seq, cortex_buffer.checkpoint_mark_seq TO cortex_buffer_definer;
GRANT SELECT, INSERT, DELETE ON cortex_buffer.checkpoint_mark TO cortex_buffer_definer;
-- The job-token secret: the definer role alone reads it (and makes it, on first use).
GRANT SELECT, INSERT ON cortex_buffer.job_token_key TO cortex_buffer_definer;
-- Push ingestion: the definer role keeps the pushed files and reads the operator's mapping.
GRANT SELECT, INSERT, UPDATE, DELETE ON cortex_buffer.pushed_file TO cortex_buffer_definer;
GRANT SELECT ON cortex_buffer.push_source, cortex_buffer.push_grant TO cortex_buffer_definer;
-- The partitioned layout: the indexer makes partitions ahead of new files, cleanup drops them
-- (both functions run as the extension's owner and touch nothing but those partitions).
GRANT SELECT ON cortex_buffer.event_partitioning TO cortex_buffer_definer;
GRANT EXECUTE ON FUNCTION cortex_buffer.event_partition_create(bigint, bigint), cortex_buffer.event_partition_drop(regclass)
  TO cortex_buffer_definer;
-- job_events runs as the definer role (its owner) and asks authorize_job first.
GRANT EXECUTE ON FUNCTION cortex_buffer.authorize_job(uuid) TO cortex_buffer_definer;

-- Functions: PUBLIC keeps only the pure ones (checkpoint_crc, canonical_json, llm_cost,
-- call_idempotency_key, session_file_refusal) and indexer_worker (the worker's figures). The
-- reset above took EXECUTE from PUBLIC on every function: these get it back.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.checkpoint_crc(jsonb), cortex_buffer.canonical_json(jsonb),
    cortex_buffer.llm_cost(jsonb, text, timestamptz),
    cortex_buffer.call_idempotency_key(uuid, jsonb, integer, text, jsonb),
    cortex_buffer.session_file_refusal(boolean, integer, bigint, bigint, boolean, boolean, boolean, double precision),
    cortex_buffer.indexer_worker()
  TO PUBLIC;
REVOKE ALL ON FUNCTION
    cortex_buffer.write_checkpoint(uuid, jsonb, uuid, boolean), cortex_buffer.read_checkpoint(uuid),
    cortex_buffer.verify_checkpoints(), cortex_buffer.heartbeat(uuid), cortex_buffer.reap_zombies(interval, integer),
    cortex_buffer.reaper_index_sql(), cortex_buffer.idle_paused_jobs(interval),
    cortex_buffer.record_crash(uuid, integer, text, text, integer, text, jsonb), cortex_buffer.retry_decision(uuid),
    cortex_buffer.admit_job(uuid, uuid), cortex_buffer.record_outcome(uuid, uuid, boolean),
    cortex_buffer.circuit_state(uuid), cortex_buffer.record_usage(uuid, text, jsonb, text, timestamptz),
    cortex_buffer.set_budget(uuid, bigint, numeric), cortex_buffer.check_token_budget(uuid),
    cortex_buffer.reserve_budget(uuid, jsonb, text), cortex_buffer.settle_usage(uuid, jsonb, text),
    cortex_buffer.release_reservation(uuid), cortex_buffer.index_sessions(text), cortex_buffer.index_now(),
    cortex_buffer.file_integrity(text), cortex_buffer.job_events(uuid, timestamptz),
    cortex_buffer.recovery_plan(uuid, uuid, boolean), cortex_buffer.session_recovery(text),
    cortex_buffer.session_recovery(uuid), cortex_buffer.agent_state(text), cortex_buffer.agent_state(uuid),
    cortex_buffer.job_timeline(uuid), cortex_buffer.session_usage(text), cortex_buffer.job_usage_from_buffer(uuid),
    cortex_buffer.log_entries(text, text, integer, bigint, bigint), cortex_buffer.check_log_snapshot(text, bigint, bigint, text),
    cortex_buffer.check_binding(), cortex_buffer.install_checkpoint_trigger(), cortex_buffer.clear_quarantine(text),
    cortex_buffer.checkpoint_marked(), cortex_buffer.job_token(uuid), cortex_buffer.authorize_job(uuid),
    cortex_buffer.append_session_bytes(text, text, bigint, bytea, text, boolean, bigint),
    cortex_buffer.pushed_offsets(text), cortex_buffer.await_pushed(uuid, text, bigint, interval),
    cortex_buffer.cleanup_session_buffers(interval, interval, boolean, integer, double precision),
    cortex_buffer.storage_report(), cortex_buffer.oversized_day_start(bigint, timestamptz)
  FROM PUBLIC;

-- Prices are reference data: everyone may read them (llm_cost() runs with the caller's
-- rights). The indexer's status is for monitoring and operators.
GRANT SELECT ON cortex_buffer.model_price TO PUBLIC;
REVOKE ALL ON cortex_buffer.indexer_status FROM PUBLIC;
GRANT SELECT ON cortex_buffer.indexer_status TO pg_monitor, cortex_buffer_operator;

-- cortex_buffer_agent_call (NOLOGIN, no members) is the role an agent's call runs as once its
-- job token checks out: it reads what the lookups read and writes the job table's agent columns.
-- It cannot read the token secret or write the extension's tables (those statements switch to
-- the definer role, as everyone's do), so a bound table's triggers, which run as this role during
-- an agent's call, gain nothing the agent's functions do not already do.
GRANT SELECT, UPDATE (heartbeat_at, checkpoint, checkpoint_crc, tokens_in, tokens_out, cost_usd, llm_call_count)
    ON cortex_buffer.job TO cortex_buffer_agent_call;
GRANT SELECT ON
    cortex_buffer.checkpoint_history, cortex_buffer.checkpoint_mark, cortex_buffer.crash, cortex_buffer.job_wait,
    cortex_buffer.circuit, cortex_buffer.circuit_admission, cortex_buffer.circuit_outcome, cortex_buffer.job_usage,
    cortex_buffer.usage_ledger, cortex_buffer.agent_budget, cortex_buffer.budget_reservation,
    cortex_buffer.session_file, cortex_buffer.event, cortex_buffer.corrupt_line
  TO cortex_buffer_agent_call;

-- The agent: its own job's heartbeat, checkpoints, spend, recovery, timeline, state and events,
-- and nothing else. Each of these functions checks the session's job token (cortex_buffer.job_token)
-- against the job it is asked about, and then runs as cortex_buffer_agent_call: the agent role
-- holds no privilege on any table, the job table included.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.heartbeat(uuid), cortex_buffer.write_checkpoint(uuid, jsonb, uuid, boolean),
    cortex_buffer.read_checkpoint(uuid), cortex_buffer.record_usage(uuid, text, jsonb, text, timestamptz),
    cortex_buffer.check_token_budget(uuid), cortex_buffer.reserve_budget(uuid, jsonb, text),
    cortex_buffer.settle_usage(uuid, jsonb, text), cortex_buffer.release_reservation(uuid),
    cortex_buffer.job_events(uuid, timestamptz), cortex_buffer.recovery_plan(uuid, uuid, boolean),
    cortex_buffer.session_recovery(text), cortex_buffer.session_recovery(uuid),
    cortex_buffer.agent_state(text), cortex_buffer.agent_state(uuid), cortex_buffer.job_timeline(uuid),
    cortex_buffer.job_usage_from_buffer(uuid), cortex_buffer.log_entries(text, text, integer, bigint, bigint),
    cortex_buffer.check_log_snapshot(text, bigint, bigint, text), cortex_buffer.authorize_job(uuid),
    cortex_buffer.await_pushed(uuid, text, bigint, interval)
  TO cortex_buffer_agent;

-- The control plane: dispatching, reaping, retry decisions, breaker admission.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.reap_zombies(interval, integer), cortex_buffer.idle_paused_jobs(interval),
    cortex_buffer.record_crash(uuid, integer, text, text, integer, text, jsonb), cortex_buffer.retry_decision(uuid),
    cortex_buffer.admit_job(uuid, uuid), cortex_buffer.record_outcome(uuid, uuid, boolean),
    cortex_buffer.circuit_state(uuid), cortex_buffer.index_now(), cortex_buffer.recovery_plan(uuid, uuid, boolean),
    cortex_buffer.session_recovery(text), cortex_buffer.session_recovery(uuid), cortex_buffer.agent_state(text),
    cortex_buffer.agent_state(uuid), cortex_buffer.session_usage(text), cortex_buffer.job_usage_from_buffer(uuid),
    cortex_buffer.job_events(uuid, timestamptz), cortex_buffer.job_token(uuid), cortex_buffer.authorize_job(uuid),
    cortex_buffer.await_pushed(uuid, text, bigint, interval)
  TO cortex_buffer_control_plane;
GRANT SELECT, INSERT, UPDATE ON cortex_buffer.job TO cortex_buffer_control_plane;
GRANT SELECT ON cortex_buffer.checkpoint_history, cortex_buffer.checkpoint_mark, cortex_buffer.job_usage,
    cortex_buffer.session_file, cortex_buffer.event
    TO cortex_buffer_control_plane;
GRANT SELECT ON cortex_buffer.job_sessions, cortex_buffer.untrusted_session_files, cortex_buffer.oversized_buffers
  TO cortex_buffer_control_plane;
GRANT EXECUTE ON FUNCTION cortex_buffer.oversized_day_start(bigint, timestamptz) TO cortex_buffer_control_plane;

-- The operator: budgets, prices, breaker configuration, file inspection and transcripts.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.set_budget(uuid, bigint, numeric), cortex_buffer.verify_checkpoints(),
    cortex_buffer.reaper_index_sql(), cortex_buffer.index_sessions(text), cortex_buffer.file_integrity(text),
    cortex_buffer.index_now(), cortex_buffer.job_events(uuid, timestamptz),
    cortex_buffer.recovery_plan(uuid, uuid, boolean), cortex_buffer.session_recovery(text),
    cortex_buffer.session_recovery(uuid), cortex_buffer.agent_state(text), cortex_buffer.agent_state(uuid),
    cortex_buffer.job_timeline(uuid), cortex_buffer.session_usage(text), cortex_buffer.job_usage_from_buffer(uuid),
    cortex_buffer.log_entries(text, text, integer, bigint, bigint), cortex_buffer.check_log_snapshot(text, bigint, bigint, text),
    cortex_buffer.check_binding(), cortex_buffer.install_checkpoint_trigger(), cortex_buffer.clear_quarantine(text),
    cortex_buffer.checkpoint_marked(), cortex_buffer.job_token(uuid), cortex_buffer.authorize_job(uuid)
  TO cortex_buffer_operator;
-- Retention deletes files as the database's operating-system user: the operator's alone
-- (and superusers'). It reads the bound job table as its caller.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.cleanup_session_buffers(interval, interval, boolean, integer, double precision),
    cortex_buffer.storage_report()
  TO cortex_buffer_operator;
GRANT SELECT, INSERT, UPDATE, DELETE ON cortex_buffer.circuit_config, cortex_buffer.model_price TO cortex_buffer_operator;
GRANT SELECT ON
    cortex_buffer.job, cortex_buffer.checkpoint_history, cortex_buffer.checkpoint_mark, cortex_buffer.crash,
    cortex_buffer.job_wait, cortex_buffer.circuit, cortex_buffer.circuit_admission, cortex_buffer.circuit_outcome,
    cortex_buffer.job_usage, cortex_buffer.usage_ledger, cortex_buffer.agent_budget, cortex_buffer.budget_reservation,
    cortex_buffer.session_file, cortex_buffer.event, cortex_buffer.corrupt_line
  TO cortex_buffer_operator;
GRANT SELECT ON cortex_buffer.job_sessions, cortex_buffer.untrusted_session_files, cortex_buffer.oversized_buffers
  TO cortex_buffer_operator;
GRANT EXECUTE ON FUNCTION cortex_buffer.oversized_day_start(bigint, timestamptz) TO cortex_buffer_operator;

-- Push ingestion's mapping is the operator's to edit; the control plane registers a pod's
-- sidecar source and grants it its job at dispatch (and removes both when the job ends).
GRANT SELECT, INSERT, UPDATE, DELETE ON cortex_buffer.push_source, cortex_buffer.push_grant TO cortex_buffer_operator;
GRANT SELECT ON cortex_buffer.pushed_file TO cortex_buffer_operator;
GRANT SELECT, INSERT, DELETE ON cortex_buffer.push_grant TO cortex_buffer_control_plane;
-- A pod's own source only: never one trusted with every job (all_jobs stays false).
GRANT SELECT, DELETE, INSERT (source, login, note) ON cortex_buffer.push_source TO cortex_buffer_control_plane;

-- The pusher (a shipper's login): pushes and reads its own sources' offsets, nothing else. Every
-- statement it causes runs as the definer role once its source and job check out.
GRANT EXECUTE ON FUNCTION
    cortex_buffer.append_session_bytes(text, text, bigint, bytea, text, boolean, bigint),
    cortex_buffer.pushed_offsets(text)
  TO cortex_buffer_pusher;

-- The partitioned layout (partition_events()): each partition of event and corrupt_line has its
-- parent's grants, which the reset above took away (the indexer writes into the partitions
-- directly, as cortex_buffer_definer).
SELECT cortex_buffer.copy_table_grants(i.inhparent::pg_catalog.regclass, i.inhrelid::pg_catalog.regclass)
  FROM pg_catalog.pg_inherits i
 WHERE i.inhparent OPERATOR(pg_catalog.=) ANY (ARRAY['cortex_buffer.event'::pg_catalog.regclass,
                                                   'cortex_buffer.corrupt_line'::pg_catalog.regclass]);
