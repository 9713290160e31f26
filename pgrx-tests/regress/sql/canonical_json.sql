-- canonical_json(doc): JavaScript's JSON.stringify with sorted keys, the text the CRC covers.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- Array-index keys first in numeric order, then other keys by UTF-16 code units.
SELECT cortex_buffer.canonical_json('{"b":[1.0, 1.5e21],"10":1,"9":2}');
SELECT cortex_buffer.canonical_json('{"a":3,"4294967295":1,"4294967294":2,"01":4,"":5,"B":6}');
-- UTF-16 order: U+1F600 (a surrogate pair, 0xD83D…) sorts before U+FFFF.
SELECT cortex_buffer.canonical_json('{"\uffff":1,"😀":2}');
-- Nested objects are sorted too; arrays keep their order.
SELECT cortex_buffer.canonical_json('{"z":{"y":[{"b":1,"a":2}],"x":null},"a":[3,2,1]}');
-- Numbers as JavaScript prints them.
SELECT cortex_buffer.canonical_json('{"n":[1.0, -0, 1.5e21, 1e-7, 0.000001, 12345678901234567890, 1e400, 1e-400, 100, 1.50]}');
-- Only ", \ and control characters are escaped; / and U+2028 are not.
SELECT cortex_buffer.canonical_json('{"s":"a\"b\\c/d\u2028e\tf\u001fg\u00e9"}');
-- Any JSON value, not only objects.
SELECT cortex_buffer.canonical_json('[3,2,{"b":1,"a":2}]') AS arr, cortex_buffer.canonical_json('"s"') AS str,
       cortex_buffer.canonical_json('null') AS json_null, cortex_buffer.canonical_json('true') AS bool;
-- Strict: NULL in, NULL out.
SELECT cortex_buffer.canonical_json(NULL) IS NULL AS null_in_null_out;
-- The CRC is the CRC-32 of exactly this text.
SELECT cortex_buffer.canonical_json('{"step":1}') AS text, cortex_buffer.checkpoint_crc('{"step":1}') AS crc;
-- PUBLIC may call it.
SET ROLE regress_stranger;
SELECT cortex_buffer.canonical_json('{"b":1,"a":2}') AS as_stranger;
RESET ROLE;
