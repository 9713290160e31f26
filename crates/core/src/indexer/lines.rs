//! Reading a session file as lines, from a byte offset, in bounded memory. Pure `std::io`.
//!
//! A line is the bytes before a `\n` (the newline is not part of it); only the piece after the
//! last newline — the tail — may be unterminated. A line longer than the cap is reported by
//! length with its first bytes, and skipped without ever being held whole.

use std::io::{self, Read};

/// How many leading bytes of an over-long line are kept for its preview.
pub const OVERSIZE_HEAD_BYTES: usize = 1024;

/// One piece of the file.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// A line: its bytes (without the newline) and whether a newline ended it.
    Line { offset: u64, bytes: &'a [u8], terminated: bool },
    /// A line longer than the cap: its length and first bytes.
    Oversize { offset: u64, len: u64, head: Vec<u8>, terminated: bool },
}

impl Piece<'_> {
    pub fn offset(&self) -> u64 {
        match self {
            Piece::Line { offset, .. } | Piece::Oversize { offset, .. } => *offset,
        }
    }

    pub fn terminated(&self) -> bool {
        match self {
            Piece::Line { terminated, .. } | Piece::Oversize { terminated, .. } => *terminated,
        }
    }

    /// Bytes the piece spans in the file, its newline included.
    pub fn span(&self) -> u64 {
        let (len, nl) = match self {
            Piece::Line { bytes, terminated, .. } => (bytes.len() as u64, *terminated),
            Piece::Oversize { len, terminated, .. } => (*len, *terminated),
        };
        len + u64::from(nl)
    }
}

pub struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// File offset of `buf[start]`.
    offset: u64,
    max_line: usize,
    eof: bool,
}

impl<R: Read> LineReader<R> {
    /// Reads `inner`, which is positioned at file offset `offset`. Lines longer than
    /// `max_line` bytes are reported as [`Piece::Oversize`].
    pub fn new(inner: R, offset: u64, max_line: usize) -> LineReader<R> {
        let max_line = max_line.max(1);
        // Starts small; grows (up to the cap) only for long lines.
        let capacity = max_line.saturating_add(1).min(64 * 1024);
        LineReader { inner, buf: vec![0; capacity], start: 0, end: 0, offset, max_line, eof: false }
    }

