//! `cortex-buffer-ship`: pushes a node's agent session files to cortex_buffer (see `--help`).
//!
//! It finds files by the indexer's own discovery rule and opens them beneath the sessions
//! directory with the indexer's own safe opener (`cortex_buffer_watch`), learns of changes the
//! way the worker does (inotify, or polling, with a periodic walk as a safety net), and sends new
//! bytes with `append_session_bytes`, many files per round trip. It keeps no state of its own:
//! where each file stands is the server's answer to `pushed_offsets`, asked at start and after
//! every error, so a SIGKILL at any instant loses and repeats nothing.

mod config;
mod conninfo;
mod db;
mod files;
mod log;
mod tls;

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use config::{Config, Parsed, WatchMode};
use cortex_buffer_core::push::check_relpath;
use cortex_buffer_core::shared::now_us;
use cortex_buffer_watch::scan::{read_head, relative, resolve_root, scan_dir, scan_root, Found};
use cortex_buffer_watch::volume::Volume;
use cortex_buffer_watch::watcher::Watcher;
use db::{Db, Failure, Push};
use files::{identity, next, Identity, Next, Remote, IDENTITY_BYTES};
use log::V;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn stopping() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// What the shipper knows of one file while connected (forgotten at every reconnect).
#[derive(Debug, Default)]
struct Tracked {
    device: u64,
    inode: u64,
    identity: Option<Identity>,
    remote: Option<Remote>,
    final_sent: bool,
    /// The server quarantined it, or refused it (a missing grant, say): left alone until the
    /// next walk of everything.
    given_up: bool,
    /// Its size when last looked at.
    size: u64,
}

/// Running totals for the progress lines.
#[derive(Default)]
struct Totals {
    pushes: u64,
    bytes: u64,
    events: i64,
    corrupt: i64,
    round_trips: u64,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cfg = match config::parse(&args, &|k| std::env::var(k).ok()) {
        Ok(Parsed::Run(c)) => c,
        Ok(Parsed::Help) => {
            print!("{}", config::HELP);
            return;
        }
        Err(why) => {
            eprintln!("cortex-buffer-ship: {why}");
            std::process::exit(2);
        }
    };
    // SAFETY: installs async-signal-safe handlers that only store to an atomic.
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
    }
    log::info(
        "starting",
        &[
            ("source", V::S(&cfg.source)),
            ("sessions_dir", V::S(&cfg.sessions_dir)),
            ("chunk_bytes", V::U(cfg.chunk_bytes as u64)),
            ("batch", V::U(cfg.batch as u64)),
            ("sslmode", V::S(&format!("{:?}", cfg.conn.ssl))),
        ],
    );
    if let Some(warning) = tls::warning(&cfg.conn) {
        log::warn(warning, &[]);
    }
    let code = run(&cfg);
    log::info("stopped", &[("source", V::S(&cfg.source))]);
    std::process::exit(code);
}

