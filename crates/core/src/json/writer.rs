//! A small JSON text writer for the documents the extension returns (recovery plans). Strings
//! are written with JavaScript's escaping, and NUL becomes U+FFFD: `jsonb` cannot store
//! `\u0000`, and a plan must always convert. As it writes it records each value's place (the
//! nodes `jsonb_write` reads a document into), so the document becomes `jsonb` without being
//! parsed back ([`JsonWriter::finish_document`], `jsonb_write::document_to_jsonb`).

use super::jsonb_write::{Document, Node, NodeKind};
use super::quote::write_js_string;

#[derive(Debug, Default)]
pub struct JsonWriter {
    out: String,
    /// Per open container: whether nothing has been written in it yet.
    fresh: Vec<bool>,
    after_key: bool,
    /// Every value and key written, in preorder.
    nodes: Vec<Node>,
    /// The open containers' nodes.
    open: Vec<usize>,
    /// The text outgrew what a node can address.
    too_large: bool,
}

impl JsonWriter {
    pub fn new() -> JsonWriter {
        JsonWriter::default()
    }

    pub fn finish(self) -> String {
        self.out
    }

    /// The text with the nodes of its values, for `jsonb_write::document_to_jsonb`.
    pub fn finish_document(self) -> Document {
        let unfinished = !self.open.is_empty() || self.after_key;
        Document { text: self.out, nodes: self.nodes, too_large: self.too_large || unfinished }
    }

    /// Records a value of `kind` whose text runs from `start` to the end of the text so far
    /// (a string's: between its quotes).
    fn node(&mut self, kind: NodeKind, start: usize, end: usize) {
        let index = self.nodes.len();
        let (Ok(s), Ok(len), Ok(next)) = (u32::try_from(start), u32::try_from(end - start), u32::try_from(index + 1))
        else {
            self.too_large = true;
            return;
        };
        let escaped =
            kind == NodeKind::String && self.out.as_bytes().get(start..end).is_some_and(|t| t.contains(&b'\\'));
        self.nodes.push(Node { start: s, len, end: next, kind, escaped });
    }

    /// A string written at the end of the text, recorded.
    fn quoted(&mut self, s: &str) {
        let at = self.out.len();
        write_js_string(s, &mut self.out);
        self.node(NodeKind::String, at + 1, self.out.len() - 1);
    }

    fn open(&mut self, kind: NodeKind, bracket: char) {
        self.separate();
        self.open.push(self.nodes.len());
        let at = self.out.len();
        self.out.push(bracket);
        self.node(kind, at, at);
        self.fresh.push(true);
    }

    fn close(&mut self, bracket: char) {
        self.fresh.pop();
        self.out.push(bracket);
        let end = u32::try_from(self.nodes.len());
        match (self.open.pop().and_then(|o| self.nodes.get_mut(o)), end) {
            (Some(n), Ok(end)) => n.end = end,
            _ => self.too_large = true,
        }
    }

    /// A scalar written at the end of the text, recorded.
    fn scalar(&mut self, kind: NodeKind, text: &str) {
        self.separate();
        let at = self.out.len();
        self.out.push_str(text);
        self.node(kind, at, self.out.len());
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
        self.open(NodeKind::Object, '{');
        self
    }

    pub fn end_object(&mut self) -> &mut Self {
        self.close('}');
        self
    }

    pub fn begin_array(&mut self) -> &mut Self {
        self.open(NodeKind::Array, '[');
        self
    }

    pub fn end_array(&mut self) -> &mut Self {
        self.close(']');
        self
    }

    pub fn key(&mut self, k: &str) -> &mut Self {
        self.separate();
        self.quoted(k);
        self.out.push(':');
        self.after_key = true;
        self
    }

    pub fn string(&mut self, s: &str) -> &mut Self {
        self.separate();
        if s.contains('\0') {
            self.quoted(&s.replace('\0', "\u{fffd}"));
        } else {
            self.quoted(s);
        }
        self
    }

    pub fn int(&mut self, n: i64) -> &mut Self {
        self.scalar(NodeKind::Number, &n.to_string());
        self
    }

