//! Per-file integrity, accumulated line by line as the file is indexed (docs/design.md §Line and
//! file rules). Pure.
//!
//! `corrupt` counts every line that is not an event, parse failures included; a parse failure
//! that is the file's last non-blank line is `scanBuffer`'s truncated tail instead, which is
//! only known once nothing but blank lines follows it — so the report derives it from
//! `last_failed_parse` rather than the count deciding it early.
//!
//! A writer that crashes mid-append leaves a cut line, and the next writer's first line is
//! appended right after it: a parse failure directly followed by a new writer (its first line
//! on the same line as the cut, a `seq` that starts again, or a `SESSION_START`). Such lines
//! are `crash_cut_lines`: they count as corrupt, as `scanBuffer` counts them, but recovery does
//! not hold them against the file's trust (docs/design.md §Line and file rules).

use super::normalize::Columns;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Integrity {
    pub total_lines: i64,
    pub valid_lines: i64,
    /// Lines that are not events, parse failures (the truncated tail among them) included.
    pub corrupt_lines: i64,
    pub blank_lines: i64,
    /// The last non-blank line failed to parse.
    pub last_failed_parse: bool,
    pub last_seq: Option<i64>,
    /// Jumps upwards in `seq` (events lost), and the first number missing.
    pub seq_gaps: i64,
    pub seq_first_missing: Option<i64>,
    /// Drops in `seq` (a new writer restarted the count).
    pub seq_resets: i64,
    /// Earliest and latest event timestamps, microseconds since the Unix epoch.
    pub first_ts_us: Option<i64>,
    pub last_ts_us: Option<i64>,
    pub session_start_seen: bool,
    pub session_end_seen: bool,
    pub schema_version: Option<String>,
    /// Events whose own job id is not the job directory's: written into another job's
    /// directory, they are never taken as that job's (see `foreign_job_line`).
    pub foreign_job_lines: i64,
    /// Corrupt lines that are a writer's crash followed by a new writer (see the module).
    pub crash_cut_lines: i64,
    /// The last non-blank line failed to parse and is not counted as a crash cut yet: the
    /// next event tells whether a new writer followed it.
    pub cut_pending: bool,
}

/// How bad a file is, worst first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    None,
    TruncatedTail,
    CorruptInterior,
    Unreadable,
}

impl Severity {
    pub fn label(self) -> &'static str {
        match self {
            Severity::None => "none",
            Severity::TruncatedTail => "truncated_tail",
            Severity::CorruptInterior => "corrupt_interior",
            Severity::Unreadable => "unreadable",
        }
    }
}

/// What `file_integrity()` reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub corrupt_lines: i64,
    pub tail_truncated: bool,
    /// Corrupt lines over non-blank lines (the truncated tail is neither corrupt nor excluded:
    /// it is a non-blank line).
    pub corruption_ratio: f64,
    pub severity: Severity,
    /// Recovery may read the file: its corruption, crash cuts left out, is within the limit.
    pub trusted: bool,
}

/// Whether a line names a job other than its directory's. A line that names none, or a file
/// outside a job directory, cannot disagree.
pub fn foreign_job_line(line_job: Option<[u8; 16]>, dir_job: Option<[u8; 16]>) -> bool {
    matches!((line_job, dir_job), (Some(l), Some(d)) if l != d)
}

impl Integrity {
    pub fn blank(&mut self) {
        self.total_lines += 1;
        self.blank_lines += 1;
    }

    /// A line that parsed but is not an event (or is too long to judge).
    pub fn not_an_event(&mut self) {
        self.total_lines += 1;
        self.corrupt_lines += 1;
        self.last_failed_parse = false;
        self.cut_pending = false;
    }

    /// A line that does not parse; `embeds_new_writer` when a new writer's whole first line
    /// follows the cut on the same line.
    pub fn unparseable(&mut self, embeds_new_writer: bool) {
        self.total_lines += 1;
        self.corrupt_lines += 1;
        self.last_failed_parse = true;
        if embeds_new_writer {
            self.crash_cut_lines += 1;
        }
        self.cut_pending = !embeds_new_writer;
    }

