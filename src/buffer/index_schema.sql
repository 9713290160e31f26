-- Event indexing: the events and corrupt lines themselves.

-- One row per line that is an event. Rows of a file beyond its indexed_offset never exist once
-- an indexing transaction commits.
CREATE TABLE cortex_buffer.event (
    file_id            bigint NOT NULL,
    byte_offset        bigint NOT NULL,
    line_no            bigint NOT NULL,
    type               text,
    ts                 timestamptz,
    job_id             uuid,
    session_id         text,
    agent_id           text,
    seq                bigint,
    step_index         integer,
    invocation_id      text COLLATE "C",
    tool_name          text,
    checkpoint_id      text,
    success            boolean,
    input_tokens       bigint,
    output_tokens      bigint,
    cache_write_tokens bigint,
    cache_read_tokens  bigint,
    request_id         text,
    payload            jsonb,
    payload_problem    text,
    PRIMARY KEY (file_id, byte_offset)
);
CREATE INDEX event_job_ts_idx ON cortex_buffer.event (job_id, ts);
CREATE INDEX event_invocation_idx ON cortex_buffer.event (invocation_id) WHERE invocation_id IS NOT NULL;
-- Recovery's markers: a file's last checkpoint marker and first CHECKPOINT_LOADED in one probe
-- each, however long the file (only these lines have entries).
CREATE INDEX event_marker_idx ON cortex_buffer.event (file_id, byte_offset)
    WHERE type OPERATOR(pg_catalog.=) ANY (ARRAY['CHECKPOINT_WRITTEN', 'CHECKPOINT', 'CHECKPOINT_LOADED']);

CREATE TABLE cortex_buffer.corrupt_line (
    file_id     bigint NOT NULL,
    byte_offset bigint NOT NULL,
    line_no     bigint NOT NULL,
    preview     text NOT NULL,
    reason      text NOT NULL,
    PRIMARY KEY (file_id, byte_offset)
);

-- Deleting a session_file row deletes its events and corrupt lines. (A trigger, not foreign
-- keys: a foreign key would check every one of the millions of inserted rows.)
CREATE FUNCTION cortex_buffer.session_file_delete_rows() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM cortex_buffer.event e USING old_rows o WHERE e.file_id = o.file_id;
    DELETE FROM cortex_buffer.corrupt_line c USING old_rows o WHERE c.file_id = o.file_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER session_file_delete_rows AFTER DELETE ON cortex_buffer.session_file
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION cortex_buffer.session_file_delete_rows();
COMMENT ON FUNCTION cortex_buffer.session_file_delete_rows() IS 'Trigger: deletes the events and corrupt lines of deleted session_file rows.';
COMMENT ON TRIGGER session_file_delete_rows ON cortex_buffer.session_file IS 'A deleted session file takes its events and corrupt lines with it.';

-- Transcripts: no PUBLIC access (the schema's default), dumped with the data.
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.event', '');
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.corrupt_line', '');


COMMENT ON TABLE cortex_buffer.event IS
'One row per session-file line that is an event (cortex dialects: an object with type and timestamp; Claude Code and wink: an object), with dialect-normalised columns and the line as jsonb. Written by the indexer exactly once per (file_id, byte_offset).';
COMMENT ON COLUMN cortex_buffer.event.file_id IS 'The session file (session_file.file_id; deleting that row deletes this one).';
COMMENT ON COLUMN cortex_buffer.event.byte_offset IS 'Where the line starts in the file (events are keyed by offset: a writer restart reuses seq numbers).';
COMMENT ON COLUMN cortex_buffer.event.line_no IS 'Line number in the file, from 1.';
COMMENT ON COLUMN cortex_buffer.event.type IS 'Event type as written (type, or __type__ for wink logs).';
COMMENT ON COLUMN cortex_buffer.event.ts IS 'The event''s timestamp (timestamp or __ts__), if it is an ISO 8601 time.';
COMMENT ON COLUMN cortex_buffer.event.job_id IS 'The job the line itself names (job_id / jobId), never taken from its directory; see session_file.job_id and foreign_job_lines.';
COMMENT ON COLUMN cortex_buffer.event.session_id IS 'session_id / sessionId.';
COMMENT ON COLUMN cortex_buffer.event.agent_id IS 'agent_id / agentId.';
COMMENT ON COLUMN cortex_buffer.event.seq IS 'seq / sequence / __seq__.';
COMMENT ON COLUMN cortex_buffer.event.step_index IS 'step_index / data.stepIndex.';
COMMENT ON COLUMN cortex_buffer.event.invocation_id IS 'Tool invocation: invocation_id, data.toolCallId, or the first tool_use id / tool_result tool_use_id of a Claude Code message.';
COMMENT ON COLUMN cortex_buffer.event.tool_name IS 'tool_name / data.toolName / tool_use name.';
COMMENT ON COLUMN cortex_buffer.event.checkpoint_id IS 'checkpoint_id / data.checkpointId.';
COMMENT ON COLUMN cortex_buffer.event.success IS 'Tool outcome: success, not data.isError, not tool_result.is_error.';
COMMENT ON COLUMN cortex_buffer.event.input_tokens IS 'Uncached input tokens (prompt_tokens, tokenUsage, message.usage).';
COMMENT ON COLUMN cortex_buffer.event.output_tokens IS 'Output tokens.';
COMMENT ON COLUMN cortex_buffer.event.cache_write_tokens IS 'Cache-write tokens.';
COMMENT ON COLUMN cortex_buffer.event.cache_read_tokens IS 'Cache-read tokens.';
COMMENT ON COLUMN cortex_buffer.event.request_id IS 'Claude Code requestId (lines of one API response share it).';
COMMENT ON COLUMN cortex_buffer.event.payload IS 'The whole line as jsonb; NULL when it is not stored (see payload_problem).';
COMMENT ON COLUMN cortex_buffer.event.payload_problem IS 'Why payload is NULL, or how it differs from the line''s bytes: jsonb cannot store it (\u0000, a lone surrogate, nesting deeper than 1000, a number beyond numeric), converting it would take more than cortex_buffer.max_line_memory, or invalid UTF-8 replaced by U+FFFD. Reasons are joined with "; ".';
COMMENT ON INDEX cortex_buffer.event_job_ts_idx IS 'A job''s events by time (WHERE job_id = ... AND ts > ...).';
COMMENT ON INDEX cortex_buffer.event_marker_idx IS 'Checkpoint markers and loads by file and offset: recovery_plan finds a file''s last marker and first CHECKPOINT_LOADED with one probe each.';
COMMENT ON INDEX cortex_buffer.event_invocation_idx IS 'Finds a tool invocation''s start and result (byte-wise collation: ids are compared, never sorted for people).';

COMMENT ON TABLE cortex_buffer.corrupt_line IS
'One row per session-file line that is not an event: unparseable (the truncated tail among them), valid JSON that does not qualify, or longer than cortex_buffer.max_line_bytes.';
COMMENT ON COLUMN cortex_buffer.corrupt_line.file_id IS 'The session file.';
COMMENT ON COLUMN cortex_buffer.corrupt_line.byte_offset IS 'Where the line starts.';
COMMENT ON COLUMN cortex_buffer.corrupt_line.line_no IS 'Line number, from 1.';
COMMENT ON COLUMN cortex_buffer.corrupt_line.preview IS 'The first 200 characters (invalid UTF-8 shown as U+FFFD).';
COMMENT ON COLUMN cortex_buffer.corrupt_line.reason IS 'Why the line is not an event.';
