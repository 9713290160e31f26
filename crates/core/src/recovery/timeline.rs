//! A job's story for people (`job_timeline`): its events in file order, with lost events and
//! writer restarts marked, and the database's own records for the job (checkpoint writes,
//! crashes, reaper actions, usage, breaker admissions) placed among them by time. Pure.
//!
//! Events keep their file order whatever their clocks say; a record goes before the first
//! event stamped after it (an event without a time takes its predecessor's).

use std::collections::VecDeque;

use super::pairing::{seq_step, SeqStep};

/// Where a timeline row comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Event,
    CorruptLine,
    Gap,
    SeqReset,
    Checkpoint,
    Crash,
    Reaper,
    Usage,
    Breaker,
}

impl Source {
    pub fn label(self) -> &'static str {
        match self {
            Source::Event => "event",
            Source::CorruptLine => "corrupt_line",
            Source::Gap => "gap",
            Source::SeqReset => "seq_reset",
            Source::Checkpoint => "checkpoint_history",
            Source::Crash => "crash",
            Source::Reaper => "reaper",
            Source::Usage => "usage",
            Source::Breaker => "circuit_admission",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub ts_us: Option<i64>,
    pub source: Source,
    pub kind: String,
    pub session: Option<String>,
    pub line_no: Option<i64>,
    pub byte_offset: Option<i64>,
    pub seq: Option<i64>,
    pub detail: Option<String>,
}

impl Entry {
    pub fn record(ts_us: i64, source: Source, kind: impl Into<String>, detail: impl Into<String>) -> Entry {
        Entry {
            ts_us: Some(ts_us),
            source,
            kind: kind.into(),
            session: None,
            line_no: None,
            byte_offset: None,
            seq: None,
            detail: Some(detail.into()),
        }
    }
}

pub struct Timeline {
    out: Vec<Entry>,
    records: VecDeque<Entry>,
    last_ts: Option<i64>,
    prev_seq: Option<i64>,
}

impl Timeline {
    /// `records`: the database's rows for the job, in any order.
    pub fn new(mut records: Vec<Entry>) -> Timeline {
        records.sort_by_key(|r| r.ts_us.unwrap_or(i64::MIN));
        Timeline { out: Vec::new(), records: records.into(), last_ts: None, prev_seq: None }
    }

    /// Starts the next session file.
    pub fn begin_file(&mut self) {
        self.prev_seq = None;
    }

    fn records_before(&mut self, ts: Option<i64>) {
        let Some(ts) = ts else { return };
        while self.records.front().is_some_and(|r| r.ts_us.unwrap_or(i64::MIN) < ts) {
            if let Some(r) = self.records.pop_front() {
                self.out.push(r);
            }
        }
    }

    /// The next line of the current file: an event (`Source::Event`) or a corrupt line.
    pub fn line(&mut self, entry: Entry) {
        let ts = entry.ts_us.or(self.last_ts);
        self.records_before(ts);
        if entry.ts_us.is_some() {
            self.last_ts = entry.ts_us;
        }
        if let Some(seq) = entry.seq {
            let mark = |source, kind: &str, detail: String| Entry {
                ts_us: entry.ts_us,
                source,
                kind: kind.to_owned(),
                session: entry.session.clone(),
                line_no: entry.line_no,
                byte_offset: entry.byte_offset,
                seq: Some(seq),
                detail: Some(detail),
            };
            match (seq_step(self.prev_seq, seq), self.prev_seq) {
                (SeqStep::Gap { missing }, Some(p)) => self.out.push(mark(
                    Source::Gap,
                    "lost_events",
                    format!("{missing} event(s) lost between seq {p} and {seq}"),
                )),
                (SeqStep::Reset, Some(p)) => self.out.push(mark(
                    Source::SeqReset,
                    "writer_restart",
                    format!("seq {seq} after {p}: a new writer"),
                )),
                _ => {}
            }
            self.prev_seq = Some(seq);
        }
        self.out.push(entry);
    }

    /// The entries ready so far, in order (a streaming caller takes them between pages).
    pub fn take_ready(&mut self) -> Vec<Entry> {
        std::mem::take(&mut self.out)
    }

    /// The rest: whatever is ready, then the records after the last event.
    pub fn finish(mut self) -> Vec<Entry> {
        self.out.extend(self.records.drain(..));
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: Option<i64>, seq: i64, kind: &str) -> Entry {
        Entry {
            ts_us: ts,
            source: Source::Event,
            kind: kind.into(),
            session: Some("s".into()),
            line_no: None,
            byte_offset: None,
            seq: Some(seq),
            detail: None,
        }
    }

    #[test]
    fn records_interleave_by_time_and_events_keep_file_order() {
        let mut t = Timeline::new(vec![
            Entry::record(25, Source::Checkpoint, "checkpoint_written", "step 1"),
            Entry::record(5, Source::Breaker, "admitted", ""),
            Entry::record(99, Source::Crash, "crash", "exit 137"),
        ]);
        t.begin_file();
        t.line(ev(Some(10), 0, "A"));
        t.line(ev(Some(30), 1, "B"));
        t.line(ev(Some(20), 4, "C")); // clock went back: still after B; a gap before it
        t.line(ev(None, 0, "D")); // a new writer
        let kinds: Vec<_> = t.finish().into_iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            ["admitted", "A", "checkpoint_written", "B", "lost_events", "C", "writer_restart", "D", "crash"]
        );
    }
}
