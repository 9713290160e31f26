-- file_integrity(path): a file's current bytes judged as scanBuffer judges them; stores nothing.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- The fixtures in the index (a pass indexes what is new; the count is the same either way).
SELECT count(*) AS session_files FROM cortex_buffer.index_sessions();
-- A spike session whose writer died mid-line: the truncated tail, one lost event.
SELECT * FROM cortex_buffer.file_integrity('/tmp/cortex_buffer-regress/sessions/0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f/session_20260223T143000Z_pod-a.jsonl');
-- A LOG slice with a corrupt line inside, a blank line, a repeated and a falling __seq__.
SELECT * FROM cortex_buffer.file_integrity('/tmp/cortex_buffer-regress/sessions/logs/snapshots.jsonl');
-- The shipped writer's file, a Claude Code transcript (no seq, no timestamps of the cortex kind), a clean LOG slice.
SELECT total_lines, valid_lines, corrupt_lines, severity, trusted, seq_gaps, seq_resets, dialect, first_ts, last_ts
  FROM cortex_buffer.file_integrity('/tmp/cortex_buffer-regress/sessions/0193a8b2-0000-7000-8000-0000000fa001/session-001.jsonl');
SELECT total_lines, valid_lines, corrupt_lines, severity, trusted, seq_gaps, dialect, first_ts, last_ts
  FROM cortex_buffer.file_integrity('/tmp/cortex_buffer-regress/sessions/proj/22222222-2222-4222-8222-222222222222.jsonl');
SELECT total_lines, valid_lines, severity, trusted, dialect
  FROM cortex_buffer.file_integrity('/tmp/cortex_buffer-regress/sessions/logs/tools.jsonl');
-- trusted while the corruption ratio is within 10 % (1 corrupt line in 12).
SELECT corruption_ratio, trusted FROM cortex_buffer.file_integrity('/tmp/cortex_buffer-regress/sessions/logs/snapshots.jsonl');
-- A last line without a newline: judged as a final line once the file has been quiet for
-- cortex_buffer.settle_period (0 here), pending within it.
SELECT total_lines, valid_lines, tail_truncated, tail_pending, severity
  FROM cortex_buffer.file_integrity('/tmp/cortex_buffer-regress/sessions/proj/33333333-3333-4333-8333-333333333333.jsonl');
SET cortex_buffer.settle_period = 3600000;
SELECT total_lines, valid_lines, tail_truncated, tail_pending, severity
  FROM cortex_buffer.file_integrity('/tmp/cortex_buffer-regress/sessions/proj/33333333-3333-4333-8333-333333333333.jsonl');
RESET cortex_buffer.settle_period;
-- It stores nothing: the index still says what it said.
SELECT tail_state, corrupt_lines FROM cortex_buffer.session_file
 WHERE path = '/tmp/cortex_buffer-regress/sessions/0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f/session_20260223T143000Z_pod-a.jsonl';
-- A file that cannot be read is reported (unreadable), with a NOTICE, not an error.
SELECT * FROM cortex_buffer.file_integrity('/tmp/cortex_buffer-regress/sessions/no-such-job/session-001.jsonl');
SELECT total_lines, severity, trusted FROM cortex_buffer.file_integrity('/tmp/cortex_buffer-regress/sessions/logs');
-- A superuser may judge a file outside sessions_dir (PG_VERSION: one line, not a JSON object).
SELECT total_lines, valid_lines, corrupt_lines, tail_truncated, severity, dialect
  FROM cortex_buffer.file_integrity(current_setting('data_directory') || '/PG_VERSION');
-- Not absolute: 22023.
SELECT * FROM cortex_buffer.file_integrity('logs/tools.jsonl');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.file_integrity('');
\echo :LAST_ERROR_SQLSTATE
-- Strict: NULL returns no row.
SELECT count(*) AS rows_for_null FROM cortex_buffer.file_integrity(NULL);
-- The operator may judge files below sessions_dir; not elsewhere, nor by a .. that leads out (42501, decided from the text).
SET ROLE regress_operator;
SELECT total_lines, severity FROM cortex_buffer.file_integrity('/tmp/cortex_buffer-regress/sessions/logs/tools.jsonl');
SELECT * FROM cortex_buffer.file_integrity('/etc/hostname');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.file_integrity('/tmp/cortex_buffer-regress/sessions/../sessions-elsewhere/x.jsonl');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.file_integrity('/tmp/cortex_buffer-regress/sessions/../../etc/hostname');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.file_integrity('/tmp/no-such-dir/x.jsonl');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- The agent and the control plane may not call it (42501).
SET ROLE regress_agent;
SELECT * FROM cortex_buffer.file_integrity('/tmp/cortex_buffer-regress/sessions/logs/tools.jsonl');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_control_plane;
SELECT * FROM cortex_buffer.file_integrity('/tmp/cortex_buffer-regress/sessions/logs/tools.jsonl');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
