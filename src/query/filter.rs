//! Filters on document metadata, in Qdrant's shape: what a filter means, in one place.
//!
//! A [`Filter`] is parsed from JSON (HTTP, `capot eval --filter`) or converted from protobuf
//! (gRPC) into the same type, bound to the index's declared payload fields ([`Filter::bind`]:
//! each field condition learns the type it compares as, and a condition that cannot apply is a
//! 400 naming its JSON path), then evaluated two ways that agree by construction:
//!
//! - [`Filter::admitted_in`]: the exact set of frozen documents it admits, as a roaring bitmap
//!   from the payload indexes (a condition on an unindexed field, where allowed, reads every
//!   document's metadata) — what the planner sizes and the graph walk tests;
//! - [`Filter::admits`]: one document's verdict from its metadata — what the live segment and
//!   the tests use.
//!
//! Both read a value through `index::payload::{values_at, typed}`. A store that speaks another
//! language (SQL over jsonb) translates the bound [`Filter`] the same way.

use std::collections::BTreeMap;

use roaring::RoaringBitmap;
use serde_json::Value;

use crate::index::payload::{
    check_key, parse_datetime, typed, values_at, FieldSchema, FieldType, IntegerRange,
    NumericRange, Typed,
};
use crate::index::{Index, IndexError};

/// Deepest nesting of filters inside conditions.
pub const MAX_DEPTH: usize = 8;
/// Most conditions in one filter, counted through every level.
pub const MAX_CONDITIONS: usize = 256;
/// Most values in one `any`, `except` or `has_id`.
pub const MAX_VALUES: usize = 1024;

/// A filter: every `must`, at least one `should` (when any is given), no `must_not`, and at
/// least `min_count` of `min_should`'s conditions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    pub must: Vec<Condition>,
    pub should: Vec<Condition>,
    pub must_not: Vec<Condition>,
    pub min_should: Option<MinShould>,
}

/// `min_should`: at least `min_count` of `conditions`.
#[derive(Debug, Clone, PartialEq)]
pub struct MinShould {
    pub conditions: Vec<Condition>,
    pub min_count: usize,
}

/// One condition of a filter.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// A check of the values at a metadata key. `kind` is set by [`Filter::bind`]: the declared
    /// payload index type, or (unindexed fields) the type the condition's values imply.
    Field {
        key: String,
        check: Check,
        kind: Option<FieldType>,
    },
    /// The key is missing, `null`, or an empty array.
    IsEmpty { key: String },
    /// The key holds an explicit `null`.
    IsNull { key: String },
    /// The document's id is one of these.
    HasId(Vec<String>),
    /// A nested filter.
    Filter(Box<Filter>),
}

/// What a field condition checks.
#[derive(Debug, Clone, PartialEq)]
pub enum Check {
    /// `match {value}`.
    Value(Scalar),
    /// `match {any: [...]}`: the value is one of these.
    Any(Vec<Scalar>),
    /// `match {except: [...]}`: some value is none of these.
    Except(Vec<Scalar>),
    /// `range {gt, gte, lt, lte}`.
    Range(Range),
}

/// A value to match: keyword, integer or boolean.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scalar {
    Keyword(String),
    Integer(i64),
    Bool(bool),
}

/// Range bounds as given: all numbers or all RFC 3339 datetimes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    pub bounds: NumericRange,
    /// The same bounds as integers, for an integer field (see [`IntegerRange`]).
    pub integers: IntegerRange,
    /// The bounds were datetimes (now unix seconds).
    pub datetime: bool,
}

/// Why a filter is refused: the JSON path of the offending part and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct FilterError {
    /// `filter.must[0].match.value`.
    pub path: String,
    pub message: String,
    /// The condition names a field with no payload index.
    pub unindexed: Option<String>,
}

impl FilterError {
    /// An error at `path` (`filter.must[0].range.gte`).
    pub fn at(path: &str, message: impl Into<String>) -> Self {
        FilterError {
            path: path.to_string(),
            message: message.into(),
            unindexed: None,
        }
    }
}

/// The JSON type of `v`, for messages.
fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Scalar {
    fn parse(v: &Value, path: &str) -> Result<Scalar, FilterError> {
        match v {
            Value::String(s) => Ok(Scalar::Keyword(s.clone())),
            Value::Bool(b) => Ok(Scalar::Bool(*b)),
            Value::Number(n) => n.as_i64().map(Scalar::Integer).ok_or_else(|| {
                FilterError::at(
                    path,
                    format!("{n} is not an integer: match takes keywords, integers and booleans (use range for other numbers)"),
                )
            }),
            other => Err(FilterError::at(
                path,
                format!("expected a string, an integer or a boolean, got {}", kind_of(other)),
            )),
        }
    }

    /// The field type this value implies.
    fn kind(&self) -> FieldType {
        match self {
            Scalar::Keyword(_) => FieldType::Keyword,
            Scalar::Integer(_) => FieldType::Integer,
            Scalar::Bool(_) => FieldType::Bool,
        }
    }

    fn equals(&self, t: &Typed<'_>) -> bool {
        match (self, t) {
            (Scalar::Keyword(a), Typed::Keyword(b)) => a == b,
            (Scalar::Integer(a), Typed::Integer(b)) => a == b,
            (Scalar::Bool(a), Typed::Bool(b)) => a == b,
            _ => false,
        }
    }
}

/// The object at `path`, or an error saying what it is instead.
fn object<'a>(v: &'a Value, path: &str) -> Result<&'a serde_json::Map<String, Value>, FilterError> {
    v.as_object()
        .ok_or_else(|| FilterError::at(path, format!("expected an object, got {}", kind_of(v))))
}

fn array<'a>(v: &'a Value, path: &str) -> Result<&'a Vec<Value>, FilterError> {
    v.as_array()
        .ok_or_else(|| FilterError::at(path, format!("expected an array, got {}", kind_of(v))))
}

fn key_at(v: &Value, path: &str) -> Result<String, FilterError> {
    let key = v
        .as_str()
        .ok_or_else(|| FilterError::at(path, format!("expected a string, got {}", kind_of(v))))?;
    check_key(key).map_err(|e| FilterError::at(path, e))?;
    Ok(key.to_string())
}

