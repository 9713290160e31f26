-- cortex_buffer 0.2.0 -> 0.3.0: job liveness (heartbeat, reap_zombies, idle_paused_jobs,
-- record_crash, retry_decision, the per-agent circuit breaker).
\echo Use "ALTER EXTENSION cortex_buffer UPDATE TO '0.3.0'" to load this file. \quit

-- Job liveness: crash records, when paused jobs were first seen waiting, and the per-agent
-- circuit breaker.

-- Every crash the control plane records, and every zombie the reaper finds (retry decisions
-- read this history). Data: pg_dump keeps it.
CREATE SEQUENCE cortex_buffer.crash_seq;
CREATE TABLE cortex_buffer.crash (
    crash_id        bigint PRIMARY KEY DEFAULT nextval('cortex_buffer.crash_seq'),
    job_id          uuid NOT NULL,
    agent_id        uuid,
    attempt         integer,
    reason          text NOT NULL CHECK (reason IN ('crash', 'zombie')),
    exit_code       integer,
    error_message   text,
    lifecycle_state text,
    step_index      integer,
    last_tool       text,
    tokens          jsonb,
    recorded_at     timestamptz NOT NULL DEFAULT now()
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
    failure_threshold integer NOT NULL DEFAULT 3 CHECK (failure_threshold > 0),
    failure_window    interval NOT NULL DEFAULT '15 minutes' CHECK (failure_window > '0'),
    cooldown          interval NOT NULL DEFAULT '30 minutes' CHECK (cooldown > '0'),
    canary_lease      interval NOT NULL DEFAULT '10 minutes' CHECK (canary_lease > '0')
);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.circuit_config', '');

-- Breaker state per agent ("half-open" is an open breaker past open_until).
CREATE TABLE cortex_buffer.circuit (
    agent_id           uuid PRIMARY KEY,
    open               boolean NOT NULL DEFAULT false,
    closed_since       timestamptz NOT NULL DEFAULT now(),
    open_until         timestamptz,
    canary_job_id      uuid,
    canary_lease_until timestamptz,
    trips              integer NOT NULL DEFAULT 0,
    updated_at         timestamptz NOT NULL DEFAULT now()
);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.circuit', '');

-- Jobs admit_job let through, until their outcome is recorded.
CREATE TABLE cortex_buffer.circuit_admission (
    job_id      uuid PRIMARY KEY,
    agent_id    uuid NOT NULL,
    admitted_at timestamptz NOT NULL DEFAULT now(),
    canary      boolean NOT NULL DEFAULT false
);

