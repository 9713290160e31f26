//! Reliability rows R2 and R3 (issue 21).
//!
//! R2: the cluster, its index in the partitioned layout (`partition_events`, two files a
//! partition), is stopped with `pg_ctl stop -m immediate` (and started again) many times at
//! random moments while 8 writers append to their session files, pausing mid-line. Afterwards
//! every line is indexed exactly once, the log shows crash recovery at every start, and amcheck
//! (`bt_index_parent_check(..., heapallindexed => true)` on every btree index) and
//! `verify_heapam` find nothing wrong in any table of the extension.
//!
//! R3: a streaming standby follows a primary whose worker is SIGKILLed and which is itself
//! stopped with `-m immediate` during ingestion. Once the primary has caught up and the standby
//! has replayed up to the primary's WAL position, both hold the same rows (per table: count and
//! a checksum over whole rows; for `event` also over `(file_id, byte_offset, payload)`), the
//! standby's worker never indexed nor crashed, and amcheck (`bt_index_check` with
//! `heapallindexed`: `bt_index_parent_check` cannot run in hot standby) and `verify_heapam` are
//! clean on the standby.
//!
//! Sizes (short default / full): `CORTEX_R2_STOPS` (20 / 100), `CORTEX_R2_WRITERS` (8),
//! `CORTEX_R3_KILLS` (8 / 40), `CORTEX_R3_STOPS` (3 / 10), `CORTEX_R3_WRITERS` (8),
//! `CORTEX_R3_FILES_PER_WRITER` (2); the seed:
//! `CORTEX_RELIABILITY_SEED`.

use std::time::{Duration, Instant};

use cortex_buffer_e2e::writers::{assert_exactly_once, wait_caught_up, WriterOptions, Writers};
use cortex_buffer_e2e::{env_size, report, wait_for, Cluster, Rng, WORKER};

const FAST: [&str; 3] =
    ["cortex_buffer.poll_interval = 50", "cortex_buffer.settle_period = 200", "cortex_buffer.batch_rows = 7"];

/// Every table of the extension that has storage: tables and partitions of schema
/// `cortex_buffer`, and their TOAST tables.
const TABLES: &str = "
SELECT c.oid, c.relkind FROM pg_class c
 WHERE c.relkind IN ('r', 'm', 't')
   AND (c.relnamespace = 'cortex_buffer'::regnamespace
        OR c.oid IN (SELECT reltoastrelid FROM pg_class WHERE relnamespace = 'cortex_buffer'::regnamespace))";

fn seed() -> u64 {
    let s = env_size("CORTEX_RELIABILITY_SEED", 0x5eed_2103);
    eprintln!("seed {s} (CORTEX_RELIABILITY_SEED replays this run)");
    s
}

fn wait_running(c: &Cluster) {
    let up = wait_for(Duration::from_secs(60), || c.worker_pid().is_some());
    assert!(up.is_some(), "worker did not come back:\n{}", c.log_tail());
}

fn events(c: &Cluster) -> Option<u64> {
    c.try_psql("postgres", "SELECT count(*) FROM cortex_buffer.event").ok().and_then(|s| s.parse().ok())
}

/// Runs `check` (an amcheck function taking the index) over every valid btree index of every
/// table of the extension, and `verify_heapam` over every table; returns (indexes, tables)
/// checked. Panics on any finding.
fn amcheck(c: &Cluster, check: &str) -> (usize, usize) {
    let indexes = c
        .try_psql(
            "postgres",
            &format!(
                "SELECT i.indexrelid::regclass, {check}(i.indexrelid, heapallindexed => true)
                   FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
                   JOIN pg_am am ON am.oid = ic.relam
                  WHERE am.amname = 'btree' AND ic.relkind = 'i' AND i.indisvalid AND i.indisready
                    AND i.indrelid IN (SELECT oid FROM ({TABLES}) t)"
            ),
        )
        .unwrap_or_else(|e| panic!("{check} found a problem:\n{e}"));
    let n_indexes = indexes.lines().count();
    let problems = c
        .try_psql(
            "postgres",
            &format!(
                "SELECT t.oid::regclass, v.* FROM ({TABLES}) t,
                        LATERAL verify_heapam(t.oid, check_toast => t.relkind <> 't') v"
            ),
        )
        .unwrap_or_else(|e| panic!("verify_heapam failed:\n{e}"));
    assert_eq!(problems, "", "verify_heapam found corruption");
    let n_tables: usize = c.psql(&format!("SELECT count(*) FROM ({TABLES}) t")).parse().expect("count");
    // The extension's main tables and their indexes are among those checked.
    assert!(n_indexes >= 10 && n_tables >= 10, "too few checked: {n_indexes} indexes, {n_tables} tables");
    // event's key: event_pkey, or its partitions' (event_p<first id>_pkey).
    assert!(indexes.contains("cortex_buffer.event_p"), "{indexes}");
    (n_indexes, n_tables)
}

