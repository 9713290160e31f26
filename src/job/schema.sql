-- The default job table: the control plane's job table (its migrations 001, 005, 007, 008 and
-- 025) in the cortex_buffer schema, with the same transition rules. A superuser can bind the
-- functions to another table with cortex_buffer.job_table instead.
CREATE TYPE cortex_buffer.job_status AS ENUM (
    'PENDING', 'SCHEDULED', 'RUNNING', 'WAITING_FOR_APPROVAL', 'COMPLETED',
    'FAILED', 'TIMED_OUT', 'RETRYING', 'DEAD_LETTER'
);
COMMENT ON TYPE cortex_buffer.job_status IS 'The nine job states of the control plane''s job state machine.';

CREATE TABLE cortex_buffer.job (
    id                  uuid PRIMARY KEY DEFAULT pg_catalog.gen_random_uuid(),
    agent_id            uuid NOT NULL,
    session_id          uuid,
    status              cortex_buffer.job_status NOT NULL DEFAULT 'PENDING',
    priority            integer NOT NULL DEFAULT 0,
    payload             jsonb NOT NULL DEFAULT '{}',
    result              jsonb,
    checkpoint          jsonb,
    checkpoint_crc      integer,
    error               jsonb,
    attempt             integer NOT NULL DEFAULT 0,
    max_attempts        integer NOT NULL DEFAULT 3,
    timeout_seconds     integer NOT NULL DEFAULT 300,
    created_at          timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at          timestamptz NOT NULL DEFAULT pg_catalog.now(),
    started_at          timestamptz,
    completed_at        timestamptz,
    heartbeat_at        timestamptz,
    approval_expires_at timestamptz,
    tokens_in           integer NOT NULL DEFAULT 0,
    tokens_out          integer NOT NULL DEFAULT 0,
    cost_usd            numeric(12, 6) NOT NULL DEFAULT 0,
    tool_call_count     integer NOT NULL DEFAULT 0,
    llm_call_count      integer NOT NULL DEFAULT 0,
    parent_job_id       uuid REFERENCES cortex_buffer.job (id) ON DELETE SET NULL,
    delegation_depth    integer NOT NULL DEFAULT 0
);
CREATE INDEX job_agent_idx ON cortex_buffer.job (agent_id);
-- Jobs are data, not configuration: pg_dump must keep them.
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.job', '');

CREATE FUNCTION cortex_buffer.job_set_updated_at() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END
$$;
CREATE TRIGGER job_set_updated_at BEFORE UPDATE ON cortex_buffer.job
    FOR EACH ROW EXECUTE FUNCTION cortex_buffer.job_set_updated_at();

-- Exactly the control plane's validate_job_transition rules (and its message and SQLSTATE
-- P0001), so code written against one table behaves the same on the other.
CREATE FUNCTION cortex_buffer.job_validate_transition() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF OLD.status = NEW.status THEN
        RETURN NEW;
    END IF;
    IF NOT (
        (OLD.status = 'PENDING'              AND NEW.status IN ('SCHEDULED', 'FAILED')) OR
        (OLD.status = 'SCHEDULED'            AND NEW.status IN ('RUNNING', 'FAILED')) OR
        (OLD.status = 'RUNNING'              AND NEW.status IN ('COMPLETED', 'FAILED', 'TIMED_OUT', 'WAITING_FOR_APPROVAL')) OR
        (OLD.status = 'WAITING_FOR_APPROVAL' AND NEW.status IN ('RUNNING', 'FAILED', 'TIMED_OUT')) OR
        (OLD.status = 'FAILED'               AND NEW.status IN ('RETRYING', 'DEAD_LETTER')) OR
        (OLD.status = 'TIMED_OUT'            AND NEW.status IN ('RETRYING', 'DEAD_LETTER')) OR
        (OLD.status = 'RETRYING'             AND NEW.status IN ('SCHEDULED', 'DEAD_LETTER'))
    ) THEN
        RAISE EXCEPTION 'Invalid job transition: % → %', OLD.status, NEW.status
            USING HINT = 'Allowed: PENDING→SCHEDULED|FAILED, SCHEDULED→RUNNING|FAILED, RUNNING→WAITING_FOR_APPROVAL|COMPLETED|FAILED|TIMED_OUT, WAITING_FOR_APPROVAL→RUNNING|FAILED|TIMED_OUT, FAILED|TIMED_OUT→RETRYING|DEAD_LETTER, RETRYING→SCHEDULED|DEAD_LETTER.';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER job_validate_transition BEFORE UPDATE OF status ON cortex_buffer.job
    FOR EACH ROW EXECUTE FUNCTION cortex_buffer.job_validate_transition();

