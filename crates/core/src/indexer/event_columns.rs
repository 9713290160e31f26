//! The columns of `cortex_buffer.event` the indexer fills, listed once. The SQL path's
//! `INSERT`, its parameter types, the direct path's column order and the check that the table
//! is still the one the extension ships are all derived from [`EventColumn::ALL`]. Pure.
//!
//! The direct path writes tuples straight into the heap and its indexes, so it is only safe
//! on exactly the table `index_schema.sql` creates: [`direct_insert_refusal`] compares what the
//! catalogue says about the table with this list and names the first difference. Any
//! difference (a CHECK, a domain, a rule, a trigger, row security, another access method, a
//! partition, a changed type, typmod, collation or NOT NULL, a column with a default, no INSERT
//! privilege) sends the rows through SQL, where PostgreSQL applies all of it as for any INSERT.

/// A column's SQL type, with the `pg_type` OID PostgreSQL gives it (fixed in `pg_type.dat`;
/// a `#[pg_test]` checks them against the server's headers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlType {
    Int8,
    Int4,
    Text,
    Timestamptz,
    Uuid,
    Bool,
    Jsonb,
}

impl SqlType {
    pub fn name(self) -> &'static str {
        match self {
            SqlType::Int8 => "int8",
            SqlType::Int4 => "int4",
            SqlType::Text => "text",
            SqlType::Timestamptz => "timestamptz",
            SqlType::Uuid => "uuid",
            SqlType::Bool => "bool",
            SqlType::Jsonb => "jsonb",
        }
    }

    pub fn oid(self) -> u32 {
        match self {
            SqlType::Int8 => 20,
            SqlType::Int4 => 23,
            SqlType::Text => 25,
            SqlType::Timestamptz => 1184,
            SqlType::Uuid => 2950,
            SqlType::Bool => 16,
            SqlType::Jsonb => 3802,
        }
    }

    /// The OID of the array type.
    pub fn array_oid(self) -> u32 {
        match self {
            SqlType::Int8 => 1016,
            SqlType::Int4 => 1007,
            SqlType::Text => 1009,
            SqlType::Timestamptz => 1185,
            SqlType::Uuid => 2951,
            SqlType::Bool => 1000,
            SqlType::Jsonb => 3807,
        }
    }
}

/// `pg_collation` OIDs (fixed in `pg_collation.dat`).
pub const DEFAULT_COLLATION_OID: u32 = 100;
pub const C_COLLATION_OID: u32 = 950;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventColumn {
    FileId,
    ByteOffset,
    LineNo,
    Type,
    Ts,
    JobId,
    SessionId,
    AgentId,
    Seq,
    StepIndex,
    InvocationId,
    ToolName,
    CheckpointId,
    Success,
    InputTokens,
    OutputTokens,
    CacheWriteTokens,
    CacheReadTokens,
    RequestId,
    Payload,
    PayloadProblem,
}

impl EventColumn {
    /// Every column the indexer fills, in the order it supplies them.
    pub const ALL: [EventColumn; 21] = [
        EventColumn::FileId,
        EventColumn::ByteOffset,
        EventColumn::LineNo,
        EventColumn::Type,
        EventColumn::Ts,
        EventColumn::JobId,
        EventColumn::SessionId,
        EventColumn::AgentId,
        EventColumn::Seq,
        EventColumn::StepIndex,
        EventColumn::InvocationId,
        EventColumn::ToolName,
        EventColumn::CheckpointId,
        EventColumn::Success,
        EventColumn::InputTokens,
        EventColumn::OutputTokens,
        EventColumn::CacheWriteTokens,
        EventColumn::CacheReadTokens,
        EventColumn::RequestId,
        EventColumn::Payload,
        EventColumn::PayloadProblem,
    ];

