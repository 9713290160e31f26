//! Per-job capabilities: what lets one agent pod act on its own job and no other. The control
//! plane issues a token for a job's current attempt (`job_token()`); the pod presents it
//! (`set_config('cortex_buffer.job_token', …)`), and every per-job function checks it before acting. Pure.
//!
//! A token is `cbjt1.<job uuid>.<attempt>.<mac>`, the MAC being HMAC-SHA256, in lower-case hex,
//! of `cortex_buffer/job-token/v1\n<job uuid>\n<attempt>` under a secret only the extension's
//! definer role can read. So a token names one job and one attempt: a re-dispatched job (its
//! attempt counted up) needs a new one, and the pod of an earlier attempt can no longer act.

use sha2::{Digest, Sha256};

use crate::error::{CbError, SqlState};
use crate::shared::{format_uuid, parse_uuid};

const PREFIX: &str = "cbjt1";
const BLOCK: usize = 64;

/// HMAC-SHA256 (RFC 2104) of `message` under `key`.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    inner.update(message);
    let inner = inner.finalize();
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner);
    outer.finalize().into()
}

/// Lower-case hex, as the tokens write their MACs (and source tokens their salts).
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn mac(secret: &[u8], job: &[u8; 16], attempt: i32) -> String {
    let message = format!("cortex_buffer/job-token/v1\n{}\n{attempt}", format_uuid(job));
    hex(&hmac_sha256(secret, message.as_bytes()))
}

/// The token of `job`'s attempt `attempt`.
pub fn issue(secret: &[u8], job: &[u8; 16], attempt: i32) -> String {
    format!("{PREFIX}.{}.{attempt}.{}", format_uuid(job), mac(secret, job, attempt))
}

/// What a presented token proves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// It is the token of this job's current attempt.
    Valid,
    /// Nothing was presented.
    Missing,
    /// Not a token at all.
    Malformed,
    /// A genuine-looking token whose MAC does not verify: forged or from another installation.
    Forged,
    /// A valid token of another job.
    OtherJob,
    /// A valid token of this job's earlier (or later) attempt.
    OtherAttempt { token: i32 },
}

/// Checks `token` (as presented, possibly empty) for `job` at `attempt`, in constant time over
/// the MAC.
pub fn check(secret: &[u8], token: &str, job: &[u8; 16], attempt: i32) -> Check {
    if token.is_empty() {
        return Check::Missing;
    }
    let mut parts = token.split('.');
    let (Some(PREFIX), Some(j), Some(a), Some(m), None) =
        (parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Check::Malformed;
    };
    let (Some(token_job), Ok(token_attempt)) = (parse_uuid(j), a.parse::<i32>()) else { return Check::Malformed };
    let want = mac(secret, &token_job, token_attempt);
    let same = want.len() == m.len() && want.bytes().zip(m.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0;
    if !same {
        return Check::Forged;
    }
    if &token_job != job {
        return Check::OtherJob;
    }
    if token_attempt != attempt {
        return Check::OtherAttempt { token: token_attempt };
    }
    Check::Valid
}

/// The job a token names, before any check: which job a path-based call would act for.
pub fn named_job(token: &str) -> Option<[u8; 16]> {
    let mut parts = token.split('.');
    match (parts.next(), parts.next()) {
        (Some(PREFIX), Some(j)) => parse_uuid(j),
        _ => None,
    }
}

/// The attempt a token names (its third field), before any check.
pub fn named_attempt(token: &str) -> Option<i32> {
    token.split('.').nth(2)?.parse().ok()
}

/// Whether a presented token is shaped like one (a job and an attempt): only then is the secret
/// worth reading, since a missing or malformed token is refused whatever it is.
pub fn well_formed(token: &str) -> bool {
    named_job(token).is_some() && named_attempt(token).is_some()
}

/// What a presented token proves by itself, before any job is asked about: its MAC is checked
/// once per call, here. `check` is `Valid` for a genuine token, else why it is not one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    check: Check,
    job: [u8; 16],
    attempt: i32,
}

/// Opens `presented` under `secret` (none: no token was ever issued here).
pub fn open(secret: Option<&[u8]>, presented: &str) -> Opened {
    let none = |check| Opened { check, job: [0; 16], attempt: 0 };
    if presented.is_empty() {
        return none(Check::Missing);
    }
    let (Some(job), Some(attempt)) = (named_job(presented), named_attempt(presented)) else {
        return none(Check::Malformed);
    };
    let check = match secret {
        Some(secret) => check(secret, presented, &job, attempt),
        None => Check::Forged,
    };
    Opened { check, job, attempt }
}

impl Opened {
    /// The job a genuine token names: whose row an authorisation may read before [`authorize`]
    /// decides (a forged token gets no row read).
    pub fn proven_job(&self) -> Option<[u8; 16]> {
        (self.check == Check::Valid).then_some(self.job)
    }
}

