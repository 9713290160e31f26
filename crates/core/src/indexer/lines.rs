//! Reading a session file as lines, from a byte offset, in bounded memory. Pure `std::io`.
//!
//! A line is the bytes before a `\n` (the newline is not part of it); only the piece after the
//! last newline — the tail — may be unterminated. A line longer than the cap is reported by
//! length with its first bytes, and skipped without ever being held whole.
//!
//! While an over-long line streams past it is shown to a [`Reducer`]: a line that is valid JSON
//! comes with a bounded summary of itself ([`Reduced`]), so that a long tool result is an event
//! like any other (the indexer decides), in memory bounded by the reducer's [`Limits`] rather
//! than by the line.
//!
//! Skipping an over-long line is bounded too: holes of a sparse file (which read as zeros and
//! hold no newline) are stepped over without being read ([`HoleSkip`]), and after
//! [`MAX_SCAN_BYTES`] of data without a newline the scan stops: the line, as far as it was
//! read, is reported unterminated and the reader ends, so one hostile file costs a bounded read
//! per pass however large it claims to be.

use std::io::{self, Read};

use crate::json::reduce::{Limits, Reduced, Reducer};

/// How many leading bytes of an over-long line are kept for its preview.
pub const OVERSIZE_HEAD_BYTES: usize = 1024;

/// The most data read while looking for the end of an over-long line.
pub const MAX_SCAN_BYTES: u64 = 256 * 1024 * 1024;

/// A reader that can step over a hole (a sparse file's unwritten range, all zeros) at its
/// position instead of reading it. The default steps over nothing.
pub trait HoleSkip {
    /// Moves past the hole the reader is in, if any; returns how many bytes it skipped.
    fn skip_hole(&mut self) -> io::Result<u64> {
        Ok(0)
    }
}

impl HoleSkip for &[u8] {}
impl<T: HoleSkip + ?Sized> HoleSkip for &mut T {
    fn skip_hole(&mut self) -> io::Result<u64> {
        (**self).skip_hole()
    }
}

/// One piece of the file.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// A line: its bytes (without the newline) and whether a newline ended it.
    Line { offset: u64, bytes: &'a [u8], terminated: bool },
    /// A line longer than the cap: its length and first bytes, and its reduction when it is
    /// valid JSON that could be summarised and was read to its end (a newline, or the end of the
    /// file; not a scan cut short by [`MAX_SCAN_BYTES`] or bytes stepped over in a hole).
    /// `pending`, for one the end of the input left unterminated: its reducer's state
    /// ([`Reducer::to_bytes`]), to go on with when more of the line comes ([`Resume`]).
    Oversize {
        offset: u64,
        len: u64,
        head: Vec<u8>,
        terminated: bool,
        reduced: Option<Reduced>,
        pending: Option<Vec<u8>>,
    },
}

/// An over-long line whose beginning an earlier call read, to go on with: push ingestion keeps a
/// line's first bytes and its reducer between pushes, never the line itself. `len` bytes of it
/// were read; the reducer saw every one.
#[derive(Debug, Clone)]
pub struct Resume {
    pub len: u64,
    pub head: Vec<u8>,
    pub reducer: Reducer,
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
    /// What an over-long line's reduction may keep.
    reduce: Limits,
    eof: bool,
    /// The over-long line the input continues, read in an earlier call.
    resume: Option<Resume>,
}

impl<R: Read + HoleSkip> LineReader<R> {
    /// Reads `inner`, which is positioned at file offset `offset`. Lines longer than
    /// `max_line` bytes are reported as [`Piece::Oversize`], reduced within `reduce`.
    pub fn new(inner: R, offset: u64, max_line: usize, reduce: Limits) -> LineReader<R> {
        let max_line = max_line.max(1);
        // Starts small; grows (up to the cap) only for long lines.
        let capacity = max_line.saturating_add(1).min(64 * 1024);
        LineReader {
            inner,
            buf: vec![0; capacity],
            start: 0,
            end: 0,
            offset,
            max_line,
            reduce,
            eof: false,
            resume: None,
        }
    }

