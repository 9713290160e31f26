-- index_sessions(dir): one synchronous pass over sessions_dir (or dir), its actions, and every refusal.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- Make sure every fixture is indexed (a file new to this pass would say new; the count is the same).
SELECT count(*) AS session_files FROM cortex_buffer.index_sessions();
-- A second pass: every file unchanged, nothing added.
SELECT regexp_replace(path, '^/tmp/cortex_buffer-regress/sessions/', '') AS file, job_dir, dialect, size_bytes, action, detail,
       events_added, corrupt_added
  FROM cortex_buffer.index_sessions() ORDER BY path;
-- What the index holds for them.
SELECT regexp_replace(path, '^/tmp/cortex_buffer-regress/sessions/', '') AS file, dialect, job_id, generation, total_lines, valid_lines,
       corrupt_lines, blank_lines, tail_state, seq_gaps, seq_resets, foreign_job_lines, trusted, round(corruption_ratio::numeric, 4) AS ratio
  FROM cortex_buffer.session_file ORDER BY path;
-- A file the index holds but the directory no longer has: gone (its rows are kept).
INSERT INTO cortex_buffer.session_file (path, job_dir, dialect, size_bytes, mtime, device, inode, job_id, indexed_offset, generation)
VALUES ('/tmp/cortex_buffer-regress/sessions/0193a8b2-0000-7000-8000-0000000f1701/session-001.jsonl',
        '0193a8b2-0000-7000-8000-0000000f1701', 'cortex-plane', 10, '2026-01-01 00:00:00+00', 0, 0,
        '0193a8b2-0000-7000-8000-0000000f1701', 10, 1);
SELECT regexp_replace(path, '^/tmp/cortex_buffer-regress/sessions/', '') AS file, job_dir, action, detail, events_added
  FROM cortex_buffer.index_sessions() WHERE action <> 'unchanged';
SELECT gone_at IS NOT NULL AS gone FROM cortex_buffer.session_file
 WHERE path = '/tmp/cortex_buffer-regress/sessions/0193a8b2-0000-7000-8000-0000000f1701/session-001.jsonl';
-- A file whose size on record no longer matches: changed (checked again; nothing new, the same generation).
UPDATE cortex_buffer.session_file SET size_bytes = 1 WHERE path = '/tmp/cortex_buffer-regress/sessions/logs/tools.jsonl';
SELECT regexp_replace(path, '^/tmp/cortex_buffer-regress/sessions/', '') AS file, action, detail, events_added, corrupt_added
  FROM cortex_buffer.index_sessions() WHERE action <> 'unchanged';
SELECT valid_lines, generation, indexed_offset = size_bytes AS fully_indexed FROM cortex_buffer.session_file WHERE path = '/tmp/cortex_buffer-regress/sessions/logs/tools.jsonl';
-- A superuser may pass another directory: the parent of sessions_dir holds no <dir>/<file>.jsonl of its own.
BEGIN;
SELECT * FROM cortex_buffer.index_sessions('/tmp/cortex_buffer-regress');
SELECT count(*) AS marked_gone FROM cortex_buffer.session_file WHERE gone_at IS NOT NULL AND path NOT LIKE '%0000000f1701%';
ROLLBACK;
-- The directory is not absolute, or not a directory: 22023.
SELECT * FROM cortex_buffer.index_sessions('relative/path');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.index_sessions('');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.index_sessions('/tmp/cortex_buffer-regress/sessions/logs/tools.jsonl');
\echo :LAST_ERROR_SQLSTATE
-- It does not exist: 58P01.
SELECT * FROM cortex_buffer.index_sessions('/nonexistent/cortex_buffer');
\echo :LAST_ERROR_SQLSTATE
-- The server's OS user may not read it: 42501.
SELECT * FROM cortex_buffer.index_sessions('/root');
\echo :LAST_ERROR_SQLSTATE
-- NULL is sessions_dir.
SELECT count(*) AS session_files FROM cortex_buffer.index_sessions(NULL);
-- The operator may run a pass, but not name a directory (42501); the agent and the control plane may not run it.
SET ROLE regress_operator;
SELECT count(*) AS session_files FROM cortex_buffer.index_sessions();
SELECT * FROM cortex_buffer.index_sessions('/tmp/cortex_buffer-regress/sessions');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_agent;
SELECT * FROM cortex_buffer.index_sessions();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_control_plane;
SELECT * FROM cortex_buffer.index_sessions();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Clean up.
DELETE FROM cortex_buffer.session_file WHERE job_id = '0193a8b2-0000-7000-8000-0000000f1701';
