//! Which table the job functions read and write: `cortex_buffer.job_table` (default
//! `cortex_buffer.job`). The column contract is checked once per backend and cached, keyed by
//! the setting's value and the table's OID; so are the prepared statements built for it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::rc::Rc;

use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::spi::{OwnedPreparedStatement, SpiClient};
use pgrx::PgOid;

use crate::pg::guc;
use crate::pg::spi_util::{spi, FirstValue};
use cortex_buffer_core::error::{CbError, SqlState};
use cortex_buffer_core::job::contract::{validate, Column, Shape};

/// The name of the trigger that marks checkpoints written by a plain `UPDATE`.
pub const CHECKPOINT_TRIGGER: &str = "cortex_buffer_checkpoint_marked";

/// When the checkpoint trigger fires: a checkpoint is there, and it changed. The CRCs are
/// compared first (cheap, and different for nearly every write); the documents only when the
/// CRC did not change (the control plane updated the checkpoint and not its CRC, or stored the
/// same document again). `cortex_buffer.job`'s trigger has the same condition (api.sql).
pub const CHECKPOINT_TRIGGER_WHEN: &str = "NEW.checkpoint IS NOT NULL AND (OLD.checkpoint IS NULL \
     OR (OLD.checkpoint_crc IS NULL) OPERATOR(pg_catalog.<>) (NEW.checkpoint_crc IS NULL) \
     OR OLD.checkpoint_crc OPERATOR(pg_catalog.<>) NEW.checkpoint_crc \
     OR NOT NEW.checkpoint OPERATOR(pg_catalog.=) OLD.checkpoint)";

/// Whether a prepared statement only reads, or writes or locks rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// A validated job table.
pub struct Binding {
    setting: String,
    /// Schema-qualified, quoted name for SQL text.
    pub table: String,
    pub shape: Shape,
    /// The table's OID, for catalogue checks.
    pub oid: pg_sys::Oid,
    statements: RefCell<HashMap<&'static str, Rc<OwnedPreparedStatement>>>,
    said: RefCell<std::collections::HashSet<&'static str>>,
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<Binding>>> = const { RefCell::new(None) };
}

impl Binding {
    /// The statement that creates the reaper's index on the bound table.
    pub fn reaper_index_sql(&self) -> String {
        format!(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON {} (heartbeat_at) WHERE status OPERATOR(pg_catalog.=) 'RUNNING'",
            pgrx::spi::quote_identifier(format!("{}_running_heartbeat_idx", self.relname())),
            self.table
        )
    }

    /// The table's own name, unquoted.
    fn relname(&self) -> &str {
        self.table.rsplit('.').next().unwrap_or("job").trim_matches('"')
    }

