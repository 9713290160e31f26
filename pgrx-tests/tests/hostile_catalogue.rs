//! R5 of the reliability suite: the hostile-file catalogue. One cluster, one worker, a table of
//! named cases; each does something hostile to the session volume and asserts what the
//! extension records (events, corrupt lines, the `session_file` row: gone, a new generation,
//! quarantined, or skipped and logged once). After every case the worker's pid is the one it had
//! at the start, and a canary file that receives new lines after each case is indexed up to its
//! last line within a bound.
//!
//! Sizes scale through the environment (short default, used by CI / the full setting of the
//! issue): `CORTEX_R5_LINE_MB` (16 / 100: the long line), `CORTEX_R5_DEPTH` (100 000 / 100 000),
//! `CORTEX_R5_TINY_FILES` (10 000 / 100 000), `CORTEX_R5_RENAMES` (2 000 / 20 000),
//! `CORTEX_R5_GROW_MS` (3 000 / 30 000: one byte a millisecond for that long),
//! `CORTEX_R5_MIDREAD_MB` (40 / 200), `CORTEX_R5_HOLE_GB` (1 / 1 024), `CORTEX_R5_GARBAGE_MB`
//! (1 / 16), `CORTEX_R5_FULL_MB` (8 / 32: the session file that fills the tablespace).
//! `CORTEX_R5_SEED` replays a run. `CORTEX_R5_ONLY=name,name` runs only those cases (the canary
//! and pid checks still run).
//!
//! The disk-full case mounts a tmpfs (root and mount permission needed), puts a tablespace on it
//! and moves `event` and `corrupt_line` (and their indexes) there, never the WAL; without
//! permission to mount it is skipped with a loud message, and the report says so.

use std::cell::{Cell, RefCell};
use std::ffi::OsStr;
use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use cortex_buffer_e2e::{env_size, report, wait_for, Cluster, Rng};

const TS: &str = "2026-02-23T14:30:22.000Z";
const WAIT: Duration = Duration::from_secs(30);

fn job(n: u32) -> String {
    format!("0193a8b2-0000-7000-8000-{n:012x}")
}

fn ev(job: &str, i: usize) -> String {
    format!(r#"{{"type":"TOOL_RESULT","timestamp":"{TS}","job_id":"{job}","seq":{i}}}"#)
}

fn evs(job: &str, from: usize, n: usize) -> String {
    (from..from + n).map(|i| ev(job, i) + "\n").collect()
}

/// A `session_file` row and what the tables hold for it.
#[derive(Debug, Clone, Default)]
struct Row {
    valid: i64,
    corrupt: i64,
    blank: i64,
    total: i64,
    generation: i64,
    gone: bool,
    quarantined: bool,
    failures: i64,
    offset: i64,
    size: i64,
    events: i64,
    corrupt_rows: i64,
    crash_cuts: i64,
    tail: String,
    path: String,
}

impl Row {
    /// Every counted line is in the tables, exactly once.
    fn consistent(&self) -> bool {
        self.valid == self.events && self.corrupt == self.corrupt_rows
    }
}

struct MountGuard(PathBuf);

impl Drop for MountGuard {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        let _ = fs::remove_dir_all(&self.0);
    }
}

struct Ctx {
    c: Cluster,
    first_pid: i32,
    canary: String,
    canary_lines: Cell<usize>,
    rng: RefCell<Rng>,
    /// Set when a case had to be skipped (no permission): said in the report.
    skipped: RefCell<Vec<String>>,
    /// Where the extension differs from its documentation without losing, duplicating or
    /// crashing: reported loudly, not failed.
    findings: RefCell<Vec<String>>,
    /// Declared after the cluster: the cluster stops before the tmpfs is unmounted.
    mount: RefCell<Option<MountGuard>>,
}

impl Ctx {
    fn path(&self, rel: &str) -> PathBuf {
        self.c.sessions.join(rel)
    }

    fn write(&self, rel: &str, body: &[u8]) {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(&p, body).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
    }

    fn append(&self, rel: &str, body: &[u8]) {
        let mut f = fs::OpenOptions::new().append(true).open(self.path(rel)).expect("open to append");
        f.write_all(body).expect("append");
    }

    fn q(&self, sql: &str) -> String {
        self.c.psql(sql)
    }

    /// The live row of the file whose path ends with `/<rel>` (else its newest gone one).
    fn row(&self, rel: &str) -> Option<Row> {
        let tail = format!("/{rel}").replace('\'', "''");
        let n = rel.chars().count() + 1;
        let out = self
            .c
            .try_psql(
                "postgres",
                &format!(
                    "SELECT valid_lines, corrupt_lines, blank_lines, total_lines, generation, gone_at IS NOT NULL,
                            quarantined_at IS NOT NULL, failures, indexed_offset, coalesce(size_bytes, 0),
                            (SELECT count(*) FROM cortex_buffer.event e WHERE e.file_id = f.file_id),
                            (SELECT count(*) FROM cortex_buffer.corrupt_line k WHERE k.file_id = f.file_id),
                            crash_cut_lines, tail_state, path
                       FROM cortex_buffer.session_file f WHERE right(path, {n}) = '{tail}'
                      ORDER BY gone_at IS NOT NULL, file_id DESC LIMIT 1"
                ),
            )
            .ok()?;
        let f: Vec<&str> = out.splitn(15, '|').collect();
        if f.len() < 15 {
            return None;
        }
        let i = |k: usize| f[k].trim().parse::<i64>().unwrap_or(-1);
        Some(Row {
            valid: i(0),
            corrupt: i(1),
            blank: i(2),
            total: i(3),
            generation: i(4),
            gone: f[5] == "t",
            quarantined: f[6] == "t",
            failures: i(7),
            offset: i(8),
            size: i(9),
            events: i(10),
            corrupt_rows: i(11),
            crash_cuts: i(12),
            tail: f[13].to_owned(),
            path: f[14].to_owned(),
        })
    }

    /// Waits until `rel`'s row satisfies `ok` and returns it; panics with the row and the log.
    fn wait_row(&self, rel: &str, within: Duration, ok: impl Fn(&Row) -> bool) -> Row {
        let mut last = None;
        let held = wait_for(within, || {
            last = self.row(rel);
            last.as_ref().is_some_and(&ok)
        });
        assert!(held.is_some(), "{rel}: row never as expected within {within:?}: {last:?}\n{}", self.c.log_tail());
        last.expect("row")
    }

    fn rows_of_dir(&self, dir: &str) -> i64 {
        self.q(&format!("SELECT count(*) FROM cortex_buffer.session_file WHERE job_dir = '{dir}'"))
            .parse()
            .unwrap_or(-1)
    }

