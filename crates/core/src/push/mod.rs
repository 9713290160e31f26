//! Push ingestion's rules, pure: where a pushed chunk lands against what the server holds of its
//! file, the unterminated tail the server keeps between chunks, the byte stream the tailer's own
//! line reader then reads, and when a pushed file's dialect is decided. The SQL side
//! (`append_session_bytes`) stores the state and runs `indexer::index_file` over [`Stream`], so a
//! pushed file's lines are judged by exactly the code that judges a tailed file's.
//!
//! A pushed file, as the server holds it: `committed` bytes whose lines are indexed (never an
//! unterminated tail, exactly as the tailer's offset), then the tail it holds (`held`): the
//! bytes after `committed` that do not end a line yet (or, before the file's dialect is
//! decided, every byte so far). The shipper resends from `committed`; a chunk may start anywhere
//! up to `committed + held.len` (the end of what the server has), and what it repeats is
//! skipped.

use std::io::{self, Read};

use crate::indexer::dialect::{detect, first_object, Dialect, DETECTION_PREFIX_BYTES};
use crate::indexer::discovery::{classify, is_uuid, Layout};
use crate::indexer::lines::{HoleSkip, Resume, OVERSIZE_HEAD_BYTES};

/// How many leading bytes of a pushed file the server keeps, to tell a rewritten file from a
/// replay: the tailer's fingerprint length.
pub const HEAD_BYTES: usize = 1024;

/// Where a chunk lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// It starts after the end of what the server has: refused, with the offset to send from.
    Gap { expected: u64 },
    /// Every byte of it is already here.
    Replay,
    /// Its bytes from `skip` on are new.
    Continue { skip: usize },
    /// It repeats the file's first bytes, and they differ: the file was rewritten in place.
    Rewritten,
}

/// Where a chunk of `len` bytes starting at `start` lands in a file of which the server has
/// `have` bytes (committed plus held) and whose first bytes are `head`.
pub fn place(have: u64, head: &[u8], start: u64, chunk: &[u8]) -> Placement {
    if let Ok(at) = usize::try_from(start) {
        if let Some(known) = head.get(at..) {
            let n = known.len().min(chunk.len());
            if known.get(..n) != chunk.get(..n) {
                return Placement::Rewritten;
            }
        }
    }
    if start > have {
        return Placement::Gap { expected: have };
    }
    let end = start.saturating_add(chunk.len() as u64);
    if end <= have {
        return Placement::Replay;
    }
    Placement::Continue { skip: usize::try_from(have - start).unwrap_or(usize::MAX) }
}

/// The head a file's first bytes give once `new` (which starts at file offset `at`) is added.
pub fn grow_head(head: &mut Vec<u8>, at: u64, new: &[u8]) {
    if head.len() >= HEAD_BYTES || at != head.len() as u64 {
        return;
    }
    let take = (HEAD_BYTES - head.len()).min(new.len());
    head.extend_from_slice(new.get(..take).unwrap_or_default());
}

/// The unterminated tail the server holds after the committed offset: its bytes, all of them
/// while they fit in `keep` bytes; beyond that only their first [`OVERSIZE_HEAD_BYTES`] (a line
/// that long is reported by its length and first bytes, whatever the rest holds), with `len`
/// counting them all.
///
/// An over-long line is not kept, but it still streams across pushes: `reduction` is the state
/// of the reducer that saw every byte of it so far ([`crate::json::reduce::Reducer::to_bytes`],
/// bounded by the reduction's share of `max_line_memory` for a line of any length),
/// and the next push goes on from it ([`Held::resume`]). When the line ends (its newline, or
/// `final`) it is judged from its reduction, exactly as the tailer judges a line it read whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    pub bytes: Vec<u8>,
    pub len: u64,
    /// For an over-long line (`truncated`): its reducer's state. `None` there (a row from before
    /// this was kept, or a state that could not be read back) leaves the line unknown, judged
    /// corrupt at its end.
    pub reduction: Option<Vec<u8>>,
}

