//! Push against the tailer: however a file is cut into chunks, resent, repeated or pushed with
//! gaps, the rows and the progress are the tailer's for the same bytes.

use super::*;
use crate::indexer::dialect::Dialect;
use crate::indexer::index_file::tests::Collect;
use crate::indexer::index_file::{index_file, FileRules, Progress};

const E: &str = r#"{"type":"TOOL_START","timestamp":"2026-01-01T00:00:00Z","job_id":"j","seq":1,"tool_name":"é"}"#;

fn rules(settled: bool, max_line_bytes: usize) -> FileRules<'static> {
    FileRules {
        dialect: Some(Dialect::CortexSpike),
        job_dir: "job",
        max_line_bytes,
        max_line_memory: 64 << 20,
        settled,
        max_bytes: u64::MAX,
        resume: None,
    }
}

/// The tailer: the whole file, settled.
fn tailed(data: &[u8], max_line: usize) -> (Progress, Collect) {
    let mut sink = Collect::default();
    let p =
        index_file(data, Progress::default(), &rules(true, max_line), &mut sink).unwrap_or_else(|e| panic!("{e:?}"));
    (p, sink)
}

/// What the server holds of a pushed file.
#[derive(Default)]
struct Server {
    progress: Progress,
    held: Held,
    head: Vec<u8>,
    sink: Collect,
    /// The held tail as stored: its pieces, `(start, bytes)`, and the bytes they took to write.
    pieces: Vec<(u64, Vec<u8>)>,
    written: u64,
}

impl Server {
    fn have(&self) -> u64 {
        self.progress.offset + self.held.len
    }

    /// One push, as append_session_bytes applies it.
    fn push(&mut self, start: u64, chunk: &[u8], last: bool, max_line: usize) -> Placement {
        let placement = place(self.have(), &self.head, start, chunk);
        let new: &[u8] = match placement {
            Placement::Continue { skip } => &chunk[skip..],
            Placement::Replay if last => &[],
            _ => return placement,
        };
        let have = self.have();
        grow_head(&mut self.head, have, new);
        let from = self.progress.offset;
        // A held over-long line goes on from its reducer's state; anything else from its bytes.
        let resume = self.held.resume();
        let reader = if resume.is_some() { Stream::after_held(new) } else { Stream::new(&self.held, new) };
        let mut rules = rules(last, max_line);
        rules.resume = resume.as_ref();
        let p = index_file(reader, self.progress.clone(), &rules, &mut self.sink).unwrap_or_else(|e| panic!("{e:?}"));
        let after = held_after(&self.held, new, p.offset - from, keep_whole(max_line), p.pending_reduction.clone());
        self.store(&after, p.offset - from);
        self.held = after;
        self.progress = p;
        placement
    }

    /// Stores `after` as the shell does, and checks that the pieces hold exactly its bytes.
    fn store(&mut self, after: &Held, consumed: u64) {
        let starts: Vec<u64> = self.pieces.iter().map(|(at, _)| *at).collect();
        let w = held_write(&self.held, &starts, after, consumed);
        if let Some(cut) = w.cut {
            self.pieces.retain(|(at, _)| *at < cut);
        }
        if !w.piece.is_empty() {
            self.pieces.push((w.at, w.piece.clone()));
        }
        self.written += w.written();
        let stored: Vec<u8> = self.pieces.iter().flat_map(|(_, b)| b.iter().copied()).collect();
        assert_eq!(stored, after.bytes, "the pieces hold the tail");
        let mut at = 0;
        for (start, bytes) in &self.pieces {
            assert_eq!(*start, at, "pieces follow each other");
            at += bytes.len() as u64;
        }
        let bound = 1 + (after.bytes.len().max(1) as f64).log2() as usize + 1;
        assert!(self.pieces.len() <= bound, "{} pieces for {} bytes", self.pieces.len(), after.bytes.len());
    }
}

