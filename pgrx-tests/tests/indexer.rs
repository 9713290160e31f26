//! The background worker indexes real session files: every real Claude Code transcript in
//! fixtures/claude-code (judged against the control plane's own scan with the object rule),
//! and the sample files of all four dialects with their normalised columns.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use cortex_buffer_e2e::{wait_for, Cluster};

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.bytes()
            .enumerate()
            .all(|(i, c)| if [8, 13, 18, 23].contains(&i) { c == b'-' } else { c.is_ascii_hexdigit() })
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).expect("read fixtures").filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else if p.extension().is_some_and(|x| x == "jsonl") {
            out.push(p);
        }
    }
}

/// Where a fixture goes under the sessions root so the discovery rule picks it up:
/// `<project>/<file>`, or `<project>/<session-uuid>/subagents/<agent-file>`.
fn destination(rel: &Path) -> PathBuf {
    let parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    let n = parts.len();
    if n >= 4 && parts[n - 2] == "subagents" && is_uuid(&parts[n - 3]) {
        let project = parts[..n - 3].join("_");
        return [project.as_str(), &parts[n - 3], "subagents", &parts[n - 1]].iter().collect();
    }
    let project = parts[..n - 1].join("_");
    [project.as_str(), &parts[n - 1]].iter().collect()
}

/// The control plane's scan of each file (events, corrupted, truncated) with `--objects`.
fn oracle(paths: &[PathBuf]) -> Vec<String> {
    let mut node = Command::new("node")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/oracle/scan_buffer.mjs"))
        .arg("--objects")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("node is required for this test: {e}"));
    let list: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    node.stdin.take().expect("stdin").write_all(list.join("\n").as_bytes()).expect("feed node");
    let out = node.wait_with_output().expect("node");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

fn settled(c: &Cluster, files: usize) -> bool {
    c.try_psql(
        "postgres",
        "SELECT files_tracked || ' ' || bytes_pending || ' ' || files_pending_tail || ' ' || files_failing FROM cortex_buffer.indexer_status",
    )
    .is_ok_and(|s| s == format!("{files} 0 0 0"))
}

#[test]
fn every_real_claude_code_transcript_indexes_as_the_control_planes_scan_counts_it() {
    let c = Cluster::new("real-claude", &["cortex_buffer.poll_interval = 100", "cortex_buffer.settle_period = 300"]);
    c.start();
    c.create_extension();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/claude-code");
    let mut sources = Vec::new();
    files_under(&fixtures, &mut sources);
    assert!(sources.len() >= 20, "fixtures missing: {}", sources.len());
    let mut placed = Vec::new();
    for src in &sources {
        let dest = c.sessions.join(destination(src.strip_prefix(&fixtures).expect("under fixtures")));
        std::fs::create_dir_all(dest.parent().expect("parent")).expect("mkdir");
        std::fs::copy(src, &dest).expect("copy");
        placed.push(dest);
    }
    c.psql("SELECT cortex_buffer.index_now()");
    assert!(
        wait_for(Duration::from_secs(60), || settled(&c, placed.len())).is_some(),
        "not indexed in time: {}\n{}",
        c.psql("SELECT row_to_json(s) FROM cortex_buffer.indexer_status s"),
        c.log_tail()
    );

    let mut differ = Vec::new();
    for line in oracle(&placed) {
        let f: Vec<&str> = line.split('\t').collect();
        let (path, want) = (f[0], format!("{} {} {}", f[1], f[2], f[3]));
        let ours = c.psql(&format!(
            "SELECT valid_lines || ' ' || (corrupt_lines - last_failed_parse::int) || ' ' || last_failed_parse || ' ' || coalesce(dialect, '-')
               FROM cortex_buffer.session_file WHERE path = '{path}'"
        ));
        let events = c.psql(&format!(
            "SELECT count(*) FROM cortex_buffer.event JOIN cortex_buffer.session_file USING (file_id) WHERE path = '{path}'"
        ));
        let want_events = f[1];
        let ours_counts = ours.rsplit_once(' ').map(|(a, _)| a.to_owned()).unwrap_or_default();
        if ours_counts != want || events != want_events || !ours.ends_with("claude-code") {
            differ.push(format!("{path}: scan {want}, ours {ours} ({events} event rows)"));
        }
    }
    assert!(differ.is_empty(), "files differ:\n{}", differ.join("\n"));

    // The `}{` splice of two records on line 128 is exactly one corrupt line.
    let spliced = c.psql(
        "SELECT string_agg(line_no || ':' || left(reason, 14), ',') FROM cortex_buffer.corrupt_line
           JOIN cortex_buffer.session_file USING (file_id) WHERE path LIKE '%entireio-cli_37_995ebed6e4_2/full.jsonl'",
    );
    assert_eq!(spliced, "128:not valid JSON");
    // Files without a final newline had their last line indexed after the settle period.
    let unterminated = c.psql(
        "SELECT count(*) FILTER (WHERE tail_unterminated) || ' ' || count(*) FILTER (WHERE tail_unterminated AND NOT last_failed_parse)
           FROM cortex_buffer.session_file WHERE path LIKE '%entireio-cli%'",
    );
    let (n, parsed) = unterminated.split_once(' ').unwrap_or_default();
    assert!(
        n.parse::<i32>().unwrap_or(0) >= 3 && n == parsed,
        "entireio snapshots end without a newline: {unterminated}"
    );
    // Tool calls and usage are in the columns.
    let columns = c.psql(
        "SELECT (count(*) FILTER (WHERE invocation_id LIKE 'toolu_%') > 100)::text || ' ' ||
                (count(*) FILTER (WHERE input_tokens IS NOT NULL AND request_id IS NOT NULL) > 100)::text || ' ' ||
                (count(*) FILTER (WHERE ts IS NULL AND type IN ('user', 'assistant')))::text
           FROM cortex_buffer.event",
    );
    assert_eq!(columns, "true true 0");
    // A subagent transcript sits in its session's subagents/ directory.
    assert_eq!(
        c.psql("SELECT count(*) > 0 FROM cortex_buffer.session_file WHERE path LIKE '%/subagents/agent-%' AND valid_lines > 0"),
        "t"
    );
}

