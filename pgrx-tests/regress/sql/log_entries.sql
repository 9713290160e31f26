-- log_entries(path, entry_type, last_n, start_seq, end_seq): a LOG-slice file's entries, and every refusal.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- The fixtures in the index (a pass indexes what is new; the count is the same either way).
SELECT count(*) AS session_files FROM cortex_buffer.index_sessions();
-- Every entry, oldest first; entry is the line without __type__, __seq__ and __ts__.
SELECT * FROM cortex_buffer.log_entries('logs/tools.jsonl');
-- One __type__; the last n; __seq__ in [start_seq, end_seq).
SELECT seq, entry_type, entry FROM cortex_buffer.log_entries('logs/tools.jsonl', 'm:ToolInvoked');
SELECT seq, entry FROM cortex_buffer.log_entries('logs/tools.jsonl', last_n => 2);
SELECT seq, entry FROM cortex_buffer.log_entries('logs/tools.jsonl', 'm:ToolInvoked', 1);
SELECT seq, entry FROM cortex_buffer.log_entries('logs/tools.jsonl', start_seq => 2, end_seq => 3);
SELECT seq, entry FROM cortex_buffer.log_entries('logs/tools.jsonl', start_seq => 2);
SELECT count(*) AS none FROM cortex_buffer.log_entries('logs/tools.jsonl', last_n => 0);
SELECT count(*) AS none FROM cortex_buffer.log_entries('logs/tools.jsonl', 'm:Nothing');
-- A file with a corrupt line, a blank line, a repeated and a falling __seq__: entries as the index holds them.
SELECT seq, entry_type, ts, line_no, entry->>'text' AS text FROM cortex_buffer.log_entries('/tmp/cortex_buffer-regress/sessions/logs/snapshots.jsonl');
SELECT seq, entry->>'text' AS text FROM cortex_buffer.log_entries('logs/snapshots.jsonl', 'a:Note', start_seq => 3, end_seq => 9);
-- Another dialect's file: its lines, without LOG-slice fields.
SELECT seq, entry_type, line_no, entry->>'type' AS type FROM cortex_buffer.log_entries('proj/33333333-3333-4333-8333-333333333333.jsonl');
-- NULL path: 22004. last_n negative: 22023. A relative path with . or ..: 22023.
SELECT * FROM cortex_buffer.log_entries(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.log_entries('logs/tools.jsonl', last_n => -1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.log_entries('logs/../logs/tools.jsonl');
\echo :LAST_ERROR_SQLSTATE
-- Not in the index: 58P01.
SELECT * FROM cortex_buffer.log_entries('logs/nothing.jsonl');
\echo :LAST_ERROR_SQLSTATE
-- Discovered but not indexed yet (simulated; rolled back): 55000.
BEGIN;
UPDATE cortex_buffer.session_file SET generation = 0, indexed_offset = 0 WHERE path = '/tmp/cortex_buffer-regress/sessions/logs/tools.jsonl';
SELECT * FROM cortex_buffer.log_entries('logs/tools.jsonl');
ROLLBACK;
\echo :LAST_ERROR_SQLSTATE
-- The operator may read them; the agent only its own job's files (this one is in no job's directory:
-- 42501); the control plane and strangers not at all (42501).
SET ROLE regress_agent;
SELECT count(*) AS as_agent FROM cortex_buffer.log_entries('logs/tools.jsonl');
RESET ROLE;
SET ROLE regress_operator;
SELECT count(*) AS as_operator FROM cortex_buffer.log_entries('logs/tools.jsonl');
RESET ROLE;
SET ROLE regress_control_plane;
SELECT * FROM cortex_buffer.log_entries('logs/tools.jsonl');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_stranger;
SELECT * FROM cortex_buffer.log_entries('logs/tools.jsonl');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
