COMMENT ON FUNCTION cortex_buffer.checkpoint_crc(jsonb) IS
'CRC-32 (IEEE) of canonical_json(doc): byte-compatible with the control plane''s checkpoint CRC. Unsigned 0..4294967295; the control plane''s integer column stores the same bit pattern signed.';
COMMENT ON FUNCTION cortex_buffer.canonical_json(jsonb) IS
'JavaScript JSON.stringify of doc with object keys sorted recursively (array-index keys first, numerically), numbers printed as JavaScript prints them: the text the checkpoint CRC covers.';