    /// `path`, `what` of the event rows of `rel` (by line).
    fn event_list(&self, rel: &str) -> String {
        let tail = format!("/{rel}");
        let n = tail.chars().count();
        self.q(&format!(
            "SELECT coalesce(string_agg(e.line_no || ':' || e.type || ':' || coalesce(e.payload_problem, 'stored'), ',' ORDER BY e.line_no), '')
               FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id)
              WHERE right(f.path, {n}) = '{tail}' AND f.gone_at IS NULL"
        ))
    }

    fn corrupt_list(&self, rel: &str) -> String {
        let tail = format!("/{rel}");
        let n = tail.chars().count();
        self.q(&format!(
            "SELECT coalesce(string_agg(k.line_no || ':' || k.reason, ',' ORDER BY k.line_no), '')
               FROM cortex_buffer.corrupt_line k JOIN cortex_buffer.session_file f USING (file_id)
              WHERE right(f.path, {n}) = '{tail}' AND f.gone_at IS NULL"
        ))
    }

    fn log_lines(&self, all: &[&str]) -> usize {
        self.c.log_text().lines().filter(|l| all.iter().all(|n| l.contains(n))).count()
    }

    /// Makes the worker walk everything twice.
    fn walk_twice(&self) {
        for _ in 0..2 {
            assert_eq!(self.q("SELECT cortex_buffer.index_now()"), "t");
            std::thread::sleep(Duration::from_millis(400));
        }
    }

    /// A skipped entry: logged, exactly once even after more walks, and never recorded.
    fn skipped_once(&self, rel_dir_or_file: &str, reason: &str) {
        let shown = self.path(rel_dir_or_file).display().to_string();
        let needle = format!("skipping \"{shown}\"");
        let seen = wait_for(WAIT, || self.log_lines(&[&needle, reason]) >= 1);
        assert!(seen.is_some(), "no `{needle}`…`{reason}` in the log:\n{}", self.c.log_tail());
        self.walk_twice();
        assert_eq!(self.log_lines(&[&needle]), 1, "logged more than once: {needle}");
        let tail = format!("/{rel_dir_or_file}").replace('\'', "''");
        let n = rel_dir_or_file.chars().count() + 1;
        assert_eq!(
            self.q(&format!(
                "SELECT count(*) FROM cortex_buffer.session_file WHERE right(path, {n}) = '{tail}' OR path LIKE '{}/%'",
                shown.replace('\'', "''")
            )),
            "0",
            "{rel_dir_or_file} was recorded"
        );
    }

    /// After each case: the same worker, and the canary indexed up to its last line.
    fn after_case(&self, case: &str) -> Duration {
        assert_eq!(
            self.c.worker_pid(),
            Some(self.first_pid),
            "after {case}: the worker's pid changed\n{}",
            self.c.log_tail()
        );
        let rel = format!("{}/session-001.jsonl", self.canary);
        let from = self.canary_lines.get();
        self.append(&rel, evs(&self.canary, from, 5).as_bytes());
        let want = (from + 5) as i64;
        self.canary_lines.set(from + 5);
        let t = Instant::now();
        let r = self.wait_row(&rel, WAIT, |r| r.valid == want && r.events == want && !r.gone);
        assert!(r.consistent() && r.corrupt == 0, "after {case}: canary {r:?}");
        assert_eq!(self.c.worker_pid(), Some(self.first_pid), "after {case}: the worker's pid changed");
        t.elapsed()
    }

    fn finding(&self, case: &str, what: String) {
        eprintln!("!!!!! R5 FINDING in {case}: {what}");
        self.findings.borrow_mut().push(format!("{case}: {what}"));
    }

    fn rng_below(&self, n: usize) -> usize {
        self.rng.borrow_mut().below(n)
    }
}

/// One row of the catalogue: its name, what it does to the volume, what must be recorded, and
/// the code that does and checks it (returning a one-line outcome).
struct Case {
    name: &'static str,
    does: &'static str,
    expects: &'static str,
    run: fn(&Ctx) -> String,
}

const CASES: &[Case] = &[
    Case {
        name: "nul_bytes",
        does: "raw NUL bytes in lines, and a \\u0000 escape in an event's string",
        expects: "raw-NUL lines are corrupt (not valid JSON); the \\u0000 event is stored with payload NULL, payload_problem 'jsonb cannot store \\u0000'",
        run: nul_bytes,
    },
    Case {
        name: "invalid_utf8",
        does: "a line of invalid UTF-8, and an event with an invalid byte in a string",
        expects: "the garbage line is corrupt; the event is stored with payload_problem 'invalid UTF-8 replaced by U+FFFD'",
        run: invalid_utf8,
    },
    Case {
        name: "line_100mb",
        does: "one line of CORTEX_R5_LINE_MB MB (100 in the full setting) between two events",
        expects: "the line is an event stored with its string cut ('longer than cortex_buffer.max_line_bytes (…): strings longer than 65536 bytes were truncated'), both others stored, offset at the end",
        run: long_line,
    },
    Case {
        name: "nesting_100k",
        does: "an event nested CORTEX_R5_DEPTH (100 000) deep, and an unbalanced 100 000-deep line",
        expects: "the event is stored with payload NULL ('nested deeper than jsonb is trusted with'); the other is corrupt",
        run: deep_nesting,
    },
    Case {
        name: "fifo",
        does: "a FIFO named session-001.jsonl (nobody writes to it) beside a good file",
        expects: "skipped and logged once ('not a regular file'), no row; the good file indexed; no read blocks",
        run: fifo,
    },
    Case {
        name: "device_node",
        does: "a character device (/dev/null's 1,3) named *.jsonl",
        expects: "skipped and logged once, no row",
        run: device_node,
    },
    Case {
        name: "symlink_escape",
        does: "links to /etc/passwd, to ../../ outside, and to another job's file",
        expects: "each skipped and logged once ('leads outside'), no row",
        run: symlink_escape,
    },
    Case {
        name: "symlink_loop",
        does: "a.jsonl -> b.jsonl -> a.jsonl, self.jsonl -> self.jsonl",
        expects: "each skipped and logged once, no row",
        run: symlink_loop,
    },
    Case {
        name: "dangling_symlink",
        does: "a link to a file that does not exist",
        expects: "skipped and logged once ('dangling symbolic link'), no row",
        run: dangling_symlink,
    },
    Case {
        name: "permission_denied_file",
        does: "a session file of mode 000; later mode 644 and clear_quarantine()",
        expects: "recorded, failures counted, quarantined after quarantine_after (3) with one log line; indexed once cleared",
        run: permission_denied_file,
    },
    Case {
        name: "permission_denied_dir",
        does: "a job directory of mode 000; later mode 755",
        expects: "skipped and logged once ('could not open directory'), no row; indexed once readable",
        run: permission_denied_dir,
    },
    Case {
        name: "deleted_mid_read",
        does: "a CORTEX_R5_MIDREAD_MB MB file appears (rename) and is unlinked while the worker reads it",
        expects: "the row is marked gone; what was indexed is whole lines, counted exactly (valid_lines = events); a partial file is listed as file_gone",
        run: deleted_mid_read,
    },
    Case {
        name: "truncate_regrow",
        does: "a file truncated to 0 and regrown with other lines past its old size (at once), then truncated and regrown again",
        expects: "a new generation each time; the rows are exactly the new lines",
        run: truncate_regrow,
    },
    Case {
        name: "inode_swap",
        does: "the file replaced by rename with a new inode holding the same first lines plus more",
        expects: "a new generation from byte 0: every line once (no duplicates of the common prefix)",
        run: inode_swap,
    },
    Case {
        name: "rename_storm",
        does: "CORTEX_R5_RENAMES renames of 20 files to fresh names, within and across two job directories",
        expects: "each live file's row holds exactly its lines; every other row is gone; nothing half-indexed",
        run: rename_storm,
    },
    Case {
        name: "tiny_files",
        does: "CORTEX_R5_TINY_FILES one-line files (100 000 full, 10 000 CI) in directories of 100",
        expects: "a row and one event per file, nothing else",
        run: tiny_files,
    },
    Case {
        name: "binary_garbage",
        does: "CORTEX_R5_GARBAGE_MB MB of random bytes",
        expects: "no event; the counts equal file_integrity()'s; every corrupt line recorded",
        run: binary_garbage,
    },
    Case {
        name: "bom",
        does: "a UTF-8 BOM before the first line and before a later line",
        expects: "every line an event (the BOM is white space), nothing corrupt",
        run: bom,
    },
    Case {
        name: "crlf",
        does: "CRLF line ends",
        expects: "every line an event, nothing corrupt or blank",
        run: crlf,
    },
    Case {
        name: "splice_cortex",
        does: "two cortex events spliced on one line (`}{`), the second a new writer's SESSION_START",
        expects: "one corrupt line counted as a crash cut; the new writer's line indexed at its own offset",
        run: splice_cortex,
    },
    Case {
        name: "splice_claude",
        does: "two Claude Code lines spliced on one line (`}{`)",
        expects: "one corrupt line (Claude Code splices stay one corrupt line), the others events",
        run: splice_claude,
    },
    Case {
        name: "truncated_tail",
        does: "a file whose last line is cut and never completed",
        expects: "after settle_period: tail_state 'truncated', corrupt 1, not held against the ratio",
        run: truncated_tail,
    },
    Case {
        name: "replaced_by_directory",
        does: "an indexed file removed and a directory made under its name",
        expects: "the row is gone (its rows kept); the directory is skipped and logged once, never recorded",
        run: replaced_by_directory,
    },
    Case {
        name: "sparse_hole",
        does: "an event, a hole of CORTEX_R5_HOLE_GB GiB (1 TiB full), an event",
        expects: "2 events and one over-long corrupt line (the zeros), read by skipping the hole",
        run: sparse_hole,
    },
    Case {
        name: "grow_1byte_per_ms",
        does: "a file growing by one byte a millisecond for CORTEX_R5_GROW_MS ms",
        expects: "at the end every line exactly once, nothing corrupt",
        run: grow_1byte_per_ms,
    },
    Case {
        name: "non_utf8_names",
        does: "a file name and a job directory name that are not UTF-8",
        expects: "each skipped and logged once ('name is not valid UTF-8'), no row; the good file beside them indexed",
        run: non_utf8_names,
    },
    Case {
        name: "quote_names",
        does: "file names with quotes, a semicolon, a percent sign, a backslash and a newline",
        expects: "recorded under their exact names and indexed",
        run: quote_names,
    },
    Case {
        name: "disk_full",
        does: "event/corrupt_line on a tablespace on a small tmpfs, filled by a filler file, while a large session file arrives; then the filler deleted",
        expects: "the out-of-space error (53100) logged, the worker alive, nothing half-indexed; after freeing, the file indexed exactly once",
        run: disk_full,
    },
    Case {
        name: "sessions_dir_symlink",
        does: "sessions_dir itself moved away and replaced by a symbolic link to it, then put back",
        expects: "indexing goes on; no job's events are duplicated",
        run: sessions_dir_symlink,
    },
];

