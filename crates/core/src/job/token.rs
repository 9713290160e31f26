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

/// The job a token names, before any check: which job a path-based call would act for.
pub fn named_job(token: &str) -> Option<[u8; 16]> {
    let mut parts = token.split('.');
    match (parts.next(), parts.next()) {
        (Some(PREFIX), Some(j)) => parse_uuid(j),
        _ => None,
    }
}

/// Whether a presented token is shaped like one (`cbjt1.<job id>.<attempt>.<mac>`): only then is
/// the secret worth reading, since any other is refused whatever the secret.
pub fn well_formed(token: &str) -> bool {
    shape(token).is_some()
}

/// A token's job, attempt and MAC, when it has exactly its four fields and the job and attempt
/// parse; before any check of the MAC.
fn shape(token: &str) -> Option<([u8; 16], i32, &str)> {
    let mut parts = token.split('.');
    match (parts.next(), parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(PREFIX), Some(j), Some(a), Some(m), None) => Some((parse_uuid(j)?, a.parse().ok()?, m)),
        _ => None,
    }
}

/// What a genuine token proves: the job and the attempt it was issued for. Which job a call is
/// for, and which attempt is the job's current one, the caller knows (the argument, the row);
/// [`Claims::job`] and [`Claims::current`] are what it holds them against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claims {
    job: [u8; 16],
    attempt: i32,
}

