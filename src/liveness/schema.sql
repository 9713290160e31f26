-- Job liveness: crash records, when paused jobs were first seen waiting, and the per-agent
-- circuit breaker.

-- Every crash the control plane records, and every zombie the reaper finds (retry decisions
-- read this history). Data: pg_dump keeps it.
CREATE SEQUENCE cortex_buffer.crash_seq;
CREATE TABLE cortex_buffer.crash (
    crash_id        bigint PRIMARY KEY DEFAULT pg_catalog.nextval('cortex_buffer.crash_seq'::pg_catalog.regclass),
    job_id          uuid NOT NULL,
    agent_id        uuid,
    attempt         integer,
    reason          text NOT NULL CHECK (reason OPERATOR(pg_catalog.=) ANY (ARRAY['crash', 'zombie'])),
    exit_code       integer,
    error_message   text,
    lifecycle_state text,
    step_index      integer,
    last_tool       text,
    tokens          jsonb,
    recorded_at     timestamptz NOT NULL DEFAULT pg_catalog.now()
);
ALTER SEQUENCE cortex_buffer.crash_seq OWNED BY cortex_buffer.crash.crash_id;
CREATE INDEX crash_job_idx ON cortex_buffer.crash (job_id, crash_id);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.crash', '');
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.crash_seq', '');

-- When heartbeat() first saw a job in WAITING_FOR_APPROVAL (updated_at moves on every beat).
CREATE TABLE cortex_buffer.job_wait (
    job_id        uuid PRIMARY KEY,
    waiting_since timestamptz NOT NULL
);

-- Circuit breaker parameters per agent; agents without a row use the defaults below.
-- Operator-edited: pg_dump keeps it.
CREATE TABLE cortex_buffer.circuit_config (
    agent_id          uuid PRIMARY KEY,
    failure_threshold integer NOT NULL DEFAULT 3 CHECK (failure_threshold OPERATOR(pg_catalog.>) 0),
    failure_window    interval NOT NULL DEFAULT '15 minutes' CHECK (failure_window OPERATOR(pg_catalog.>) '0'),
    cooldown          interval NOT NULL DEFAULT '30 minutes' CHECK (cooldown OPERATOR(pg_catalog.>) '0'),
    canary_lease      interval NOT NULL DEFAULT '10 minutes' CHECK (canary_lease OPERATOR(pg_catalog.>) '0')
);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.circuit_config', '');