#[test]
fn the_samples_of_all_four_dialects_index_with_their_columns() {
    let c = Cluster::new("dialects", &["cortex_buffer.poll_interval = 100", "cortex_buffer.settle_period = 200"]);
    c.start();
    c.create_extension();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/sessions");
    let status =
        Command::new("cp").arg("-r").arg(format!("{}/.", examples.display())).arg(&c.sessions).status().expect("cp");
    assert!(status.success());
    c.psql("SELECT cortex_buffer.index_now()");
    let files = c.psql("SELECT count(*) FROM cortex_buffer.index_sessions() WHERE action <> 'skipped'");
    let files: usize = files.parse().unwrap_or(0);
    assert!(wait_for(Duration::from_secs(30), || settled(&c, files)).is_some(), "{}", c.log_tail());
    let by_dialect = c.psql(
        "SELECT string_agg(d, ',' ORDER BY d) FROM (
             SELECT f.dialect || '=' || count(e.*) || '/' || count(e.invocation_id) || '/' || count(e.ts) AS d
               FROM cortex_buffer.session_file f LEFT JOIN cortex_buffer.event e USING (file_id) GROUP BY f.dialect) x",
    );
    for d in ["claude-code=", "cortex-plane=", "cortex-spike=", "wink-log="] {
        assert!(by_dialect.contains(d), "{d} in {by_dialect}");
    }
    // Every sample event has its timestamp (a Claude Code file-history snapshot has none at the
    // top level); the cortex ones their job.
    assert_eq!(
        c.psql("SELECT string_agg(type, ',') FROM cortex_buffer.event WHERE ts IS NULL"),
        "file-history-snapshot"
    );
    assert_eq!(
        c.psql(
            "SELECT count(*) FROM cortex_buffer.event e JOIN cortex_buffer.session_file f USING (file_id)
              WHERE f.dialect LIKE 'cortex-%' AND e.job_id IS NULL"
        ),
        "0"
    );
    // The recovery question, in one query: which tool calls finished after the job's last
    // checkpoint (and which started without finishing: the crash cut its result line)?
    let recovery = c.psql(
        "WITH job AS (SELECT * FROM cortex_buffer.job_events('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f')),
              last_cp AS (SELECT max(ts) AS at FROM job WHERE type = 'CHECKPOINT_WRITTEN')
         SELECT coalesce(string_agg(invocation_id, ',') FILTER (WHERE type = 'TOOL_RESULT'), '-') || ' / ' ||
                coalesce(string_agg(invocation_id, ',') FILTER (WHERE type = 'TOOL_START' AND NOT EXISTS (
                    SELECT 1 FROM job r WHERE r.type = 'TOOL_RESULT' AND r.invocation_id = j.invocation_id)), '-')
           FROM job j, last_cp WHERE j.ts > last_cp.at",
    );
    assert_eq!(recovery, "0193a8b2-8c00-7000-8000-0000000000f2 / 0193a8b2-8d00-7000-8000-0000000000f3");
}
