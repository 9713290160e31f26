//! Checkpoint identity and the rules of a write (docs/design.md §SQL contract, Checkpoints): which
//! checkpoint id and step a write records, and when it is refused. Pure.

use crate::error::{CbError, SqlState};
use crate::json::node::{member, JsonNode, Kind};
#[cfg(test)]
use crate::json::JsValue;

/// A UUID as its 16 bytes.
pub use crate::shared::UuidBytes;
use crate::shared::{format_uuid, parse_uuid};

/// The identity a document carries in its own `checkpoint_id` / `step_index` members.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DocIdentity {
    pub checkpoint_id: Option<UuidBytes>,
    pub step_index: Option<i32>,
}

/// Reads and validates `checkpoint_id` (a UUID string) and `step_index` (an integer
/// 0 ..= 2^31-1) from a document. Absent or `null` members are simply not there. `reject` turns
/// the view's own read errors into ours.
pub fn doc_identity<'a, N: JsonNode<'a>>(doc: N, reject: impl Fn(N::Error) -> CbError) -> Result<DocIdentity, CbError> {
    let kind = doc.kind().map_err(&reject)?;
    if kind != Kind::Object {
        return Err(not_an_object(kind));
    }
    let describe = |n: N| -> Result<String, CbError> {
        let mut s = String::new();
        crate::json::write_canonical(n, &mut s).map_err(&reject)?;
        Ok(s)
    };
    let checkpoint_id = match member(doc, "checkpoint_id").map_err(&reject)? {
        None => None,
        Some(n) => match n.kind().map_err(&reject)? {
            Kind::Null => None,
            Kind::String(s) => Some(parse_uuid(s).ok_or_else(|| malformed_id(&format!("\"{s}\"")))?),
            _ => return Err(malformed_id(&describe(n)?)),
        },
    };
    let step_index = match member(doc, "step_index").map_err(&reject)? {
        None => None,
        Some(n) => match n.kind().map_err(&reject)? {
            Kind::Null => None,
            Kind::Number(x) if step_index_of(x).is_some() => step_index_of(x),
            _ => {
                return Err(CbError::new(
                    SqlState::InvalidParameterValue,
                    format!("checkpoint step_index {} is not an integer between 0 and 2147483647", describe(n)?),
                )
                .with_hint("Omit step_index to have the next step recorded, or pass a non-negative integer."))
            }
        },
    };
    Ok(DocIdentity { checkpoint_id, step_index })
}

fn not_an_object(kind: Kind<'_>) -> CbError {
    let kind = match kind {
        Kind::Null => "null",
        Kind::Bool(_) => "a boolean",
        Kind::Number(_) => "a number",
        Kind::String(_) => "a string",
        Kind::Array => "an array",
        Kind::Object => "an object",
    };
    CbError::new(SqlState::InvalidParameterValue, format!("a checkpoint must be a JSON object, not {kind}"))
        .with_hint("Wrap the state in an object, e.g. jsonb_build_object('state', ...).")
}

fn malformed_id(text: &str) -> CbError {
    CbError::new(SqlState::InvalidTextRepresentation, format!("checkpoint_id {text} is not a UUID"))
        .with_hint("Omit checkpoint_id to have a UUIDv7 generated, or pass a UUID string.")
}

/// The job's current checkpoint identity (docs/design.md: the newest history row whose CRC matches
/// the job row, else the stored document's own members, else unknown).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Current {
    pub checkpoint_id: Option<UuidBytes>,
    pub step_index: Option<i32>,
}

impl Current {
    pub fn resolve(history_match: Option<(UuidBytes, i32)>, stored_doc: DocIdentity) -> Current {
        match history_match {
            Some((id, step)) => Current { checkpoint_id: Some(id), step_index: Some(step) },
            None => Current { checkpoint_id: stored_doc.checkpoint_id, step_index: stored_doc.step_index },
        }
    }
}

/// What a permitted write records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Planned {
    pub checkpoint_id: UuidBytes,
    pub step_index: i32,
}

/// A JSON number as a `step_index`: a whole number from 0 to 2147483647 (JavaScript reads
/// `4.0` as 4), else `None`.
pub fn step_index_of(x: f64) -> Option<i32> {
    (x.fract() == 0.0 && (0.0..=f64::from(i32::MAX)).contains(&x)).then_some(x as i32)
}

