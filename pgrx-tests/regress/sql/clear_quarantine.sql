-- clear_quarantine(path): lets the indexer try a quarantined file again.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SELECT count(*) AS session_files FROM cortex_buffer.index_sessions();
-- A file in the index that is not quarantined: false, nothing changes.
SELECT cortex_buffer.clear_quarantine('logs/tools.jsonl') AS was_quarantined;
-- A quarantined file (as the indexer leaves it after repeated failures): true, and its failure record is cleared.
UPDATE cortex_buffer.session_file SET failures = 5, last_error = 'simulated', last_error_at = '2026-01-01 00:00:00+00',
       quarantined_at = '2026-01-01 00:00:00+00'
 WHERE path = '/tmp/cortex_buffer-regress/sessions/logs/tools.jsonl';
SELECT reason, failures, last_error FROM cortex_buffer.untrusted_session_files WHERE path LIKE '%/logs/tools.jsonl';
SELECT cortex_buffer.clear_quarantine('logs/tools.jsonl') AS was_quarantined;
SELECT failures, last_error, last_error_at, quarantined_at FROM cortex_buffer.session_file
 WHERE path = '/tmp/cortex_buffer-regress/sessions/logs/tools.jsonl';
-- The absolute path (session_file.path) works the same.
UPDATE cortex_buffer.session_file SET quarantined_at = '2026-01-01 00:00:00+00' WHERE path = '/tmp/cortex_buffer-regress/sessions/logs/tools.jsonl';
SELECT cortex_buffer.clear_quarantine('/tmp/cortex_buffer-regress/sessions/logs/tools.jsonl') AS was_quarantined;
-- A path not in the index: 58P01.
SELECT cortex_buffer.clear_quarantine('logs/nothing.jsonl');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.clear_quarantine('/etc/hostname');
\echo :LAST_ERROR_SQLSTATE
-- A relative path with . or .. components, or an empty one: 22023.
SELECT cortex_buffer.clear_quarantine('../sessions/logs/tools.jsonl');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.clear_quarantine('logs/./tools.jsonl');
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.clear_quarantine('');
\echo :LAST_ERROR_SQLSTATE
-- Strict: NULL in, NULL out.
SELECT cortex_buffer.clear_quarantine(NULL) IS NULL AS null_in_null_out;
-- The operator may clear (but not write session_file itself); the control plane and the agent may not (42501).
UPDATE cortex_buffer.session_file SET quarantined_at = '2026-01-01 00:00:00+00' WHERE path = '/tmp/cortex_buffer-regress/sessions/logs/tools.jsonl';
SET ROLE regress_operator;
UPDATE cortex_buffer.session_file SET quarantined_at = NULL WHERE path = '/tmp/cortex_buffer-regress/sessions/logs/tools.jsonl';
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.clear_quarantine('logs/tools.jsonl') AS cleared_by_operator;
RESET ROLE;
SET ROLE regress_control_plane;
SELECT cortex_buffer.clear_quarantine('logs/tools.jsonl');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_agent;
SELECT cortex_buffer.clear_quarantine('logs/tools.jsonl');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT failures, quarantined_at FROM cortex_buffer.session_file WHERE path = '/tmp/cortex_buffer-regress/sessions/logs/tools.jsonl';
