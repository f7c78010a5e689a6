//! A bound [`Filter`] as a SQL condition over the `metadata` jsonb column and the `id` column.
//!
//! Each field condition becomes one SQL/JSON path predicate, `metadata @? '<path>'`: lax mode
//! walks arrays on the way and at the end, as [`crate::index::payload::values_at`] does, so an
//! array matches when any element does; a value of another type than the condition's never
//! matches; the `@?` form is what a `jsonb_path_ops` GIN index answers. Values are written into
//! the path as JSON literals and the whole path travels as a bound parameter, never spliced
//! into the statement.
//!
//! A `range` on an integer, float or datetime field with a declared payload index (a top-level
//! key or a dotted path, `a.b`) also has a B-tree form (see [`range_index_ddl`]): scalar numbers compare
//! through the B-tree expression index, arrays (rare: the value, or an object on the way, as in
//! `[{"b": 1}, {"b": 2}]`) through the path over a partial index of the rows holding one, so
//! PostgreSQL's planner can answer a selective range from the B-tree instead of walking HNSW.

use std::collections::BTreeMap;

use crate::index::payload::{FieldType, IntegerRange, NumericRange};
use crate::query::filter::{Check, Condition, Filter, Scalar};

/// A condition's SQL and the parameters it binds (`$first`, `$first+1`, ...).
#[derive(Debug, Default)]
pub struct Sql {
    pub text: String,
    /// SQL/JSON paths, each bound as text and cast (`$n::text::jsonpath`).
    pub paths: Vec<String>,
    /// Id lists of `has_id`, each bound as `$n::text[]`.
    pub ids: Vec<Vec<String>>,
    /// Range bounds compared through a B-tree index, each bound as `float8`.
    pub numbers: Vec<f64>,
    /// Keywords matched through a B-tree index, each list bound as `$n::text[]`.
    pub keywords: Vec<Vec<String>>,
    /// Parameters, in order: which list each comes from.
    pub order: Vec<Param>,
}

/// Where a bound parameter comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    Path(usize),
    Ids(usize),
    Number(usize),
    Keywords(usize),
}

/// `filter` as a SQL boolean expression over capot's own columns (`id`, `metadata`) whose first
/// parameter is `$first`.
pub fn filter_sql(filter: &Filter, first: usize) -> Sql {
    filter_sql_on(filter, first, "id", "metadata", &Default::default())
}

