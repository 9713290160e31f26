//! Decoding UTF-8 that arrives in pieces, with invalid sequences replaced by U+FFFD exactly as
//! [`String::from_utf8_lossy`] replaces them in the whole. Pure.
//!
//! A line's bytes are judged after lossy decoding (`indexer::judge::decode`); a line too long to
//! hold is decoded as it streams past, and must come out the same wherever the pieces were cut,
//! so that what is valid JSON does not depend on how the reader happened to fill its buffer.
//! Only a character cut by a piece boundary is held (at most three bytes).

/// What a replaced sequence becomes.
const REPLACEMENT: &str = "\u{fffd}";

/// A lossy UTF-8 decoder over pieces.
#[derive(Debug, Clone, Default)]
pub struct Utf8Stream {
    /// The start of a character the last piece cut: a valid prefix of one, never more than three
    /// bytes long.
    pending: [u8; 4],
    pending_len: usize,
    /// Whether any sequence was replaced.
    replaced: bool,
}

impl Utf8Stream {
    pub fn new() -> Utf8Stream {
        Utf8Stream::default()
    }

    /// Decodes `bytes`, handing `out` the text in order (whole characters only).
    pub fn push(&mut self, bytes: &[u8], out: &mut impl FnMut(&str)) {
        let mut rest = bytes;
        // First complete (or condemn) the character the last piece cut.
        while self.pending_len > 0 {
            let Some((&b, tail)) = rest.split_first() else { return };
            let Some(slot) = self.pending.get_mut(self.pending_len) else {
                // Unreachable: three valid bytes and any fourth are a character or invalid.
                self.condemn(out);
                continue;
            };
            *slot = b;
            let held = self.pending;
            let n = self.pending_len + 1;
            match std::str::from_utf8(held.get(..n).unwrap_or_default()) {
                Ok(c) => {
                    self.pending_len = 0;
                    out(c);
                    rest = tail;
                }
                Err(e) if e.error_len().is_none() => {
                    self.pending_len = n;
                    rest = tail;
                }
                // `b` does not continue the character: the held bytes are one invalid sequence
                // (`from_utf8_lossy` replaces the maximal valid prefix), and `b` starts afresh.
                Err(_) => self.condemn(out),
            }
        }
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    if !text.is_empty() {
                        out(text);
                    }
                    return;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    if let Ok(text) = std::str::from_utf8(valid) {
                        if !text.is_empty() {
                            out(text);
                        }
                    }
                    match e.error_len() {
                        Some(n) => {
                            self.replaced = true;
                            out(REPLACEMENT);
                            rest = after.get(n..).unwrap_or_default();
                        }
                        None => {
                            // A character cut at the end of the piece: at most three bytes.
                            let n = after.len().min(3);
                            if let (Some(to), Some(from)) = (self.pending.get_mut(..n), after.get(..n)) {
                                to.copy_from_slice(from);
                            }
                            self.pending_len = n;
                            return;
                        }
                    }
                }
            }
        }
    }

    /// The end of the bytes: a character still cut is one invalid sequence.
    pub fn finish(&mut self, out: &mut impl FnMut(&str)) {
        if self.pending_len > 0 {
            self.condemn(out);
        }
    }

    /// Whether any sequence was replaced by U+FFFD so far.
    pub fn replaced(&self) -> bool {
        self.replaced
    }

    /// The start of a character the last piece cut (at most three bytes): with
    /// [`replaced`](Utf8Stream::replaced), all a stream holds, for a saved state to keep.
    pub(crate) fn pending(&self) -> &[u8] {
        self.pending.get(..self.pending_len).unwrap_or_default()
    }

    /// The stream that holds `pending` (as [`pending`](Utf8Stream::pending) gave it) and has
    /// `replaced`; `None` when `pending` is not the start of one character cut short, which no
    /// stream holds (the decoding of the next piece relies on it).
    pub(crate) fn resumed(pending: &[u8], replaced: bool) -> Option<Utf8Stream> {
        let cut_short = match std::str::from_utf8(pending) {
            Ok(text) => text.is_empty(),
            Err(e) => e.valid_up_to() == 0 && e.error_len().is_none(),
        };
        if !cut_short || pending.len() > 3 {
            return None;
        }
        let mut held = [0; 4];
        held.get_mut(..pending.len())?.copy_from_slice(pending);
        Some(Utf8Stream { pending: held, pending_len: pending.len(), replaced })
    }

    fn condemn(&mut self, out: &mut impl FnMut(&str)) {
        self.pending_len = 0;
        self.replaced = true;
        out(REPLACEMENT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(pieces: &[&[u8]]) -> (String, bool) {
        let mut s = Utf8Stream::new();
        let mut text = String::new();
        for p in pieces {
            s.push(p, &mut |t| text.push_str(t));
        }
        s.finish(&mut |t| text.push_str(t));
        (text, s.replaced())
    }

    /// A stream rebuilt from what it holds, at every cut, decodes the rest as the original would;
    /// nothing but the start of one character cut short is taken for a held character.
    #[test]
    fn a_resumed_stream_goes_on_as_the_original() {
        let samples: &[&[u8]] =
            &[b"plain", "é日😀".as_bytes(), b"\xf0\x90\x80x", b"a\xc3", b"\xff\xe0\xa0", b"\xed\xa0\x80"];
        for whole in samples {
            for at in 0..=whole.len() {
                let mut s = Utf8Stream::new();
                let mut text = String::new();
                s.push(&whole[..at], &mut |t| text.push_str(t));
                let mut r =
                    Utf8Stream::resumed(s.pending(), s.replaced()).unwrap_or_else(|| panic!("{whole:?} at {at}"));
                r.push(&whole[at..], &mut |t| text.push_str(t));
                r.finish(&mut |t| text.push_str(t));
                assert_eq!(
                    (text.as_str(), r.replaced()),
                    (&*String::from_utf8_lossy(whole), std::str::from_utf8(whole).is_err())
                );
            }
        }
        for held in
            [b"\xf0\x90\x80\x80".as_slice(), b"a", b"\x80", b"\xc3a", b"\xff", b"\xe0\x80", b"\xf0\x90\x80\x80\x80"]
        {
            assert!(Utf8Stream::resumed(held, false).is_none(), "{held:?}");
        }
        assert_eq!(
            Utf8Stream::resumed(b"\xf0\x90\x80", true).map(|s| (s.pending().len(), s.replaced())),
            Some((3, true))
        );
    }

    /// Every split of every sample, and random bytes cut at random places, decode as the whole
    /// does with `from_utf8_lossy`.
    #[test]
    fn pieces_decode_as_the_whole() {
        let samples: &[&[u8]] = &[
            b"plain",
            "é日😀".as_bytes(),
            b"\xff\xfe",
            b"\xe0\x80\xaf",
            b"\xf0\x90\x80",
            b"\xf0\x90\x80x",
            b"a\xc3",
            b"\xed\xa0\x80",
            b"\xf4\x90\x80\x80",
            b"\xc0\xaf\xe0\xa0",
            "x\u{2028}\u{feff}".as_bytes(),
        ];
        for whole in samples {
            let want = String::from_utf8_lossy(whole);
            for a in 0..=whole.len() {
                for b in a..=whole.len() {
                    let (text, replaced) = decoded(&[&whole[..a], &whole[a..b], &whole[b..]]);
                    assert_eq!(text, want, "{whole:?} cut at {a} and {b}");
                    assert_eq!(replaced, std::str::from_utf8(whole).is_err());
                }
            }
        }
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        const BYTES: &[u8] = b"a\x80\xbf\xc2\xc3\xdf\xe0\xe1\xed\xef\xf0\xf4\xf5\xff\xa0\x90";
        for _ in 0..20_000 {
            let len = (next() % 24) as usize;
            let whole: Vec<u8> = (0..len).map(|_| BYTES[(next() % BYTES.len() as u64) as usize]).collect();
            let mut pieces = Vec::new();
            let mut at = 0;
            while at < whole.len() {
                let n = 1 + (next() % 4) as usize;
                pieces.push(&whole[at..(at + n).min(whole.len())]);
                at += n;
            }
            assert_eq!(decoded(&pieces).0, String::from_utf8_lossy(&whole), "{whole:?}");
        }
    }
}
