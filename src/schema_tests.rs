//! Schema-wide checks that hold for every capability: documented objects.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    /// Every table, view, index, function and column in the schema has a COMMENT (DESIGN.md:
    /// operators read them with \d+ and \df+).
    #[pg_test]
    fn every_object_in_the_schema_is_commented() {
        let missing = Spi::get_one::<String>(
            "SELECT string_agg(what, ', ' ORDER BY what) FROM (
                 SELECT format('%s %s', CASE c.relkind WHEN 'i' THEN 'index' WHEN 'v' THEN 'view' ELSE 'table' END, c.relname) AS what
                   FROM pg_class c
                  WHERE c.relnamespace = 'cortex_buffer'::regnamespace
                    AND c.relkind IN ('r', 'v', 'm', 'p')
                    AND obj_description(c.oid, 'pg_class') IS NULL
                 UNION ALL
                 SELECT format('index %s', c.relname)
                   FROM pg_class c
                  WHERE c.relnamespace = 'cortex_buffer'::regnamespace AND c.relkind = 'i'
                    AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = c.oid)
                    AND obj_description(c.oid, 'pg_class') IS NULL
                 UNION ALL
                 SELECT format('column %s.%s', c.relname, a.attname)
                   FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                  WHERE c.relnamespace = 'cortex_buffer'::regnamespace AND c.relkind IN ('r', 'v', 'm', 'p')
                    AND col_description(c.oid, a.attnum) IS NULL
                 UNION ALL
                 SELECT format('function %s', p.oid::regprocedure)
                   FROM pg_proc p
                  WHERE p.pronamespace = 'cortex_buffer'::regnamespace
                    AND obj_description(p.oid, 'pg_proc') IS NULL
                 UNION ALL
                 SELECT 'schema cortex_buffer'
                  WHERE obj_description('cortex_buffer'::regnamespace, 'pg_namespace') IS NULL
             ) m",
        );
        assert_eq!(missing.ok().flatten(), None, "objects without COMMENT");
    }
}
