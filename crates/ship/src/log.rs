//! Structured logs: one JSON object per line on standard error.

use cortex_buffer_core::json::writer::JsonWriter;

/// A value of a log field.
pub enum V<'a> {
    S(&'a str),
    I(i64),
    U(u64),
}

/// Writes `{"ts", "level", "msg", fields...}`.
pub fn line(level: &str, msg: &str, fields: &[(&str, V<'_>)]) {
    let mut w = JsonWriter::new();
    w.begin_object();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    w.key("ts").float(now.as_secs_f64());
    w.field_str("level", level);
    w.field_str("msg", msg);
    for (k, v) in fields {
        match v {
            V::S(s) => w.field_str(k, s),
            V::I(i) => w.field_int(k, *i),
            V::U(u) => w.field_int(k, i64::try_from(*u).unwrap_or(i64::MAX)),
        };
    }
    w.end_object();
    eprintln!("{}", w.finish());
}

pub fn info(msg: &str, fields: &[(&str, V<'_>)]) {
    line("info", msg, fields);
}

pub fn warn(msg: &str, fields: &[(&str, V<'_>)]) {
    line("warn", msg, fields);
}