/// `filter` as a SQL boolean expression over the columns `id` (any type, compared as text) and
/// `metadata` (jsonb) whose first parameter is `$first`; ranges on the keys of `ranged` (those
/// with a [`range_index_ddl`] index for that type) take the B-tree form.
pub fn filter_sql_on(
    filter: &Filter,
    first: usize,
    id: &str,
    metadata: &str,
    ranged: &BTreeMap<String, FieldType>,
) -> Sql {
    let mut sql = Sql::default();
    let text = Writer {
        sql: &mut sql,
        first,
        id,
        metadata,
        ranged,
        strict: false,
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
    ranged: &'a BTreeMap<String, FieldType>,
    /// Under a NOT or a count: every condition must be true or false, never NULL.
    strict: bool,
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
        let strict = std::mem::replace(&mut self.strict, true);
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
        self.strict = strict;
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
                    Some(pred) => {
                        let path = self.path(format!("{} ? ({pred})", key_path(key)));
                        let indexed = self.ranged.get(key) == Some(kind);
                        match check {
                            Check::Range(r) if indexed && *kind == FieldType::Integer => {
                                // The B-tree holds float64s: past 2^53 its range is wider
                                // than the integers', and the path (exact) narrows it.
                                let exact = r.integers.exact_in_floats();
                                self.btree_range(key, &r.integers.covering(), *kind, path, exact)
                            }
                            Check::Range(r) if indexed => {
                                self.btree_range(key, &r.bounds, *kind, path, true)
                            }
                            Check::Value(v) if indexed && *kind == FieldType::Keyword => {
                                self.btree_keywords(key, std::slice::from_ref(v), path)
                            }
                            Check::Any(list) if indexed && *kind == FieldType::Keyword => {
                                self.btree_keywords(key, list, path)
                            }
                            _ => path,
                        }
                    }
                    None => "FALSE".into(),
                },
            },
        }
    }

    /// A range over a B-tree-indexed key: scalar numbers through the index expression, arrays
    /// through `path` (the condition's path predicate) — the same rows the path alone admits.
    /// Unless `exact`, `r` admits more than the condition and the path checks the scalars too.
    fn btree_range(
        &mut self,
        key: &str,
        r: &NumericRange,
        kind: FieldType,
        path: String,
        exact: bool,
    ) -> String {
        let num = btree_expr(self.metadata, key, kind);
        let mut parts = Vec::new();
        for (b, op) in [(r.gt, ">"), (r.gte, ">="), (r.lt, "<"), (r.lte, "<=")] {
            if let Some(x) = b {
                self.sql.numbers.push(x);
                let p = self.param(Param::Number(self.sql.numbers.len() - 1));
                parts.push(format!("{num} {op} {p}::float8"));
            }
        }
        if parts.is_empty() {
            parts.push(format!("{num} IS NOT NULL"));
        }
        if !exact {
            parts.push(path.clone());
        }
        let scalar = if self.strict {
            format!("COALESCE({}, FALSE)", parts.join(" AND "))
        } else {
            parts.join(" AND ")
        };
        format!(
            "(({scalar}) OR ({} AND {path}))",
            array_test(self.metadata, key)
        )
    }

    /// A keyword match (`value`, `any`) over a B-tree-indexed key: scalar strings through the
    /// index expression (so PostgreSQL estimates the match from the column's statistics, its
    /// most common values among them), arrays through `path` — the same rows the path alone
    /// admits.
    fn btree_keywords(&mut self, key: &str, values: &[Scalar], path: String) -> String {
        let words: Vec<String> = values
            .iter()
            .filter_map(|v| match v {
                Scalar::Keyword(k) => Some(k.clone()),
                _ => None,
            })
            .collect();
        self.sql.keywords.push(words);
        let p = self.param(Param::Keywords(self.sql.keywords.len() - 1));
        let expr = keyword_expr(self.metadata, key);
        let scalar = if self.strict {
            format!("COALESCE({expr} = ANY({p}::text[]), FALSE)")
        } else {
            format!("{expr} = ANY({p}::text[])")
        };
        format!(
            "(({scalar}) OR ({} AND {path}))",
            array_test(self.metadata, key)
        )
    }

    fn path(&mut self, path: String) -> String {
        self.sql.paths.push(path);
        let p = self.param(Param::Path(self.sql.paths.len() - 1));
        format!("({} @? {p}::text::jsonpath)", self.metadata)
    }
}