    pub fn event(&mut self, c: &Columns, dir_job: Option<[u8; 16]>) {
        self.total_lines += 1;
        self.valid_lines += 1;
        if foreign_job_line(c.job_id, dir_job) {
            self.foreign_job_lines += 1;
        }
        self.last_failed_parse = false;
        if std::mem::take(&mut self.cut_pending) {
            let restarts = c.event_type.as_deref() == Some("SESSION_START")
                || matches!((c.seq, self.last_seq), (Some(seq), Some(last)) if seq <= last)
                || (c.seq == Some(0) && self.last_seq.is_none());
            if restarts {
                self.crash_cut_lines += 1;
            }
        }
        if let Some(seq) = c.seq {
            match self.last_seq {
                // A writer never repeats a seq: an equal one is a new writer too.
                Some(last) if seq <= last => self.seq_resets += 1,
                Some(last) if seq > last.saturating_add(1) => {
                    self.seq_gaps += 1;
                    self.seq_first_missing.get_or_insert(last + 1);
                }
                _ => {}
            }
            self.last_seq = Some(seq);
        }
        if let Some(ts) = c.ts_us {
            self.first_ts_us = Some(self.first_ts_us.map_or(ts, |f| f.min(ts)));
            self.last_ts_us = Some(self.last_ts_us.map_or(ts, |l| l.max(ts)));
        }
        match c.event_type.as_deref() {
            Some("SESSION_START") => self.session_start_seen = true,
            Some("SESSION_END") => self.session_end_seen = true,
            _ => {}
        }
        if c.schema_version.is_some() && self.schema_version.is_none() {
            self.schema_version.clone_from(&c.schema_version);
        }
    }

