//! Session-file writers for the crash and reliability tests: `threads` threads, each appending
//! lines to `files_per_thread` files of its own (lines in the control plane's dialect, with a
//! per-file `seq`), now and then stopping mid-line and finishing the line later (sometimes
//! after the settle period). [`Writers::finish`] stops them and says what was written where;
//! [`wait_caught_up`] and [`assert_exactly_once`] check a cluster indexed exactly that.
//!
//! ```ignore
//! use cortex_buffer_e2e::{writers, Cluster};
//! let w = writers::Writers::start(&c.sessions, writers::WriterOptions::new(8, 1, 42));
//! // ... crash things ...
//! let written = w.finish();
//! writers::wait_caught_up(&c, &written, std::time::Duration::from_secs(60));
//! let tally = writers::assert_exactly_once(&c, &written);
//! assert_eq!(tally.duplicates, 0);
//! ```

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::{wait_for, Cluster, Rng};

/// How the writers behave. [`WriterOptions::new`] gives the defaults of exactly_once.rs.
#[derive(Clone, Debug)]
pub struct WriterOptions {
    pub threads: usize,
    pub files_per_thread: usize,
    pub seed: u64,
    /// One line in `cut_one_in` is written in two pieces with a pause between them (0: never).
    pub cut_one_in: usize,
    /// The usual pause inside a cut line: up to this many milliseconds.
    pub cut_pause_ms: u64,
    /// One cut in `long_pause_one_in` pauses `long_pause` instead (meant to be longer than
    /// `cortex_buffer.settle_period`, so the cut line is judged and later re-judged whole).
    pub long_pause_one_in: usize,
    pub long_pause: Duration,
    /// Pause between two lines of a thread: up to this many milliseconds.
    pub gap_ms: u64,
    /// Padding of each line: up to this many bytes.
    pub max_pad: usize,
}

impl WriterOptions {
    pub fn new(threads: usize, files_per_thread: usize, seed: u64) -> WriterOptions {
        WriterOptions {
            threads,
            files_per_thread,
            seed,
            cut_one_in: 8,
            cut_pause_ms: 30,
            long_pause_one_in: 10,
            long_pause: Duration::from_millis(400),
            gap_ms: 4,
            max_pad: 200,
        }
    }
}

/// What was written to one file.
#[derive(Clone, Debug, Default)]
pub struct WrittenFile {
    /// Absolute path.
    pub path: PathBuf,
    /// Path below the sessions directory.
    pub rel: String,
    pub job_id: String,
    /// Each line's byte offset, in order (the line's `seq` is its index here).
    pub offsets: Vec<u64>,
    /// The file's size: every line is complete.
    pub bytes: u64,
}

impl WrittenFile {
    pub fn lines(&self) -> u64 {
        self.offsets.len() as u64
    }

    pub fn offset_sum(&self) -> u64 {
        self.offsets.iter().sum()
    }
}

/// The job id and the path below the sessions directory of file number `k`.
pub fn file_name(k: usize) -> (String, String) {
    let job = format!("0193a8b2-7c41-7d2e-9f00-{k:012x}");
    let (minute, second) = (30 + (k / 60) % 30, k % 60);
    let rel = format!("{job}/session_20260223T14{minute:02}{second:02}Z_pod-{k}.jsonl");
    (job, rel)
}

/// Running writer threads.
pub struct Writers {
    stop: Arc<AtomicBool>,
    lines: Arc<AtomicU64>,
    handles: Vec<JoinHandle<Vec<WrittenFile>>>,
}

impl Writers {
    /// Creates the files (empty) below `root` and starts the threads. Files are numbered
    /// `thread * files_per_thread + i` (see [`file_name`]).
    pub fn start(root: &Path, opts: WriterOptions) -> Writers {
        assert!(opts.threads > 0 && opts.files_per_thread > 0, "{opts:?}");
        let stop = Arc::new(AtomicBool::new(false));
        let lines = Arc::new(AtomicU64::new(0));
        let handles = (0..opts.threads)
            .map(|t| {
                let files: Vec<(File, WrittenFile)> = (0..opts.files_per_thread)
                    .map(|i| {
                        let (job_id, rel) = file_name(t * opts.files_per_thread + i);
                        let path = root.join(&rel);
                        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir job directory");
                        let f = OpenOptions::new().create(true).append(true).open(&path).expect("open session file");
                        (f, WrittenFile { path, rel, job_id, offsets: Vec::new(), bytes: 0 })
                    })
                    .collect();
                let (stop, lines, opts) = (Arc::clone(&stop), Arc::clone(&lines), opts.clone());
                let seed = opts.seed ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                std::thread::spawn(move || write_loop(files, Rng::new(seed), &opts, &stop, &lines))
            })
            .collect();
        Writers { stop, lines, handles }
    }

    /// Complete lines written so far (over every file).
    pub fn lines_so_far(&self) -> u64 {
        self.lines.load(Ordering::Relaxed)
    }

    /// Stops the threads (each finishes the line it is writing) and returns every file.
    pub fn finish(self) -> Vec<WrittenFile> {
        self.stop.store(true, Ordering::Relaxed);
        self.handles.into_iter().flat_map(|h| h.join().expect("writer thread panicked")).collect()
    }
}

