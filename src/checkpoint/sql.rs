//! SQL functions of the checkpoint capability (thin: map jsonb to the core and back).

use pgrx::prelude::*;

use super::crc::Canonical;
use crate::pg::jsonb::JsonbArg;
use crate::pg::OrRaise;

/// CRC-32 of the document's canonical JSON, as the control plane computes it (0 ..= 2^32-1).
#[pg_extern(immutable, strict, parallel_safe)]
fn checkpoint_crc(doc: JsonbArg) -> i64 {
    let value = doc.to_js_value().or_raise();
    i64::from(Canonical::of(&value).crc)
}

/// The canonical JSON the checkpoint CRC is computed over: JavaScript's `JSON.stringify` of
/// the document with object keys sorted recursively.
#[pg_extern(immutable, strict, parallel_safe)]
fn canonical_json(doc: JsonbArg) -> String {
    let value = doc.to_js_value().or_raise();
    Canonical::of(&value).text
}

extension_sql_file!("checkpoint.sql", name = "checkpoint_sql", requires = [checkpoint_crc, canonical_json]);

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    fn crc(json: &str) -> i64 {
        Spi::get_one::<i64>(&format!("SELECT cortex_buffer.checkpoint_crc({}::jsonb)", pgrx::spi::quote_literal(json)))
            .ok()
            .flatten()
            .unwrap_or(-1)
    }

    fn canon(json: &str) -> String {
        Spi::get_one::<String>(&format!(
            "SELECT cortex_buffer.canonical_json({}::jsonb)",
            pgrx::spi::quote_literal(json)
        ))
        .ok()
        .flatten()
        .unwrap_or_default()
    }

    #[pg_test]
    fn golden_crcs_match_the_control_plane() {
        assert_eq!(crc(r#"{"hello":"world"}"#), 3_624_485_329);
        assert_eq!(crc("{}"), 2_745_614_147);
        assert_eq!(crc(r#"{"step":1}"#), 286_895_505);
    }

    #[pg_test]
    fn canonical_json_reproduces_javascript_serialisation() {
        // jsonb reorders keys by length; the canonical form must not care.
        assert_eq!(
            canon(r#"{"bb":1,"a":{"d":[1.0,-0,1e21,1.5e-7],"c":"x/\u2028"}}"#),
            "{\"a\":{\"c\":\"x/\u{2028}\",\"d\":[1,0,1e+21,1.5e-7]},\"bb\":1}"
        );
        assert_eq!(canon(r#"{"10":1,"9":2,"x":3}"#), r#"{"9":2,"10":1,"x":3}"#);
        assert_eq!(canon(r#"{"n":12345678901234567890}"#), r#"{"n":12345678901234567000}"#);
        assert_eq!(canon(r#"{"tab":"a\tb","ctl":"\u001f"}"#), r#"{"ctl":"\u001f","tab":"a\tb"}"#);
    }

    #[pg_test]
    fn numbers_beyond_double_range_become_null_as_in_javascript() {
        assert_eq!(canon(r#"{"big":1e400,"tiny":1e-400}"#), r#"{"big":null,"tiny":0}"#);
    }

    #[pg_test]
    fn scalars_and_arrays_at_the_top_level() {
        assert_eq!(canon("[3,2,{\"b\":1,\"a\":2}]"), r#"[3,2,{"a":2,"b":1}]"#);
        assert_eq!(canon("\"s\""), "\"s\"");
        assert_eq!(canon("null"), "null");
        assert_eq!(canon("true"), "true");
        assert_eq!(canon("1.50"), "1.5");
    }

    #[pg_test]
    fn null_in_null_out() {
        let r = Spi::get_one::<i64>("SELECT cortex_buffer.checkpoint_crc(NULL)");
        assert_eq!(r.ok().flatten(), None);
    }

    #[pg_test]
    fn crc_is_independent_of_key_order_and_whitespace() {
        assert_eq!(crc(r#"{"a":1,"b":[true,null]}"#), crc(r#"{ "b" : [ true , null ] , "a" : 1.0 }"#));
    }
}
