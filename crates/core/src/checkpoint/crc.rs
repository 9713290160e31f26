//! Checkpoint CRC: CRC-32 (IEEE, as zlib and `crc32fast`) over the UTF-8 bytes of the
//! canonical JSON, byte-compatible with the control plane's `computeCheckpointCrc`.
//!
//! The CRC is unsigned (0 ..= 2^32-1) but the control plane's `checkpoint_crc` column is a signed
//! `integer`; about half of all CRCs only fit as their two's-complement bit pattern. Stored values
//! are therefore compared modulo 2^32.

use crate::json::node::JsonNode;
use crate::json::{write_canonical, JsValue};

/// The canonical text and its CRC, computed together because writers need both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canonical {
    pub text: String,
    pub crc: u32,
}

impl Canonical {
    /// The canonical text and CRC of any JSON view (a parsed value or binary jsonb).
    pub fn of<'a, N: JsonNode<'a>>(node: N) -> Result<Canonical, N::Error> {
        Canonical::with_capacity(node, 0)
    }

    /// Like [`Canonical::of`], with room for `capacity` bytes reserved up front (the size of
    /// the stored document is a good guess and saves regrowing a large buffer).
    pub fn with_capacity<'a, N: JsonNode<'a>>(node: N, capacity: usize) -> Result<Canonical, N::Error> {
        let mut text = String::with_capacity(capacity);
        write_canonical(node, &mut text)?;
        let crc = crc32fast::hash(text.as_bytes());
        Ok(Canonical { text, crc })
    }

    pub fn of_value(value: &JsValue) -> Canonical {
        match Canonical::of(value) {
            Ok(c) => c,
            Err(never) => match never {},
        }
    }

    /// Size in bytes of the canonical UTF-8 text (what the size limit applies to).
    pub fn size_bytes(&self) -> usize {
        self.text.len()
    }
}

/// The CRC of `value`'s canonical JSON.
pub fn checkpoint_crc(value: &JsValue) -> u32 {
    Canonical::of_value(value).crc
}

/// The bit pattern to store in a signed 32-bit `integer` column.
pub fn crc_as_int4(crc: u32) -> i32 {
    i32::from_ne_bytes(crc.to_ne_bytes())
}

/// Interprets a stored CRC, signed or unsigned, as the unsigned CRC it stands for.
/// Returns `None` for values that cannot be a CRC in either form.
pub fn stored_crc(stored: i64) -> Option<u32> {
    if let Ok(unsigned) = u32::try_from(stored) {
        Some(unsigned)
    } else if let Ok(signed) = i32::try_from(stored) {
        Some(u32::from_ne_bytes(signed.to_ne_bytes()))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use JsValue::*;

    #[test]
    fn golden_values_from_the_control_plane() {
        assert_eq!(checkpoint_crc(&JsValue::object([("hello", String("world".into()))])), 3_624_485_329);
        assert_eq!(checkpoint_crc(&JsValue::object(Vec::<(&str, JsValue)>::new())), 2_745_614_147);
        assert_eq!(checkpoint_crc(&JsValue::object([("step", Number(1.0))])), 286_895_505);
    }

    #[test]
    fn key_order_does_not_change_the_crc() {
        let a = JsValue::object([("a", Number(1.0)), ("b", Number(2.0))]);
        let b = JsValue::object([("b", Number(2.0)), ("a", Number(1.0))]);
        assert_eq!(checkpoint_crc(&a), checkpoint_crc(&b));
    }

    #[test]
    fn size_is_utf8_bytes_of_the_canonical_text() {
        let c = Canonical::of_value(&JsValue::object([("k", String("é".into()))]));
        assert_eq!(c.text, "{\"k\":\"é\"}");
        assert_eq!(c.size_bytes(), 10);
    }

    #[test]
    fn int4_storage_uses_the_twos_complement_bit_pattern() {
        assert_eq!(crc_as_int4(3_624_485_329), -670_481_967);
        assert_eq!(crc_as_int4(286_895_505), 286_895_505);
        assert_eq!(crc_as_int4(u32::MAX), -1);
    }

    #[test]
    fn stored_values_are_read_in_either_form() {
        assert_eq!(stored_crc(-670_481_967), Some(3_624_485_329));
        assert_eq!(stored_crc(3_624_485_329), Some(3_624_485_329));
        assert_eq!(stored_crc(0), Some(0));
        assert_eq!(stored_crc(-1), Some(u32::MAX));
        assert_eq!(stored_crc(1 << 32), None);
        assert_eq!(stored_crc(i64::from(i32::MIN) - 1), None);
    }
}
