//! A small JSON text writer for the documents the extension returns (recovery plans). Strings
//! are written with JavaScript's escaping, and NUL becomes U+FFFD: `jsonb` cannot store
//! `\u0000`, and a plan must always convert.

use super::quote::write_js_string;

#[derive(Debug, Default)]
pub struct JsonWriter {
    out: String,
    /// Per open container: whether nothing has been written in it yet.
    fresh: Vec<bool>,
    after_key: bool,
}

impl JsonWriter {
    pub fn new() -> JsonWriter {
        JsonWriter::default()
    }

    pub fn finish(self) -> String {
        self.out
    }

    fn separate(&mut self) {
        if self.after_key {
            self.after_key = false;
            return;
        }
        if let Some(fresh) = self.fresh.last_mut() {
            if !*fresh {
                self.out.push(',');
            }
            *fresh = false;
        }
    }

    pub fn begin_object(&mut self) -> &mut Self {
        self.separate();
        self.out.push('{');
        self.fresh.push(true);
        self
    }

    pub fn end_object(&mut self) -> &mut Self {
        self.fresh.pop();
        self.out.push('}');
        self
    }

    pub fn begin_array(&mut self) -> &mut Self {
        self.separate();
        self.out.push('[');
        self.fresh.push(true);
        self
    }

    pub fn end_array(&mut self) -> &mut Self {
        self.fresh.pop();
        self.out.push(']');
        self
    }

    pub fn key(&mut self, k: &str) -> &mut Self {
        self.separate();
        write_js_string(k, &mut self.out);
        self.out.push(':');
        self.after_key = true;
        self
    }

    pub fn string(&mut self, s: &str) -> &mut Self {
        self.separate();
        if s.contains('\0') {
            write_js_string(&s.replace('\0', "\u{fffd}"), &mut self.out);
        } else {
            write_js_string(s, &mut self.out);
        }
        self
    }

    pub fn int(&mut self, n: i64) -> &mut Self {
        self.separate();
        self.out.push_str(&n.to_string());
        self
    }

    /// A finite number (non-finite ones are written as `null`, as `JSON.stringify` does).
    pub fn float(&mut self, x: f64) -> &mut Self {
        self.separate();
        if x.is_finite() {
            super::number::write_js_number(x, &mut self.out);
        } else {
            self.out.push_str("null");
        }
        self
    }

    /// A number already in JSON form (e.g. a `numeric`'s text), written as it is: exact, where
    /// [`JsonWriter::float`] would round to a double.
    pub fn raw_number(&mut self, text: &str) -> &mut Self {
        self.separate();
        self.out.push_str(text);
        self
    }

    pub fn boolean(&mut self, b: bool) -> &mut Self {
        self.separate();
        self.out.push_str(if b { "true" } else { "false" });
        self
    }

    pub fn null(&mut self) -> &mut Self {
        self.separate();
        self.out.push_str("null");
        self
    }

    pub fn opt_string(&mut self, s: Option<&str>) -> &mut Self {
        match s {
            Some(s) => self.string(s),
            None => self.null(),
        }
    }

    pub fn opt_int(&mut self, n: Option<i64>) -> &mut Self {
        match n {
            Some(n) => self.int(n),
            None => self.null(),
        }
    }

    pub fn opt_bool(&mut self, b: Option<bool>) -> &mut Self {
        match b {
            Some(b) => self.boolean(b),
            None => self.null(),
        }
    }

    /// `key: value` members in one call each.
    pub fn field_str(&mut self, k: &str, s: &str) -> &mut Self {
        self.key(k).string(s)
    }
    pub fn field_opt_str(&mut self, k: &str, s: Option<&str>) -> &mut Self {
        self.key(k).opt_string(s)
    }
    pub fn field_int(&mut self, k: &str, n: i64) -> &mut Self {
        self.key(k).int(n)
    }
    pub fn field_opt_int(&mut self, k: &str, n: Option<i64>) -> &mut Self {
        self.key(k).opt_int(n)
    }
    pub fn field_bool(&mut self, k: &str, b: bool) -> &mut Self {
        self.key(k).boolean(b)
    }
    pub fn field_opt_bool(&mut self, k: &str, b: Option<bool>) -> &mut Self {
        self.key(k).opt_bool(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_nested_documents() {
        let mut w = JsonWriter::new();
        w.begin_object()
            .field_str("a", "x\"\0")
            .key("b")
            .begin_array()
            .int(1)
            .null()
            .begin_object()
            .end_object()
            .end_array();
        w.field_opt_int("c", None).key("d").float(f64::NAN).key("e").float(1.5).end_object();
        assert_eq!(w.finish(), "{\"a\":\"x\\\"\u{fffd}\",\"b\":[1,null,{}],\"c\":null,\"d\":null,\"e\":1.5}");
    }
}
