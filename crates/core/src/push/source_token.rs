//! Per-source credentials: what lets a shipper push as one source and no other, whatever login it
//! shares with others. The control plane (or an operator) issues a source's token when it
//! registers the source (`register_push_source`, `push_source_token`); the shipper presents it
//! with every call (an argument, never a session setting, which would outlive the caller behind a
//! pooler). Pure.
//!
//! A token is `cbst1.<generation>.<mac>.<source>`, the MAC being HMAC-SHA256, in lower-case hex,
//! of `cortex_buffer/source-token/v1\n<source>\n<generation>\n<salt>` under the installation's
//! token secret (the job tokens' own, which only the definer role reads). The source comes last
//! because its name may hold dots. Revoking a source's token counts its generation up
//! (`push_source.token_generation`); the salt (`push_source.token_salt`, random) is drawn anew
//! whenever the source's row is made, so a source dropped and registered again under the same
//! name never takes back a token issued before. The same row and generation always give the same
//! token: issuing is idempotent.

use crate::error::{CbError, SqlState};
use crate::job::token::{hex, hmac_sha256};

const PREFIX: &str = "cbst1";

fn mac(secret: &[u8], source: &str, generation: i32, salt: &[u8]) -> String {
    let message = format!("cortex_buffer/source-token/v1\n{source}\n{generation}\n{}", hex(salt));
    hex(&hmac_sha256(secret, message.as_bytes()))
}

/// The token of `source` at `generation`, for its row's `salt`.
pub fn issue(secret: &[u8], source: &str, generation: i32, salt: &[u8]) -> String {
    format!("{PREFIX}.{generation}.{}.{source}", mac(secret, source, generation, salt))
}

/// What a presented token proves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// It is the current token of this source.
    Valid,
    /// Nothing was presented.
    Missing,
    /// Not a source token at all.
    Malformed,
    /// A token of another source.
    OtherSource,
    /// A token of this source whose MAC does not verify: forged, from another installation (or
    /// issued before the secret was replaced), or issued before the source was dropped and
    /// registered again.
    Forged,
    /// A genuine token of a generation since revoked.
    Revoked,
}

/// The source a token names, before any check.
pub fn named_source(token: &str) -> Option<&str> {
    let mut parts = token.splitn(4, '.');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(PREFIX), Some(_), Some(_), Some(source)) => Some(source),
        _ => None,
    }
}

/// Checks `token` (as presented, possibly empty) for `source` at its current `generation` and
/// its row's `salt`, in constant time over the MAC.
pub fn check(secret: &[u8], token: &str, source: &str, generation: i32, salt: &[u8]) -> Check {
    if token.is_empty() {
        return Check::Missing;
    }
    let mut parts = token.splitn(4, '.');
    let (Some(PREFIX), Some(g), Some(m), Some(named)) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Check::Malformed;
    };
    let Ok(token_generation) = g.parse::<i32>() else { return Check::Malformed };
    if named != source {
        return Check::OtherSource;
    }
    let want = mac(secret, named, token_generation, salt);
    let same = want.len() == m.len() && want.bytes().zip(m.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0;
    if !same {
        return Check::Forged;
    }
    if token_generation != generation {
        return Check::Revoked;
    }
    Check::Valid
}

/// The error for a check that is not `Valid` (42501, with what to do), or none.
pub fn refusal(check: Check, source: &str) -> Option<CbError> {
    let denied = |message: String| CbError::new(SqlState::InsufficientPrivilege, message);
    Some(match check {
        Check::Valid => return None,
        Check::Missing => denied(format!("no source token was presented for push source \"{source}\""))
            .with_hint("Pass the source's token (cortex_buffer.push_source_token(source), or what register_push_source returned) as source_token; the shipper takes it from --source-token or CB_SHIP_SOURCE_TOKEN."),
        Check::Malformed => denied(format!("source_token is not a source token, so this call may not act as push source \"{source}\""))
            .with_hint("Pass the token as push_source_token(source) returned it (cbst1.<generation>.<mac>.<source>)."),
        Check::OtherSource => denied(format!("source_token is another source's, not push source \"{source}\"'s"))
            .with_hint("A source's token acts as that source only: pass the source the token names, or that source's token."),
        Check::Forged => denied(format!("source_token does not verify for push source \"{source}\""))
            .with_hint("The token was altered, issued by another installation, or issued before the source was dropped and registered again: ask the control plane for the source's token again (push_source_token)."),
        Check::Revoked => denied(format!("source_token of push source \"{source}\" was revoked"))
            .with_hint("An operator or the control plane revoked it (revoke_push_source_token): ask for the source's current token (push_source_token)."),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_good_for_its_source_generation_and_row_only() {
        let secret = [7u8; 32];
        let salt = [5u8; 16];
        let t = issue(&secret, "node-b.example:1", 1, &salt);
        assert!(t.starts_with("cbst1.1."), "{t}");
        assert_eq!(named_source(&t), Some("node-b.example:1"), "a source with dots and colons");
        assert_eq!(check(&secret, &t, "node-b.example:1", 1, &salt), Check::Valid);
        assert_eq!(check(&secret, &t, "node-b", 1, &salt), Check::OtherSource);
        assert_eq!(check(&secret, &t, "node-b.example:1", 2, &salt), Check::Revoked);
        assert_eq!(check(&[8u8; 32], &t, "node-b.example:1", 1, &salt), Check::Forged, "another installation");
        assert_eq!(check(&secret, &t, "node-b.example:1", 1, &[6u8; 16]), Check::Forged, "a row made again");
        let relabelled = t.replacen("cbst1.1.", "cbst1.2.", 1);
        assert_eq!(
            check(&secret, &relabelled, "node-b.example:1", 2, &salt),
            Check::Forged,
            "the generation is under the MAC"
        );
        let renamed = t.replace("node-b.example:1", "node-c");
        assert_eq!(check(&secret, &renamed, "node-c", 1, &salt), Check::Forged, "the source is under the MAC");
        assert_eq!(check(&secret, "", "s", 1, &salt), Check::Missing);
        for bad in ["x", "cbst1.a.b.s", "cbst1.1.m", "cbjt1.1.m.s", "cbst1..m.s"] {
            assert_eq!(check(&secret, bad, "s", 1, &salt), Check::Malformed, "{bad}");
        }
        assert_eq!(issue(&secret, "s", 3, &salt), issue(&secret, "s", 3, &salt), "issuing is idempotent");
    }

    #[test]
    fn every_refusal_is_42501_with_a_hint_and_valid_is_none() {
        assert!(refusal(Check::Valid, "s").is_none());
        for c in [Check::Missing, Check::Malformed, Check::OtherSource, Check::Forged, Check::Revoked] {
            let e = refusal(c, "s").expect("a refusal");
            assert_eq!(e.state, SqlState::InsufficientPrivilege, "{c:?}");
            assert!(e.hint.is_some(), "{c:?}");
        }
    }
}
