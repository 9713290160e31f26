-- check_log_snapshot(path, last_seq, entry_count, entry_type): whether a snapshot's file reference still agrees.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- The fixtures in the index (a pass indexes what is new; the count is the same either way).
SELECT count(*) AS session_files FROM cortex_buffer.index_sessions();
-- logs/snapshots.jsonl: a:Note 1, a:Note 2, a corrupt line, b:Other 3, a:Note 4, a:Note 4 again, a:Note 3,
-- a blank line, a:Note 8, c:Tail 9 … 12.
-- Agrees, with the entries written since.
SELECT * FROM cortex_buffer.check_log_snapshot('logs/snapshots.jsonl', 2, 2, 'a:Note');
SELECT agrees, reason, detail, entries, entries_through_last_seq, max_seq FROM cortex_buffer.check_log_snapshot('logs/tools.jsonl', 3, 3);
-- A snapshot that had no entries (NULL last_seq) agrees when it recorded none.
SELECT agrees, reason, detail, entries FROM cortex_buffer.check_log_snapshot('logs/snapshots.jsonl', NULL, 0, 'z:Never');
-- ... and not when it recorded some: last_seq_missing.
SELECT agrees, reason, detail FROM cortex_buffer.check_log_snapshot('logs/snapshots.jsonl', NULL, 1, 'a:Note');
-- The entry with last_seq is not there: last_seq_missing; or there are fewer entries than recorded: fewer_entries.
SELECT agrees, reason, detail FROM cortex_buffer.check_log_snapshot('logs/snapshots.jsonl', 5, 3, 'a:Note');
SELECT agrees, reason, detail FROM cortex_buffer.check_log_snapshot('logs/snapshots.jsonl', 99, 50);
-- Two entries carry last_seq: last_seq_repeated.
SELECT agrees, reason, detail FROM cortex_buffer.check_log_snapshot('logs/snapshots.jsonl', 4, 3, 'a:Note');
-- __seq__ falls before the snapshot's last entry: seq_not_increasing.
SELECT agrees, reason, detail FROM cortex_buffer.check_log_snapshot('logs/snapshots.jsonl', 8, 6, 'a:Note');
-- A corrupt line below the snapshot's last entry: corrupt_below.
SELECT agrees, reason, detail FROM cortex_buffer.check_log_snapshot('logs/snapshots.jsonl', 3, 1, 'b:Other');
-- Entries added or lost below it: count_mismatch.
SELECT agrees, reason, detail FROM cortex_buffer.check_log_snapshot('logs/snapshots.jsonl', 2, 1, 'a:Note');
-- Every entry type at once (no entry_type).
SELECT agrees, reason, entries, entries_through_last_seq, max_seq, generation, unindexed_bytes
  FROM cortex_buffer.check_log_snapshot('logs/snapshots.jsonl', 2, 2);
-- NULL path or entry_count: 22004. entry_count negative: 22023. A relative path with . or ..: 22023.
SELECT * FROM cortex_buffer.check_log_snapshot(NULL, 1, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.check_log_snapshot('logs/tools.jsonl', 2, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.check_log_snapshot('logs/tools.jsonl', 2, -1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cortex_buffer.check_log_snapshot('./logs/tools.jsonl', 2, 2);
\echo :LAST_ERROR_SQLSTATE
-- Not in the index: 58P01.
SELECT * FROM cortex_buffer.check_log_snapshot('logs/nothing.jsonl', 2, 2);
\echo :LAST_ERROR_SQLSTATE
-- Discovered but not indexed yet (simulated; rolled back): 55000.
BEGIN;
UPDATE cortex_buffer.session_file SET generation = 0, indexed_offset = 0 WHERE path = '/tmp/cortex_buffer-regress/sessions/logs/tools.jsonl';
SELECT * FROM cortex_buffer.check_log_snapshot('logs/tools.jsonl', 2, 2);
ROLLBACK;
\echo :LAST_ERROR_SQLSTATE
-- The agent is granted it for its own job's files only: this one is in no job's directory (42501).
SET ROLE regress_agent;
\set VERBOSITY terse
SELECT agrees AS as_agent FROM cortex_buffer.check_log_snapshot('logs/tools.jsonl', 2, 2);
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
SELECT has_function_privilege('regress_agent', 'cortex_buffer.check_log_snapshot(text, bigint, bigint, text)', 'EXECUTE') AS agent_may_execute,
       has_table_privilege('regress_agent', 'cortex_buffer.corrupt_line', 'SELECT') AS agent_may_read_corrupt_line;
RESET ROLE;
-- The operator may check; the control plane and strangers may not (42501).
SET ROLE regress_operator;
SELECT agrees AS as_operator FROM cortex_buffer.check_log_snapshot('logs/tools.jsonl', 2, 2);
RESET ROLE;
SET ROLE regress_control_plane;
SELECT * FROM cortex_buffer.check_log_snapshot('logs/tools.jsonl', 2, 2);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_stranger;
SELECT * FROM cortex_buffer.check_log_snapshot('logs/tools.jsonl', 2, 2);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