    /// A finite number (non-finite ones are written as `null`, as `JSON.stringify` does).
    pub fn float(&mut self, x: f64) -> &mut Self {
        if x.is_finite() {
            let mut text = String::new();
            super::number::write_js_number(x, &mut text);
            self.scalar(NodeKind::Number, &text);
        } else {
            self.scalar(NodeKind::Null, "null");
        }
        self
    }

    /// A number already in JSON form (e.g. a `numeric`'s text), written as it is: exact, where
    /// [`JsonWriter::float`] would round to a double.
    pub fn raw_number(&mut self, text: &str) -> &mut Self {
        self.scalar(NodeKind::Number, text);
        self
    }

    pub fn boolean(&mut self, b: bool) -> &mut Self {
        if b {
            self.scalar(NodeKind::True, "true");
        } else {
            self.scalar(NodeKind::False, "false");
        }
        self
    }

    pub fn null(&mut self) -> &mut Self {
        self.scalar(NodeKind::Null, "null");
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

    /// A document of every kind of value, keys out of order and repeated, escapes, long arrays
    /// (an offset every 32 entries) and deep nesting, from `seed`.
    fn document(seed: u64) -> JsonWriter {
        let mut n = seed;
        let mut next = move |m: u64| {
            n ^= n << 13;
            n ^= n >> 7;
            n ^= n << 17;
            n % m.max(1)
        };
        let mut w = JsonWriter::new();
        fn value(w: &mut JsonWriter, depth: u32, next: &mut dyn FnMut(u64) -> u64) {
            match if depth > 5 { next(6) } else { next(9) } {
                0 => w.null(),
                1 => w.boolean(next(2) == 0),
                2 => w.int(next(1 << 40) as i64 - (1 << 39)),
                3 => w.float(next(1_000_000) as f64 / 7.0),
                4 => w.raw_number("12345678901234567890.000000000001"),
                5 => w.string(["", "plain", "q\"uote\\", "é\u{1F600}\n\t", "nul\0"][next(5) as usize]),
                6 | 7 => {
                    w.begin_object();
                    for _ in 0..next(6) {
                        w.key(["b", "a", "zz", "a", "key\"x", "é"][next(6) as usize]);
                        value(w, depth + 1, next);
                    }
                    w.end_object()
                }
                _ => {
                    w.begin_array();
                    for _ in 0..next(40) {
                        value(w, depth + 1, next);
                    }
                    w.end_array()
                }
            };
        }
        value(&mut w, 0, &mut next);
        w
    }

    #[test]
    fn the_recorded_nodes_give_the_jsonb_the_text_gives() {
        use crate::json::jsonb_write::{document_to_jsonb, to_jsonb};
        for seed in 1..400u64 {
            let doc = document(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1).finish_document();
            let (mut from_text, mut from_nodes) = (Vec::new(), Vec::new());
            to_jsonb(&doc.text, &mut from_text).unwrap_or_else(|_| panic!("{}", doc.text));
            document_to_jsonb(&doc, &mut from_nodes).unwrap_or_else(|_| panic!("{}", doc.text));
            assert_eq!(from_nodes, from_text, "{}", doc.text);
        }
        // An unfinished or misused document converts to nothing, never to other bytes.
        let mut w = JsonWriter::new();
        w.begin_object().key("a");
        assert!(document_to_jsonb(&w.finish_document(), &mut Vec::new()).is_err());
        let mut w = JsonWriter::new();
        w.begin_object().key("a").end_object();
        assert!(document_to_jsonb(&w.finish_document(), &mut Vec::new()).is_err(), "a key without a value");
        let mut w = JsonWriter::new();
        w.begin_array().begin_object().key("a").end_object().int(1).end_array();
        assert!(document_to_jsonb(&w.finish_document(), &mut Vec::new()).is_err(), "a key closed early");
        let mut w = JsonWriter::new();
        w.begin_object().int(1).end_object();
        assert!(document_to_jsonb(&w.finish_document(), &mut Vec::new()).is_err(), "a value without a key");
        let mut w = JsonWriter::new();
        w.int(1).int(2);
        assert!(document_to_jsonb(&w.finish_document(), &mut Vec::new()).is_err(), "two roots");
        assert!(document_to_jsonb(&JsonWriter::new().finish_document(), &mut Vec::new()).is_err(), "nothing");
    }
}
