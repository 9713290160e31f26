//! Parity with the control plane's `scanBuffer`: generated cortex-spike files full of the line
//! kinds docs/design.md §Line and file rules names (truncated tails, interior garbage, non-object
//! JSON, missing keys, blank lines, BOM and NBSP, invalid UTF-8, NUL bytes, `1e400`, lone
//! surrogates, deep nesting, CRLF...) are judged by cortex_buffer — both `file_integrity()` and
//! what indexing stores — and by the control plane's own JavaScript (oracle/scan_buffer.mjs);
//! the counts must agree file by file.

use std::io::Write;
use std::process::{Command, Stdio};

use cortex_buffer_e2e::{Cluster, Rng};

const JOB: &str = "0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f";

fn event(seq: u64) -> Vec<u8> {
    format!(r#"{{"type":"TOOL_RESULT","timestamp":"2026-02-23T14:30:22.000Z","job_id":"{JOB}","seq":{seq},"ok":true}}"#)
        .into_bytes()
}

/// One line (without its newline) of a random kind.
fn line(rng: &mut Rng, seq: u64) -> Vec<u8> {
    let mut v = match rng.below(26) {
        0..=7 => event(seq),
        8 => b"".to_vec(),
        9 => b"   \t \r".to_vec(),
        10 => "\u{feff}\u{a0}".as_bytes().to_vec(),
        11 => [b"\xef\xbb\xbf".as_slice(), &event(seq), "\u{a0}\u{3000}".as_bytes()].concat(),
        12 => b"{\"type\":\"TOOL_START\",\"timestamp\":\"t\",\"inv".to_vec(),
        13 => [b"[1,2]".as_slice(), b"42", b"\"s\"", b"null", b"true"][rng.below(5)].to_vec(),
        14 => b"{\"type\":\"X\"}".to_vec(),
        15 => b"{\"timestamp\":\"t\",\"seq\":1}".to_vec(),
        16 => b"{\"type\":\"X\",\"timestamp\":\"\xff\xfe\"}".to_vec(),
        17 => b"{\"type\":\"X\",\"timestamp\":1}\xc3".to_vec(),
        18 => b"{\"type\":\"X\",\"timestamp\":\"a\x00b\"}".to_vec(),
        19 => b"{\"type\":\"X\",\"timestamp\":1e400,\"n\":-1E-400}".to_vec(),
        20 => br#"{"type":"X","timestamp":"\ud800 \udc00 \u0000"}"#.to_vec(),
        21 => {
            let d = 1 + rng.below(3000);
            format!("{{\"type\":\"D\",\"timestamp\":\"t\",\"x\":{}0{}}}", "[".repeat(d), "]".repeat(d)).into_bytes()
        }
        22 => [event(seq).as_slice(), b"\r"].concat(),
        23 => br#"{"\u0074ype":"X","times\u0074amp":"t","type":1,"type":2}"#.to_vec(),
        24 => "{\"type\":\"X\",\"timestamp\":\"t\",\"s\":\"\u{2028}\u{85}\"}".as_bytes().to_vec(),
        _ => {
            let mut e = event(seq);
            let cut = 1 + rng.below(e.len() - 1);
            e.truncate(cut);
            e
        }
    };
    if rng.below(40) == 0 {
        // Interleaved writes: two lines spliced without a newline.
        v.extend_from_slice(&event(seq + 1));
    }
    v
}

fn file(rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    let n = rng.below(30);
    for seq in 0..n as u64 {
        out.extend(line(rng, seq));
        out.push(b'\n');
    }
    match rng.below(6) {
        // A crash mid-append, sometimes followed by blank lines.
        0 => {
            let e = event(99);
            out.extend_from_slice(&e[..1 + rng.below(e.len() - 1)]);
        }
        1 => {
            let e = event(99);
            out.extend_from_slice(&e[..1 + rng.below(e.len() - 1)]);
            out.extend_from_slice(b"\n\n  \n");
        }
        // An unterminated last line that parses, or blank.
        2 => out.extend(event(99)),
        3 => out.extend_from_slice(b"  "),
        _ => {}
    }
    out
}

#[test]
fn counts_match_the_control_planes_scan_buffer_on_generated_files() {
    let c = Cluster::new("parity", &["cortex_buffer.worker_enabled = off", "cortex_buffer.settle_period = 0"]);
    c.start();
    c.create_extension();
    let seed: u64 = std::env::var("CORTEX_PARITY_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_cafe);
    let cases: usize = std::env::var("CORTEX_PARITY_FILES").ok().and_then(|s| s.parse().ok()).unwrap_or(400);
    let mut rng = Rng::new(seed);
    let mut paths = Vec::new();
    for i in 0..cases {
        let rel = format!("{JOB}/session_20260223T{:06}Z_pod-{i}.jsonl", 100_000 + i);
        let body = file(&mut rng);
        let path = c.sessions.join(&rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, body).expect("write");
        paths.push(path.display().to_string());
    }
    // One file with 100 000 levels of nesting: JSON.parse takes it, and so must we.
    let deep = format!(
        "{}\n{{\"type\":\"D\",\"timestamp\":\"t\",\"x\":{}{}}}\n",
        String::from_utf8_lossy(&event(0)),
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let deep_path = c.sessions.join(format!("{JOB}/session_20260223T999999Z_pod-deep.jsonl"));
    std::fs::write(&deep_path, deep).expect("write deep");
    paths.push(deep_path.display().to_string());

    let mut node = Command::new("node")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/oracle/scan_buffer.mjs"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("node is required for the oracle test: {e}"));
    node.stdin.take().expect("stdin").write_all(paths.join("\n").as_bytes()).expect("feed node");
    let out = node.wait_with_output().expect("node output");
    assert!(out.status.success(), "node failed");
    let theirs: std::collections::HashMap<String, String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f.len() == 4).then(|| (f[0].to_owned(), format!("{} {} {}", f[1], f[2], f[3])))
        })
        .collect();

    c.psql("SELECT count(*) FROM cortex_buffer.index_sessions()");
    let stored = c.psql(
        "SELECT string_agg(path || '|' || valid_lines || ' ' || (corrupt_lines - last_failed_parse::int) || ' ' || last_failed_parse, E'\\n')
           FROM cortex_buffer.session_file",
    );
    let stored: std::collections::HashMap<&str, &str> = stored.lines().filter_map(|l| l.split_once('|')).collect();
    let mut differ = Vec::new();
    for p in &paths {
        let ours_scan = c.psql(&format!(
            "SELECT valid_lines || ' ' || corrupt_lines || ' ' || tail_truncated FROM cortex_buffer.file_integrity('{p}')"
        ));
        let want = theirs.get(p).cloned().unwrap_or_default();
        let kept = stored.get(p.as_str()).map(|s| (*s).to_owned()).unwrap_or_default();
        if ours_scan != want || kept != want {
            differ.push(format!("{p}: scanBuffer {want}, file_integrity {ours_scan}, indexed {kept}"));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {} files differ (seed {seed}):\n{}",
        differ.len(),
        paths.len(),
        differ.join("\n")
    );
    // The generator produced every kind of verdict.
    let totals = c.psql(
        "SELECT sum(valid_lines) > 0 AND sum(corrupt_lines) > 0 AND bool_or(last_failed_parse) AND sum(blank_lines) > 0
           FROM cortex_buffer.session_file",
    );
    assert_eq!(totals, "t");
}
