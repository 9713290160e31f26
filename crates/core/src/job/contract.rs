//! The column contract a job table must meet to be bound with `cortex_buffer.job_table`
//! (docs/design.md §Interoperability facts, "The binding contract"). Pure: the shell reads the catalogue into
//! [`Column`]s and this decides, listing every problem at once.

/// The nine job states, in the control plane's enum order.
pub const JOB_STATES: [&str; 9] = [
    "PENDING",
    "SCHEDULED",
    "RUNNING",
    "WAITING_FOR_APPROVAL",
    "COMPLETED",
    "FAILED",
    "TIMED_OUT",
    "RETRYING",
    "DEAD_LETTER",
];

/// A column as the catalogue describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    /// `format_type()` of the column, e.g. `uuid`, `integer`, `public.job_status`.
    pub type_name: String,
    /// Labels when the type is an enum.
    pub enum_labels: Option<Vec<String>>,
}

/// What the bound table looks like, as the functions need to know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// `checkpoint_crc` is `integer` (store the two's-complement bit pattern) or `bigint`.
    pub crc_is_int4: bool,
    /// `status` is an enum (true) or text-like (false).
    pub status_is_enum: bool,
    /// Optional columns present on the table, with their `format_type()`.
    pub optional: Vec<(&'static str, String)>,
}

impl Shape {
    pub fn has(&self, column: &str) -> bool {
        self.optional.iter().any(|(c, _)| *c == column)
    }

    /// How to write a running total into optional column `column`, if the table has it.
    pub fn fit(&self, column: &str) -> Option<ColumnFit> {
        self.optional.iter().find(|(c, _)| *c == column).map(|(_, t)| ColumnFit::of(t))
    }
}

/// What a counter column of the bound table can hold: totals are clamped to `max` (so a huge
/// total can never make the write fail) and rounded to `scale`. Exact totals live in
/// cortex_buffer's own tables; these columns mirror them for the control plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnFit {
    /// The largest value, as SQL literal text; `None` when cortex_buffer's own totals (bigint,
    /// numeric) cannot exceed the column.
    pub max: Option<String>,
    /// Decimals of a `numeric(p,s)` column.
    pub scale: Option<u32>,
}

impl ColumnFit {
    pub fn of(type_name: &str) -> ColumnFit {
        if type_name == "integer" {
            return ColumnFit { max: Some(i32::MAX.to_string()), scale: None };
        }
        // numeric(p,s): p - s integer digits and s decimals, all nines at most.
        let modifiers = type_name.strip_prefix("numeric(").and_then(|r| r.strip_suffix(')'));
        if let Some((p, s)) = modifiers.and_then(|m| m.split_once(',')) {
            if let (Ok(p), Ok(s)) = (p.trim().parse::<u32>(), s.trim().parse::<u32>()) {
                let int_digits = p.saturating_sub(s) as usize;
                let int = if int_digits == 0 { "0".to_owned() } else { "9".repeat(int_digits) };
                let max = if s == 0 { int } else { format!("{int}.{}", "9".repeat(s as usize)) };
                return ColumnFit { max: Some(max), scale: Some(s) };
            }
        }
        ColumnFit { max: None, scale: None }
    }
}

const TIMESTAMPTZ: &[&str] = &["timestamp with time zone"];
const INT4: &[&str] = &["integer"];

/// Required columns and the types each may have (`status` is checked separately).
const REQUIRED: &[(&str, &[&str])] = &[
    ("id", &["uuid"]),
    ("agent_id", &["uuid"]),
    ("checkpoint", &["jsonb"]),
    ("checkpoint_crc", &["integer", "bigint"]),
    ("attempt", INT4),
    ("max_attempts", INT4),
    ("heartbeat_at", TIMESTAMPTZ),
    ("started_at", TIMESTAMPTZ),
    ("completed_at", TIMESTAMPTZ),
    ("updated_at", TIMESTAMPTZ),
    ("error", &["jsonb"]),
];