    /// The file's verdict; `unreadable` when it could not be read or indexed.
    pub fn report(&self, max_corruption_ratio: f64, unreadable: bool) -> Report {
        let truncated = self.last_failed_parse;
        let corrupt = self.corrupt_lines - i64::from(truncated);
        let non_blank = self.valid_lines + self.corrupt_lines;
        let ratio = if non_blank == 0 { 0.0 } else { corrupt as f64 / non_blank as f64 };
        // Crash artefacts are no corruption to recovery: a writer died mid-line, the next one
        // went on. (They stay in the counts and the ratio, as scanBuffer reports them.)
        let cuts = self.crash_cut_lines.min(corrupt);
        let trust_ratio = if non_blank - cuts <= 0 { 0.0 } else { (corrupt - cuts) as f64 / (non_blank - cuts) as f64 };
        let severity = if unreadable {
            Severity::Unreadable
        } else if corrupt > 0 {
            Severity::CorruptInterior
        } else if truncated {
            Severity::TruncatedTail
        } else {
            Severity::None
        };
        Report {
            corrupt_lines: corrupt,
            tail_truncated: truncated,
            corruption_ratio: ratio,
            severity,
            trusted: !unreadable && trust_ratio <= max_corruption_ratio,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(seq: i64) -> Columns {
        Columns { seq: Some(seq), ..Columns::default() }
    }

    #[test]
    fn a_parse_failure_is_the_truncated_tail_only_while_nothing_but_blanks_follows() {
        let mut i = Integrity::default();
        i.event(&ev(0), None);
        i.unparseable(false);
        i.blank();
        let r = i.report(0.1, false);
        assert_eq!((r.corrupt_lines, r.tail_truncated, r.severity), (0, true, Severity::TruncatedTail));
        i.event(&ev(1), None);
        let r = i.report(0.1, false);
        assert_eq!((r.corrupt_lines, r.tail_truncated, r.severity), (1, false, Severity::CorruptInterior));
        // A last line that parses but is not an event is corrupt, not truncated.
        i.not_an_event();
        assert_eq!(i.report(0.1, false).corrupt_lines, 2);
        assert_eq!(i.total_lines, 5);
    }

    #[test]
    fn a_cut_line_followed_by_a_new_writer_is_a_crash_artefact() {
        let mut i = Integrity::default();
        for s in 0..5 {
            i.event(&ev(s), None);
        }
        i.unparseable(false);
        i.event(&ev(0), None); // a new writer from seq 0
        i.event(&ev(1), None);
        i.unparseable(true); // the next writer's first line on the cut's line
        i.event(&ev(1), None);
        i.unparseable(false); // garbage in the middle of a writer
        i.event(&ev(2), None);
        assert_eq!((i.corrupt_lines, i.crash_cut_lines, i.seq_resets), (3, 2, 2));
        // 3 of 12 lines are corrupt; without the 2 crash cuts, 1 of 10, still over 5 %; with
        // a third cut the file is trusted again, though its ratio stays what scanBuffer says.
        let r = i.report(0.05, false);
        assert!((r.corruption_ratio - 0.25).abs() < 1e-12);
        assert!(!r.trusted);
        assert!(i.report(0.1, false).trusted, "1 of 10 is within 10 %");
        i.crash_cut_lines = 3;
        let r = i.report(0.05, false);
        assert!(r.trusted && (r.corruption_ratio - 0.25).abs() < 1e-12);
        let mut j = Integrity::default();
        j.unparseable(false);
        let start = Columns { event_type: Some("SESSION_START".into()), ..Columns::default() };
        j.event(&start, None);
        assert_eq!(j.crash_cut_lines, 1);
    }

    #[test]
    fn the_ratio_decides_trust() {
        let mut i = Integrity::default();
        for s in 0..9 {
            i.event(&ev(s), None);
        }
        i.not_an_event();
        let r = i.report(0.10, false);
        assert!((r.corruption_ratio - 0.1).abs() < 1e-12);
        assert!(r.trusted, "10% is within 10%");
        i.not_an_event();
        assert!(!i.report(0.10, false).trusted);
        assert_eq!(i.report(0.10, true).severity, Severity::Unreadable);
        assert!(Integrity::default().report(0.1, false).trusted);
    }

    #[test]
    fn sequence_gaps_and_resets() {
        let mut i = Integrity::default();
        for s in [0, 1, 2, 5, 6, 0, 1, 9] {
            i.event(&ev(s), None);
        }
        assert_eq!((i.seq_gaps, i.seq_first_missing, i.seq_resets), (2, Some(3), 1));
        // A file that starts late is not a gap: seq restarts with every writer.
        let mut j = Integrity::default();
        j.event(&ev(40), None);
        assert_eq!(j.seq_gaps, 0);
    }

    #[test]
    fn timestamps_and_session_markers() {
        let mut i = Integrity::default();
        let at = |ts: i64, t: &str| Columns { ts_us: Some(ts), event_type: Some(t.into()), ..Columns::default() };
        i.event(&at(20, "SESSION_START"), None);
        i.event(&at(10, "TOOL_START"), None);
        i.event(&at(30, "SESSION_END"), None);
        assert_eq!((i.first_ts_us, i.last_ts_us), (Some(10), Some(30)));
        assert!(i.session_start_seen && i.session_end_seen);
    }

    #[test]
    fn lines_naming_another_job_than_their_directory_are_counted() {
        let (a, b) = ([1u8; 16], [2u8; 16]);
        assert!(foreign_job_line(Some(a), Some(b)));
        assert!(!foreign_job_line(Some(a), Some(a)));
        assert!(!foreign_job_line(None, Some(a)), "a line that names no job cannot disagree");
        assert!(!foreign_job_line(Some(a), None), "outside a job directory there is nothing to disagree with");
        let mut i = Integrity::default();
        let mut c = ev(0);
        c.job_id = Some(b);
        i.event(&c, Some(a));
        c.job_id = Some(a);
        i.event(&c, Some(a));
        assert_eq!((i.valid_lines, i.foreign_job_lines), (2, 1));
    }
}