fn values(v: &Value, path: &str) -> Result<Vec<Scalar>, FilterError> {
    let items = array(v, path)?;
    if items.len() > MAX_VALUES {
        return Err(FilterError::at(
            path,
            format!("{} values exceed the limit of {MAX_VALUES}", items.len()),
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, x)| Scalar::parse(x, &format!("{path}[{i}]")))
        .collect()
}

/// Counts conditions while parsing, against [`MAX_CONDITIONS`].
struct Budget(usize);

impl Budget {
    fn take(&mut self, path: &str) -> Result<(), FilterError> {
        self.0 += 1;
        if self.0 > MAX_CONDITIONS {
            return Err(FilterError::at(
                path,
                format!("a filter may hold at most {MAX_CONDITIONS} conditions"),
            ));
        }
        Ok(())
    }
}

const FILTER_KEYS: [&str; 4] = ["must", "should", "must_not", "min_should"];

impl Filter {
    /// Parses a filter from JSON; `path` names it in errors (`filter`).
    pub fn parse(v: &Value, path: &str) -> Result<Filter, FilterError> {
        Self::parse_at(v, path, 1, &mut Budget(0))
    }

    fn parse_at(
        v: &Value,
        path: &str,
        depth: usize,
        budget: &mut Budget,
    ) -> Result<Filter, FilterError> {
        if depth > MAX_DEPTH {
            return Err(FilterError::at(
                path,
                format!("filters nest at most {MAX_DEPTH} deep"),
            ));
        }
        let o = object(v, path)?;
        let mut f = Filter::default();
        for (k, item) in o {
            let at = format!("{path}.{k}");
            let list = |item: &Value, at: &str, budget: &mut Budget| {
                // A single condition is accepted where a list is expected, as Qdrant does.
                let items: Vec<&Value> = match item {
                    Value::Array(a) => a.iter().collect(),
                    Value::Object(_) => vec![item],
                    other => {
                        return Err(FilterError::at(
                            at,
                            format!("expected an array of conditions, got {}", kind_of(other)),
                        ))
                    }
                };
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, c)| Condition::parse(c, &format!("{at}[{i}]"), depth, budget))
                    .collect::<Result<Vec<_>, _>>()
            };
            match k.as_str() {
                "must" => f.must = list(item, &at, budget)?,
                "should" => f.should = list(item, &at, budget)?,
                "must_not" => f.must_not = list(item, &at, budget)?,
                "min_should" => {
                    let m = object(item, &at)?;
                    let conditions = m
                        .get("conditions")
                        .ok_or_else(|| FilterError::at(&at, "conditions is required"))?;
                    let conditions = list(conditions, &format!("{at}.conditions"), budget)?;
                    let min_count = m
                        .get("min_count")
                        .ok_or_else(|| FilterError::at(&at, "min_count is required"))?;
                    let min_count = min_count.as_u64().ok_or_else(|| {
                        FilterError::at(
                            &format!("{at}.min_count"),
                            format!("expected a whole number ≥ 0, got {min_count}"),
                        )
                    })? as usize;
                    if let Some(extra) = m.keys().find(|k| *k != "conditions" && *k != "min_count")
                    {
                        return Err(FilterError::at(
                            &format!("{at}.{extra}"),
                            "unknown field (min_should takes conditions and min_count)",
                        ));
                    }
                    f.min_should = Some(MinShould {
                        conditions,
                        min_count,
                    });
                }
                other => {
                    return Err(FilterError::at(
                        &at,
                        format!(
                            "unknown operator {other:?} (a filter takes must, should, must_not, min_should)"
                        ),
                    ))
                }
            }
        }
        Ok(f)
    }

    /// Binds every field condition to its type: the declared payload index's, or, for a field
    /// without one, the type its values imply when `allow_unindexed` (else the error names the
    /// field, `unindexed_field`). Refuses conditions that cannot apply to the type (a range on a
    /// keyword, a datetime bound on a number, a keyword on an integer field).
    pub fn bind(
        &mut self,
        fields: &BTreeMap<String, FieldSchema>,
        allow_unindexed: bool,
        path: &str,
    ) -> Result<(), FilterError> {
        let lists = [
            ("must", &mut self.must),
            ("should", &mut self.should),
            ("must_not", &mut self.must_not),
        ];
        for (name, list) in lists {
            for (i, c) in list.iter_mut().enumerate() {
                c.bind(fields, allow_unindexed, &format!("{path}.{name}[{i}]"))?;
            }
        }
        if let Some(m) = &mut self.min_should {
            for (i, c) in m.conditions.iter_mut().enumerate() {
                c.bind(
                    fields,
                    allow_unindexed,
                    &format!("{path}.min_should.conditions[{i}]"),
                )?;
            }
        }
        Ok(())
    }

    /// Whether a document with this id and metadata passes (a bound filter).
    pub fn admits(&self, id: &str, metadata: Option<&Value>) -> bool {
        let all = |list: &[Condition]| list.iter().all(|c| c.admits(id, metadata));
        let any = |list: &[Condition]| list.iter().any(|c| c.admits(id, metadata));
        all(&self.must)
            && (self.should.is_empty() || any(&self.should))
            && !any(&self.must_not)
            && self.min_should.as_ref().is_none_or(|m| {
                m.conditions
                    .iter()
                    .filter(|c| c.admits(id, metadata))
                    .count()
                    >= m.min_count
            })
    }

    /// The frozen documents of `index` this (bound) filter admits, exactly.
    pub fn admitted_in(&self, index: &Index) -> Result<RoaringBitmap, IndexError> {
        let n = index.len() as u32;
        let mut out = RoaringBitmap::new();
        out.insert_range(0..n);
        for c in &self.must {
            if out.is_empty() {
                return Ok(out);
            }
            out &= c.admitted_in(index)?;
        }
        if !self.should.is_empty() {
            let mut any = RoaringBitmap::new();
            for c in &self.should {
                any |= c.admitted_in(index)?;
            }
            out &= any;
        }
        for c in &self.must_not {
            if out.is_empty() {
                return Ok(out);
            }
            out -= c.admitted_in(index)?;
        }
        if let Some(m) = &self.min_should {
            if m.min_count > m.conditions.len() {
                return Ok(RoaringBitmap::new());
            }
            if m.min_count > 0 {
                let sets = m
                    .conditions
                    .iter()
                    .map(|c| c.admitted_in(index))
                    .collect::<Result<Vec<_>, _>>()?;
                let union = sets.iter().fold(RoaringBitmap::new(), |a, b| a | b);
                let enough: RoaringBitmap = union
                    .iter()
                    .filter(|&d| sets.iter().filter(|s| s.contains(d)).count() >= m.min_count)
                    .collect();
                out &= enough;
            }
        }
        Ok(out)
    }

    /// [`Filter::admitted_in`] through the index's cache of recent filters' admitted sets
    /// ([`Index::admitted_cached`]), keyed by the bound filter's canonical form.
    pub fn admitted_cached(
        &self,
        index: &Index,
    ) -> Result<std::sync::Arc<crate::index::Admitted>, IndexError> {
        index.admitted_cached(&format!("{self:?}"), || self.admitted_in(index))
    }

    /// The most documents this (bound) filter can admit, known from the filter alone: the ids
    /// of a `has_id` it requires, and conditions that admit nothing (an empty `any` or
    /// `has_id`, a `min_should` asking for more than it lists). `None` when only the data can
    /// tell. A store that cannot count admitted documents exactly plans with it.
    pub fn admits_at_most(&self) -> Option<u64> {
        let mut bound: Option<u64> = None;
        let mut tighten = |b: Option<u64>| {
            if let Some(b) = b {
                bound = Some(bound.map_or(b, |x| x.min(b)));
            }
        };
        for c in &self.must {
            tighten(c.admits_at_most());
        }
        if !self.should.is_empty() {
            // At least one of them: no more than all of theirs together.
            tighten(
                self.should
                    .iter()
                    .map(Condition::admits_at_most)
                    .try_fold(0u64, |sum, b| Some(sum.saturating_add(b?))),
            );
        }
        if let Some(m) = &self.min_should {
            if m.min_count > m.conditions.len() {
                tighten(Some(0));
            } else if m.min_count > 0 {
                // Each admitted document passes `min_count` of them; the bounds counted that
                // many times over cover it.
                let bounds: Option<Vec<u64>> =
                    m.conditions.iter().map(Condition::admits_at_most).collect();
                tighten(bounds.map(|b| b.iter().sum::<u64>() / m.min_count as u64));
            }
        }
        bound
    }

    /// Whether any condition reads metadata without a payload index (a scan of every
    /// document).
    pub fn scans(&self, fields: &BTreeMap<String, FieldSchema>) -> bool {
        self.conditions().any(|c| c.scans(fields))
    }

    fn conditions(&self) -> impl Iterator<Item = &Condition> {
        self.must
            .iter()
            .chain(&self.should)
            .chain(&self.must_not)
            .chain(self.min_should.iter().flat_map(|m| &m.conditions))
    }
}