/// The whole authorisation of an agent's call on `job`, in one step: the token `opened` is
/// genuine, names `job`, and, when the caller read the job's row (`row_attempt`: `Some(None)` for
/// no row, which leaves the job to be reported as to anyone), was issued for its current attempt.
/// Returns the attempt the token was issued for, or the refusal (42501, with what to do).
pub fn authorize(opened: &Opened, job: &[u8; 16], row_attempt: Option<Option<i32>>) -> Result<i32, CbError> {
    let found = decide(opened, job, row_attempt.flatten());
    match refusal(found, job) {
        Some(refused) => Err(refused),
        None => Ok(opened.attempt),
    }
}

/// What [`authorize`] found, in the order it checks (presence, shape and MAC, the job, the row's
/// attempt).
fn decide(opened: &Opened, job: &[u8; 16], row_attempt: Option<i32>) -> Check {
    match opened.check {
        Check::Valid if &opened.job != job => Check::OtherJob,
        Check::Valid => match row_attempt {
            Some(row) if row != opened.attempt => Check::OtherAttempt { token: opened.attempt },
            _ => Check::Valid,
        },
        other => other,
    }
}

/// Whether the job's row's attempt (none: no row) is the one a token issued for `token` may act
/// on (none: a fleet caller, who may act on any): 42501, the pod superseded, otherwise.
pub fn attempt_matches(token: Option<i32>, job: &[u8; 16], row_attempt: Option<i32>) -> Result<(), CbError> {
    match (token, row_attempt) {
        (Some(token), Some(row)) if token != row => Err(refusal(Check::OtherAttempt { token }, job)
            .unwrap_or_else(|| CbError::internal("a superseded token was not refused"))),
        _ => Ok(()),
    }
}

/// The error for a check that is not `Valid` (42501, with what to do), or none.
pub fn refusal(check: Check, job: &[u8; 16]) -> Option<CbError> {
    let job = format_uuid(job);
    let denied = |message: String| CbError::new(SqlState::InsufficientPrivilege, message);
    Some(match check {
        Check::Valid => return None,
        Check::Missing => denied(format!("this session has no job token, so it may not act on job {job}"))
            .with_hint("The control plane issues the token of a job's current attempt with cortex_buffer.job_token(job_id); the pod presents it as a parameter, once per connection with set_config('cortex_buffer.job_token', $1, false), or in each transaction with true behind a transaction pooler (docs/agent.md)."),
        Check::Malformed => denied(format!("cortex_buffer.job_token is not a job token, so this session may not act on job {job}"))
            .with_hint("Set cortex_buffer.job_token to the token cortex_buffer.job_token(job_id) returned for this job, as it is (cbjt1.<job id>.<attempt>.<mac>)."),
        Check::Forged => denied(format!("cortex_buffer.job_token does not verify, so this session may not act on job {job}"))
            .with_hint("The token was altered, issued by another installation, or revoked (a new secret): ask the control plane for the job's token again."),
        Check::OtherJob => denied(format!("this session's job token is for another job, not job {job}"))
            .with_hint("A pod may act on its own job only: pass the job id its token names."),
        Check::OtherAttempt { token } => denied(format!(
            "this session's job token is for attempt {token} of job {job}, which is no longer its current attempt"
        ))
        .with_hint("The job was dispatched again: this pod's work is superseded. Stop; the new attempt's pod has its own token."),
    })
}

