//! SQL functions of the checkpoint capability (thin: map SQL to the core and `store`, and back).

use pgrx::prelude::*;
use pgrx::Uuid;

use super::marks;
use super::store::{self, Source};
use crate::pg::args::required;
use crate::pg::jsonb::{malformed, RawJsonb};
use crate::pg::OrRaise;
use cortex_buffer_core::checkpoint::crc::Canonical;
use cortex_buffer_core::recovery::keys::{
    call_idempotency_key as call_idempotency_key_of, checkpoint_ref, sha256_hex, NULL_INPUT_HASH,
};
use cortex_buffer_core::shared::format_uuid;

/// CRC-32 of the document's canonical JSON, as the control plane computes it (0 ..= 2^32-1).
#[pg_extern(immutable, strict, parallel_safe)]
fn checkpoint_crc(doc: RawJsonb) -> i64 {
    i64::from(canonical(doc).crc)
}

fn canonical(doc: RawJsonb) -> Canonical {
    doc.with_root(|root, size| Canonical::with_capacity(root, size).map_err(malformed)).or_raise()
}

/// The canonical JSON the checkpoint CRC is computed over: JavaScript's `JSON.stringify` of
/// the document with object keys sorted recursively.
#[pg_extern(immutable, strict, parallel_safe)]
fn canonical_json(doc: RawJsonb) -> String {
    canonical(doc).text
}

/// Validates `doc`, fences on `expected_checkpoint_id`, and in the caller's transaction updates
/// the job row's checkpoint and CRC and appends `checkpoint_history`.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile)]
fn write_checkpoint(
    job_id: Option<Uuid>,
    doc: Option<RawJsonb>,
    expected_checkpoint_id: default!(Option<Uuid>, "NULL"),
    allow_step_regression: default!(Option<bool>, false),
) -> TableIterator<'static, (name!(checkpoint_id, Uuid), name!(step_index, i32), name!(crc, i64), name!(size_bytes, i32))>
{
    let job = required(job_id, "job_id");
    let doc = required(doc, "doc");
    let regression = allow_step_regression.unwrap_or(false);
    let written =
        crate::job::authority::act_on_row(job, |may| store::write(job, doc, expected_checkpoint_id, regression, may))
            .or_raise();
    TableIterator::once((
        Uuid::from_bytes(written.checkpoint_id),
        written.step_index,
        i64::from(written.crc),
        i32::try_from(written.size_bytes).unwrap_or(i32::MAX),
    ))
}

/// The job's checkpoint after CRC verification: `current`, else the newest valid `history`
/// entry (with a WARNING), else `none` for a job never checkpointed; XX001 when nothing
/// verifies.
#[allow(clippy::type_complexity)]
#[pg_extern(stable, strict)]
fn read_checkpoint(
    job_id: Uuid,
) -> TableIterator<
    'static,
    (
        name!(source, String),
        name!(checkpoint_id, Option<Uuid>),
        name!(step_index, Option<i32>),
        name!(doc, Option<RawJsonb>),
        name!(crc, Option<i64>),
        name!(crc_ok, Option<bool>),
        name!(detail, Option<String>),
    ),
> {
    let r = crate::job::authority::act(job_id, || store::read(job_id)).or_raise();
    let source = match r.source {
        Source::Current => "current",
        Source::History => "history",
        Source::None => "none",
    };
    TableIterator::once((
        source.to_owned(),
        r.checkpoint_id.map(Uuid::from_bytes),
        r.step_index,
        r.doc,
        r.crc.map(i64::from),
        r.crc_ok,
        r.detail,
    ))
}

/// Every stored checkpoint (current ones in the bound job table, and history) whose CRC does
/// not match its document.
#[allow(clippy::type_complexity)]
#[pg_extern(stable)]
fn verify_checkpoints() -> TableIterator<
    'static,
    (
        name!(job_id, Uuid),
        name!(source, String),
        name!(history_id, Option<i64>),
        name!(checkpoint_id, Option<Uuid>),
        name!(step_index, Option<i32>),
        name!(stored_crc, Option<i64>),
        name!(computed_crc, Option<i64>),
        name!(detail, String),
    ),
> {
    let rows: Vec<_> = store::verify_all()
        .or_raise()
        .into_iter()
        .map(|m| {
            (
                Uuid::from_bytes(m.job_id),
                m.source.to_owned(),
                m.history_id,
                m.checkpoint_id.map(Uuid::from_bytes),
                m.step_index,
                m.stored_crc,
                m.computed_crc.map(i64::from),
                m.detail,
            )
        })
        .collect();
    TableIterator::new(rows)
}

/// Trigger on a job table's `checkpoint` column: records the high-water mark of a checkpoint
/// written by a plain `UPDATE` (the control plane's own writes). `write_checkpoint` records
/// its own, and the trigger stays quiet while it runs.
#[pg_trigger]
fn checkpoint_marked<'a>(
    trigger: &'a pgrx::PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, pgrx::AllocatedByRust>>, pgrx::PgTriggerError> {
    if !marks::trigger_records() {
        return Ok(None);
    }
    // Only the bound job table's own writes leave marks: the function attached to any other
    // table (someone's copy with an `id` and a `checkpoint`) must not forge a job's anchor.
    let bound = crate::job::binding::current().map(|b| b.oid).ok();
    if bound != Some(trigger.relation().map(|r| r.oid()).unwrap_or(pgrx::pg_sys::InvalidOid)) {
        return Ok(None);
    }
    let Some(new) = trigger.new() else { return Ok(None) };
    let job: Option<Uuid> = new.get_by_name("id").ok().flatten();
    let doc: Option<RawJsonb> = new.get_by_name("checkpoint").ok().flatten();
    if let (Some(job), Some(doc)) = (job, doc) {
        // A document the CRC cannot be computed over is no checkpoint read_checkpoint accepts:
        // nothing to mark.
        if let Ok((crc, checkpoint_id)) = store::crc_and_id_of(&doc) {
            marks::record(job, Some(crc), checkpoint_id, "trigger").or_raise();
        }
    }
    Ok(None)
}