// ---------------------------------------------------------------------------------------------
// The cases.

fn nul_bytes(x: &Ctx) -> String {
    let j = job(1);
    let rel = format!("{j}/session-001.jsonl");
    let mut b = Vec::new();
    b.extend_from_slice((ev(&j, 0) + "\n").as_bytes());
    b.extend_from_slice(b"{\"type\":\"X\",\"timestamp\":\"t\",\"nul\":\"a\x00b\"}\n");
    b.extend_from_slice(b"\x00\x00\x00\x00\n");
    b.extend_from_slice(
        format!("{{\"type\":\"NUL\",\"timestamp\":\"{TS}\",\"job_id\":\"{j}\",\"x\":\"a\\u0000b\"}}\n").as_bytes(),
    );
    b.extend_from_slice((ev(&j, 1) + "\n").as_bytes());
    x.write(&rel, &b);
    let r = x.wait_row(&rel, WAIT, |r| r.offset == b.len() as i64);
    assert!(r.consistent(), "{r:?}");
    assert_eq!((r.valid, r.corrupt), (3, 2), "{r:?}");
    assert_eq!(x.event_list(&rel), "1:TOOL_RESULT:stored,4:NUL:jsonb cannot store \\u0000,5:TOOL_RESULT:stored");
    let corrupt = x.corrupt_list(&rel);
    assert!(corrupt.starts_with("2:not valid JSON") && corrupt.contains(",3:not valid JSON"), "{corrupt}");
    "3 events (1 with payload NULL), 2 corrupt".to_owned()
}

fn invalid_utf8(x: &Ctx) -> String {
    let j = job(2);
    let rel = format!("{j}/session-001.jsonl");
    let mut b = Vec::new();
    b.extend_from_slice((ev(&j, 0) + "\n").as_bytes());
    b.extend_from_slice(b"\xff\xfe\xfd not utf-8 at all \xc3\x28\n");
    b.extend_from_slice(format!("{{\"type\":\"UTF8\",\"timestamp\":\"{TS}\",\"job_id\":\"{j}\",\"x\":\"").as_bytes());
    b.extend_from_slice(b"\xff\xc0\x80\"}\n");
    b.extend_from_slice((ev(&j, 1) + "\n").as_bytes());
    x.write(&rel, &b);
    let r = x.wait_row(&rel, WAIT, |r| r.offset == b.len() as i64);
    assert!(r.consistent(), "{r:?}");
    assert_eq!((r.valid, r.corrupt), (3, 1), "{r:?}");
    assert_eq!(x.event_list(&rel), "1:TOOL_RESULT:stored,3:UTF8:invalid UTF-8 replaced by U+FFFD,4:TOOL_RESULT:stored");
    assert!(x.corrupt_list(&rel).starts_with("2:not valid JSON"));
    "3 events (1 flagged U+FFFD), 1 corrupt".into()
}

fn long_line(x: &Ctx) -> String {
    let mb = env_size("CORTEX_R5_LINE_MB", 16) as usize;
    let j = job(3);
    let rel = format!("{j}/session-001.jsonl");
    let p = x.path(&rel);
    fs::create_dir_all(p.parent().expect("dir")).expect("mkdir");
    let mut f = fs::File::create(&p).expect("create");
    f.write_all((ev(&j, 0) + "\n").as_bytes()).expect("write");
    f.write_all(format!("{{\"type\":\"HUGE\",\"timestamp\":\"{TS}\",\"x\":\"").as_bytes()).expect("write");
    let chunk = vec![b'y'; 1 << 20];
    for _ in 0..mb {
        f.write_all(&chunk).expect("write");
    }
    f.write_all(b"\"}\n").expect("write");
    f.write_all((ev(&j, 1) + "\n").as_bytes()).expect("write");
    let len = f.metadata().expect("stat").len() as i64;
    drop(f);
    // The workers' peak resident memory (the largest, kB) before and after: the line streams
    // past, never held.
    let peak = || {
        x.c.worker_pids()
            .into_iter()
            .filter_map(|pid| fs::read_to_string(format!("/proc/{pid}/status")).ok())
            .filter_map(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(str::to_owned))
            .filter_map(|l| l.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()))
            .max()
            .unwrap_or(0)
    };
    let peak_before = peak();
    let t = Instant::now();
    let r = x.wait_row(&rel, Duration::from_secs(60), |r| r.offset == len);
    assert!(r.consistent(), "{r:?}");
    let peak_after = peak();
    // Less than a tenth of the line, and of max_line_memory (64 MiB): the bytes were never held.
    let grew_mb = peak_after.saturating_sub(peak_before) as f64 / 1024.0;
    assert!(grew_mb < (mb as f64 / 10.0).max(4.0), "the worker's peak grew by {grew_mb:.1} MB over a {mb} MB line");
    // Valid JSON and an event: an event, its string cut to a head (the line is never held).
    assert_eq!((r.valid, r.corrupt, r.total), (3, 0, 3), "{r:?}");
    let events = x.event_list(&rel);
    assert!(
        events.contains("2:HUGE:line of")
            && events.contains("longer than cortex_buffer.max_line_bytes")
            && events.contains("strings longer than 65536 bytes were truncated"),
        "{events}"
    );
    assert_eq!(x.corrupt_list(&rel), "");
    format!(
        "{mb} MB line: an event with its string cut, 3 events, indexed in {:.1} s; the workers' peak RSS {:.1} -> {:.1} MB",
        t.elapsed().as_secs_f64(),
        peak_before as f64 / 1024.0,
        peak_after as f64 / 1024.0
    )
}