/// Whether a job in `status` may checkpoint: only a `RUNNING` job's own process may, so a
/// reaped pod cannot overwrite its successor's checkpoint.
pub fn may_checkpoint(job: &str, status: &str) -> Result<(), CbError> {
    if status == "RUNNING" {
        return Ok(());
    }
    Err(CbError::new(
        SqlState::ObjectNotInPrerequisiteState,
        format!("job {job} is {status}, not RUNNING; its checkpoint cannot be written"),
    )
    .with_hint("Only the process running the job may checkpoint; a reaped or finished job's writer must stop."))
}

/// Decides a write: fencing on `expected`, step regression, and the identity to record.
/// `generated` is the UUIDv7 used when the document carries no `checkpoint_id`.
pub fn plan_write(
    doc: DocIdentity,
    current: Current,
    expected: Option<UuidBytes>,
    allow_step_regression: bool,
    generated: UuidBytes,
) -> Result<Planned, CbError> {
    if let Some(expected) = expected {
        if current.checkpoint_id != Some(expected) {
            let now = current.checkpoint_id.map(|c| format_uuid(&c)).unwrap_or_else(|| "none".to_owned());
            return Err(CbError::new(
                SqlState::ObjectInUse,
                format!("checkpoint fence failed: expected checkpoint {}, but the job's current checkpoint is {now}", format_uuid(&expected)),
            )
            .with_hint("Another writer checkpointed this job after you read it (or the job was re-dispatched). Stop, or re-read it with read_checkpoint() and decide."));
        }
    }
    let step_index = match (doc.step_index, current.step_index) {
        (Some(s), _) => s,
        (None, Some(c)) => c.checked_add(1).ok_or_else(|| {
            CbError::new(SqlState::InvalidParameterValue, "the next step_index would exceed 2147483647")
                .with_hint("Give the checkpoint a step_index of its own (0 to 2147483647).")
        })?,
        (None, None) => 0,
    };
    if let Some(c) = current.step_index {
        if step_index < c && !allow_step_regression {
            return Err(CbError::new(
                SqlState::ObjectInUse,
                format!("checkpoint step_index {step_index} is lower than the job's current step {c}"),
            )
            .with_hint("A newer step was already checkpointed (a stale writer?). Pass allow_step_regression => true to roll back on purpose."));
        }
    }
    Ok(Planned { checkpoint_id: doc.checkpoint_id.unwrap_or(generated), step_index })
}

#[cfg(test)]
mod tests {
    use super::*;
    use JsValue::*;

    const A: &str = "0193a8b2-8b00-7000-8000-0000000000c0";
    const B: &str = "0193a8b2-8b00-7000-8000-0000000000c1";

    fn id(s: &str) -> UuidBytes {
        parse_uuid(s).unwrap_or_else(|| panic!("bad test uuid {s}"))
    }

    #[test]
    fn identity_members_are_read_and_validated() {
        let doc = JsValue::object([("checkpoint_id", String(A.into())), ("step_index", Number(3.0))]);
        assert_eq!(
            doc_identity(&doc, |e| match e {}).ok(),
            Some(DocIdentity { checkpoint_id: Some(id(A)), step_index: Some(3) })
        );
        let empty = JsValue::object([("checkpoint_id", Null)]);
        assert_eq!(doc_identity(&empty, |e| match e {}).ok(), Some(DocIdentity::default()));
    }

    #[test]
    fn malformed_identity_members_have_their_own_sqlstates() {
        let bad_id = JsValue::object([("checkpoint_id", String("nope".into()))]);
        assert_eq!(
            doc_identity(&bad_id, |e| match e {}).err().map(|e| e.state),
            Some(SqlState::InvalidTextRepresentation)
        );
        let numeric_id = JsValue::object([("checkpoint_id", Number(7.0))]);
        assert_eq!(
            doc_identity(&numeric_id, |e| match e {}).err().map(|e| e.state),
            Some(SqlState::InvalidTextRepresentation)
        );
        for step in [Number(-1.0), Number(1.5), Number(3e9), String("2".into()), Bool(true)] {
            let doc = JsValue::object([("step_index", step.clone())]);
            assert_eq!(
                doc_identity(&doc, |e| match e {}).err().map(|e| e.state),
                Some(SqlState::InvalidParameterValue),
                "{step:?}"
            );
        }
    }