/// Connects, ships until an error, and again, until told to stop (or, with `--once`, until
/// nothing is left to send).
fn run(cfg: &Config) -> i32 {
    let mut backoff = Duration::from_millis(200);
    let mut totals = Totals::default();
    while !stopping() {
        match Db::connect(&cfg.conn, &cfg.source, &cfg.source_token, cfg.synchronous_commit, !cfg.per_file) {
            Ok(mut db) => match ship(cfg, &mut db, &mut totals) {
                Ok(()) => return 0,
                // The connection broke: connect again soon.
                Err(e @ Failure::Connection(_)) => {
                    backoff = Duration::from_millis(200);
                    log::warn("reconnecting", &[("error", V::S(&e.to_string()))]);
                }
                // The server refuses the session itself (where files stand): an operator must
                // act (grants, ALTER EXTENSION ... UPDATE); ask again less and less often.
                Err(e) => {
                    log::warn(
                        "refused; asking again later",
                        &[("error", V::S(&e.to_string())), ("retry_ms", V::U(backoff.as_millis() as u64))],
                    );
                    if cfg.once {
                        return 1;
                    }
                }
            },
            Err(e) => log::warn(
                "cannot connect",
                &[("error", V::S(&e.to_string())), ("retry_ms", V::U(backoff.as_millis() as u64))],
            ),
        }
        sleep_unless_stopped(backoff);
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
    0
}

fn sleep_unless_stopped(d: Duration) {
    let until = Instant::now() + d;
    while !stopping() && Instant::now() < until {
        std::thread::sleep((until - Instant::now()).min(Duration::from_millis(50)));
    }
}

/// How the shipper learns of changes.
enum Learn {
    Notify(Watcher),
    Poll,
}

/// The sessions directory, once it can be opened (retried every poll interval); `None` when
/// told to stop first, or with `--once`.
fn open_volume(cfg: &Config) -> Option<Volume> {
    loop {
        match resolve_root(&cfg.sessions_dir) {
            Ok(v) => return Some(v),
            Err(e) => {
                log::warn("sessions directory not usable", &[("error", V::S(&e.message))]);
                if cfg.once || stopping() {
                    return None;
                }
                sleep_unless_stopped(cfg.poll_interval);
            }
        }
    }
}

/// How the shipper learns of changes: the kernel's notifications on every directory of the
/// volume, or polling (asked for, or when they cannot all be watched).
fn learner(cfg: &Config, volume: &Volume) -> Learn {
    match cfg.watch {
        WatchMode::Poll => Learn::Poll,
        mode => match Watcher::new().and_then(|mut w| w.watch_volume(volume).map(|r| (w, r))) {
            Ok((w, r)) if r.refused == 0 => Learn::Notify(w),
            other => {
                let why = match other {
                    Err(e) => e.to_string(),
                    Ok((_, r)) => format!("{} directories could not be watched", r.refused),
                };
                let hint = "raise fs.inotify.max_user_watches, or use --watch poll";
                if mode == WatchMode::Notify {
                    log::warn("polling instead of watching", &[("why", V::S(&why)), ("hint", V::S(hint))]);
                } else {
                    log::info("polling instead of watching", &[("why", V::S(&why)), ("hint", V::S(hint))]);
                }
                Learn::Poll
            }
        },
    }
}

/// One connected session: ask where files stand, then push until told to stop (`Ok`) or until
/// the connection fails (`Err`: the caller reconnects, and everything is asked again).
fn ship(cfg: &Config, db: &mut Db, totals: &mut Totals) -> Result<(), Failure> {
    let Some(volume) = open_volume(cfg) else { return Ok(()) };
    let offsets = db.offsets()?;
    log::info("connected", &[("files_known", V::U(offsets.len() as u64))]);
    let mut learn = learner(cfg, &volume);
    let mut tracked: HashMap<String, Tracked> = HashMap::new();
    let mut skipped: BTreeSet<String> = BTreeSet::new();
    let mut next_walk = Instant::now();
    let mut next_report = Instant::now() + cfg.report_every;
    let mut changed: BTreeSet<String> = BTreeSet::new();
    // Confirmations (`confirm_pushed`): when the last one was sent; `None` once the server
    // turned out to have none. What the kernel or a poll said was last taken in at `learned`.
    let mut confirms = cfg.confirm_every.map(|_| None::<Instant>);
    let mut learned = Instant::now();
    loop {
        if stopping() {
            return Ok(());
        }
        let round_began = learned.min(Instant::now());
        // What to look at: everything (at start, on the periodic walk, when polling, after lost
        // events), else the job directories the kernel named and those with work left.
        let walk_all = cfg.once || matches!(learn, Learn::Poll) || Instant::now() >= next_walk;
        let found = if walk_all {
            if Instant::now() >= next_walk {
                // Files refused earlier (a grant may have come since) are tried again.
                tracked.values_mut().for_each(|t| t.given_up = false);
            }
            next_walk = Instant::now() + cfg.rescan_interval;
            match scan_root(&volume) {
                Ok(scan) => {
                    // A file no longer there has nothing left to push.
                    let here: BTreeSet<String> = scan
                        .files
                        .iter()
                        .filter_map(|f| relative(&volume, &f.path).ok().and_then(|r| r.to_str().map(str::to_owned)))
                        .collect();
                    tracked.retain(|rel, _| here.contains(rel));
                    scan.files
                }
                Err(e) => {
                    log::warn("cannot walk the sessions directory", &[("error", V::S(&e.message))]);
                    Vec::new()
                }
            }
        } else {
            changed.iter().flat_map(|d| scan_dir(&volume, d).files).collect()
        };
        changed.clear();
        let pushes = plan(cfg, &volume, &offsets, &mut tracked, &mut skipped, &found);
        let sent = pushes.len();
        send(cfg, db, pushes, &mut tracked, totals)?;
        if Instant::now() >= next_report {
            next_report = Instant::now() + cfg.report_every;
            report(&tracked, totals);
        }
        if sent > 0 {
            // More may be waiting behind a chunk: look at the same directories again at once.
            changed.extend(found.iter().map(|f| f.job_dir.clone()));
            continue;
        }
        if let (Some(every), Some(last)) = (cfg.confirm_every, confirms.as_mut()) {
            if last.is_none_or(|at| at.elapsed() >= every) && all_pushed(&tracked) {
                // Every file was pushed whole as of when this round began to look.
                if db.confirm(round_began.elapsed())? {
                    *last = Some(Instant::now());
                } else {
                    log::info("the server has no confirm_pushed (cortex_buffer before 0.15.0): not confirming", &[]);
                    confirms = None;
                }
            }
        }
        // Tails the server holds wait for their file to settle, then go as final.
        let pending: BTreeSet<String> = tracked
            .iter()
            .filter(|(_, t)| !t.given_up && !t.final_sent && t.remote.is_some_and(|r| r.have > r.committed))
            .filter_map(|(rel, _)| rel.split('/').next().map(str::to_owned))
            .collect();
        if cfg.once {
            // Everything there is was sent; tails that have not settled yet stay held (a later
            // run sends them as final once they have).
            report(&tracked, totals);
            return Ok(());
        }
        let wait = if pending.is_empty() { cfg.poll_interval } else { cfg.poll_interval.min(cfg.settle) };
        changed.extend(pending);
        match &mut learn {
            Learn::Poll => {
                sleep_unless_stopped(wait.max(Duration::from_millis(10)));
                learned = Instant::now();
            }
            Learn::Notify(w) => {
                wait_readable(w.fd(), wait);
                learned = Instant::now();
                let c = w.read(&volume);
                if c.rescan.is_some() {
                    next_walk = Instant::now();
                }
                changed.extend(c.dirs);
            }
        }
    }
}

/// Whether the server has every byte of every file the shipper knows: none refused, none
/// without an identity yet, none with bytes not pushed.
fn all_pushed(tracked: &HashMap<String, Tracked>) -> bool {
    tracked.values().all(|t| !t.given_up && t.identity.is_some() && t.remote.is_some_and(|r| r.have >= t.size))
}

/// Waits until `fd` is readable, at most `timeout` (and at most 100 ms at a time, to see a stop).
fn wait_readable(fd: i32, timeout: Duration) {
    let until = Instant::now() + timeout;
    while !stopping() {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        let ms = libc::c_int::try_from(left.min(Duration::from_millis(100)).as_millis()).unwrap_or(100);
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut p, 1, ms) } > 0 {
            return;
        }
    }
}

