//! The partitioned layout inside one transaction (a `#[pg_test]` always rolls back, so the
//! conversion, the partitions and the drops are undone after each test): the conversion keeps
//! every row, the extension's membership, the views, comments and grants; rows are routed into
//! the leaf by the direct path (and by SQL when a leaf is refused); partitions are made as new
//! files need them; retention drops a partition whole once every file of its span qualifies.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::{event_ddl_one_at_a_time, new_job_with, one, run, sqlstate_of};

    const SESSIONS: &str = "/tmp/cortex_buffer-pgtest-sessions";

    fn line(job: &str, seq: i64) -> String {
        format!(
            r#"{{"type":"SESSION_START","timestamp":"2026-02-23T14:30:{:02}.000Z","job_id":"{job}","session_id":"s","seq":{seq},"buffer_schema_version":1}}"#,
            seq % 60
        ) + "\n"
    }

    /// A job directory with one session file of two events and a corrupt line, indexed by the
    /// job's own catch-up (never the whole shared test volume). Returns the file's path.
    fn indexed_file(job: &str) -> String {
        std::fs::create_dir_all(format!("{SESSIONS}/{job}")).unwrap_or_else(|e| panic!("{e}"));
        let p = format!("{SESSIONS}/{job}/session-001.jsonl");
        std::fs::write(&p, line(job, 0) + "{not json\n" + &line(job, 1)).unwrap_or_else(|e| panic!("{e}"));
        run(&format!("SELECT cortex_buffer.recovery_plan('{job}')"));
        p
    }

    fn file_id(path: &str) -> i64 {
        one(&format!("SELECT file_id::text FROM cortex_buffer.session_file WHERE path = '{path}'"))
            .parse()
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn rows_of(path: &str) -> String {
        one(&format!(
            "SELECT (SELECT count(*) FROM cortex_buffer.event WHERE file_id = f.file_id) || ' ' ||
                    (SELECT count(*) FROM cortex_buffer.corrupt_line WHERE file_id = f.file_id)
               FROM cortex_buffer.session_file f WHERE path = '{path}'"
        ))
    }

    fn explain(query: &str) -> String {
        Spi::connect(|c| {
            let mut out = String::new();
            for r in c.select(&format!("EXPLAIN {query}"), None, &[]).unwrap_or_else(|e| panic!("{e}")) {
                out += &r.get::<String>(1).ok().flatten().unwrap_or_default();
                out.push('\n');
            }
            out
        })
    }

    /// A span of file ids of this test's own, `ahead` spans of `width` above every id handed
    /// out so far. The sequence only ever moves forward (`setval` is not rolled back, and the
    /// tests running alongside number their files from it too).
    fn fresh_span(width: i64, ahead: i64) -> i64 {
        let last: i64 = one("SELECT last_value::text FROM cortex_buffer.session_file_seq").parse().unwrap_or(0);
        (last / width + ahead) * width
    }

    /// Moves the sequence forward so that the next id is `next` (never backwards).
    fn next_id_at_least(next: i64) {
        run(&format!(
            "SELECT setval('cortex_buffer.session_file_seq', greatest(last_value, {next} - 1)) FROM cortex_buffer.session_file_seq"
        ));
    }

    fn running_job() -> String {
        new_job_with("cortex_buffer.job", "RUNNING", "started_at, heartbeat_at", "now(), now()")
    }

    fn clean(jobs: &[&String]) {
        for job in jobs {
            let _ = std::fs::remove_dir_all(format!("{SESSIONS}/{job}"));
        }
    }

    #[pg_test]
    fn the_conversion_keeps_every_row_and_the_extension_s_hold_on_the_tables() {
        event_ddl_one_at_a_time();
        let job = running_job();
        let path = indexed_file(&job);
        let before = one("SELECT (SELECT count(*) FROM cortex_buffer.event) || ' ' || (SELECT count(*) FROM cortex_buffer.corrupt_line)");
        assert_eq!(rows_of(&path), "2 1");
        let made: i64 = one("SELECT count(*)::text FROM cortex_buffer.partition_events(10, 2)").parse().unwrap_or(0);
        assert!(made >= 2 * 3, "{made} partitions for two tables");
        for t in ["event", "corrupt_line"] {
            assert_eq!(
                one(&format!("SELECT relkind::text FROM pg_class WHERE oid = 'cortex_buffer.{t}'::regclass")),
                "p"
            );
            // Still the extension's own table; the old one is gone.
            assert_eq!(
                one(&format!(
                    "SELECT count(*)::text FROM pg_depend WHERE classid = 'pg_class'::regclass
                        AND objid = 'cortex_buffer.{t}'::regclass AND deptype = 'e'"
                )),
                "1"
            );
            assert_eq!(one(&format!("SELECT (to_regclass('cortex_buffer.{t}_unpartitioned') IS NULL)::text")), "true");
            assert_eq!(
                one(&format!("SELECT (obj_description('cortex_buffer.{t}'::regclass, 'pg_class') IS NOT NULL)::text")),
                "true"
            );
            // The definer's grants, on the parent and its partitions.
            assert_eq!(
                one(&format!("SELECT bool_and(has_table_privilege('cortex_buffer_definer', i.inhrelid, 'INSERT'))::text FROM pg_inherits i WHERE i.inhparent = 'cortex_buffer.{t}'::regclass")),
                "true"
            );
        }
        assert_eq!(
            one("SELECT (SELECT count(*) FROM cortex_buffer.event) || ' ' || (SELECT count(*) FROM cortex_buffer.corrupt_line)"),
            before
        );
        assert_eq!(rows_of(&path), "2 1");
        // Indexes and their comments, made again on the partitioned table.
        assert_eq!(
            one("SELECT string_agg(c.relname, ',' ORDER BY c.relname) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                  WHERE i.indrelid = 'cortex_buffer.event'::regclass"),
            "event_invocation_idx,event_marker_idx,event_pkey"
        );
        assert_eq!(
            one("SELECT (obj_description('cortex_buffer.event_marker_idx'::regclass, 'pg_class') IS NOT NULL)::text"),
            "true"
        );
        // The view over event follows it, and keeps its options.
        assert_eq!(
            one("SELECT array_to_string(reloptions, ',') FROM pg_class WHERE oid = 'cortex_buffer.job_sessions'::regclass"),
            "security_invoker=true"
        );
        assert_eq!(one(&format!("SELECT count(*)::text FROM cortex_buffer.job_sessions WHERE job_id = '{job}'")), "1");
        // A lookup by file reads one partition.
        let plan = explain(&format!("SELECT * FROM cortex_buffer.event WHERE file_id = {}", file_id(&path)));
        assert_eq!(plan.matches("event_p").count(), 1, "{plan}");
        assert_eq!(one("SELECT files_per_partition || ' ' || premake FROM cortex_buffer.event_partitioning"), "10 2");
        // Twice is refused; so are bad arguments and other roles.
        assert_eq!(sqlstate_of("SELECT * FROM cortex_buffer.partition_events()").0, "55000");
        // A table that only has a partition's name is not taken for one.
        run("CREATE TABLE cortex_buffer.event_p99999990 (x int)");
        let (state, hint) = sqlstate_of("SELECT cortex_buffer.event_partition_create(99999990, 100000000)");
        assert_eq!(state, "55000");
        assert!(hint.is_some_and(|h| h.contains("ATTACH PARTITION")));
        clean(&[&job]);
    }

    #[pg_test]
    fn the_conversion_refuses_bad_arguments_and_other_roles() {
        event_ddl_one_at_a_time();
        let (state, hint) = sqlstate_of("SELECT * FROM cortex_buffer.partition_events(0)");
        assert_eq!(state, "22023");
        assert!(hint.is_some());
        run("CREATE ROLE cb_partition_stranger");
        run("GRANT USAGE ON SCHEMA cortex_buffer TO cb_partition_stranger");
        run("SET ROLE cb_partition_stranger");
        assert_eq!(sqlstate_of("SELECT * FROM cortex_buffer.partition_events()").0, "42501");
        assert_eq!(sqlstate_of("SELECT cortex_buffer.event_partition_create(0, 10)").0, "42501");
        run("RESET ROLE");
        assert_eq!(one("SELECT relkind::text FROM pg_class WHERE oid = 'cortex_buffer.event'::regclass"), "r");
        // The helpers refuse on the plain layout, and anything that is not a partition.
        assert_eq!(sqlstate_of("SELECT cortex_buffer.event_partition_create(0, 10)").0, "55000");
        assert_eq!(sqlstate_of("SELECT cortex_buffer.event_partition_create(10, 10)").0, "22023");
        assert_eq!(sqlstate_of("SELECT cortex_buffer.event_partition_drop('cortex_buffer.session_file')").0, "42809");
    }

    /// Where the rows of `file_id` go: `direct` or why they go through SQL.
    fn route(file_id: i64) -> String {
        use crate::indexer::direct_insert::{EventTable, InsertPath};
        match EventTable::open(10) {
            Ok(InsertPath::Direct(mut t)) => {
                assert!(t.is_routed());
                t.refusal_for(file_id).unwrap_or_else(|| "direct".into())
            }
            Ok(InsertPath::Sql(why)) => why,
            Err(e) => panic!("{}", e.message),
        }
    }

    #[pg_test]
    fn new_files_get_their_partition_and_their_rows_go_straight_into_it() {
        event_ddl_one_at_a_time();
        run("SELECT count(*) FROM cortex_buffer.partition_events(100, 0)");
        // File ids far above every partition: the indexer makes the span the file needs.
        let span = fresh_span(100, 1000);
        next_id_at_least(span + 4);
        let leaf = format!("cortex_buffer.event_p{span}");
        assert_eq!(one(&format!("SELECT (to_regclass('{leaf}') IS NULL)::text")), "true");
        assert!(route(span + 4).starts_with("no partition"), "{}", route(span + 4));
        let job = running_job();
        let path = indexed_file(&job);
        let id = file_id(&path);
        assert_eq!(id / 100 * 100, span);
        assert_eq!(rows_of(&path), "2 1");
        assert_eq!(
            one(&format!("SELECT string_agg(DISTINCT tableoid::regclass::text, ',') FROM cortex_buffer.event WHERE file_id = {id}")),
            leaf
        );
        assert_eq!(
            one(&format!("SELECT (to_regclass('cortex_buffer.corrupt_line_p{span}') IS NOT NULL)::text")),
            "true"
        );
        assert_eq!(route(id), "direct");
        // A partition the direct path refuses (a CHECK constraint): its rows go through SQL,
        // where PostgreSQL applies it.
        run(&format!("ALTER TABLE {leaf} ADD CONSTRAINT any_check CHECK (line_no > 0)"));
        assert!(route(id).contains("refused"), "{}", route(id));
        let other = running_job();
        let path2 = indexed_file(&other);
        assert_eq!(rows_of(&path2), "2 1");
        // A wider span from now on: the next partition fills the gap above the last one, cut to
        // the new width, and never overlaps it.
        run("UPDATE cortex_buffer.event_partitioning SET files_per_partition = 150");
        next_id_at_least(span + 100);
        let wider = running_job();
        let path3 = indexed_file(&wider);
        let id3 = file_id(&path3);
        assert_eq!(rows_of(&path3), "2 1");
        let bounds = one(&format!(
            "SELECT pg_get_expr(c.relpartbound, c.oid) FROM cortex_buffer.event e JOIN pg_class c ON c.oid = e.tableoid
              WHERE e.file_id = {id3} LIMIT 1"
        ));
        let lower = (span + 100).max(id3 / 150 * 150);
        assert_eq!(bounds, format!("FOR VALUES FROM ('{lower}') TO ('{}')", lower + 150), "file id {id3}");
        // A statement trigger on the parent would not fire for rows put into a partition: SQL.
        run("CREATE FUNCTION pg_temp.nothing() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$");
        run("CREATE TRIGGER nothing AFTER INSERT ON cortex_buffer.event FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.nothing()");
        assert!(route(id).contains("trigger"), "{}", route(id));
        clean(&[&job, &other, &wider]);
    }

    /// The actions cleanup takes on the partitions, as `action path files rows_deleted`.
    fn partition_actions(args: &str) -> Vec<String> {
        let text = one(&format!(
            "SELECT coalesce(string_agg(action || ' ' || path || ' ' || files || ' ' || rows_deleted, E'\\n' ORDER BY path), '')
               FROM cortex_buffer.cleanup_session_buffers({args}) WHERE path LIKE 'cortex_buffer.event_p%'"
        ));
        text.lines().map(str::to_owned).filter(|l| !l.is_empty()).collect()
    }

    fn age(path: &str, days: u64) {
        let f = std::fs::File::options().append(true).open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let t = std::time::SystemTime::now() - std::time::Duration::from_secs(days * 86_400);
        f.set_modified(t).unwrap_or_else(|e| panic!("{e}"));
    }

    /// The rows a cleanup attributes to the files of `job`, as `action rows_deleted`.
    fn file_actions(job: &str, args: &str) -> String {
        one(&format!(
            "SELECT coalesce(string_agg(action || ' ' || rows_deleted, ',' ORDER BY action), '')
               FROM cortex_buffer.cleanup_session_buffers({args}) WHERE path LIKE '%{job}%'"
        ))
    }

    #[pg_test]
    fn retention_drops_a_partition_whole_when_every_file_of_its_span_goes() {
        event_ddl_one_at_a_time();
        run("SELECT count(*) FROM cortex_buffer.partition_events(100, 1)");
        run("SET cortex_buffer.gone_retention = '1d'");
        // Two spans of our own: [base, base + 100) and the next.
        let base = fresh_span(100, 1000);
        next_id_at_least(base);
        let done = new_job_with(
            "cortex_buffer.job",
            "COMPLETED",
            "completed_at, updated_at",
            "now() - interval '10 days', now() - interval '10 days'",
        );
        let old_done = indexed_file(&done);
        age(&old_done, 10);
        run(&format!(
            "UPDATE cortex_buffer.session_file SET mtime = now() - interval '10 days' WHERE path = '{old_done}'"
        ));
        // A file gone for longer than gone_retention, and (in the next span) one that is still
        // there beside one gone that a live job's plan reads.
        let gone_job = new_job_with(
            "cortex_buffer.job",
            "COMPLETED",
            "completed_at, updated_at",
            "now() - interval '9 days', now() - interval '9 days'",
        );
        let gone = indexed_file(&gone_job);
        std::fs::remove_file(&gone).unwrap_or_else(|e| panic!("{e}"));
        run(&format!("UPDATE cortex_buffer.session_file SET gone_at = now() - interval '9 days', mtime = now() - interval '9 days' WHERE path = '{gone}'"));
        next_id_at_least(base + 100);
        let held_job = running_job();
        let held = indexed_file(&held_job);
        assert_eq!(file_id(&held) / 100 * 100, base + 100);
        std::fs::remove_file(&held).unwrap_or_else(|e| panic!("{e}"));
        let present_job = new_job_with("cortex_buffer.job", "PENDING", "updated_at", "now()");
        let _present = indexed_file(&present_job);
        run(&format!("UPDATE cortex_buffer.session_file SET gone_at = now() - interval '9 days', mtime = now() - interval '9 days' WHERE path = '{held}'"));
        // Close both spans.
        next_id_at_least(base + 250);
        let args = "max_unknown_ratio => 1";
        assert_eq!(rows_of(&old_done), "2 1");
        // The same rows go as in the plain layout, counted on the files' own actions (2 events,
        // 1 corrupt line and the session_file row each); the span all of whose files go is
        // dropped whole, the other stays.
        let first = format!("drop_partition cortex_buffer.event_p{base} 2 0");
        let second = format!("cortex_buffer.event_p{} ", base + 100);
        let dry = partition_actions(&format!("dry_run => true, {args}"));
        assert!(dry.contains(&first), "{dry:?}");
        assert!(!dry.iter().any(|l| l.contains(&second)), "{dry:?}");
        assert_eq!(file_actions(&done, &format!("dry_run => true, {args}")), "delete_dir 4");
        // (Its job is over: its directory, empty now, goes with the file's rows.)
        assert_eq!(file_actions(&gone_job, &format!("dry_run => true, {args}")), "delete_dir 4");
        assert_eq!(one(&format!("SELECT (to_regclass('cortex_buffer.event_p{base}') IS NOT NULL)::text")), "true");
        assert_eq!(rows_of(&old_done), "2 1", "the dry run changed nothing");
        // storage_report() counts the files' rows as what the next cleanup frees.
        let freed = one("SELECT coalesce(sum(next_cleanup_rows), 0)::text FROM cortex_buffer.storage_report()
              WHERE job_state = 'COMPLETED'");
        assert!(freed.parse::<i64>().unwrap_or(0) >= 8, "{freed}");
        let real = partition_actions(args);
        assert_eq!(real, dry, "the real run does what the dry run said");
        for t in ["event", "corrupt_line"] {
            assert_eq!(one(&format!("SELECT (to_regclass('cortex_buffer.{t}_p{base}') IS NULL)::text")), "true");
            assert_eq!(
                one(&format!("SELECT (to_regclass('cortex_buffer.{t}_p{}') IS NOT NULL)::text", base + 100)),
                "true"
            );
        }
        assert_eq!(
            one(&format!(
                "SELECT count(*)::text FROM cortex_buffer.session_file WHERE file_id BETWEEN {base} AND {base} + 99"
            )),
            "0"
        );
        // The live job's gone file keeps its rows (its plan reads them), and the present one its own.
        assert_eq!(rows_of(&held), "2 1");
        // Partitions stand ready above the next file id.
        assert_eq!(
            one(&format!("SELECT (to_regclass('cortex_buffer.event_p{}') IS NOT NULL)::text", base + 300)),
            "true"
        );
        clean(&[&done, &gone_job, &held_job, &present_job]);
    }

    #[pg_test]
    fn a_span_whose_files_go_over_several_cleanups_is_dropped_by_the_last_and_an_empty_one_by_the_next() {
        event_ddl_one_at_a_time();
        run("SELECT count(*) FROM cortex_buffer.partition_events(100, 1)");
        let base = fresh_span(100, 1000);
        next_id_at_least(base);
        let old = |status: &str| {
            new_job_with(
                "cortex_buffer.job",
                status,
                "completed_at, updated_at",
                "now() - interval '10 days', now() - interval '10 days'",
            )
        };
        let first = old("COMPLETED");
        let first_file = indexed_file(&first);
        let second = old("RUNNING");
        let second_file = indexed_file(&second);
        next_id_at_least(base + 150);
        let args = "max_unknown_ratio => 1";
        let span = format!("drop_partition cortex_buffer.event_p{base} ");
        // The first job's directory goes, its rows by DELETE: the running job holds the span.
        assert!(!partition_actions(args).iter().any(|l| l.starts_with(&span)));
        assert_eq!(
            one(&format!("SELECT count(*)::text FROM cortex_buffer.session_file WHERE path = '{first_file}'")),
            "0"
        );
        // (The test's transaction never commits: the unlink at commit is done here.)
        clean(&[&first]);
        // Once the second ends too, its cleanup takes the span's last file: the partition goes.
        run(&format!(
            "UPDATE cortex_buffer.job SET status = 'COMPLETED', completed_at = now() - interval '10 days' WHERE id = '{second}'"
        ));
        assert!(partition_actions(args).contains(&format!("{span}1 0")));
        assert_eq!(
            one(&format!("SELECT count(*)::text FROM cortex_buffer.session_file WHERE path = '{second_file}'")),
            "0"
        );
        // A span with no file left (its rows deleted before the layout's drops) goes by itself.
        let base2 = fresh_span(100, 10);
        next_id_at_least(base2);
        let third = old("COMPLETED");
        let third_file = indexed_file(&third);
        next_id_at_least(base2 + 150);
        run(&format!("DELETE FROM cortex_buffer.session_file WHERE path = '{third_file}'"));
        assert!(partition_actions(args).contains(&format!("drop_partition cortex_buffer.event_p{base2} 0 0")));
        clean(&[&first, &second, &third]);
    }
}
