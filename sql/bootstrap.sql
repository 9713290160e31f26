-- Runs first in every fresh install of cortex_buffer.
DO $$
BEGIN
    IF pg_catalog.getdatabaseencoding() <> 'UTF8' THEN
        RAISE EXCEPTION 'cortex_buffer requires a UTF8 database; this one is %', pg_catalog.getdatabaseencoding()
            USING ERRCODE = '22021',
                  HINT = 'Create the database with ENCODING ''UTF8'' (checkpoint CRCs and session files are UTF-8).';
    END IF;
END
$$;

COMMENT ON SCHEMA cortex_buffer IS
'cortex_buffer: CRC-validated checkpoints, job liveness, spend accounting and indexed agent session buffers.';
-- Anyone may see the schema; tables and file-reading functions carry their own privileges.
GRANT USAGE ON SCHEMA cortex_buffer TO PUBLIC;