/// A small deterministic generator (xorshift).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A file of valid lines, broken lines, blank lines, an over-long line, multi-byte characters
/// and a crash-cut tail.
fn file(rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..(5 + rng.below(30)) {
        match rng.below(8) {
            0 => out.extend_from_slice(b"{\"type\":\"TOOL_START\",\"cut"),
            1 => out.extend_from_slice(b"   "),
            2 => out.extend_from_slice(format!("{{\"blob\":\"{}\"}}", "x".repeat(3000)).as_bytes()),
            3 => out.extend_from_slice("{\"type\":\"X\",\"text\":\"\u{1F600}\u{e9}\"}".as_bytes()),
            _ => out.extend_from_slice(E.replace("\"seq\":1", &format!("\"seq\":{i}")).as_bytes()),
        }
        out.push(b'\n');
    }
    if rng.below(2) == 0 {
        out.extend_from_slice(b"{\"type\":\"TOOL_RESULT\",\"timestamp\":\"2026-01-01T00");
    }
    out
}

fn same(a: &(Progress, Collect), b: &(Progress, Collect), what: &str) {
    assert_eq!(a.0, b.0, "{what}: progress");
    let events = |c: &Collect| c.events.iter().map(|e| (e.0, e.1, e.3.clone(), e.4.clone())).collect::<Vec<_>>();
    assert_eq!(events(&a.1), events(&b.1), "{what}: events");
    assert_eq!(a.1.corrupt, b.1.corrupt, "{what}: corrupt lines");
}

#[test]
fn any_cut_into_chunks_resent_from_the_committed_offset_gives_the_tailers_rows() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..300 {
        let data = file(&mut rng);
        // A line cap small enough that the 3000-byte lines are over it in some rounds.
        let max_line = if round % 3 == 0 { 2048 } else { 1 << 20 };
        let want = tailed(&data, max_line);
        let mut server = Server::default();
        let mut sent_to = 0usize;
        let mut pushes = 0;
        while server.progress.offset < data.len() as u64 || sent_to < data.len() {
            pushes += 1;
            assert!(pushes < 10_000, "round {round} makes no progress");
            // The shipper sends from what it last sent (or from the committed offset after a
            // "restart"), a random amount, sometimes repeating what was sent.
            let from = match rng.below(5) {
                0 => server.progress.offset as usize,
                1 => sent_to.saturating_sub(rng.below(50) as usize),
                _ => sent_to,
            };
            let from = from.min(server.have() as usize);
            let to = (from + 1 + rng.below(700) as usize).min(data.len());
            let last = to == data.len();
            let placement = server.push(from as u64, &data[from..to], last, max_line);
            assert!(!matches!(placement, Placement::Gap { .. } | Placement::Rewritten), "round {round}: {placement:?}");
            sent_to = sent_to.max(to);
            if last && server.held.len == 0 {
                break;
            }
        }
        same(&(server.progress, server.sink), &want, &format!("round {round}"));
    }
}

#[test]
fn a_fully_replayed_chunk_changes_nothing_and_one_past_the_end_is_a_gap() {
    let data = format!("{E}\n{E}\n{{\"partial");
    let mut s = Server::default();
    let first = s.push(0, data.as_bytes(), false, 1 << 20);
    assert_eq!(first, Placement::Continue { skip: 0 });
    let committed = s.progress.offset;
    assert_eq!(committed as usize, 2 * (E.len() + 1), "the tail is never committed");
    assert_eq!(s.held.len as usize, "{\"partial".len());
    let rows = s.sink.events.len();
    // Everything again, and a part of it: nothing changes.
    assert_eq!(s.push(0, data.as_bytes(), false, 1 << 20), Placement::Replay);
    assert_eq!(s.push(5, &data.as_bytes()[5..40], false, 1 << 20), Placement::Replay);
    assert_eq!((s.sink.events.len(), s.progress.offset), (rows, committed));
    // One byte past what the server has: refused, with where to send from.
    let have = s.have();
    assert_eq!(s.push(have + 1, b"x", false, 1 << 20), Placement::Gap { expected: have });
    // Resent from the committed offset with the rest of the line: the held bytes are skipped.
    let rest = "{\"partial\":1}\n".to_owned();
    let mut chunk = b"{\"partial".to_vec();
    chunk.extend_from_slice(&rest.as_bytes()["{\"partial".len()..]);
    assert_eq!(s.push(committed, &chunk, false, 1 << 20), Placement::Continue { skip: 9 });
    assert_eq!(s.held.len, 0);
    assert_eq!(s.sink.corrupt.len(), 1, "{{\"partial\":1}} has no timestamp: corrupt, as the tailer judges it");
}