    /// Whether the bound table has an index on `heartbeat_at` limited to RUNNING jobs.
    pub fn has_reaper_index(&self, client: &SpiClient<'_>) -> Result<bool, CbError> {
        let found: Option<bool> = client
            .select(
                "SELECT EXISTS (
                     SELECT 1 FROM pg_catalog.pg_index i
                       JOIN pg_catalog.pg_attribute a
                         ON a.attrelid OPERATOR(pg_catalog.=) i.indrelid AND a.attnum OPERATOR(pg_catalog.=) i.indkey[0]
                      WHERE i.indrelid OPERATOR(pg_catalog.=) $1 AND i.indisvalid
                        AND a.attname OPERATOR(pg_catalog.=) 'heartbeat_at'
                        AND pg_catalog.pg_get_expr(i.indpred, i.indrelid) OPERATOR(pg_catalog.~~) '%status = ''RUNNING''%')",
                None,
                &[self.oid.into()],
            )
            .map_err(spi)?
            .pipe_first()?;
        Ok(found.unwrap_or(false))
    }

    /// The statement that puts the checkpoint trigger on the bound table (or replaces an older
    /// form of it): every checkpoint the control plane writes with a plain `UPDATE` gets its
    /// high-water mark recorded. Its condition compares the CRCs first: a new checkpoint has a
    /// new CRC, and comparing two documents detoasts (decompresses) both, which for a large
    /// checkpoint cost more than the rest of `write_checkpoint`'s own bookkeeping.
    pub fn checkpoint_trigger_sql(&self) -> String {
        format!(
            "CREATE OR REPLACE TRIGGER {CHECKPOINT_TRIGGER} AFTER UPDATE OF checkpoint ON {} FOR EACH ROW \
             WHEN ({CHECKPOINT_TRIGGER_WHEN}) EXECUTE FUNCTION cortex_buffer.checkpoint_marked()",
            self.table
        )
    }

    /// Whether the bound table's own checkpoint trigger (by its name) has the current condition
    /// (`None`: it has no trigger of that name).
    pub fn checkpoint_trigger_is_current(&self, client: &SpiClient<'_>) -> Result<Option<bool>, CbError> {
        client
            .select(
                "SELECT pg_catalog.pg_get_triggerdef(t.oid) OPERATOR(pg_catalog.~~) '%checkpoint_crc%'
                   FROM pg_catalog.pg_trigger t
                  WHERE t.tgrelid OPERATOR(pg_catalog.=) $1 AND t.tgname OPERATOR(pg_catalog.=) $2",
                Some(1),
                &[self.oid.into(), CHECKPOINT_TRIGGER.into()],
            )
            .map_err(spi)?
            .pipe_first()
    }

    /// Whether the bound table has the checkpoint trigger, enabled.
    pub fn has_checkpoint_trigger(&self, client: &SpiClient<'_>) -> Result<bool, CbError> {
        let found: Option<bool> = client
            .select(
                "SELECT EXISTS (
                     SELECT 1 FROM pg_catalog.pg_trigger t
                      WHERE t.tgrelid OPERATOR(pg_catalog.=) $1 AND NOT t.tgisinternal
                        AND t.tgenabled OPERATOR(pg_catalog.<>) 'D'
                        AND t.tgfoid OPERATOR(pg_catalog.=) 'cortex_buffer.checkpoint_marked()'::pg_catalog.regprocedure)",
                None,
                &[self.oid.into()],
            )
            .map_err(spi)?
            .pipe_first()?;
        Ok(found.unwrap_or(false))
    }

    /// True the first time `key` is asked about for this binding in this session: for notices
    /// that should be given once, not on every call.
    pub fn first_time(&self, key: &'static str) -> bool {
        self.said.borrow_mut().insert(key)
    }

    /// The error for a job id not in this table.
    pub fn no_such_job(&self, job: pgrx::Uuid) -> CbError {
        CbError::new(SqlState::NoDataFound, format!("job {job} does not exist in {}", self.table))
            .with_hint("Check the job id, and that cortex_buffer.job_table names the table the control plane uses.")
    }

    /// The prepared statement `key`, built from `sql(&self)` with `args` on first use and kept
    /// for the life of the binding. `Access::Write` statements (writes, row locks) run with
    /// SPI's read-only mode off even when nothing else in the transaction wrote yet.
    pub fn statement(
        &self,
        client: &SpiClient<'_>,
        key: &'static str,
        access: Access,
        args: &[PgOid],
        sql: impl FnOnce(&Binding) -> String,
    ) -> Result<Rc<OwnedPreparedStatement>, CbError> {
        if let Some(s) = self.statements.borrow().get(key) {
            return Ok(Rc::clone(s));
        }
        let text = sql(self);
        let prepared = match access {
            Access::Read => client.prepare(text.as_str(), args),
            Access::Write => client.prepare_mut(text.as_str(), args),
        };
        let prepared = prepared.map_err(|e| CbError::internal(format!("preparing {key}: {e}")))?.keep();
        let prepared = Rc::new(prepared);
        self.statements.borrow_mut().insert(key, Rc::clone(&prepared));
        Ok(prepared)
    }
}

/// The binding for the current value of `cortex_buffer.job_table`, validated if new.
pub fn current() -> Result<Rc<Binding>, CbError> {
    let setting = guc::job_table();
    let oid = resolve(&setting)?;
    if let Some(b) = CURRENT.with(|c| c.borrow().clone()) {
        if b.setting == setting && b.oid == oid {
            return Ok(b);
        }
    }
    let binding = Rc::new(crate::pg::planner::pinned(|| build(setting, oid))?);
    CURRENT.with(|c| *c.borrow_mut() = Some(Rc::clone(&binding)));
    Ok(binding)
}