-- Recent outcomes (kept for the failure window); `counted` ones can trip the breaker.
CREATE TABLE cortex_buffer.circuit_outcome (
    outcome_id  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    agent_id    uuid NOT NULL,
    job_id      uuid NOT NULL,
    success     boolean NOT NULL,
    counted     boolean NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX circuit_outcome_agent_idx ON cortex_buffer.circuit_outcome (agent_id, recorded_at);

-- The zombie reaper's index: only RUNNING jobs, ordered by heartbeat, so its cost follows the
-- number of stale jobs, not the table. reap_zombies() uses this exact predicate.
CREATE INDEX job_running_heartbeat_idx ON cortex_buffer.job (heartbeat_at) WHERE status = 'RUNNING';
-- idle_paused_jobs(): only paused jobs.
CREATE INDEX job_waiting_idx ON cortex_buffer.job (updated_at) WHERE status = 'WAITING_FOR_APPROVAL';

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
COMMENT ON INDEX cortex_buffer.job_running_heartbeat_idx IS 'The zombie reaper''s index: RUNNING jobs by heartbeat (makes heartbeats non-HOT updates; see the README).';
COMMENT ON INDEX cortex_buffer.job_waiting_idx IS 'Paused jobs, for idle_paused_jobs().';

CREATE  FUNCTION "heartbeat"(
	"job_id" uuid /* Uuid */
) RETURNS bool /* bool */
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'heartbeat_wrapper';

CREATE  FUNCTION "reap_zombies"(
	"stale_after" interval DEFAULT '5 minutes', /* Option < Interval > */
	"max_jobs" INT DEFAULT 1000 /* Option < i32 > */
) RETURNS TABLE (
	"job_id" uuid,  /* Uuid */
	"agent_id" uuid,  /* Uuid */
	"attempt" INT,  /* i32 */
	"new_status" TEXT,  /* String */
	"retry_after" interval,  /* Option < Interval > */
	"last_heartbeat" timestamp with time zone  /* Option < TimestampWithTimeZone > */
)
VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'reap_zombies_wrapper';

CREATE  FUNCTION "reaper_index_sql"() RETURNS TEXT /* String */
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'reaper_index_sql_wrapper';

CREATE  FUNCTION "idle_paused_jobs"(
	"idle_after" interval DEFAULT '30 minutes' /* Option < Interval > */
) RETURNS TABLE (
	"job_id" uuid,  /* Uuid */
	"agent_id" uuid,  /* Uuid */
	"waiting_since" timestamp with time zone  /* TimestampWithTimeZone */
)
VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'idle_paused_jobs_wrapper';

CREATE  FUNCTION "record_crash"(
	"job_id" uuid, /* Option < Uuid > */
	"exit_code" INT, /* Option < i32 > */
	"error_message" TEXT, /* Option < String > */
	"lifecycle_state" TEXT DEFAULT NULL, /* Option < String > */
	"step_index" INT DEFAULT NULL, /* Option < i32 > */
	"last_tool" TEXT DEFAULT NULL, /* Option < String > */
	"tokens" jsonb DEFAULT NULL /* Option < RawJsonb > */
) RETURNS bigint /* i64 */
VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'record_crash_wrapper';

CREATE  FUNCTION "retry_decision"(
	"job_id" uuid /* Uuid */
) RETURNS TABLE (
	"retry" bool,  /* bool */
	"reason" TEXT,  /* String */
	"strategy" TEXT,  /* String */
	"delay" interval  /* Option < Interval > */
)
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'retry_decision_wrapper';

CREATE  FUNCTION "admit_job"(
	"agent_id" uuid, /* Uuid */
	"job_id" uuid /* Uuid */
) RETURNS bool /* bool */
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'admit_job_wrapper';

CREATE  FUNCTION "record_outcome"(
	"agent_id" uuid, /* Uuid */
	"job_id" uuid, /* Uuid */
	"success" bool /* bool */
) RETURNS TABLE (
	"state" TEXT,  /* String */
	"failures_in_window" INT,  /* i32 */
	"open_until" timestamp with time zone  /* Option < TimestampWithTimeZone > */
)
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'record_outcome_wrapper';

CREATE  FUNCTION "circuit_state"(
	"agent_id" uuid /* Uuid */
) RETURNS TABLE (
	"state" TEXT,  /* String */
	"failures_in_window" INT,  /* i32 */
	"open_until" timestamp with time zone  /* Option < TimestampWithTimeZone > */
)
STRICT STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'circuit_state_wrapper';

COMMENT ON FUNCTION cortex_buffer.heartbeat(uuid) IS
'Sets heartbeat_at = now() while the job is RUNNING or WAITING_FOR_APPROVAL and returns true; returns false otherwise (reaped, cancelled or finished: the agent must stop).';
COMMENT ON FUNCTION cortex_buffer.reap_zombies(interval, integer) IS
'Finds RUNNING jobs whose heartbeat is older than stale_after (or that never beat and started or were updated longer ago), and moves each RUNNING -> FAILED -> RETRYING or DEAD_LETTER by retry_decision, merging {reason: zombie, ...} into error and recording a zombie crash. Rows are claimed FOR UPDATE SKIP LOCKED: concurrent callers reap each job once. retry_after is the backoff to re-enqueue with.';
COMMENT ON FUNCTION cortex_buffer.reaper_index_sql() IS
'The CREATE INDEX CONCURRENTLY statement for the reaper''s partial index (heartbeat_at WHERE status = ''RUNNING'') on the bound job table; cortex_buffer.job has it already.';
COMMENT ON FUNCTION cortex_buffer.idle_paused_jobs(interval) IS
'Jobs WAITING_FOR_APPROVAL for longer than idle_after, measured from when heartbeat() first saw them waiting (else updated_at): their pods can be scaled to zero.';
COMMENT ON FUNCTION cortex_buffer.record_crash(uuid, integer, text, text, integer, text, jsonb) IS
'Appends a crash of the job''s current attempt to cortex_buffer.crash (exit 137 = OOM, 143 = clean drain); returns its crash_id.';
COMMENT ON FUNCTION cortex_buffer.retry_decision(uuid) IS
'Spike #34 retry decision: max_attempts (hard stop), token_budget_exhausted, drained (exit 143: immediate), deterministic_crash (same error 3x), persistent_oom, else retry with reduced_footprint (last exit 137) or escalating_backoff; delays 5s, 60s, 300s, 1800s, then dead letter.';
COMMENT ON FUNCTION cortex_buffer.admit_job(uuid, uuid) IS
'Circuit breaker: true while the agent''s breaker is closed; while open, false until the cooldown ends, then true for exactly one canary job (replaced if it does not report within its lease).';
COMMENT ON FUNCTION cortex_buffer.record_outcome(uuid, uuid, boolean) IS
'Reports a job''s outcome to the agent''s circuit breaker (3 failures in 15 minutes open it for 30 by default; only the canary''s outcome closes or re-opens it); returns the breaker''s state.';
COMMENT ON FUNCTION cortex_buffer.circuit_state(uuid) IS
'The agent''s circuit breaker: state (closed, open, half_open), counted failures in the window, and the end of the cooldown while open.';