/// The pushes the found files need now, at most one per file.
fn plan(
    cfg: &Config,
    volume: &Volume,
    offsets: &HashMap<(String, String), db::Offset>,
    tracked: &mut HashMap<String, Tracked>,
    skipped: &mut BTreeSet<String>,
    found: &[Found],
) -> Vec<Push> {
    let mut pushes = Vec::new();
    let now = now_us();
    for f in found {
        let Ok(rel) = relative(volume, &f.path) else { continue };
        let Some(relpath) = rel.to_str().map(str::to_owned) else { continue };
        if let Err(why) = check_relpath(&relpath) {
            if skipped.insert(relpath.clone()) {
                log::info("not shipped", &[("file", V::S(&relpath)), ("why", V::S(&why))]);
            }
            continue;
        }
        let t = tracked.entry(relpath.clone()).or_default();
        if (t.device, t.inode) != (f.stat.device, f.stat.inode) {
            // New to this session, or replaced under its name: its identity is found afresh.
            *t = Tracked { device: f.stat.device, inode: f.stat.inode, ..Tracked::default() };
        }
        if t.given_up {
            continue;
        }
        let quiet = Duration::from_micros(u64::try_from(now.saturating_sub(f.stat.mtime_us)).unwrap_or(0));
        let settled = quiet >= cfg.settle;
        let file = match volume.open_file(&rel) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                log::warn("cannot open", &[("file", V::S(&relpath)), ("error", V::S(&e.to_string()))]);
                continue;
            }
        };
        let Ok((head, _)) = read_head(&file, IDENTITY_BYTES) else { continue };
        if t.identity.as_ref().is_some_and(|id| !id.still_covers(&head)) {
            // Truncated and rewritten in place since the last look (same inode, another first
            // line): a new file to the server, whatever its size now.
            *t = Tracked { device: f.stat.device, inode: f.stat.inode, ..Tracked::default() };
        }
        if t.identity.is_none() {
            t.identity = identity(f.stat.device, f.stat.inode, &head, settled);
        }
        let Some(id) = t.identity.as_ref().map(|i| i.text.clone()) else { continue };
        if t.remote.is_none() {
            t.remote = Some(match offsets.get(&(relpath.clone(), id.clone())) {
                None => Remote::default(),
                Some(o) => {
                    // The server's first bytes of the file must still be the file's: otherwise it
                    // was rewritten in place, and goes again from its start (a new file there).
                    // (The server keeps at most 1024 first bytes, within the identity's read.)
                    let same = usize::try_from(o.head_len)
                        .ok()
                        .and_then(|n| head.get(..n))
                        .is_some_and(|h| crc32fast::hash(h) == o.head_crc);
                    if same {
                        Remote { have: o.committed + o.held, committed: o.committed }
                    } else {
                        Remote { have: 0, committed: 0 }
                    }
                }
            });
        }
        let remote = t.remote.unwrap_or_default();
        let size = f.stat.size;
        t.size = size;
        match next(size, quiet, remote, cfg.settle, cfg.chunk_bytes, t.final_sent) {
            Next::Nothing => {}
            Next::Push { start, len, last } => {
                let mut chunk = vec![0u8; len];
                if len > 0 {
                    use std::os::unix::fs::FileExt;
                    match file.read_exact_at(&mut chunk, start) {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => continue,
                        Err(e) => {
                            log::warn("cannot read", &[("file", V::S(&relpath)), ("error", V::S(&e.to_string()))]);
                            continue;
                        }
                    }
                }
                pushes.push(Push { relpath, identity: id, start, chunk, last, file_size: size });
            }
        }
    }
    pushes
}

