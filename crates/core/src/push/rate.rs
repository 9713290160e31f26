//! The per-source rate limit's table, pure: each source that pushed in the current second has an
//! entry of its own, keyed by a 128-bit digest of its name (two sources share one only if
//! SHA-256 collides), so a source never pays for another. An entry counts one-second windows, so
//! one not charged in the current second holds nothing worth keeping: it is free for any
//! source. The table is fixed (the shell keeps it in shared memory, under a lock), and a source
//! looks for its entry among `PROBE` places from its digest's; it is full for a source only when
//! all of those were charged by others in this very second. Such a source is not counted for that
//! second, rather than made to pay for the others.

use sha2::{Digest, Sha256};

/// Entries in the table: the most sources pushing in one second that always fit.
pub const SLOTS: usize = 8192;
/// Places a source looks for its entry, from its digest's.
pub const PROBE: usize = 64;
/// What one call counts for at least (so that the limit bounds calls too).
pub const CALL_BYTES: u64 = 512;

/// One source's count, for one window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Slot {
    /// A digest of the source's name; all zero when never used.
    key: [u8; 16],
    /// The one-second window counted (Unix seconds).
    window: i64,
    /// Bytes counted in it.
    bytes: u64,
}

/// What charging a push did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charge {
    /// Counted against the source's budget for this second.
    Counted,
    /// Refused: `before` bytes were counted in this second already, and these would pass the limit.
    Over { before: u64 },
    /// No entry was free for the source in this second: not counted.
    Full,
}

fn key_of(source: &str) -> [u8; 16] {
    let d = Sha256::digest(source.as_bytes());
    let mut k = [0u8; 16];
    k.copy_from_slice(&d[..16]);
    // All zero marks an unused entry; a digest that is all zero is moved off it.
    if k == [0u8; 16] {
        k[0] = 1;
    }
    k
}

/// Counts `bytes` of `source` against `limit` bytes per second in `now_s`'s window, or refuses
/// them. A call counts at least `CALL_BYTES`; a push larger than the whole budget passes when the
/// source's window is empty, so a limit below the chunk size slows a source down but never stops
/// it.
pub fn charge(slots: &mut [Slot], source: &str, bytes: u64, limit: u64, now_s: i64) -> Charge {
    let Some(slot) = slot_of(slots, source, now_s) else { return Charge::Full };
    let bytes = bytes.max(CALL_BYTES);
    let before = slot.bytes;
    if before > 0 && before.saturating_add(bytes) > limit {
        return Charge::Over { before };
    }
    slot.bytes = before.saturating_add(bytes);
    Charge::Counted
}

/// Counts `bytes` more of `source` in `now_s`'s window, never refusing them: what a push stored
/// beyond its chunk, known only once it is applied. The source's next push pays for them.
pub fn add(slots: &mut [Slot], source: &str, bytes: u64, now_s: i64) -> Charge {
    let Some(slot) = slot_of(slots, source, now_s) else { return Charge::Full };
    slot.bytes = slot.bytes.saturating_add(bytes);
    Charge::Counted
}

/// `source`'s entry for `now_s`'s window (emptied when it counted another window or was
/// another source's), or `None` when every place it may take was charged by others in it.
fn slot_of<'a>(slots: &'a mut [Slot], source: &str, now_s: i64) -> Option<&'a mut Slot> {
    let key = key_of(source);
    let n = slots.len();
    if n == 0 {
        return None;
    }
    let start = usize::from(u16::from_le_bytes([key[14], key[15]])) % n;
    let mut free = None;
    let mut own = None;
    for i in 0..PROBE.min(n) {
        let at = (start + i) % n;
        let Some(slot) = slots.get(at) else { continue };
        if slot.key == key {
            own = Some(at);
            break;
        }
        if free.is_none() && (slot.key == [0u8; 16] || slot.window != now_s) {
            free = Some(at);
        }
    }
    let slot = own.or(free).and_then(|at| slots.get_mut(at))?;
    if slot.key != key || slot.window != now_s {
        *slot = Slot { key, window: now_s, bytes: 0 };
    }
    Some(slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Vec<Slot> {
        vec![Slot::default(); SLOTS]
    }

    #[test]
    fn a_source_over_its_limit_is_refused_until_the_next_second() {
        let mut t = table();
        assert_eq!(charge(&mut t, "a", 600, 1000, 10), Charge::Counted);
        assert_eq!(charge(&mut t, "a", 600, 1000, 10), Charge::Over { before: 600 });
        assert_eq!(charge(&mut t, "a", 600, 1000, 11), Charge::Counted, "a new window");
        // A chunk larger than the whole budget passes into an empty window.
        assert_eq!(charge(&mut t, "b", 5000, 1000, 10), Charge::Counted);
        // Calls count at least CALL_BYTES.
        assert_eq!(charge(&mut t, "c", 1, 1000, 10), Charge::Counted);
        assert_eq!(charge(&mut t, "c", 1, 1000, 10), Charge::Over { before: CALL_BYTES });
    }

    #[test]
    fn bytes_stored_beyond_the_chunk_are_counted_and_refuse_the_next_push() {
        let mut t = table();
        assert_eq!(charge(&mut t, "a", 600, 1000, 10), Charge::Counted);
        assert_eq!(add(&mut t, "a", 900, 10), Charge::Counted, "never refused");
        assert_eq!(charge(&mut t, "a", 1, 1000, 10), Charge::Over { before: 1500 });
        assert_eq!(add(&mut t, "b", 0, 10), Charge::Counted);
        assert_eq!(charge(&mut t, "a", 1, 1000, 11), Charge::Counted, "a new window");
    }

    #[test]
    fn a_source_never_pays_for_another() {
        // Every source in a small table: each still has its own count.
        let mut t = vec![Slot::default(); PROBE];
        let names: Vec<String> = (0..PROBE).map(|i| format!("source-{i}")).collect();
        for name in &names {
            assert_eq!(charge(&mut t, name, 900, 1000, 7), Charge::Counted, "{name}");
        }
        for name in &names {
            assert_eq!(charge(&mut t, name, 900, 1000, 7), Charge::Over { before: 900 }, "{name}");
        }
        // Full for one more in the same second, which is then not counted rather than charged
        // to another; a second later the entries are free again.
        assert_eq!(charge(&mut t, "one-more", 900, 1000, 7), Charge::Full);
        assert_eq!(charge(&mut t, "one-more", 900, 1000, 8), Charge::Counted);
        assert_eq!(charge(&mut t, "one-more", 900, 1000, 8), Charge::Over { before: 900 });
    }

    #[test]
    fn thousands_of_sources_in_one_second_fit() {
        let mut t = table();
        let n = SLOTS / 2;
        for i in 0..n {
            assert_eq!(charge(&mut t, &format!("pod-{i}"), 100, 10_000, 3), Charge::Counted);
        }
        for i in 0..n {
            assert_eq!(
                charge(&mut t, &format!("pod-{i}"), 100, 10_000, 3),
                Charge::Counted,
                "pod-{i}: its own 1 024 bytes"
            );
        }
        assert_eq!(t.iter().filter(|s| s.window == 3).count(), n, "one entry each");
    }
}
