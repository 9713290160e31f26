//! Reading `jsonb` arguments straight from their binary form into [`JsValue`].
//!
//! pgrx's own `JsonB` goes through `jsonb_out` text and `serde_json`, which loses precision on
//! large numbers and panics on numbers outside the f64 range (`1e400`). Walking the binary
//! container with Postgres' own iterator is faster and converts every numeric with
//! `numeric_float8_no_overflow` (correctly rounded, ±Infinity on overflow), which is exactly what
//! JavaScript's `JSON.parse` produces from the same text.

use pgrx::callconv::{Arg, ArgAbi};
use pgrx::nullable::Nullable;
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::error::CbError;
use crate::json::JsValue;

/// A detoasted `jsonb` argument, read lazily.
pub struct JsonbArg(*mut pg_sys::Jsonb);

impl FromDatum for JsonbArg {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, _: pg_sys::Oid) -> Option<Self> {
        if is_null || datum.is_null() {
            return None;
        }
        // `pg_detoast_datum` also expands short (1-byte) headers, which the jsonb iterator needs.
        let detoasted = unsafe { pg_sys::pg_detoast_datum(datum.cast_mut_ptr()) };
        Some(JsonbArg(detoasted.cast()))
    }
}

unsafe impl<'fcx> ArgAbi<'fcx> for JsonbArg {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        unsafe { arg.unbox_arg_using_from_datum() }.unwrap_or_else(|| pgrx::error!("argument {index} must not be null"))
    }

    unsafe fn unbox_nullable_arg(arg: Arg<'_, 'fcx>) -> Nullable<Self> {
        unsafe { arg.unbox_arg_using_from_datum::<Self>() }.into()
    }
}

pgrx::impl_sql_translatable!(JsonbArg, arg_only = "jsonb");

enum Frame {
    Array { items: Vec<JsValue>, raw_scalar: bool },
    Object { members: Vec<(String, JsValue)>, key: Option<String> },
}

impl JsonbArg {
    /// The document as JavaScript would see it after `JSON.parse(jsonb_out(doc))`.
    pub fn to_js_value(&self) -> Result<JsValue, CbError> {
        // SAFETY: self.0 is a detoasted jsonb with a 4-byte header (see from_polymorphic_datum);
        // the iterator only reads within it. The walk is iterative: nesting depth costs heap only.
        unsafe {
            let mut iter = pg_sys::JsonbIteratorInit(&raw mut (*self.0).root);
            let mut v = pg_sys::JsonbValue::default();
            let mut stack: Vec<Frame> = Vec::new();
            loop {
                let token = pg_sys::JsonbIteratorNext(&mut iter, &mut v, false);
                let finished: JsValue = match token {
                    pg_sys::JsonbIteratorToken::WJB_DONE => {
                        return Err(CbError::internal("jsonb iterator ended before the document did"))
                    }
                    pg_sys::JsonbIteratorToken::WJB_BEGIN_ARRAY => {
                        let n = usize::try_from(v.val.array.nElems).unwrap_or(0);
                        stack.push(Frame::Array { items: Vec::with_capacity(n), raw_scalar: v.val.array.rawScalar });
                        continue;
                    }
                    pg_sys::JsonbIteratorToken::WJB_BEGIN_OBJECT => {
                        let n = usize::try_from(v.val.object.nPairs).unwrap_or(0);
                        stack.push(Frame::Object { members: Vec::with_capacity(n), key: None });
                        continue;
                    }
                    pg_sys::JsonbIteratorToken::WJB_KEY => {
                        let key = scalar_string(&v)?;
                        if let Some(Frame::Object { key: slot, .. }) = stack.last_mut() {
                            *slot = Some(key);
                        }
                        continue;
                    }
                    pg_sys::JsonbIteratorToken::WJB_VALUE | pg_sys::JsonbIteratorToken::WJB_ELEM => scalar(&v)?,
                    pg_sys::JsonbIteratorToken::WJB_END_ARRAY | pg_sys::JsonbIteratorToken::WJB_END_OBJECT => {
                        match stack.pop() {
                            Some(Frame::Array { mut items, raw_scalar: true }) => items.pop().unwrap_or(JsValue::Null),
                            Some(Frame::Array { items, raw_scalar: false }) => JsValue::Array(items),
                            Some(Frame::Object { members, .. }) => JsValue::Object(members),
                            None => return Err(CbError::internal("unbalanced jsonb container")),
                        }
                    }
                    other => return Err(CbError::internal(format!("unexpected jsonb iterator token {other}"))),
                };
                match stack.last_mut() {
                    None => return Ok(finished),
                    Some(Frame::Array { items, .. }) => items.push(finished),
                    Some(Frame::Object { members, key }) => {
                        let k = key.take().ok_or_else(|| CbError::internal("jsonb value without a key"))?;
                        members.push((k, finished));
                    }
                }
            }
        }
    }
}

unsafe fn scalar(v: &pg_sys::JsonbValue) -> Result<JsValue, CbError> {
    unsafe {
        Ok(match v.type_ {
            pg_sys::jbvType::jbvNull => JsValue::Null,
            pg_sys::jbvType::jbvBool => JsValue::Bool(v.val.boolean),
            pg_sys::jbvType::jbvString => JsValue::String(scalar_string(v)?),
            pg_sys::jbvType::jbvNumeric => {
                let datum = pg_sys::Datum::from(v.val.numeric);
                let f = pgrx::direct_function_call::<f64>(pg_sys::numeric_float8_no_overflow, &[Some(datum)])
                    .unwrap_or(f64::NAN);
                JsValue::Number(f)
            }
            other => return Err(CbError::internal(format!("unexpected jsonb scalar type {other}"))),
        })
    }
}

unsafe fn scalar_string(v: &pg_sys::JsonbValue) -> Result<String, CbError> {
    unsafe {
        let len = usize::try_from(v.val.string.len).unwrap_or(0);
        if len == 0 {
            return Ok(String::new());
        }
        let bytes = std::slice::from_raw_parts(v.val.string.val.cast::<u8>(), len);
        String::from_utf8(bytes.to_vec()).map_err(|_| CbError::not_utf8())
    }
}
