//! LOG-slice files ("LOG Slice JSONL Persistence", the `wink-log` dialect): whether a session
//! snapshot's file reference still agrees with the file. Pure.
//!
//! A snapshot records, per slice, `{path, last_seq, entry_count}`: the file then held
//! `entry_count` entries of the slice, the last with `__seq__ = last_seq`. The file agrees when
//! the entry with that seq is there once, exactly `entry_count` entries of the slice lead up to
//! it, `__seq__` rises strictly up to it, and no corrupt line lies before it: then nothing
//! below it was rewritten, lost or added, and the writer may append after it. Entries after it
//! are what the session wrote since.

/// One line of the file, in file order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// An entry: its `__seq__` and whether it is of the slice asked about.
    Entry { seq: Option<i64>, in_slice: bool },
    /// A line that is not an entry.
    Corrupt,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Agrees,
    LastSeqMissing,
    LastSeqRepeated,
    SeqNotIncreasing,
    CorruptBelow,
    CountMismatch,
    FewerEntries,
}

impl Reason {
    pub fn label(self) -> &'static str {
        match self {
            Reason::Agrees => "agrees",
            Reason::LastSeqMissing => "last_seq_missing",
            Reason::LastSeqRepeated => "last_seq_repeated",
            Reason::SeqNotIncreasing => "seq_not_increasing",
            Reason::CorruptBelow => "corrupt_below",
            Reason::CountMismatch => "count_mismatch",
            Reason::FewerEntries => "fewer_entries",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub reason: Reason,
    pub detail: String,
    /// Entries of the slice in the file.
    pub entries: i64,
    /// Entries of the slice up to and including the one with `last_seq`.
    pub entries_through_last_seq: Option<i64>,
    pub max_seq: Option<i64>,
}

impl Check {
    pub fn agrees(&self) -> bool {
        self.reason == Reason::Agrees
    }
}

/// Checks `lines` against a snapshot's `last_seq` (`None`: the snapshot had no entries) and
/// `entry_count`.
pub fn check(lines: impl IntoIterator<Item = Line>, last_seq: Option<i64>, entry_count: i64) -> Check {
    let mut entries = 0i64;
    let mut through = None;
    let mut repeated = false;
    let mut prev: Option<i64> = None;
    let mut not_increasing: Option<(i64, i64)> = None;
    let mut corrupt_before = false;
    let mut max_seq: Option<i64> = None;
    for line in lines {
        match line {
            Line::Corrupt => {
                if through.is_none() {
                    corrupt_before = true;
                }
            }
            Line::Entry { seq, in_slice } => {
                if let Some(s) = seq {
                    max_seq = Some(max_seq.map_or(s, |m| m.max(s)));
                    if through.is_none() {
                        if let Some(p) = prev.filter(|p| s <= *p) {
                            not_increasing.get_or_insert((p, s));
                        }
                    }
                    prev = Some(s);
                }
                if in_slice {
                    entries += 1;
                    if seq.is_some() && seq == last_seq {
                        if through.is_some() {
                            repeated = true;
                        } else {
                            through = Some(entries);
                        }
                    }
                }
            }
        }
    }
    let verdict =
        |reason: Reason, detail: String| Check { reason, detail, entries, entries_through_last_seq: through, max_seq };
    let Some(last) = last_seq else {
        return if entry_count == 0 {
            verdict(Reason::Agrees, "the snapshot recorded no entries".into())
        } else {
            verdict(Reason::LastSeqMissing, format!("the snapshot recorded {entry_count} entries but no last_seq"))
        };
    };
    let Some(n) = through else {
        return if entries < entry_count {
            verdict(Reason::FewerEntries, format!("the file holds {entries} entries of the slice, the snapshot {entry_count}, and none has __seq__ {last}"))
        } else {
            verdict(
                Reason::LastSeqMissing,
                format!("no entry of the slice has __seq__ {last}: the file was truncated or rewritten"),
            )
        };
    };
    if repeated {
        return verdict(
            Reason::LastSeqRepeated,
            format!("more than one entry has __seq__ {last}: the file was rewritten or two writers appended"),
        );
    }
    if let Some((p, s)) = not_increasing {
        return verdict(
            Reason::SeqNotIncreasing,
            format!("__seq__ {s} follows {p} before the snapshot's last entry: rewritten below it"),
        );
    }
    if corrupt_before {
        return verdict(Reason::CorruptBelow, "a corrupt line lies before the snapshot's last entry".into());
    }
    if n != entry_count {
        return verdict(
            Reason::CountMismatch,
            format!("{n} entries of the slice lead up to __seq__ {last}, the snapshot recorded {entry_count}: entries were added or lost below it"),
        );
    }
    verdict(Reason::Agrees, format!("entries written since the snapshot: {}", entries - n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(seqs: &[i64]) -> Vec<Line> {
        seqs.iter().map(|s| Line::Entry { seq: Some(*s), in_slice: true }).collect()
    }

    #[test]
    fn agreeing_files() {
        let c = check(entries(&[1, 2, 3, 4, 5]), Some(3), 3);
        assert!(c.agrees(), "{c:?}");
        assert_eq!((c.entries, c.entries_through_last_seq, c.max_seq), (5, Some(3), Some(5)));
        assert!(check(Vec::new(), None, 0).agrees());
        // Entries of other slices interleave; the count is of the slice.
        let mixed = vec![
            Line::Entry { seq: Some(1), in_slice: true },
            Line::Entry { seq: Some(2), in_slice: false },
            Line::Entry { seq: Some(3), in_slice: true },
        ];
        assert!(check(mixed, Some(3), 2).agrees());
    }

    #[test]
    fn disagreements() {
        assert_eq!(check(entries(&[1, 2]), Some(3), 3).reason, Reason::FewerEntries);
        assert_eq!(check(entries(&[1, 2, 4, 5]), Some(3), 3).reason, Reason::LastSeqMissing);
        assert_eq!(check(entries(&[1, 2, 3, 3]), Some(3), 3).reason, Reason::LastSeqRepeated);
        assert_eq!(check(entries(&[2, 1, 3]), Some(3), 3).reason, Reason::SeqNotIncreasing);
        assert_eq!(check(entries(&[1, 3]), Some(3), 3).reason, Reason::CountMismatch);
        assert_eq!(check(entries(&[0, 1, 2, 3]), Some(3), 3).reason, Reason::CountMismatch);
        let mut corrupt = entries(&[1, 2, 3]);
        corrupt.insert(1, Line::Corrupt);
        assert_eq!(check(corrupt, Some(3), 3).reason, Reason::CorruptBelow);
        // A corrupt line after the snapshot's last entry is the session's business.
        let mut after = entries(&[1, 2, 3]);
        after.push(Line::Corrupt);
        assert!(check(after, Some(3), 3).agrees());
        assert_eq!(check(entries(&[1]), None, 1).reason, Reason::LastSeqMissing);
    }
}
