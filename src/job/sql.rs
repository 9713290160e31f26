//! SQL functions of the binding: what is checked about the bound job table, and putting the
//! checkpoint trigger on it.

use pgrx::prelude::*;

use super::binding::{self, Binding};
use crate::pg::planner::pinned;
use crate::pg::spi_util::spi;
use crate::pg::OrRaise;
use cortex_buffer_core::error::CbError;

/// One line of `check_binding()`.
type CheckRow = (String, bool, String, Option<String>);

fn checks(b: &Binding) -> Result<Vec<CheckRow>, CbError> {
    Spi::connect(|client| {
        let reaper = b.has_reaper_index(client)?;
        let trigger = b.has_checkpoint_trigger(client)?;
        Ok(vec![
            ("job_table".to_owned(), true, format!("{} meets the column contract", b.table), None),
            (
                "reaper_index".to_owned(),
                reaper,
                if reaper {
                    "an index on heartbeat_at for RUNNING jobs serves reap_zombies()".to_owned()
                } else {
                    "no index on heartbeat_at for RUNNING jobs: reap_zombies() reads the whole table".to_owned()
                },
                (!reaper).then(|| b.reaper_index_sql()),
            ),
            (
                "checkpoint_trigger".to_owned(),
                trigger,
                if trigger {
                    "checkpoints written by a plain UPDATE get their high-water mark recorded".to_owned()
                } else {
                    "checkpoints the control plane writes itself (a plain UPDATE) get no high-water mark: recovery falls back on clocks for them".to_owned()
                },
                (!trigger).then(|| "SELECT cortex_buffer.install_checkpoint_trigger()".to_owned()),
            ),
        ])
    })
}

/// What cortex_buffer checks about the job table it is bound to (`cortex_buffer.job_table`):
/// the column contract, the reaper's index, the checkpoint trigger; and the statement that
/// fixes each one that is missing.
#[pg_extern(stable)]
fn check_binding(
) -> TableIterator<'static, (name!(item, String), name!(ok, bool), name!(detail, String), name!(fix, Option<String>))> {
    let rows = pinned(|| match binding::current() {
        Ok(b) => checks(&b).or_raise(),
        Err(e) => vec![("job_table".to_owned(), false, e.message.clone(), e.hint.clone())],
    });
    TableIterator::new(rows)
}

/// Puts the checkpoint trigger on the bound job table (once; a second call changes nothing), so
/// that checkpoints the control plane writes with a plain `UPDATE` get their high-water mark.
/// Runs with the caller's rights: it takes the table's owner (or a superuser).
#[pg_extern(volatile)]
fn install_checkpoint_trigger() -> String {
    let b = binding::current().or_raise();
    pinned(|| {
        Spi::connect_mut(|client| {
            if b.has_checkpoint_trigger(client)? {
                return Ok(format!("{} already has the checkpoint trigger", b.table));
            }
            client.update(&b.checkpoint_trigger_sql(), None, &[]).map_err(spi)?;
            Ok(format!("created trigger {} on {}", binding::CHECKPOINT_TRIGGER, b.table))
        })
    })
    .or_raise()
}

pgrx::extension_sql_file!(
    "api.sql",
    name = "job_api",
    requires = ["job_schema", check_binding, install_checkpoint_trigger]
);
