-- session_file_refusal(quarantined, generation, size_bytes, indexed_offset, trusted, gone, tail_pending, corruption_ratio):
-- why recovery will not read a file with these columns; NULL when it will.
\set VERBOSITY default
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- The fixtures in the index (a pass indexes what is new; the count is the same either way).
SELECT count(*) AS session_files FROM cortex_buffer.index_sessions();
SELECT case_name, cortex_buffer.session_file_refusal(q, g, s, o, t, gone, p, r) AS refusal
  FROM (VALUES
    ('readable',                         false, 1, 100, 100, true,  false, false, 0.0),
    ('quarantined',                      true,  1, 100, 100, true,  false, false, 0.0),
    ('quarantined and untrusted',        true,  0, 100,   0, false, true,  false, 0.5),
    ('never indexed',                    false, 0, 100,   0, true,  false, false, 0.0),
    ('never indexed, empty',             false, 0,   0,   0, true,  false, false, 0.0),
    ('half indexed, still there',        false, 1, 100,  50, true,  false, false, 0.0),
    ('untrusted',                        false, 1, 100, 100, false, false, false, 0.5),
    ('gone before fully indexed',        false, 1, 100,  50, true,  true,  false, 0.0),
    ('gone with its tail pending',       false, 1, 100, 100, true,  true,  true,  0.0),
    ('gone, fully indexed',              false, 1, 100, 100, true,  true,  false, 0.0),
    ('untrusted and gone',               false, 1, 100,  50, false, true,  false, 0.5)
  ) AS v(case_name, q, g, s, o, t, gone, p, r);
-- Strict (though not documented so): a NULL argument gives NULL, the same answer as "readable".
SELECT cortex_buffer.session_file_refusal(NULL, 1, 100, 100, true, false, false, 0.0) IS NULL AS null_quarantined,
       cortex_buffer.session_file_refusal(true, 1, 100, 100, true, false, false, NULL) IS NULL AS null_ratio,
       p.proisstrict AS declared_strict
  FROM pg_proc p WHERE p.oid = 'cortex_buffer.session_file_refusal'::regproc;
-- The rule the views use, on the index's own rows.
SELECT regexp_replace(path, '^/tmp/cortex_buffer-regress/sessions/', '') AS file,
       cortex_buffer.session_file_refusal(quarantined_at IS NOT NULL, generation, size_bytes, indexed_offset, trusted,
                                          gone_at IS NOT NULL, tail_pending, corruption_ratio) AS refusal
  FROM cortex_buffer.session_file ORDER BY path;
-- PUBLIC may call it.
SET ROLE regress_stranger;
SELECT cortex_buffer.session_file_refusal(false, 1, 10, 10, false, false, false, 0.5) AS as_stranger;
RESET ROLE;
