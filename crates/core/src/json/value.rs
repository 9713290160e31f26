//! A JSON value as JavaScript's `JSON.parse` sees it: every number is a double, object members
//! keep their source order and may repeat (the last occurrence wins, as in JavaScript).

/// A parsed JSON document with JavaScript semantics.
#[derive(Debug, Clone, PartialEq)]
pub enum JsValue {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<JsValue>),
    /// Members in source order; duplicate keys are resolved when serialising.
    Object(Vec<(String, JsValue)>),
}

impl JsValue {
    /// Builds an object from `(key, value)` pairs; a convenience for tests and callers.
    pub fn object<K: Into<String>>(members: impl IntoIterator<Item = (K, JsValue)>) -> JsValue {
        JsValue::Object(members.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    pub fn is_object(&self) -> bool {
        matches!(self, JsValue::Object(_))
    }
}