    pub fn name(self) -> &'static str {
        match self {
            EventColumn::FileId => "file_id",
            EventColumn::ByteOffset => "byte_offset",
            EventColumn::LineNo => "line_no",
            EventColumn::Type => "type",
            EventColumn::Ts => "ts",
            EventColumn::JobId => "job_id",
            EventColumn::SessionId => "session_id",
            EventColumn::AgentId => "agent_id",
            EventColumn::Seq => "seq",
            EventColumn::StepIndex => "step_index",
            EventColumn::InvocationId => "invocation_id",
            EventColumn::ToolName => "tool_name",
            EventColumn::CheckpointId => "checkpoint_id",
            EventColumn::Success => "success",
            EventColumn::InputTokens => "input_tokens",
            EventColumn::OutputTokens => "output_tokens",
            EventColumn::CacheWriteTokens => "cache_write_tokens",
            EventColumn::CacheReadTokens => "cache_read_tokens",
            EventColumn::RequestId => "request_id",
            EventColumn::Payload => "payload",
            EventColumn::PayloadProblem => "payload_problem",
        }
    }

    pub fn sql_type(self) -> SqlType {
        match self {
            EventColumn::FileId
            | EventColumn::ByteOffset
            | EventColumn::LineNo
            | EventColumn::Seq
            | EventColumn::InputTokens
            | EventColumn::OutputTokens
            | EventColumn::CacheWriteTokens
            | EventColumn::CacheReadTokens => SqlType::Int8,
            EventColumn::StepIndex => SqlType::Int4,
            EventColumn::Ts => SqlType::Timestamptz,
            EventColumn::JobId => SqlType::Uuid,
            EventColumn::Success => SqlType::Bool,
            EventColumn::Payload => SqlType::Jsonb,
            EventColumn::Type
            | EventColumn::SessionId
            | EventColumn::AgentId
            | EventColumn::InvocationId
            | EventColumn::ToolName
            | EventColumn::CheckpointId
            | EventColumn::RequestId
            | EventColumn::PayloadProblem => SqlType::Text,
        }
    }

    /// The column's collation OID (0 for types without one). Invocation ids are compared, never
    /// sorted for people: byte-wise "C".
    pub fn collation(self) -> u32 {
        match (self, self.sql_type()) {
            (EventColumn::InvocationId, _) => C_COLLATION_OID,
            (_, SqlType::Text) => DEFAULT_COLLATION_OID,
            _ => 0,
        }
    }

    /// The key columns: never NULL.
    pub fn not_null(self) -> bool {
        matches!(self, EventColumn::FileId | EventColumn::ByteOffset | EventColumn::LineNo)
    }

    pub fn by_name(name: &str) -> Option<EventColumn> {
        EventColumn::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// The SQL path's statement: `$1` is the file id, every other column an array parameter,
/// unnested in the select list in lockstep (`FROM unnest(...)` would first materialise every
/// row). Operators, functions and types are schema-qualified.
pub fn insert_sql() -> String {
    let names: Vec<&str> = EventColumn::ALL.iter().map(|c| c.name()).collect();
    let values: Vec<String> = EventColumn::ALL
        .iter()
        .enumerate()
        .map(|(i, c)| match c {
            EventColumn::FileId => format!("${}", i + 1),
            _ => format!("pg_catalog.unnest(${}::pg_catalog.{}[])", i + 1, c.sql_type().name()),
        })
        .collect();
    format!("INSERT INTO cortex_buffer.event ({}) SELECT {}", names.join(", "), values.join(", "))
}

/// One attribute of the table, as the catalogue describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    pub name: String,
    pub type_oid: u32,
    pub typmod: i32,
    pub collation: u32,
    pub not_null: bool,
    pub has_default: bool,
    pub generated: bool,
    pub identity: bool,
}

/// What the catalogue says about `cortex_buffer.event`, for deciding the insert path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableShape {
    /// `relkind = 'r'` (not partitioned, not a view or foreign table).
    pub plain_table: bool,
    /// `relispartition`: inserts would skip the partition constraint.
    pub partition: bool,
    /// The heap access method.
    pub heap: bool,
    pub rules: bool,
    pub triggers: bool,
    pub row_security: bool,
    /// CHECK constraints, validated or not.
    pub check_constraints: usize,
    /// The current user may INSERT into the table.
    pub may_insert: bool,
    /// Live attributes in attribute-number order.
    pub attributes: Vec<Attribute>,
}

/// Why rows must go through SQL, or `None` when the table is exactly the one the extension
/// ships and the direct path may write it.
pub fn direct_insert_refusal(t: &TableShape) -> Option<String> {
    let flags = [
        (!t.plain_table, "it is not a plain table"),
        (t.partition, "it is a partition"),
        (!t.heap, "it does not use the heap access method"),
        (t.rules, "it has rules"),
        (t.triggers, "it has triggers"),
        (t.row_security, "it has row security"),
        (t.check_constraints > 0, "it has CHECK constraints"),
        (!t.may_insert, "the current user may not INSERT into it"),
    ];
    if let Some((_, why)) = flags.iter().find(|(applies, _)| *applies) {
        return Some((*why).to_owned());
    }
    for a in &t.attributes {
        let Some(c) = EventColumn::by_name(&a.name) else {
            // A column of the operator's: INSERT would fill in its default or generated value.
            if a.not_null || a.has_default || a.generated || a.identity {
                return Some(format!("column {} has a default, a generated value or NOT NULL", a.name));
            }
            continue;
        };
        if a.type_oid != c.sql_type().oid() || a.typmod != -1 {
            return Some(format!("column {} is not of type {}", a.name, c.sql_type().name()));
        }
        if a.collation != c.collation() {
            return Some(format!("column {} has another collation", a.name));
        }
        if a.not_null != c.not_null() {
            return Some(format!("column {} has another NOT NULL constraint", a.name));
        }
        if a.generated || a.identity {
            return Some(format!("column {} is generated or an identity column", a.name));
        }
    }
    EventColumn::ALL
        .iter()
        .find(|c| !t.attributes.iter().any(|a| a.name == c.name()))
        .map(|c| format!("column {} is missing", c.name()))
}

