//! SQL functions of the recovery lookups (thin: map SQL to `plan` and `transcript`, and back).

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::{AnyNumeric, Uuid};

use super::plan;
use super::transcript;
use crate::pg::args::{numeric, required};
use crate::pg::jsonb::{jsonb_of_document, RawJsonb};
use crate::pg::time::timestamptz;
use crate::pg::OrRaise;
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::int::count_i64 as count;
use cortex_buffer_core::json::writer::JsonWriter;
use cortex_buffer_core::recovery::agent_state::Verdict;
use cortex_buffer_core::recovery::choose::SessionFile;
use cortex_buffer_core::spend::decimal::Decimal;

/// One call at pod start: phase 1 (the checkpoint, by `read_checkpoint`'s rules) and phase 2
/// (the session buffer after the checkpoint's marker): where to resume, which tool calls
/// finished (skip them, with their results), which are in flight (verify them, with an
/// idempotency key each), what was lost, and why the plan is what it is.
#[pg_extern(volatile)]
fn recovery_plan(
    job_id: Option<Uuid>,
    checkpoint_id: default!(Option<Uuid>, "NULL"),
    match_checkpoint: default!(Option<bool>, true),
) -> RawJsonb {
    let job = required(job_id, "job_id");
    let matching = required(match_checkpoint, "match_checkpoint");
    let plan = crate::job::authority::act(job, || plan::job_plan(job, checkpoint_id, matching)).or_raise();
    jsonb_of_document(&plan).or_raise()
}

/// A Claude Code transcript's plan (same keys as `recovery_plan`): its whole tool-call record.
#[pg_extern(volatile, strict, name = "session_recovery")]
fn session_recovery(path: &str) -> RawJsonb {
    jsonb_of_document(&on_path(path, plan::transcript_plan)).or_raise()
}

/// `session_recovery` by Claude Code session id.
#[pg_extern(volatile, strict, name = "session_recovery")]
fn session_recovery_by_id(session_id: Uuid) -> RawJsonb {
    jsonb_of_document(&on_session(session_id, plan::transcript_plan)).or_raise()
}

/// `f` on the file at `path` (relative to `sessions_dir`, or absolute), with the caller's
/// authority over it (`act_on_file`).
fn on_path<R>(path: &str, f: impl FnOnce(&str) -> Result<R, CbError>) -> R {
    let path = crate::indexer::file_access::absolute(path).or_raise();
    crate::job::authority::act_on_file(&path, || f(&path)).or_raise()
}

/// `f` on the one transcript of session `id` this session may see: for an agent, looked up and
/// read inside its own job's directory, under the one check of its token (`in_own_job`).
fn on_session<R>(id: Uuid, f: impl FnOnce(&str) -> Result<R, CbError>) -> R {
    use crate::job::authority::{in_own_job, job_dir_prefix};
    in_own_job(|scope| f(&transcript::transcript_of(id, scope.map(job_dir_prefix).as_deref())?)).or_raise()
}

/// `agent_state`'s row (the names are in [`agent_state_overload`]).
type StateRow = (String, String, Option<i64>, Option<i64>, Option<TimestampWithTimeZone>, String, String);

fn state_row(v: Verdict) -> TableIterator<'static, StateRow> {
    TableIterator::once((
        v.state.label().to_owned(),
        v.confidence.label().to_owned(),
        v.line_no,
        v.byte_offset,
        timestamptz(v.ts_us),
        v.detail,
        v.rule.to_owned(),
    ))
}