#[test]
fn a_rewritten_start_is_told_apart_from_a_replay() {
    let mut s = Server::default();
    let data = format!("{E}\n");
    s.push(0, data.as_bytes(), false, 1 << 20);
    let mut other = data.clone().into_bytes();
    other[3] = b'Z';
    assert_eq!(s.push(0, &other, false, 1 << 20), Placement::Rewritten);
    assert_eq!(s.push(0, data.as_bytes(), false, 1 << 20), Placement::Replay);
}

#[test]
fn a_split_multibyte_character_and_a_line_longer_than_a_chunk_wait_for_their_end() {
    let line = format!("{}\n", E.replace("\"j\"", &format!("\"{}\"", "é".repeat(400))));
    let bytes = line.as_bytes();
    let mut s = Server::default();
    let mut at = 0;
    for step in [1usize, 7, 100, 333, 5000] {
        let to = (at + step).min(bytes.len());
        s.push(at as u64, &bytes[at..to], false, 1 << 20);
        at = to;
    }
    assert_eq!(s.progress.offset as usize, bytes.len());
    assert_eq!((s.sink.events.len(), s.sink.corrupt.len()), (1, 0), "one whole event, no split character");
}

#[test]
fn an_over_long_line_is_held_by_its_first_bytes_and_reported_as_the_tailer_reports_it() {
    let long = format!("{{\"big\":\"{}\"}}\n{E}\n", "y".repeat(10_000));
    let want = tailed(long.as_bytes(), 2048);
    let mut s = Server::default();
    let bytes = long.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let to = (at + 1500).min(bytes.len());
        s.push(at as u64, &bytes[at..to], to == bytes.len(), 2048);
        at = to;
        assert!(s.held.bytes.len() <= keep_whole(2048), "held bytes stay bounded");
    }
    same(&(s.progress, s.sink), &want, "over-long line");
}

#[test]
fn held_tails_are_kept_whole_up_to_the_limit_then_by_their_first_bytes() {
    let h = held_after(&Held::default(), b"abc\ndef", 4, 10, None);
    assert_eq!(h, Held { bytes: b"def".to_vec(), len: 3, reduction: None });
    let h = held_after(&h, b"ghij", 0, 10, None);
    assert_eq!(h, Held { bytes: b"defghij".to_vec(), len: 7, reduction: None });
    let big = vec![b'q'; 5000];
    let h = held_after(&h, &big, 0, 4096, Some(b"state".to_vec()));
    assert_eq!((h.bytes.len(), h.len, h.truncated()), (OVERSIZE_HEAD_BYTES, 5007, true));
    assert_eq!(&h.bytes[..7], b"defghij");
    // An over-long line keeps its reducer's state, the latest one.
    assert_eq!(h.reduction.as_deref(), Some(&b"state"[..]));
    let h = held_after(&h, b"more", 0, 4096, Some(b"later".to_vec()));
    assert_eq!((h.bytes.len(), h.len, h.reduction.as_deref()), (OVERSIZE_HEAD_BYTES, 5011, Some(&b"later"[..])));
    // The line ends: everything held is consumed, what follows its end is held (no state: it
    // is short).
    let h = held_after(&h, b"zz\nnext", 5011 + 3, 4096, Some(b"stale".to_vec()));
    assert_eq!(h, Held { bytes: b"next".to_vec(), len: 4, reduction: None });
}