    #[test]
    fn only_objects_are_checkpoints() {
        for v in [Null, Array(vec![]), String("x".into()), Number(1.0)] {
            let e = doc_identity(&v, |e| match e {}).err();
            assert_eq!(e.as_ref().map(|e| e.state), Some(SqlState::InvalidParameterValue));
            assert!(e.and_then(|e| e.hint).is_some());
        }
    }

    #[test]
    fn the_newest_matching_history_row_wins_over_the_documents_own_members() {
        let own = DocIdentity { checkpoint_id: Some(id(B)), step_index: Some(9) };
        assert_eq!(
            Current::resolve(Some((id(A), 2)), own),
            Current { checkpoint_id: Some(id(A)), step_index: Some(2) }
        );
        assert_eq!(Current::resolve(None, own), Current { checkpoint_id: Some(id(B)), step_index: Some(9) });
        assert_eq!(Current::resolve(None, DocIdentity::default()), Current::default());
    }

    #[test]
    fn fencing_refuses_a_stale_expected_id_and_skips_when_none_is_given() {
        let current = Current { checkpoint_id: Some(id(A)), step_index: Some(1) };
        let doc = DocIdentity::default();
        let g = id(B);
        assert!(plan_write(doc, current, Some(id(A)), false, g).is_ok());
        let stale = plan_write(doc, current, Some(id(B)), false, g).err();
        assert_eq!(stale.as_ref().map(|e| e.state), Some(SqlState::ObjectInUse));
        assert_ne!(SqlState::ObjectInUse.code(), "40001");
        assert!(plan_write(doc, current, None, false, g).is_ok());
        // Expecting a checkpoint on a job that has none is stale too.
        assert!(plan_write(doc, Current::default(), Some(id(A)), false, g).is_err());
    }

    #[test]
    fn steps_advance_by_default_repeat_on_rerun_and_refuse_regression() {
        let current = Current { checkpoint_id: Some(id(A)), step_index: Some(4) };
        let g = id(B);
        let next = plan_write(DocIdentity::default(), current, None, false, g).ok();
        assert_eq!(next, Some(Planned { checkpoint_id: g, step_index: 5 }));
        let first = plan_write(DocIdentity::default(), Current::default(), None, false, g).ok();
        assert_eq!(first.map(|p| p.step_index), Some(0));
        let rerun = DocIdentity { checkpoint_id: None, step_index: Some(4) };
        assert_eq!(plan_write(rerun, current, None, false, g).ok().map(|p| p.step_index), Some(4));
        let back = DocIdentity { checkpoint_id: None, step_index: Some(3) };
        assert_eq!(plan_write(back, current, None, false, g).err().map(|e| e.state), Some(SqlState::ObjectInUse));
        assert_eq!(plan_write(back, current, None, true, g).ok().map(|p| p.step_index), Some(3));
    }

    #[test]
    fn the_documents_own_checkpoint_id_is_used() {
        let doc = DocIdentity { checkpoint_id: Some(id(A)), step_index: Some(0) };
        assert_eq!(plan_write(doc, Current::default(), None, false, id(B)).ok().map(|p| p.checkpoint_id), Some(id(A)));
    }

    #[test]
    fn only_a_running_job_may_checkpoint_and_steps_are_whole_non_negative_numbers() {
        assert!(may_checkpoint("j", "RUNNING").is_ok());
        for status in ["WAITING_FOR_APPROVAL", "FAILED", "RETRYING", "COMPLETED"] {
            assert_eq!(may_checkpoint("j", status).map_err(|e| e.state), Err(SqlState::ObjectNotInPrerequisiteState));
        }
        assert_eq!(step_index_of(4.0), Some(4));
        assert_eq!(step_index_of(2_147_483_647.0), Some(i32::MAX));
        for bad in [-1.0, 0.5, 2_147_483_648.0, f64::NAN, f64::INFINITY] {
            assert_eq!(step_index_of(bad), None, "{bad}");
        }
    }
}
