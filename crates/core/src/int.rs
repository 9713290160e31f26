//! The two ways an unsigned 64-bit number becomes a `bigint`, kept together so every caller
//! picks one on purpose: a count saturates (no database holds more than `i64::MAX` of
//! anything), while an identifier (a device or inode number) keeps its bit pattern, so it
//! comes back unchanged.

/// A count as `bigint`, saturating at `i64::MAX`.
pub fn count_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// An identifier's bit pattern as `bigint` (negative above `i64::MAX`); [`bits_u64`] undoes it.
pub fn bits_i64(v: u64) -> i64 {
    i64::from_ne_bytes(v.to_ne_bytes())
}

/// The identifier whose bit pattern [`bits_i64`] stored.
pub fn bits_u64(v: i64) -> u64 {
    u64::from_ne_bytes(v.to_ne_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_saturate_and_identifiers_round_trip() {
        assert_eq!(count_i64(7), 7);
        assert_eq!(count_i64(u64::MAX), i64::MAX);
        for v in [0, 1, 64769, u64::from(u32::MAX), i64::MAX as u64, 1 << 63, u64::MAX] {
            assert_eq!(bits_u64(bits_i64(v)), v);
        }
        assert_eq!(bits_i64(u64::MAX), -1);
    }
}