fn write_loop(
    mut files: Vec<(File, WrittenFile)>,
    mut rng: Rng,
    o: &WriterOptions,
    stop: &AtomicBool,
    lines: &AtomicU64,
) -> Vec<WrittenFile> {
    while !stop.load(Ordering::Relaxed) {
        let i = rng.below(files.len());
        let (file, w) = &mut files[i];
        let line = format!(
            "{{\"type\":\"TOOL_RESULT\",\"timestamp\":\"2026-02-23T14:30:22.000Z\",\"job_id\":\"{}\",\"seq\":{},\"pad\":\"{}\"}}\n",
            w.job_id,
            w.offsets.len(),
            "x".repeat(rng.below(o.max_pad + 1))
        );
        let bytes = line.as_bytes();
        w.offsets.push(w.bytes);
        if o.cut_one_in > 0 && rng.below(o.cut_one_in) == 0 {
            let cut = 1 + rng.below(bytes.len() - 1);
            file.write_all(&bytes[..cut]).expect("write");
            let long = o.long_pause_one_in > 0 && rng.below(o.long_pause_one_in) == 0;
            std::thread::sleep(if long { o.long_pause } else { rng.millis_below(o.cut_pause_ms.max(1)) });
            file.write_all(&bytes[cut..]).expect("write");
        } else {
            file.write_all(bytes).expect("write");
        }
        w.bytes += bytes.len() as u64;
        lines.fetch_add(1, Ordering::Relaxed);
        if o.gap_ms > 0 {
            std::thread::sleep(rng.millis_below(o.gap_ms));
        }
    }
    files.into_iter().map(|(_, w)| w).collect()
}

/// Asks for a pass and waits until nothing is pending and `events_indexed` equals the lines
/// of `written` (so: only use it when these files are all the cluster has). Panics with the
/// status and the log's tail after `timeout`.
pub fn wait_caught_up(c: &Cluster, written: &[WrittenFile], timeout: Duration) -> Duration {
    let total: u64 = written.iter().map(WrittenFile::lines).sum();
    let _ = c.try_psql("postgres", "SELECT cortex_buffer.index_now()");
    let want = format!("0 0 {total}");
    wait_for(timeout, || {
        c.try_psql(
            "postgres",
            "SELECT bytes_pending || ' ' || files_pending_tail || ' ' || events_indexed FROM cortex_buffer.indexer_status",
        )
        .is_ok_and(|s| s == want)
    })
    .unwrap_or_else(|| {
        panic!(
            "not caught up with {total} lines: {}\n{}",
            c.try_psql("postgres", "SELECT row_to_json(s) FROM cortex_buffer.indexer_status s").unwrap_or_else(|e| e),
            c.log_tail()
        )
    })
}

/// What [`assert_exactly_once`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub files: usize,
    /// Lines the writers wrote.
    pub lines: u64,
    /// Event rows of these files.
    pub rows: u64,
    /// Rows beyond the first at the same (file, offset).
    pub duplicates: u64,
    /// corrupt_line rows of these files.
    pub corrupt: u64,
}

/// Asserts that each file of `written` has exactly its lines as events: as many rows as lines,
/// as many distinct offsets, the same sum of offsets, every `seq` once, and no corrupt lines.
pub fn assert_exactly_once(c: &Cluster, written: &[WrittenFile]) -> Tally {
    assert_exactly_once_as(c, written, |w| w.path.display().to_string())
}

/// [`assert_exactly_once`] for the copies of the files recorded under `path_of` (a pushed copy
/// is `push:/<rel>`).
pub fn assert_exactly_once_as(c: &Cluster, written: &[WrittenFile], path_of: impl Fn(&WrittenFile) -> String) -> Tally {
    let got: HashMap<String, (u64, u64, u64, u64, u64)> = c
        .psql(
            "SELECT f.path || '|' || count(e.byte_offset) || '|' || count(DISTINCT e.byte_offset) || '|' ||
                    coalesce(sum(e.byte_offset), 0) || '|' || count(DISTINCT (e.payload->>'seq')) || '|' ||
                    (SELECT count(*) FROM cortex_buffer.corrupt_line k WHERE k.file_id = f.file_id)
               FROM cortex_buffer.session_file f LEFT JOIN cortex_buffer.event e USING (file_id)
              GROUP BY f.file_id, f.path",
        )
        .lines()
        .map(|l| {
            let v: Vec<&str> = l.rsplitn(6, '|').collect();
            let n = |i: usize| v[i].parse::<u64>().unwrap_or_else(|e| panic!("{l}: {e}"));
            (v[5].to_owned(), (n(4), n(3), n(2), n(1), n(0)))
        })
        .collect();
    let mut tally = Tally { files: written.len(), ..Tally::default() };
    for w in written {
        let path = path_of(w);
        let (rows, distinct, sum, seqs, corrupt) =
            *got.get(&path).unwrap_or_else(|| panic!("{path} is not in session_file"));
        tally.lines += w.lines();
        tally.rows += rows;
        tally.duplicates += rows - distinct;
        tally.corrupt += corrupt;
        assert_eq!(
            (rows, distinct, sum, seqs, corrupt),
            (w.lines(), w.lines(), w.offset_sum(), w.lines(), 0),
            "{path}: events, distinct offsets, offset sum, distinct seq, corrupt lines"
        );
    }
    tally
}