/// Whether a payload key can have a B-tree range index: a top-level key or a dotted path whose
/// parts are letters, digits and `_` (it is written into the index's expression, so into
/// statements, as a literal).
pub fn rangeable(key: &str) -> bool {
    key.len() <= 63
        && key.split('.').all(|part| {
            !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// `metadata -> 'key'` (`->>` when `text`) for a top-level key, `metadata #> '{a,b}'` (`#>>`)
/// for a dotted path: the JSON (or the text) at a [`rangeable`] key. Top-level keys keep the
/// `->` form, which the indexes of tables loaded before dotted keys had one are written in.
fn json_at(metadata: &str, key: &str, text: bool) -> String {
    match (key.contains('.'), text) {
        (false, false) => format!("{metadata} -> '{key}'"),
        (false, true) => format!("{metadata} ->> '{key}'"),
        (true, false) => format!("{metadata} #> '{{{}}}'", key.replace('.', ",")),
        (true, true) => format!("{metadata} #>> '{{{}}}'", key.replace('.', ",")),
    }
}

/// The value at a [`rangeable`] key as `float8` when it counts for a field of type `kind` (a
/// JSON number; a whole one for an integer field), else NULL: the B-tree index's expression,
/// written identically where a query compares it, so the planner both uses the index and
/// estimates a range from its statistics.
fn number_expr(metadata: &str, key: &str, kind: FieldType) -> String {
    let value = format!("({})::float8", json_at(metadata, key, true));
    let whole = if kind == FieldType::Integer {
        format!(" AND {value} = floor({value})")
    } else {
        String::new()
    };
    format!(
        "(CASE WHEN jsonb_typeof({}) = 'number'{whole} THEN {value} END)",
        json_at(metadata, key, false)
    )
}

/// The string at a [`rangeable`] key, else NULL: a keyword field's B-tree expression.
fn keyword_expr(metadata: &str, key: &str) -> String {
    format!(
        "(CASE WHEN jsonb_typeof({}) = 'string' THEN {} END)",
        json_at(metadata, key, false),
        json_at(metadata, key, true)
    )
}

/// The Unix seconds of the RFC 3339 date-time at a [`rangeable`] key, else NULL: a datetime
/// field's B-tree expression ([`EPOCH_FUNCTION`]).
fn datetime_expr(metadata: &str, key: &str) -> String {
    format!(
        "(CASE WHEN jsonb_typeof({}) = 'string' THEN capot_epoch({}) END)",
        json_at(metadata, key, false),
        json_at(metadata, key, true)
    )
}

/// `capot_epoch(text)`: the Unix seconds of an RFC 3339 date-time with its offset
/// (`2024-05-01T12:00:00Z`, `...+02:00`; any separator, either case), NULL for any other
/// string — what [`crate::index::payload::parse_datetime`] reads. A text-to-`timestamptz` cast is only
/// `STABLE` (a string without an offset reads in the session's time zone), which no index may
/// use; with the offset required, the result depends on the string alone, so the function is
/// honestly `IMMUTABLE` and a datetime field's B-tree can be built over it. A string the
/// pattern lets through but no calendar has (`2024-02-30`) is caught as an error, which makes it
/// `PARALLEL UNSAFE` (the default: a parallel worker cannot open the subtransaction that
/// catching takes). Created once per database; a concurrent creation is not an error.
pub const EPOCH_FUNCTION: &str = r#"DO $capot$ BEGIN
  CREATE FUNCTION capot_epoch(t text) RETURNS float8
    LANGUAGE plpgsql IMMUTABLE STRICT AS $f$
  BEGIN
    IF t !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}.[0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$' THEN
      RETURN NULL;
    END IF;
    RETURN extract(epoch FROM upper(overlay(t PLACING 'T' FROM 11 FOR 1))::timestamptz)::float8;
  EXCEPTION WHEN others THEN
    RETURN NULL;
  END $f$;
EXCEPTION WHEN duplicate_function OR unique_violation THEN NULL;
END $capot$"#;

/// The B-tree expression of a field of type `kind` at `key`: its number
/// ([`number_expr`], integer and float fields), its Unix seconds ([`datetime_expr`], datetime
/// fields) or its string ([`keyword_expr`]).
fn btree_expr(metadata: &str, key: &str, kind: FieldType) -> String {
    match kind {
        FieldType::Keyword => keyword_expr(metadata, key),
        FieldType::Datetime => datetime_expr(metadata, key),
        _ => number_expr(metadata, key, kind),
    }
}

/// Whether the value at a [`rangeable`] key, or an object on the way to it, is an array (the
/// path then has several values, which the B-tree expression does not see): the predicate of
/// the partial index of such rows.
fn array_test(metadata: &str, key: &str) -> String {
    let parts: Vec<&str> = key.split('.').collect();
    let tests: Vec<String> = (1..=parts.len())
        .map(|n| {
            format!(
                "jsonb_typeof({}) = 'array'",
                json_at(metadata, &parts[..n].join("."), false)
            )
        })
        .collect();
    format!("({})", tests.join(" OR "))
}

/// The name of the B-tree [`range_index_ddl`] makes for `key` of type `kind` (`_num`, the
/// value's index, whatever its type: the name indexes of numbers had first; its partial index of
/// arrays ends in `_arr`).
pub fn range_index_name(index_prefix: &str, key: &str, kind: FieldType) -> String {
    let tag = blake3::hash(format!("{index_prefix}\0{key}\0{kind:?}").as_bytes()).to_hex();
    format!("capot_{}_num", &tag[..12])
}

/// The statements that index the [`rangeable`] key `key` (a field of type `kind`: integer,
/// float or datetime for ranges, keyword for matches; top-level or dotted) of `table`'s
/// metadata: a B-tree over its value ([`btree_expr`]; a datetime's first needs
/// [`EPOCH_FUNCTION`]), and a partial index of the rows where it is an array. `concurrently`:
/// built without blocking writes (each statement must then run on its own, outside a
/// transaction).
pub fn range_index_ddl(
    table: &str,
    index_prefix: &str,
    key: &str,
    kind: FieldType,
    concurrently: bool,
) -> Vec<String> {
    let num_index = range_index_name(index_prefix, key, kind);
    let arr_index = num_index.replace("_num", "_arr");
    let how = if concurrently { " CONCURRENTLY" } else { "" };
    let mut statements = Vec::new();
    if kind == FieldType::Datetime {
        statements.push(EPOCH_FUNCTION.to_string());
    }
    statements.push(format!(
        "CREATE INDEX{how} IF NOT EXISTS \"{num_index}\" ON {table} ({})",
        btree_expr("metadata", key, kind)
    ));
    statements.push(format!(
        "CREATE INDEX{how} IF NOT EXISTS \"{arr_index}\" ON {table} ((1)) WHERE {}",
        array_test("metadata", key)
    ));
    statements
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
            let bounds = if kind == FieldType::Integer {
                integer_bounds(&r.integers)
            } else {
                range_bounds(&r.bounds, value, kind == FieldType::Datetime)
            };
            Some(if bounds.is_empty() {
                is
            } else {
                format!("{is} && {bounds}")
            })
        }
    }
}

/// An RFC 3339 date-time with its offset, as a `like_regex` pattern: the strings a datetime
/// field counts ([`crate::index::payload::parse_datetime`]) that `.datetime()` reads as an
/// instant. Tested before `.datetime()` is called: a date alone, or a time without its offset,
/// is a value `.datetime()` cannot compare with an instant, and that error is not one `@?`
/// suppresses — one such document made every datetime range on the table fail.
const RFC3339_PATTERN: &str =
    "^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$";

/// The type a value must have to count for a field of type `kind` (an integer field counts
/// whole numbers only, a datetime field RFC 3339 strings).
fn type_test(kind: FieldType) -> String {
    match kind {
        FieldType::Keyword => "@.type() == \"string\"".into(),
        FieldType::Datetime => format!(
            "@.type() == \"string\" && @ like_regex {}",
            literal(RFC3339_PATTERN)
        ),
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

/// `@ >= lo && @ <= hi` for a range on an integer field, the integers written out: a path's
/// numbers are `numeric`, so this compares 64-bit ids exactly, where a float64 bound cannot.
fn integer_bounds(r: &IntegerRange) -> String {
    let mut parts = Vec::new();
    if let Some(lo) = r.lower() {
        parts.push(format!("@ >= {lo}"));
    }
    if let Some(hi) = r.upper() {
        parts.push(format!("@ <= {hi}"));
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

/// Whether a value or id of `filter` holds the NUL character, which no `text` or `jsonb` of
/// PostgreSQL can (its SQL would fail with an encoding error). Keys cannot: the filter's parse
/// refuses control characters in them.
pub fn filter_holds_nul(filter: &Filter) -> bool {
    let scalar = |s: &Scalar| matches!(s, Scalar::Keyword(k) if k.contains('\0'));
    let condition = |c: &Condition| match c {
        Condition::Field { check, .. } => match check {
            Check::Value(v) => scalar(v),
            Check::Any(vs) | Check::Except(vs) => vs.iter().any(scalar),
            Check::Range(_) => false,
        },
        Condition::IsEmpty { .. } | Condition::IsNull { .. } => false,
        Condition::HasId(ids) => ids.iter().any(|id| id.contains('\0')),
        Condition::Filter(f) => filter_holds_nul(f),
    };
    filter
        .must
        .iter()
        .chain(&filter.should)
        .chain(&filter.must_not)
        .chain(filter.min_should.iter().flat_map(|m| &m.conditions))
        .any(condition)
}

/// Whether a JSON value holds the NUL character in a key or a string.
pub fn json_holds_nul(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::String(s) => s.contains('\0'),
        serde_json::Value::Array(a) => a.iter().any(json_holds_nul),
        serde_json::Value::Object(o) => {
            o.iter().any(|(k, v)| k.contains('\0') || json_holds_nul(v))
        }
        _ => false,
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

    /// `v` bound with `key` declared as `kind`, and the map saying `key` has its B-tree.
    fn bound_on(
        v: serde_json::Value,
        key: &str,
        kind: FieldType,
    ) -> (Filter, BTreeMap<String, FieldType>) {
        let mut f = Filter::parse(&v, "filter").unwrap();
        let schema = crate::index::payload::FieldSchema {
            kind,
            tenant: false,
        };
        f.bind(&[(key.to_string(), schema)].into(), true, "filter")
            .unwrap();
        (f, [(key.to_string(), kind)].into())
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
    fn ranges_on_indexed_numbers_take_the_btree_form_and_stay_two_valued_under_not() {
        let (f, ranged) = bound_on(
            json!({
                "must": [{"key": "year", "range": {"gte": 2010, "lt": 2015}}],
                "must_not": [{"key": "year", "range": {"gt": 2013}}]
            }),
            "year",
            FieldType::Integer,
        );
        let sql = filter_sql_on(&f, 1, "id", "m", &ranged);
        let num = number_expr("m", "year", FieldType::Integer);
        assert!(num.contains("floor"), "{num}");
        assert_eq!(
            sql.text,
            format!(
                "((({num} >= $2::float8 AND {num} <= $3::float8) OR \
                 ((jsonb_typeof(m -> 'year') = 'array') AND (m @? $1::text::jsonpath))) AND \
                 NOT ((COALESCE({num} >= $5::float8, FALSE)) OR \
                 ((jsonb_typeof(m -> 'year') = 'array') AND (m @? $4::text::jsonpath))))"
            )
        );
        // An index made for another type of the key does not answer it.
        let floats: BTreeMap<String, FieldType> = [("year".to_string(), FieldType::Float)].into();
        assert!(!filter_sql_on(&f, 1, "id", "m", &floats)
            .text
            .contains("float8"));
        // An integer field's range is the integers it admits: `lt 2015` is `<= 2014`.
        assert_eq!(sql.numbers, [2010.0, 2014.0, 2014.0]);
        // Without the index, the path alone; keys that cannot be literals never get one.
        assert!(!filter_sql(&f, 1).text.contains("float8"));
        assert!(rangeable("year_2") && rangeable("a.b_2") && !rangeable("x'y") && !rangeable(""));
        assert!(!rangeable("a..b") && !rangeable(".a") && !rangeable("a.") && !rangeable("a.b'"));
        // A dotted path reads through `#>`, and an array on the way sends the row to the path.
        assert_eq!(
            number_expr("m", "a.b", FieldType::Float),
            "(CASE WHEN jsonb_typeof(m #> '{a,b}') = 'number' THEN (m #>> '{a,b}')::float8 END)"
        );
        assert_eq!(
            array_test("m", "a.b"),
            "(jsonb_typeof(m -> 'a') = 'array' OR jsonb_typeof(m #> '{a,b}') = 'array')"
        );
        // A declared keyword matches through its B-tree expression; `except` keeps the path.
        let (kw, on_lang) = bound_on(
            json!({"must": [
                {"key": "lang", "match": {"any": ["de", "fr"]}},
                {"key": "lang", "match": {"except": ["en"]}}
            ]}),
            "lang",
            FieldType::Keyword,
        );
        let kw_sql = filter_sql_on(&kw, 1, "id", "m", &on_lang);
        let expr = keyword_expr("m", "lang");
        assert_eq!(
            kw_sql.text,
            format!(
                "((({expr} = ANY($2::text[])) OR ((jsonb_typeof(m -> 'lang') = 'array') AND \
                 (m @? $1::text::jsonpath))) AND (m @? $3::text::jsonpath))"
            )
        );
        assert_eq!(kw_sql.keywords, [vec!["de".to_string(), "fr".to_string()]]);
        assert!(
            range_index_ddl("\"docs\"", "docs", "lang", FieldType::Keyword, false)[0]
                .contains(&keyword_expr("metadata", "lang"))
        );
        // Top-level keys keep the expression their existing indexes were built with.
        assert_eq!(
            array_test("m", "year"),
            "(jsonb_typeof(m -> 'year') = 'array')"
        );
        let ddl = range_index_ddl("\"docs\"", "docs", "year", FieldType::Integer, false);
        assert!(
            ddl[0].contains(&number_expr("metadata", "year", FieldType::Integer)),
            "{ddl:?}"
        );
        assert_ne!(
            ddl,
            range_index_ddl("\"docs\"", "docs", "year", FieldType::Float, false)
        );
        let online = range_index_ddl("\"docs\"", "docs", "year", FieldType::Integer, true);
        assert!(online
            .iter()
            .all(|s| s.starts_with("CREATE INDEX CONCURRENTLY")));
    }

    #[test]
    fn datetime_ranges_compare_as_timestamps() {
        let f =
            bound(json!({"must": [{"key": "at", "range": {"gte": "2024-05-01T12:00:00+02:00"}}]}));
        let sql = filter_sql(&f, 1);
        assert_eq!(
            sql.paths[0],
            format!(
                r#"$."at" ? (@.type() == "string" && @ like_regex {} && @.datetime() >= "2024-05-01T10:00:00Z".datetime())"#,
                literal(RFC3339_PATTERN)
            )
        );
        // Declared, the range compares Unix seconds through the B-tree's expression, whose
        // function the index's statements create first.
        let (f, on_at) = bound_on(
            json!({"must": [{"key": "at", "range": {"gte": "2024-05-01T12:00:00+02:00"}}]}),
            "at",
            FieldType::Datetime,
        );
        let sql = filter_sql_on(&f, 1, "id", "m", &on_at);
        let expr = datetime_expr("m", "at");
        assert_eq!(
            expr,
            "(CASE WHEN jsonb_typeof(m -> 'at') = 'string' THEN capot_epoch(m ->> 'at') END)"
        );
        assert_eq!(
            sql.text,
            format!(
                "((({expr} >= $2::float8) OR ((jsonb_typeof(m -> 'at') = 'array') AND \
                 (m @? $1::text::jsonpath))))"
            )
        );
        assert_eq!(sql.numbers, [1_714_557_600.0]);
        let ddl = range_index_ddl("\"docs\"", "docs", "at", FieldType::Datetime, true);
        assert_eq!(ddl[0], EPOCH_FUNCTION);
        assert!(ddl[1].contains(&datetime_expr("metadata", "at")), "{ddl:?}");
        assert_eq!(ddl.len(), 3);
    }

    #[test]
    fn nul_characters_are_found_wherever_a_filter_or_metadata_holds_them() {
        let holds = |v: serde_json::Value| {
            filter_holds_nul(&Filter::parse(&v, "filter").expect("a filter"))
        };
        assert!(!holds(
            json!({"must": [{"key": "lang", "match": {"value": "en"}}]})
        ));
        assert!(holds(
            json!({"must": [{"key": "lang", "match": {"value": "e\u{0}n"}}]})
        ));
        assert!(holds(
            json!({"should": [{"key": "l", "match": {"any": ["en", "\u{0}"]}}]})
        ));
        assert!(holds(json!({"must_not": [{"has_id": ["a", "b\u{0}"]}]})));
        assert!(holds(json!({"must": [{"must": [{"has_id": ["\u{0}"]}]}]})));
        assert!(holds(json!({"min_should": {"conditions": [
            {"key": "k", "match": {"except": ["\u{0}"]}}], "min_count": 1}})));
        assert!(!json_holds_nul(&json!({"a": [1, "b", {"c": null}]})));
        assert!(json_holds_nul(&json!({"a": [1, "b", {"c": "\u{0}"}]})));
        assert!(json_holds_nul(&json!({"a": {"\u{0}": 1}})));
    }
}