COMMENT ON FUNCTION cortex_buffer.job_set_updated_at() IS 'Trigger function: keeps job.updated_at at the time of the last UPDATE.';
COMMENT ON FUNCTION cortex_buffer.job_validate_transition() IS 'Trigger function: enforces the control plane''s job state transitions.';
COMMENT ON TABLE cortex_buffer.job IS
'The default job table (cortex_buffer.job_table): the control plane''s job columns and transition rules. Dumped by pg_dump.';
COMMENT ON INDEX cortex_buffer.job_agent_idx IS 'Jobs of an agent (circuit breaker, budgets).';
COMMENT ON COLUMN cortex_buffer.job.id IS 'Job id.';
COMMENT ON COLUMN cortex_buffer.job.agent_id IS 'The agent running the job.';
COMMENT ON COLUMN cortex_buffer.job.session_id IS 'The user session the job belongs to, if any.';
COMMENT ON COLUMN cortex_buffer.job.status IS 'State machine state; transitions are checked by job_validate_transition.';
COMMENT ON COLUMN cortex_buffer.job.priority IS 'Queue priority (higher first).';
COMMENT ON COLUMN cortex_buffer.job.payload IS 'The job''s input.';
COMMENT ON COLUMN cortex_buffer.job.result IS 'The job''s output once completed.';
COMMENT ON COLUMN cortex_buffer.job.checkpoint IS 'Current checkpoint document (written by write_checkpoint or the control plane).';
COMMENT ON COLUMN cortex_buffer.job.checkpoint_crc IS 'CRC-32 of the checkpoint''s canonical JSON, stored as its signed 32-bit bit pattern.';
COMMENT ON COLUMN cortex_buffer.job.error IS 'Last error, as JSON.';
COMMENT ON COLUMN cortex_buffer.job.attempt IS 'Attempts started; incremented by the dispatcher at SCHEDULED→RUNNING.';
COMMENT ON COLUMN cortex_buffer.job.max_attempts IS 'Hard limit on attempts.';
COMMENT ON COLUMN cortex_buffer.job.timeout_seconds IS 'Per-attempt timeout.';
COMMENT ON COLUMN cortex_buffer.job.created_at IS 'When the job was created.';
COMMENT ON COLUMN cortex_buffer.job.updated_at IS 'Last UPDATE of the row (maintained by job_set_updated_at).';
COMMENT ON COLUMN cortex_buffer.job.started_at IS 'When the current attempt started running.';
COMMENT ON COLUMN cortex_buffer.job.completed_at IS 'When the job reached a terminal state.';
COMMENT ON COLUMN cortex_buffer.job.heartbeat_at IS 'Last heartbeat of the process running the job.';
COMMENT ON COLUMN cortex_buffer.job.approval_expires_at IS 'Deadline of a pending approval.';
COMMENT ON COLUMN cortex_buffer.job.tokens_in IS 'Input tokens used so far.';
COMMENT ON COLUMN cortex_buffer.job.tokens_out IS 'Output tokens used so far.';
COMMENT ON COLUMN cortex_buffer.job.cost_usd IS 'Cost so far, rounded to 6 decimals (exact totals are kept separately).';
COMMENT ON COLUMN cortex_buffer.job.tool_call_count IS 'Tool calls so far.';
COMMENT ON COLUMN cortex_buffer.job.llm_call_count IS 'LLM calls so far.';
COMMENT ON COLUMN cortex_buffer.job.parent_job_id IS 'The job that delegated this one.';
COMMENT ON COLUMN cortex_buffer.job.delegation_depth IS 'Depth in the delegation tree (0 for top-level jobs).';

-- The secret job tokens are MACs under (job_token()). One row, made on first use; readable by
-- the definer role alone. Dumped, so that a restore keeps the tokens in flight valid.
CREATE TABLE cortex_buffer.job_token_key (
    one        boolean PRIMARY KEY DEFAULT true CHECK (one),
    secret     bytea NOT NULL CHECK (pg_catalog.octet_length(secret) OPERATOR(pg_catalog.>=) 32),
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.job_token_key', '');
COMMENT ON TABLE cortex_buffer.job_token_key IS
'The installation''s job-token secret (one row, made by the first job_token() call): job tokens are HMAC-SHA256 under it. Only cortex_buffer_definer reads it. Deleting the row (a superuser) revokes every token issued; the next job_token() makes a new secret.';
COMMENT ON COLUMN cortex_buffer.job_token_key.one IS 'Always true: the table holds one row.';
COMMENT ON COLUMN cortex_buffer.job_token_key.secret IS '32 bytes from the server''s strong random source.';
COMMENT ON COLUMN cortex_buffer.job_token_key.created_at IS 'When the secret was made.';
