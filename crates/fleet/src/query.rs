//! Inventory filters: (column, op, value) conditions checked against the declared columns,
//! then applied to rows where the store reads them.

use serde_json::{Map, Value};
use toolgate_domain::fleet::compare::{ValueKind, check_glob, compare};
use toolgate_domain::fleet::inventory::Table;
use toolgate_domain::fleet::scope::Op;
use toolgate_store::{ColumnCondition, ColumnValue};

/// One checked condition.
#[derive(Clone, Debug)]
pub struct Condition {
    column: &'static str,
    kind: ValueKind,
    op: Op,
    value: String,
}

/// A filter as a caller gives it: column, operator symbol, value (a string or an integer).
pub struct Filter<'a> {
    pub column: &'a str,
    pub op: &'a str,
    pub value: &'a Value,
}

/// Checks filters against the table's declared columns; the error names the closest column.
pub fn conditions(table: &Table, filters: &[Filter<'_>]) -> Result<Vec<Condition>, String> {
    filters
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let column = table.column(f.column).map_err(|e| format!("filters[{i}]: {e}"))?;
            let op = Op::from_symbol(f.op)
                .ok_or_else(|| format!("filters[{i}]: unknown op `{}`: use one of = != ~ < <= > >=", f.op))?;
            let value = match f.value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => return Err(format!("filters[{i}]: the value must be a string or an integer, not {other}")),
            };
            if op.is_ordering() && column.kind == ValueKind::Text {
                return Err(format!(
                    "filters[{i}]: `{}` is text and cannot be ordered: use =, != or ~ (glob)",
                    column.name
                ));
            }
            if column.kind == ValueKind::Integer && op != Op::Glob && value.parse::<i128>().is_err() {
                return Err(format!("filters[{i}]: `{}` is an integer column; `{value}` is not a number", column.name));
            }
            if op == Op::Glob {
                check_glob(&value).map_err(|e| format!("filters[{i}]: {e}"))?;
            }
            Ok(Condition { column: column.name, kind: column.kind, op, value })
        })
        .collect()
}

fn text_of(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// Splits conditions into those the store evaluates itself (= and != on text and integer
/// columns) and those left for [`matches`] (globs, orderings, anything on versions, which
/// compare by Debian's rules rather than as text).
pub fn split_for_store(conditions: Vec<Condition>) -> (Vec<ColumnCondition>, Vec<Condition>) {
    let mut in_store = Vec::new();
    let mut rest = Vec::new();
    for c in conditions {
        let value = match c.kind {
            ValueKind::Text => Some(ColumnValue::Text(c.value.clone())),
            ValueKind::Integer => c.value.parse::<i64>().ok().map(ColumnValue::Integer),
            ValueKind::Version => None,
        };
        match (c.op, value) {
            (Op::Eq | Op::Ne, Some(value)) => {
                in_store.push(ColumnCondition { column: c.column.to_string(), equal: c.op == Op::Eq, value })
            }
            _ => rest.push(c),
        }
    }
    (in_store, rest)
}

/// Whether a row meets every condition.
pub fn matches(conditions: &[Condition], row: &Map<String, Value>) -> bool {
    conditions.iter().all(|c| text_of(row.get(c.column)).is_some_and(|actual| compare(c.kind, c.op, &actual, &c.value)))
}

/// The requested columns, checked (all of the table's when none are requested).
pub fn columns(table: &Table, requested: &[String]) -> Result<Vec<&'static str>, String> {
    if requested.is_empty() {
        return Ok(table.columns.iter().map(|c| c.name).collect());
    }
    requested.iter().map(|name| table.column(name).map(|c| c.name)).collect()
}

/// The row with only `columns`, in their order.
pub fn project(mut row: Map<String, Value>, columns: &[&'static str]) -> Map<String, Value> {
    columns.iter().map(|c| (c.to_string(), row.remove(*c).unwrap_or(Value::Null))).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolgate_domain::fleet::inventory::table;

    use super::*;

    fn filter<'a>(column: &'a str, op: &'a str, value: &'a Value) -> Filter<'a> {
        Filter { column, op, value }
    }

    #[test]
    fn versions_compare_by_debian_rules() {
        let software = table("installed_software").unwrap();
        let below = json!("3.0.15-1~deb12u1");
        let conditions = conditions(software, &[filter("version", "<", &below)]).unwrap();
        let row = |v: &str| json!({"name": "openssl", "version": v}).as_object().unwrap().clone();
        assert!(matches(&conditions, &row("3.0.11-1~deb12u2")));
        assert!(!matches(&conditions, &row("3.0.15-1~deb12u1")));
        assert!(!matches(&conditions, &row("3.0.15-1")));
    }

    #[test]
    fn equality_on_text_and_integers_goes_to_the_store_the_rest_stays() {
        let software = table("installed_software").unwrap();
        let (name, version, glob) = (json!("openssl"), json!("3.0"), json!("lib*"));
        let all = conditions(
            software,
            &[filter("name", "=", &name), filter("version", "=", &version), filter("name", "~", &glob)],
        )
        .unwrap();
        let (in_store, rest) = split_for_store(all);
        assert_eq!(
            in_store,
            [ColumnCondition { column: "name".into(), equal: true, value: ColumnValue::Text("openssl".into()) }]
        );
        assert_eq!(rest.len(), 2, "versions compare by Debian's rules, globs in Rust");
    }

    #[test]
    fn mistakes_name_the_closest_column() {
        let ports = table("listening_ports").unwrap();
        let v = json!(22);
        let e = conditions(ports, &[filter("prot", "=", &v)]).unwrap_err();
        assert!(e.contains("filters[0]") && e.contains("`port`"), "{e}");
        let e = conditions(ports, &[filter("process", ">", &v)]).unwrap_err();
        assert!(e.contains("is text and cannot be ordered"), "{e}");
        let word = json!("ssh");
        let e = conditions(ports, &[filter("port", "=", &word)]).unwrap_err();
        assert!(e.contains("integer column"), "{e}");
        let ok = conditions(ports, &[filter("port", "=", &v)]).unwrap();
        assert!(matches(&ok, json!({"port": 22}).as_object().unwrap()));
        let pathological = json!("*a".repeat(40) + "b");
        let e = conditions(ports, &[filter("process", "~", &pathological)]).unwrap_err();
        assert!(e.contains("filters[0]") && e.contains("at most 8 `*`"), "{e}");
    }
}
