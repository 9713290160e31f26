-- The binding's functions (sql.rs defines them): their comments. Grants: sql/privileges.sql.
COMMENT ON FUNCTION cortex_buffer.check_binding() IS
'What cortex_buffer checks about the job table cortex_buffer.job_table names: job_table (the column contract), reaper_index (an index serving reap_zombies), checkpoint_trigger (checkpoints written by a plain UPDATE get a high-water mark), agent_grants (cortex_buffer_agent_call, which agents'' calls run as, may read the table and write its agent columns). ok, what was found, and the statement that fixes a missing piece.';
COMMENT ON FUNCTION cortex_buffer.install_checkpoint_trigger() IS
'Puts the checkpoint_marked trigger (named cortex_buffer_checkpoint_marked) on the bound job table, once: checkpoints the control plane writes with a plain UPDATE then get their high-water mark. Runs with the caller''s rights: the table''s owner, or a superuser.';
COMMENT ON FUNCTION cortex_buffer.job_token(uuid) IS
'The job token of a job''s current attempt: cbjt1.<job id>.<attempt>.<HMAC-SHA256, hex>. The control plane issues it when it dispatches the job; the pod presents it once per session with set_config(''cortex_buffer.job_token'', $1, false), the token passed as a parameter (a literal SET shows the token in pg_stat_activity), and may then act on that job (and no other) until the job is dispatched again. Control plane and operator only.';
COMMENT ON FUNCTION cortex_buffer.authorize_job(uuid) IS
'True when this session may act on the job: a superuser, a control-plane or operator role, or a session whose cortex_buffer.job_token is the token of the job''s current attempt; 42501 with a HINT otherwise. A pod can call it once at start to check its token; job_events calls it.';
