//! Checkpoints against real clusters: the fencing race between concurrent writers (on both job
//! table bindings, the control plane's bound per database), and CRC compatibility with the
//! control plane's own JavaScript on a generated corpus.

use std::io::Write;
use std::process::{Command, Stdio};

use cortex_buffer_e2e::{psql_concurrently, Cluster, Rng, CONTROL_PLANE_FIXTURE};

fn new_running_job(c: &Cluster, db: &str, table: &str) -> String {
    let agent = if table == "cp.job" {
        c.try_psql(db, "INSERT INTO cp.agent DEFAULT VALUES RETURNING id").unwrap_or_else(|e| panic!("{e}"))
    } else {
        c.try_psql(db, "SELECT gen_random_uuid()").unwrap_or_else(|e| panic!("{e}"))
    };
    c.try_psql(
        db,
        &format!("INSERT INTO {table} (agent_id, status, payload) VALUES ('{agent}', 'RUNNING', '{{}}') RETURNING id"),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn eight_writers_with_the_same_fence_token_exactly_one_wins_on_both_bindings() {
    let c = Cluster::new("race", &["cortex_buffer.worker_enabled = off"]);
    c.start();
    c.create_extension();
    c.psql(CONTROL_PLANE_FIXTURE);
    // The control plane's table is bound per database, as an operator would do it.
    c.psql("CREATE DATABASE cp_bound");
    c.try_psql("cp_bound", "CREATE EXTENSION cortex_buffer").unwrap_or_else(|e| panic!("{e}"));
    c.try_psql("cp_bound", CONTROL_PLANE_FIXTURE).unwrap_or_else(|e| panic!("{e}"));
    c.psql("ALTER DATABASE cp_bound SET cortex_buffer.job_table = 'cp.job'");

    // A small checkpoint is written in one statement; one above 2 kB takes the path that stores
    // its compressed form once. Both must fence identically.
    let padding = "x".repeat(3000);
    for (db, table, pad) in [
        ("postgres", "cortex_buffer.job", ""),
        ("cp_bound", "cp.job", ""),
        ("postgres", "cortex_buffer.job", padding.as_str()),
        ("cp_bound", "cp.job", padding.as_str()),
    ] {
        let job = new_running_job(&c, db, table);
        let first = c
            .try_psql(
                db,
                &format!("SELECT checkpoint_id FROM cortex_buffer.write_checkpoint('{job}', '{{\"step_index\": 0}}')"),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        // A ninth session holds the row lock so that all eight writers are queued on it at once
        // before any of them can proceed.
        let mut scripts =
            vec![format!("BEGIN; SELECT 1 FROM {table} WHERE id = '{job}' FOR UPDATE; SELECT pg_sleep(1.5); COMMIT;")];
        for i in 1..=8 {
            scripts.push(format!(
                "SELECT pg_sleep(0.3); SELECT checkpoint_id FROM cortex_buffer.write_checkpoint('{job}', '{{\"step_index\": 1, \"writer\": {i}, \"pad\": \"{pad}\"}}', '{first}')"
            ));
        }
        let outcomes = psql_concurrently(&c, db, scripts);
        let writers = &outcomes[1..];
        let won: Vec<&String> = writers.iter().filter_map(|o| o.as_ref().ok()).collect();
        let lost: Vec<&String> = writers.iter().filter_map(|o| o.as_ref().err()).collect();
        assert_eq!(won.len(), 1, "{table}: exactly one writer must win: {outcomes:#?}");
        assert_eq!(lost.len(), 7, "{table}: {outcomes:#?}");
        for e in &lost {
            assert!(e.contains("ERROR:  55006:"), "{table}: a losing writer gets the fencing SQLSTATE, not 40001: {e}");
        }
        let history = c
            .try_psql(db, &format!("SELECT count(*) FROM cortex_buffer.checkpoint_history WHERE job_id = '{job}'"))
            .unwrap_or_default();
        assert_eq!(history, "2", "{table}: the first checkpoint plus exactly one winner");
        let current = c
            .try_psql(db, &format!("SELECT checkpoint_id FROM cortex_buffer.read_checkpoint('{job}')"))
            .unwrap_or_default();
        assert!(won[0].ends_with(&current), "{table}: the winner's checkpoint is current");
    }
}

const KEYS: &[&str] = &[
    "a",
    "b",
    "z",
    "A",
    "_",
    "step_index",
    "checkpoint_id",
    "0",
    "1",
    "9",
    "10",
    "01",
    "00",
    "-1",
    "4294967294",
    "4294967295",
    "1e3",
    "1.5",
    " ",
    "",
    "é",
    "日本",
    "😀",
    "\u{ff5e}",
    "\u{e000}",
    "\u{2028}",
    "a\\\"b",
    "\\\\",
    "\\u0041",
    "\\ud83d\\ude00",
    "\\u00e9",
    "tab\\there",
];
const STRING_PIECES: &[&str] = &[
    "x",
    "hello",
    " ",
    "/",
    "\u{2028}",
    "\u{2029}",
    "é",
    "日",
    "😀",
    "\u{ff5e}",
    "\u{7f}",
    "\\\"",
    "\\\\",
    "\\/",
    "\\b",
    "\\f",
    "\\n",
    "\\r",
    "\\t",
    "\\u0001",
    "\\u001f",
    "\\u000b",
    "\\u2028",
    "\\ud83d\\ude00",
    "\\u00e9",
    "\\u007f",
    "\\uFEFF",
];
const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "1",
    "-1",
    "1.0",
    "0.1",
    "0.30000000000000004",
    "123.456",
    "1e21",
    "1E+21",
    "1e20",
    "2.5e-7",
    "1e-7",
    "0.000001",
    "0.0000012345",
    "-3.14159e100",
    "1e400",
    "-1e400",
    "1e-400",
    "12345678901234567890",
    "9007199254740993",
    "1.7976931348623157e308",
    "5e-324",
    "4294967295",
    "-2147483649",
    "100000000000000000000000",
    "0.1000000000000000055511151231257827",
    "1.5e300",
    "6.02214076e23",
];
const SPACE: &[&str] = &["", "", "", " ", "\n", "\t", "  "];

fn gen_string(r: &mut Rng, out: &mut String) {
    out.push('"');
    for _ in 0..r.below(6) {
        out.push_str(r.pick(STRING_PIECES));
    }
    out.push('"');
}

fn gen_number(r: &mut Rng, out: &mut String) {
    if r.below(3) == 0 {
        // A random mantissa and exponent.
        let sign = if r.below(2) == 0 { "-" } else { "" };
        let int = (r.next_u64() % 1_000_000).to_string();
        let frac = (r.next_u64() % 1_000_000_000).to_string();
        let exp = r.below(61) as i64 - 30;
        out.push_str(&format!("{sign}{int}.{frac}e{exp}"));
    } else {
        out.push_str(r.pick(NUMBERS));
    }
}

fn gen_value(r: &mut Rng, depth: usize, out: &mut String) {
    let kind = if depth >= 4 { 2 + r.below(4) } else { r.below(6) };
    match kind {
        0 => {
            out.push('{');
            let n = r.below(6);
            let mut keys: Vec<&str> = Vec::new();
            for i in 0..n {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(r.pick(SPACE));
                // Sometimes repeat a key: the last value must win, as in JSON.parse.
                let key = if !keys.is_empty() && r.below(6) == 0 { keys[r.below(keys.len())] } else { r.pick(KEYS) };
                keys.push(key);
                out.push('"');
                out.push_str(key);
                out.push('"');
                out.push_str(r.pick(SPACE));
                out.push(':');
                gen_value(r, depth + 1, out);
            }
            out.push('}');
        }
        1 => {
            out.push('[');
            for i in 0..r.below(5) {
                if i > 0 {
                    out.push(',');
                }
                gen_value(r, depth + 1, out);
            }
            out.push(']');
        }
        2 => gen_string(r, out),
        3 => gen_number(r, out),
        4 => out.push_str(r.pick(&["true", "false", "null"])),
        _ => gen_number(r, out),
    }
    out.push_str(r.pick(SPACE));
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                s.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

fn json_string_literal(text: &str) -> String {
    let mut s = String::from("\"");
    for ch in text.chars() {
        match ch {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            c if (c as u32) < 0x20 => s.push_str(&format!("\\u{:04x}", c as u32)),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

#[test]
fn checkpoint_crc_matches_the_control_planes_javascript_on_a_generated_corpus() {
    let seed: u64 = std::env::var("CORTEX_ORACLE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_c0de_2026);
    let count: usize = std::env::var("CORTEX_ORACLE_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(4000);
    let mut r = Rng::new(seed);
    let docs: Vec<String> = (0..count)
        .map(|i| {
            let mut s = String::new();
            // Checkpoints are objects; throw in some other top-level values too.
            if i % 10 == 9 {
                gen_value(&mut r, 1, &mut s);
            } else {
                s.push('{');
                s.push_str("\"step_index\":");
                s.push_str(&(i % 97).to_string());
                s.push(',');
                s.push_str("\"state\":");
                gen_value(&mut r, 0, &mut s);
                s.push('}');
            }
            s
        })
        .collect();

    let c = Cluster::new("oracle", &["cortex_buffer.worker_enabled = off"]);
    c.start();
    c.create_extension();
    let input = c.base.join("oracle-input.tsv");
    let tsv: String = docs.iter().enumerate().map(|(i, d)| format!("{i}\t{}\n", base64(d.as_bytes()))).collect();
    std::fs::write(&input, tsv).expect("write corpus");
    let ours = c.psql(&format!(
        "CREATE TEMP TABLE corpus (n int, b64 text);
         COPY corpus FROM '{}';
         SELECT string_agg(md5(cortex_buffer.canonical_json(d)) || ' ' || cortex_buffer.checkpoint_crc(d), E'\\n' ORDER BY n)
           FROM (SELECT n, convert_from(decode(b64, 'base64'), 'UTF8')::jsonb AS d FROM corpus) t",
        input.display()
    ));

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/oracle/canonical.mjs");
    let mut node = Command::new("node")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("node is required for the oracle test: {e}"));
    let lines: String = docs.iter().map(|d| json_string_literal(d) + "\n").collect();
    node.stdin.take().expect("stdin").write_all(lines.as_bytes()).expect("feed node");
    let theirs = node.wait_with_output().expect("node output");
    assert!(theirs.status.success(), "node failed");
    let theirs = String::from_utf8_lossy(&theirs.stdout);

    let mut mismatches = 0;
    for (i, (a, b)) in ours.lines().zip(theirs.lines()).enumerate() {
        if a != b {
            mismatches += 1;
            if mismatches <= 5 {
                let canon = c.psql(&format!(
                    "SELECT cortex_buffer.canonical_json(convert_from(decode('{}', 'base64'), 'UTF8')::jsonb)",
                    base64(docs[i].as_bytes())
                ));
                eprintln!("case {i} differs (seed {seed}):\n  doc:  {}\n  ours: {a} {canon}\n  node: {b}", docs[i]);
            }
        }
    }
    assert_eq!(ours.lines().count(), count);
    assert_eq!(theirs.lines().count(), count);
    assert_eq!(mismatches, 0, "{mismatches} of {count} documents differ from the control plane's JavaScript");
    eprintln!("{count} generated documents (seed {seed}): canonical JSON and CRC identical to Node's");
}