fn resolve(setting: &str) -> Result<pg_sys::Oid, CbError> {
    let missing = || {
        CbError::new(SqlState::UndefinedTable, format!("job table \"{setting}\" (cortex_buffer.job_table) does not exist"))
            .with_hint("Create the table, or set cortex_buffer.job_table to the control plane's job table (e.g. ALTER DATABASE ... SET cortex_buffer.job_table = 'public.job').")
    };
    let unqualified = || {
        CbError::new(
            SqlState::InvalidParameterValue,
            format!("job table \"{setting}\" (cortex_buffer.job_table) must be schema-qualified, in a permanent schema"),
        )
        .with_hint("Name the schema: ALTER DATABASE ... SET cortex_buffer.job_table = 'public.job'. An unqualified name would be looked up in each caller's search_path, where a temporary table could stand in for it.")
    };
    let name = CString::new(setting).map_err(|_| missing())?;
    // SAFETY: a NUL-terminated string; the name parser raises a clean ERROR on bad syntax; the
    // list it returns is read, not kept.
    let (qualified, oid) = unsafe {
        let names = pg_sys::stringToQualifiedNameList(name.as_ptr());
        let qualified = !names.is_null() && (*names).length > 1;
        let range_var = pg_sys::makeRangeVarFromNameList(names);
        let oid = pg_sys::RangeVarGetRelidExtended(
            range_var,
            pg_sys::NoLock as i32,
            pg_sys::RVROption::RVR_MISSING_OK,
            None,
            std::ptr::null_mut(),
        );
        (qualified, oid)
    };
    if !qualified {
        return Err(unqualified());
    }
    if oid == pg_sys::InvalidOid {
        return Err(missing());
    }
    // SAFETY: the relation exists (just resolved); both are catalog lookups.
    if unsafe { pg_sys::isAnyTempNamespace(pg_sys::get_rel_namespace(oid)) } {
        return Err(unqualified());
    }
    Ok(oid)
}

const COLUMNS_SQL: &str = "
    SELECT a.attname::pg_catalog.text,
           pg_catalog.format_type(a.atttypid, a.atttypmod),
           CASE WHEN t.typtype OPERATOR(pg_catalog.=) 'e' THEN
               ARRAY(SELECT e.enumlabel::pg_catalog.text FROM pg_catalog.pg_enum e
                      WHERE e.enumtypid OPERATOR(pg_catalog.=) t.oid ORDER BY e.enumsortorder)
           END
      FROM pg_catalog.pg_attribute a
      JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) a.atttypid
     WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped
     ORDER BY a.attnum";

fn build(setting: String, oid: pg_sys::Oid) -> Result<Binding, CbError> {
    let columns: Vec<Column> = Spi::connect(|client| {
        let rows =
            client.select(COLUMNS_SQL, None, &[oid.into()]).map_err(|e| CbError::internal(format!("SPI: {e}")))?;
        let mut out = Vec::new();
        for row in rows {
            let name: Option<String> = row.get(1).map_err(|e| CbError::internal(e.to_string()))?;
            let type_name: Option<String> = row.get(2).map_err(|e| CbError::internal(e.to_string()))?;
            let enum_labels: Option<Vec<Option<String>>> = row.get(3).map_err(|e| CbError::internal(e.to_string()))?;
            out.push(Column {
                name: name.unwrap_or_default(),
                type_name: type_name.unwrap_or_default(),
                enum_labels: enum_labels.map(|l| l.into_iter().flatten().collect()),
            });
        }
        Ok::<_, CbError>(out)
    })?;
    let shape = validate(&columns).map_err(|problems| {
        CbError::new(
            SqlState::InvalidTableDefinition,
            format!("job table \"{setting}\" does not meet cortex_buffer's column contract"),
        )
        .with_detail(problems.join("; "))
        .with_hint("docs/control-plane.md, The column contract, lists the required columns and types. cortex_buffer never alters a bound table.")
    })?;
    // SAFETY: oid names an existing relation (just resolved); both lookups return palloc'd
    // strings or NULL.
    let (schema, relname) = unsafe {
        let rel = pg_sys::get_rel_name(oid);
        let nsp = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(oid));
        let text = |p: *mut std::ffi::c_char| {
            if p.is_null() {
                String::new()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        (text(nsp), text(rel))
    };
    let table = format!("{}.{}", pgrx::spi::quote_identifier(schema), pgrx::spi::quote_identifier(relname));
    Ok(Binding {
        setting,
        oid,
        table,
        shape,
        statements: RefCell::new(HashMap::new()),
        said: RefCell::new(Default::default()),
    })
}
