//! R4 replay: the fuzz corpus against PostgreSQL's `jsonb_in` and Node's `JSON.parse`.
//!
//! The corpus is the seeds kept in `crates/core/fuzz-corpus/` plus the inputs the last fuzz run
//! generated (`crates/core/tests/fuzz.rs` saves a sample per target to `$CORTEX_FUZZ_CORPUS_OUT`,
//! default `target/cortex-fuzz-corpus` at the repository's root). Every input becomes a line of
//! a Claude Code session file (object rule: any object is an event), and also the member of a
//! wrapping object `{"w":<input>}`, so arrays and scalars reach the jsonb writer too. A line
//! cannot hold a newline: each `\n` byte of an input is written as `\r`, which both parsers treat
//! exactly as `\n` (white space between tokens, a control character inside a string).
//!
//! The indexer (worker code, direct insert path) indexes the files in batches of
//! `CORTEX_FUZZ_REPLAY_BATCH` lines per file; then, per line:
//! - its verdict (event, or the corrupt line's reason) must be Node's `JSON.parse` verdict on the
//!   line as the control plane reads it (oracle/json_parse.mjs);
//! - a stored `payload` must equal PostgreSQL's own `(line)::jsonb` (`=` and as text) and its
//!   `canonical_json` must be Node's canonical text of the parsed line;
//! - a NULL payload must carry its `payload_problem`; where PostgreSQL would have stored the line
//!   the problem must be one of the documented conservative refusals (nesting beyond 1000
//!   levels, a number the parser's digit-count bound rejects): these are counted, not failed.
//!
//! The replay found two differences of the canonical form from the control plane's, both fixed
//! since and kept in the seeds: a key named `__proto__` (the control plane's re-insertion drops
//! it) and a number exactly halfway between two shortest spellings (V8 takes the even digit).
//!
//! `CORTEX_FUZZ_REPLAY_MAX` bounds the inputs replayed (default 20000; full: 0 = all).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use cortex_buffer_e2e::{env_size, report, Cluster};

fn from_hex(s: &str) -> Option<Vec<u8>> {
    let s = s.trim();
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().fold(String::with_capacity(2 * b.len()), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

/// The inputs of a corpus directory (and its `found/`): `*.jsonl` one raw input per line,
/// `*.hex` one hex-encoded input per line (`#` comments; `dialect*.hex` holds whole files, whose
/// lines are the inputs).
fn load_dir(dir: &Path) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = Vec::new();
    for d in [dir.to_path_buf(), dir.join("found")] {
        if let Ok(entries) = std::fs::read_dir(&d) {
            files.extend(entries.filter_map(Result::ok).map(|e| e.path()));
        }
    }
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let Ok(bytes) = std::fs::read(&f) else { continue };
        match f.extension().and_then(|e| e.to_str()) {
            Some("jsonl") => out.extend(bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(<[u8]>::to_vec)),
            Some("hex") => {
                let inputs = String::from_utf8_lossy(&bytes)
                    .lines()
                    .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
                    .filter_map(from_hex)
                    .collect::<Vec<_>>();
                // The dialect target's inputs are whole files: replay their lines.
                if f.file_name().is_some_and(|n| n.to_string_lossy().starts_with("dialect")) {
                    out.extend(inputs.iter().flat_map(|i| i.split(|b| *b == b'\n').map(<[u8]>::to_vec)));
                } else {
                    out.extend(inputs);
                }
            }
            _ => {}
        }
    }
    out
}

/// `String.prototype.trim`.
fn js_trim(s: &str) -> &str {
    s.trim_matches(|c| {
        matches!(
            c,
            '\u{9}'..='\u{d}'
                | ' '
                | '\u{a0}'
                | '\u{1680}'
                | '\u{2000}'..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
        )
    })
}