/// Sends the pushes, `batch` at a time; a batch that fails is sent again one push at a time, so
/// that a gap or a refusal concerns its own file only.
fn send(
    cfg: &Config,
    db: &mut Db,
    pushes: Vec<Push>,
    tracked: &mut HashMap<String, Tracked>,
    totals: &mut Totals,
) -> Result<(), Failure> {
    for batch in pushes.chunks(cfg.batch) {
        for _ in 1..cfg.repeat {
            // Benchmarks only: the same batch again first; the last sending is the one used.
            totals.round_trips += 1;
            let _ = db.push(batch);
        }
        totals.round_trips += 1;
        match db.push(batch) {
            Ok(replies) => {
                for (p, r) in batch.iter().zip(replies) {
                    applied(p, &r, tracked, totals);
                }
            }
            Err(Failure::Connection(why)) => return Err(Failure::Connection(why)),
            Err(_) if batch.len() > 1 => {
                for p in batch {
                    totals.round_trips += 1;
                    one(db, p, tracked, totals)?;
                }
            }
            Err(_) => one(db, &batch[0], tracked, totals)?,
        }
    }
    Ok(())
}

fn one(db: &mut Db, p: &Push, tracked: &mut HashMap<String, Tracked>, totals: &mut Totals) -> Result<(), Failure> {
    match db.push(std::slice::from_ref(p)) {
        Ok(replies) => {
            if let Some(r) = replies.first() {
                applied(p, r, tracked, totals);
            }
            Ok(())
        }
        Err(Failure::Gap { expected }) => {
            if let Some(t) = tracked.get_mut(&p.relpath) {
                t.remote =
                    Some(Remote { have: expected, committed: expected.min(t.remote.map_or(0, |r| r.committed)) });
            }
            Ok(())
        }
        Err(Failure::RateLimited) => {
            std::thread::sleep(Duration::from_millis(200));
            Ok(())
        }
        Err(Failure::Connection(why)) => Err(Failure::Connection(why)),
        Err(e) => {
            log::warn("push refused", &[("file", V::S(&p.relpath)), ("error", V::S(&e.to_string()))]);
            if let Some(t) = tracked.get_mut(&p.relpath) {
                t.given_up = true;
            }
            Ok(())
        }
    }
}

fn applied(p: &Push, r: &db::Reply, tracked: &mut HashMap<String, Tracked>, totals: &mut Totals) {
    totals.pushes += 1;
    totals.events += r.events;
    totals.corrupt += r.corrupt;
    let Some(t) = tracked.get_mut(&p.relpath) else { return };
    let end = p.start + p.chunk.len() as u64;
    match r.action.as_str() {
        // The server judged a settled tail, then saw it continued: it starts the file again
        // from its first byte, as the tailer would.
        "reindex" => {
            t.remote = Some(Remote::default());
            t.final_sent = false;
        }
        "quarantined" => {
            log::warn("quarantined by the server", &[("file", V::S(&p.relpath))]);
            t.given_up = true;
        }
        "failed" => {
            log::warn("the server could not index a chunk; retrying", &[("file", V::S(&p.relpath))]);
        }
        _ => {
            totals.bytes += p.chunk.len() as u64;
            let have = t.remote.map_or(0, |r| r.have).max(end);
            let have = if p.start == 0 && end < t.remote.map_or(0, |r| r.have) { end } else { have };
            t.remote = Some(Remote { have, committed: r.committed });
            if p.last {
                t.final_sent = true;
            } else if end > p.start {
                t.final_sent = false;
            }
        }
    }
}

fn report(tracked: &HashMap<String, Tracked>, totals: &Totals) {
    let held: u64 = tracked.values().filter_map(|t| t.remote).map(|r| r.have - r.committed.min(r.have)).sum();
    log::info(
        "progress",
        &[
            ("files", V::U(tracked.len() as u64)),
            ("pushes", V::U(totals.pushes)),
            ("round_trips", V::U(totals.round_trips)),
            ("bytes", V::U(totals.bytes)),
            ("events", V::I(totals.events)),
            ("corrupt", V::I(totals.corrupt)),
            ("held_bytes", V::U(held)),
            ("given_up", V::U(tracked.values().filter(|t| t.given_up).count() as u64)),
        ],
    );
}