/// The refusal of a lookup that starts from something other than a job (a session id, a
/// reservation) for a session whose token names no job: it names no job either, so that what
/// the session asked about (another job's session or reservation, or nothing) cannot be told
/// from the answer.
pub fn unscoped_refusal(presented: &str) -> CbError {
    let denied = |message: &str| CbError::new(SqlState::InsufficientPrivilege, message.to_owned());
    if presented.is_empty() {
        denied("this session has no job token, so it may look up nothing but its own job's sessions and reservations")
            .with_hint("The control plane issues the token of a job's current attempt with cortex_buffer.job_token(job_id); the pod presents it (docs/agent.md, First: present the job token).")
    } else {
        denied("cortex_buffer.job_token is not a job token, so this session may look up nothing")
            .with_hint("Set cortex_buffer.job_token to the token cortex_buffer.job_token(job_id) returned for this job, as it is (cbjt1.<job id>.<attempt>.<mac>).")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 2.
        let got = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(hex(&got), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        // Test case 6: a key longer than the block.
        let got = hmac_sha256(&[0xaa; 131], b"Test Using Larger Than Block-Size Key - Hash Key First");
        assert_eq!(hex(&got), "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    }

    #[test]
    fn a_token_is_good_for_its_job_and_attempt_only() {
        let secret = [7u8; 32];
        let (a, b) = ([1u8; 16], [2u8; 16]);
        let t = issue(&secret, &a, 2);
        assert!(t.starts_with("cbjt1.01010101-0101-0101-0101-010101010101.2."));
        assert_eq!(check(&secret, &t, &a, 2), Check::Valid);
        assert_eq!(check(&secret, &t, &b, 2), Check::OtherJob);
        assert_eq!(check(&secret, &t, &a, 3), Check::OtherAttempt { token: 2 });
        assert_eq!(check(&[8u8; 32], &t, &a, 2), Check::Forged, "another installation's secret");
        let forged = format!("{}0", &t[..t.len() - 1]);
        assert_eq!(check(&secret, &forged, &a, 2), Check::Forged);
        let relabelled = t.replace(".2.", ".3.");
        assert_eq!(check(&secret, &relabelled, &a, 3), Check::Forged, "the attempt is under the MAC");
        assert_eq!(check(&secret, "", &a, 2), Check::Missing);
        for bad in ["x", "cbjt1.a.b.c", "cbjt1.01010101-0101-0101-0101-010101010101.2", "cbjt1...."] {
            assert_eq!(check(&secret, bad, &a, 2), Check::Malformed, "{bad}");
        }
    }

    #[test]
    fn authorisation_is_one_step_over_the_token_the_secret_and_the_row() {
        let secret = [7u8; 32];
        let (a, b) = ([1u8; 16], [2u8; 16]);
        let t = issue(&secret, &a, 2);
        let refused = |r: Result<i32, CbError>| r.err().map(|e| (e.state, e.message));
        let opened = open(Some(&secret), &t);
        assert_eq!(authorize(&opened, &a, None).ok(), Some(2), "the row not read");
        assert_eq!(authorize(&opened, &a, Some(Some(2))).ok(), Some(2));
        assert_eq!(authorize(&opened, &a, Some(None)).ok(), Some(2), "no row: reported as to anyone");
        let superseded = refused(authorize(&opened, &a, Some(Some(3))));
        assert!(superseded.is_some_and(|(s, m)| s == SqlState::InsufficientPrivilege && m.contains("attempt 2")));
        for (presented, job, secret, want) in [
            ("", a, Some(&secret[..]), Check::Missing),
            ("x", a, Some(&secret[..]), Check::Malformed),
            (t.as_str(), a, None, Check::Forged),
            (t.as_str(), a, Some(&[8u8; 32][..]), Check::Forged),
            (t.as_str(), b, Some(&secret[..]), Check::OtherJob),
        ] {
            let got = authorize(&open(secret, presented), &job, Some(Some(2))).err().map(|e| e.message);
            assert_eq!(got, refusal(want, &job).map(|e| e.message), "{presented:?} {want:?}");
        }
        assert!(well_formed(&t) && !well_formed("cbjt1.nope") && !well_formed(""));
        assert!(attempt_matches(None, &a, Some(9)).is_ok(), "a fleet caller");
    }

    #[test]
    fn only_a_genuine_token_proves_its_job() {
        let secret = [7u8; 32];
        let t = issue(&secret, &[1u8; 16], 2);
        let proven = |secret: Option<&[u8]>, presented: &str| open(secret, presented).proven_job();
        assert_eq!(proven(Some(&secret), &t), Some([1u8; 16]));
        assert_eq!(proven(None, &t), None, "no secret was ever made");
        assert_eq!(proven(Some(&[8u8; 32]), &t), None, "another installation's");
        assert_eq!(proven(Some(&secret), &t.replace(".2.", ".3.")), None, "the attempt is under the MAC");
        for bad in ["", "x", "cbjt1.01010101-0101-0101-0101-010101010101.2"] {
            assert_eq!(proven(Some(&secret), bad), None, "{bad:?}");
        }
    }

    #[test]
    fn an_unscoped_refusal_names_no_job() {
        for presented in ["", "x", "cbjt1.nope"] {
            let e = unscoped_refusal(presented);
            assert_eq!(e.state, SqlState::InsufficientPrivilege);
            assert!(e.hint.is_some());
            assert!(!e.message.contains("cbjt1") && !e.message.contains('-'), "{}", e.message);
        }
    }

    #[test]
    fn every_refusal_is_42501_with_a_hint_and_valid_is_none() {
        let job = [3u8; 16];
        assert!(refusal(Check::Valid, &job).is_none());
        for c in [Check::Missing, Check::Malformed, Check::Forged, Check::OtherJob, Check::OtherAttempt { token: 1 }] {
            let e = refusal(c, &job).expect("a refusal");
            assert_eq!(e.state, SqlState::InsufficientPrivilege, "{c:?}");
            assert!(e.hint.as_deref().is_some_and(|h| !h.is_empty()), "{c:?}");
            assert!(e.message.contains("03030303-0303-0303-0303-030303030303"), "{c:?}: {}", e.message);
        }
    }

    #[test]
    fn named_job_reads_the_job_without_checking() {
        let t = issue(&[1u8; 32], &[4u8; 16], 1);
        assert_eq!(named_job(&t), Some([4u8; 16]));
        assert_eq!(named_job("cbjt1.nope.1.00"), None);
        assert_eq!(named_job("other.04040404-0404-0404-0404-040404040404"), None);
    }
}
