//! Indexing one file's new bytes: read lines after the committed offset, judge each, and hand
//! event and corrupt-line rows to a sink. Pure apart from reading: the sink is the SQL side (or
//! a vector in tests), so every rule here is tested without a server.
//!
//! A line longer than `max_line_bytes` that is valid JSON is judged by its reduction (the line
//! reader's [`Reduced`]: the same document with long strings and oversized containers cut), so
//! a long tool result is an event like any other and costs the file none of its trust; its
//! payload is the reduced text, and `payload_problem` says what was cut. One that is not JSON,
//! or not an event, or too large to summarise, is a corrupt line as before.
//!
//! The unterminated tail is not consumed while the file may still grow; once it has been
//! quiet for the settle period it is judged like any line and consumed, and the state
//! remembers it had no newline (more bytes later mean the combined line must be judged afresh,
//! which the plan does by re-indexing).

use std::borrow::Cow;
use std::io::Read;

use super::dialect::Dialect;
use super::integrity::Integrity;
use super::judge::{decode, judge, preview, Rules, Verdict};
use super::lines::{HoleSkip, LineReader, Piece, Resume};
use super::normalize::{columns, uuid_bytes, Columns};
use crate::json::jsonb_write::working_memory;
use crate::json::parse::js_trim;
use crate::json::reduce::{Limits, Reduced};

/// An `event` row.
#[derive(Debug)]
pub struct EventRow<'a> {
    pub offset: u64,
    pub line_no: u64,
    pub columns: Columns,
    /// The line's JSON text (trimmed), or `None` when it is not to be stored as `jsonb`.
    pub payload: Option<Cow<'a, str>>,
    /// Why the payload is NULL, or how it differs from the file's bytes.
    pub payload_problem: Option<Cow<'static, str>>,
    /// Values and keys in the line (sizes its conversion to `jsonb`).
    pub tokens: u64,
}

/// What `payload_problem` says of a line that was not valid UTF-8.
pub const LOSSY_UTF8: &str = "invalid UTF-8 replaced by U+FFFD";

/// Why a valid line's payload is NULL, or how it differs from the file's bytes: `jsonb` cannot
/// store it; converting it would take more than `max_line_memory`; its bytes were not UTF-8.
pub fn payload_problem(
    jsonb_problem: Option<&'static str>,
    text_len: usize,
    tokens: u64,
    max_line_memory: u64,
    lossy: bool,
) -> (bool, Option<Cow<'static, str>>) {
    let mut problems: Vec<Cow<'static, str>> = Vec::new();
    let mut store = true;
    if let Some(p) = jsonb_problem {
        problems.push(Cow::Borrowed(p));
        store = false;
    } else {
        let needs = working_memory(text_len, tokens);
        if needs > max_line_memory {
            problems.push(Cow::Owned(format!(
                "converting it to jsonb would take up to {} kB, more than the {} kB a line may take",
                needs.div_ceil(1024),
                max_line_memory / 1024
            )));
            store = false;
        }
    }
    if lossy {
        problems.push(Cow::Borrowed(LOSSY_UTF8));
    }
    let problem = match problems.len() {
        0 => None,
        1 => problems.pop(),
        _ => Some(Cow::Owned(problems.join("; "))),
    };
    (store, problem)
}

/// A `corrupt_line` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptRow {
    pub offset: u64,
    pub line_no: u64,
    pub preview: String,
    pub reason: String,
}

/// Where rows go.
pub trait Sink {
    type Error;
    fn event(&mut self, row: EventRow<'_>) -> Result<(), Self::Error>;
    fn corrupt(&mut self, row: CorruptRow) -> Result<(), Self::Error>;
}

/// A file's indexing progress: where the committed offset is and what was seen before it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    pub offset: u64,
    pub lines: u64,
    pub integrity: Integrity,
    pub tail_unterminated: bool,
    /// Bytes after `offset` wait for a newline or the settle period.
    pub tail_pending: bool,
    pub events_added: u64,
    pub corrupt_added: u64,
    /// The tail is pending and is an over-long line: its reducer's state, for the next call to
    /// go on with ([`super::lines::Resume`]; push ingestion keeps it with the held tail).
    pub pending_reduction: Option<Vec<u8>>,
}

#[derive(Debug)]
pub enum IndexError<E> {
    Read(std::io::Error),
    Sink(E),
}