impl Held {
    /// Whether only the first bytes are kept.
    pub fn truncated(&self) -> bool {
        (self.bytes.len() as u64) < self.len
    }

    /// The over-long line this tail is, to go on with, when its reducer's state reads back.
    pub fn resume(&self) -> Option<Resume> {
        if !self.truncated() {
            return None;
        }
        let reducer = crate::json::reduce::Reducer::from_bytes(self.reduction.as_deref()?)?;
        Some(Resume { len: self.len, head: self.bytes.clone(), reducer })
    }
}

/// How many held bytes are kept whole: a line up to the line cap (and its newline) is judged
/// whole, and before a file's dialect is decided the first [`DETECTION_PREFIX_BYTES`] are what
/// detection reads.
pub fn keep_whole(max_line_bytes: usize) -> usize {
    max_line_bytes.saturating_add(1).max(DETECTION_PREFIX_BYTES)
}

/// The stream the line reader reads for a push: the held tail (its kept bytes, then the rest
/// of its length as a hole, which the reader steps over as it steps over a sparse file's
/// holes: only an over-long line has one, and only its length matters), then the new bytes.
pub struct Stream<'a> {
    held: &'a [u8],
    hole: u64,
    new: &'a [u8],
}

impl<'a> Stream<'a> {
    pub fn new(held: &'a Held, new: &'a [u8]) -> Stream<'a> {
        Stream { held: &held.bytes, hole: held.len.saturating_sub(held.bytes.len() as u64), new }
    }

    /// The new bytes alone: for a held over-long line the reader resumes ([`Held::resume`]).
    pub fn after_held(new: &'a [u8]) -> Stream<'a> {
        Stream { held: &[], hole: 0, new }
    }
}

impl Read for Stream<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if !self.held.is_empty() {
            let n = self.held.len().min(out.len());
            out[..n].copy_from_slice(&self.held[..n]);
            self.held = &self.held[n..];
            return Ok(n);
        }
        if self.hole > 0 {
            // Zeros hold no newline, as a hole of a sparse file reads.
            let n = usize::try_from(self.hole).unwrap_or(usize::MAX).min(out.len());
            out[..n].fill(0);
            self.hole -= n as u64;
            return Ok(n);
        }
        let n = self.new.len().min(out.len());
        out[..n].copy_from_slice(&self.new[..n]);
        self.new = &self.new[n..];
        Ok(n)
    }
}

impl HoleSkip for Stream<'_> {
    fn skip_hole(&mut self) -> io::Result<u64> {
        if self.held.is_empty() {
            let skipped = self.hole;
            self.hole = 0;
            return Ok(skipped);
        }
        Ok(0)
    }
}

/// What the server holds after a push: the stream (`held`, then `new`) was consumed up to
/// `consumed` bytes (the committed offset moved that far, always to the end of a line, since
/// indexing stops only at an unterminated tail); what is left is held, whole while it fits in
/// `keep` bytes ([`keep_whole`]). `reduction` is the indexing's state of the over-long line the
/// tail is, when it is one (`Progress::pending_reduction`): kept with it.
pub fn held_after(held: &Held, new: &[u8], consumed: u64, keep: usize, reduction: Option<Vec<u8>>) -> Held {
    let mut after = if consumed >= held.len {
        let from = usize::try_from(consumed - held.len).unwrap_or(usize::MAX).min(new.len());
        kept(new.get(from..).unwrap_or_default(), &[], keep)
    } else if held.truncated() {
        // An over-long line with no end yet (nothing of it can have been consumed): its first
        // bytes stay, and it grows.
        Held { bytes: held.bytes.clone(), len: held.len - consumed + new.len() as u64, reduction: None }
    } else {
        let from = usize::try_from(consumed).unwrap_or(usize::MAX).min(held.bytes.len());
        kept(held.bytes.get(from..).unwrap_or_default(), new, keep)
    };
    if after.truncated() {
        after.reduction = reduction;
    }
    after
}