/// Attribute positions (0-based) of [`EventColumn::ALL`] in `t`, for a table the direct path
/// accepted.
pub fn positions(t: &TableShape) -> Vec<usize> {
    EventColumn::ALL.iter().filter_map(|c| t.attributes.iter().position(|a| a.name == c.name())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table as index_schema.sql creates it.
    pub fn shipped() -> TableShape {
        TableShape {
            plain_table: true,
            partition: false,
            heap: true,
            rules: false,
            triggers: false,
            row_security: false,
            check_constraints: 0,
            may_insert: true,
            attributes: EventColumn::ALL
                .iter()
                .map(|c| Attribute {
                    name: c.name().to_owned(),
                    type_oid: c.sql_type().oid(),
                    typmod: -1,
                    collation: c.collation(),
                    not_null: c.not_null(),
                    has_default: false,
                    generated: false,
                    identity: false,
                })
                .collect(),
        }
    }

    #[test]
    fn the_shipped_table_takes_the_direct_path() {
        let t = shipped();
        assert_eq!(direct_insert_refusal(&t), None);
        assert_eq!(positions(&t), (0..21).collect::<Vec<_>>());
    }

    #[test]
    fn every_difference_sends_rows_through_sql() {
        type Change = Box<dyn Fn(&mut TableShape)>;
        let cases: Vec<(&str, Change)> = vec![
            ("not a plain table", Box::new(|t| t.plain_table = false)),
            ("partition", Box::new(|t| t.partition = true)),
            ("heap", Box::new(|t| t.heap = false)),
            ("rules", Box::new(|t| t.rules = true)),
            ("triggers", Box::new(|t| t.triggers = true)),
            ("row security", Box::new(|t| t.row_security = true)),
            ("CHECK", Box::new(|t| t.check_constraints = 1)),
            ("INSERT", Box::new(|t| t.may_insert = false)),
            ("column seq is not of type int8", Box::new(|t| t.attributes[8].type_oid = 1700)),
            ("column type is not of type text", Box::new(|t| t.attributes[3].typmod = 14)),
            ("collation", Box::new(|t| t.attributes[10].collation = DEFAULT_COLLATION_OID)),
            ("NOT NULL", Box::new(|t| t.attributes[11].not_null = true)),
            ("NOT NULL", Box::new(|t| t.attributes[0].not_null = false)),
            ("generated", Box::new(|t| t.attributes[4].identity = true)),
            ("column payload_problem is missing", Box::new(|t| t.attributes.truncate(20))),
            (
                "column extra has a default",
                Box::new(|t| {
                    t.attributes.push(Attribute {
                        name: "extra".into(),
                        type_oid: 25,
                        typmod: -1,
                        collation: 100,
                        not_null: false,
                        has_default: true,
                        generated: false,
                        identity: false,
                    })
                }),
            ),
        ];
        for (expect, change) in cases {
            let mut t = shipped();
            change(&mut t);
            let why = direct_insert_refusal(&t);
            assert!(why.as_deref().is_some_and(|w| w.contains(expect)), "{expect}: {why:?}");
        }
    }

    #[test]
    fn extra_plain_columns_and_reordered_columns_are_fine() {
        let mut t = shipped();
        t.attributes.swap(0, 20);
        t.attributes.push(Attribute {
            name: "note".into(),
            type_oid: 25,
            typmod: -1,
            collation: 100,
            not_null: false,
            has_default: false,
            generated: false,
            identity: false,
        });
        assert_eq!(direct_insert_refusal(&t), None);
        let p = positions(&t);
        assert_eq!((p[0], p[20], p.len()), (20, 0, 21));
    }

    #[test]
    fn the_insert_statement_names_every_column_once_and_qualifies_its_functions() {
        let sql = insert_sql();
        let list = sql.split_once('(').and_then(|(_, rest)| rest.split_once(')')).map(|(l, _)| l).unwrap_or("");
        let names: Vec<&str> = list.split(", ").collect();
        assert_eq!(names, EventColumn::ALL.iter().map(|c| c.name()).collect::<Vec<_>>());
        assert!(sql.contains("SELECT $1, pg_catalog.unnest($2::pg_catalog.int8[])"));
        assert!(sql.ends_with("pg_catalog.unnest($21::pg_catalog.text[])"));
        assert_eq!(sql.matches("pg_catalog.unnest(").count(), 20);
    }
}
