//! `jsonb` values handled as raw datums: read in their binary form (`json::jsonb_format`),
//! passed to SPI and returned to SQL without ever being printed and re-parsed.
//!
//! pgrx's own `JsonB` goes through `jsonb_out` text and `serde_json`, which loses precision on
//! large numbers and panics on numbers outside the f64 range (`1e400`).

use pgrx::callconv::{Arg, ArgAbi, BoxRet, FcInfo};
use pgrx::datum::Datum;
use pgrx::nullable::Nullable;
use pgrx::pg_sys;
use pgrx::prelude::*;

use cortex_buffer_core::error::CbError;
use cortex_buffer_core::json::jsonb_format::{Jsonb, Malformed};

/// A `jsonb` datum (possibly toasted), valid in the memory context it came from.
#[derive(Clone, Copy)]
pub struct RawJsonb(pg_sys::Datum);

impl FromDatum for RawJsonb {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, _: pg_sys::Oid) -> Option<Self> {
        if is_null || datum.is_null() {
            None
        } else {
            Some(RawJsonb(datum))
        }
    }
}

impl IntoDatum for RawJsonb {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        Some(self.0)
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONBOID
    }
}

unsafe impl<'fcx> ArgAbi<'fcx> for RawJsonb {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        unsafe { arg.unbox_arg_using_from_datum() }.unwrap_or_else(|| pgrx::error!("argument {index} must not be null"))
    }

    unsafe fn unbox_nullable_arg(arg: Arg<'_, 'fcx>) -> Nullable<Self> {
        unsafe { arg.unbox_arg_using_from_datum::<Self>() }.into()
    }
}

// SAFETY: the datum is a valid jsonb in a memory context that outlives the call (arguments, or
// values moved out of SPI with `transfer_out_of_spi`).
unsafe impl BoxRet for RawJsonb {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> Datum<'fcx> {
        unsafe { fcinfo.return_raw_datum(self.0) }
    }
}

// SAFETY: the datum is used only while the tuple it was read from (a trigger's NEW row) lives.
unsafe impl pgrx::datum::UnboxDatum for RawJsonb {
    type As<'src> = RawJsonb;
    unsafe fn unbox<'src>(datum: Datum<'src>) -> RawJsonb
    where
        Self: 'src,
    {
        RawJsonb(datum.sans_lifetime())
    }
}

pgrx::impl_sql_translatable!(RawJsonb, "jsonb");

impl RawJsonb {
    /// Copies the value out of SPI's memory into the caller's (`SPI_datumTransfer`), so it can
    /// be returned after `Spi::connect` ends.
    pub fn transfer_out_of_spi(self) -> RawJsonb {
        // SAFETY: jsonb is a varlena (by reference, length -1); called inside a SPI connection.
        RawJsonb(unsafe { pg_sys::SPI_datumTransfer(self.0, false, -1) })
    }

    /// Runs `f` on the document's binary form, detoasting it first if needed (the copy lives in
    /// the current memory context).
    /// `f` also gets the size of the binary form, a good estimate of the text's.
    pub fn with_root<R>(&self, f: impl FnOnce(Jsonb<'_>, usize) -> Result<R, CbError>) -> Result<R, CbError> {
        // SAFETY: self.0 is a jsonb datum. `pg_detoast_datum` returns it with a 4-byte header
        // (expanding compressed, external and short-header forms), and the slice covers exactly
        // its payload, which stays allocated for the duration of `f`.
        let bytes: &[u8] = unsafe {
            let detoasted = pg_sys::pg_detoast_datum(self.0.cast_mut_ptr());
            let len = pgrx::varlena::varsize_any_exhdr(detoasted);
            std::slice::from_raw_parts(pgrx::varlena::vardata_any(detoasted).cast::<u8>(), len)
        };
        f(Jsonb::root(bytes).map_err(malformed)?, bytes.len())
    }
}

impl RawJsonb {
    /// Runs `f` on the detoasted payload bytes (after the varlena header).
    pub fn with_payload<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        // SAFETY: as in `with_root`: a jsonb datum, detoasted into the current context.
        let bytes: &[u8] = unsafe {
            let detoasted = pg_sys::pg_detoast_datum(self.0.cast_mut_ptr());
            let len = pgrx::varlena::varsize_any_exhdr(detoasted);
            std::slice::from_raw_parts(pgrx::varlena::vardata_any(detoasted).cast::<u8>(), len)
        };
        f(bytes)
    }

    /// The datum itself.
    pub fn into_datum_raw(self) -> pg_sys::Datum {
        self.0
    }

    /// A jsonb datum from a complete varlena (4-byte header first), copied into the current
    /// memory context.
    pub fn from_varlena(bytes: &[u8]) -> RawJsonb {
        // SAFETY: palloc'd copy of a well-formed varlena (the caller built it with to_jsonb).
        unsafe {
            let p = pg_sys::palloc(bytes.len()).cast::<u8>();
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len());
            RawJsonb(pg_sys::Datum::from(p))
        }
    }
}

/// A jsonb value whose bytes do not follow the format: never expected from Postgres.
pub fn malformed(e: Malformed) -> CbError {
    CbError::from(e)
}

/// The `jsonb` of a document a `JsonWriter` wrote (a recovery plan), from the nodes it recorded
/// while writing: no parsing of its text.
pub fn jsonb_of_document(doc: &cortex_buffer_core::json::jsonb_write::Document) -> Result<RawJsonb, CbError> {
    let mut bytes = Vec::with_capacity(doc.text.len() + doc.text.len() / 2 + 64);
    cortex_buffer_core::json::jsonb_write::document_to_jsonb(doc, &mut bytes).map_err(|_| {
        CbError::internal("a document the extension built is too large for jsonb, or malformed".to_owned())
    })?;
    Ok(RawJsonb::from_varlena(&bytes))
}
