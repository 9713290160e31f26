-- The opt-in partitioned layout of event and corrupt_line (docs/operations.md: Partitioned
-- events): both tables partitioned by ranges of file_id, so that retention drops whole spans of
-- files instead of deleting their rows one by one. Files are numbered in discovery order, so a
-- span of ids is a span of time, and every lookup (which names its files) prunes to the spans
-- that hold them.

-- Present once partition_events() has converted the tables: how wide a span is and how many are
-- made ahead of the files.
CREATE TABLE cortex_buffer.event_partitioning (
    one                 boolean PRIMARY KEY DEFAULT true CHECK (one),
    files_per_partition bigint NOT NULL CHECK (files_per_partition OPERATOR(pg_catalog.>) 0),
    premake             integer NOT NULL CHECK (premake OPERATOR(pg_catalog.>=) 0),
    partitioned_at      timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('cortex_buffer.event_partitioning', '');
COMMENT ON TABLE cortex_buffer.event_partitioning IS
'The partitioned layout''s settings, one row once cortex_buffer.partition_events() has converted event and corrupt_line (no row: the tables are not partitioned).';
COMMENT ON COLUMN cortex_buffer.event_partitioning.one IS 'Always true: the table holds at most one row.';
COMMENT ON COLUMN cortex_buffer.event_partitioning.files_per_partition IS 'File ids per partition: a partition of event and of corrupt_line holds the rows of file ids [n × files_per_partition, (n + 1) × files_per_partition).';
COMMENT ON COLUMN cortex_buffer.event_partitioning.premake IS 'Partitions kept ready above the highest file id (the indexer and cleanup_session_buffers() make them).';
COMMENT ON COLUMN cortex_buffer.event_partitioning.partitioned_at IS 'When partition_events() converted the tables.';

-- Gives `target` the grants `source` has (its owner's own aside): a partition its parent's, a
-- converted table the plain one's. Internal; PUBLIC may not call it.
CREATE FUNCTION cortex_buffer.copy_table_grants(source regclass, target regclass) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    g record;
BEGIN
    FOR g IN
        SELECT a.grantee, a.privilege_type
          FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
         WHERE c.oid OPERATOR(pg_catalog.=) source AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
    LOOP
        EXECUTE pg_catalog.format('GRANT %s ON %s TO %s', g.privilege_type, target,
            CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                 ELSE g.grantee::pg_catalog.regrole::pg_catalog.text END);
    END LOOP;
END
$$;
COMMENT ON FUNCTION cortex_buffer.copy_table_grants(regclass, regclass) IS
'Internal (the partitioned layout): grants target every privilege source grants to roles other than its owner.';

-- Makes the partitions of event and corrupt_line for file ids [from_file_id, to_file_id), empty,
-- each created alone and attached (ATTACH takes a SHARE UPDATE EXCLUSIVE lock on the parent, so
-- readers and inserts into other partitions go on), with the parent's grants. Runs as the
-- extension's owner: only it may attach partitions to the extension's tables, and only
-- cortex_buffer_definer (the indexer's role) may call it.
CREATE FUNCTION cortex_buffer.event_partition_create(from_file_id bigint, to_file_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    parent text;
    leaf text;
    made boolean := false;
BEGIN
    IF from_file_id IS NULL OR to_file_id IS NULL OR from_file_id OPERATOR(pg_catalog.>=) to_file_id THEN
        RAISE EXCEPTION 'event_partition_create: the span [%, %) is empty', from_file_id, to_file_id
            USING ERRCODE = '22023', HINT = 'Pass from_file_id < to_file_id.';
    END IF;
    FOREACH parent IN ARRAY ARRAY['event', 'corrupt_line'] LOOP
        IF (SELECT c.relkind FROM pg_catalog.pg_class c
             WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.format('cortex_buffer.%I', parent)::pg_catalog.regclass)
           OPERATOR(pg_catalog.<>) 'p' THEN
            RAISE EXCEPTION 'cortex_buffer.% is not partitioned', parent
                USING ERRCODE = '55000', HINT = 'Convert the tables first: SELECT * FROM cortex_buffer.partition_events();';
        END IF;
        leaf := pg_catalog.format('%s_p%s', parent, from_file_id);
        -- Two transactions that need the same span make it once: the second waits for the
        -- first to end, then finds the partition.
        PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('cortex_buffer partition ' OPERATOR(pg_catalog.||) leaf, 0));
        IF pg_catalog.to_regclass(pg_catalog.format('cortex_buffer.%I', leaf)) IS NOT NULL THEN
            CONTINUE WHEN EXISTS (SELECT FROM pg_catalog.pg_inherits i
                                   WHERE i.inhrelid OPERATOR(pg_catalog.=) pg_catalog.format('cortex_buffer.%I', leaf)::pg_catalog.regclass
                                     AND i.inhparent OPERATOR(pg_catalog.=) pg_catalog.format('cortex_buffer.%I', parent)::pg_catalog.regclass);
            RAISE EXCEPTION 'cortex_buffer.% exists but is not a partition of cortex_buffer.%', leaf, parent
                USING ERRCODE = '55000', HINT = 'Attach it (ALTER TABLE ... ATTACH PARTITION), or rename or drop it, so that the span can be made.';
        END IF;
        EXECUTE pg_catalog.format(
            'CREATE TABLE cortex_buffer.%I (LIKE cortex_buffer.%I INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION)',
            leaf, parent);
        PERFORM cortex_buffer.copy_table_grants(pg_catalog.format('cortex_buffer.%I', parent)::pg_catalog.regclass,
                                                pg_catalog.format('cortex_buffer.%I', leaf)::pg_catalog.regclass);
        EXECUTE pg_catalog.format('ALTER TABLE cortex_buffer.%I ATTACH PARTITION cortex_buffer.%I FOR VALUES FROM (%s) TO (%s)',
            parent, leaf, from_file_id, to_file_id);
        made := true;
    END LOOP;
    RETURN made;
END
$$;
COMMENT ON FUNCTION cortex_buffer.event_partition_create(bigint, bigint) IS
'Internal (the indexer and cleanup_session_buffers() call it as cortex_buffer_definer): makes the empty partitions event_p<from_file_id> and corrupt_line_p<from_file_id> for file ids [from_file_id, to_file_id), with the parent''s grants. True when it made one.';

-- Drops one partition of event or corrupt_line (retention has decided that every file of its
-- span qualifies). Refuses anything that is not a plain partition of those two tables.
CREATE FUNCTION cortex_buffer.event_partition_drop(leaf regclass) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (
        SELECT FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.inhrelid
         WHERE i.inhrelid OPERATOR(pg_catalog.=) leaf
           AND i.inhparent OPERATOR(pg_catalog.=) ANY (ARRAY['cortex_buffer.event'::pg_catalog.regclass,
                                                             'cortex_buffer.corrupt_line'::pg_catalog.regclass])
           AND c.relkind OPERATOR(pg_catalog.=) 'r') THEN
        RAISE EXCEPTION '% is not a partition of cortex_buffer.event or cortex_buffer.corrupt_line', leaf
            USING ERRCODE = '42809', HINT = 'Only retention drops partitions, through cleanup_session_buffers().';
    END IF;
    EXECUTE pg_catalog.format('DROP TABLE %s', leaf);
END
$$;
COMMENT ON FUNCTION cortex_buffer.event_partition_drop(regclass) IS
'Internal (cleanup_session_buffers() calls it as cortex_buffer_definer): drops a partition of event or corrupt_line whose span of files retention has released.';