/// pgrx reads a function's result columns from the tokens of its signature (a type alias is
/// not understood), so the two `agent_state` overloads get their shared signature from here.
macro_rules! agent_state_overload {
    ($(#[doc = $doc:literal])* fn $name:ident($arg:ident: $($ty:tt)+) => |$bound:ident| $verdict:expr) => {
        $(#[doc = $doc])*
        #[pg_extern(volatile, strict, name = "agent_state")]
        #[allow(clippy::type_complexity)]
        fn $name(
            $arg: $($ty)+,
        ) -> TableIterator<
            'static,
            (
                name!(state, String),
                name!(confidence, String),
                name!(decided_by_line, Option<i64>),
                name!(decided_by_offset, Option<i64>),
                name!(since, Option<TimestampWithTimeZone>),
                name!(detail, String),
                name!(rule, String),
            ),
        > {
            let $bound = $arg;
            state_row($verdict)
        }
    };
}

agent_state_overload! {
    /// What the agent of a transcript is doing (`idle`, `acting`, `thinking`, `unknown`), how
    /// sure that is, and which line decided it.
    fn agent_state(path: &str) => |p| on_path(p, transcript::agent_state)
}

agent_state_overload! {
    /// `agent_state` by Claude Code session id.
    fn agent_state_by_id(session_id: Uuid) => |id| on_session(id, transcript::agent_state)
}

/// A job's story: its events across sessions in order, with lost events, writer restarts,
/// corrupt lines, and the database's records (checkpoints, crashes, reaper actions, usage,
/// breaker admissions) among them by time.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, strict)]
fn job_timeline(
    job_id: Uuid,
) -> TableIterator<
    'static,
    (
        name!(at, Option<TimestampWithTimeZone>),
        name!(source, String),
        name!(kind, String),
        name!(session, Option<String>),
        name!(line_no, Option<i64>),
        name!(byte_offset, Option<i64>),
        name!(seq, Option<i64>),
        name!(detail, Option<String>),
    ),
> {
    let rows = crate::job::authority::act(job_id, || transcript::job_timeline(job_id)).or_raise();
    TableIterator::new(rows.map(|e| {
        (
            timestamptz(e.ts_us),
            e.source.label().to_owned(),
            e.kind,
            e.session,
            e.line_no,
            e.byte_offset,
            e.seq,
            e.detail,
        )
    }))
}

/// Token usage of a transcript and of its sub-agents' files, per file and model, counting each
/// response once; cost at `model_price` (NULL for a model without a price).
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, strict)]
fn session_usage(
    path: &str,
) -> TableIterator<
    'static,
    (
        name!(path, String),
        name!(subagent, bool),
        name!(model, Option<String>),
        name!(responses, i64),
        name!(input_tokens, i64),
        name!(output_tokens, i64),
        name!(cache_creation_input_tokens, i64),
        name!(cache_read_input_tokens, i64),
        name!(cost_usd, Option<AnyNumeric>),
    ),
> {
    let rows = transcript::session_usage(path).or_raise();
    TableIterator::new(rows.into_iter().map(|u| {
        let t = u.totals;
        (
            u.path,
            u.subagent,
            t.model,
            t.responses,
            count(t.input_tokens),
            count(t.output_tokens),
            count(t.cache_creation_input_tokens),
            count(t.cache_read_input_tokens),
            t.cost_usd.map(numeric),
        )
    }))
}

/// A job's usage from its session files (`LLM_RESPONSE` events), what `record_usage` recorded,
/// and the difference (`unrecorded`): the usage of a pod that died before recording it.
#[allow(clippy::type_complexity)]
#[pg_extern(stable, strict)]
fn job_usage_from_buffer(
    job_id: Uuid,
) -> TableIterator<
    'static,
    (
        name!(responses, i64),
        name!(input_tokens, i64),
        name!(output_tokens, i64),
        name!(cache_creation_input_tokens, i64),
        name!(cache_read_input_tokens, i64),
        name!(cost_usd, Option<AnyNumeric>),
        name!(models, Vec<String>),
        name!(unpriced_responses, i64),
        name!(recorded_calls, i64),
        name!(recorded_input_tokens, i64),
        name!(recorded_output_tokens, i64),
        name!(recorded_cost_usd, Option<AnyNumeric>),
        name!(unrecorded, RawJsonb),
    ),
> {
    let u = crate::job::authority::act(job_id, || transcript::job_usage(job_id)).or_raise();
    let b = &u.buffer;
    let r = u.recorded.as_ref();
    let rec = |f: fn(&transcript::Recorded) -> i64| r.map_or(0, f);
    let recorded_cost = r.and_then(|r| r.cost_usd.as_deref()).map(|c| Decimal::parse(c).or_raise());
    let mut w = JsonWriter::new();
    w.begin_object();
    w.field_int("responses", b.responses - rec(|r| r.calls));
    w.field_int("input_tokens", count(b.input_tokens) - rec(|r| r.input_tokens));
    w.field_int("output_tokens", count(b.output_tokens) - rec(|r| r.output_tokens));
    w.field_int(
        "cache_creation_input_tokens",
        count(b.cache_creation_input_tokens) - rec(|r| r.cache_creation_input_tokens),
    );
    w.field_int("cache_read_input_tokens", count(b.cache_read_input_tokens) - rec(|r| r.cache_read_input_tokens));
    match (b.cost_usd, recorded_cost.unwrap_or(Decimal::ZERO)) {
        (Some(buffer), recorded) => {
            let diff = buffer.checked_add(recorded.negated()).or_raise();
            w.key("cost_usd");
            w.raw_number(&diff.to_string());
        }
        (None, _) => {
            w.key("cost_usd").null();
        }
    }
    w.end_object();
    let unrecorded = jsonb_of_document(&w.finish_document()).or_raise();
    TableIterator::once((
        b.responses,
        count(b.input_tokens),
        count(b.output_tokens),
        count(b.cache_creation_input_tokens),
        count(b.cache_read_input_tokens),
        b.cost_usd.map(numeric),
        u.models,
        u.unpriced_responses,
        rec(|r| r.calls),
        rec(|r| r.input_tokens),
        rec(|r| r.output_tokens),
        recorded_cost.map(numeric),
        unrecorded,
    ))
}

