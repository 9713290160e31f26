//! Small helpers every part of the extension shares: UUIDs as bytes and text, and the wall
//! clock in microseconds. One place, so that no module borrows them from another's.

/// A UUID's 16 bytes.
pub type UuidBytes = [u8; 16];

/// Parses a UUID in the 8-4-4-4-12 form or as 32 hex digits, either case.
pub fn parse_uuid(s: &str) -> Option<UuidBytes> {
    let hex: Vec<u8> = if s.len() == 36 {
        let b = s.as_bytes();
        if [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
            return None;
        }
        b.iter().copied().filter(|c| *c != b'-').collect()
    } else if s.len() == 32 {
        s.as_bytes().to_vec()
    } else {
        return None;
    };
    if hex.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        let hi = (pair[0] as char).to_digit(16)?;
        let lo = (pair[1] as char).to_digit(16)?;
        out[i] = u8::try_from(hi * 16 + lo).ok()?;
    }
    Some(out)
}

pub fn format_uuid(u: &UuidBytes) -> String {
    let h: String = u.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

/// A UUIDv7 (RFC 9562): 48-bit Unix milliseconds, version 7, 74 random bits, variant 10.
pub fn uuid_v7(unix_ms: u64, random: [u8; 10]) -> UuidBytes {
    let mut u = [0u8; 16];
    u[..6].copy_from_slice(&unix_ms.to_be_bytes()[2..8]);
    u[6] = 0x70 | (random[0] & 0x0f);
    u[7] = random[1];
    u[8] = 0x80 | (random[2] & 0x3f);
    u[9..16].copy_from_slice(&random[3..10]);
    u
}

/// Microseconds since the Unix epoch (0 before it, `i64::MAX` past the range).
pub fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0193a8b2-8b00-7000-8000-0000000000c0";

    fn id(s: &str) -> UuidBytes {
        parse_uuid(s).unwrap_or_else(|| panic!("{s}"))
    }

    #[test]
    fn uuids_parse_and_format() {
        assert_eq!(format_uuid(&id(A)), A);
        assert_eq!(parse_uuid(&A.to_uppercase()), Some(id(A)));
        assert_eq!(parse_uuid(&A.replace('-', "")), Some(id(A)));
        assert_eq!(parse_uuid("0193a8b2-8b00-7000-8000-0000000000cg"), None);
        assert_eq!(parse_uuid("0193a8b2+8b00-7000-8000-0000000000c0"), None);
        assert_eq!(parse_uuid(""), None);
    }

    #[test]
    fn uuid_v7_layout() {
        let u = uuid_v7(0x0193_a8b2_7c41, [0xff; 10]);
        let s = format_uuid(&u);
        assert!(s.starts_with("0193a8b2-7c41-7"), "{s}");
        assert_eq!(u[8] & 0xc0, 0x80, "RFC variant");
        assert_eq!(u[6] >> 4, 7, "version 7");
        // Later milliseconds sort later.
        assert!(uuid_v7(2, [0; 10]) > uuid_v7(1, [0xff; 10]));
    }

    #[test]
    fn the_clock_is_after_2026() {
        assert!(now_us() > 1_767_225_600_000_000);
    }
}