/// How one file is judged.
#[derive(Debug, Clone, Copy)]
pub struct FileRules<'a> {
    pub dialect: Option<Dialect>,
    pub job_dir: &'a str,
    pub max_line_bytes: usize,
    /// The most a line's conversion to `jsonb` may take ([`working_memory`]); a line that needs
    /// more is stored with a NULL payload.
    pub max_line_memory: u64,
    /// The file has been quiet for the settle period: an unterminated tail is final.
    pub settled: bool,
    /// The most bytes to take from the file this time (its share of a worker's pass); the rest
    /// waits for the next pass. `u64::MAX`: all of it.
    pub max_bytes: u64,
    /// The reader continues an over-long line begun at `progress.offset`, read in an earlier
    /// call (push ingestion): its state. `None`: the reader starts at a line's start.
    pub resume: Option<&'a Resume>,
}

/// Indexes what `reader` (positioned at `progress.offset`) holds.
pub fn index_file<R: Read + HoleSkip, S: Sink>(
    reader: R,
    mut progress: Progress,
    rules: &FileRules<'_>,
    sink: &mut S,
) -> Result<Progress, IndexError<S::Error>> {
    let judge_rules = Dialect::rules(rules.dialect);
    let dir_job = uuid_bytes(rules.job_dir);
    let limits = Limits::for_line_memory(rules.max_line_memory);
    let mut lines = match rules.resume {
        Some(r) => LineReader::resuming(reader, progress.offset, r.clone(), rules.max_line_bytes, limits),
        None => LineReader::new(reader, progress.offset, rules.max_line_bytes, limits),
    };
    progress.tail_pending = false;
    progress.pending_reduction = None;
    let first = progress.offset;
    while progress.offset.saturating_sub(first) < rules.max_bytes {
        let Some(piece) = lines.next_piece().map_err(IndexError::Read)? else { break };
        if !piece.terminated() && !rules.settled {
            progress.tail_pending = true;
            if let Piece::Oversize { pending, .. } = piece {
                progress.pending_reduction = pending;
            }
            break;
        }
        let line_no = progress.lines + 1;
        let offset = piece.offset();
        let span = piece.span();
        let terminated = piece.terminated();
        match piece {
            Piece::Oversize { len, head, reduced, .. } => {
                // Valid JSON that is an event: an event, whatever its length.
                let event = reduced.as_ref().and_then(|r| match judge(&r.text, judge_rules) {
                    Verdict::Event(parsed) => Some((r, parsed)),
                    _ => None,
                });
                if let Some((r, parsed)) = event {
                    let cols = columns(&parsed, rules.dialect);
                    progress.integrity.event(&cols, dir_job);
                    let note = reduction_note(len, rules.max_line_bytes, r, &limits);
                    emit(sink, rules, offset, line_no, &r.text, &parsed, cols, r.lossy, note)?;
                    progress.events_added += 1;
                } else {
                    // Not JSON, not an event, too large to summarise, or not read whole: corrupt,
                    // with one reason for all (a valid line that is not an event reads the same
                    // whether the reader saw it whole or, pushed in pieces, only its length).
                    progress.integrity.not_an_event();
                    sink.corrupt(CorruptRow {
                        offset,
                        line_no,
                        preview: preview(&decode(&head)),
                        reason: format!(
                            "line of {len} bytes is longer than cortex_buffer.max_line_bytes ({})",
                            rules.max_line_bytes
                        ),
                    })
                    .map_err(IndexError::Sink)?;
                    progress.corrupt_added += 1;
                }
            }
            Piece::Line { bytes, .. } => {
                let text = decode(bytes);
                match judge(&text, judge_rules) {
                    Verdict::Blank => progress.integrity.blank(),
                    Verdict::Event(parsed) => {
                        let cols = columns(&parsed, rules.dialect);
                        progress.integrity.event(&cols, dir_job);
                        let lossy = matches!(text, Cow::Owned(_));
                        emit(sink, rules, offset, line_no, js_trim(&text), &parsed, cols, lossy, None)?;
                        progress.events_added += 1;
                    }
                    Verdict::NotAnEvent(reason) => {
                        progress.integrity.not_an_event();
                        sink.corrupt(CorruptRow {
                            offset,
                            line_no,
                            preview: preview(&text),
                            reason: reason.to_owned(),
                        })
                        .map_err(IndexError::Sink)?;
                        progress.corrupt_added += 1;
                    }
                    Verdict::Unparseable(reason) => {
                        // Crash cuts are the cortex writers' (a Claude Code `}{` splice is two
                        // records on one line, not a writer that died: it stays one corrupt line).
                        let embedded = match judge_rules {
                            Rules::Cortex => embedded_new_line(&text, judge_rules),
                            Rules::Object => None,
                        };
                        progress.integrity.unparseable(embedded.is_some());
                        sink.corrupt(CorruptRow { offset, line_no, preview: preview(&text), reason })
                            .map_err(IndexError::Sink)?;
                        progress.corrupt_added += 1;
                        // The next writer's first line, whole after the cut: indexed as the event
                        // it is, at its own offset (its bytes are valid UTF-8, so the offset is
                        // exact). The line stays corrupt in the counts, as scanBuffer sees it.
                        if let (Some(at), Cow::Borrowed(line)) = (embedded, &text) {
                            let rest = line.get(at..).unwrap_or("");
                            if let Verdict::Event(parsed) = judge(rest, judge_rules) {
                                let cols = columns(&parsed, rules.dialect);
                                let at = u64::try_from(at).unwrap_or(0);
                                emit(sink, rules, offset + at, line_no, js_trim(rest), &parsed, cols, false, None)?;
                                progress.events_added += 1;
                            }
                        }
                    }
                }
            }
        }
        progress.offset = offset + span;
        progress.lines = line_no;
        progress.tail_unterminated = !terminated;
    }
    Ok(progress)
}

