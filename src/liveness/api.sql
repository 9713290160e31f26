-- Liveness's functions (sql.rs defines them): their comments. Grants: sql/privileges.sql.
COMMENT ON FUNCTION cortex_buffer.heartbeat(uuid) IS
'Sets heartbeat_at = now() while the job is RUNNING or WAITING_FOR_APPROVAL and returns true; returns false otherwise (reaped, cancelled or finished: the agent must stop).';
COMMENT ON FUNCTION cortex_buffer.reap_zombies(interval, integer) IS
'Finds RUNNING jobs whose heartbeat is older than stale_after (or that never beat and started or were updated longer ago), and moves each RUNNING -> FAILED -> RETRYING or DEAD_LETTER by retry_decision, merging {reason: zombie, ...} into error and recording a zombie crash. Rows are claimed FOR UPDATE SKIP LOCKED: concurrent callers reap each job once. retry_after is the backoff to re-enqueue with.';
COMMENT ON FUNCTION cortex_buffer.reaper_index_sql() IS
'The CREATE INDEX CONCURRENTLY statement for the reaper''s partial index (heartbeat_at WHERE status = ''RUNNING'') on the bound job table; cortex_buffer.job has it already.';
COMMENT ON FUNCTION cortex_buffer.idle_paused_jobs(interval) IS
'Jobs WAITING_FOR_APPROVAL for longer than idle_after, measured from when heartbeat() first saw them waiting (else updated_at): their pods can be scaled to zero.';
COMMENT ON FUNCTION cortex_buffer.record_crash(uuid, integer, text, text, integer, text, jsonb) IS
'Appends a crash of the job''s current attempt to cortex_buffer.crash (exit 137 = OOM, 143 = clean drain); returns its crash_id.';
COMMENT ON FUNCTION cortex_buffer.retry_decision(uuid) IS
'Spike #34 retry decision: max_attempts (hard stop), token_budget_exhausted, drained (exit 143: immediate), deterministic_crash (same error 3x), persistent_oom, else retry with reduced_footprint (last exit 137) or escalating_backoff; delays 5s, 60s, 300s, 1800s, then dead letter.';
COMMENT ON FUNCTION cortex_buffer.admit_job(uuid, uuid) IS
'Circuit breaker: true while the agent''s breaker is closed; while open, false until the cooldown ends, then true for exactly one canary job (replaced if it does not report within its lease).';
COMMENT ON FUNCTION cortex_buffer.record_outcome(uuid, uuid, boolean) IS
'Reports a job''s outcome to the agent''s circuit breaker (3 failures in 15 minutes open it for 30 by default; only the canary''s outcome closes or re-opens it); returns the breaker''s state.';
COMMENT ON FUNCTION cortex_buffer.circuit_state(uuid) IS
'The agent''s circuit breaker: state (closed, open, half_open), counted failures in the window, and the end of the cooldown while open.';