/// Optional columns, used when present (with these types; a present column of another type is
/// a problem, not silently ignored).
const OPTIONAL: &[(&str, &[&str])] = &[
    ("created_at", TIMESTAMPTZ),
    ("tokens_in", &["integer", "bigint"]),
    ("tokens_out", &["integer", "bigint"]),
    ("cost_usd", &["numeric", "numeric(12,6)"]),
    ("llm_call_count", &["integer", "bigint"]),
    ("tool_call_count", &["integer", "bigint"]),
];

const TEXT_TYPES: &[&str] = &["text", "character varying"];

fn type_ok(actual: &str, allowed: &[&str]) -> bool {
    // numeric(p,s) and varchar(n) carry modifiers; compare the base name too.
    let base = actual.split('(').next().unwrap_or(actual).trim();
    allowed.iter().any(|a| *a == actual || *a == base)
}

/// Checks `columns` against the contract. `Err` lists every problem, one per line.
pub fn validate(columns: &[Column]) -> Result<Shape, Vec<String>> {
    let find = |name: &str| columns.iter().find(|c| c.name == name);
    let mut problems = Vec::new();

    for (name, allowed) in REQUIRED {
        match find(name) {
            None => problems.push(format!("missing column {name} ({})", allowed.join(" or "))),
            Some(c) if !type_ok(&c.type_name, allowed) => {
                problems.push(format!("column {name} is {}, expected {}", c.type_name, allowed.join(" or ")))
            }
            Some(_) => {}
        }
    }

    let mut status_is_enum = false;
    match find("status") {
        None => problems.push("missing column status (an enum or text carrying the nine job states)".to_owned()),
        Some(c) => match &c.enum_labels {
            Some(labels) => {
                status_is_enum = true;
                let missing: Vec<&str> =
                    JOB_STATES.iter().copied().filter(|s| !labels.iter().any(|l| l == s)).collect();
                if !missing.is_empty() {
                    problems.push(format!("enum {} of column status lacks {}", c.type_name, missing.join(", ")));
                }
            }
            None if type_ok(&c.type_name, TEXT_TYPES) => {}
            None => problems.push(format!("column status is {}, expected an enum or text", c.type_name)),
        },
    }

    let mut optional = Vec::new();
    for (name, allowed) in OPTIONAL {
        if let Some(c) = find(name) {
            if type_ok(&c.type_name, allowed) {
                optional.push((*name, c.type_name.clone()));
            } else {
                problems.push(format!("optional column {name} is {}, expected {}", c.type_name, allowed.join(" or ")));
            }
        }
    }

    let crc_is_int4 = find("checkpoint_crc").is_some_and(|c| c.type_name == "integer");
    if problems.is_empty() {
        Ok(Shape { crc_is_int4, status_is_enum, optional })
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, ty: &str) -> Column {
        Column { name: name.into(), type_name: ty.into(), enum_labels: None }
    }

    /// The control plane's job table after migrations 005, 008 and 025.
    fn control_plane_job() -> Vec<Column> {
        let mut cols: Vec<Column> = [
            ("id", "uuid"),
            ("agent_id", "uuid"),
            ("session_id", "uuid"),
            ("priority", "integer"),
            ("payload", "jsonb"),
            ("result", "jsonb"),
            ("checkpoint", "jsonb"),
            ("checkpoint_crc", "integer"),
            ("error", "jsonb"),
            ("attempt", "integer"),
            ("max_attempts", "integer"),
            ("timeout_seconds", "integer"),
            ("created_at", "timestamp with time zone"),
            ("updated_at", "timestamp with time zone"),
            ("started_at", "timestamp with time zone"),
            ("completed_at", "timestamp with time zone"),
            ("heartbeat_at", "timestamp with time zone"),
            ("approval_expires_at", "timestamp with time zone"),
            ("tokens_in", "integer"),
            ("tokens_out", "integer"),
            ("cost_usd", "numeric(12,6)"),
            ("tool_call_count", "integer"),
            ("llm_call_count", "integer"),
            ("parent_job_id", "uuid"),
            ("delegation_depth", "integer"),
        ]
        .iter()
        .map(|(n, t)| col(n, t))
        .collect();
        cols.push(Column {
            name: "status".into(),
            type_name: "job_status".into(),
            enum_labels: Some(JOB_STATES.iter().map(|s| (*s).to_owned()).collect()),
        });
        cols
    }

    #[test]
    fn the_control_plane_table_binds_with_every_optional_column() {
        let shape = validate(&control_plane_job()).unwrap_or_else(|p| panic!("{p:?}"));
        assert!(shape.crc_is_int4);
        assert!(shape.status_is_enum);
        for c in ["created_at", "tokens_in", "tokens_out", "cost_usd", "llm_call_count", "tool_call_count"] {
            assert!(shape.has(c), "{c}");
        }
    }

    #[test]
    fn every_problem_is_listed_at_once() {
        let mut cols = control_plane_job();
        cols.retain(|c| c.name != "heartbeat_at" && c.name != "error");
        for c in cols.iter_mut() {
            if c.name == "attempt" {
                c.type_name = "text".into();
            }
        }
        let problems = validate(&cols).err().unwrap_or_default();
        assert_eq!(
            problems,
            vec![
                "column attempt is text, expected integer".to_owned(),
                "missing column heartbeat_at (timestamp with time zone)".to_owned(),
                "missing column error (jsonb)".to_owned(),
            ]
        );
    }

    #[test]
    fn status_may_be_text_or_an_enum_with_all_nine_labels() {
        let mut cols = control_plane_job();
        let status = cols.iter_mut().find(|c| c.name == "status").unwrap_or_else(|| panic!("status"));
        status.enum_labels = Some(vec!["PENDING".into(), "RUNNING".into()]);
        let problems = validate(&cols).err().unwrap_or_default();
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("lacks SCHEDULED, WAITING_FOR_APPROVAL"), "{problems:?}");

        let status = cols.iter_mut().find(|c| c.name == "status").unwrap_or_else(|| panic!("status"));
        status.enum_labels = None;
        status.type_name = "text".into();
        assert!(!validate(&cols).map(|s| s.status_is_enum).unwrap_or(true));

        let status = cols.iter_mut().find(|c| c.name == "status").unwrap_or_else(|| panic!("status"));
        status.type_name = "integer".into();
        assert!(validate(&cols).is_err());
    }

    #[test]
    fn checkpoint_crc_may_be_bigint_and_optional_columns_may_be_absent() {
        let mut cols = control_plane_job();
        cols.retain(|c| {
            !["tokens_in", "tokens_out", "cost_usd", "llm_call_count", "tool_call_count", "created_at"]
                .contains(&c.name.as_str())
        });
        for c in cols.iter_mut() {
            if c.name == "checkpoint_crc" {
                c.type_name = "bigint".into();
            }
        }
        let shape = validate(&cols).unwrap_or_else(|p| panic!("{p:?}"));
        assert!(!shape.crc_is_int4);
        assert!(shape.optional.is_empty());
    }

    #[test]
    fn a_present_optional_column_of_the_wrong_type_is_a_problem() {
        let mut cols = control_plane_job();
        for c in cols.iter_mut() {
            if c.name == "cost_usd" {
                c.type_name = "double precision".into();
            }
        }
        let problems = validate(&cols).err().unwrap_or_default();
        assert_eq!(
            problems,
            vec!["optional column cost_usd is double precision, expected numeric or numeric(12,6)".to_owned()]
        );
    }

    #[test]
    fn counter_columns_say_what_they_can_hold() {
        let shape = validate(&control_plane_job()).unwrap_or_else(|p| panic!("{p:?}"));
        assert_eq!(shape.fit("tokens_in"), Some(ColumnFit { max: Some("2147483647".into()), scale: None }));
        assert_eq!(shape.fit("cost_usd"), Some(ColumnFit { max: Some("999999.999999".into()), scale: Some(6) }));
        assert_eq!(shape.fit("no_such_column"), None);
        assert_eq!(ColumnFit::of("bigint"), ColumnFit { max: None, scale: None });
        assert_eq!(ColumnFit::of("numeric"), ColumnFit { max: None, scale: None });
        assert_eq!(ColumnFit::of("numeric(4,4)"), ColumnFit { max: Some("0.9999".into()), scale: Some(4) });
        assert_eq!(ColumnFit::of("numeric(10,0)"), ColumnFit { max: Some("9999999999".into()), scale: Some(0) });
    }
}