    /// Reads `inner`, which continues over-long line `resume` (begun at file offset `offset`):
    /// its first piece is that line, from `resume`'s state on.
    pub fn resuming(inner: R, offset: u64, resume: Resume, max_line: usize, reduce: Limits) -> LineReader<R> {
        let mut r = LineReader::new(inner, offset, max_line, reduce);
        r.resume = Some(resume);
        r
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
        if let Some(resume) = self.resume.take() {
            return self.oversize_from(resume).map(Some);
        }
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

    /// Skips an over-long line: the pending bytes start a line longer than the cap. Its bytes go
    /// through a reducer as they pass. Holes are stepped over (the reduction is then unknown);
    /// past [`MAX_SCAN_BYTES`] of data the scan stops and the reader ends.
    fn oversize(&mut self) -> io::Result<Piece<'static>> {
        let head = self.buf[self.start..self.end.min(self.start + OVERSIZE_HEAD_BYTES)].to_vec();
        self.oversize_from(Resume { len: 0, head, reducer: Reducer::new(self.reduce) })
    }

    /// [`oversize`](Self::oversize), for a line of which `resume.len` bytes were read before
    /// (the pending bytes, if any, continue it).
    fn oversize_from(&mut self, resume: Resume) -> io::Result<Piece<'static>> {
        let offset = self.offset;
        let Resume { len: before, head, mut reducer } = resume;
        let (mut len, mut scanned): (u64, u64) = (before, 0);
        loop {
            let pending = &self.buf[self.start..self.end];
            if let Some(p) = memchr::memchr(b'\n', pending) {
                reducer.feed(&pending[..p]);
                len += p as u64;
                self.start += p + 1;
                self.offset += len + 1;
                let reduced = reducer.finish().ok();
                return Ok(Piece::Oversize { offset, len, head, terminated: true, reduced, pending: None });
            }
            reducer.feed(pending);
            let n = pending.len() as u64;
            len += n;
            scanned += n;
            self.start = self.end;
            if scanned >= MAX_SCAN_BYTES {
                self.eof = true;
                self.offset += len;
                // Not read to its end: nothing is known of what it is.
                return Ok(Piece::Oversize { offset, len, head, terminated: false, reduced: None, pending: None });
            }
            // The buffer is spent: a hole here holds no newline, so it is part of the line.
            let hole = self.inner.skip_hole()?;
            reducer.skip(hole);
            len += hole;
            if !self.fill()? {
                self.offset += len;
                // The end of the file ends the line (judged once the file has settled); or more
                // of it comes later (a push), and the reducer goes on from here.
                let pending = Some(reducer.to_bytes());
                let reduced = reducer.finish().ok();
                return Ok(Piece::Oversize { offset, len, head, terminated: false, reduced, pending });
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

    impl HoleSkip for Trickle<'_> {}

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

    fn limits() -> Limits {
        Limits::for_line_memory(64 << 20)
    }

    /// The pieces, and the reduced text of each over-long one.
    fn read_all(data: &[u8], offset: u64, max_line: usize, chunk: usize) -> (Vec<Owned>, Vec<Option<String>>) {
        let mut r = LineReader::new(Trickle { data, chunk }, offset, max_line, limits());
        let (mut out, mut reduced) = (Vec::new(), Vec::new());
        while let Some(p) = r.next_piece().unwrap_or_else(|e| panic!("{e}")) {
            out.push(match p {
                Piece::Line { offset, bytes, terminated } => Owned::Line(offset, bytes.to_vec(), terminated),
                Piece::Oversize { offset, len, head, terminated, reduced: r, .. } => {
                    reduced.push(r.map(|r| r.text));
                    Owned::Over(offset, len, head.len(), terminated)
                }
            });
        }
        (out, reduced)
    }

    fn pieces(data: &[u8], offset: u64, max_line: usize, chunk: usize) -> Vec<Owned> {
        read_all(data, offset, max_line, chunk).0
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
        let mut r = LineReader::new(Trickle { data, chunk: 5 }, 0, 1024, limits());
        let mut total = 0;
        while let Some(p) = r.next_piece().unwrap_or(None) {
            assert_eq!(p.offset(), total);
            total += p.span();
        }
        assert_eq!(total, data.len() as u64);
    }

    /// Endless bytes without a newline, with a hole of `hole` bytes to step over first.
    struct Endless {
        hole: u64,
        read: u64,
    }

    impl HoleSkip for Endless {
        fn skip_hole(&mut self) -> io::Result<u64> {
            Ok(std::mem::take(&mut self.hole))
        }
    }

    impl Read for Endless {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            out.fill(b'x');
            self.read += out.len() as u64;
            Ok(out.len())
        }
    }

    #[test]
    fn an_endless_line_is_read_only_so_far_and_holes_are_stepped_over() {
        let mut inner = Endless { hole: 1 << 40, read: 0 };
        let (len, terminated) = {
            let mut r = LineReader::new(&mut inner, 0, 1024, limits());
            let piece = r.next_piece().unwrap_or_else(|e| panic!("{e}"));
            let got = match piece {
                Some(Piece::Oversize { len, terminated, reduced: None, .. }) => (len, terminated),
                other => panic!("{other:?}"),
            };
            assert_eq!(r.next_piece().ok().flatten().map(|p| p.offset()), None, "the reader ends after the bound");
            got
        };
        assert!(!terminated);
        assert!(inner.read <= MAX_SCAN_BYTES + (2 << 20), "read {} bytes", inner.read);
        assert!(len >= (1 << 40) + MAX_SCAN_BYTES, "the hole counts in the line's length: {len}");
    }

    #[test]
    fn over_long_lines_that_are_json_come_with_their_reduction_wherever_reads_end() {
        let long = format!("{{\"type\":\"A\",\"timestamp\":\"t\",\"pad\":\"{}\"}}", "x".repeat(150_000));
        let broken = format!("{{\"type\":\"B\",\"pad\":\"{}\"", "y".repeat(150_000));
        let data = format!("{long}\n{broken}\nok\n{long}");
        let mut seen = None;
        for chunk in [1000, 4096, 65_536, 1 << 20] {
            let (pieces, reduced) = read_all(data.as_bytes(), 0, 100_000, chunk);
            assert_eq!(pieces.len(), 4, "chunk {chunk}");
            assert_eq!(pieces[2], Owned::Line(long.len() as u64 + broken.len() as u64 + 2, b"ok".to_vec(), true));
            let text = reduced[0].clone().unwrap_or_else(|| panic!("chunk {chunk}: no reduction"));
            assert!(text.contains("\"cortex_buffer:truncated\":{\"bytes\":150000,"), "{}", &text[..200]);
            assert_eq!(reduced[1], None, "not JSON");
            assert_eq!(reduced[2].as_ref(), Some(&text), "the unterminated tail ends at the end of the file");
            assert_eq!(*seen.get_or_insert_with(|| text.clone()), text, "the same whatever the reads");
        }
    }

    #[test]
    fn a_line_with_bytes_stepped_over_has_no_reduction() {
        use crate::push::{Held, Stream};
        let line = format!("{{\"type\":\"A\",\"timestamp\":\"t\",\"pad\":\"{}\"}}\n", "x".repeat(5000));
        let whole = Held { bytes: line.as_bytes()[..3000].to_vec(), len: 3000, reduction: None };
        let cut = Held { bytes: line.as_bytes()[..OVERSIZE_HEAD_BYTES].to_vec(), len: 3000, reduction: None };
        let rest = &line.as_bytes()[3000..];
        let reduced = |held: &Held| {
            let mut r = LineReader::new(Stream::new(held, rest), 0, 2048, limits());
            match r.next_piece() {
                Ok(Some(Piece::Oversize { reduced, terminated: true, .. })) => reduced.is_some(),
                other => panic!("{other:?}"),
            }
        };
        assert!(reduced(&whole));
        assert!(!reduced(&cut), "the hole stands for bytes not kept: unknown");
    }
}