/// Lines of the log that a crash, or an indexer failing, would leave.
fn trouble(c: &Cluster) -> Vec<String> {
    c.log_text()
        .lines()
        .filter(|l| {
            l.contains("PANIC")
                || l.contains("terminated by signal")
                || l.contains("exited with exit code")
                || (l.contains(WORKER) && (l.contains("ERROR") || l.contains("FATAL") || l.contains("WARNING")))
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn r2_immediate_stops_during_ingestion_lose_nothing_duplicate_nothing_and_leave_clean_tables() {
    let stops = env_size("CORTEX_R2_STOPS", 20);
    let threads = env_size("CORTEX_R2_WRITERS", 8) as usize;
    let seed = seed();
    let started = Instant::now();
    let c = Cluster::new("r2-stops", &FAST);
    c.start();
    c.create_extension();
    // The partitioned layout, two files a partition: the writers' files land in several, and
    // the partitions ahead are made by the worker as it numbers them, between the stops.
    c.psql("SELECT count(*) FROM cortex_buffer.partition_events(files_per_partition => 2, premake => 1)");
    wait_running(&c);
    let recoveries_before = c.log_count("automatic recovery in progress");

    let w = Writers::start(&c.sessions, WriterOptions { gap_ms: 20, ..WriterOptions::new(threads, 1, seed) });
    let mut rng = Rng::new(seed.rotate_left(23));
    // Rows indexed when the cluster was last stopped, and when it was (re)started.
    let mut last_events = 0;
    let mut restarted_at = Instant::now();
    let mut stops_while_ingesting = 0;
    // How long after each start the first new rows appeared (when before the next stop).
    let mut resumed_after: Vec<Duration> = Vec::new();
    for k in 0..stops {
        let pause = Duration::from_millis(300) + rng.millis_below(1500);
        let t = Instant::now();
        let mut resumed = false;
        while t.elapsed() < pause {
            std::thread::sleep(Duration::from_millis(50).min(pause.saturating_sub(t.elapsed())));
            if !resumed && k > 0 && events(&c).is_some_and(|n| n > last_events) {
                resumed = true;
                resumed_after.push(restarted_at.elapsed());
            }
        }
        let now = events(&c).unwrap_or(last_events);
        if now > last_events {
            stops_while_ingesting += 1;
        }
        last_events = now;
        c.stop("immediate");
        // Now and then the cluster stays down a little while the writers go on.
        if rng.below(3) == 0 {
            std::thread::sleep(rng.millis_below(800));
        }
        c.start();
        restarted_at = Instant::now();
        wait_running(&c);
        assert!(started.elapsed() < Duration::from_secs(900), "stop {k} took too long");
    }
    resumed_after.sort();
    let resume =
        |q: usize| resumed_after.get((resumed_after.len() * q / 100).min(resumed_after.len().saturating_sub(1)));
    eprintln!(
        "indexing resumed after a start in (ms): {:?}",
        resumed_after.iter().map(Duration::as_millis).collect::<Vec<_>>()
    );
    std::thread::sleep(Duration::from_millis(500));
    let written = w.finish();
    wait_caught_up(&c, &written, Duration::from_secs(120));
    let tally = assert_exactly_once(&c, &written);
    assert_eq!(tally.duplicates, 0);
    assert!(tally.lines > 1000, "too little written to mean anything: {tally:?}");
    // The stops hit ingestion: at most of them rows had been indexed since the previous start
    // (the rest came before the worker's first commit after a start; with a loaded machine
    // that is a good part of them, hence only half).
    assert!(stops_while_ingesting * 2 >= stops, "only {stops_while_ingesting} of {stops} stops hit ingestion");
    // Every start recovered from a crash, and nothing else crashed.
    let recoveries = c.log_count("automatic recovery in progress") - recoveries_before;
    assert!(recoveries >= stops as usize, "{recoveries} crash recoveries for {stops} stops:\n{}", c.log_tail());
    assert_eq!(c.log_count("received immediate shutdown request"), stops as usize);
    let trouble = trouble(&c);
    assert!(trouble.is_empty(), "{}", trouble.join("\n"));

    // The files span partitions, each made while the cluster was being stopped under it.
    let partitions =
        c.psql("SELECT count(*) FROM pg_catalog.pg_inherits WHERE inhparent = 'cortex_buffer.event'::regclass");
    assert!(partitions.parse::<usize>().unwrap_or(0) >= threads / 2, "{partitions} partitions of event");
    c.psql("CREATE EXTENSION amcheck");
    let (indexes, tables) = amcheck(&c, "bt_index_parent_check");
    eprintln!("R2 took {:.0?}", started.elapsed());
    report(
        "R2",
        "immediate stops",
        &format!(
            "{stops} stops ({stops_while_ingesting} mid-ingestion, {recoveries} crash recoveries, event in {partitions} partitions, indexing resumed after a start in median {} ms, max {} ms), {} lines written to {} files by {threads} writers, {} rows indexed, {} duplicates, amcheck {indexes} indexes clean, verify_heapam {tables} tables clean",
            resume(50).map_or(0, |d| d.as_millis()),
            resume(100).map_or(0, |d| d.as_millis()),
            tally.lines,
            tally.files,
            tally.rows,
            tally.duplicates
        ),
    );
}

/// Per table of the extension: its row count and a checksum over its whole rows; and for
/// `event` a checksum over `(file_id, byte_offset, payload)`.
fn contents(c: &Cluster) -> Vec<String> {
    let tables = c.psql(
        "SELECT c.oid::regclass FROM pg_class c
          WHERE c.relnamespace = 'cortex_buffer'::regnamespace AND c.relkind IN ('r', 'm') ORDER BY 1",
    );
    let mut sql: Vec<String> = tables
        .lines()
        .map(|t| {
            format!(
                "SELECT '{t} ' || count(*) || ' ' || md5(coalesce(string_agg(x::text, E'\\n' ORDER BY x::text), '')) FROM {t} x"
            )
        })
        .collect();
    sql.push(
        "SELECT 'event(file_id,byte_offset,payload) ' ||
                md5(coalesce(string_agg(file_id || ':' || byte_offset || ':' || payload::text, ',' ORDER BY file_id, byte_offset), ''))
           FROM cortex_buffer.event"
            .to_owned(),
    );
    c.psql(&sql.join(" UNION ALL ")).lines().map(str::to_owned).collect()
}

fn lsn_reached(standby: &Cluster, lsn: &str) -> bool {
    standby.try_psql("postgres", &format!("SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn")).is_ok_and(|s| s == "t")
}

#[test]
fn r3_a_standby_holds_everything_the_primary_indexed_through_kills_and_immediate_stops() {
    let kills = env_size("CORTEX_R3_KILLS", 8);
    let stops = env_size("CORTEX_R3_STOPS", 3);
    let threads = env_size("CORTEX_R3_WRITERS", 8) as usize;
    let files_each = env_size("CORTEX_R3_FILES_PER_WRITER", 2) as usize;
    let seed = seed();
    let started = Instant::now();
    let mut conf = FAST.to_vec();
    // pg_basebackup copies postgresql.conf: the standby retries a lost primary quickly.
    conf.push("wal_retrieve_retry_interval = '200ms'");
    let primary = Cluster::new("r3-primary", &conf);
    primary.start();
    primary.create_extension();
    primary.psql("CREATE EXTENSION amcheck");
    wait_running(&primary);
    // pg_basebackup's spread checkpoint would take half a minute with CREATE EXTENSION's
    // buffers still dirty.
    primary.psql("CHECKPOINT");
    let standby = Cluster::standby_of(&primary, "r3-standby");
    standby.start();
    let in_recovery = wait_for(Duration::from_secs(10), || standby.worker_activity().contains("in recovery"));
    assert!(in_recovery.is_some(), "standby worker: {:?}\n{}", standby.worker_activity(), standby.log_tail());
    let standby_worker = standby.worker_pid().expect("standby worker");

    let w = Writers::start(
        &primary.sessions,
        WriterOptions { gap_ms: 20, ..WriterOptions::new(threads, files_each, seed) },
    );
    // The kills and the stops, in a random order.
    let mut rng = Rng::new(seed.rotate_left(29));
    let mut plan: Vec<bool> = (0..kills).map(|_| true).chain((0..stops).map(|_| false)).collect();
    for i in (1..plan.len()).rev() {
        plan.swap(i, rng.below(i + 1));
    }
    for (k, kill) in plan.iter().enumerate() {
        std::thread::sleep(Duration::from_millis(300) + rng.millis_below(1200));
        if *kill {
            if let Some(pid) = primary.worker_pid() {
                // The worker may be restarting already; a failed kill is fine.
                let _ = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status();
            }
            std::thread::sleep(Duration::from_millis(200));
        } else {
            primary.stop("immediate");
            primary.start();
        }
        wait_running(&primary);
        assert!(started.elapsed() < Duration::from_secs(900), "step {k} took too long");
    }
    std::thread::sleep(Duration::from_millis(500));
    let written = w.finish();
    wait_caught_up(&primary, &written, Duration::from_secs(120));
    let tally = assert_exactly_once(&primary, &written);
    assert_eq!(tally.duplicates, 0);
    assert!(tally.lines > 500, "too little written to mean anything: {tally:?}");
    assert!(primary.log_count("terminated by signal 9") >= kills as usize, "{}", primary.log_tail());
    assert_eq!(primary.log_count("received immediate shutdown request"), stops as usize);

    // The primary is quiet now (the worker may still write now and then): compare once the
    // standby has replayed past a position taken after the primary's figures, and the
    // primary's figures did not move meanwhile.
    let mut compared = None;
    for _ in 0..10 {
        let before = contents(&primary);
        let lsn = primary.psql("SELECT pg_current_wal_lsn()");
        let replayed = wait_for(Duration::from_secs(60), || lsn_reached(&standby, &lsn));
        assert!(replayed.is_some(), "standby did not replay up to {lsn}:\n{}", standby.log_tail());
        let on_standby = contents(&standby);
        if contents(&primary) == before {
            compared = Some((before, on_standby));
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let (on_primary, on_standby) = compared.expect("the primary's tables kept changing");
    assert_eq!(on_standby, on_primary, "standby and primary differ");
    let standby_events: u64 = standby.psql("SELECT count(*) FROM cortex_buffer.event").parse().expect("count");
    assert_eq!(standby_events, tally.rows);

    // The standby's worker waited the whole time: same process, still in recovery, nothing
    // indexed from its own (empty) sessions directory, no errors.
    assert_eq!(standby.worker_pid(), Some(standby_worker), "the standby's worker restarted:\n{}", standby.log_tail());
    assert!(standby.worker_activity().contains("in recovery"), "{}", standby.worker_activity());
    assert_eq!(standby.log_count("the server is in recovery"), 1, "{}", standby.log_tail());
    assert_eq!(std::fs::read_dir(&standby.sessions).expect("standby sessions").count(), 0);
    let trouble = trouble(&standby);
    assert!(trouble.is_empty(), "{}", trouble.join("\n"));

    let (indexes, tables) = amcheck(&standby, "bt_index_check");
    eprintln!("R3 took {:.0?}", started.elapsed());
    report(
        "R3",
        "streaming standby",
        &format!(
            "{kills} worker kills + {stops} immediate stops of the primary, {} lines written to {} files by {threads} writers, {} rows indexed, {} duplicates, standby equal on {} tables (counts + checksums), standby amcheck {indexes} indexes clean, verify_heapam {tables} tables clean",
            tally.lines,
            tally.files,
            tally.rows,
            tally.duplicates,
            on_standby.len() - 1
        ),
    );
}
