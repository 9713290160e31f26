-- partition_events(): converts an installation's event and corrupt_line to the partitioned
-- layout, in one transaction, with a NOTICE per partition filled. Grants: none (superusers
-- only: it changes the extension's own tables).
CREATE FUNCTION cortex_buffer.partition_events(files_per_partition bigint DEFAULT 10000, premake integer DEFAULT 4)
RETURNS TABLE (partition text, from_file_id bigint, to_file_id bigint, rows_moved bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    parent text;
    old text;
    rel pg_catalog.regclass;
    o record;
    g record;
    views record;
    saved_views text[] := ARRAY[]::text[];
    defs text[];
    comments text[];
    first_id bigint;
    next_id bigint;
    lo bigint;
    spans bigint;
    n bigint;
    done bigint;
    leaf text;
BEGIN
    IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER) THEN
        RAISE EXCEPTION 'partition_events() may be called by superusers only'
            USING ERRCODE = '42501', HINT = 'It rebuilds the extension''s own tables; ask the database''s administrator.';
    END IF;
    IF files_per_partition IS NULL OR files_per_partition OPERATOR(pg_catalog.<) 1 OR premake IS NULL
       OR premake OPERATOR(pg_catalog.<) 0 THEN
        RAISE EXCEPTION 'partition_events: files_per_partition must be at least 1 and premake at least 0 (got %, %)',
            files_per_partition, premake
            USING ERRCODE = '22023', HINT = 'The default, 10000 files per partition, suits a fleet that starts thousands of sessions a day.';
    END IF;
    IF (SELECT c.relkind FROM pg_catalog.pg_class c
         WHERE c.oid OPERATOR(pg_catalog.=) 'cortex_buffer.event'::pg_catalog.regclass) OPERATOR(pg_catalog.=) 'p' THEN
        RAISE EXCEPTION 'cortex_buffer.event is already partitioned'
            USING ERRCODE = '55000', HINT = 'Nothing to do: cortex_buffer.event_partitioning holds its settings, and cleanup_session_buffers() makes and drops its partitions.';
    END IF;
    -- Nothing is indexed or read while the rows move. (session_file is not locked: a file
    -- numbered meanwhile has its partition made before its rows come, after the commit; the
    -- indexer makes sure of it before each file it reads. Locking session_file as well would let
    -- a transaction that holds it and then waits for event deadlock.)
    LOCK TABLE cortex_buffer.event, cortex_buffer.corrupt_line IN ACCESS EXCLUSIVE MODE;
    SELECT s.last_value OPERATOR(pg_catalog.+) (CASE WHEN s.is_called THEN 1 ELSE 0 END)
      INTO next_id FROM cortex_buffer.session_file_seq s;
    -- Every row must land in a span: the lowest and highest ids of all three tables count (rows
    -- whose session file is gone included).
    first_id := LEAST((SELECT pg_catalog.min(f.file_id) FROM cortex_buffer.session_file f),
                      (SELECT pg_catalog.min(e.file_id) FROM cortex_buffer.event e),
                      (SELECT pg_catalog.min(c.file_id) FROM cortex_buffer.corrupt_line c));
    first_id := COALESCE(first_id, next_id);
    next_id := GREATEST(next_id,
                        (SELECT pg_catalog.max(e.file_id) OPERATOR(pg_catalog.+) 1 FROM cortex_buffer.event e),
                        (SELECT pg_catalog.max(c.file_id) OPERATOR(pg_catalog.+) 1 FROM cortex_buffer.corrupt_line c));
    first_id := first_id OPERATOR(pg_catalog.-) (first_id OPERATOR(pg_catalog.%) files_per_partition);
    spans := (next_id OPERATOR(pg_catalog.-) first_id) OPERATOR(pg_catalog./) files_per_partition
             OPERATOR(pg_catalog.+) 1 OPERATOR(pg_catalog.+) premake;

    -- Views over the tables are re-pointed at the new ones (their text names the tables).
    FOR views IN
        SELECT DISTINCT r.ev_class AS oid
          FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_rewrite r ON r.oid OPERATOR(pg_catalog.=) d.objid
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND d.refobjid OPERATOR(pg_catalog.=) ANY (ARRAY['cortex_buffer.event'::pg_catalog.regclass,
                                                            'cortex_buffer.corrupt_line'::pg_catalog.regclass])
    LOOP
        saved_views := saved_views OPERATOR(pg_catalog.||) pg_catalog.format('CREATE OR REPLACE VIEW %s %s AS %s',
            views.oid::pg_catalog.regclass,
            (SELECT 'WITH (' OPERATOR(pg_catalog.||) pg_catalog.array_to_string(c.reloptions, ', ') OPERATOR(pg_catalog.||) ')'
               FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) views.oid AND c.reloptions IS NOT NULL),
            pg_catalog.pg_get_viewdef(views.oid));
    END LOOP;

    -- So are functions of the tables' row types (job_events returns SETOF event): made again as
    -- they are, with their owner, grants, comment and membership.
    FOR o IN
        SELECT p.oid, p.oid::pg_catalog.regprocedure::pg_catalog.text AS sig, pg_catalog.pg_get_functiondef(p.oid) AS def,
               p.proowner::pg_catalog.regrole::pg_catalog.text AS owner, p.proacl,
               pg_catalog.obj_description(p.oid, 'pg_proc') AS note
          FROM pg_catalog.pg_proc p
         WHERE EXISTS (SELECT FROM pg_catalog.pg_class c
                        WHERE c.oid OPERATOR(pg_catalog.=) ANY (ARRAY['cortex_buffer.event'::pg_catalog.regclass,
                                                                     'cortex_buffer.corrupt_line'::pg_catalog.regclass])
                          AND (c.reltype OPERATOR(pg_catalog.=) p.prorettype
                               OR c.reltype OPERATOR(pg_catalog.=) ANY (p.proargtypes::pg_catalog.oid[])
                               OR c.reltype OPERATOR(pg_catalog.=) ANY (COALESCE(p.proallargtypes, ARRAY[]::pg_catalog.oid[]))))
    LOOP
        saved_views := saved_views
            OPERATOR(pg_catalog.||) pg_catalog.format('ALTER EXTENSION cortex_buffer DROP FUNCTION %s', o.sig)
            OPERATOR(pg_catalog.||) pg_catalog.format('DROP FUNCTION %s', o.sig)
            OPERATOR(pg_catalog.||) o.def
            OPERATOR(pg_catalog.||) pg_catalog.format('ALTER FUNCTION %s OWNER TO %s', o.sig, o.owner)
            OPERATOR(pg_catalog.||) pg_catalog.format('COMMENT ON FUNCTION %s IS %L', o.sig, o.note)
            OPERATOR(pg_catalog.||) pg_catalog.format('ALTER EXTENSION cortex_buffer ADD FUNCTION %s', o.sig);
        IF o.proacl IS NOT NULL THEN
            saved_views := saved_views OPERATOR(pg_catalog.||) pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', o.sig);
            FOR g IN SELECT a.grantee FROM pg_catalog.aclexplode(o.proacl) a
                      WHERE a.grantee OPERATOR(pg_catalog.<>) (SELECT p.proowner FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=) o.oid) LOOP
                saved_views := saved_views OPERATOR(pg_catalog.||) pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s', o.sig,
                    CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                         ELSE g.grantee::pg_catalog.regrole::pg_catalog.text END);
            END LOOP;
        END IF;
    END LOOP;

    FOREACH parent IN ARRAY ARRAY['event', 'corrupt_line'] LOOP
        old := parent OPERATOR(pg_catalog.||) '_unpartitioned';
        rel := pg_catalog.format('cortex_buffer.%I', parent)::pg_catalog.regclass;
        -- The constraints and indexes as they are, to make again on the new table.
        defs := ARRAY(
            SELECT pg_catalog.format('ALTER TABLE cortex_buffer.%I ADD CONSTRAINT %I %s', parent, c.conname,
                                     pg_catalog.pg_get_constraintdef(c.oid))
              FROM pg_catalog.pg_constraint c
             WHERE c.conrelid OPERATOR(pg_catalog.=) rel AND c.contype OPERATOR(pg_catalog.=) ANY (ARRAY['p', 'u', 'c'])
            UNION ALL
            SELECT pg_catalog.pg_get_indexdef(i.indexrelid)
              FROM pg_catalog.pg_index i
             WHERE i.indrelid OPERATOR(pg_catalog.=) rel
               AND NOT EXISTS (SELECT FROM pg_catalog.pg_constraint c WHERE c.conindid OPERATOR(pg_catalog.=) i.indexrelid));
        comments := ARRAY(
            SELECT pg_catalog.format('COMMENT ON INDEX cortex_buffer.%I IS %L', ic.relname,
                                     pg_catalog.obj_description(ic.oid, 'pg_class'))
              FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid
             WHERE i.indrelid OPERATOR(pg_catalog.=) rel AND pg_catalog.obj_description(ic.oid, 'pg_class') IS NOT NULL);
        comments := comments OPERATOR(pg_catalog.||) pg_catalog.format('COMMENT ON TABLE cortex_buffer.%I IS %L', parent,
                                                               pg_catalog.obj_description(rel, 'pg_class'));
        -- Free the names.
        FOR o IN SELECT ic.relname FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid
                  WHERE i.indrelid OPERATOR(pg_catalog.=) rel LOOP
            EXECUTE pg_catalog.format('ALTER INDEX cortex_buffer.%I RENAME TO %I', o.relname,
                                      pg_catalog.left(o.relname, 40) OPERATOR(pg_catalog.||) '_unpartitioned');
        END LOOP;
        EXECUTE pg_catalog.format('ALTER TABLE cortex_buffer.%I RENAME TO %I', parent, old);
        EXECUTE pg_catalog.format('CREATE TABLE cortex_buffer.%I (LIKE cortex_buffer.%I INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION INCLUDING COMMENTS) PARTITION BY RANGE (file_id)',
                                  parent, old);
        EXECUTE pg_catalog.format('ALTER TABLE cortex_buffer.%I OWNER TO %s', parent,
                                  (SELECT c.relowner::pg_catalog.regrole::pg_catalog.text FROM pg_catalog.pg_class c
                                    WHERE c.oid OPERATOR(pg_catalog.=) rel));
        PERFORM cortex_buffer.copy_table_grants(rel, pg_catalog.format('cortex_buffer.%I', parent)::pg_catalog.regclass);
        FOR n IN 1 .. pg_catalog.array_length(defs, 1) LOOP
            EXECUTE defs[n];
        END LOOP;
        FOR n IN 1 .. pg_catalog.array_length(comments, 1) LOOP
            EXECUTE comments[n];
        END LOOP;

        -- Each span is filled while it stands alone, then attached: its indexes are built once,
        -- and the CHECK constraint spares ATTACH its scan.
        done := 0;
        FOR n IN 0 .. spans OPERATOR(pg_catalog.-) 1 LOOP
            lo := first_id OPERATOR(pg_catalog.+) (n OPERATOR(pg_catalog.*) files_per_partition);
            leaf := pg_catalog.format('%s_p%s', parent, lo);
            EXECUTE pg_catalog.format('CREATE TABLE cortex_buffer.%I (LIKE cortex_buffer.%I INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION)',
                                      leaf, parent);
            EXECUTE pg_catalog.format('INSERT INTO cortex_buffer.%I SELECT * FROM cortex_buffer.%I
                                        WHERE file_id OPERATOR(pg_catalog.>=) %s AND file_id OPERATOR(pg_catalog.<) %s',
                                      leaf, old, lo, lo OPERATOR(pg_catalog.+) files_per_partition);
            GET DIAGNOSTICS rows_moved = ROW_COUNT;
            EXECUTE pg_catalog.format('ALTER TABLE cortex_buffer.%I ADD CONSTRAINT %I CHECK (file_id OPERATOR(pg_catalog.>=) %s AND file_id OPERATOR(pg_catalog.<) %s)',
                                      leaf, leaf OPERATOR(pg_catalog.||) '_span', lo, lo OPERATOR(pg_catalog.+) files_per_partition);
            PERFORM cortex_buffer.copy_table_grants(rel, pg_catalog.format('cortex_buffer.%I', leaf)::pg_catalog.regclass);
            EXECUTE pg_catalog.format('ALTER TABLE cortex_buffer.%I ATTACH PARTITION cortex_buffer.%I FOR VALUES FROM (%s) TO (%s)',
                                      parent, leaf, lo, lo OPERATOR(pg_catalog.+) files_per_partition);
            EXECUTE pg_catalog.format('ALTER TABLE cortex_buffer.%I DROP CONSTRAINT %I', leaf, leaf OPERATOR(pg_catalog.||) '_span');
            done := done OPERATOR(pg_catalog.+) rows_moved;
            RAISE NOTICE 'partition_events: cortex_buffer.% (file ids % to %): % rows; partition % of % for %, % rows moved so far',
                leaf, lo, lo OPERATOR(pg_catalog.+) files_per_partition OPERATOR(pg_catalog.-) 1, rows_moved,
                n OPERATOR(pg_catalog.+) 1, spans, parent, done;
            partition := 'cortex_buffer.' OPERATOR(pg_catalog.||) leaf;
            from_file_id := lo;
            to_file_id := lo OPERATOR(pg_catalog.+) files_per_partition;
            RETURN NEXT;
        END LOOP;
        -- Anything the spans missed would be lost: there must be nothing.
        EXECUTE pg_catalog.format('SELECT pg_catalog.count(*) FROM cortex_buffer.%I', old) INTO n;
        IF n OPERATOR(pg_catalog.<>) done THEN
            RAISE EXCEPTION 'partition_events: % rows of cortex_buffer.% but % moved', n, old, done
                USING ERRCODE = 'XX000', HINT = 'Nothing was changed (the transaction is rolled back). Rows whose file_id is outside every session file''s span: check cortex_buffer.session_file_seq.';
        END IF;
        saved_views := saved_views OPERATOR(pg_catalog.||) pg_catalog.format('ALTER EXTENSION cortex_buffer DROP TABLE cortex_buffer.%I', old);
        saved_views := saved_views OPERATOR(pg_catalog.||) pg_catalog.format('DROP TABLE cortex_buffer.%I', old);
        saved_views := saved_views OPERATOR(pg_catalog.||) pg_catalog.format('ALTER EXTENSION cortex_buffer ADD TABLE cortex_buffer.%I', parent);
    END LOOP;
    -- The views and functions first (they still hold the old tables), then the old tables go.
    FOR n IN 1 .. COALESCE(pg_catalog.array_length(saved_views, 1), 0) LOOP
        EXECUTE saved_views[n];
    END LOOP;
    INSERT INTO cortex_buffer.event_partitioning (files_per_partition, premake)
    VALUES (partition_events.files_per_partition, partition_events.premake);
END
$$;
COMMENT ON FUNCTION cortex_buffer.partition_events(bigint, integer) IS
'Converts event and corrupt_line to the partitioned layout (docs/operations.md: Partitioned events): range partitions of files_per_partition file ids each, premake of them ready above the highest id; the rows move in one transaction that locks both tables, with a NOTICE per partition. Returns the partitions made. Superusers only; refuses (55000) when the tables are partitioned already.';