/// What `payload_problem` says of an over-long line's reduced payload, when something was cut
/// (`None` when the reduction is the whole line, compacted).
pub fn reduction_note(len: u64, max_line_bytes: usize, reduced: &Reduced, limits: &Limits) -> Option<String> {
    let mut cuts = Vec::new();
    if reduced.cut_values {
        cuts.push(format!("strings longer than {} bytes were truncated", limits.max_string));
    }
    if reduced.cut_containers {
        cuts.push(format!(
            "containers that did not fit in {} kB were replaced by their length",
            limits.max_memory / 2 / 1024
        ));
    }
    (!cuts.is_empty()).then(|| {
        format!(
            "line of {len} bytes is longer than cortex_buffer.max_line_bytes ({max_line_bytes}): {}",
            cuts.join(", ")
        )
    })
}

/// Hands one event row to the sink: its columns, and its payload unless `jsonb` cannot store
/// it or it would take more memory than allowed. `note` says first how the payload differs from
/// the line (a reduction).
#[allow(clippy::too_many_arguments)]
fn emit<S: Sink>(
    sink: &mut S,
    rules: &FileRules<'_>,
    offset: u64,
    line_no: u64,
    trimmed: &str,
    parsed: &crate::json::parse::Parsed<'_>,
    cols: Columns,
    lossy: bool,
    note: Option<String>,
) -> Result<(), IndexError<S::Error>> {
    let (store, problem) = payload_problem(
        parsed.jsonb_problem.map(|p| p.describe()),
        trimmed.len(),
        parsed.tokens,
        rules.max_line_memory,
        lossy,
    );
    let problem = match (note, problem) {
        (Some(note), Some(p)) => Some(Cow::Owned(format!("{note}; {p}"))),
        (Some(note), None) => Some(Cow::Owned(note)),
        (None, p) => p,
    };
    let payload = store.then_some(Cow::Borrowed(trimmed));
    sink.event(EventRow { offset, line_no, columns: cols, payload, payload_problem: problem, tokens: parsed.tokens })
        .map_err(IndexError::Sink)
}

