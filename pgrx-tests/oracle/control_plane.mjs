// The control plane's side of the recovery kill loop: it stores the job's checkpoint itself, a
// plain UPDATE of the job row (the shipped control plane's way), whenever the pod has reported
// progress, at moments of its own: while the pod writes a line, while a call is open.
//
//   node control_plane.mjs <jobId>
//
// It stores only under the advisory lock the pod holds from a result line to its report
// (pod.mjs), and never a lower step than the one stored: a checkpoint covers exactly what
// finished before it. Runs until killed.
import { createRequire } from "node:module";

const require = createRequire(new URL("../../examples/node/package.json", import.meta.url));
const pg = require("pg");

const [job] = process.argv.slice(2);
const client = new pg.Client();
await client.connect();
const nap = new Int32Array(new SharedArrayBuffer(4));
for (;;) {
  await client.query("BEGIN");
  await client.query("SELECT pg_catalog.pg_advisory_xact_lock(36, pg_catalog.hashtext($1))", [job]);
  const { rows } = await client.query("SELECT done FROM public.pod_progress WHERE job = $1", [job]);
  const done = rows[0]?.done ?? 0;
  const doc = JSON.stringify({ step_index: done, state: { done } });
  await client.query(
    `UPDATE cortex_buffer.job
        SET checkpoint = $2::jsonb,
            checkpoint_crc = cortex_buffer.checkpoint_crc($2::jsonb)::bigint::bit(32)::int
      WHERE id = $1 AND coalesce((checkpoint->>'step_index')::int, -1) < $3`,
    [job, doc, done],
  );
  await client.query("COMMIT");
  // Now and then: often enough to land mid-line and mid-call, seldom enough that calls finish
  // after the checkpoint (a pod's skips).
  Atomics.wait(nap, 0, 0, 5 + Math.floor(Math.random() * 150));
}
