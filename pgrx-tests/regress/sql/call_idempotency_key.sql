-- call_idempotency_key(job_id, checkpoint, call_ordinal, tool_name, tool_input): the formula, NULLs, refusals.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- The docs' example.
SELECT cortex_buffer.call_idempotency_key('0193a8b2-7c41-7d2e-9f00-5a1b2c3d4e5f',
       '{"checkpoint_id": "0193a8b2-0000-7000-8000-0000000000c1", "step_index": 0}', 2,
       'charge_card', '{"amount": 42, "currency": "USD", "customer": "cus_123"}') AS idempotency_key;
-- It is the documented formula: sha256_hex("cortex_buffer/call/v3\n" + job_id + "\n" + checkpoint_ref
-- + "\n" + call_ordinal + "\n" + tool_name + "\n" + input_hash).
SELECT cortex_buffer.call_idempotency_key('0193a8b2-0000-7000-8000-0000000f0601', '{"step_index": 4}', 3, 'send_email', '{"to": "ops"}')
     = encode(sha256(convert_to(E'cortex_buffer/call/v3\n' || '0193a8b2-0000-7000-8000-0000000f0601' || E'\n'
                                || 'crc:' || cortex_buffer.checkpoint_crc('{"step_index": 4}') || E'\n' || '3' || E'\n'
                                || 'send_email' || E'\n'
                                || encode(sha256(convert_to(cortex_buffer.canonical_json('{"to": "ops"}'), 'UTF8')), 'hex'),
                                'UTF8')), 'hex') AS matches_formula;
-- The input is hashed in canonical form: key order and number spelling do not matter.
SELECT cortex_buffer.call_idempotency_key('0193a8b2-0000-7000-8000-0000000f0601', NULL, 1, 't', '{"a": 1.0, "b": 2}')
     = cortex_buffer.call_idempotency_key('0193a8b2-0000-7000-8000-0000000f0601', NULL, 1, 't', '{"b": 2, "a": 1}') AS same_key;
-- No checkpoint is "-", no tool name is empty, no input hashes null.
SELECT cortex_buffer.call_idempotency_key('0193a8b2-0000-7000-8000-0000000f0601', NULL, 1, NULL, NULL)
     = encode(sha256(convert_to(E'cortex_buffer/call/v3\n0193a8b2-0000-7000-8000-0000000f0601\n-\n1\n\n'
                                || encode(sha256(convert_to('null', 'UTF8')), 'hex'), 'UTF8')), 'hex') AS matches_formula_for_nulls;
SELECT cortex_buffer.call_idempotency_key('0193a8b2-0000-7000-8000-0000000f0601', NULL, 1, NULL, NULL)
     = cortex_buffer.call_idempotency_key('0193a8b2-0000-7000-8000-0000000f0601', NULL, 1, NULL, 'null') AS null_input_is_json_null;
-- Every part changes the key.
SELECT count(DISTINCT k) AS distinct_keys FROM (VALUES
    (cortex_buffer.call_idempotency_key('0193a8b2-0000-7000-8000-0000000f0601', '{}', 1, 't', '{}')),
    (cortex_buffer.call_idempotency_key('0193a8b2-0000-7000-8000-0000000f0602', '{}', 1, 't', '{}')),
    (cortex_buffer.call_idempotency_key('0193a8b2-0000-7000-8000-0000000f0601', '{"a":1}', 1, 't', '{}')),
    (cortex_buffer.call_idempotency_key('0193a8b2-0000-7000-8000-0000000f0601', '{}', 2, 't', '{}')),
    (cortex_buffer.call_idempotency_key('0193a8b2-0000-7000-8000-0000000f0601', '{}', 1, 'u', '{}')),
    (cortex_buffer.call_idempotency_key('0193a8b2-0000-7000-8000-0000000f0601', '{}', 1, 't', '{"x":1}'))) AS v(k);
-- NULL job_id or call_ordinal: 22004.
SELECT cortex_buffer.call_idempotency_key(NULL, NULL, 1, 't', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.call_idempotency_key('0193a8b2-0000-7000-8000-0000000f0601', NULL, NULL, 't', NULL);
\echo :LAST_ERROR_SQLSTATE
-- call_ordinal below 1: 22023.
SELECT cortex_buffer.call_idempotency_key('0193a8b2-0000-7000-8000-0000000f0601', NULL, 0, 't', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT cortex_buffer.call_idempotency_key('0193a8b2-0000-7000-8000-0000000f0601', NULL, -5, 't', NULL);
\echo :LAST_ERROR_SQLSTATE
-- PUBLIC may call it.
SET ROLE regress_stranger;
SELECT length(cortex_buffer.call_idempotency_key('0193a8b2-0000-7000-8000-0000000f0601', NULL, 1, 't', NULL)) AS key_length;
RESET ROLE;
