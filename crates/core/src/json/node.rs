//! What the canonical writer needs from a JSON document, so that parsed values ([`JsValue`])
//! and binary `jsonb` (`jsonb_format`) are serialised by the same code.

use super::value::JsValue;

/// A node's kind, with scalars resolved as JavaScript sees them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind<'a> {
    Null,
    Bool(bool),
    Number(f64),
    String(&'a str),
    Array,
    Object,
}

/// A read-only view of one JSON value.
pub trait JsonNode<'a>: Copy {
    type Error;
    fn kind(self) -> Result<Kind<'a>, Self::Error>;
    /// Appends the children of an array (key `None`) or object (key `Some`), in stored order.
    /// Objects may repeat a key; the last occurrence is the value JavaScript keeps.
    fn children(self, out: &mut Vec<(Option<&'a str>, Self)>) -> Result<(), Self::Error>;
}

impl<'a> JsonNode<'a> for &'a JsValue {
    type Error = std::convert::Infallible;

    fn kind(self) -> Result<Kind<'a>, Self::Error> {
        Ok(match self {
            JsValue::Null => Kind::Null,
            JsValue::Bool(b) => Kind::Bool(*b),
            JsValue::Number(n) => Kind::Number(*n),
            JsValue::String(s) => Kind::String(s),
            JsValue::Array(_) => Kind::Array,
            JsValue::Object(_) => Kind::Object,
        })
    }

    fn children(self, out: &mut Vec<(Option<&'a str>, Self)>) -> Result<(), Self::Error> {
        match self {
            JsValue::Array(items) => out.extend(items.iter().map(|v| (None, v))),
            JsValue::Object(members) => out.extend(members.iter().map(|(k, v)| (Some(k.as_str()), v))),
            _ => {}
        }
        Ok(())
    }
}

/// `serde_json` values (the indexer's parsed lines). Numbers are read as doubles, as
/// JavaScript reads them; duplicate keys were already resolved (last wins) by the parser.
impl<'a> JsonNode<'a> for &'a serde_json::Value {
    type Error = std::convert::Infallible;

    fn kind(self) -> Result<Kind<'a>, Self::Error> {
        use serde_json::Value;
        Ok(match self {
            Value::Null => Kind::Null,
            Value::Bool(b) => Kind::Bool(*b),
            Value::Number(n) => Kind::Number(n.as_f64().unwrap_or(f64::NAN)),
            Value::String(s) => Kind::String(s),
            Value::Array(_) => Kind::Array,
            Value::Object(_) => Kind::Object,
        })
    }

    fn children(self, out: &mut Vec<(Option<&'a str>, Self)>) -> Result<(), Self::Error> {
        use serde_json::Value;
        match self {
            Value::Array(items) => out.extend(items.iter().map(|v| (None, v))),
            Value::Object(members) => out.extend(members.iter().map(|(k, v)| (Some(k.as_str()), v))),
            _ => {}
        }
        Ok(())
    }
}

/// The value of `key` in an object node (last occurrence), if present.
pub fn member<'a, N: JsonNode<'a>>(node: N, key: &str) -> Result<Option<N>, N::Error> {
    if node.kind()? != Kind::Object {
        return Ok(None);
    }
    let mut children = Vec::new();
    node.children(&mut children)?;
    Ok(children.into_iter().rev().find(|(k, _)| *k == Some(key)).map(|(_, v)| v))
}