/// A LOG-slice file's entries oldest first (the database-side `scan_log` / `reload_logs`):
/// optionally of one `__type__`, within `[start_seq, end_seq)`, only the last `last_n`.
#[allow(clippy::type_complexity)]
#[pg_extern(stable)]
fn log_entries(
    path: Option<&str>,
    entry_type: default!(Option<&str>, "NULL"),
    last_n: default!(Option<i32>, "NULL"),
    start_seq: default!(Option<i64>, "NULL"),
    end_seq: default!(Option<i64>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(seq, Option<i64>),
        name!(entry_type, Option<String>),
        name!(ts, Option<TimestampWithTimeZone>),
        name!(line_no, i64),
        name!(byte_offset, i64),
        name!(entry, Option<RawJsonb>),
    ),
> {
    let path = crate::indexer::file_access::absolute(required(path, "path")).or_raise();
    let rows = crate::job::authority::act_on_file(&path, || {
        transcript::log_entries(&path, entry_type, last_n.map(i64::from), start_seq, end_seq)
    })
    .or_raise();
    TableIterator::new(rows.into_iter().map(|e| (e.seq, e.entry_type, e.ts, e.line_no, e.byte_offset, e.entry)))
}

/// Whether a LOG-slice snapshot's file reference (`last_seq`, `entry_count`) still agrees with
/// the file, and why not.
#[allow(clippy::type_complexity)]
#[pg_extern(stable)]
fn check_log_snapshot(
    path: Option<&str>,
    last_seq: Option<i64>,
    entry_count: Option<i64>,
    entry_type: default!(Option<&str>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(agrees, bool),
        name!(reason, String),
        name!(detail, String),
        name!(entries, i64),
        name!(entries_through_last_seq, Option<i64>),
        name!(max_seq, Option<i64>),
        name!(generation, i32),
        name!(unindexed_bytes, i64),
    ),
> {
    let path = required(path, "path");
    let entry_count = required(entry_count, "entry_count");
    let path = crate::indexer::file_access::absolute(path).or_raise();
    let (c, f): (_, SessionFile) = crate::job::authority::act_on_file(&path, || {
        transcript::check_log_snapshot(&path, last_seq, entry_count, entry_type)
    })
    .or_raise();
    TableIterator::once((
        c.agrees(),
        c.reason.label().to_owned(),
        c.detail,
        c.entries,
        c.entries_through_last_seq,
        c.max_seq,
        f.generation,
        f.unindexed_bytes(),
    ))
}

/// Why recovery will not use a session file (NULL when it will): the decision tree's rule on
/// a `session_file` row's columns. Used by the `untrusted_session_files` view.
#[allow(clippy::too_many_arguments)]
#[pg_extern(immutable, parallel_safe)]
fn session_file_refusal(
    quarantined: bool,
    generation: i32,
    size_bytes: i64,
    indexed_offset: i64,
    trusted: bool,
    gone: bool,
    tail_pending: bool,
    corruption_ratio: f64,
) -> Option<String> {
    let f = SessionFile {
        quarantined,
        generation,
        size_bytes,
        indexed_offset,
        trusted,
        gone,
        tail_pending,
        corruption_ratio,
        rel_path: "the file".into(),
        ..SessionFile::default()
    };
    transcript::refusal(&f).map(|(reason, _)| reason.to_owned())
}

extension_sql_file!(
    "api.sql",
    name = "recovery_api",
    requires = [
        recovery_plan,
        session_recovery,
        session_recovery_by_id,
        agent_state,
        agent_state_by_id,
        job_timeline,
        session_usage,
        job_usage_from_buffer,
        log_entries,
        check_log_snapshot,
        session_file_refusal,
        "indexer_api",
        "indexer_schema"
    ]
);
