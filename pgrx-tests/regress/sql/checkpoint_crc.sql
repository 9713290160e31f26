-- checkpoint_crc(doc): the control plane's CRC-32 of canonical JSON; strict, PUBLIC, no errors.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- The golden values the control plane computes.
SELECT cortex_buffer.checkpoint_crc('{"hello":"world"}') AS hello, cortex_buffer.checkpoint_crc('{}') AS empty,
       cortex_buffer.checkpoint_crc('{"step":1}') AS step;
-- Key order, white space and number spelling do not change it (the CRC is of canonical JSON).
SELECT cortex_buffer.checkpoint_crc('{"a":1,"b":[true,null]}') = cortex_buffer.checkpoint_crc('{ "b" : [ true , null ] , "a" : 1.0 }') AS same_crc;
-- Unsigned: a CRC above 2^31 stays positive.
SELECT cortex_buffer.checkpoint_crc('{"hello":"world"}') > 2147483647 AS above_int_max;
-- Any JSON value has a CRC (only write_checkpoint insists on an object).
SELECT cortex_buffer.checkpoint_crc('[1,2]') AS array_crc, cortex_buffer.checkpoint_crc('"s"') AS string_crc,
       cortex_buffer.checkpoint_crc('null') AS json_null_crc;
-- Strict: NULL in, NULL out.
SELECT cortex_buffer.checkpoint_crc(NULL) IS NULL AS null_in_null_out;
-- The job row's signed integer column holds the same bit pattern.
INSERT INTO cortex_buffer.job (id, agent_id, status) VALUES
    ('0193a8b2-0000-7000-8000-0000000f0101', '0193a8b2-0000-7000-8000-0000000f01a1', 'RUNNING');
SELECT crc FROM cortex_buffer.write_checkpoint('0193a8b2-0000-7000-8000-0000000f0101', '{"hello":"world"}');
SELECT checkpoint_crc AS signed_column, cortex_buffer.checkpoint_crc(checkpoint) AS unsigned_crc,
       cortex_buffer.checkpoint_crc(checkpoint)::bit(32) = checkpoint_crc::bit(32) AS same_bits
  FROM cortex_buffer.job WHERE id = '0193a8b2-0000-7000-8000-0000000f0101';
-- PUBLIC may call it.
SET ROLE regress_stranger;
SELECT cortex_buffer.checkpoint_crc('{"step":1}') AS as_stranger;
RESET ROLE;
DELETE FROM cortex_buffer.checkpoint_mark WHERE job_id = '0193a8b2-0000-7000-8000-0000000f0101';
DELETE FROM cortex_buffer.checkpoint_history WHERE job_id = '0193a8b2-0000-7000-8000-0000000f0101';
DELETE FROM cortex_buffer.job WHERE id = '0193a8b2-0000-7000-8000-0000000f0101';