    /// Moves unread bytes to the front and reads more; false at end of file.
    fn fill(&mut self) -> io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            // Full, with at most `max_line` pending bytes (longer is handled before refilling):
            // grow, up to the cap plus its newline.
            let limit = self.max_line.saturating_add(1);
            if self.buf.len() >= limit {
                return Ok(true);
            }
            let grown = self.buf.len().saturating_mul(2).min(limit);
            self.buf.resize(grown, 0);
        }
        loop {
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// The next piece, or `None` at the end of the file.
    pub fn next_piece(&mut self) -> io::Result<Option<Piece<'_>>> {
        let mut searched = 0;
        loop {
            let pending = self.end - self.start;
            if let Some(p) = memchr::memchr(b'\n', &self.buf[self.start + searched..self.end]) {
                let at = self.start + searched + p;
                let len = at - self.start;
                if len > self.max_line {
                    return self.oversize().map(Some);
                }
                let (start, offset) = (self.start, self.offset);
                self.start = at + 1;
                self.offset += len as u64 + 1;
                return Ok(Some(Piece::Line { offset, bytes: &self.buf[start..at], terminated: true }));
            }
            searched = pending;
            if pending > self.max_line {
                return self.oversize().map(Some);
            }
            if !self.fill()? {
                if self.end == self.start {
                    return Ok(None);
                }
                let (start, end, offset) = (self.start, self.end, self.offset);
                self.offset += (end - start) as u64;
                self.start = end;
                return Ok(Some(Piece::Line { offset, bytes: &self.buf[start..end], terminated: false }));
            }
            // `fill` moved the pending bytes to the front; `searched` counts from there.
        }
    }

    /// Skips an over-long line: the pending bytes start a line longer than the cap.
    fn oversize(&mut self) -> io::Result<Piece<'static>> {
        let offset = self.offset;
        let head = self.buf[self.start..self.end.min(self.start + OVERSIZE_HEAD_BYTES)].to_vec();
        let mut len: u64 = 0;
        loop {
            if let Some(p) = memchr::memchr(b'\n', &self.buf[self.start..self.end]) {
                len += p as u64;
                self.start += p + 1;
                self.offset += len + 1;
                return Ok(Piece::Oversize { offset, len, head, terminated: true });
            }
            len += (self.end - self.start) as u64;
            self.start = self.end;
            if !self.fill()? {
                self.offset += len;
                return Ok(Piece::Oversize { offset, len, head, terminated: false });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that returns at most `chunk` bytes per call, to exercise refills.
    struct Trickle<'a> {
        data: &'a [u8],
        chunk: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = self.data.len().min(self.chunk).min(out.len());
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[derive(Debug, PartialEq, Eq)]
    enum Owned {
        Line(u64, Vec<u8>, bool),
        Over(u64, u64, usize, bool),
    }

    fn pieces(data: &[u8], offset: u64, max_line: usize, chunk: usize) -> Vec<Owned> {
        let mut r = LineReader::new(Trickle { data, chunk }, offset, max_line);
        let mut out = Vec::new();
        while let Some(p) = r.next_piece().unwrap_or_else(|e| panic!("{e}")) {
            out.push(match p {
                Piece::Line { offset, bytes, terminated } => Owned::Line(offset, bytes.to_vec(), terminated),
                Piece::Oversize { offset, len, head, terminated } => Owned::Over(offset, len, head.len(), terminated),
            });
        }
        out
    }

    #[test]
    fn splits_on_newlines_with_offsets_and_an_unterminated_tail() {
        for chunk in [1, 2, 3, 7, 4096] {
            assert_eq!(
                pieces(b"ab\n\ncd\r\nef", 100, 1024, chunk),
                vec![
                    Owned::Line(100, b"ab".to_vec(), true),
                    Owned::Line(103, b"".to_vec(), true),
                    Owned::Line(104, b"cd\r".to_vec(), true),
                    Owned::Line(108, b"ef".to_vec(), false),
                ],
                "chunk {chunk}"
            );
            assert_eq!(pieces(b"x\n", 0, 1024, chunk), vec![Owned::Line(0, b"x".to_vec(), true)]);
            assert!(pieces(b"", 0, 1024, chunk).is_empty());
        }
    }

    #[test]
    fn over_long_lines_are_skipped_by_length_without_holding_them() {
        let mut data = vec![b'a'; 200_000];
        data.extend_from_slice(b"\nok\n");
        data.extend(vec![b'b'; 150_000]);
        for chunk in [1000, 65_536, 1 << 20] {
            assert_eq!(
                pieces(&data, 0, 100_000, chunk),
                vec![
                    Owned::Over(0, 200_000, OVERSIZE_HEAD_BYTES, true),
                    Owned::Line(200_001, b"ok".to_vec(), true),
                    Owned::Over(200_004, 150_000, OVERSIZE_HEAD_BYTES, false),
                ],
                "chunk {chunk}"
            );
        }
        // Exactly at the cap is a line; one byte more is not.
        let mut at_cap = vec![b'c'; 10];
        at_cap.push(b'\n');
        assert_eq!(pieces(&at_cap, 0, 10, 3), vec![Owned::Line(0, vec![b'c'; 10], true)]);
        let mut over = vec![b'c'; 11];
        over.push(b'\n');
        assert_eq!(pieces(&over, 0, 10, 3), vec![Owned::Over(0, 11, 11, true)]);
    }

    #[test]
    fn spans_add_up_to_the_bytes_read() {
        let data = b"{\"a\":1}\n\n  \nxyz";
        let mut r = LineReader::new(Trickle { data, chunk: 5 }, 0, 1024);
        let mut total = 0;
        while let Some(p) = r.next_piece().unwrap_or(None) {
            assert_eq!(p.offset(), total);
            total += p.span();
        }
        assert_eq!(total, data.len() as u64);
    }
}
