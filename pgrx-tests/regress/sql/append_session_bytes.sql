-- append_session_bytes, pushed_offsets, await_pushed: push ingestion as a shipper and an agent
-- see it, and every refusal.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
INSERT INTO cortex_buffer.job (id, agent_id, status)
VALUES ('0193a8b2-0000-7000-8000-00000000e001', '00000000-0000-4000-8000-0000000000a4', 'RUNNING');
INSERT INTO cortex_buffer.push_source (source, login) VALUES ('regress-node', current_user);
INSERT INTO cortex_buffer.push_grant (source, job_id) VALUES ('regress-node', '0193a8b2-0000-7000-8000-00000000e001');
-- Two complete lines and half a third: the complete ones are committed, the half is held.
SELECT * FROM cortex_buffer.append_session_bytes('regress-node', '0193a8b2-0000-7000-8000-00000000e001/session-001.jsonl', 0,
    convert_to('{"version":"1.0","timestamp":"2026-03-01T09:00:00.000Z","jobId":"0193a8b2-0000-7000-8000-00000000e001","sequence":0,"type":"SESSION_START","data":{}}' || E'\n'
            || '{"version":"1.0","timestamp":"2026-03-01T09:00:01.000Z","jobId":"0193a8b2-0000-7000-8000-00000000e001","sequence":1,"type":"TOOL_CALL","data":{"type":"tool_use","toolName":"send_email","toolInput":{"to":"a@example.com"}}}' || E'\n'
            || '{"version":"1.0","timestamp":"2026-03-01T09:00:02', 'UTF8'),
    '2049:11:0badcafe');
SELECT relpath, file_identity, committed_offset, held_bytes, head_len, reported_size FROM cortex_buffer.pushed_offsets('regress-node');
-- The same bytes again: nothing changes.
SELECT * FROM cortex_buffer.append_session_bytes('regress-node', '0193a8b2-0000-7000-8000-00000000e001/session-001.jsonl', 0,
    convert_to('{"version":"1.0"', 'UTF8'), '2049:11:0badcafe');
-- The rest of the held line, sent from the committed offset: the held part is skipped.
SELECT committed_offset FROM cortex_buffer.pushed_offsets('regress-node') \gset
SELECT * FROM cortex_buffer.append_session_bytes('regress-node', '0193a8b2-0000-7000-8000-00000000e001/session-001.jsonl', :committed_offset,
    convert_to('{"version":"1.0","timestamp":"2026-03-01T09:00:02.000Z","jobId":"0193a8b2-0000-7000-8000-00000000e001","sequence":2,"type":"TOOL_RESULT","data":{"type":"tool_result","toolName":"send_email","output":"sent","isError":false}}' || E'\n', 'UTF8'),
    '2049:11:0badcafe', file_size => 515);
-- A final push judges a tail as the tailer judges a settled file's: here, none is left.
SELECT * FROM cortex_buffer.append_session_bytes('regress-node', '0193a8b2-0000-7000-8000-00000000e001/session-001.jsonl', 515,
    '\x', '2049:11:0badcafe', true);
-- A rescheduled pod on another node starts at session-001 again: another file, after the first.
SELECT * FROM cortex_buffer.append_session_bytes('regress-node', '0193a8b2-0000-7000-8000-00000000e001/session-001.jsonl', 0,
    convert_to('{"version":"1.0","timestamp":"2026-03-01T10:00:00.000Z","jobId":"0193a8b2-0000-7000-8000-00000000e001","sequence":0,"type":"SESSION_START","data":{}}' || E'\n', 'UTF8'),
    '2050:99:feedf00d');
SELECT f.path, p.n, p.identity, f.valid_lines, f.indexed_offset, f.dialect
  FROM cortex_buffer.pushed_file p JOIN cortex_buffer.session_file f USING (file_id) ORDER BY p.n, f.path COLLATE "C";
