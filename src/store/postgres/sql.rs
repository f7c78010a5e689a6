//! A bound [`Filter`] as a SQL condition over the `metadata` jsonb column and the `id` column.
//!
//! Each field condition becomes one SQL/JSON path predicate, `metadata @? '<path>'`: lax mode
//! walks arrays on the way and at the end, as [`crate::index::payload::values_at`] does, so an
//! array matches when any element does; a value of another type than the condition's never
//! matches; the `@?` form is what a `jsonb_path_ops` GIN index answers. Values are written into
//! the path as JSON literals and the whole path travels as a bound parameter, never spliced
//! into the statement.

use crate::index::payload::{FieldType, NumericRange};
use crate::query::filter::{Check, Condition, Filter, Scalar};

/// A condition's SQL and the parameters it binds (`$first`, `$first+1`, ...).
#[derive(Debug, Default)]
pub struct Sql {
    pub text: String,
    /// SQL/JSON paths, each bound as text and cast (`$n::text::jsonpath`).
    pub paths: Vec<String>,
    /// Id lists of `has_id`, each bound as `$n::text[]`.
    pub ids: Vec<Vec<String>>,
    /// Parameters, in order: which list each comes from.
    pub order: Vec<Param>,
}

/// Where a bound parameter comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    Path(usize),
    Ids(usize),
}

/// `filter` as a SQL boolean expression over capot's own columns (`id`, `metadata`) whose first
/// parameter is `$first`.
pub fn filter_sql(filter: &Filter, first: usize) -> Sql {
    filter_sql_on(filter, first, "id", "metadata")
}

/// `filter` as a SQL boolean expression over the columns `id` (any type, compared as text) and
/// `metadata` (jsonb) whose first parameter is `$first`.
pub fn filter_sql_on(filter: &Filter, first: usize, id: &str, metadata: &str) -> Sql {
    let mut sql = Sql::default();
    let text = Writer {
        sql: &mut sql,
        first,
        id,
        metadata,
    }
    .filter(filter);
    sql.text = text;
    sql
}

struct Writer<'a> {
    sql: &'a mut Sql,
    first: usize,
    id: &'a str,
    metadata: &'a str,
}

impl Writer<'_> {
    fn param(&mut self, p: Param) -> String {
        self.sql.order.push(p);
        format!("${}", self.first + self.sql.order.len() - 1)
    }

    fn filter(&mut self, f: &Filter) -> String {
        let mut parts: Vec<String> = Vec::new();
        for c in &f.must {
            parts.push(self.condition(c));
        }
        if !f.should.is_empty() {
            let any: Vec<String> = f.should.iter().map(|c| self.condition(c)).collect();
            parts.push(format!("({})", any.join(" OR ")));
        }
        for c in &f.must_not {
            let c = self.condition(c);
            parts.push(format!("NOT {c}"));
        }
        if let Some(m) = &f.min_should {
            if m.min_count > m.conditions.len() {
                parts.push("FALSE".into());
            } else if m.min_count > 0 {
                let counted: Vec<String> = m
                    .conditions
                    .iter()
                    .map(|c| format!("{}::int", self.condition(c)))
                    .collect();
                parts.push(format!("({}) >= {}", counted.join(" + "), m.min_count));
            }
        }
        if parts.is_empty() {
            "TRUE".into()
        } else {
            format!("({})", parts.join(" AND "))
        }
    }

    fn condition(&mut self, c: &Condition) -> String {
        match c {
            Condition::Filter(f) => self.filter(f),
            Condition::HasId(ids) => {
                self.sql.ids.push(ids.clone());
                let p = self.param(Param::Ids(self.sql.ids.len() - 1));
                format!("({}::text = ANY({p}::text[]))", self.id)
            }
            Condition::IsNull { key } => self.path(format!("{} ? (@ == null)", key_path(key))),
            Condition::IsEmpty { key } => {
                let p = self.path(format!("{} ? (@ != null)", key_path(key)));
                format!("(NOT {p})")
            }
            Condition::Field { key, check, kind } => match kind {
                // A field whose type is unknown matches nothing (see `Filter::bind`).
                None => "FALSE".into(),
                Some(kind) => match field_predicate(check, *kind) {
                    Some(pred) => self.path(format!("{} ? ({pred})", key_path(key))),
                    None => "FALSE".into(),
                },
            },
        }
    }

    fn path(&mut self, path: String) -> String {
        self.sql.paths.push(path);
        let p = self.param(Param::Path(self.sql.paths.len() - 1));
        format!("({} @? {p}::text::jsonpath)", self.metadata)
    }
}

/// `$."a"."b"` for the dotted key `a.b`.
fn key_path(key: &str) -> String {
    let mut out = String::from("$");
    for part in key.split('.') {
        out.push('.');
        out.push_str(&literal(part));
    }
    out
}

