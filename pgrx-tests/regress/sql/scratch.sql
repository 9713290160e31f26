\set VERBOSITY default
SELECT regexp_replace(path, '^.*/sessions/', '') AS file, job_dir, dialect, size_bytes, action, detail, events_added, corrupt_added FROM cortex_buffer.index_sessions() ORDER BY path;
SELECT regexp_replace(path, '^.*/sessions/', '') AS file, dialect, job_id, session_ordinal, generation, total_lines, valid_lines, corrupt_lines, blank_lines, tail_state, seq_gaps, seq_resets, foreign_job_lines, trusted, corruption_ratio FROM cortex_buffer.session_file ORDER BY path;
BEGIN;
SELECT * FROM cortex_buffer.index_sessions('/tmp/cortex_buffer-regress');
SELECT count(*) FILTER (WHERE gone_at IS NOT NULL) FROM cortex_buffer.session_file;
ROLLBACK;
SELECT * FROM cortex_buffer.index_sessions('/root');
SELECT * FROM cortex_buffer.index_sessions('/tmp/cortex_buffer-regress/sessions/logs/tools.jsonl');
SELECT * FROM cortex_buffer.indexer_worker();
SELECT * FROM cortex_buffer.indexer_status;
