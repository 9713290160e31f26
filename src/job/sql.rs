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

/// The job-table columns an agent's calls write (as the agent-call role: see `authority`).
pub const AGENT_COLUMNS: &str =
    "heartbeat_at, checkpoint, checkpoint_crc, tokens_in, tokens_out, cost_usd, llm_call_count";

/// Whether the agent-call role may do on the bound table what agents' calls do as it, and the
/// grants that would let it.
fn agent_call_grants(client: &pgrx::spi::SpiClient<'_>, b: &Binding) -> Result<(bool, String), CbError> {
    let columns: Vec<&str> = AGENT_COLUMNS.split(", ").collect();
    let row = client
        .select(
            "SELECT pg_catalog.has_schema_privilege('cortex_buffer_agent_call', c.relnamespace, 'USAGE')
                    AND pg_catalog.has_table_privilege('cortex_buffer_agent_call', c.oid, 'SELECT')
                    AND (SELECT pg_catalog.bool_and(pg_catalog.has_column_privilege('cortex_buffer_agent_call', c.oid, col, 'UPDATE'))
                           FROM pg_catalog.unnest($2::pg_catalog.text[]) col),
                    pg_catalog.quote_ident(n.nspname)
               FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
              WHERE c.oid OPERATOR(pg_catalog.=) $1",
            Some(1),
            &[b.oid.into(), columns.into()],
        )
        .map_err(spi)?
        .first();
    let ok = row.get::<bool>(1).map_err(spi)?.unwrap_or(false);
    let schema: String = row.get(2).map_err(spi)?.unwrap_or_default();
    Ok((
        ok,
        format!(
            "GRANT USAGE ON SCHEMA {schema} TO cortex_buffer_agent_call; GRANT SELECT, UPDATE ({AGENT_COLUMNS}) ON {} TO cortex_buffer_agent_call",
            b.table
        ),
    ))
}

fn checks(b: &Binding) -> Result<Vec<CheckRow>, CbError> {
    Spi::connect(|client| {
        let reaper = b.has_reaper_index(client)?;
        let trigger = b.has_checkpoint_trigger(client)?;
        let (granted, grant_sql) = agent_call_grants(client, b)?;
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
            (
                "agent_grants".to_owned(),
                granted,
                if granted {
                    "cortex_buffer_agent_call may read the table and write the columns agents' calls write".to_owned()
                } else {
                    "cortex_buffer_agent_call may not read the table or write the columns agents' calls write: every agent call fails with 42501".to_owned()
                },
                (!granted).then_some(grant_sql),
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
            match b.checkpoint_trigger_is_current(client)? {
                Some(true) => return Ok(format!("{} already has the checkpoint trigger", b.table)),
                // Ours, from an older release: its condition compared the documents first.
                Some(false) => {
                    client.update(&b.checkpoint_trigger_sql(), None, &[]).map_err(spi)?;
                    return Ok(format!(
                        "replaced trigger {} on {} (its condition compares the CRCs first)",
                        binding::CHECKPOINT_TRIGGER,
                        b.table
                    ));
                }
                None => {}
            }
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
    requires = ["job_schema", check_binding, install_checkpoint_trigger, job_token, authorize_job]
);

/// The token of a job's current attempt, for its pod to present (`set_config('cortex_buffer.job_token', …)`):
/// with it, and only for that job and attempt, an agent session may act on the job.
#[pg_extern(volatile, strict)]
fn job_token(job_id: pgrx::Uuid) -> String {
    super::authority::issue(job_id).or_raise()
}

/// True when this session may act on the job (a fleet role, or this session's job token for
/// the job's current attempt); 42501 with a HINT otherwise.
#[pg_extern(volatile, strict)]
fn authorize_job(job_id: pgrx::Uuid) -> bool {
    super::authority::authorize(job_id).or_raise()
}