/// How the stored held tail changes after a push: the tail is kept as pieces (rows of their own,
/// each the bytes from its start `at` in the tail to the next piece's), so that a push that only
/// adds to an unterminated line writes about its own bytes instead of the whole tail again.
///
/// The pieces at or after `cut` go, then `piece` is written at `at` (nothing when empty).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeldWrite {
    pub cut: Option<u64>,
    pub at: u64,
    pub piece: Vec<u8>,
}

impl HeldWrite {
    /// Bytes this write stores.
    pub fn written(&self) -> u64 {
        self.piece.len() as u64
    }
}

/// What turns the stored pieces of `before` (their starts, `pieces`) into `after`, the tail a
/// push leaves when it consumed `consumed` bytes of the stream.
///
/// When the push only added bytes (nothing consumed, both kept whole), they go on as a new
/// piece. To keep the pieces few, every piece stays larger than all the pieces after it
/// together: the new piece absorbs the pieces from the first one that would not be. A tail then
/// has at most log2 of its length pieces, and a byte is written again at most that many times
/// (each time into a piece at least twice the size of the one it was in). Anything else (lines
/// consumed, the tail cut to an over-long line's first bytes, pieces that do not describe
/// `before`) writes `after` as one piece in place of all.
pub fn held_write(before: &Held, pieces: &[u64], after: &Held, consumed: u64) -> HeldWrite {
    if consumed == 0 && after.bytes == before.bytes {
        // Nothing kept changed (a replay, or an over-long line that only grew in length).
        return HeldWrite { cut: None, at: before.bytes.len() as u64, piece: Vec::new() };
    }
    let old = before.bytes.len() as u64;
    let appended = consumed == 0
        && !before.truncated()
        && !after.truncated()
        && after.bytes.get(..before.bytes.len()) == Some(before.bytes.as_slice())
        && pieces_describe(pieces, old);
    if !appended {
        return HeldWrite { cut: Some(0), at: 0, piece: after.bytes.clone() };
    }
    // From the last piece back: the bytes after each piece (the new ones included); the
    // earliest piece no larger than those is where the merged piece starts.
    let mut end = old;
    let mut cut = None;
    for &start in pieces.iter().rev() {
        let after_it = after.bytes.len() as u64 - end;
        if end - start <= after_it {
            cut = Some(start);
        }
        end = start;
    }
    let at = cut.unwrap_or(old);
    let piece = after.bytes.get(usize::try_from(at).unwrap_or(usize::MAX)..).unwrap_or_default().to_vec();
    HeldWrite { cut, at, piece }
}

/// Whether `pieces` are the starts of pieces that make up `len` bytes: the first at 0, strictly
/// increasing, each within them (none when there are none).
fn pieces_describe(pieces: &[u64], len: u64) -> bool {
    match pieces.first() {
        None => len == 0,
        Some(&first) => first == 0 && pieces.windows(2).all(|w| w[0] < w[1]) && pieces.last().is_some_and(|&l| l < len),
    }
}

/// `a` then `b`, held: whole up to `keep` bytes, else their first [`OVERSIZE_HEAD_BYTES`].
fn kept(a: &[u8], b: &[u8], keep: usize) -> Held {
    let len = a.len() + b.len();
    if len <= keep {
        let mut bytes = Vec::with_capacity(len);
        bytes.extend_from_slice(a);
        bytes.extend_from_slice(b);
        return Held { bytes, len: len as u64, reduction: None };
    }
    let mut bytes = a.get(..OVERSIZE_HEAD_BYTES.min(a.len())).unwrap_or_default().to_vec();
    let more = OVERSIZE_HEAD_BYTES.saturating_sub(bytes.len()).min(b.len());
    bytes.extend_from_slice(b.get(..more).unwrap_or_default());
    Held { bytes, len: len as u64, reduction: None }
}

