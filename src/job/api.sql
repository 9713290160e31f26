-- The binding's functions (sql.rs defines them): their comments. Grants: sql/privileges.sql.
COMMENT ON FUNCTION cortex_buffer.check_binding() IS
'What cortex_buffer checks about the job table cortex_buffer.job_table names: job_table (the column contract), reaper_index (an index serving reap_zombies), checkpoint_trigger (checkpoints written by a plain UPDATE get a high-water mark). ok, what was found, and the statement that fixes a missing piece.';
COMMENT ON FUNCTION cortex_buffer.install_checkpoint_trigger() IS
'Puts the checkpoint_marked trigger (named cortex_buffer_checkpoint_marked) on the bound job table, once: checkpoints the control plane writes with a plain UPDATE then get their high-water mark. Runs with the caller''s rights: the table''s owner, or a superuser.';