#[test]
fn relpaths_sources_and_identities_are_checked() {
    let job = "0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f";
    assert_eq!(
        check_relpath(&format!("{job}/session-001.jsonl")).map(|r| (r.1, r.2)),
        Ok(("session-001.jsonl".to_owned(), Layout::DirectoryFile))
    );
    for bad in [
        format!("/{job}/session-001.jsonl"),
        format!("{job}/../x/session-001.jsonl"),
        format!("{job}//session-001.jsonl"),
        format!("{job}/./session-001.jsonl"),
        format!("{job}/notes.txt"),
        "project/session-001.jsonl".to_owned(),
        format!("{job}/a/b/c/d.jsonl"),
        format!("{job}/x\u{1}.jsonl"),
        String::new(),
    ] {
        assert!(check_relpath(&bad).is_err(), "{bad:?}");
    }
    assert!(check_source("node-7.eu:pod_a").is_ok());
    for bad in ["", "has space", "ünicode", &"x".repeat(129)] {
        assert!(check_source(bad).is_err(), "{bad:?}");
    }
    assert!(check_identity("2049:131077:9f1c2a3b").is_ok());
    assert!(check_identity("with space").is_err());
    assert!(identity_number("a") > 0 && identity_number("a") != identity_number("b"));
    assert_eq!(recorded_path("j/s.jsonl"), "push:/j/s.jsonl");
}

#[test]
fn the_dialect_waits_for_a_first_object_as_detection_reads_one() {
    let spike = format!("{E}\n");
    assert_eq!(
        decide_dialect("session-001.jsonl", Layout::DirectoryFile, spike.as_bytes(), false),
        Some(Some(Dialect::CortexSpike)),
        "content wins over the name"
    );
    assert_eq!(decide_dialect("session-001.jsonl", Layout::DirectoryFile, b"{\"partial", false), None);
    assert_eq!(
        decide_dialect("session-001.jsonl", Layout::DirectoryFile, b"not json\n", false),
        None,
        "no object yet: wait"
    );
    assert_eq!(
        decide_dialect("session-001.jsonl", Layout::DirectoryFile, b"not json\n", true),
        Some(Some(Dialect::CortexPlane)),
        "the whole file without an object: the name decides"
    );
    let junk = vec![b'-'; DETECTION_PREFIX_BYTES + 10];
    assert_eq!(
        decide_dialect("session-001.jsonl", Layout::DirectoryFile, &junk, false),
        Some(Some(Dialect::CortexPlane)),
        "past the detection prefix without an object: the name decides"
    );
}

/// An over-long line that is an event is one however it arrives: whole in one chunk, or
/// spanning pushes past what the server holds of it (its first bytes, its length and its
/// reducer's state stream from push to push), the same event the tailer indexes. A held state
/// that cannot be read back leaves the line unknown: corrupt at its end, never a guess.
#[test]
fn an_over_long_event_spanning_pushes_is_the_event_the_tailer_indexes() {
    let big = format!("{{\"type\":\"TOOL_RESULT\",\"timestamp\":\"t\",\"out\":\"{}\"}}", "x".repeat(300_000));
    let data = format!("{E}\n{big}\n{E}\n");
    let max_line = 2048;
    let want = tailed(data.as_bytes(), max_line);
    assert_eq!((want.1.events.len(), want.1.corrupt.len()), (3, 0));
    let mut whole = Server::default();
    whole.push(0, data.as_bytes(), true, max_line);
    same(&(whole.progress, whole.sink), &want, "one push");
    for step in [1000, 4097, 100_000] {
        let mut pieces = Server::default();
        for (i, chunk) in data.as_bytes().chunks(step).enumerate() {
            let last = (i + 1) * step >= data.len();
            pieces.push((i * step) as u64, chunk, last, max_line);
            assert!(
                pieces.held.reduction.as_ref().map_or(0, Vec::len) <= 1 << 20,
                "the state stays within its share of max_line_memory"
            );
        }
        same(&(pieces.progress, pieces.sink), &want, &format!("pushes of {step} bytes"));
    }
    // A state that does not read back: the line is unknown, and corrupt.
    let mut damaged = Server::default();
    for (i, chunk) in data.as_bytes().chunks(100_000).enumerate() {
        if let Some(r) = damaged.held.reduction.as_mut() {
            r.truncate(r.len() / 2);
        }
        let last = (i + 1) * 100_000 >= data.len();
        damaged.push((i * 100_000) as u64, chunk, last, max_line);
    }
    assert_eq!((damaged.sink.events.len(), damaged.sink.corrupt.len()), (2, 1));
    assert_eq!(damaged.progress.offset, data.len() as u64);
}