/// Where, in a line that does not parse, a whole new line starts after a cut: the line's
/// opening (`{"version":`, `{"type":`: what every line of its writer starts with) appears again
/// later, and from there the rest is an event. A writer that crashed mid-append and the next
/// writer appending to the same file leave exactly this. At most a few places are tried, so a
/// hostile line costs a few parses, not one per byte. The position is in `text` (untrimmed).
pub fn embedded_new_line(text: &str, rules: Rules) -> Option<usize> {
    const TRIES: usize = 4;
    let line = js_trim(text);
    // `line` is a slice of `text`: where it starts in it.
    let lead = (line.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
    let opening = line.find("\":").filter(|&i| line.starts_with("{\"") && i < 64).and_then(|i| line.get(..i + 2))?;
    memchr::memmem::find_iter(line.as_bytes(), opening.as_bytes())
        .filter(|&at| at > 0)
        .take(TRIES)
        .find(|&at| line.get(at..).is_some_and(|rest| matches!(judge(rest, rules), Verdict::Event(_))))
        .map(|at| lead + at)
}

/// Whether a line that does not parse embeds a new writer's whole line ([`embedded_new_line`]).
pub fn embeds_new_writer(text: &str, rules: Rules) -> bool {
    embedded_new_line(text, rules).is_some()
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// An event row as collected: offset, line, columns, payload, payload problem.
    pub type Collected = (u64, u64, Columns, Option<String>, Option<String>);

    /// Rows collected in memory.
    #[derive(Default, Debug)]
    pub struct Collect {
        pub events: Vec<Collected>,
        pub corrupt: Vec<CorruptRow>,
    }

    impl Sink for Collect {
        type Error = std::convert::Infallible;
        fn event(&mut self, r: EventRow<'_>) -> Result<(), Self::Error> {
            self.events.push((
                r.offset,
                r.line_no,
                r.columns,
                r.payload.map(Cow::into_owned),
                r.payload_problem.map(Cow::into_owned),
            ));
            Ok(())
        }
        fn corrupt(&mut self, r: CorruptRow) -> Result<(), Self::Error> {
            self.corrupt.push(r);
            Ok(())
        }
    }

    fn run(data: &[u8], from: Progress, dialect: Dialect, settled: bool) -> (Progress, Collect) {
        let mut sink = Collect::default();
        let rules = FileRules {
            dialect: Some(dialect),
            job_dir: "job",
            max_line_bytes: 1 << 20,
            max_line_memory: 64 << 20,
            settled,
            max_bytes: u64::MAX,
            resume: None,
        };
        let start = usize::try_from(from.offset).unwrap_or(0);
        let p = match index_file(&data[start..], from, &rules, &mut sink) {
            Ok(p) => p,
            Err(e) => panic!("{e:?}"),
        };
        (p, sink)
    }

    const E0: &str = r#"{"type":"A","timestamp":"2026-01-01T00:00:00Z","seq":0}"#;
    const E1: &str = r#"{"type":"B","timestamp":"2026-01-01T00:00:01Z","seq":1}"#;

    #[test]
    fn events_corrupt_and_blank_lines_with_offsets_and_numbers() {
        let data = format!("{E0}\n\n{{\"type\":\"X\"}}\n{{broken\n {E1}\r\n");
        let (p, rows) = run(data.as_bytes(), Progress::default(), Dialect::CortexSpike, false);
        assert_eq!(p.offset, data.len() as u64);
        assert_eq!(p.lines, 5);
        let offsets: Vec<(u64, u64)> = rows.events.iter().map(|e| (e.0, e.1)).collect();
        let e1_at = data.find(" {\"type\":\"B\"").unwrap_or(0) as u64;
        assert_eq!(offsets, vec![(0, 1), (e1_at, 5)]);
        assert_eq!(rows.events[1].3.as_deref(), Some(E1), "payload is the trimmed line");
        let corrupt: Vec<(u64, &str)> = rows.corrupt.iter().map(|c| (c.line_no, c.reason.as_str())).collect();
        assert_eq!(corrupt[0], (3, "an object without \"timestamp\""));
        assert_eq!(corrupt[1].0, 4);
        let i = &p.integrity;
        assert_eq!((i.total_lines, i.valid_lines, i.corrupt_lines, i.blank_lines), (5, 2, 2, 1));
        assert_eq!(i.report(0.1, false).corrupt_lines, 2);
    }

    #[test]
    fn an_unterminated_tail_waits_for_the_settle_period_then_counts() {
        let data = format!("{E0}\n{E1}");
        let (p, rows) = run(data.as_bytes(), Progress::default(), Dialect::CortexSpike, false);
        assert_eq!((p.offset, p.lines, p.tail_pending, rows.events.len()), (E0.len() as u64 + 1, 1, true, 1));
        // Settled: the tail is judged, consumed, and remembered as unterminated.
        let (q, rows) = run(data.as_bytes(), p, Dialect::CortexSpike, true);
        assert_eq!((q.offset, q.lines, q.tail_pending, q.tail_unterminated), (data.len() as u64, 2, false, true));
        assert_eq!(rows.events.len(), 1);
        // A truncated tail after settling is the truncated tail, not corrupt.
        let cut = format!("{E0}\n{{\"type\":\"B\",\"timest");
        let (r, rows) = run(cut.as_bytes(), Progress::default(), Dialect::CortexSpike, true);
        assert_eq!(rows.corrupt.len(), 1);
        assert!(r.integrity.report(0.1, false).tail_truncated);
    }

    #[test]
    fn appending_resumes_where_it_stopped_with_the_same_result() {
        let data = format!("{E0}\n{{bad\n\n{E1}\n{E0}\n");
        let (whole, all) = run(data.as_bytes(), Progress::default(), Dialect::CortexSpike, true);
        // The same file indexed in two passes, cut after the second line.
        let cut = data.find("\n\n").unwrap_or(0) + 1;
        let (first, a) = run(&data.as_bytes()[..cut], Progress::default(), Dialect::CortexSpike, false);
        let mut resumed = first.clone();
        resumed.events_added = 0;
        resumed.corrupt_added = 0;
        let (second, b) = run(data.as_bytes(), resumed, Dialect::CortexSpike, true);
        assert_eq!(second.integrity, whole.integrity);
        assert_eq!((second.offset, second.lines), (whole.offset, whole.lines));
        assert_eq!(a.events.len() + b.events.len(), all.events.len());
        assert_eq!(a.corrupt.len() + b.corrupt.len(), all.corrupt.len());
    }

    #[test]
    fn lines_jsonb_cannot_store_keep_their_columns_and_a_null_payload() {
        let data = "{\"type\":\"A\",\"timestamp\":\"t\",\"x\":\"\\u0000\"}\n".to_owned();
        let (_, rows) = run(data.as_bytes(), Progress::default(), Dialect::CortexSpike, true);
        assert_eq!(rows.events[0].2.event_type.as_deref(), Some("A"));
        assert_eq!(rows.events[0].3, None);
        assert!(rows.events[0].4.as_deref().is_some_and(|p| p.contains("\\u0000")));
    }

    #[test]
    fn lines_over_the_memory_budget_keep_their_columns_and_a_null_payload() {
        let numbers = vec!["1"; 20_000].join(",");
        let data = format!("{{\"type\":\"BIG\",\"timestamp\":\"t\",\"x\":[{numbers}]}}\n{E0}\n");
        let mut sink = Collect::default();
        let rules = FileRules {
            dialect: Some(Dialect::CortexSpike),
            job_dir: "j",
            max_line_bytes: 1 << 20,
            max_line_memory: 1 << 20,
            settled: true,
            max_bytes: u64::MAX,
            resume: None,
        };
        let p = index_file(data.as_bytes(), Progress::default(), &rules, &mut sink).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!((p.integrity.valid_lines, sink.events.len(), sink.corrupt.len()), (2, 2, 0));
        let big = &sink.events[0];
        assert_eq!((big.2.event_type.as_deref(), big.3.as_deref()), (Some("BIG"), None));
        assert!(big.4.as_deref().is_some_and(|p| p.contains("more than the 1024 kB a line may take")), "{:?}", big.4);
        assert_eq!(sink.events[1].3.as_deref(), Some(E0), "the next line is stored as usual");
        assert_eq!(sink.events[1].4, None);
    }

    #[test]
    fn lossy_utf8_is_recorded_and_the_payload_kept() {
        let data =
            b"{\"type\":\"\xff\",\"timestamp\":\"t\"}\n{\"type\":\"\xff\",\"timestamp\":\"t\",\"z\":\"\\u0000\"}\n"
                .to_vec();
        let (_, rows) = run(&data, Progress::default(), Dialect::CortexSpike, true);
        assert_eq!(rows.events[0].2.event_type.as_deref(), Some("\u{fffd}"));
        assert_eq!(rows.events[0].3.as_deref(), Some("{\"type\":\"\u{fffd}\",\"timestamp\":\"t\"}"));
        assert_eq!(rows.events[0].4.as_deref(), Some(LOSSY_UTF8));
        assert_eq!(rows.events[1].3, None);
        assert_eq!(rows.events[1].4.as_deref(), Some("jsonb cannot store \\u0000; invalid UTF-8 replaced by U+FFFD"));
    }

    #[test]
    fn payload_problems_combine() {
        assert_eq!(payload_problem(None, 10, 3, 1 << 20, false), (true, None));
        let (store, p) = payload_problem(Some("x"), 10, 3, 1 << 20, true);
        assert_eq!((store, p.as_deref()), (false, Some("x; invalid UTF-8 replaced by U+FFFD")));
        let (store, p) = payload_problem(None, 10, 1_000_000, 1 << 20, false);
        assert!(!store && p.is_some_and(|p| p.starts_with("converting it to jsonb would take up to ")));
    }

    #[test]
    fn a_crash_cut_with_the_next_writers_line_on_it_is_recognised() {
        let line = |seq: u32| {
            format!(
                r#"{{"version":"1.0","timestamp":"2026-03-01T09:00:0{seq}Z","jobId":"j","type":"TOOL_CALL","data":{{}},"sequence":{seq}}}"#
            )
        };
        let whole = line(0);
        let cut = &whole[..30];
        assert!(embeds_new_writer(&format!("{cut}{}", line(0)), Rules::Cortex));
        assert!(!embeds_new_writer(cut, Rules::Cortex), "a cut alone");
        assert!(!embeds_new_writer(&format!("{cut}garbage"), Rules::Cortex));
        assert!(!embeds_new_writer("not json at all", Rules::Cortex));
        // A hostile line full of openings costs a few parses and says no.
        let hostile = format!("{{\"version\":{}", "{\"version\":x".repeat(10_000));
        assert!(!embeds_new_writer(&hostile, Rules::Cortex));
        // Through the indexer: the cut line is corrupt and a crash cut; seq 1 follows.
        let bytes = format!("{}\n{cut}{}\n{}\n", line(0), line(0), line(1));
        let (p, _) = run(bytes.as_bytes(), Progress::default(), Dialect::CortexPlane, false);
        assert_eq!((p.integrity.corrupt_lines, p.integrity.crash_cut_lines), (1, 1));
    }

    /// Indexes `data` under a line cap of `max_line_bytes` (settled, cortex-spike).
    fn run_capped(data: &[u8], max_line_bytes: usize, settled: bool) -> (Progress, Collect) {
        let mut sink = Collect::default();
        let rules = FileRules {
            dialect: Some(Dialect::CortexSpike),
            job_dir: "j",
            max_line_bytes,
            max_line_memory: 64 << 20,
            settled,
            max_bytes: u64::MAX,
            resume: None,
        };
        let p = index_file(data, Progress::default(), &rules, &mut sink).unwrap_or_else(|e| panic!("{e:?}"));
        (p, sink)
    }

    #[test]
    fn over_long_lines_that_are_not_events_are_corrupt_and_do_not_stop_the_file() {
        let broken = format!("{{\"type\":\"A\",\"timestamp\":\"t\",\"pad\":\"{}\"", "x".repeat(5000));
        let array = format!("[{{\"type\":\"A\",\"timestamp\":\"t\",\"pad\":\"{}\"}}]", "x".repeat(5000));
        let data = format!("{broken}\n{E0}\n{array}\n");
        let (p, sink) = run_capped(data.as_bytes(), 1000, true);
        assert_eq!((sink.corrupt.len(), sink.events.len(), p.lines), (2, 1, 3));
        for (c, line) in sink.corrupt.iter().zip([&broken, &array]) {
            assert_eq!(
                c.reason,
                format!("line of {} bytes is longer than cortex_buffer.max_line_bytes (1000)", line.len())
            );
            assert_eq!(c.preview.chars().count(), 200);
        }
        assert_eq!((p.integrity.valid_lines, p.integrity.corrupt_lines), (1, 2));
    }

    /// A cortex-spike tool result whose output is `bytes` long.
    fn tool_result(bytes: usize) -> String {
        let output = "total 42\\n-rw-r--r-- 1 agent agent 1024 notes.md\\n".repeat(bytes / 50 + 1);
        format!(
            "{{\"type\":\"TOOL_RESULT\",\"timestamp\":\"2026-01-01T00:00:02Z\",\"seq\":2,\"invocation_id\":\"call-7\",\
             \"tool_name\":\"read_file\",\"success\":true,\"result_summary\":\"{output}\",\"prompt_tokens\":11}}"
        )
    }

    #[test]
    fn an_over_long_line_that_is_an_event_is_indexed_reduced_and_costs_no_trust() {
        let big = tool_result(1_500_000);
        let data = format!("{E0}\n{big}\n{E1}\n");
        let (p, sink) = run_capped(data.as_bytes(), 1 << 20, true);
        let (without, _) = run_capped(format!("{E0}\n{E1}\n").as_bytes(), 1 << 20, true);
        assert!(sink.corrupt.is_empty(), "{:?}", sink.corrupt);
        assert_eq!((p.lines, p.offset, sink.events.len()), (3, data.len() as u64, 3));
        assert_eq!((p.integrity.valid_lines, p.integrity.corrupt_lines), (3, 0));
        assert_eq!(p.integrity.report(0.0, false), without.integrity.report(0.0, false));
        let (offset, line_no, cols, payload, problem) = &sink.events[1];
        assert_eq!((*offset, *line_no), (E0.len() as u64 + 1, 2));
        assert_eq!(cols.event_type.as_deref(), Some("TOOL_RESULT"));
        assert_eq!(cols.invocation_id.as_deref(), Some("call-7"));
        assert_eq!(cols.tool_name.as_deref(), Some("read_file"));
        assert_eq!(cols.success, Some(true));
        let payload = payload.as_deref().unwrap_or_else(|| panic!("no payload"));
        assert!(payload.len() < 4096, "{} bytes", payload.len());
        let parsed = crate::json::parse::parse(payload).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(parsed.get("prompt_tokens").and_then(|v| v.as_i64()), Some(11));
        let sentinel = parsed.get("result_summary").and_then(|v| v.get("cortex_buffer:truncated"));
        assert!(sentinel.and_then(|s| s.get("head")).is_some(), "{payload}");
        assert_eq!(
            problem.as_deref(),
            Some(
                format!(
                    "line of {} bytes is longer than cortex_buffer.max_line_bytes (1048576): strings longer than \
                     65536 bytes were truncated",
                    big.len()
                )
                .as_str()
            )
        );
        assert_eq!(sink.events[2].3.as_deref(), Some(E1), "the next line is read as usual");
    }

    #[test]
    fn an_over_long_event_with_nothing_to_cut_is_stored_whole() {
        let long = format!("{{\"type\":\"A\", \"timestamp\":\"t\", \"pad\":\"{}\"}}", "x".repeat(5000));
        let (p, sink) = run_capped(format!("{long}\n").as_bytes(), 1000, true);
        assert_eq!((p.integrity.valid_lines, sink.corrupt.len()), (1, 0));
        assert_eq!(sink.events[0].3.as_deref(), Some(long.replace(", ", ",").as_str()), "compact, else the same");
        assert_eq!(sink.events[0].4, None);
        // Invalid UTF-8 is replaced as in any line, and said.
        let mut bytes =
            format!("{{\"type\":\"A\",\"timestamp\":\"t\",\"pad\":\"#{}\"}}\n", "x".repeat(5000)).into_bytes();
        if let Some(at) = bytes.iter().position(|b| *b == b'#') {
            bytes[at] = 0xff;
        }
        let lossy = format!("{{\"type\":\"A\",\"timestamp\":\"t\",\"pad\":\"\u{fffd}{}\"}}", "x".repeat(5000));
        let (_, sink) = run_capped(&bytes, 1000, true);
        assert_eq!(sink.events[0].3.as_deref(), Some(lossy.as_str()));
        assert_eq!(sink.events[0].4.as_deref(), Some(LOSSY_UTF8));
    }

    #[test]
    fn an_over_long_unterminated_tail_waits_for_the_settle_period() {
        let big = tool_result(200_000);
        let data = format!("{E0}\n{big}");
        let (p, sink) = run_capped(data.as_bytes(), 100_000, false);
        assert_eq!((p.lines, p.tail_pending, sink.events.len(), sink.corrupt.len()), (1, true, 1, 0));
        let (p, sink) = run_capped(data.as_bytes(), 100_000, true);
        assert_eq!((p.lines, p.tail_pending, p.tail_unterminated, sink.events.len()), (2, false, true, 2));
        // Cut short, it does not parse: corrupt, as any unparseable over-long line.
        let (p, sink) = run_capped(&data.as_bytes()[..data.len() - 10], 100_000, true);
        assert_eq!((p.integrity.corrupt_lines, sink.events.len()), (1, 1));
    }
}