-- Breaker state per agent ("half-open" is an open breaker past open_until).
CREATE TABLE cortex_buffer.circuit (
    agent_id           uuid PRIMARY KEY,
    open               boolean NOT NULL DEFAULT false,
    closed_since       timestamptz NOT NULL DEFAULT pg_catalog.now(),
    open_until         timestamptz,
    canary_job_id      uuid,
    canary_lease_until timestamptz,
    trips              integer NOT NULL DEFAULT 0,
    updated_at         timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.circuit', '');

-- Jobs admit_job let through, until their outcome is recorded.
CREATE TABLE cortex_buffer.circuit_admission (
    job_id      uuid PRIMARY KEY,
    agent_id    uuid NOT NULL,
    admitted_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    canary      boolean NOT NULL DEFAULT false
);

-- Recent outcomes (kept for the failure window); `counted` ones can trip the breaker.
CREATE TABLE cortex_buffer.circuit_outcome (
    outcome_id  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    agent_id    uuid NOT NULL,
    job_id      uuid NOT NULL,
    success     boolean NOT NULL,
    counted     boolean NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE INDEX circuit_outcome_agent_idx ON cortex_buffer.circuit_outcome (agent_id, recorded_at);

-- The zombie reaper's index: only RUNNING jobs, ordered by heartbeat, so its cost follows the
-- number of stale jobs, not the table. reap_zombies() uses this exact predicate.
CREATE INDEX job_running_heartbeat_idx ON cortex_buffer.job (heartbeat_at) WHERE status OPERATOR(pg_catalog.=) 'RUNNING';
-- idle_paused_jobs(): only paused jobs.
CREATE INDEX job_waiting_idx ON cortex_buffer.job (updated_at) WHERE status OPERATOR(pg_catalog.=) 'WAITING_FOR_APPROVAL';

COMMENT ON SEQUENCE cortex_buffer.crash_seq IS 'Ids of crash rows (larger is newer).';
COMMENT ON TABLE cortex_buffer.crash IS
'Crashes recorded by record_crash() and zombies found by reap_zombies(), oldest first per job: the history retry_decision() classifies.';
COMMENT ON INDEX cortex_buffer.crash_job_idx IS 'A job''s crash history in order.';
COMMENT ON COLUMN cortex_buffer.crash.crash_id IS 'Record order.';
COMMENT ON COLUMN cortex_buffer.crash.job_id IS 'The job that crashed.';
COMMENT ON COLUMN cortex_buffer.crash.agent_id IS 'The job''s agent when recorded.';
COMMENT ON COLUMN cortex_buffer.crash.attempt IS 'The job''s attempt when recorded.';
COMMENT ON COLUMN cortex_buffer.crash.reason IS 'crash (reported by the control plane) or zombie (found by the reaper: no heartbeat).';
COMMENT ON COLUMN cortex_buffer.crash.exit_code IS 'Process exit code: 137 OOM kill, 143 clean drain (SIGTERM), 1 unhandled exception; NULL for zombies.';
COMMENT ON COLUMN cortex_buffer.crash.error_message IS 'The error message; equal messages on 3 consecutive failures make a deterministic crash. NULL for zombies.';
COMMENT ON COLUMN cortex_buffer.crash.lifecycle_state IS 'The agent''s lifecycle state at the crash (BOOTING, HYDRATING, READY, EXECUTING, DRAINING...).';
COMMENT ON COLUMN cortex_buffer.crash.step_index IS 'The step executing when it crashed.';
COMMENT ON COLUMN cortex_buffer.crash.last_tool IS 'The last tool called before the crash.';
COMMENT ON COLUMN cortex_buffer.crash.tokens IS 'Tokens consumed in the crashed attempt, as reported.';
COMMENT ON COLUMN cortex_buffer.crash.recorded_at IS 'When it was recorded.';
COMMENT ON TABLE cortex_buffer.job_wait IS
'When heartbeat() first saw a job WAITING_FOR_APPROVAL; idle_paused_jobs() measures idleness from it (updated_at moves on every heartbeat).';
COMMENT ON COLUMN cortex_buffer.job_wait.job_id IS 'The paused job.';
COMMENT ON COLUMN cortex_buffer.job_wait.waiting_since IS 'First heartbeat seen while waiting.';
COMMENT ON TABLE cortex_buffer.circuit_config IS
'Per-agent circuit breaker parameters (agents without a row use the column defaults: 3 failures in 15 minutes open it for 30 minutes; a canary has 10 minutes to report). Dumped by pg_dump.';
COMMENT ON COLUMN cortex_buffer.circuit_config.agent_id IS 'The agent.';
COMMENT ON COLUMN cortex_buffer.circuit_config.failure_threshold IS 'Failures within failure_window that open the breaker.';
COMMENT ON COLUMN cortex_buffer.circuit_config.failure_window IS 'How far back failures are counted.';
COMMENT ON COLUMN cortex_buffer.circuit_config.cooldown IS 'How long the breaker stays open before one canary job is admitted.';
COMMENT ON COLUMN cortex_buffer.circuit_config.canary_lease IS 'How long a canary may run without reporting before another job replaces it.';
COMMENT ON TABLE cortex_buffer.circuit IS 'Circuit breaker state per agent (rows appear on first use).';
COMMENT ON COLUMN cortex_buffer.circuit.agent_id IS 'The agent.';
COMMENT ON COLUMN cortex_buffer.circuit.open IS 'Tripped; half-open once now() >= open_until.';
COMMENT ON COLUMN cortex_buffer.circuit.closed_since IS 'When the breaker last closed: failures of jobs admitted before this do not count.';
COMMENT ON COLUMN cortex_buffer.circuit.open_until IS 'End of the cooldown.';
COMMENT ON COLUMN cortex_buffer.circuit.canary_job_id IS 'The one job admitted while half-open; only its outcome closes or re-opens the breaker.';
COMMENT ON COLUMN cortex_buffer.circuit.canary_lease_until IS 'When an unreported canary may be replaced.';
COMMENT ON COLUMN cortex_buffer.circuit.trips IS 'How many times the breaker opened.';
COMMENT ON COLUMN cortex_buffer.circuit.updated_at IS 'Last change.';
COMMENT ON TABLE cortex_buffer.circuit_admission IS 'Jobs admitted by admit_job(), until record_outcome() reports them.';
COMMENT ON COLUMN cortex_buffer.circuit_admission.job_id IS 'The admitted job.';
COMMENT ON COLUMN cortex_buffer.circuit_admission.agent_id IS 'Its agent.';
COMMENT ON COLUMN cortex_buffer.circuit_admission.admitted_at IS 'When it was admitted.';
COMMENT ON COLUMN cortex_buffer.circuit_admission.canary IS 'Admitted as the half-open canary.';
COMMENT ON TABLE cortex_buffer.circuit_outcome IS 'Outcomes reported by record_outcome(), kept for the failure window.';
COMMENT ON INDEX cortex_buffer.circuit_outcome_agent_idx IS 'Counts an agent''s failures in the window.';
COMMENT ON COLUMN cortex_buffer.circuit_outcome.outcome_id IS 'Report order.';
COMMENT ON COLUMN cortex_buffer.circuit_outcome.agent_id IS 'The agent.';
COMMENT ON COLUMN cortex_buffer.circuit_outcome.job_id IS 'The job.';
COMMENT ON COLUMN cortex_buffer.circuit_outcome.success IS 'Whether the job succeeded.';
COMMENT ON COLUMN cortex_buffer.circuit_outcome.counted IS 'A failure reported while closed by a job admitted since the breaker last closed: it counts towards a trip.';
COMMENT ON COLUMN cortex_buffer.circuit_outcome.recorded_at IS 'When it was reported.';
COMMENT ON INDEX cortex_buffer.job_running_heartbeat_idx IS 'The zombie reaper''s index: RUNNING jobs by heartbeat (makes heartbeats non-HOT updates; docs/control-plane.md#the-reapers-index).';
COMMENT ON INDEX cortex_buffer.job_waiting_idx IS 'Paused jobs, for idle_paused_jobs().';