#[test]
fn adding_to_a_held_line_writes_about_the_added_bytes() {
    // A 1 MiB line with no newline yet, then 1-byte pushes, then chunks of varied sizes: what is
    // stored stays the tail (checked on every push) in few pieces, and every byte is written
    // again only a logarithmic number of times.
    let max_line = 4 << 20;
    let mut server = Server::default();
    let mut line = b"{\"type\":\"X\",\"text\":\"".to_vec();
    line.resize(1 << 20, b'a');
    server.push(0, &line, false, max_line);
    let first = server.written;
    assert_eq!(first, line.len() as u64, "the line, once");
    let mut sent = line.len() as u64;
    for _ in 0..100 {
        server.push(sent, b"b", false, max_line);
        sent += 1;
    }
    let small = server.written - first;
    assert!(small <= 100 * 8, "100 one-byte pushes wrote {small} bytes");
    let mut rng = Rng(7);
    let mut added = 0;
    for _ in 0..300 {
        let chunk = vec![b'c'; 1 + rng.below(5000) as usize];
        server.push(sent, &chunk, false, max_line);
        sent += chunk.len() as u64;
        added += chunk.len() as u64;
    }
    let later = server.written - first - small;
    assert!(later <= added * 12, "{later} bytes written for {added} added");
    // The line ends: the pieces go, and nothing is held.
    server.push(sent, b"\"}\n", false, max_line);
    assert!(server.pieces.is_empty() && server.held.len == 0);
    assert_eq!(server.progress.lines, 1);
}

#[test]
fn a_held_write_replaces_the_pieces_when_they_do_not_describe_the_tail() {
    let before = Held { bytes: b"abcdef".to_vec(), len: 6, reduction: None };
    let after = Held { bytes: b"abcdefgh".to_vec(), len: 8, reduction: None };
    // Pieces that do not start at 0, or pass the tail: written whole.
    for pieces in [&[1u64][..], &[0, 6], &[0, 3, 3], &[]] {
        assert_eq!(
            held_write(&before, pieces, &after, 0),
            HeldWrite { cut: Some(0), at: 0, piece: after.bytes.clone() }
        );
    }
    // Described: only the new bytes, or the last piece and them when it is no larger.
    assert_eq!(held_write(&before, &[0], &after, 0), HeldWrite { cut: None, at: 6, piece: b"gh".to_vec() });
    // [abcd][ef] + gh: "ef" is no larger than "gh", and then "abcd" no larger than "efgh".
    assert_eq!(held_write(&before, &[0, 4], &after, 0), HeldWrite { cut: Some(0), at: 0, piece: after.bytes.clone() });
    // [abcde][f] + gh: only "f" goes into the new piece.
    assert_eq!(held_write(&before, &[0, 5], &after, 0), HeldWrite { cut: Some(5), at: 5, piece: b"fgh".to_vec() });
    // Lines consumed: replaced.
    let rest = Held { bytes: b"h".to_vec(), len: 1, reduction: None };
    assert_eq!(held_write(&before, &[0], &rest, 7), HeldWrite { cut: Some(0), at: 0, piece: b"h".to_vec() });
    // Nothing changed: nothing written.
    assert_eq!(held_write(&before, &[0], &before, 0).written(), 0);
}