SELECT e.line_no, e.type, e.tool_name, e.seq FROM cortex_buffer.job_events('0193a8b2-0000-7000-8000-00000000e001') e;
-- The agent's flush before a checkpoint: the server has 515 bytes of the first file's relpath
-- (the latest file under it is the second, of 153).
SELECT cortex_buffer.await_pushed('0193a8b2-0000-7000-8000-00000000e001', '0193a8b2-0000-7000-8000-00000000e001/session-001.jsonl', 153, '0') AS has_153;
SELECT cortex_buffer.await_pushed('0193a8b2-0000-7000-8000-00000000e001', '0193a8b2-0000-7000-8000-00000000e001/session-001.jsonl', 900, '10 ms') AS has_900;
-- Refusals: a gap (the expected offset in the DETAIL), NULLs, malformed arguments, a chunk over
-- the limit, an unknown source, a job the source may not write.
SELECT * FROM cortex_buffer.append_session_bytes('regress-node', '0193a8b2-0000-7000-8000-00000000e001/session-001.jsonl', 9999, '\x7b7d0a', '2050:99:feedf00d');
SELECT * FROM cortex_buffer.append_session_bytes(NULL, '0193a8b2-0000-7000-8000-00000000e001/session-001.jsonl', 0, '\x', 'i');
SELECT * FROM cortex_buffer.append_session_bytes('regress-node', '0193a8b2-0000-7000-8000-00000000e001/session-001.jsonl', 0, NULL, 'i');
SELECT * FROM cortex_buffer.append_session_bytes('regress-node', '../../etc/passwd', 0, '\x', 'i');
SELECT * FROM cortex_buffer.append_session_bytes('regress-node', 'not-a-job/session-001.jsonl', 0, '\x', 'i');
SELECT * FROM cortex_buffer.append_session_bytes('regress-node', '0193a8b2-0000-7000-8000-00000000e001/notes.txt', 0, '\x', 'i');
SELECT * FROM cortex_buffer.append_session_bytes('regress-node', '0193a8b2-0000-7000-8000-00000000e001/session-001.jsonl', -1, '\x', 'i');
SELECT * FROM cortex_buffer.append_session_bytes('bad source', '0193a8b2-0000-7000-8000-00000000e001/session-001.jsonl', 0, '\x', 'i');
SELECT * FROM cortex_buffer.append_session_bytes('regress-node', '0193a8b2-0000-7000-8000-00000000e001/session-001.jsonl', 0, '\x', 'has space');
-- A chunk over 4 MiB: 54000.
SELECT * FROM cortex_buffer.append_session_bytes('regress-node', '0193a8b2-0000-7000-8000-00000000e001/session-001.jsonl', 0, ('\x' || repeat('41', 4 * 1024 * 1024 + 1))::bytea, 'i');
SELECT * FROM cortex_buffer.append_session_bytes('nobody', '0193a8b2-0000-7000-8000-00000000e001/session-001.jsonl', 0, '\x', 'i');
SELECT * FROM cortex_buffer.append_session_bytes('regress-node', '0193a8b2-0000-7000-8000-00000000e0ff/session-001.jsonl', 0, '\x', 'i');
SELECT * FROM cortex_buffer.pushed_offsets('nobody');
SELECT * FROM cortex_buffer.pushed_offsets(NULL);
SELECT cortex_buffer.await_pushed(NULL, '0193a8b2-0000-7000-8000-00000000e001/session-001.jsonl', 1);
SELECT cortex_buffer.await_pushed('0193a8b2-0000-7000-8000-00000000e001', '0193a8b2-0000-7000-8000-00000000e0ff/session-001.jsonl', 1);
SELECT cortex_buffer.await_pushed('0193a8b2-0000-7000-8000-00000000e001', '0193a8b2-0000-7000-8000-00000000e001/session-001.jsonl', 1, '2 hours');
-- The pusher role pushes and reads nothing; another role may not push at all.
SET ROLE regress_agent;
SELECT * FROM cortex_buffer.pushed_offsets('regress-node');
RESET ROLE;