/// The idempotency key of a tool call, as a recovery plan reports it and as the agent computes
/// it before making the call (docs/api.md: the formula): SHA-256 of the job, the checkpoint's
/// CRC, the call's ordinal since that checkpoint in its writer, the tool and its input.
#[pg_extern(immutable, parallel_safe)]
fn call_idempotency_key(
    job_id: Option<Uuid>,
    checkpoint: Option<RawJsonb>,
    call_ordinal: Option<i32>,
    tool_name: Option<&str>,
    tool_input: Option<RawJsonb>,
) -> String {
    let job = required(job_id, "job_id");
    let ordinal = required(call_ordinal, "call_ordinal");
    let ordinal = u32::try_from(ordinal).ok().filter(|o| *o >= 1).unwrap_or_else(|| {
        crate::pg::raise::raise(
            cortex_buffer_core::error::CbError::new(
                cortex_buffer_core::error::SqlState::InvalidParameterValue,
                format!("call_ordinal must be 1 or more, not {ordinal}"),
            )
            .with_hint("Count the writer's tool calls since the checkpoint it resumed from (or wrote last), from 1."),
        )
    });
    let crc = checkpoint.map(|d| canonical(d).crc);
    let input_hash = match tool_input {
        Some(input) => sha256_hex(canonical(input).text.as_bytes()),
        None => NULL_INPUT_HASH.to_owned(),
    };
    call_idempotency_key_of(
        &format_uuid(job.as_bytes()),
        &checkpoint_ref(crc),
        ordinal,
        tool_name.unwrap_or(""),
        &input_hash,
    )
}

extension_sql_file!("schema.sql", name = "checkpoint_schema");
extension_sql_file!(
    "api.sql",
    name = "checkpoint_api",
    requires = [
        checkpoint_crc,
        canonical_json,
        write_checkpoint,
        read_checkpoint,
        verify_checkpoints,
        checkpoint_marked,
        call_idempotency_key,
        "checkpoint_schema",
        "job_schema"
    ]
);

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    fn crc(json: &str) -> i64 {
        Spi::get_one::<i64>(&format!("SELECT cortex_buffer.checkpoint_crc({}::jsonb)", pgrx::spi::quote_literal(json)))
            .ok()
            .flatten()
            .unwrap_or(-1)
    }

    fn canon(json: &str) -> String {
        Spi::get_one::<String>(&format!(
            "SELECT cortex_buffer.canonical_json({}::jsonb)",
            pgrx::spi::quote_literal(json)
        ))
        .ok()
        .flatten()
        .unwrap_or_default()
    }

    #[pg_test]
    fn golden_crcs_match_the_control_plane() {
        assert_eq!(crc(r#"{"hello":"world"}"#), 3_624_485_329);
        assert_eq!(crc("{}"), 2_745_614_147);
        assert_eq!(crc(r#"{"step":1}"#), 286_895_505);
    }

    #[pg_test]
    fn canonical_json_reproduces_javascript_serialisation() {
        // jsonb reorders keys by length; the canonical form must not care.
        assert_eq!(
            canon(r#"{"bb":1,"a":{"d":[1.0,-0,1e21,1.5e-7],"c":"x/\u2028"}}"#),
            "{\"a\":{\"c\":\"x/\u{2028}\",\"d\":[1,0,1e+21,1.5e-7]},\"bb\":1}"
        );
        assert_eq!(canon(r#"{"10":1,"9":2,"x":3}"#), r#"{"9":2,"10":1,"x":3}"#);
        assert_eq!(canon(r#"{"n":12345678901234567890}"#), r#"{"n":12345678901234567000}"#);
        assert_eq!(canon(r#"{"tab":"a\tb","ctl":"\u001f"}"#), r#"{"ctl":"\u001f","tab":"a\tb"}"#);
    }

    #[pg_test]
    fn numbers_beyond_double_range_become_null_as_in_javascript() {
        assert_eq!(canon(r#"{"big":1e400,"tiny":1e-400}"#), r#"{"big":null,"tiny":0}"#);
    }

    #[pg_test]
    fn scalars_and_arrays_at_the_top_level() {
        assert_eq!(canon("[3,2,{\"b\":1,\"a\":2}]"), r#"[3,2,{"a":2,"b":1}]"#);
        assert_eq!(canon("\"s\""), "\"s\"");
        assert_eq!(canon("null"), "null");
        assert_eq!(canon("true"), "true");
        assert_eq!(canon("1.50"), "1.5");
    }

    #[pg_test]
    fn null_in_null_out() {
        let r = Spi::get_one::<i64>("SELECT cortex_buffer.checkpoint_crc(NULL)");
        assert_eq!(r.ok().flatten(), None);
    }

    #[pg_test]
    fn crc_is_independent_of_key_order_and_whitespace() {
        assert_eq!(crc(r#"{"a":1,"b":[true,null]}"#), crc(r#"{ "b" : [ true , null ] , "a" : 1.0 }"#));
    }
}