/// A pushed file's path below its node's sessions directory, checked: relative, plain
/// components (no `.`, `..` or empty ones), selected by the discovery rule, its first component
/// a job id. Returns the job directory, the file name and the layout.
pub fn check_relpath(relpath: &str) -> Result<(String, String, Layout), String> {
    if relpath.starts_with('/') {
        return Err(
            "it is absolute: give the path below the node's sessions directory (<job_id>/session-001.jsonl)".into()
        );
    }
    if relpath.len() > 1024 {
        return Err("it is longer than 1024 bytes".into());
    }
    let parts: Vec<&str> = relpath.split('/').collect();
    if parts.iter().any(|p| p.is_empty() || *p == "." || *p == "..") {
        return Err("it has an empty, \".\" or \"..\" component".into());
    }
    if parts.iter().any(|p| p.bytes().any(|b| b < 0x20 || b == 0x7f)) {
        return Err("it holds a control character".into());
    }
    let Some(layout) = classify(&parts) else {
        return Err("the discovery rule does not select it (<job_id>/<name>.jsonl)".into());
    };
    let job_dir = parts.first().copied().unwrap_or_default();
    if !is_uuid(job_dir) {
        return Err(format!("its first component \"{job_dir}\" is not a job id"));
    }
    let file_name = parts.last().copied().unwrap_or_default();
    Ok((job_dir.to_ascii_lowercase(), file_name.to_owned(), layout))
}

/// The dialect of a pushed file, from its first bytes (`prefix`, from offset 0; `whole` when
/// they are the whole file: a final push), as the tailer detects a file's: decided once a
/// complete line in the first [`DETECTION_PREFIX_BYTES`] is an object, or once those bytes hold
/// none (the name decides), or at the end of the file. `None`: not decided yet, hold the bytes.
pub fn decide_dialect(file_name: &str, layout: Layout, prefix: &[u8], whole: bool) -> Option<Option<Dialect>> {
    let window = prefix.get(..DETECTION_PREFIX_BYTES).unwrap_or(prefix);
    let whole_window = whole && window.len() == prefix.len();
    if let Some(first) = first_object(window, whole_window) {
        return Some(detect(file_name, layout, Some(&first)));
    }
    if whole || prefix.len() >= DETECTION_PREFIX_BYTES {
        return Some(detect(file_name, layout, None));
    }
    None
}

/// The path the first file pushed under `relpath` is recorded under in `session_file`:
/// `push:/<relpath>` (a later file under the same relpath gets `#n` after it, numbered where it
/// is created, under the relpath's lock).
pub fn recorded_path(relpath: &str) -> String {
    format!("push:/{relpath}")
}

/// A source name: 1 to 128 characters of letters, digits, `.`, `_`, `:` and `-`.
pub fn check_source(source: &str) -> Result<(), String> {
    let ok = !source.is_empty()
        && source.len() <= 128
        && source.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
    if ok {
        Ok(())
    } else {
        Err("a source is 1 to 128 characters of letters, digits, '.', '_', ':' and '-'".into())
    }
}

/// A file identity: 1 to 256 printable ASCII characters.
pub fn check_identity(identity: &str) -> Result<(), String> {
    let ok = !identity.is_empty() && identity.len() <= 256 && identity.bytes().all(|b| (0x21..0x7f).contains(&b));
    if ok {
        Ok(())
    } else {
        Err("a file identity is 1 to 256 printable ASCII characters (the shipper's device:inode:fingerprint)".into())
    }
}

/// A positive 63-bit number standing for an identity where `session_file` wants an inode.
pub fn identity_number(identity: &str) -> i64 {
    // FNV-1a, 64-bit, folded to a positive i64.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in identity.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    i64::try_from(h >> 1).unwrap_or(i64::MAX).max(1)
}

pub mod rate;
pub mod source_token;
#[cfg(test)]
mod tests;
