//! `#[pg_test]`s that the indexer writes exactly what a plain `INSERT` would, on both insert
//! paths: text columns never hold NUL; an operator's CHECK, domain, NOT NULL, rule, partition
//! or column type change is applied (or the row refused) as an `INSERT` would do it, never
//! bypassed and never a crash; a line over the memory budget and a line that was not UTF-8
//! are stored with the reason. (Interrupts need a statement of their own: pgrx-tests/tests/
//! insert_rules.rs.)
//!
//! "direct" is `cortex_buffer.event` as shipped (heap insertion, as long as nothing differs);
//! "sql" adds a no-op trigger, which routes every row through SQL.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::{event_ddl_one_at_a_time, one, run, TempRoot};

    const JOB: &str = "0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f";
    const FILE: &str = "0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f/session-001.jsonl";
    const PATHS: [&str; 2] = ["direct", "sql"];

    fn line(seq: u64, fields: &str) -> String {
        format!(
            r#"{{"type":"TOOL_RESULT","timestamp":"2026-02-23T14:30:00.000Z","job_id":"{JOB}","seq":{seq}{fields}}}"#
        )
    }

    /// Sets up the insert path under test.
    fn route(path: &str) {
        run("SET cortex_buffer.settle_period = 0");
        if path == "sql" {
            run(
                "CREATE FUNCTION public.pass_through() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$",
            );
            run("CREATE TRIGGER pass_through BEFORE INSERT ON cortex_buffer.event FOR EACH ROW EXECUTE FUNCTION public.pass_through()");
        }
    }

    fn undo_route(path: &str) {
        if path == "sql" {
            run("DROP TRIGGER pass_through ON cortex_buffer.event");
            run("DROP FUNCTION public.pass_through()");
        }
    }

    /// Indexes `root`; returns `action|events|corrupt|detail` of `file`.
    fn index(root: &TempRoot, file: &str) -> String {
        one(&format!(
            "SELECT concat_ws('|', action, events_added, corrupt_added, detail)
               FROM cortex_buffer.index_sessions('{}') WHERE path = '{}'",
            root.dir(),
            root.path(file)
        ))
    }

    fn events_of(root: &TempRoot, file: &str, cols: &str) -> String {
        one(&format!(
            "SELECT coalesce(string_agg(concat_ws(':', {cols}), ',' ORDER BY e.byte_offset), '')
               FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id) WHERE f.path = '{}'",
            root.path(file)
        ))
    }

    #[pg_test]
    fn nul_never_reaches_a_text_column_on_either_path() {
        event_ddl_one_at_a_time();
        for path in PATHS {
            route(path);
            let root = TempRoot::new(&format!("nul-{path}"));
            let nul_line = r#"{"type":"TOOL\u0000X","timestamp":"2026-02-23T14:30:00Z","job_id":"0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f","session_id":"s\u0000","tool_name":"t\u0000","invocation_id":"i\u0000","buffer_schema_version":"v\u0000","seq":0}"#;
            let mut body = format!("{nul_line}\n").into_bytes();
            body.extend_from_slice(b"{\"type\":\"raw\x00nul\"}\n");
            root.put(FILE, body);
            assert!(index(&root, FILE).starts_with("new|1|1"), "{path}");
            assert_eq!(
                events_of(
                    &root,
                    FILE,
                    "type, octet_length(type), session_id, tool_name, invocation_id, payload IS NULL, payload_problem"
                ),
                "TOOL\u{fffd}X:8:s\u{fffd}:t\u{fffd}:i\u{fffd}:t:jsonb cannot store \\u0000",
                "{path}"
            );
            assert_eq!(
                one(&format!(
                    "SELECT count(*)::text FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id)
                      WHERE f.path = '{}' AND (strpos(type || session_id || tool_name || invocation_id, chr(65533)) = 0)",
                    root.path(FILE)
                )),
                "0"
            );
            assert_eq!(
                one(&format!(
                    "SELECT schema_version FROM cortex_buffer.session_file WHERE path = '{}'",
                    root.path(FILE)
                )),
                "v\u{fffd}"
            );
            assert_eq!(
                one(&format!(
                    "SELECT preview FROM cortex_buffer.corrupt_line c JOIN cortex_buffer.session_file f USING (file_id) WHERE f.path = '{}'",
                    root.path(FILE)
                )),
                "{\"type\":\"raw\u{fffd}nul\"}"
            );
            undo_route(path);
        }
    }

    /// A constraint the operator added refuses the row as an INSERT would: the file's indexing
    /// fails (counted, retried, quarantined as usual) and nothing of it is kept.
    fn assert_refused(root: &TempRoot, file: &str, sqlstate: &str, why: &str) {
        let got = index(root, file);
        assert!(got.starts_with("new|0|0|indexing failed:"), "{got}");
        assert!(got.contains(sqlstate) && got.contains(why), "{got}");
        assert_eq!(events_of(root, file, "line_no"), "");
        assert_eq!(
            one(&format!(
                "SELECT concat_ws(' ', failures, indexed_offset, last_error LIKE '%{sqlstate}%') FROM cortex_buffer.session_file WHERE path = '{}'",
                root.path(file)
            )),
            "1 0 t"
        );
    }

    #[pg_test]
    fn a_check_constraint_added_not_valid_refuses_rows_on_either_path() {
        event_ddl_one_at_a_time();
        for path in PATHS {
            route(path);
            run("ALTER TABLE cortex_buffer.event ADD CONSTRAINT few_tokens CHECK (input_tokens < 10) NOT VALID");
            let root = TempRoot::new(&format!("check-{path}"));
            root.put(FILE, format!("{}\n{}\n", line(0, r#","prompt_tokens":5"#), line(1, r#","prompt_tokens":999"#)));
            assert_refused(&root, FILE, "23514", "few_tokens");
            // Lines the constraint accepts are indexed.
            root.put(FILE, format!("{}\n", line(0, r#","prompt_tokens":5"#)));
            assert!(index(&root, FILE).starts_with("changed|1|0"), "{path}");
            run("ALTER TABLE cortex_buffer.event DROP CONSTRAINT few_tokens");
            undo_route(path);
        }
    }

    #[pg_test]
    fn a_domain_and_a_not_null_are_applied_on_either_path() {
        event_ddl_one_at_a_time();
        for path in PATHS {
            route(path);
            run("CREATE DOMAIN public.short_name AS text CHECK (length(VALUE) < 5)");
            run("ALTER TABLE cortex_buffer.event ALTER COLUMN tool_name TYPE public.short_name");
            let root = TempRoot::new(&format!("domain-{path}"));
            root.put(FILE, format!("{}\n", line(0, r#","tool_name":"web_search""#)));
            assert_refused(&root, FILE, "23514", "short_name");
            let ok = "0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f/session-002.jsonl";
            root.put(ok, format!("{}\n", line(0, r#","tool_name":"ls""#)));
            assert!(index(&root, ok).starts_with("new|1|0"));
            assert_eq!(events_of(&root, ok, "tool_name, pg_typeof(tool_name)"), "ls:short_name");
            run("ALTER TABLE cortex_buffer.event ALTER COLUMN tool_name TYPE text");
            run("DROP DOMAIN public.short_name");

            run("TRUNCATE cortex_buffer.event, cortex_buffer.corrupt_line");
            run("ALTER TABLE cortex_buffer.event ALTER COLUMN session_id SET NOT NULL");
            let root = TempRoot::new(&format!("notnull-{path}"));
            root.put(FILE, format!("{}\n", line(0, "")));
            assert_refused(&root, FILE, "23502", "session_id");
            run("ALTER TABLE cortex_buffer.event ALTER COLUMN session_id DROP NOT NULL");
            undo_route(path);
        }
    }

    #[pg_test]
    fn a_rule_on_event_fires_for_every_indexed_line() {
        event_ddl_one_at_a_time();
        run("SET cortex_buffer.settle_period = 0");
        run("CREATE TABLE public.audit (line_no bigint, type text)");
        run("CREATE RULE audit_event AS ON INSERT TO cortex_buffer.event DO ALSO INSERT INTO public.audit VALUES (NEW.line_no, NEW.type)");
        let root = TempRoot::new("rule");
        root.put(FILE, format!("{}\n{}\n{}\n", line(0, ""), line(1, ""), line(2, "")));
        assert!(index(&root, FILE).starts_with("new|3|0"));
        assert_eq!(
            one("SELECT string_agg(line_no || type, ',' ORDER BY line_no) FROM public.audit"),
            "1TOOL_RESULT,2TOOL_RESULT,3TOOL_RESULT"
        );
    }

    #[pg_test]
    fn a_partition_constraint_is_enforced() {
        event_ddl_one_at_a_time();
        run("SET cortex_buffer.settle_period = 0");
        run("CREATE TABLE public.all_events (LIKE cortex_buffer.event) PARTITION BY RANGE (file_id)");
        run("ALTER TABLE public.all_events ATTACH PARTITION cortex_buffer.event FOR VALUES FROM (MINVALUE) TO (1)");
        let root = TempRoot::new("partition");
        root.put(FILE, format!("{}\n", line(0, "")));
        // Every real file id is >= 1: outside the partition's bounds, as INSERT would say.
        assert_refused(&root, FILE, "23514", "partition constraint");
    }

    #[pg_test]
    fn another_access_method_is_written_through_sql() {
        event_ddl_one_at_a_time();
        run("SET cortex_buffer.settle_period = 0");
        run("CREATE ACCESS METHOD heap_copy TYPE TABLE HANDLER heap_tableam_handler");
        run("ALTER TABLE cortex_buffer.event SET ACCESS METHOD heap_copy");
        let root = TempRoot::new("tableam");
        root.put(FILE, format!("{}\n{}\n", line(0, ""), line(1, "")));
        assert!(index(&root, FILE).starts_with("new|2|0"));
        assert_eq!(events_of(&root, FILE, "seq"), "0,1");
    }

    /// Column type changes never crash the backend: the rows go through SQL, which converts
    /// each value as an INSERT would (or refuses it, as an INSERT would).
    #[pg_test]
    fn changed_column_types_are_converted_or_refused_like_insert() {
        event_ddl_one_at_a_time();
        // The operator views read these columns; a type change has to drop them first.
        run("ALTER EXTENSION cortex_buffer DROP VIEW cortex_buffer.job_sessions; DROP VIEW cortex_buffer.job_sessions");
        for path in PATHS {
            route(path);
            run("SET TimeZone = 'UTC'");
            let root = TempRoot::new(&format!("types-{path}"));
            run("ALTER TABLE cortex_buffer.event ALTER COLUMN seq TYPE numeric, ALTER COLUMN payload TYPE json, ALTER COLUMN ts TYPE timestamp, ALTER COLUMN step_index TYPE bigint");
            root.put(FILE, format!("{}\n{}\n", line(7, r#","step_index":3,"x":1.50"#), line(8, "")));
            assert!(index(&root, FILE).starts_with("new|2|0"), "{path}");
            assert_eq!(
                events_of(&root, FILE, "seq, pg_typeof(seq), step_index, payload->>'x', pg_typeof(payload), ts"),
                "7:numeric:3:1.50:json:2026-02-23 14:30:00,8:numeric:json:2026-02-23 14:30:00",
                "{path}"
            );
            run("ALTER TABLE cortex_buffer.event ALTER COLUMN seq TYPE bigint, ALTER COLUMN payload TYPE jsonb USING payload::jsonb, ALTER COLUMN ts TYPE timestamptz, ALTER COLUMN step_index TYPE integer");

            run("TRUNCATE cortex_buffer.event, cortex_buffer.corrupt_line");
            run("ALTER TABLE cortex_buffer.event ALTER COLUMN type TYPE varchar(5), ALTER COLUMN seq TYPE integer");
            let root = TempRoot::new(&format!("narrow-{path}"));
            root.put(FILE, format!("{}\n", line(0, "")));
            assert_refused(&root, FILE, "22001", "character varying(5)");
            let big = "0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f/session-002.jsonl";
            root.put(big, format!("{}\n", line(3_000_000_000, "").replace("TOOL_RESULT", "T")));
            assert_refused(&root, big, "22003", "integer out of range");
            let fits = "0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f/session-003.jsonl";
            root.put(fits, format!("{}\n", line(5, "").replace("TOOL_RESULT", "T")));
            assert!(index(&root, fits).starts_with("new|1|0"));
            assert_eq!(events_of(&root, fits, "type, seq, pg_typeof(seq)"), "T:5:integer");
            run("ALTER TABLE cortex_buffer.event ALTER COLUMN type TYPE text, ALTER COLUMN seq TYPE bigint");
            undo_route(path);
        }
    }

    #[pg_test]
    fn the_shipped_column_list_is_the_table() {
        event_ddl_one_at_a_time();
        use cortex_buffer_core::indexer::event_columns::{EventColumn, SqlType};
        let described = one(
            "SELECT string_agg(concat_ws(':', attname, atttypid::int, atttypmod, attcollation::int, attnotnull), ',' ORDER BY attnum)
               FROM pg_attribute WHERE attrelid = 'cortex_buffer.event'::regclass AND attnum > 0 AND NOT attisdropped",
        );
        let expected: Vec<String> = EventColumn::ALL
            .iter()
            .map(|c| format!("{}:{}:-1:{}:{}", c.name(), c.sql_type().oid(), c.collation(), c.not_null()))
            .map(|s| s.replace(":true", ":t").replace(":false", ":f"))
            .collect();
        assert_eq!(described, expected.join(","));
        // The OIDs the pure core assumes are the server's.
        for (t, oid, array) in [
            (SqlType::Int8, pg_sys::INT8OID, pg_sys::INT8ARRAYOID),
            (SqlType::Int4, pg_sys::INT4OID, pg_sys::INT4ARRAYOID),
            (SqlType::Text, pg_sys::TEXTOID, pg_sys::TEXTARRAYOID),
            (SqlType::Timestamptz, pg_sys::TIMESTAMPTZOID, pg_sys::TIMESTAMPTZARRAYOID),
            (SqlType::Uuid, pg_sys::UUIDOID, pg_sys::UUIDARRAYOID),
            (SqlType::Bool, pg_sys::BOOLOID, pg_sys::BOOLARRAYOID),
            (SqlType::Jsonb, pg_sys::JSONBOID, pg_sys::JSONBARRAYOID),
        ] {
            assert_eq!((t.oid(), t.array_oid()), (oid.to_u32(), array.to_u32()), "{}", t.name());
        }
        assert_eq!(cortex_buffer_core::indexer::event_columns::C_COLLATION_OID, pg_sys::C_COLLATION_OID.to_u32());
        assert_eq!(
            cortex_buffer_core::indexer::event_columns::DEFAULT_COLLATION_OID,
            pg_sys::DEFAULT_COLLATION_OID.to_u32()
        );
    }

    #[pg_test]
    fn a_line_over_the_memory_budget_is_an_event_with_a_null_payload() {
        event_ddl_one_at_a_time();
        for path in PATHS {
            route(path);
            run("SET cortex_buffer.max_line_memory = '1MB'");
            let numbers = vec!["1"; 100_000].join(",");
            let root = TempRoot::new(&format!("budget-{path}"));
            root.put(FILE, format!("{}\n{}\n", line(0, &format!(r#","x":[{numbers}]"#)), line(1, "")));
            assert!(index(&root, FILE).starts_with("new|2|0"), "{path}");
            assert_eq!(
                events_of(&root, FILE, "seq, payload IS NULL, coalesce(payload_problem LIKE '%more than the 1024 kB a line may take', false)"),
                "0:t:t,1:f:f",
                "{path}"
            );
            run("RESET cortex_buffer.max_line_memory");
            undo_route(path);
        }
    }

    #[pg_test]
    fn lossy_utf8_is_recorded_with_the_payload_kept() {
        event_ddl_one_at_a_time();
        for path in PATHS {
            route(path);
            let root = TempRoot::new(&format!("lossy-{path}"));
            let mut body = line(0, r#","tool_name":"ab""#).into_bytes();
            let at = body.windows(4).position(|w| w == b"\"ab\"").unwrap_or(0) + 1;
            body[at] = 0xff;
            body.push(b'\n');
            root.put(FILE, body);
            assert!(index(&root, FILE).starts_with("new|1|0"));
            assert_eq!(
                events_of(
                    &root,
                    FILE,
                    "coalesce(tool_name, '-'), coalesce(payload->>'tool_name', '-'), payload IS NULL, payload_problem"
                ),
                "\u{fffd}b:\u{fffd}b:f:invalid UTF-8 replaced by U+FFFD",
                "{path}"
            );
            undo_route(path);
        }
    }
}
