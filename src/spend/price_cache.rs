//! Prices from `cortex_buffer.model_price`, cached per backend.
//!
//! Every cost needs the price in force, and a lookup query is a large part of a
//! `record_usage()` call; prices change rarely. So each backend keeps every model's price
//! history it has read, and drops the whole cache when the table changes: a statement trigger
//! on `model_price` queues a relcache invalidation of the table, which PostgreSQL delivers to
//! this backend at once and to every other backend when the change commits (and not at all if
//! it rolls back). Other sessions therefore see a committed price change from their next
//! transaction on.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{pg_sys, PgBuiltInOids, PgOid};

use crate::pg::spi_util::{prepared_read, spi};
use cortex_buffer_core::error::{CbError, SqlState};
use cortex_buffer_core::spend::cost::{Price, PriceHistory};
use cortex_buffer_core::spend::decimal::Decimal;

thread_local! {
    static CACHE: RefCell<HashMap<String, Rc<PriceHistory>>> = RefCell::new(HashMap::new());
    /// Set by the invalidation callback (which must not touch the map: it may run while a
    /// lookup is in progress); the next lookup clears the cache.
    static STALE: Cell<bool> = const { Cell::new(false) };
    static TABLE_OID: Cell<pg_sys::Oid> = const { Cell::new(pg_sys::InvalidOid) };
    static CALLBACK_REGISTERED: Cell<bool> = const { Cell::new(false) };
}

#[pg_guard]
unsafe extern "C-unwind" fn relation_changed(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    let ours = TABLE_OID.with(Cell::get);
    // InvalidOid means "every relation" (e.g. after a cache reset).
    if relid == pg_sys::InvalidOid || ours == pg_sys::InvalidOid || relid == ours {
        STALE.with(|s| s.set(true));
    }
}

fn register_callback() {
    if !CALLBACK_REGISTERED.with(Cell::get) {
        // SAFETY: registers a static function for this backend's lifetime; called once.
        unsafe { pg_sys::CacheRegisterRelcacheCallback(Some(relation_changed), pg_sys::Datum::from(0)) };
        CALLBACK_REGISTERED.with(|c| c.set(true));
    }
}

/// Statement trigger on `model_price`: every backend's cached prices go stale when the change
/// commits.
#[pg_trigger]
pub fn model_price_changed<'a>(
    trigger: &'a pgrx::PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, pgrx::AllocatedByRust>>, pgrx::PgTriggerError> {
    let relid = trigger.relid()?;
    // SAFETY: queues a transactional invalidation message for an existing relation.
    unsafe { pg_sys::CacheInvalidateRelcacheByRelid(relid) };
    Ok(None)
}

fn load(client: &SpiClient<'_>, model: &str) -> Result<PriceHistory, CbError> {
    let text = PgOid::BuiltIn(PgBuiltInOids::TEXTOID);
    let stmt = prepared_read(
        client,
        "spend.prices",
        || {
            "SELECT 'cortex_buffer.model_price'::pg_catalog.regclass::pg_catalog.oid, effective_from,
                input_per_mtok::pg_catalog.text, output_per_mtok::pg_catalog.text, cache_write_per_mtok::pg_catalog.text,
                cache_write_1h_per_mtok::pg_catalog.text, cache_read_per_mtok::pg_catalog.text
           FROM cortex_buffer.model_price WHERE model OPERATOR(pg_catalog.=) $1"
            .to_owned()
        },
        &[text],
    )?;
    let mut entries = Vec::new();
    for r in client.select(&*stmt, None, &[model.into()]).map_err(spi)? {
        if let Some(oid) = r.get::<pg_sys::Oid>(1).map_err(spi)? {
            TABLE_OID.with(|c| c.set(oid));
        }
        let Some(from) = r.get::<TimestampWithTimeZone>(2).map_err(spi)? else { continue };
        let part = |i: usize| -> Result<Decimal, CbError> {
            Ok(r.get::<String>(i).map_err(spi)?.map(|t| Decimal::parse(&t)).transpose()?.unwrap_or(Decimal::ZERO))
        };
        let price = Price {
            input: part(3)?,
            output: part(4)?,
            cache_write_5m: part(5)?,
            cache_write_1h: part(6)?,
            cache_read: part(7)?,
        };
        entries.push((from.into_inner(), price));
    }
    Ok(PriceHistory::new(entries))
}

/// The price history of `model`, from the cache or the table.
fn history(client: &SpiClient<'_>, model: &str) -> Result<Rc<PriceHistory>, CbError> {
    register_callback();
    if STALE.with(|s| s.replace(false)) {
        CACHE.with(|c| c.borrow_mut().clear());
    }
    if let Some(h) = CACHE.with(|c| c.borrow().get(model).cloned()) {
        return Ok(h);
    }
    // No borrow is held while querying: invalidations may arrive during the query.
    let h = Rc::new(load(client, model)?);
    CACHE.with(|c| c.borrow_mut().insert(model.to_owned(), Rc::clone(&h)));
    Ok(h)
}

/// The price of `model` in force at `at`.
pub fn price_at(client: &SpiClient<'_>, model: &str, at: TimestampWithTimeZone) -> Result<Price, CbError> {
    let h = history(client, model)?;
    if let Some(p) = h.at(at.into_inner()) {
        return Ok(*p);
    }
    let insert_hint = format!(
        "Insert its price: INSERT INTO cortex_buffer.model_price (model, effective_from, input_per_mtok, output_per_mtok, cache_write_per_mtok, cache_write_1h_per_mtok, cache_read_per_mtok) VALUES ('{}', '2025-01-01', ...). Model names match exactly.",
        model.replace('\'', "''")
    );
    Err(match h.first_from().map(TimestampWithTimeZone::try_from) {
        Some(Ok(from)) => CbError::new(
            SqlState::UndefinedObject,
            format!("model \"{model}\" has no price in force at that time (its first price is from {from})"),
        )
        .with_hint(insert_hint),
        _ => CbError::new(
            SqlState::UndefinedObject,
            format!("model \"{model}\" has no price in cortex_buffer.model_price"),
        )
        .with_hint(insert_hint),
    })
}

/// The price of `model` in force at `at_us` (Unix microseconds), or `None` when it has none.
pub fn price_if_any(client: &SpiClient<'_>, model: &str, at_us: i64) -> Result<Option<Price>, CbError> {
    let h = history(client, model)?;
    Ok(h.at(at_us.saturating_sub(cortex_buffer_core::indexer::timestamp::POSTGRES_EPOCH_OFFSET_US)).copied())
}
