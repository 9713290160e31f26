//! `storage_report()`: the index's files by job state and age, and what the next cleanup with
//! the default arguments would free (its dry run, attributed file by file).

use std::collections::{HashMap, HashSet};

use pgrx::prelude::*;

use super::cleanup;
use super::jobs;
use super::state::Args;
use crate::pg::guc;
use crate::pg::privilege::as_definer;
use crate::pg::spi_util::spi;
use crate::pg::time::unix_us;
use cortex_buffer_core::error::CbError;
use cortex_buffer_core::retention::{age_bucket, Policy};

/// One indexed file's contribution: `[files, bytes, index rows, and the same three freed by
/// the next cleanup]`.
pub struct Line {
    pub state: String,
    pub age: String,
    pub figures: [i64; 6],
}

struct File {
    path: String,
    job_dir: String,
    job_id: Option<pgrx::Uuid>,
    mtime_us: i64,
    bytes: i64,
    rows: i64,
}

fn files() -> Result<Vec<File>, CbError> {
    as_definer(|| {
        Spi::connect(|c| {
            let rows = c
                .select(
                    "SELECT path, job_dir, job_id, mtime,
                            CASE WHEN gone_at IS NULL THEN size_bytes ELSE 0 END,
                            valid_lines OPERATOR(pg_catalog.+) corrupt_lines OPERATOR(pg_catalog.+) 1
                       FROM cortex_buffer.session_file",
                    None,
                    &[],
                )
                .map_err(spi)?;
            let mut out = Vec::new();
            for r in rows {
                out.push(File {
                    path: r.get(1).map_err(spi)?.unwrap_or_default(),
                    job_dir: r.get(2).map_err(spi)?.unwrap_or_default(),
                    job_id: r.get(3).map_err(spi)?,
                    mtime_us: unix_us(r.get(4).map_err(spi)?).unwrap_or(0),
                    bytes: r.get(5).map_err(spi)?.unwrap_or(0),
                    rows: r.get(6).map_err(spi)?.unwrap_or(0),
                });
            }
            Ok(out)
        })
    })
}

pub fn report() -> Result<Vec<Line>, CbError> {
    let binding = jobs::readable_binding()?;
    let files = files()?;
    let mut ids: Vec<pgrx::Uuid> = files.iter().filter_map(|f| f.job_id).collect();
    ids.sort_unstable_by_key(|u| *u.as_bytes());
    ids.dedup_by_key(|u| *u.as_bytes());
    let known = jobs::lookup(&binding, &ids)?;
    let (_, keep_failed_for_us, _) = guc::retention_us();
    let day = 86_400_000_000i64;
    let policy = Policy {
        now_us: cortex_buffer_core::shared::now_us(),
        post_terminal_us: day,
        max_file_age_us: 7 * day,
        keep_failed_for_us,
    };
    let next = cleanup::run(Args {
        post_terminal_us: day,
        max_file_age_us: 7 * day,
        dry_run: true,
        max_dirs: usize::MAX,
        max_unknown_ratio: 1.0,
    })?;
    let mut dirs: HashSet<String> = HashSet::new();
    let mut paths: HashSet<String> = HashSet::new();
    for a in &next {
        match a.action {
            "delete_dir" => {
                dirs.insert(a.path.rsplit('/').next().unwrap_or_default().to_owned());
            }
            "delete_file" => {
                paths.insert(a.path.clone());
            }
            _ => {}
        }
    }
    let state_of = |f: &File| -> String {
        match f.job_id {
            Some(id) => known.get(id.as_bytes()).map(|j| j.status.clone()).unwrap_or_else(|| "orphan".into()),
            None => "not a job".into(),
        }
    };
    let mut lines: HashMap<(String, &'static str), [i64; 6]> = HashMap::new();
    for f in &files {
        let e = lines.entry((state_of(f), age_bucket(&policy, f.mtime_us))).or_default();
        e[0] += 1;
        e[1] += f.bytes;
        e[2] += f.rows;
        let local = !f.path.starts_with("push:/");
        let deleted = paths.contains(&f.path) || (local && dirs.contains(&f.job_dir));
        if deleted {
            e[3] += 1;
            e[4] += f.bytes;
            e[5] += f.rows;
        }
    }
    Ok(lines.into_iter().map(|((state, age), figures)| Line { state, age: age.to_owned(), figures }).collect())
}