/// The line the control plane reads (a file line) for each input, and its wrapped form.
fn lines_of(input: &[u8]) -> [Vec<u8>; 2] {
    let line: Vec<u8> = input.iter().map(|b| if *b == b'\n' { b'\r' } else { *b }).collect();
    let wrapped = [b"{\"w\":".as_slice(), &line, b"}"].concat();
    [line, wrapped]
}

const PIN: &str = r#"{"type":"summary","leafUuid":"fuzz-replay","summary":"R4: pins the file to claude-code"}"#;

#[test]
fn fuzz_corpus_replays_against_jsonb_in_and_json_parse() {
    let started = Instant::now();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let seeds = load_dir(&root.join("crates/core/fuzz-corpus"));
    assert!(seeds.len() >= 100, "the seed corpus is missing: {} inputs", seeds.len());
    let scratch = std::env::var_os("CORTEX_FUZZ_CORPUS_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/cortex-fuzz-corpus"));
    let generated = load_dir(&scratch);
    let mut seen = HashSet::new();
    let max = env_size("CORTEX_FUZZ_REPLAY_MAX", 20000) as usize;
    // Seeds first, then the generated inputs spread over the targets (a stride, not a prefix).
    let stride = if max == 0 || generated.len() <= max.saturating_sub(seeds.len()) {
        1
    } else {
        generated.len().div_ceil(max.saturating_sub(seeds.len()).max(1))
    };
    let inputs: Vec<Vec<u8>> = seeds
        .iter()
        .cloned()
        .chain(generated.iter().step_by(stride).cloned())
        // Far below max_line_bytes (1 MB): every line is judged whole (an over-long one would be
        // judged by its reduction, which is not what PostgreSQL is compared on).
        .filter(|i| i.len() <= 200_000 && seen.insert(i.clone()))
        .take(if max == 0 { usize::MAX } else { max })
        .collect();
    let batch = env_size("CORTEX_FUZZ_REPLAY_BATCH", 2000).max(2) as usize;

    let c = Cluster::new("fuzz-replay", &["cortex_buffer.worker_enabled = off"]);
    c.start();
    c.create_extension();
    let lines: Vec<Vec<u8>> = inputs.iter().flat_map(|i| lines_of(i)).collect();
    let mut files: Vec<PathBuf> = Vec::new();
    // Per line: file, line number, the text PostgreSQL is given (JavaScript-trimmed, invalid
    // UTF-8 replaced, as the indexer stores it; NULL when it holds NUL, which text cannot).
    let mut csv = String::new();
    for (n, chunk) in lines.chunks(batch).enumerate() {
        let path = c.sessions.join(format!("fuzz/{n:08x}-0000-4000-8000-{n:012x}.jsonl"));
        let mut body = format!("{PIN}\n").into_bytes();
        for l in chunk {
            body.extend_from_slice(l);
            body.push(b'\n');
        }
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, &body).expect("write session file");
        for (k, l) in chunk.iter().enumerate() {
            let text = String::from_utf8_lossy(l);
            let t = js_trim(&text);
            let (t_hex, nul) = if t.contains('\0') { (String::new(), "t") } else { (hex(t.as_bytes()), "f") };
            let _ = writeln!(csv, "\"{}\",{},{t_hex},{nul}", path.display(), k + 2);
        }
        files.push(path);
    }
    let csv_path = c.base.join("fuzz_in.csv");
    std::fs::write(&csv_path, &csv).expect("write csv");

    c.psql("SELECT count(*) FROM cortex_buffer.index_sessions()");
    let indexed = c.psql(&format!(
        "SELECT count(*) FROM cortex_buffer.session_file WHERE path LIKE '{}/fuzz/%' AND dialect = 'claude-code'",
        c.sessions.display()
    ));
    assert_eq!(indexed, files.len().to_string(), "every file is indexed as claude-code\n{}", c.log_tail());

    // Node's JSON.parse over the same files.
    let out = Command::new("node")
        .arg(root.join("pgrx-tests/oracle/json_parse.mjs"))
        .args(&files)
        .output()
        .unwrap_or_else(|e| panic!("node is required for this test: {e}"));
    assert!(out.status.success(), "node: {}", String::from_utf8_lossy(&out.stderr));
    let node_csv: String = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            format!("\"{}\",{},{},{}\n", f[0], f[1], f[2], f[3])
        })
        .collect();
    let node_path = c.base.join("node.csv");
    std::fs::write(&node_path, node_csv).expect("write node csv");

    c.psql(&format!(
        "CREATE TABLE fuzz_in (path text, line_no bigint, t_hex text, has_nul bool);
         COPY fuzz_in FROM '{}' WITH (FORMAT csv);
         CREATE TABLE fuzz_node (path text, line_no bigint, verdict text, canon_hex text);
         COPY fuzz_node FROM '{}' WITH (FORMAT csv);
         CREATE FUNCTION try_jsonb(t text) RETURNS jsonb LANGUAGE plpgsql AS $$
           BEGIN RETURN t::jsonb; EXCEPTION WHEN others THEN RETURN NULL; END $$;
         CREATE TABLE fuzz_cmp AS
           SELECT i.path, i.line_no, i.has_nul,
                  CASE WHEN NOT i.has_nul THEN convert_from(decode(i.t_hex, 'hex'), 'UTF8') END AS t,
                  n.verdict AS node_verdict,
                  CASE WHEN n.canon_hex NOT LIKE '-%' AND n.canon_hex NOT LIKE '!%'
                       THEN convert_from(decode(n.canon_hex, 'hex'), 'UTF8') ELSE n.canon_hex END AS node_canon,
                  e.line_no IS NOT NULL AS is_event, e.payload, e.payload_problem, k.reason
             FROM fuzz_in i
             JOIN fuzz_node n USING (path, line_no)
             JOIN cortex_buffer.session_file f ON f.path = i.path
             LEFT JOIN cortex_buffer.event e ON e.file_id = f.file_id AND e.line_no = i.line_no
             LEFT JOIN cortex_buffer.corrupt_line k ON k.file_id = f.file_id AND k.line_no = i.line_no;
         ALTER TABLE fuzz_cmp ADD pg jsonb, ADD ours text;
         UPDATE fuzz_cmp SET pg = try_jsonb(t) WHERE t <> '';
         UPDATE fuzz_cmp SET ours = CASE
             WHEN is_event THEN 'object'
             WHEN reason LIKE 'not valid JSON%' THEN 'refused'
             WHEN reason LIKE 'a JSON array%' THEN 'array'
             WHEN reason LIKE 'a JSON string%' THEN 'string'
             WHEN reason LIKE 'a JSON number%' THEN 'number'
             WHEN reason LIKE 'a JSON boolean%' THEN 'boolean'
             WHEN reason LIKE 'JSON null%' THEN 'null'
             WHEN reason IS NULL THEN 'blank'
             ELSE 'other: ' || reason END;",
        csv_path.display(),
        node_path.display(),
    ));
    let compared = c.psql("SELECT count(*) FROM fuzz_cmp");
    assert_eq!(compared, lines.len().to_string(), "every line has Node's verdict and ours");

    // JSON.parse: the verdict, and the canonical text of every stored payload.
    let parse_disagreements = c.psql(
        "SELECT string_agg(format('%s line %s: ours %s, JSON.parse %s%s: %s', path, line_no, ours, node_verdict,
                  CASE WHEN ours = node_verdict THEN ', canonical ' || cortex_buffer.canonical_json(payload) || ' vs ' || node_canon END,
                  left(coalesce(t, '<NUL>'), 200)), E'\\n')
           FROM fuzz_cmp
          WHERE ours IS DISTINCT FROM node_verdict
             OR (payload IS NOT NULL AND cortex_buffer.canonical_json(payload) IS DISTINCT FROM node_canon)",
    );
    // jsonb_in: a stored payload is PostgreSQL's own; a withheld one says why, and PostgreSQL
    // would have stored it only for the documented conservative refusals.
    let jsonb_disagreements = c.psql(
        "SELECT string_agg(format('%s line %s: %s (payload_problem %s, pg %s): %s', path, line_no, what, payload_problem,
                  coalesce(pg::text, '<refused>'), left(coalesce(t, '<NUL>'), 200)), E'\\n')
           FROM (SELECT *, CASE
                   WHEN payload IS NOT NULL AND pg IS NULL THEN 'stored a payload jsonb_in refuses'
                   WHEN payload IS NOT NULL AND (payload <> pg OR payload::text <> pg::text) THEN 'payload differs from jsonb_in'
                   WHEN is_event AND payload IS NULL AND payload_problem IS NULL THEN 'NULL payload without a reason'
                   WHEN is_event AND payload IS NULL AND pg IS NOT NULL
                        AND payload_problem NOT LIKE 'nested deeper%' AND payload_problem NOT LIKE 'a number beyond%'
                     THEN 'withheld a payload jsonb_in stores'
                   WHEN NOT is_event AND ours = 'refused' AND pg IS NOT NULL THEN 'jsonb_in accepts a line JSON.parse refuses'
                 END AS what FROM fuzz_cmp) d
          WHERE what IS NOT NULL",
    );
    let figures = c.psql(
        "SELECT concat_ws(' ', count(*), count(*) FILTER (WHERE payload IS NOT NULL),
                count(*) FILTER (WHERE is_event AND payload IS NULL),
                count(*) FILTER (WHERE is_event AND payload IS NULL AND pg IS NOT NULL),
                count(*) FILTER (WHERE ours = 'refused'),
                count(*) FILTER (WHERE payload_problem LIKE '%invalid UTF-8%'),
                count(*) FILTER (WHERE payload IS NULL AND pg IS NOT NULL AND payload_problem LIKE 'nested deeper%'),
                count(*) FILTER (WHERE payload IS NULL AND pg IS NOT NULL AND payload_problem LIKE 'a number beyond%'))
           FROM fuzz_cmp",
    );
    let f: Vec<u64> = figures.split(' ').map(|x| x.parse().unwrap_or(0)).collect();
    let (total, stored, withheld, conservative, refused, lossy) = (f[0], f[1], f[2], f[3], f[4], f[5]);
    let (deep, numbers) = (f[6], f[7]);
    let count = |s: &str| if s.is_empty() { 0 } else { s.lines().count() as u64 };
    let (pd, jd) = (count(&parse_disagreements), count(&jsonb_disagreements));
    eprintln!(
        "replayed {} inputs ({} seeds, {} generated available) as {total} lines in {} files: {stored} payloads stored, \
         {withheld} withheld ({conservative} of them jsonb_in would store: {deep} deeper than 1000, {numbers} numbers), \
         {refused} refused, {lossy} with invalid UTF-8",
        inputs.len(),
        seeds.len(),
        generated.len(),
        files.len()
    );
    assert!(
        pd == 0 && jd == 0,
        "JSON.parse disagreements ({pd}):\n{parse_disagreements}\n\njsonb_in disagreements ({jd}):\n{jsonb_disagreements}"
    );
    assert!(stored > 0 && refused > 0 && withheld > 0, "the corpus exercises every outcome: {figures}");
    report(
        "R4",
        "replay JSON.parse (node)",
        &format!(
            "{total} lines from {} inputs, {} agreements (verdict and canonical text), {pd} disagreements",
            inputs.len(),
            total - pd
        ),
    );
    report(
        "R4",
        "replay jsonb_in",
        &format!(
            "{total} lines, {stored} payloads equal to jsonb_in, {} agreements, {jd} disagreements; {conservative} withheld conservatively; {:.0} s",
            total - jd,
            started.elapsed().as_secs_f64()
        ),
    );
}