impl Condition {
    /// See [`Filter::admits_at_most`].
    fn admits_at_most(&self) -> Option<u64> {
        match self {
            Condition::HasId(ids) => {
                let distinct: std::collections::HashSet<&String> = ids.iter().collect();
                Some(distinct.len() as u64)
            }
            Condition::Field {
                check: Check::Any(values),
                ..
            } if values.is_empty() => Some(0),
            // A field whose type could not be bound matches nothing (see `Filter::bind`).
            Condition::Field { kind: None, .. } => Some(0),
            Condition::Filter(f) => f.admits_at_most(),
            Condition::Field { .. } | Condition::IsEmpty { .. } | Condition::IsNull { .. } => None,
        }
    }

    fn parse(
        v: &Value,
        path: &str,
        depth: usize,
        budget: &mut Budget,
    ) -> Result<Condition, FilterError> {
        budget.take(path)?;
        let o = object(v, path)?;
        if o.keys().any(|k| FILTER_KEYS.contains(&k.as_str())) {
            return Ok(Condition::Filter(Box::new(Filter::parse_at(
                v,
                path,
                depth + 1,
                budget,
            )?)));
        }
        if let Some(e) = o.get("is_empty") {
            let at = format!("{path}.is_empty");
            let key = object(e, &at)?
                .get("key")
                .ok_or_else(|| FilterError::at(&at, "key is required"))?;
            return Ok(Condition::IsEmpty {
                key: key_at(key, &format!("{at}.key"))?,
            });
        }
        if let Some(e) = o.get("is_null") {
            let at = format!("{path}.is_null");
            let key = object(e, &at)?
                .get("key")
                .ok_or_else(|| FilterError::at(&at, "key is required"))?;
            return Ok(Condition::IsNull {
                key: key_at(key, &format!("{at}.key"))?,
            });
        }
        if let Some(ids) = o.get("has_id") {
            let at = format!("{path}.has_id");
            let items = array(ids, &at)?;
            if items.len() > MAX_VALUES {
                return Err(FilterError::at(
                    &at,
                    format!("{} ids exceed the limit of {MAX_VALUES}", items.len()),
                ));
            }
            let ids = items
                .iter()
                .enumerate()
                .map(|(i, x)| match x {
                    Value::String(s) => Ok(s.clone()),
                    Value::Number(n) => Ok(n.to_string()),
                    other => Err(FilterError::at(
                        &format!("{at}[{i}]"),
                        format!("expected an id (a string), got {}", kind_of(other)),
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(Condition::HasId(ids));
        }
        let Some(key) = o.get("key") else {
            let known = "a field condition {key, match|range}, is_empty, is_null, has_id, or a nested filter";
            return Err(match o.keys().next() {
                Some(k) => FilterError::at(
                    &format!("{path}.{k}"),
                    format!("unknown condition {k:?} (expected {known})"),
                ),
                None => FilterError::at(path, format!("empty condition (expected {known})")),
            });
        };
        let key = key_at(key, &format!("{path}.key"))?;
        let check = match (o.get("match"), o.get("range")) {
            (Some(_), Some(_)) => {
                return Err(FilterError::at(
                    path,
                    "a field condition takes match or range, not both",
                ))
            }
            (Some(m), None) => Check::parse_match(m, &format!("{path}.match"))?,
            (None, Some(r)) => Check::Range(Range::parse(r, &format!("{path}.range"))?),
            (None, None) => {
                return Err(FilterError::at(
                    path,
                    "a field condition needs match or range",
                ))
            }
        };
        if let Some(extra) = o
            .keys()
            .find(|k| !["key", "match", "range"].contains(&k.as_str()))
        {
            return Err(FilterError::at(
                &format!("{path}.{extra}"),
                "unknown field (a field condition takes key and match or range)",
            ));
        }
        Ok(Condition::Field {
            key,
            check,
            kind: None,
        })
    }

    fn bind(
        &mut self,
        fields: &BTreeMap<String, FieldSchema>,
        allow_unindexed: bool,
        path: &str,
    ) -> Result<(), FilterError> {
        match self {
            Condition::Filter(f) => f.bind(fields, allow_unindexed, path),
            Condition::HasId(_) => Ok(()),
            Condition::IsEmpty { key } | Condition::IsNull { key } => {
                if fields.contains_key(key.as_str()) || allow_unindexed {
                    Ok(())
                } else {
                    Err(unindexed(key, path))
                }
            }
            Condition::Field { key, check, kind } => {
                let declared = fields.get(key.as_str()).map(|s| s.kind);
                if declared.is_none() && !allow_unindexed {
                    return Err(unindexed(key, path));
                }
                *kind = Some(check.bind(declared, path)?);
                Ok(())
            }
        }
    }

    fn scans(&self, fields: &BTreeMap<String, FieldSchema>) -> bool {
        match self {
            Condition::Filter(f) => f.scans(fields),
            Condition::HasId(_) => false,
            Condition::IsEmpty { key }
            | Condition::IsNull { key }
            | Condition::Field { key, .. } => !fields.contains_key(key.as_str()),
        }
    }

    fn admits(&self, id: &str, metadata: Option<&Value>) -> bool {
        let values = |key: &str| metadata.map(|m| values_at(m, key)).unwrap_or_default();
        match self {
            Condition::Filter(f) => f.admits(id, metadata),
            Condition::HasId(ids) => ids.iter().any(|x| x == id),
            Condition::IsEmpty { key } => values(key).iter().all(|v| v.is_null()),
            Condition::IsNull { key } => values(key).iter().any(|v| v.is_null()),
            Condition::Field { key, check, kind } => {
                let Some(kind) = *kind else { return false };
                let typed: Vec<Typed<'_>> = metadata
                    .map(|m| values_at(m, key))
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|v| typed(v, kind))
                    .collect();
                match check {
                    Check::Value(s) => typed.iter().any(|t| s.equals(t)),
                    Check::Any(list) => typed.iter().any(|t| list.iter().any(|s| s.equals(t))),
                    Check::Except(list) => typed.iter().any(|t| !list.iter().any(|s| s.equals(t))),
                    Check::Range(r) => typed.iter().any(|t| match *t {
                        Typed::Integer(i) => r.integers.contains(i),
                        ref t => {
                            crate::index::payload::number(t).is_some_and(|x| r.bounds.contains(x))
                        }
                    }),
                }
            }
        }
    }

    fn admitted_in(&self, index: &Index) -> Result<RoaringBitmap, IndexError> {
        let payload = index.payload_indexes();
        let n = index.len() as u32;
        let scan = |c: &Condition| -> Result<RoaringBitmap, IndexError> {
            let mut out = RoaringBitmap::new();
            for i in 0..n {
                let metadata = index.metadata(i as usize);
                // Only has_id reads the id, and it never scans.
                if c.admits("", metadata.as_ref()) {
                    out.insert(i);
                }
            }
            Ok(out)
        };
        match self {
            Condition::Filter(f) => f.admitted_in(index),
            Condition::HasId(ids) => {
                let mut out = RoaringBitmap::new();
                for id in ids {
                    if let Some(i) = index.index_of(id)? {
                        out.insert(i as u32);
                    }
                }
                Ok(out)
            }
            Condition::IsEmpty { key } => match payload.field(key) {
                Some(f) => {
                    let mut all = RoaringBitmap::new();
                    all.insert_range(0..n);
                    Ok(all - f.present())
                }
                None => scan(self),
            },
            Condition::IsNull { key } => match payload.field(key) {
                Some(f) => Ok(f.null().clone()),
                None => scan(self),
            },
            Condition::Field { key, check, .. } => {
                let Some(f) = payload.field(key) else {
                    return scan(self);
                };
                // Integers exactly: the float64 index's documents, less those whose float
                // stands for several integers and whose own value lies outside.
                let integers = |r: &IntegerRange| {
                    let mut out = f.range(&r.covering());
                    if !r.exact_in_floats() {
                        let edges = [r.lower(), r.upper()].into_iter().flatten().map(|b| {
                            let x = b as f64;
                            f.range(&NumericRange {
                                gte: Some(x),
                                lte: Some(x),
                                ..Default::default()
                            })
                        });
                        for d in &edges.fold(RoaringBitmap::new(), |a, e| a | e) {
                            let doc = index.metadata(d as usize);
                            let values = doc.as_ref().map(|m| values_at(m, key));
                            let inside = values.unwrap_or_default().into_iter().any(|v| {
                                matches!(typed(v, FieldType::Integer), Some(Typed::Integer(i)) if r.contains(i))
                            });
                            if !inside {
                                out.remove(d);
                            }
                        }
                    }
                    out
                };
                let one = |s: &Scalar| match s {
                    Scalar::Keyword(k) => f.keyword(k),
                    Scalar::Bool(b) => f.boolean(*b),
                    Scalar::Integer(i) => integers(&IntegerRange::just(*i)),
                };
                Ok(match check {
                    Check::Value(s) => one(s),
                    Check::Any(list) => list.iter().fold(RoaringBitmap::new(), |a, s| a | one(s)),
                    Check::Except(list) => {
                        // Some value is none of these: with one value per document, that is
                        // "has a value, and it is not one of these"; documents with several
                        // values are checked one by one.
                        let excluded = list.iter().fold(RoaringBitmap::new(), |a, s| a | one(s));
                        let mut out = f.present() - &excluded;
                        for d in &(f.present() & &excluded) {
                            if self.admits("", index.metadata(d as usize).as_ref()) {
                                out.insert(d);
                            }
                        }
                        out
                    }
                    Check::Range(r) if f.schema.kind == FieldType::Integer => integers(&r.integers),
                    Check::Range(r) => f.range(&r.bounds),
                })
            }
        }
    }
}

fn unindexed(key: &str, path: &str) -> FilterError {
    FilterError {
        path: path.to_string(),
        message: format!(
            "field {key:?} has no payload index: declare one (PUT /admin/index/payload/{key} with \
             {{\"type\": ...}}, or `capot index build --payload-index {key}:TYPE`), or start the \
             server with --allow-unindexed-filters to scan"
        ),
        unindexed: Some(key.to_string()),
    }
}

impl Check {
    fn parse_match(v: &Value, path: &str) -> Result<Check, FilterError> {
        let o = object(v, path)?;
        if o.len() != 1 {
            return Err(FilterError::at(
                path,
                "match takes exactly one of value, any, except",
            ));
        }
        let (k, x) = o
            .iter()
            .next()
            .ok_or_else(|| FilterError::at(path, "empty match"))?;
        let at = format!("{path}.{k}");
        match k.as_str() {
            "value" => Ok(Check::Value(Scalar::parse(x, &at)?)),
            "any" => Ok(Check::Any(values(x, &at)?)),
            "except" => Ok(Check::Except(values(x, &at)?)),
            other => Err(FilterError::at(
                &at,
                format!("unknown match operator {other:?} (value, any, except)"),
            )),
        }
    }

    /// The type this check compares as on a field declared `declared` (or not indexed), or why
    /// it cannot apply.
    fn bind(&self, declared: Option<FieldType>, path: &str) -> Result<FieldType, FilterError> {
        let scalars: &[Scalar] = match self {
            Check::Value(s) => std::slice::from_ref(s),
            Check::Any(l) | Check::Except(l) => l,
            Check::Range(r) => {
                let kind = match (declared, r.datetime) {
                    (Some(FieldType::Datetime), true) | (None, true) => FieldType::Datetime,
                    (Some(k @ (FieldType::Integer | FieldType::Float)), false) => k,
                    (None, false) => FieldType::Float,
                    (Some(FieldType::Datetime), false) => {
                        return Err(FilterError::at(
                            &format!("{path}.range"),
                            "the field is a datetime: give RFC 3339 bounds (\"2024-01-01T00:00:00Z\")",
                        ))
                    }
                    (Some(k), true) if k != FieldType::Datetime => {
                        return Err(FilterError::at(
                            &format!("{path}.range"),
                            format!("the field is {}: datetime bounds apply to datetime fields", k.as_str()),
                        ))
                    }
                    (Some(k), _) => {
                        return Err(FilterError::at(
                            &format!("{path}.range"),
                            format!(
                                "range does not apply to a {} field (integer, float and datetime fields take ranges)",
                                k.as_str()
                            ),
                        ))
                    }
                };
                return Ok(kind);
            }
        };
        let at = format!("{path}.match");
        let implied = scalars.first().map(Scalar::kind);
        if let Some((i, s)) = scalars
            .iter()
            .enumerate()
            .find(|(_, s)| Some(s.kind()) != implied)
        {
            return Err(FilterError::at(
                &format!("{at}[{i}]"),
                format!("values of one match must share a type ({:?} differs)", s),
            ));
        }
        match (declared, implied) {
            (None, Some(k)) => Ok(k),
            // An empty any/except: no value to check against.
            (Some(k), None) => Ok(k),
            (None, None) => Ok(FieldType::Keyword),
            (Some(k), Some(v)) if k == v => Ok(k),
            (Some(k), Some(v)) => Err(FilterError::at(
                &at,
                format!(
                    "the field's payload index is {}, the match gives {} values{}",
                    k.as_str(),
                    v.as_str(),
                    match k {
                        FieldType::Float | FieldType::Datetime => " (use range on this field)",
                        _ => "",
                    }
                ),
            )),
        }
    }
}

impl Range {
    fn parse(v: &Value, path: &str) -> Result<Range, FilterError> {
        let o = object(v, path)?;
        if o.is_empty() {
            return Err(FilterError::at(
                path,
                "range needs at least one of gt, gte, lt, lte",
            ));
        }
        let mut bounds = NumericRange::default();
        let mut integers = IntegerRange::default();
        let mut datetime: Option<bool> = None;
        for (k, x) in o {
            let at = format!("{path}.{k}");
            let (value, is_date) = match x {
                Value::Number(n) => {
                    integers.narrow(k, n);
                    (
                        n.as_f64()
                            .ok_or_else(|| FilterError::at(&at, "not a finite number"))?,
                        false,
                    )
                }
                Value::String(s) => (
                    parse_datetime(s).ok_or_else(|| {
                        FilterError::at(
                            &at,
                            format!(
                                "{s:?} is not an RFC 3339 datetime (e.g. 2024-05-01T12:00:00Z)"
                            ),
                        )
                    })?,
                    true,
                ),
                other => {
                    return Err(FilterError::at(
                        &at,
                        format!(
                            "expected a number or an RFC 3339 datetime, got {}",
                            kind_of(other)
                        ),
                    ))
                }
            };
            if datetime.is_some_and(|d| d != is_date) {
                return Err(FilterError::at(
                    &at,
                    "a range's bounds are all numbers or all datetimes",
                ));
            }
            datetime = Some(is_date);
            let slot = match k.as_str() {
                "gt" => &mut bounds.gt,
                "gte" => &mut bounds.gte,
                "lt" => &mut bounds.lt,
                "lte" => &mut bounds.lte,
                other => {
                    return Err(FilterError::at(
                        &at,
                        format!("unknown range operator {other:?} (gt, gte, lt, lte)"),
                    ))
                }
            };
            *slot = Some(value);
        }
        Ok(Range {
            bounds,
            integers,
            datetime: datetime.unwrap_or(false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields() -> BTreeMap<String, FieldSchema> {
        [
            ("lang", FieldType::Keyword),
            ("year", FieldType::Integer),
            ("price", FieldType::Float),
            ("ok", FieldType::Bool),
            ("at", FieldType::Datetime),
            ("a.b", FieldType::Keyword),
        ]
        .into_iter()
        .map(|(k, kind)| {
            (
                k.to_string(),
                FieldSchema {
                    kind,
                    tenant: false,
                },
            )
        })
        .collect()
    }

    fn bound(v: Value) -> Filter {
        let mut f = Filter::parse(&v, "filter").unwrap();
        f.bind(&fields(), false, "filter").unwrap();
        f
    }

    fn error(v: Value) -> FilterError {
        match Filter::parse(&v, "filter") {
            Err(e) => e,
            Ok(mut f) => f.bind(&fields(), false, "filter").unwrap_err(),
        }
    }

    #[test]
    fn conditions_mean_what_qdrant_documents() {
        let doc = json!({"lang": ["en", "de"], "year": 2020, "price": 9.5, "ok": true,
                         "at": "2024-03-01T10:00:00Z", "a": {"b": "x"}, "n": null});
        let yes = |f: Value| bound(f).admits("d1", Some(&doc));
        assert!(yes(
            json!({"must": [{"key": "lang", "match": {"value": "de"}}]})
        ));
        assert!(!yes(
            json!({"must": [{"key": "lang", "match": {"value": "fr"}}]})
        ));
        assert!(yes(
            json!({"must": [{"key": "lang", "match": {"any": ["fr", "en"]}}]})
        ));
        // Some value is none of the excluded: "de" is not "en".
        assert!(yes(
            json!({"must": [{"key": "lang", "match": {"except": ["en"]}}]})
        ));
        assert!(!yes(
            json!({"must": [{"key": "lang", "match": {"except": ["en", "de"]}}]})
        ));
        assert!(yes(
            json!({"must": [{"key": "year", "range": {"gte": 2020, "lt": 2021}}]})
        ));
        assert!(!yes(
            json!({"must": [{"key": "year", "range": {"gt": 2020}}]})
        ));
        assert!(yes(
            json!({"must": [{"key": "price", "range": {"lte": 9.5}}]})
        ));
        assert!(yes(
            json!({"must": [{"key": "at", "range": {"gt": "2024-03-01T09:00:00Z"}}]})
        ));
        assert!(yes(
            json!({"must": [{"key": "at", "range": {"gt": "2024-03-01T11:00:00+02:00"}}]})
        ));
        assert!(!yes(
            json!({"must": [{"key": "at", "range": {"gt": "2024-03-01T11:00:00+01:00"}}]})
        ));
        assert!(yes(
            json!({"must": [{"key": "a.b", "match": {"value": "x"}}]})
        ));
        assert!(yes(
            json!({"must_not": [{"key": "ok", "match": {"value": false}}]})
        ));
        assert!(yes(
            json!({"should": [{"key": "year", "match": {"value": 1}},
                                       {"has_id": ["d1"]}]})
        ));
        assert!(!yes(
            json!({"should": [{"key": "year", "match": {"value": 1}}]})
        ));
        assert!(yes(json!({"min_should": {"min_count": 2, "conditions": [
            {"key": "year", "match": {"value": 2020}}, {"key": "ok", "match": {"value": true}},
            {"key": "lang", "match": {"value": "fr"}}]}})));
        assert!(!yes(json!({"min_should": {"min_count": 3, "conditions": [
            {"key": "year", "match": {"value": 2020}}, {"key": "ok", "match": {"value": true}},
            {"key": "lang", "match": {"value": "fr"}}]}})));
        // A nested filter stands where a condition may.
        assert!(yes(
            json!({"must": [{"should": [{"key": "lang", "match": {"value": "fr"}},
                                                 {"must_not": [{"has_id": ["d2"]}]}]}]})
        ));
        assert!(bound(json!({"must": [{"is_empty": {"key": "lang"}}]})).admits("x", None));
        assert!(bound(json!({"must": [{"is_empty": {"key": "lang"}}]}))
            .admits("x", Some(&json!({"lang": []}))));
        assert!(!yes(json!({"must": [{"is_empty": {"key": "lang"}}]})));
        assert!(bound(json!({"must": [{"is_null": {"key": "lang"}}]}))
            .admits("x", Some(&json!({"lang": null}))));
        assert!(!bound(json!({"must": [{"is_null": {"key": "lang"}}]})).admits("x", None));
        // An empty filter admits everything.
        assert!(bound(json!({})).admits("x", None));
    }

    #[test]
    fn bad_filters_name_their_json_path() {
        let cases = [
            (
                json!({"must": [{"key": "lang", "match": {"like": "x"}}]}),
                "filter.must[0].match.like",
            ),
            (json!({"muts": []}), "filter.muts"),
            (
                json!({"must": [{"key": "year", "match": {"value": "x"}}]}),
                "filter.must[0].match",
            ),
            (
                json!({"must": [{"key": "lang", "range": {"gt": 1}}]}),
                "filter.must[0].range",
            ),
            (
                json!({"must": [{"key": "at", "range": {"gt": "yesterday"}}]}),
                "filter.must[0].range.gt",
            ),
            (
                json!({"must": [{"key": "at", "range": {"gt": 3}}]}),
                "filter.must[0].range",
            ),
            (
                json!({"must": [{"key": "year", "range": {"gt": 1, "lt": "2024-01-01T00:00:00Z"}}]}),
                "filter.must[0].range.lt",
            ),
            (
                json!({"should": [{"key": "price", "match": {"value": 1.5}}]}),
                "filter.should[0].match.value",
            ),
            (json!({"must": [{"key": "lang"}]}), "filter.must[0]"),
            (
                json!({"must": [{"key": "", "match": {"value": "x"}}]}),
                "filter.must[0].key",
            ),
            (
                json!({"must": [{"is_null": {"key": "a\u{0}"}}]}),
                "filter.must[0].is_null.key",
            ),
            (json!({"must": "x"}), "filter.must"),
            (
                json!({"min_should": {"conditions": []}}),
                "filter.min_should",
            ),
            (
                json!({"must": [{"key": "lang", "match": {"any": ["a", 1]}}]}),
                "filter.must[0].match[1]",
            ),
            (json!([1]), "filter"),
        ];
        for (f, path) in cases {
            let e = error(f.clone());
            assert_eq!(e.path, path, "{f}: {e}");
            assert!(e.unindexed.is_none());
        }
        let e = error(json!({"must": [{"key": "color", "match": {"value": "red"}}]}));
        assert_eq!(e.unindexed.as_deref(), Some("color"));
        assert!(e.message.contains("--allow-unindexed-filters"), "{e}");
    }

    #[test]
    fn limits_are_enforced() {
        let mut deep = json!({"must": [{"has_id": ["a"]}]});
        for _ in 0..MAX_DEPTH {
            deep = json!({"must": [deep]});
        }
        assert!(error(deep).message.contains("nest"));
        let many: Vec<Value> = (0..=MAX_CONDITIONS)
            .map(|i| json!({"has_id": [i.to_string()]}))
            .collect();
        assert!(error(json!({"should": many})).message.contains("at most"));
        let values: Vec<Value> = (0..=MAX_VALUES).map(|i| json!(i.to_string())).collect();
        assert!(
            error(json!({"must": [{"key": "lang", "match": {"any": values}}]}))
                .message
                .contains("limit")
        );
    }

    #[test]
    fn unindexed_fields_bind_to_the_type_their_values_imply() {
        let mut f = Filter::parse(
            &json!({"must": [{"key": "color", "match": {"value": "red"}},
                             {"key": "size", "range": {"gt": 1}},
                             {"key": "seen", "range": {"gt": "2020-01-01T00:00:00Z"}}]}),
            "filter",
        )
        .unwrap();
        f.bind(&fields(), true, "filter").unwrap();
        assert!(f.scans(&fields()));
        let doc = json!({"color": "red", "size": 1.5, "seen": "2021-01-01T00:00:00Z"});
        assert!(f.admits("x", Some(&doc)));
        assert!(!f.admits("x", Some(&json!({"color": "red", "size": 0.5}))));
    }
}

/// The filter against a real index: the bitmaps equal the per-document verdict, and the
/// planner's every strategy returns what an exact filtered search returns.
#[cfg(test)]
mod index_tests {
    use super::*;
    use crate::index::payload::FieldSchema;
    use crate::index::{
        Admitted, Document, GraphVectors, HnswParams, IndexBuilder, ManifestFields, Strategy,
        DEFAULT_SCAN_FACTOR, DEFAULT_SIGN_ROW_COST,
    };
    use serde_json::json;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn unit(&mut self, dim: usize, centre: &[f32]) -> Vec<f32> {
            let mut v: Vec<f32> = (0..dim)
                .map(|i| centre[i] + (self.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
                .collect();
            let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter_mut().for_each(|x| *x /= n);
            v
        }
    }

    const N: usize = 3000;
    const DIM: usize = 24;
    const CLUSTERS: u64 = 10;

    /// An index of N documents in CLUSTERS clusters; metadata: `cluster` (integer, what makes
    /// a filter correlated with a query), `cat` (keyword, skewed), `year`, `tenant`, `tags`.
    fn index(dir: &std::path::Path) -> (Index, Vec<Value>, Vec<Vec<f32>>) {
        index_with(dir, GraphVectors::Float32)
    }

    /// The test index, its graph walked (and its exact scans read) on a copy of `precision`.
    fn index_with(
        dir: &std::path::Path,
        precision: GraphVectors,
    ) -> (Index, Vec<Value>, Vec<Vec<f32>>) {
        let mut rng = Rng(7);
        let centres: Vec<Vec<f32>> = (0..CLUSTERS)
            .map(|_| {
                (0..DIM)
                    .map(|_| (rng.next() >> 40) as f32 / (1u64 << 22) as f32 - 2.0)
                    .collect()
            })
            .collect();
        let mut docs = Vec::new();
        let mut vectors = Vec::new();
        let mut metadata = Vec::new();
        for i in 0..N {
            let c = rng.below(CLUSTERS);
            vectors.extend(rng.unit(DIM, &centres[c as usize]));
            docs.push(Document {
                id: format!("d{i}"),
                title: String::new(),
                text: format!("document {i}"),
            });
            // Skewed categories: c0 is half the corpus, c1 a quarter, ...
            let cat = (rng.next() | 1).trailing_zeros().min(12);
            let mut m = json!({"cluster": c, "cat": format!("c{cat}"),
                               "year": 2000 + rng.below(25), "tenant": format!("t{}", rng.below(300)),
                               "tags": [format!("g{}", rng.below(5)), format!("g{}", rng.below(5))]});
            if i % 7 == 0 {
                m["year"] = Value::Null;
            }
            metadata.push(m);
        }
        let declared = [
            ("cluster", FieldType::Integer),
            ("cat", FieldType::Keyword),
            ("year", FieldType::Integer),
            ("tenant", FieldType::Keyword),
            ("tags", FieldType::Keyword),
        ];
        let index = build(dir, docs, vectors, &metadata, &declared, precision);
        let queries = (0..CLUSTERS as usize)
            .map(|c| rng.unit(DIM, &centres[c]))
            .collect();
        (index, metadata, queries)
    }

    /// An index of `docs` (DIM-dimensional `vectors`, one after another) with `metadata` and a
    /// payload index on each of `declared` (the field named `tenant` is the tenant key).
    fn build(
        dir: &std::path::Path,
        docs: Vec<Document>,
        vectors: Vec<f32>,
        metadata: &[Value],
        declared: &[(&str, FieldType)],
        precision: GraphVectors,
    ) -> Index {
        let fields = ManifestFields {
            encoder_fingerprint: "sha256:test".into(),
            encoder_name: "test".into(),
            dimension: DIM,
            capot_version: "0".into(),
        };
        let params = HnswParams {
            m: 8,
            ef_construction: 64,
            ef_search: 32,
            ..HnswParams::default()
        };
        IndexBuilder::new(dir, fields)
            .params(params)
            .graph_vectors(precision)
            .build(docs, vectors, &mut |_| Ok(()))
            .unwrap();
        let declared: BTreeMap<String, FieldSchema> = declared
            .iter()
            .map(|&(k, kind)| {
                (
                    k.to_string(),
                    FieldSchema {
                        kind,
                        tenant: k == "tenant",
                    },
                )
            })
            .collect();
        Index::set_payload(dir, metadata.iter().cloned().enumerate(), declared).unwrap();
        Index::load(dir).unwrap()
    }

    fn bound(index: &Index, v: Value) -> Filter {
        let mut f = Filter::parse(&v, "filter").unwrap();
        f.bind(&index.payload_fields(), false, "filter").unwrap();
        f
    }

    /// Exact filtered top-k by brute force over the per-document verdict.
    fn exact(index: &Index, f: &Filter, meta: &[Value], q: &[f32], k: usize) -> Vec<usize> {
        let mut scored: Vec<(f32, usize)> = (0..N)
            .filter(|&i| f.admits(&format!("d{i}"), Some(&meta[i])))
            .map(|i| {
                let v = index.vector(i).unwrap();
                (v.iter().zip(q).map(|(a, b)| a * b).sum::<f32>(), i)
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        scored.into_iter().take(k).map(|s| s.1).collect()
    }

    #[test]
    fn bitmaps_equal_the_verdict_and_every_strategy_finds_the_exact_hits() {
        every_strategy_finds_the_exact_hits(GraphVectors::Float32);
    }

    /// The exact scan reads the int8 (float16) copy first and re-scores its best in float32:
    /// the hits and their order must still be the exact ones.
    #[test]
    fn scans_of_a_smaller_copy_find_the_exact_hits() {
        every_strategy_finds_the_exact_hits(GraphVectors::Int8);
        every_strategy_finds_the_exact_hits(GraphVectors::Float16);
    }

    fn every_strategy_finds_the_exact_hits(precision: GraphVectors) {
        let dir = tempfile::tempdir().unwrap();
        let (index, meta, queries) = index_with(&dir.path().join("idx"), precision);
        let filters = [
            json!({"must": [{"key": "cat", "match": {"value": "c0"}}]}),
            json!({"must": [{"key": "tenant", "match": {"value": "t7"}}]}),
            json!({"must": [{"key": "year", "range": {"gte": 2010, "lt": 2013}}]}),
            json!({"must": [{"key": "year", "match": {"any": [2010, 2011, 2012]}}]}),
            json!({"must_not": [{"key": "cat", "match": {"any": ["c0", "c1"]}}]}),
            json!({"should": [{"key": "tags", "match": {"value": "g1"}}, {"is_null": {"key": "year"}}]}),
            json!({"must": [{"key": "tags", "match": {"except": ["g0"]}}, {"is_empty": {"key": "year"}}]}),
            json!({"min_should": {"min_count": 2, "conditions": [
                {"key": "cat", "match": {"value": "c0"}}, {"key": "tags", "match": {"value": "g2"}},
                {"key": "year", "range": {"gt": 2015}}]}}),
            json!({"must": [{"has_id": ["d1", "d2", "d999", "nope"]}]}),
            json!({"must": [{"key": "cat", "match": {"value": "absent"}}]}),
            json!({"must": [{"must_not": [{"key": "cluster", "match": {"value": 3}}]},
                            {"key": "cat", "match": {"value": "c2"}}]}),
        ];
        let k = 10;
        let mut strategies = std::collections::HashSet::new();
        let (mut found, mut wanted) = (0usize, 0usize);
        for fv in &filters {
            let f = bound(&index, fv.clone());
            let bits = Admitted::from(f.admitted_in(&index).unwrap());
            let verdict: Vec<u32> = (0..N as u32)
                .filter(|&i| f.admits(&format!("d{i}"), Some(&meta[i as usize])))
                .collect();
            assert_eq!(bits.iter().collect::<Vec<_>>(), verdict, "{fv}");
            for q in &queries {
                let truth = exact(&index, &f, &meta, q, k);
                // The default planner, and the scan of the sign codes forced (at 3,000
                // documents the planner keeps to the exact scan below the walk).
                for (ef, sign_row_cost) in [
                    (16, DEFAULT_SIGN_ROW_COST),
                    (64, DEFAULT_SIGN_ROW_COST),
                    (64, 0.0),
                ] {
                    let scan_factor = if sign_row_cost == 0.0 {
                        0.0
                    } else {
                        DEFAULT_SCAN_FACTOR
                    };
                    let got = index
                        .search_admitted_with(q, k, ef, &bits, scan_factor, sign_row_cost)
                        .unwrap();
                    strategies.insert(got.strategy);
                    assert_eq!(got.hits.len(), truth.len(), "{fv}: min(k, admitted) hits");
                    assert!(got.hits.iter().all(|h| bits.contains(h.index as u32)));
                    // The walk and the scan of the sign codes are approximate; they count in
                    // the recall below.
                    if !matches!(got.strategy, Strategy::Graph | Strategy::SignScan) {
                        let ids: Vec<usize> = got.hits.iter().map(|h| h.index).collect();
                        assert_eq!(
                            ids, truth,
                            "{fv}: {:?} on {precision:?} is exact",
                            got.strategy
                        );
                    }
                    found += got.hits.iter().filter(|h| truth.contains(&h.index)).count();
                    wanted += truth.len();
                }
            }
        }
        let recall = found as f64 / wanted as f64;
        assert!(recall >= 0.95, "filtered recall {recall}");
        for s in [
            Strategy::Empty,
            Strategy::Exact,
            Strategy::SignScan,
            Strategy::Graph,
        ] {
            assert!(
                strategies.contains(&s),
                "{s:?} never chosen: {strategies:?}"
            );
        }
    }

    /// The planner scans while `admitted² ≤ 3 × ef × n` (the cost of a two-hop walk in scanned
    /// rows, measured: docs/benchmarks.md "Filtered search"), scans the sign codes while
    /// `sign_row_cost × admitted² ≤ 3 × ef × n` (instead of the exact scan only past 4,800
    /// admitted, which this index does not reach), and walks above both: the same filter is
    /// walked at a small `ef` and scanned at a large one.
    #[test]
    fn the_planner_scans_below_the_measured_crossover_and_walks_above_it() {
        let dir = tempfile::tempdir().unwrap();
        let (index, _, queries) = index(&dir.path().join("idx"));
        let f = bound(
            &index,
            json!({"must": [{"key": "cluster", "range": {"lt": 3}}]}),
        );
        let bits = Admitted::from(f.admitted_in(&index).unwrap());
        let count = bits.len() as f64;
        for sign_row_cost in [1e12, DEFAULT_SIGN_ROW_COST, 0.5] {
            for ef in [16, 32, 64, 128, 256, 512] {
                let got = index
                    .search_admitted_with(
                        &queries[0],
                        10,
                        ef,
                        &bits,
                        DEFAULT_SCAN_FACTOR,
                        sign_row_cost,
                    )
                    .unwrap();
                let walk_cost = 3.0 * ef as f64 * N as f64;
                let planned = if count * count <= walk_cost {
                    Strategy::Exact
                } else if sign_row_cost * count * count <= walk_cost {
                    Strategy::SignScan
                } else {
                    Strategy::Graph
                };
                // A walk or a scan of the codes may still give up for the exact scan
                // (`graph_then_exact`, `sign_scan_then_exact`): it was planned.
                let strategy = match got.strategy {
                    Strategy::GraphThenExact => Strategy::Graph,
                    Strategy::SignScanThenExact => Strategy::SignScan,
                    s => s,
                };
                assert_eq!(
                    strategy, planned,
                    "{count} admitted of {N}, ef {ef}, sign rows at {sign_row_cost}"
                );
                assert_eq!(got.hits.len(), 10);
            }
        }
        // Every side of both crossovers is met, below where the codes replace the exact scan.
        assert!(count <= 4_800.0, "{count}");
        assert!(0.5 * count * count > 3.0 * 16.0 * N as f64, "{count}");
        assert!(count * count > 3.0 * 64.0 * N as f64, "{count}");
        assert!(count * count <= 3.0 * 512.0 * N as f64, "{count}");

        // The operator's factor moves the crossover: 0 always walks, a huge one always scans,
        // and either answers min(k, admitted) hits.
        for (factor, ef, walked) in [(0.0, 512, true), (1e12, 16, false)] {
            let got = index
                .search_admitted(&queries[0], 10, ef, &bits, factor)
                .unwrap();
            assert_eq!(got.hits.len(), 10);
            assert_eq!(
                matches!(got.strategy, Strategy::Graph | Strategy::GraphThenExact),
                walked,
                "factor {factor}, ef {ef}: {:?}",
                got.strategy
            );
        }
        // Fewer admitted than k are scanned whatever the factor.
        let few = Admitted::from(bits.iter().take(5).collect::<RoaringBitmap>());
        let got = index
            .search_admitted(&queries[0], 10, 64, &few, 0.0)
            .unwrap();
        assert_eq!((got.hits.len(), got.strategy), (5, Strategy::Exact));
    }

    #[test]
    fn what_a_filter_admits_at_most_bounds_what_it_admits() {
        let dir = tempfile::tempdir().unwrap();
        let (index, _, _) = index(&dir.path().join("idx"));
        let cases = [
            (
                json!({"must": [{"has_id": ["d1", "d2", "d2", "nope"]}]}),
                Some(3),
            ),
            (
                json!({"must": [{"has_id": ["d1", "d2"]}, {"key": "cat", "match": {"value": "c0"}}]}),
                Some(2),
            ),
            (
                json!({"must": [{"key": "cat", "match": {"any": []}}]}),
                Some(0),
            ),
            (json!({"must": [{"has_id": []}]}), Some(0)),
            (
                json!({"should": [{"has_id": ["d1"]}, {"has_id": ["d5", "d6"]}]}),
                Some(3),
            ),
            (
                json!({"should": [{"has_id": ["d1"]}, {"key": "cat", "match": {"value": "c0"}}]}),
                None,
            ),
            (json!({"must_not": [{"has_id": ["d1"]}]}), None),
            (
                json!({"must": [{"must": [{"has_id": ["d7", "d8"]}]}, {"is_null": {"key": "year"}}]}),
                Some(2),
            ),
            (
                json!({"min_should": {"min_count": 2, "conditions": [
                {"has_id": ["d1", "d2", "d3"]}, {"has_id": ["d2", "d3"]}, {"has_id": ["d3"]}]}}),
                Some(3),
            ),
            (
                json!({"min_should": {"min_count": 3, "conditions": [{"has_id": ["d1"]}, {"is_null": {"key": "year"}}]}}),
                Some(0),
            ),
            (
                json!({"min_should": {"min_count": 1, "conditions": [{"has_id": ["d1"]}, {"is_null": {"key": "year"}}]}}),
                None,
            ),
            (
                json!({"must": [{"key": "year", "range": {"gte": 2010}}]}),
                None,
            ),
        ];
        for (fv, want) in cases {
            let f = bound(&index, fv.clone());
            let admitted = f.admitted_in(&index).unwrap().len();
            assert_eq!(f.admits_at_most(), want, "{fv}");
            if let Some(b) = want {
                assert!(admitted <= b, "{fv}: admits {admitted}, bound {b}");
            }
        }
    }

    #[test]
    fn admitted_sets_are_cached_until_a_payload_index_changes() {
        let dir = tempfile::tempdir().unwrap();
        let (index, _, _) = index(&dir.path().join("idx"));
        let f = bound(
            &index,
            json!({"must": [{"key": "cat", "match": {"value": "c0"}}]}),
        );
        let a = f.admitted_cached(&index).unwrap();
        let b = f.admitted_cached(&index).unwrap();
        assert!(
            std::sync::Arc::ptr_eq(&a, &b),
            "the second use is the cached set"
        );
        assert_eq!(**a, f.admitted_in(&index).unwrap());
        let other = bound(
            &index,
            json!({"must": [{"key": "cat", "match": {"value": "c1"}}]}),
        );
        assert_ne!(
            *other.admitted_cached(&index).unwrap(),
            *a,
            "keyed by the filter"
        );
        index
            .set_payload_index(
                "year",
                Some(FieldSchema {
                    kind: FieldType::Float,
                    tenant: false,
                }),
            )
            .unwrap();
        let c = f.admitted_cached(&index).unwrap();
        assert!(
            !std::sync::Arc::ptr_eq(&a, &c),
            "a payload index change empties the cache"
        );
        assert_eq!(*a, *c);
    }

    #[test]
    fn anti_correlated_filters_still_return_k_hits() {
        let dir = tempfile::tempdir().unwrap();
        let (index, meta, queries) = index(&dir.path().join("idx"));
        // Each query searched among the one cluster farthest from it: every admitted document
        // is far from the query, where a walk that only counts admitted nodes must go far.
        for (c, q) in queries.iter().enumerate() {
            let other = (c as u64 + CLUSTERS / 2) % CLUSTERS;
            let f = bound(
                &index,
                json!({"must": [{"key": "cluster", "match": {"value": other}}]}),
            );
            let bits = Admitted::from(f.admitted_in(&index).unwrap());
            let got = index
                .search_admitted(q, 10, 32, &bits, DEFAULT_SCAN_FACTOR)
                .unwrap();
            let truth = exact(&index, &f, &meta, q, 10);
            let ids: Vec<usize> = got.hits.iter().map(|h| h.index).collect();
            let recall = ids.iter().filter(|i| truth.contains(i)).count() as f64 / 10.0;
            assert!(
                recall >= 0.9,
                "cluster {other} for query {c}: {recall} ({:?})",
                got.strategy
            );
        }
    }

    /// Integers past 2^53 have no float64 of their own (at 1.1e18 one float stands for 128 of
    /// them), yet a 64-bit account or tenant id is one: a match or a range on an integer field
    /// must tell such ids apart, in the payload index's bitmaps as in the per-document verdict.
    #[test]
    fn integers_past_two_to_the_53_are_compared_exactly() {
        let big: i64 = 1 << 53;
        let snowflake: i64 = 1_100_000_000_000_000_000;
        let values: Vec<i64> = [
            vec![
                1,
                2,
                3,
                big - 1,
                big,
                big + 1,
                big + 2,
                big + 3,
                -big,
                -big - 1,
            ],
            [0, 1, 2, 63, 64, 127, 128, 200]
                .iter()
                .map(|d| snowflake + d)
                .collect(),
            vec![i64::MAX, i64::MAX - 1, i64::MIN],
        ]
        .concat();
        let mut rng = Rng(11);
        let centre = vec![0.0; DIM];
        let docs = (0..values.len())
            .map(|i| Document {
                id: format!("d{i}"),
                title: String::new(),
                text: format!("document {i}"),
            })
            .collect();
        let vectors = values.iter().flat_map(|_| rng.unit(DIM, &centre)).collect();
        let metadata: Vec<Value> = values.iter().map(|v| json!({"account": v})).collect();
        let dir = tempfile::tempdir().unwrap();
        let index = build(
            &dir.path().join("idx"),
            docs,
            vectors,
            &metadata,
            &[("account", FieldType::Integer)],
            GraphVectors::Float32,
        );
        let s = |d: i64| json!(snowflake + d);
        // Which account values a condition admits, by integer arithmetic.
        type Truth = Box<dyn Fn(i128) -> bool>;
        let cases: Vec<(Value, Truth)> = vec![
            (
                json!({"match": {"value": s(1)}}),
                Box::new(move |x| x == (snowflake + 1) as i128),
            ),
            (
                json!({"match": {"value": big + 1}}),
                Box::new(move |x| x == (big + 1) as i128),
            ),
            (
                json!({"match": {"any": [big + 3, s(64)]}}),
                Box::new(move |x| x == (big + 3) as i128 || x == (snowflake + 64) as i128),
            ),
            (
                json!({"match": {"except": [s(1)]}}),
                Box::new(move |x| x != (snowflake + 1) as i128),
            ),
            (
                json!({"range": {"gte": s(1), "lte": s(127)}}),
                Box::new(move |x| {
                    ((snowflake + 1) as i128..=(snowflake + 127) as i128).contains(&x)
                }),
            ),
            (
                json!({"range": {"gt": s(0), "lt": s(128)}}),
                Box::new(move |x| x > snowflake as i128 && x < (snowflake + 128) as i128),
            ),
            (
                json!({"range": {"gt": big + 1}}),
                Box::new(move |x| x > (big + 1) as i128),
            ),
            (
                json!({"range": {"lt": -big}}),
                Box::new(move |x| x < -big as i128),
            ),
            (
                json!({"range": {"gt": 1.5, "lte": 3.5}}),
                Box::new(|x| x == 2 || x == 3),
            ),
            (
                json!({"range": {"gte": i64::MAX}}),
                Box::new(|x| x == i64::MAX as i128),
            ),
            (json!({"range": {"gt": u64::MAX}}), Box::new(|_| false)),
            (
                json!({"range": {"gte": -1e300, "lt": 1e300}}),
                Box::new(|_| true),
            ),
        ];
        for (condition, truth) in cases {
            let mut condition = condition;
            condition["key"] = json!("account");
            let fv = json!({"must": [condition]});
            let f = bound(&index, fv.clone());
            let want: Vec<u32> = (0..values.len() as u32)
                .filter(|&i| truth(values[i as usize] as i128))
                .collect();
            let verdict: Vec<u32> = (0..values.len() as u32)
                .filter(|&i| f.admits(&format!("d{i}"), Some(&metadata[i as usize])))
                .collect();
            assert_eq!(verdict, want, "verdict of {fv}");
            let bits: Vec<u32> = f.admitted_in(&index).unwrap().iter().collect();
            assert_eq!(bits, want, "bitmap of {fv}");
        }
    }
}