fn deep_nesting(x: &Ctx) -> String {
    let depth = env_size("CORTEX_R5_DEPTH", 100_000) as usize;
    let j = job(4);
    let rel = format!("{j}/session-001.jsonl");
    let mut b = String::new();
    b += &format!(
        "{{\"type\":\"DEEP\",\"timestamp\":\"{TS}\",\"job_id\":\"{j}\",\"x\":{}1{}}}\n",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    b += &format!("{{\"type\":\"DEEP\",\"timestamp\":\"{TS}\",\"x\":{}1}}\n", "{\"a\":".repeat(depth));
    b += &(ev(&j, 0) + "\n");
    x.write(&rel, b.as_bytes());
    let r = x.wait_row(&rel, WAIT, |r| r.offset == b.len() as i64);
    assert!(r.consistent(), "{r:?}");
    assert_eq!((r.valid, r.corrupt), (2, 1), "{r:?}");
    assert_eq!(
        x.event_list(&rel),
        "1:DEEP:nested deeper than jsonb is trusted with (1000 levels),3:TOOL_RESULT:stored"
    );
    assert!(x.corrupt_list(&rel).starts_with("2:not valid JSON"));
    format!("{depth} deep: event with payload NULL; unbalanced one corrupt")
}

fn with_good_file(x: &Ctx, j: &str) {
    let rel = format!("{j}/session-002.jsonl");
    x.write(&rel, evs(j, 0, 3).as_bytes());
    let r = x.wait_row(&rel, WAIT, |r| r.valid == 3);
    assert!(r.consistent(), "{r:?}");
}

fn fifo(x: &Ctx) -> String {
    let j = job(5);
    fs::create_dir_all(x.path(&j)).expect("mkdir");
    let rel = format!("{j}/session-001.jsonl");
    assert!(Command::new("mkfifo").arg(x.path(&rel)).status().expect("mkfifo").success());
    with_good_file(x, &j);
    x.skipped_once(&rel, "not a regular file");
    "skipped, logged once; beside it indexed".into()
}

fn device_node(x: &Ctx) -> String {
    let j = job(6);
    fs::create_dir_all(x.path(&j)).expect("mkdir");
    let rel = format!("{j}/session-001.jsonl");
    if !Command::new("mknod").arg(x.path(&rel)).args(["c", "1", "3"]).status().is_ok_and(|s| s.success()) {
        eprintln!("!!!!! R5 device_node: mknod is not allowed here: CASE SKIPPED !!!!!");
        x.skipped.borrow_mut().push("device_node (mknod refused)".into());
        return "SKIPPED: mknod refused".into();
    }
    with_good_file(x, &j);
    x.skipped_once(&rel, "not a regular file");
    "skipped, logged once".into()
}

fn symlink_escape(x: &Ctx) -> String {
    let j = job(7);
    fs::create_dir_all(x.path(&j)).expect("mkdir");
    std::os::unix::fs::symlink("/etc/passwd", x.path(&format!("{j}/abs.jsonl"))).expect("symlink");
    std::os::unix::fs::symlink("../../run/postgres.log", x.path(&format!("{j}/rel.jsonl"))).expect("symlink");
    std::os::unix::fs::symlink(format!("../{}/session-001.jsonl", x.canary), x.path(&format!("{j}/steal.jsonl")))
        .expect("symlink");
    with_good_file(x, &j);
    for name in ["abs.jsonl", "rel.jsonl", "steal.jsonl"] {
        x.skipped_once(&format!("{j}/{name}"), "leads outside");
    }
    "3 links skipped, each logged once".into()
}

fn symlink_loop(x: &Ctx) -> String {
    let j = job(8);
    fs::create_dir_all(x.path(&j)).expect("mkdir");
    std::os::unix::fs::symlink("b.jsonl", x.path(&format!("{j}/a.jsonl"))).expect("symlink");
    std::os::unix::fs::symlink("a.jsonl", x.path(&format!("{j}/b.jsonl"))).expect("symlink");
    std::os::unix::fs::symlink("self.jsonl", x.path(&format!("{j}/self.jsonl"))).expect("symlink");
    with_good_file(x, &j);
    for name in ["a.jsonl", "b.jsonl", "self.jsonl"] {
        x.skipped_once(&format!("{j}/{name}"), "symbolic link");
    }
    "3 looping links skipped, each logged once".into()
}

fn dangling_symlink(x: &Ctx) -> String {
    let j = job(9);
    fs::create_dir_all(x.path(&j)).expect("mkdir");
    std::os::unix::fs::symlink("missing.jsonl", x.path(&format!("{j}/dangling.jsonl"))).expect("symlink");
    with_good_file(x, &j);
    x.skipped_once(&format!("{j}/dangling.jsonl"), "dangling symbolic link");
    "skipped, logged once".into()
}

fn permission_denied_file(x: &Ctx) -> String {
    let j = job(10);
    let rel = format!("{j}/session-001.jsonl");
    x.write(&rel, evs(&j, 0, 3).as_bytes());
    fs::set_permissions(x.path(&rel), fs::Permissions::from_mode(0o000)).expect("chmod");
    let shown = x.path(&rel).display().to_string();
    let needle = format!("quarantined \"{shown}\"");
    assert!(wait_for(WAIT, || x.log_lines(&[&needle]) >= 1).is_some(), "never quarantined:\n{}", x.c.log_tail());
    // Documented: failures, last_error and quarantined_at on the row (files_quarantined).
    let recorded = wait_for(Duration::from_secs(5), || x.row(&rel).is_some_and(|r| r.quarantined)).is_some();
    let r = x.row(&rel).expect("row");
    assert!(r.valid == 0 && r.events == 0, "{r:?}");
    assert!(
        recorded && r.failures >= 3,
        "the worker logged `quarantined` but session_file says failures {}, quarantined {}",
        r.failures,
        r.quarantined
    );
    x.walk_twice();
    assert_eq!(x.log_lines(&[&needle]), 1, "quarantine logged more than once");
    fs::set_permissions(x.path(&rel), fs::Permissions::from_mode(0o644)).expect("chmod");
    let cleared = x.q(&format!("SELECT cortex_buffer.clear_quarantine('{rel}')"));
    let t = Instant::now();
    let how = "after clear_quarantine, by itself";
    // The worker asks about the files it holds quarantined within a poll_interval.
    let r = x.wait_row(&rel, Duration::from_secs(5), |r| r.valid == 3);
    assert_eq!(cleared, "t", "clear_quarantine found it quarantined");
    assert!(r.consistent() && !r.quarantined && r.failures == 0, "{r:?}");
    format!(
        "quarantined (row says so: {recorded}), logged once; clear_quarantine -> {cleared}; indexed (3) {how}, {:.1} s later",
        t.elapsed().as_secs_f64()
    )
}

fn permission_denied_dir(x: &Ctx) -> String {
    let j = job(11);
    let rel = format!("{j}/session-001.jsonl");
    x.write(&rel, evs(&j, 0, 2).as_bytes());
    fs::set_permissions(x.path(&j), fs::Permissions::from_mode(0o000)).expect("chmod");
    x.q("SELECT cortex_buffer.index_now()");
    x.skipped_once(&j, "could not open directory");
    fs::set_permissions(x.path(&j), fs::Permissions::from_mode(0o755)).expect("chmod");
    let t = Instant::now();
    let r = x.wait_row(&rel, WAIT, |r| r.valid == 2);
    let unaided = t.elapsed();
    assert!(r.consistent(), "{r:?}");
    format!("skipped, logged once; indexed {:.1} s after chmod 755 (no index_now)", unaided.as_secs_f64())
}

fn deleted_mid_read(x: &Ctx) -> String {
    let mb = env_size("CORTEX_R5_MIDREAD_MB", 40) as usize;
    let j = job(12);
    let rel = format!("{j}/session-001.jsonl");
    fs::create_dir_all(x.path(&j)).expect("mkdir");
    let part = x.path(&format!("{j}/incoming.part"));
    // Each line's end offset, to tell a line boundary.
    let mut ends = vec![0i64];
    {
        let mut f = std::io::BufWriter::new(fs::File::create(&part).expect("create"));
        let mut i = 0;
        while *ends.last().expect("end") < (mb << 20) as i64 {
            let line = ev(&j, i) + "\n";
            f.write_all(line.as_bytes()).expect("write");
            ends.push(ends.last().expect("end") + line.len() as i64);
            i += 1;
        }
    }
    let lines = ends.len() - 1;
    let size = fs::metadata(&part).expect("stat").len() as i64;
    fs::rename(&part, x.path(&rel)).expect("rename into place");
    let delay = 100 + x.rng_below(200) as u64;
    std::thread::sleep(Duration::from_millis(delay));
    fs::remove_file(x.path(&rel)).expect("unlink");
    let r = x.wait_row(&rel, WAIT, |r| r.gone);
    // Whatever was indexed is whole and counted exactly once.
    std::thread::sleep(Duration::from_millis(500));
    let r2 = x.row(&rel).expect("row");
    assert_eq!((r.valid, r.offset), (r2.valid, r2.offset), "the gone row still moves");
    assert!(r.consistent() && r.corrupt == 0, "{r:?}");
    assert_eq!(ends.get(r.valid as usize), Some(&r.offset), "offset not at the end of the last indexed line: {r:?}");
    let refusal = x.q(&format!(
        "SELECT count(*) FROM cortex_buffer.untrusted_session_files WHERE path = '{}' AND reason = 'file_gone'",
        r.path
    ));
    assert_eq!(refusal, if r.offset < size { "1" } else { "0" }, "{r:?}");
    format!(
        "unlinked {delay} ms after it appeared: gone, {} of {lines} lines indexed exactly ({}), listed file_gone: {}",
        r.valid,
        if r.offset == size { "finished from the open descriptor" } else { "partial" },
        refusal == "1"
    )
}

fn truncate_regrow(x: &Ctx) -> String {
    let j = job(13);
    let rel = format!("{j}/session-001.jsonl");
    x.write(&rel, evs(&j, 0, 100).as_bytes());
    let r0 = x.wait_row(&rel, WAIT, |r| r.valid == 100);
    // Truncated and regrown past the old size before the worker looks: other bytes.
    let regrown: String = (0..150)
        .map(|i| format!(r#"{{"type":"REGROWN","timestamp":"{TS}","job_id":"{j}","seq":{i}}}"#) + "\n")
        .collect();
    {
        let mut f = fs::OpenOptions::new().write(true).open(x.path(&rel)).expect("open");
        f.set_len(0).expect("truncate");
        f.write_all(regrown.as_bytes()).expect("regrow");
    }
    let r1 = x.wait_row(&rel, WAIT, |r| r.valid == 150 && r.generation > r0.generation);
    assert!(r1.consistent(), "{r1:?}");
    assert_eq!(x.event_list(&rel).matches(":REGROWN:").count(), 150);
    // Truncated, seen empty, then regrown.
    fs::OpenOptions::new().write(true).open(x.path(&rel)).expect("open").set_len(0).expect("truncate");
    let r2 = x.wait_row(&rel, WAIT, |r| r.valid == 0 && r.size == 0);
    assert!(r2.consistent() && r2.generation > r1.generation, "{r2:?}");
    x.append(&rel, evs(&j, 0, 30).as_bytes());
    let r3 = x.wait_row(&rel, WAIT, |r| r.valid == 30);
    assert!(r3.consistent() && r3.generation >= r2.generation, "{r3:?}");
    format!(
        "generations {} -> {} -> {} -> {}; rows exactly the new lines (150, 0, 30)",
        r0.generation, r1.generation, r2.generation, r3.generation
    )
}

fn inode_swap(x: &Ctx) -> String {
    let j = job(14);
    let rel = format!("{j}/session-001.jsonl");
    x.write(&rel, evs(&j, 0, 50).as_bytes());
    let r0 = x.wait_row(&rel, WAIT, |r| r.valid == 50);
    let tmp = x.path(&format!("{j}/session-001.jsonl.tmp"));
    fs::write(&tmp, evs(&j, 0, 70)).expect("write");
    fs::rename(&tmp, x.path(&rel)).expect("rename over");
    let r1 = x.wait_row(&rel, WAIT, |r| r.valid == 70);
    assert!(r1.consistent() && r1.generation > r0.generation, "{r1:?}");
    let distinct = x.q(&format!(
        "SELECT count(DISTINCT e.seq) FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id) WHERE f.job_dir = '{j}'"
    ));
    assert_eq!(distinct, "70");
    format!("new generation ({} -> {}), 70 events, none twice", r0.generation, r1.generation)
}

fn rename_storm(x: &Ctx) -> String {
    let renames = env_size("CORTEX_R5_RENAMES", 2_000) as usize;
    let dirs = [job(15), job(16)];
    for d in &dirs {
        fs::create_dir_all(x.path(d)).expect("mkdir");
    }
    // (dir index, name, lines)
    let mut files: Vec<(usize, String, usize)> = Vec::new();
    for k in 0..20 {
        let name = format!("session-{k:05}.jsonl");
        x.write(&format!("{}/{name}", dirs[0]), evs(&dirs[0], 0, k + 1).as_bytes());
        files.push((0, name, k + 1));
    }
    let t = Instant::now();
    let mut fresh = 1000;
    for _ in 0..renames {
        let i = x.rng_below(files.len());
        let to_dir = x.rng_below(2);
        fresh += 1;
        let name = format!("session-{fresh:05}.jsonl");
        let (from_dir, from_name, _) = &files[i];
        fs::rename(x.path(&format!("{}/{from_name}", dirs[*from_dir])), x.path(&format!("{}/{name}", dirs[to_dir])))
            .expect("rename");
        files[i].0 = to_dir;
        files[i].1 = name;
        if x.rng_below(50) == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let storm = t.elapsed();
    for (d, name, n) in &files {
        let rel = format!("{}/{name}", dirs[*d]);
        let r = x.wait_row(&rel, WAIT, |r| !r.gone && r.valid == *n as i64);
        assert!(r.consistent(), "{r:?}");
    }
    let live = x.q(&format!(
        "SELECT count(*) || ' ' || coalesce(sum(valid_lines), 0) FROM cortex_buffer.session_file WHERE job_dir IN ('{}', '{}') AND gone_at IS NULL",
        dirs[0], dirs[1]
    ));
    let want_lines: usize = files.iter().map(|f| f.2).sum();
    assert_eq!(live, format!("20 {want_lines}"), "live rows and lines");
    let bad = x.q(&format!(
        "SELECT count(*) FROM cortex_buffer.session_file f WHERE job_dir IN ('{}', '{}')
            AND (valid_lines <> (SELECT count(*) FROM cortex_buffer.event e WHERE e.file_id = f.file_id)
                 OR corrupt_lines <> 0)",
        dirs[0], dirs[1]
    ));
    assert_eq!(bad, "0", "half-indexed rows");
    let rows = x.rows_of_dir(&dirs[0]) + x.rows_of_dir(&dirs[1]);
    format!(
        "{renames} renames in {:.1} s: 20 live files exact ({want_lines} lines), {} gone rows consistent",
        storm.as_secs_f64(),
        rows - 20
    )
}

fn tiny_files(x: &Ctx) -> String {
    let n = env_size("CORTEX_R5_TINY_FILES", 10_000) as usize;
    let per_dir = 100;
    let t = Instant::now();
    for k in 0..n {
        let d = job(0x1000 + (k / per_dir) as u32);
        let rel = format!("{d}/session-{:03}.jsonl", k % per_dir);
        if k % per_dir == 0 {
            fs::create_dir_all(x.path(&d)).expect("mkdir");
        }
        fs::write(x.path(&rel), ev(&d, k) + "\n").expect("write");
    }
    let written = t.elapsed();
    let lo = job(0x1000);
    let hi = job(0x1000 + ((n - 1) / per_dir) as u32);
    let sql = format!(
        "SELECT count(*) || ' ' || coalesce(sum(valid_lines), 0) || ' ' || coalesce(sum(corrupt_lines), 0)
           FROM cortex_buffer.session_file WHERE job_dir BETWEEN '{lo}' AND '{hi}'"
    );
    let want = format!("{n} {n} 0");
    let mut last = String::new();
    let done = wait_for(Duration::from_secs(180), || {
        last = x.q(&sql);
        last == want
    });
    assert!(done.is_some(), "tiny files: {last}, want {want}\n{}", x.c.log_tail());
    let events = x.q(&format!(
        "SELECT count(*) FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id) WHERE f.job_dir BETWEEN '{lo}' AND '{hi}'"
    ));
    assert_eq!(events, n.to_string());
    format!(
        "{n} files written in {:.1} s, all indexed {:.1} s later, one event each",
        written.as_secs_f64(),
        done.expect("done").as_secs_f64()
    )
}

fn binary_garbage(x: &Ctx) -> String {
    let mb = env_size("CORTEX_R5_GARBAGE_MB", 1) as usize;
    let j = job(17);
    let rel = format!("{j}/session-001.jsonl");
    let mut b = Vec::with_capacity(mb << 20);
    while b.len() < mb << 20 {
        let v = x.rng.borrow_mut().next_u64();
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.push(b'\n');
    x.write(&rel, &b);
    let r = x.wait_row(&rel, WAIT, |r| r.offset == b.len() as i64);
    assert!(r.consistent(), "{r:?}");
    // file_integrity() counts as scanBuffer does: a truncated tail is not a corrupt line there,
    // while session_file.corrupt_lines includes it (its column comment says so).
    let integrity = x.q(&format!(
        "SELECT total_lines || ' ' || valid_lines || ' ' || (corrupt_lines + tail_truncated::int) || ' ' || blank_lines
           FROM cortex_buffer.file_integrity('{}')",
        r.path
    ));
    let row_counts = format!("{} {} {} {}", r.total, r.valid, r.corrupt, r.blank);
    assert_eq!(
        row_counts, integrity,
        "session_file's counts (total valid corrupt blank) and file_integrity()'s, its truncated tail counted as corrupt"
    );
    assert!(r.valid == 0 && r.corrupt > 0, "{r:?}");
    format!(
        "{mb} MB: {} lines, 0 events, {} corrupt, {} blank (file_integrity: {integrity})",
        r.total, r.corrupt, r.blank
    )
}

fn bom(x: &Ctx) -> String {
    let j = job(18);
    let rel = format!("{j}/session-001.jsonl");
    let b = format!("\u{feff}{}\n{}\n\u{feff}{}\n", ev(&j, 0), ev(&j, 1), ev(&j, 2));
    x.write(&rel, b.as_bytes());
    let r = x.wait_row(&rel, WAIT, |r| r.offset == b.len() as i64);
    assert!(r.consistent() && (r.valid, r.corrupt) == (3, 0), "{r:?}");
    assert_eq!(
        x.q(&format!("SELECT dialect FROM cortex_buffer.session_file WHERE path = '{}'", r.path)),
        "cortex-spike"
    );
    "3 events, 0 corrupt, dialect detected through the BOM".into()
}

fn crlf(x: &Ctx) -> String {
    let j = job(19);
    let rel = format!("{j}/session-001.jsonl");
    let b: String = (0..5).map(|i| ev(&j, i) + "\r\n").collect();
    x.write(&rel, b.as_bytes());
    let r = x.wait_row(&rel, WAIT, |r| r.offset == b.len() as i64);
    assert!(r.consistent() && (r.valid, r.corrupt, r.blank) == (5, 0, 0), "{r:?}");
    "5 events, 0 corrupt, 0 blank".into()
}

fn splice_cortex(x: &Ctx) -> String {
    let j = job(20);
    let rel = format!("{j}/session-001.jsonl");
    let cut = &ev(&j, 1)[..40];
    let start = format!(r#"{{"type":"SESSION_START","timestamp":"{TS}","job_id":"{j}","seq":0}}"#);
    let b = format!("{}\n{cut}{start}\n{}\n", ev(&j, 0), ev(&j, 1));
    x.write(&rel, b.as_bytes());
    let r = x.wait_row(&rel, WAIT, |r| r.offset == b.len() as i64);
    let events = x.event_list(&rel);
    // valid_lines are scanBuffer's count (the spliced line is one corrupt line); the new
    // writer's line is an event besides (design.md: indexed at its own byte offset).
    assert_eq!((r.valid, r.events, r.corrupt, r.corrupt_rows, r.crash_cuts), (2, 3, 1, 1, 1), "{r:?} {events}");
    assert_eq!(events, "1:TOOL_RESULT:stored,2:SESSION_START:stored,3:TOOL_RESULT:stored");
    // The new writer's line is at its own offset, after the cut.
    let off = x.q(&format!(
        "SELECT e.byte_offset FROM cortex_buffer.event e WHERE e.file_id = (SELECT file_id FROM cortex_buffer.session_file WHERE path = '{}') AND e.type = 'SESSION_START'",
        r.path
    ));
    assert_eq!(off, (ev(&j, 0).len() + 1 + cut.len()).to_string());
    let trusted = x.q(&format!("SELECT trusted FROM cortex_buffer.session_file WHERE path = '{}'", r.path));
    assert_eq!(trusted, "t", "a crash cut is not held against the file");
    "valid_lines 2 (scanBuffer), 3 events: SESSION_START recovered at its own offset; 1 corrupt (crash cut), trusted"
        .into()
}

fn splice_claude(x: &Ctx) -> String {
    let proj = "-home-r5-claude-project";
    let rel = format!("{proj}/7d2e9f00-5a1b-4c3d-8e5f-0193a8b27c41.jsonl");
    let line = |u: usize| {
        format!(
            r#"{{"type":"user","uuid":"00000000-0000-4000-8000-{u:012}","parentUuid":null,"sessionId":"7d2e9f00-5a1b-4c3d-8e5f-0193a8b27c41","timestamp":"{TS}","message":{{"role":"user","content":"hi"}}}}"#
        )
    };
    let b = format!("{}\n{}{}\n{}\n", line(1), line(2), line(3), line(4));
    x.write(&rel, b.as_bytes());
    let r = x.wait_row(&rel, WAIT, |r| r.offset == b.len() as i64);
    assert!(r.consistent(), "{r:?}");
    assert_eq!((r.valid, r.corrupt), (2, 1), "{r:?} {}", x.event_list(&rel));
    assert!(x.corrupt_list(&rel).starts_with("2:not valid JSON"));
    format!("1 corrupt line, 2 events (crash cuts: {})", r.crash_cuts)
}

fn truncated_tail(x: &Ctx) -> String {
    let j = job(21);
    let rel = format!("{j}/session-001.jsonl");
    let b = format!("{}{}", evs(&j, 0, 4), &ev(&j, 4)[..30]);
    x.write(&rel, b.as_bytes());
    let r = x.wait_row(&rel, WAIT, |r| r.tail == "truncated");
    assert!(r.consistent() && (r.valid, r.corrupt) == (4, 1), "{r:?}");
    let (ratio, trusted) = {
        let s = x.q(&format!(
            "SELECT corruption_ratio || ' ' || trusted FROM cortex_buffer.session_file WHERE path = '{}'",
            r.path
        ));
        let mut it = s.split(' ');
        (it.next().unwrap_or("").to_owned(), it.next().unwrap_or("").to_owned())
    };
    assert_eq!(ratio, "0", "a truncated tail is not counted in the ratio: {r:?}");
    if trusted != "true" {
        let fi =
            x.q(&format!("SELECT corruption_ratio || ' ' || trusted FROM cortex_buffer.file_integrity('{}')", r.path));
        x.finding(
            "truncated_tail",
            format!("session_file says corruption_ratio {ratio} but trusted = {trusted} (file_integrity: ratio and trusted {fi})"),
        );
    }
    format!("tail truncated: 4 events, 1 corrupt, corruption_ratio {ratio}, trusted {trusted}")
}

fn replaced_by_directory(x: &Ctx) -> String {
    let j = job(22);
    let rel = format!("{j}/session-001.jsonl");
    x.write(&rel, evs(&j, 0, 10).as_bytes());
    x.wait_row(&rel, WAIT, |r| r.valid == 10);
    fs::remove_file(x.path(&rel)).expect("rm");
    fs::create_dir(x.path(&rel)).expect("mkdir");
    fs::write(x.path(&format!("{rel}/inner.jsonl")), evs(&j, 0, 1)).expect("write");
    let gone = wait_for(Duration::from_secs(5), || x.row(&rel).is_some_and(|r| r.gone));
    let how = "gone after a pass over its directory";
    assert!(gone.is_some(), "a file replaced by a directory of the same name is never marked gone");
    let r = x.row(&rel).expect("row");
    assert!(r.consistent() && r.valid == 10, "the file's rows are kept: {r:?}");
    x.walk_twice();
    assert_eq!(x.rows_of_dir(&j), 1, "the directory or its contents were recorded");
    let logged = x.log_lines(&[&format!("skipping \"{}\"", x.path(&rel).display())]);
    assert!(logged <= 1, "logged {logged} times");
    format!("row {how}, its 10 events kept; directory not recorded; skip logged {logged} time(s)")
}

fn sparse_hole(x: &Ctx) -> String {
    let gb = env_size("CORTEX_R5_HOLE_GB", 1);
    let j = job(23);
    let rel = format!("{j}/session-001.jsonl");
    let p = x.path(&rel);
    fs::create_dir_all(p.parent().expect("dir")).expect("mkdir");
    let len;
    {
        let mut f = fs::File::create(&p).expect("create");
        f.write_all((ev(&j, 0) + "\n").as_bytes()).expect("write");
        f.seek(SeekFrom::Start((gb << 30) - 200)).expect("seek");
        f.write_all(format!("\n{}\n", ev(&j, 1)).as_bytes()).expect("write");
        len = f.metadata().expect("stat").len() as i64;
    }
    let t = Instant::now();
    let r = x.wait_row(&rel, Duration::from_secs(60), |r| r.offset == len);
    assert!(r.consistent() && (r.valid, r.corrupt) == (2, 1), "{r:?}");
    format!("{gb} GiB hole: 2 events, 1 over-long corrupt line, in {:.1} s", t.elapsed().as_secs_f64())
}

fn grow_1byte_per_ms(x: &Ctx) -> String {
    let ms = env_size("CORTEX_R5_GROW_MS", 3_000) as usize;
    let j = job(24);
    let rel = format!("{j}/session-001.jsonl");
    x.write(&rel, b"");
    let mut f = fs::OpenOptions::new().append(true).open(x.path(&rel)).expect("open");
    let mut body = Vec::new();
    let mut i = 0;
    while body.len() < ms {
        body.extend_from_slice((ev(&j, i) + "\n").as_bytes());
        i += 1;
    }
    let t = Instant::now();
    for (k, byte) in body.iter().enumerate() {
        f.write_all(std::slice::from_ref(byte)).expect("write a byte");
        let due = Duration::from_millis(k as u64 + 1);
        if let Some(wait) = due.checked_sub(t.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    let took = t.elapsed();
    let r = x.wait_row(&rel, WAIT, |r| r.offset == body.len() as i64 && r.tail == "complete");
    assert!(r.consistent() && (r.valid, r.corrupt) == (i as i64, 0), "{r:?}");
    format!(
        "{} bytes over {:.1} s: {i} events exactly once, generation {}",
        body.len(),
        took.as_secs_f64(),
        r.generation
    )
}

fn non_utf8_names(x: &Ctx) -> String {
    let j = job(25);
    fs::create_dir_all(x.path(&j)).expect("mkdir");
    let bad_file = x.path(&j).join(OsStr::from_bytes(b"session-\xff\xfe.jsonl"));
    fs::write(&bad_file, evs(&j, 0, 2)).expect("write");
    let bad_dir = x.c.sessions.join(OsStr::from_bytes(b"job-\xff-dir"));
    fs::create_dir_all(&bad_dir).expect("mkdir");
    fs::write(bad_dir.join("session-001.jsonl"), evs(&j, 0, 2)).expect("write");
    with_good_file(x, &j);
    x.q("SELECT cortex_buffer.index_now()");
    for (p, what) in [(&bad_file, "file"), (&bad_dir, "directory")] {
        let shown = p.display().to_string();
        let needle = format!("skipping \"{shown}\"");
        let seen = wait_for(WAIT, || x.log_lines(&[&needle, "not valid UTF-8"]) >= 1);
        assert!(seen.is_some(), "the {what} was not logged: {needle}\n{}", x.c.log_tail());
        x.walk_twice();
        assert_eq!(x.log_lines(&[&needle]), 1, "the {what} was logged more than once");
    }
    assert_eq!(x.rows_of_dir(&j), 1, "only the good file is recorded");
    assert_eq!(x.q("SELECT count(*) FROM cortex_buffer.session_file WHERE job_dir LIKE 'job-%'"), "0");
    "bad file name and bad directory name skipped, each logged once".into()
}

fn quote_names(x: &Ctx) -> String {
    let j = job(26);
    let names = [
        "o'brien.jsonl",
        "semi;colon DROP TABLE x; --.jsonl",
        "100%_\\back.jsonl",
        "new\nline.jsonl",
        "$$dollar$$.jsonl",
    ];
    for (k, n) in names.iter().enumerate() {
        x.write(&format!("{j}/{n}"), evs(&j, 0, k + 1).as_bytes());
    }
    let want: usize = (1..=names.len()).sum();
    let sql = format!(
        "SELECT count(*) || ' ' || coalesce(sum(valid_lines), 0) || ' ' || coalesce(sum((SELECT count(*) FROM cortex_buffer.event e WHERE e.file_id = f.file_id)), 0)
           FROM cortex_buffer.session_file f WHERE job_dir = '{j}' AND gone_at IS NULL"
    );
    let mut last = String::new();
    let ok = wait_for(WAIT, || {
        last = x.q(&sql);
        last == format!("{} {want} {want}", names.len())
    });
    assert!(ok.is_some(), "{last}\n{}", x.c.log_tail());
    // The exact names, byte for byte.
    let stored = x.q(&format!(
        "SELECT string_agg(encode(convert_to(substr(path, length(path) - position('/' in reverse(path)) + 2), 'UTF8'), 'hex'), ',' ORDER BY path)
           FROM cortex_buffer.session_file WHERE job_dir = '{j}'"
    ));
    let mut sorted: Vec<String> = names.iter().map(|n| x.path(&format!("{j}/{n}")).display().to_string()).collect();
    sorted.sort();
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    let want_hex: Vec<String> = sorted.iter().map(|p| hex(p.rsplit('/').next().expect("name"))).collect();
    assert_eq!(stored, want_hex.join(","));
    format!("{} odd names recorded exactly, {want} events", names.len())
}

fn disk_full(x: &Ctx) -> String {
    let c = &x.c;
    // The tmpfs: what the two tables hold now, plus room for the test.
    let used_mb: u64 = x
        .q("SELECT (sum(pg_total_relation_size(c)) / 1048576)::bigint FROM unnest(ARRAY['cortex_buffer.event'::regclass, 'cortex_buffer.corrupt_line'::regclass]) c")
        .parse()
        .expect("size");
    let size_mb = used_mb * 2 + 24;
    let mnt = c.base.parent().expect("e2e root").join(format!("r5-tmpfs-{}", std::process::id()));
    fs::create_dir_all(&mnt).expect("mkdir mount point");
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size_mb}m,mode=0755"), "tmpfs"])
        .arg(&mnt)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("!!!!! R5 disk_full: mounting a tmpfs is not allowed here: CASE SKIPPED !!!!!");
        let _ = fs::remove_dir(&mnt);
        x.skipped.borrow_mut().push("disk_full (mount refused)".into());
        return "SKIPPED: mount refused".into();
    }
    *x.mount.borrow_mut() = Some(MountGuard(mnt.clone()));
    let ts = mnt.join("ts");
    fs::create_dir(&ts).expect("mkdir ts");
    assert!(Command::new("chown").arg("postgres:postgres").arg(&ts).status().expect("chown").success());
    fs::set_permissions(&ts, fs::Permissions::from_mode(0o700)).expect("chmod");
    x.q(&format!("CREATE TABLESPACE r5_small LOCATION '{}'", ts.display()));
    let move_to = |space: &str| {
        x.q(&format!(
            "DO $$ DECLARE r record; BEGIN
               FOR r IN SELECT c.oid::regclass AS rel, c.relkind FROM pg_class c
                         WHERE c.oid IN ('cortex_buffer.event'::regclass, 'cortex_buffer.corrupt_line'::regclass)
                            OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid IN ('cortex_buffer.event'::regclass, 'cortex_buffer.corrupt_line'::regclass))
               LOOP
                 IF r.relkind = 'i' THEN EXECUTE format('ALTER INDEX %s SET TABLESPACE {space}', r.rel);
                 ELSE EXECUTE format('ALTER TABLE %s SET TABLESPACE {space}', r.rel); END IF;
               END LOOP; END $$"
        ));
    };
    move_to("r5_small");
    let on_small = x.q(
        "SELECT count(*) FROM pg_class WHERE reltablespace = (SELECT oid FROM pg_tablespace WHERE spcname = 'r5_small')",
    );
    // Fill the tmpfs, leaving 1 MB.
    let free = || -> u64 {
        let out = Command::new("df").args(["-B1", "--output=avail"]).arg(&mnt).output().expect("df");
        String::from_utf8_lossy(&out.stdout).lines().nth(1).and_then(|l| l.trim().parse().ok()).unwrap_or(0)
    };
    let filler = mnt.join("filler");
    let fill = free().saturating_sub(1 << 20);
    {
        let mut f = fs::File::create(&filler).expect("filler");
        let chunk = vec![0xa5u8; 1 << 20];
        let mut left = fill;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            f.write_all(&chunk[..n]).expect("fill");
            left -= n as u64;
        }
    }
    let errors_before = x.log_lines(&["No space left on device"]);
    // A session file that needs more than the room left.
    let mb = env_size("CORTEX_R5_FULL_MB", 8) as usize;
    let j = job(27);
    let rel = format!("{j}/session-001.jsonl");
    let line_len = ev(&j, 0).len() + 1;
    let lines = (mb << 20) / line_len;
    x.write(&rel, evs(&j, 0, lines).as_bytes());
    let logged = wait_for(WAIT, || x.log_lines(&["No space left on device"]) > errors_before);
    assert!(logged.is_some(), "no out-of-space error logged\n{}", c.log_tail());
    std::thread::sleep(Duration::from_secs(1));
    let err_line = c.log_text().lines().find(|l| l.contains("No space left on device")).unwrap_or_default().to_owned();
    assert!(err_line.contains("53100"), "the out-of-space error does not carry SQLSTATE 53100: {err_line}");
    let pid_during = c.worker_pid();
    // Nothing half-indexed, anywhere (a crash cut's recovered event is the one difference
    // between valid_lines and events by design).
    let bad = x.q(
        "SELECT count(*) FROM cortex_buffer.session_file f
          WHERE crash_cut_lines = 0 AND valid_lines <> (SELECT count(*) FROM cortex_buffer.event e WHERE e.file_id = f.file_id)",
    );
    let r = x.row(&rel);
    let last_error = x.q(&format!(
        "SELECT coalesce(last_error, '') FROM cortex_buffer.session_file WHERE right(path, {}) = '/{rel}'",
        rel.len() + 1
    ));
    // Free the space before asserting anything, so that a failure leaves a usable cluster.
    fs::remove_file(&filler).expect("rm filler");
    assert_eq!(bad, "0", "half-indexed files while the disk was full");
    let r = r.expect("the file is recorded (session_file is not on the small disk)");
    assert!(r.consistent() && r.valid < lines as i64, "{r:?}");
    // A full disk is the server's failure, not the file's: never counted, never quarantined.
    let quarantined_while_full = r.quarantined;
    assert!(!r.quarantined && r.failures == 0, "a full disk was held against the file: {r:?}");
    let t = Instant::now();
    let how = "by itself";
    let r2 = x.wait_row(&rel, Duration::from_secs(60), |r| r.valid == lines as i64);
    assert!(r2.consistent() && r2.corrupt == 0, "{r2:?}");
    let distinct = x.q(&format!(
        "SELECT count(DISTINCT byte_offset) FROM cortex_buffer.event WHERE file_id = (SELECT file_id FROM cortex_buffer.session_file WHERE path = '{}')",
        r2.path
    ));
    assert_eq!(distinct, lines.to_string(), "every line exactly once");
    let caught_up = t.elapsed();
    // Back to the default tablespace, and unmount.
    move_to("pg_default");
    x.q("DROP TABLESPACE r5_small");
    let guard = x.mount.borrow_mut().take();
    drop(guard);
    format!(
        "{size_mb} MB tmpfs ({on_small} relations on it): out of space logged ({}, SQLSTATE 53100; last_error {:?}), worker pid {}, quarantined while full: {}, nothing half-indexed; {lines} lines exactly once {how}, {:.1} s after freeing",
        if err_line.contains("could not extend") { "could not extend file" } else { "No space left on device" },
        last_error.chars().take(120).collect::<String>(),
        if pid_during == Some(x.first_pid) { "unchanged" } else { "CHANGED" },
        quarantined_while_full,
        caught_up.as_secs_f64()
    )
}

fn sessions_dir_symlink(x: &Ctx) -> String {
    let c = &x.c;
    let real = c.base.join("sessions-real");
    let canary_rel = format!("{}/session-001.jsonl", x.canary);
    let before_rows = x.q("SELECT count(*) FROM cortex_buffer.session_file WHERE gone_at IS NULL");
    fs::rename(&c.sessions, &real).expect("move sessions_dir away");
    std::os::unix::fs::symlink(&real, &c.sessions).expect("symlink sessions_dir");
    // Any reload (an operator's routine pg_reload_conf()) makes the worker resolve sessions_dir
    // again; without one the worker may keep its handle, and the case would depend on timing.
    x.q("SELECT pg_reload_conf()");
    std::thread::sleep(Duration::from_millis(500));
    // New lines reach the canary through the link.
    let from = x.canary_lines.get();
    x.append(&canary_rel, evs(&x.canary, from, 5).as_bytes());
    x.canary_lines.set(from + 5);
    let want = (from + 5) as i64;
    let seen = wait_for(WAIT, || {
        x.q(&format!(
            "SELECT count(*) FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id) WHERE f.job_dir = '{}' AND f.gone_at IS NULL",
            x.canary
        )) == want.to_string()
    });
    let through_link = x.q(&format!(
        "SELECT count(*) || ' rows, ' || count(*) FILTER (WHERE gone_at IS NULL) || ' live, events ' || (SELECT count(*) FROM cortex_buffer.event e JOIN cortex_buffer.session_file g USING (file_id) WHERE g.job_dir = '{0}')
           FROM cortex_buffer.session_file WHERE job_dir = '{0}'",
        x.canary
    ));
    let after_rows = x.q("SELECT count(*) FROM cortex_buffer.session_file WHERE gone_at IS NULL");
    // Put it back.
    fs::remove_file(&c.sessions).expect("rm link");
    fs::rename(&real, &c.sessions).expect("move back");
    assert!(
        seen.is_some(),
        "the canary's lines were not indexed exactly once through the link: {through_link}\n{}",
        c.log_tail()
    );
    let job_events = x.q(&format!(
        "SELECT count(*) FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id) WHERE f.job_dir = '{}'",
        x.canary
    ));
    assert_eq!(job_events, want.to_string(), "the canary's events were duplicated: {through_link}");
    assert_eq!(before_rows, after_rows, "live rows changed through the link");
    format!("through the link: canary {through_link}; live rows {before_rows} before and after")
}

// ---------------------------------------------------------------------------------------------

#[test]
fn hostile_catalogue() {
    let seed = env_size("CORTEX_R5_SEED", 0x5eed_0005);
    let only: Vec<String> = std::env::var("CORTEX_R5_ONLY")
        .map(|s| s.split(',').map(|x| x.trim().to_owned()).filter(|x| !x.is_empty()).collect())
        .unwrap_or_default();
    eprintln!("R5 seed {seed} (CORTEX_R5_SEED replays it)");
    assert!(CASES.len() >= 25, "the catalogue has {} cases", CASES.len());
    let started = Instant::now();
    let c = Cluster::new(
        "r5-hostile",
        &[
            "cortex_buffer.poll_interval = 100",
            "cortex_buffer.settle_period = 100",
            "cortex_buffer.max_line_bytes = '1MB'",
            "cortex_buffer.quarantine_after = 3",
            "log_line_prefix = '%m [%p] %b %e: '",
        ],
    );
    c.start();
    c.create_extension();
    assert!(wait_for(WAIT, || c.worker_pid().is_some()).is_some(), "no worker");
    let first_pid = c.worker_pid().expect("pid");
    let canary = job(0xcafe);
    let x = Ctx {
        c,
        first_pid,
        canary: canary.clone(),
        canary_lines: Cell::new(0),
        rng: RefCell::new(Rng::new(seed)),
        skipped: RefCell::new(Vec::new()),
        findings: RefCell::new(Vec::new()),
        mount: RefCell::new(None),
    };
    x.write(&format!("{canary}/session-001.jsonl"), b"");
    x.after_case("start");

    let mut outcomes = Vec::new();
    let mut failed: Vec<&str> = Vec::new();
    let mut worst_canary = Duration::ZERO;
    for case in CASES {
        if !only.is_empty() && !only.iter().any(|o| o == case.name) {
            continue;
        }
        eprintln!("R5 case {}: {} -- expects: {}", case.name, case.does, case.expects);
        let t = Instant::now();
        let outcome = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (case.run)(&x))) {
            Ok(o) => o,
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                eprintln!("R5 FAIL {}: {}", case.name, msg.chars().take(2000).collect::<String>());
                failed.push(case.name);
                "FAILED".into()
            }
        };
        let canary_took = x.after_case(case.name);
        worst_canary = worst_canary.max(canary_took);
        let line = format!(
            "{:<24} {outcome} [{:.1} s; pid unchanged; canary caught up in {} ms]",
            case.name,
            t.elapsed().as_secs_f64(),
            canary_took.as_millis()
        );
        eprintln!("R5 ok   {line}");
        outcomes.push(line);
    }
    // The worker never restarted, and no process crashed.
    assert_eq!(x.c.worker_pid(), Some(first_pid));
    for bad in ["PANIC", "terminated by signal", "server process (PID"] {
        assert_eq!(x.log_lines(&[bad]), 0, "`{bad}` in the log:\n{}", x.c.log_tail());
    }
    eprintln!("R5 catalogue ({} cases):", outcomes.len());
    for o in &outcomes {
        eprintln!("  {o}");
    }
    // Skipped entries are documented as logged once each: count the FIFO's lines over the run.
    let fifo = x.path(&format!("{}/session-001.jsonl", job(5))).display().to_string();
    let fifo_logged = x.log_lines(&[&format!("skipping \"{fifo}\"")]);
    // Once, and once more for each time the run moved sessions_dir away and back (the same
    // entry under another path is another entry).
    let fifo_ran = only.is_empty() || only.iter().any(|o| o == "fifo");
    assert!(
        !fifo_ran || (1..=2).contains(&fifo_logged),
        "the FIFO's skip was logged {fifo_logged} times over the run, not once (or twice with the move)"
    );
    for f in x.findings.borrow().iter() {
        eprintln!("R5 FINDING {f}");
    }
    assert!(failed.is_empty(), "R5 cases failed: {failed:?}");
    let skipped = x.skipped.borrow().clone();
    report(
        "R5",
        "hostile-file catalogue",
        &format!(
            "{} cases, worker pid unchanged, canary indexed (worst catch-up {} ms), {} findings{}, {:.0} s",
            outcomes.len(),
            worst_canary.as_millis(),
            x.findings.borrow().len(),
            if skipped.is_empty() { String::new() } else { format!(", SKIPPED: {}", skipped.join("; ")) },
            started.elapsed().as_secs_f64()
        ),
    );
}
