-- cleanup_session_buffers, storage_report: what a dry run says of the regression volume, and
-- every refusal. (Real deletions, the crash at each step and the constructed tree with every
-- job state are in pgrx-tests/tests/retention.rs: a golden file must not delete its fixtures.)
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- The volume as the earlier tests left it: everything is young, so the defaults delete no file.
SELECT action, replace(path, '/tmp/cortex_buffer-regress/sessions/', '') AS path, job_status, files, reason
  FROM cortex_buffer.cleanup_session_buffers(dry_run => true, max_unknown_ratio => 1)
 WHERE action <> 'delete_rows'
 ORDER BY path, action;
-- With no age allowed, every file goes but those a live job's recovery plan reads (a dry run).
SELECT action, replace(path, '/tmp/cortex_buffer-regress/sessions/', '') AS path, job_status, files, rows_deleted > 0 AS has_rows,
       reason
  FROM cortex_buffer.cleanup_session_buffers(post_terminal => '0', max_file_age => '0', dry_run => true, max_unknown_ratio => 1)
 WHERE action <> 'delete_rows'
 ORDER BY path, action;
-- The dry run changed nothing.
SELECT count(*) > 0 AS files_still_indexed FROM cortex_buffer.session_file WHERE path LIKE '/tmp/cortex_buffer-regress/sessions/%';
-- What the volume and the index hold, by job state and age.
SELECT job_state, age, files, next_cleanup_files FROM cortex_buffer.storage_report() ORDER BY job_state, age;
-- Arguments out of range: 22023.
SELECT * FROM cortex_buffer.cleanup_session_buffers(post_terminal => '-1 hour');
SELECT * FROM cortex_buffer.cleanup_session_buffers(max_file_age => '-1 day');
SELECT * FROM cortex_buffer.cleanup_session_buffers(max_dirs => 0);
SELECT * FROM cortex_buffer.cleanup_session_buffers(max_unknown_ratio => 2);
-- Inside a subtransaction a real run is refused (its rollback would keep rows of deleted files): 55000.
DO $$ BEGIN PERFORM * FROM cortex_buffer.cleanup_session_buffers(max_unknown_ratio => 1);
EXCEPTION WHEN division_by_zero THEN NULL; END $$;
-- Only the operator (and superusers) may call either.
SET ROLE regress_stranger;
SELECT * FROM cortex_buffer.cleanup_session_buffers(dry_run => true);
SELECT * FROM cortex_buffer.storage_report();
RESET ROLE;
SET ROLE regress_operator;
SELECT count(*) >= 0 AS ran FROM cortex_buffer.cleanup_session_buffers(dry_run => true, max_unknown_ratio => 1);
RESET ROLE;