/// A string as a SQL/JSON path string literal (JSON's escaping, which the path grammar shares).
fn literal(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// The test of one value `@` for a field condition of type `kind`; `None` when no value of
/// that type can pass.
fn field_predicate(check: &Check, kind: FieldType) -> Option<String> {
    let is = type_test(kind);
    match check {
        Check::Value(s) => Some(format!("{is} && {}", equals(s, kind)?)),
        Check::Any(list) => {
            let any: Vec<String> = list.iter().filter_map(|s| equals(s, kind)).collect();
            if any.is_empty() {
                return None;
            }
            Some(format!("{is} && ({})", any.join(" || ")))
        }
        Check::Except(list) => {
            let any: Vec<String> = list.iter().filter_map(|s| equals(s, kind)).collect();
            if any.is_empty() {
                return Some(is);
            }
            Some(format!("{is} && !({})", any.join(" || ")))
        }
        Check::Range(r) => {
            let value = match kind {
                FieldType::Datetime => "@.datetime()",
                FieldType::Integer | FieldType::Float => "@",
                FieldType::Keyword | FieldType::Bool => return None,
            };
            let bounds = range_bounds(&r.bounds, value, kind == FieldType::Datetime);
            Some(if bounds.is_empty() {
                is
            } else {
                format!("{is} && {bounds}")
            })
        }
    }
}

/// The type a value must have to count for a field of type `kind` (an integer field counts
/// whole numbers only).
fn type_test(kind: FieldType) -> String {
    match kind {
        FieldType::Keyword | FieldType::Datetime => "@.type() == \"string\"".into(),
        FieldType::Integer => "@.type() == \"number\" && @.floor() == @".into(),
        FieldType::Float => "@.type() == \"number\"".into(),
        FieldType::Bool => "@.type() == \"boolean\"".into(),
    }
}

/// `@ == <value>`, `None` when the value cannot be of type `kind`.
fn equals(s: &Scalar, kind: FieldType) -> Option<String> {
    match (s, kind) {
        (Scalar::Keyword(k), FieldType::Keyword) => Some(format!("@ == {}", literal(k))),
        (Scalar::Integer(i), FieldType::Integer) => Some(format!("@ == {i}")),
        (Scalar::Bool(b), FieldType::Bool) => Some(format!("@ == {b}")),
        _ => None,
    }
}

/// `@ > 1 && @ <= 5` for the bounds given; datetimes compare as timestamps with time zone.
fn range_bounds(r: &NumericRange, value: &str, datetime: bool) -> String {
    let bound = |x: f64| {
        if datetime {
            let nanos = (x * 1e9).round() as i128;
            let t = time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
                .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
            let text = t
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default();
            format!("{}.datetime()", literal(&text))
        } else {
            number(x)
        }
    };
    let mut parts = Vec::new();
    for (b, op) in [(r.gt, ">"), (r.gte, ">="), (r.lt, "<"), (r.lte, "<=")] {
        if let Some(x) = b {
            parts.push(format!("{value} {op} {}", bound(x)));
        }
    }
    parts.join(" && ")
}

/// A number as a path literal (no exponent form, which the path grammar reads differently).
fn number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bound(v: serde_json::Value) -> Filter {
        let mut f = Filter::parse(&v, "filter").unwrap();
        f.bind(&Default::default(), true, "filter").unwrap();
        f
    }

    #[test]
    fn values_travel_as_parameters_never_in_the_statement() {
        let f = bound(json!({"must": [
            {"key": "lang", "match": {"value": "en' OR 1=1 --"}},
            {"has_id": ["a", "b"]}
        ]}));
        let sql = filter_sql(&f, 3);
        assert_eq!(
            sql.text,
            "((metadata @? $3::text::jsonpath) AND (id::text = ANY($4::text[])))"
        );
        assert_eq!(sql.order, [Param::Path(0), Param::Ids(0)]);
        assert_eq!(
            sql.paths[0],
            r#"$."lang" ? (@.type() == "string" && @ == "en' OR 1=1 --")"#
        );
        assert!(!sql.text.contains("en'"));
    }

    #[test]
    fn keys_and_values_are_escaped_as_path_literals() {
        let f = bound(json!({"must": [{"key": "a\"b.c", "match": {"value": "x\"y\\z"}}]}));
        let sql = filter_sql(&f, 1);
        assert_eq!(
            sql.paths[0],
            r#"$."a\"b"."c" ? (@.type() == "string" && @ == "x\"y\\z")"#
        );
    }

    #[test]
    fn every_clause_has_its_sql_form() {
        let f = bound(json!({
            "should": [{"key": "n", "range": {"gte": 1.5, "lt": 10}}, {"is_null": {"key": "x"}}],
            "must_not": [{"is_empty": {"key": "tags"}}],
            "min_should": {"conditions": [
                {"key": "b", "match": {"value": true}},
                {"key": "k", "match": {"except": ["a"]}}
            ], "min_count": 2}
        }));
        let sql = filter_sql(&f, 1);
        assert_eq!(
            sql.text,
            "(((metadata @? $1::text::jsonpath) OR (metadata @? $2::text::jsonpath)) AND NOT (NOT (metadata @? $3::text::jsonpath)) AND ((metadata @? $4::text::jsonpath)::int + (metadata @? $5::text::jsonpath)::int) >= 2)"
        );
        assert_eq!(
            sql.paths[0],
            r#"$."n" ? (@.type() == "number" && @ >= 1.5 && @ < 10)"#
        );
        assert_eq!(sql.paths[2], r#"$."tags" ? (@ != null)"#);
    }

    #[test]
    fn datetime_ranges_compare_as_timestamps() {
        let f =
            bound(json!({"must": [{"key": "at", "range": {"gte": "2024-05-01T12:00:00+02:00"}}]}));
        let sql = filter_sql(&f, 1);
        assert_eq!(
            sql.paths[0],
            r#"$."at" ? (@.type() == "string" && @.datetime() >= "2024-05-01T10:00:00Z".datetime())"#
        );
    }
}