/// Opens `presented` under `secret` (none: no token was ever issued here), checking, in this
/// order, that a token was presented, that it is shaped like one, and its MAC (in constant time,
/// once per call). Returns what it proves, or the refusal (42501, with what to do), which names
/// no job: a token that proves nothing names none.
pub fn open(secret: Option<&[u8]>, presented: &str) -> Result<Claims, CbError> {
    let denied = |message: &str| CbError::new(SqlState::InsufficientPrivilege, message.to_owned());
    if presented.is_empty() {
        return Err(denied("this session has no job token, so it may act on no job")
            .with_hint("The control plane issues the token of a job's current attempt with cortex_buffer.job_token(job_id); the pod presents it as a parameter, once per connection with set_config('cortex_buffer.job_token', $1, false), or in each transaction with true behind a transaction pooler (docs/agent.md)."));
    }
    let Some((job, attempt, m)) = shape(presented) else {
        return Err(denied("cortex_buffer.job_token is not a job token, so this session may act on no job")
            .with_hint(MALFORMED_HINT));
    };
    let genuine = secret.is_some_and(|secret| {
        let want = mac(secret, &job, attempt);
        want.len() == m.len() && want.bytes().zip(m.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    });
    if !genuine {
        return Err(denied("cortex_buffer.job_token does not verify, so this session may act on no job")
            .with_hint("The token was altered, issued by another installation, or revoked (a new secret): ask the control plane for the job's token again."));
    }
    Ok(Claims { job, attempt })
}

/// Said to a session whose token is not one, whatever it asked.
const MALFORMED_HINT: &str = "Set cortex_buffer.job_token to the token cortex_buffer.job_token(job_id) returned for this job, as it is (cbjt1.<job id>.<attempt>.<mac>).";

impl Claims {
    /// The job the token was issued for.
    pub fn job(&self) -> [u8; 16] {
        self.job
    }

    /// The refusal of a call on any job but the token's (42501). It names the token's job, this
    /// session's own, which is the one the pod should have passed.
    pub fn other_job(&self) -> CbError {
        CbError::new(
            SqlState::InsufficientPrivilege,
            format!("this session's job token is for job {}, not the job this call is for", format_uuid(&self.job)),
        )
        .with_hint("A pod may act on its own job only: pass the job id its token names.")
    }

    /// The attempt the token was issued for, when it is the job's current one (`row_attempt`: the
    /// job row's; none when the row was not read, or there is no row, which leaves the job to be
    /// reported as to anyone); otherwise the refusal of a superseded pod (42501).
    pub fn current(&self, row_attempt: Option<i32>) -> Result<i32, CbError> {
        match row_attempt {
            Some(row) if row != self.attempt => Err(CbError::new(
                SqlState::InsufficientPrivilege,
                format!(
                    "this session's job token is for attempt {} of job {}, which is no longer its current attempt",
                    self.attempt,
                    format_uuid(&self.job)
                ),
            )
            .with_hint("The job was dispatched again: this pod's work is superseded. Stop; the new attempt's pod has its own token.")),
            _ => Ok(self.attempt),
        }
    }
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
            .with_hint(MALFORMED_HINT)
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
    fn a_token_proves_its_job_and_attempt_only() {
        let secret = [7u8; 32];
        let a = [1u8; 16];
        let t = issue(&secret, &a, 2);
        assert!(t.starts_with("cbjt1.01010101-0101-0101-0101-010101010101.2."));
        let claims = open(Some(&secret), &t).expect("genuine");
        assert_eq!((claims.job(), claims.current(None).ok()), (a, Some(2)));
        let refused = |secret: Option<&[u8]>, presented: &str| open(secret, presented).err().map(|e| e.message);
        assert!(refused(Some(&secret), "").is_some_and(|m| m.contains("no job token")));
        for (secret, presented, why) in [
            (Some(&[8u8; 32][..]), t.clone(), "another installation's secret"),
            (None, t.clone(), "no secret was ever made"),
            (Some(&secret[..]), format!("{}0", &t[..t.len() - 1]), "an altered MAC"),
            (Some(&secret[..]), t.replace(".2.", ".3."), "the attempt is under the MAC"),
        ] {
            assert!(refused(secret, &presented).is_some_and(|m| m.contains("does not verify")), "{why}");
        }
        for bad in ["x", "cbjt1.a.b.c", "cbjt1.01010101-0101-0101-0101-010101010101.2", "cbjt1....", &format!("{t}.x")]
        {
            assert!(!well_formed(bad), "{bad}");
            for secret in [Some(&secret[..]), None] {
                let refusal = refused(secret, bad);
                assert!(refusal.is_some_and(|m| m.contains("not a job token")), "{bad}: the shape is checked first");
            }
        }
        // A token that proves nothing names no job, not even the one it claims.
        let unproven =
            [(Some(&secret[..]), ""), (Some(&secret[..]), "x"), (Some(&[8u8; 32][..]), t.as_str()), (None, t.as_str())];
        for (secret, presented) in unproven {
            let message = refused(secret, presented).expect("refused");
            assert!(!message.contains("0101"), "{message}");
        }
    }

    #[test]
    fn the_row_decides_whether_the_tokens_attempt_is_current() {
        let claims = open(Some(&[7u8; 32]), &issue(&[7u8; 32], &[1u8; 16], 2)).expect("genuine");
        assert_eq!(claims.current(Some(2)).ok(), Some(2));
        assert_eq!(claims.current(None).ok(), Some(2), "no row, or not read: reported as to anyone");
        let superseded = claims.current(Some(3)).expect_err("superseded");
        assert_eq!(superseded.state, SqlState::InsufficientPrivilege);
        assert!(superseded.message.contains("attempt 2 of job 01010101-0101-0101-0101-010101010101"));
        assert!(superseded.hint.is_some_and(|h| h.contains("dispatched again")));
        let other = claims.other_job();
        assert_eq!(other.state, SqlState::InsufficientPrivilege);
        assert!(other.message.contains("01010101-0101-0101-0101-010101010101"), "names the token's own job");
        assert!(well_formed(&issue(&[7u8; 32], &[1u8; 16], 2)) && !well_formed("cbjt1.nope") && !well_formed(""));
    }

    #[test]
    fn every_refusal_is_42501_with_a_hint() {
        let secret = [7u8; 32];
        let t = issue(&secret, &[3u8; 16], 1);
        let claims = open(Some(&secret), &t).expect("genuine");
        let refusals = [
            open(Some(&secret), "").err(),
            open(Some(&secret), "x").err(),
            open(Some(&[8u8; 32]), &t).err(),
            Some(claims.other_job()),
            claims.current(Some(2)).err(),
        ];
        for e in refusals {
            let e = e.expect("a refusal");
            assert_eq!(e.state, SqlState::InsufficientPrivilege, "{}", e.message);
            assert!(e.hint.as_deref().is_some_and(|h| !h.is_empty()), "{}", e.message);
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
    fn named_job_reads_the_job_without_checking() {
        let t = issue(&[1u8; 32], &[4u8; 16], 1);
        assert_eq!(named_job(&t), Some([4u8; 16]));
        assert_eq!(named_job("cbjt1.nope.1.00"), None);
        assert_eq!(named_job("other.04040404-0404-0404-0404-040404040404"), None);
    }
}
