//! The fuzz corpus: seeds kept in the repository (`crates/core/fuzz-corpus/`) and the scratch
//! corpus a run writes for the replay against PostgreSQL and Node (pgrx-tests/tests/fuzz_replay.rs).
//!
//! Formats: `*.jsonl` holds one input per line, as raw bytes; `*.hex` holds one input per line,
//! hex-encoded (for inputs with newlines, NUL or invalid UTF-8); `#` starts a comment line in a
//! `.hex` file.

use std::path::{Path, PathBuf};

/// The corpus in the repository.
pub fn repository_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz-corpus")
}

/// Where a run writes its generated inputs: `$CORTEX_FUZZ_CORPUS_OUT`, else
/// `target/cortex-fuzz-corpus` at the repository's root (where the replay looks by default),
/// whatever `CARGO_TARGET_DIR` the harness was built in.
pub fn scratch_dir() -> PathBuf {
    std::env::var_os("CORTEX_FUZZ_CORPUS_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/cortex-fuzz-corpus"))
}

pub fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    let s = s.trim();
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// Every input of the files in `dir` (and `dir/found`), in a stable order.
pub fn load_dir(dir: &Path) -> Vec<Vec<u8>> {
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
            Some("hex") => out.extend(
                String::from_utf8_lossy(&bytes)
                    .lines()
                    .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
                    .filter_map(from_hex),
            ),
            _ => {}
        }
    }
    out
}

pub fn load_repository_corpus() -> Vec<Vec<u8>> {
    load_dir(&repository_dir())
}

/// Writes `inputs` to `<dir>/<name>.hex`, replacing it.
pub fn write_hex(dir: &Path, name: &str, header: &str, inputs: &[Vec<u8>]) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("{name}.hex"));
    let mut text = format!("# {header}\n");
    for i in inputs {
        text.push_str(&to_hex(i));
        text.push('\n');
    }
    std::fs::write(&path, text)?;
    Ok(path)
}
