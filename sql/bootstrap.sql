-- Runs first in every fresh install of cortex_buffer.
DO $$
DECLARE
    owner_name name;
    leftovers bigint;
BEGIN
    IF pg_catalog.getdatabaseencoding() OPERATOR(pg_catalog.<>) 'UTF8' THEN
        RAISE EXCEPTION 'cortex_buffer requires a UTF8 database; this one is %', pg_catalog.getdatabaseencoding()
            USING ERRCODE = '22021',
                  HINT = 'Create the database with ENCODING ''UTF8'' (checkpoint CRCs and session files are UTF-8).';
    END IF;

    -- The control file names the schema, so CREATE EXTENSION adopts a schema that already
    -- exists. One somebody else created first could hold functions (a cortex_buffer.nextval(text),
    -- say) that the extension's objects would bind to and run with its rights: install only into
    -- a schema the installing role owns and that holds nothing yet.
    SELECT r.rolname INTO owner_name
      FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) n.nspowner
     WHERE n.nspname OPERATOR(pg_catalog.=) 'cortex_buffer';
    IF owner_name OPERATOR(pg_catalog.<>) CURRENT_USER THEN
        RAISE EXCEPTION 'schema cortex_buffer already exists and belongs to role %', owner_name
            USING ERRCODE = '42P06',
                  HINT = 'Drop the schema (or have its owner drop it) and run CREATE EXTENSION cortex_buffer again: the extension creates its schema itself.';
    END IF;
    SELECT (SELECT pg_catalog.count(*) FROM pg_catalog.pg_class WHERE relnamespace OPERATOR(pg_catalog.=) 'cortex_buffer'::pg_catalog.regnamespace)
         OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM pg_catalog.pg_proc WHERE pronamespace OPERATOR(pg_catalog.=) 'cortex_buffer'::pg_catalog.regnamespace)
         -- (types of their own: not a table's row type, not an array type)
         OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM pg_catalog.pg_type
                                  WHERE typnamespace OPERATOR(pg_catalog.=) 'cortex_buffer'::pg_catalog.regnamespace
                                    AND typrelid OPERATOR(pg_catalog.=) 0 AND typcategory OPERATOR(pg_catalog.<>) 'A')
         OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM pg_catalog.pg_operator WHERE oprnamespace OPERATOR(pg_catalog.=) 'cortex_buffer'::pg_catalog.regnamespace)
      INTO leftovers;
    IF leftovers OPERATOR(pg_catalog.>) 0 THEN
        RAISE EXCEPTION 'schema cortex_buffer already holds % object(s)', leftovers
            USING ERRCODE = '42P06',
                  HINT = 'Install into a new schema: drop cortex_buffer (after moving anything you need out of it) and run CREATE EXTENSION cortex_buffer again.';
    END IF;
END
$$;

-- The roles (cluster-wide: created only when missing, never dropped; see
-- docs/operations.md#privileges). cortex_buffer_definer is the role the extension's own writes run as: it must
-- not be able to log in, be a superuser, or have members.
DO $$
DECLARE
    r record;
    role_name text;
BEGIN
    FOREACH role_name IN ARRAY ARRAY['cortex_buffer_definer', 'cortex_buffer_agent_call', 'cortex_buffer_agent',
                                     'cortex_buffer_control_plane', 'cortex_buffer_operator', 'cortex_buffer_pusher'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) role_name) THEN
            EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', role_name);
        END IF;
        SELECT rolcanlogin, rolsuper, rolbypassrls, rolcreaterole, rolcreatedb, rolreplication INTO r
          FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) role_name;
        IF r.rolcanlogin OR r.rolsuper OR r.rolbypassrls OR r.rolcreaterole OR r.rolcreatedb OR r.rolreplication THEN
            RAISE EXCEPTION 'role % exists with LOGIN or other attributes cortex_buffer''s roles must not have', role_name
                USING ERRCODE = '42501',
                      HINT = pg_catalog.format('cortex_buffer''s roles are privilege containers: ALTER ROLE %I NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB NOREPLICATION, then install again; grant the role to login roles instead.', role_name);
        END IF;
    END LOOP;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members
                WHERE roleid OPERATOR(pg_catalog.=) 'cortex_buffer_definer'::pg_catalog.regrole) THEN
        RAISE EXCEPTION 'role cortex_buffer_definer has members'
            USING ERRCODE = '42501',
                  HINT = 'Nobody may act as cortex_buffer_definer: REVOKE cortex_buffer_definer FROM each member, then install again.';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members
                WHERE roleid OPERATOR(pg_catalog.=) 'cortex_buffer_agent_call'::pg_catalog.regrole) THEN
        RAISE EXCEPTION 'role cortex_buffer_agent_call has members'
            USING ERRCODE = '42501',
                  HINT = 'Nobody may act as cortex_buffer_agent_call: REVOKE cortex_buffer_agent_call FROM each member, then install again.';
    END IF;
END
$$;

COMMENT ON SCHEMA cortex_buffer IS
'cortex_buffer: CRC-validated checkpoints, job liveness, spend accounting and indexed agent session buffers.';
-- Anyone may see the schema; tables and functions carry their own privileges.
GRANT USAGE ON SCHEMA cortex_buffer TO PUBLIC;
