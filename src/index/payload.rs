//! Document metadata (the payload) and the payload indexes that let a filter know, before a
//! search, exactly which documents it admits.
//!
//! `payload.bin` holds each document's metadata as JSON text, addressed by internal index (all
//! integers little-endian):
//!
//! ```text
//! magic     8 bytes  b"CAPOTPL\x01"
//! count     u64
//! blob_len  u64
//! offsets   (count + 1) × u64   metadata of doc i is blob[off[i] .. off[i+1]] (empty: none)
//! blob      blob_len bytes of UTF-8 JSON objects, concatenated
//! ```
//!
//! It is listed in the manifest with its size and BLAKE3 like every other file, and written
//! beside an existing index by [`super::Index::set_payload`] (new file first, then the manifest
//! replaced atomically). The manifest's `payload.fields` declares which metadata keys are
//! indexed and as what type; the indexes themselves ([`PayloadIndexes`]) are built in memory
//! when the index loads (or when a field is declared on a running server): roaring bitmaps per
//! keyword and boolean value, a sorted value array per numeric or datetime field.
//!
//! How a metadata value is read for a key and a type ([`values_at`], [`typed`]) is defined here
//! once: the bitmaps and the per-document check of a filter (`query/filter.rs`) both use it, so
//! the two can never disagree.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use roaring::RoaringBitmap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::IndexError;
use super::fileio::HashingWriter;
use super::manifest::FileInfo;
use super::mapped::Mapped;

/// File name of the metadata inside an index directory.
pub const PAYLOAD_FILE: &str = "payload.bin";
const MAGIC: &[u8; 8] = b"CAPOTPL\x01";
const HEADER: usize = 24;

/// Type of a payload index, as declared (`--payload-index lang:keyword`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    /// Strings, matched exactly (`match {value|any|except}`).
    Keyword,
    /// Whole numbers (`match` and `range`).
    Integer,
    /// Numbers (`range` only).
    Float,
    /// `true` / `false` (`match`).
    Bool,
    /// RFC 3339 strings (`range` with RFC 3339 bounds).
    Datetime,
}

impl FieldType {
    /// Every type, in the order the docs list them.
    pub const ALL: [FieldType; 5] = [
        FieldType::Keyword,
        FieldType::Integer,
        FieldType::Float,
        FieldType::Bool,
        FieldType::Datetime,
    ];

    /// The name used on the command line and in the APIs.
    pub fn as_str(self) -> &'static str {
        match self {
            FieldType::Keyword => "keyword",
            FieldType::Integer => "integer",
            FieldType::Float => "float",
            FieldType::Bool => "bool",
            FieldType::Datetime => "datetime",
        }
    }
}

impl std::str::FromStr for FieldType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        FieldType::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown payload index type {s:?} (keyword, integer, float, bool, datetime)"
                )
            })
    }
}

/// A declared payload index: its type, and whether the field is the tenant key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FieldSchema {
    #[serde(rename = "type")]
    pub kind: FieldType,
    /// The tenant key: each query is expected to name one value (Qdrant's `is_tenant`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tenant: bool,
}

/// The payload section of the manifest: the declared indexes (`payload.bin` is in `files`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PayloadInfo {
    /// Declared payload indexes by metadata key (dotted path).
    #[serde(default)]
    pub fields: BTreeMap<String, FieldSchema>,
}

/// Checks a metadata key as a filter or a declaration names it: dotted path of non-empty parts,
/// no control characters (which no store's SQL or index names could hold either).
pub fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() || key.len() > 256 {
        return Err("a key must have 1 to 256 characters".into());
    }
    if key.chars().any(char::is_control) {
        return Err(format!("key {key:?} holds a control character"));
    }
    if key.split('.').any(str::is_empty) {
        return Err(format!("key {key:?} has an empty path segment"));
    }
    Ok(())
}

/// The values `metadata` holds at `key` (`a.b` walks nested objects; an array on the way or at
/// the end stands for each of its elements, so an array matches when any element does).
/// `null` values are included; a missing key gives none.
pub fn values_at<'a>(metadata: &'a Value, key: &str) -> Vec<&'a Value> {
    let mut current = vec![metadata];
    for part in key.split('.') {
        let mut next = Vec::new();
        for v in current {
            collect_field(v, part, &mut next);
        }
        current = next;
    }
    let mut out = Vec::new();
    for v in current {
        flatten(v, &mut out);
    }
    out
}

fn collect_field<'a>(v: &'a Value, part: &str, out: &mut Vec<&'a Value>) {
    match v {
        Value::Object(o) => out.extend(o.get(part)),
        Value::Array(a) => a.iter().for_each(|e| collect_field(e, part, out)),
        _ => {}
    }
}

fn flatten<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
    match v {
        Value::Array(a) => a.iter().for_each(|e| flatten(e, out)),
        v => out.push(v),
    }
}

/// A metadata value read as a field type.
#[derive(Debug, Clone, PartialEq)]
pub enum Typed<'a> {
    Keyword(&'a str),
    /// Floats and datetimes (unix seconds) compare as `f64`, integers as integers.
    Number(f64),
    Integer(i64),
    Bool(bool),
}

/// `v` read as `kind`, `None` when it is not of that type (a string in an integer field, an
/// unparsable datetime): such a value is not indexed and matches no condition on the field.
pub fn typed(v: &Value, kind: FieldType) -> Option<Typed<'_>> {
    match (kind, v) {
        (FieldType::Keyword, Value::String(s)) => Some(Typed::Keyword(s)),
        (FieldType::Integer, Value::Number(n)) => n.as_i64().map(Typed::Integer),
        (FieldType::Float, Value::Number(n)) => n.as_f64().map(Typed::Number),
        (FieldType::Bool, Value::Bool(b)) => Some(Typed::Bool(*b)),
        (FieldType::Datetime, Value::String(s)) => parse_datetime(s).map(Typed::Number),
        _ => None,
    }
}

/// Unix seconds of an RFC 3339 date-time (`2024-05-01T12:00:00Z`, offsets allowed), `None`
/// when it does not parse.
pub fn parse_datetime(s: &str) -> Option<f64> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    Some(t.unix_timestamp_nanos() as f64 / 1e9)
}

/// The number a typed value compares as in a range (`None` for keywords and booleans).
pub fn number(t: &Typed<'_>) -> Option<f64> {
    match *t {
        Typed::Number(x) => Some(x),
        Typed::Integer(i) => Some(i as f64),
        _ => None,
    }
}

/// Bounds of a numeric range; `None` is open.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NumericRange {
    pub gt: Option<f64>,
    pub gte: Option<f64>,
    pub lt: Option<f64>,
    pub lte: Option<f64>,
}

impl NumericRange {
    /// Whether `x` lies within every bound.
    pub fn contains(&self, x: f64) -> bool {
        self.gt.is_none_or(|b| x > b)
            && self.gte.is_none_or(|b| x >= b)
            && self.lt.is_none_or(|b| x < b)
            && self.lte.is_none_or(|b| x <= b)
    }
}

/// The largest integer magnitude below which every integer has a float64 of its own (2^53 − 1):
/// past it, one float stands for several integers.
const EXACT_IN_FLOATS: u128 = (1 << 53) - 1;

/// A range on an integer field as the integers it admits, `lo..=hi`. Integer fields compare as
/// integers, not as the float64 a numeric payload index keeps: past 2^53 one float stands for
/// several integers (128 of them at 1.1e18), and a 64-bit account or tenant id is such an
/// integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntegerRange {
    pub lo: i128,
    pub hi: i128,
}

impl Default for IntegerRange {
    fn default() -> Self {
        IntegerRange {
            lo: i128::MIN,
            hi: i128::MAX,
        }
    }
}

impl IntegerRange {
    /// Exactly the integer `i`.
    pub fn just(i: i64) -> Self {
        IntegerRange {
            lo: i.into(),
            hi: i.into(),
        }
    }

    /// Narrows the range by one bound as given (`gt`, `gte`, `lt`, `lte`): `bound` is the JSON
    /// number, exact whether it is an integer of any size or a float.
    pub fn narrow(&mut self, op: &str, bound: &serde_json::Number) {
        let int = bound
            .as_i64()
            .map(i128::from)
            .or_else(|| bound.as_u64().map(i128::from));
        // A float bound: the integers on its side of it (saturating: past i128 nothing lies).
        let float = |round: fn(f64) -> f64| round(bound.as_f64().unwrap_or(f64::NAN)) as i128;
        match op {
            "gt" => {
                self.lo = self
                    .lo
                    .max(int.unwrap_or_else(|| float(f64::floor)).saturating_add(1))
            }
            "gte" => self.lo = self.lo.max(int.unwrap_or_else(|| float(f64::ceil))),
            "lt" => {
                self.hi = self
                    .hi
                    .min(int.unwrap_or_else(|| float(f64::ceil)).saturating_sub(1))
            }
            "lte" => self.hi = self.hi.min(int.unwrap_or_else(|| float(f64::floor))),
            _ => {}
        }
    }

    /// Whether `x` lies within the bounds (compared as integers, exactly).
    pub fn contains(&self, x: i64) -> bool {
        (self.lo..=self.hi).contains(&i128::from(x))
    }

    /// The lower bound, `None` when no 64-bit integer lies below it.
    pub fn lower(&self) -> Option<i128> {
        (self.lo > i64::MIN.into()).then_some(self.lo)
    }

    /// The upper bound, `None` when no 64-bit integer lies above it.
    pub fn upper(&self) -> Option<i128> {
        (self.hi < i64::MAX.into()).then_some(self.hi)
    }

    /// The float64 range whose values stand for at least these integers (rounding keeps
    /// order, so an integer in the range has its float in this one).
    pub fn covering(&self) -> NumericRange {
        NumericRange {
            gte: self.lower().map(|b| b as f64),
            lte: self.upper().map(|b| b as f64),
            ..NumericRange::default()
        }
    }

    /// Whether [`Self::covering`] admits these integers and no other: each bound's float
    /// stands for that integer alone.
    pub fn exact_in_floats(&self) -> bool {
        let exact = |b: Option<i128>| b.is_none_or(|b| b.unsigned_abs() <= EXACT_IN_FLOATS);
        exact(self.lower()) && exact(self.upper())
    }
}

/// The in-memory index of one declared field.
#[derive(Debug)]
pub struct FieldIndex {
    pub schema: FieldSchema,
    /// Documents with at least one non-null value at the key (of any type).
    present: RoaringBitmap,
    /// Documents with an explicit `null` at the key.
    null: RoaringBitmap,
    values: Values,
    /// Values of another type than declared (not indexed).
    mismatched: u64,
}

#[derive(Debug)]
enum Values {
    Keyword(HashMap<Box<str>, RoaringBitmap>),
    Bool([RoaringBitmap; 2]),
    /// `(value, document)` sorted by value, then document, and a bitmap per
    /// [`NUMERIC_BUCKET`] entries of it, so a wide range is a union of bitmaps and only its two
    /// edge buckets are read entry by entry.
    Numeric(Vec<(f64, u32)>, Vec<RoaringBitmap>),
}

/// The most threads [`PayloadStore::indexes`] parses metadata on.
const BUILD_THREADS: usize = 8;

/// Entries of a numeric index per bucket bitmap (see [`Values::Numeric`]).
const NUMERIC_BUCKET: usize = 1024;

impl FieldIndex {
    /// An empty index for `schema`, filled by [`FieldIndex::add`] in document order.
    fn new(schema: FieldSchema) -> Self {
        let values = match schema.kind {
            FieldType::Keyword => Values::Keyword(HashMap::new()),
            FieldType::Bool => Values::Bool(Default::default()),
            _ => Values::Numeric(Vec::new(), Vec::new()),
        };
        FieldIndex {
            schema,
            present: RoaringBitmap::new(),
            null: RoaringBitmap::new(),
            values,
            mismatched: 0,
        }
    }

    fn add(&mut self, doc: u32, metadata: &Value, key: &str) {
        for v in values_at(metadata, key) {
            if v.is_null() {
                self.null.insert(doc);
                continue;
            }
            self.present.insert(doc);
            match (typed(v, self.schema.kind), &mut self.values) {
                (Some(Typed::Keyword(s)), Values::Keyword(map)) => {
                    map.entry(s.into()).or_default().insert(doc);
                }
                (Some(Typed::Bool(b)), Values::Bool(bits)) => {
                    bits[usize::from(b)].insert(doc);
                }
                (Some(t), Values::Numeric(list, _)) => {
                    if let Some(x) = number(&t) {
                        list.push((x, doc));
                    }
                }
                _ => self.mismatched += 1,
            }
        }
    }

    /// Adds what `other` (of the same schema, built from other documents) holds, before
    /// [`FieldIndex::seal`].
    fn absorb(&mut self, other: FieldIndex) {
        self.present |= other.present;
        self.null |= other.null;
        self.mismatched += other.mismatched;
        match (&mut self.values, other.values) {
            (Values::Keyword(mine), Values::Keyword(theirs)) => {
                for (value, docs) in theirs {
                    *mine.entry(value).or_default() |= docs;
                }
            }
            (Values::Bool(mine), Values::Bool(theirs)) => {
                for (m, t) in mine.iter_mut().zip(theirs) {
                    *m |= t;
                }
            }
            (Values::Numeric(mine, _), Values::Numeric(theirs, _)) => mine.extend(theirs),
            _ => {}
        }
    }

    fn seal(&mut self) {
        if let Values::Numeric(list, buckets) = &mut self.values {
            list.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            list.dedup();
            list.shrink_to_fit();
            *buckets = list
                .chunks(NUMERIC_BUCKET)
                .map(|c| c.iter().map(|e| e.1).collect())
                .collect();
        }
    }

    /// Documents holding the keyword `s`.
    pub fn keyword(&self, s: &str) -> RoaringBitmap {
        match &self.values {
            Values::Keyword(map) => map.get(s).cloned().unwrap_or_default(),
            _ => RoaringBitmap::new(),
        }
    }

    /// How many documents hold the keyword `s` (no bitmap built).
    pub fn keyword_count(&self, s: &str) -> u64 {
        match &self.values {
            Values::Keyword(map) => map.get(s).map_or(0, RoaringBitmap::len),
            _ => 0,
        }
    }

    /// Documents holding the boolean `b`.
    pub fn boolean(&self, b: bool) -> RoaringBitmap {
        match &self.values {
            Values::Bool(bits) => bits[usize::from(b)].clone(),
            _ => RoaringBitmap::new(),
        }
    }

    /// Documents with a number (integer, float, datetime as unix seconds) within `range`.
    pub fn range(&self, range: &NumericRange) -> RoaringBitmap {
        let Values::Numeric(list, buckets) = &self.values else {
            return RoaringBitmap::new();
        };
        let start = match (range.gt, range.gte) {
            (Some(b), _) => list.partition_point(|e| e.0 <= b),
            (None, Some(b)) => list.partition_point(|e| e.0 < b),
            (None, None) => 0,
        };
        let end = match (range.lt, range.lte) {
            (Some(b), _) => list.partition_point(|e| e.0 < b),
            (None, Some(b)) => list.partition_point(|e| e.0 <= b),
            (None, None) => list.len(),
        };
        let mut out = RoaringBitmap::new();
        let mut edges: Vec<u32> = Vec::new();
        if start < end {
            let (first, last) = (start / NUMERIC_BUCKET, end.div_ceil(NUMERIC_BUCKET));
            for (b, bits) in buckets.iter().enumerate().take(last).skip(first) {
                let (from, to) = (
                    b * NUMERIC_BUCKET,
                    ((b + 1) * NUMERIC_BUCKET).min(list.len()),
                );
                if from >= start && to <= end {
                    out |= bits;
                } else {
                    edges.extend(
                        list[from.max(start)..to.min(end)]
                            .iter()
                            .filter(|e| range.contains(e.0))
                            .map(|e| e.1),
                    );
                }
            }
        }
        edges.sort_unstable();
        edges.dedup();
        out | RoaringBitmap::from_sorted_iter(edges).unwrap_or_default()
    }

    /// Documents with any non-null value at the key.
    pub fn present(&self) -> &RoaringBitmap {
        &self.present
    }

    /// Documents with an explicit `null` at the key.
    pub fn null(&self) -> &RoaringBitmap {
        &self.null
    }

    /// Distinct values indexed (keywords, booleans, numbers).
    pub fn distinct_values(&self) -> usize {
        match &self.values {
            Values::Keyword(map) => map.len(),
            Values::Bool(bits) => bits.iter().filter(|b| !b.is_empty()).count(),
            Values::Numeric(list, _) => {
                list.windows(2).filter(|w| w[0].0 != w[1].0).count() + usize::from(!list.is_empty())
            }
        }
    }

    /// Heap bytes, approximately.
    pub fn heap_bytes(&self) -> usize {
        let bitmaps = |b: &RoaringBitmap| b.serialized_size();
        let values = match &self.values {
            Values::Keyword(map) => map
                .iter()
                .map(|(k, b)| k.len() + bitmaps(b) + 48)
                .sum::<usize>(),
            Values::Bool(bits) => bits.iter().map(bitmaps).sum(),
            Values::Numeric(list, buckets) => {
                list.capacity() * std::mem::size_of::<(f64, u32)>()
                    + buckets.iter().map(bitmaps).sum::<usize>()
            }
        };
        values + bitmaps(&self.present) + bitmaps(&self.null)
    }

    /// What `GET /admin/index` says of it.
    pub fn report(&self, key: &str) -> FieldReport {
        FieldReport {
            key: key.to_string(),
            schema: self.schema,
            documents: self.present.len(),
            distinct_values: self.distinct_values(),
            mismatched_values: self.mismatched,
            heap_bytes: self.heap_bytes(),
        }
    }
}

/// One payload index as reported by the admin API and `capot index info`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct FieldReport {
    pub key: String,
    #[serde(flatten)]
    pub schema: FieldSchema,
    /// Documents with a value at the key.
    pub documents: u64,
    pub distinct_values: usize,
    /// Values of another type than declared, which no condition matches.
    pub mismatched_values: u64,
    pub heap_bytes: usize,
}

/// The payload indexes of one index, by key.
#[derive(Debug, Default)]
pub struct PayloadIndexes {
    fields: BTreeMap<String, FieldIndex>,
}

impl PayloadIndexes {
    /// Builds the indexes of `fields` from every document's metadata (`(internal index,
    /// metadata)`, any order).
    pub fn build<V: std::borrow::Borrow<Value>>(
        fields: &BTreeMap<String, FieldSchema>,
        docs: impl Iterator<Item = (u32, V)>,
    ) -> Self {
        let mut built: BTreeMap<String, FieldIndex> = fields
            .iter()
            .map(|(k, s)| (k.clone(), FieldIndex::new(*s)))
            .collect();
        for (doc, metadata) in docs {
            for (key, index) in &mut built {
                index.add(doc, metadata.borrow(), key);
            }
        }
        built.values_mut().for_each(FieldIndex::seal);
        PayloadIndexes { fields: built }
    }

    /// The index of `key`, if declared.
    pub fn field(&self, key: &str) -> Option<&FieldIndex> {
        self.fields.get(key)
    }

    /// The declared keys and their schemas.
    pub fn schemas(&self) -> BTreeMap<String, FieldSchema> {
        self.fields
            .iter()
            .map(|(k, f)| (k.clone(), f.schema))
            .collect()
    }

    /// A copy of these indexes with `key` replaced by `index` (or removed when `None`).
    pub fn with(&self, key: &str, index: Option<FieldIndex>) -> PayloadIndexes {
        let mut fields: BTreeMap<String, FieldIndex> = BTreeMap::new();
        for (k, f) in &self.fields {
            if k != key {
                fields.insert(k.clone(), f.shallow_clone());
            }
        }
        if let Some(index) = index {
            fields.insert(key.to_string(), index);
        }
        PayloadIndexes { fields }
    }

    /// Reports of every field.
    pub fn report(&self) -> Vec<FieldReport> {
        self.fields.iter().map(|(k, f)| f.report(k)).collect()
    }

    /// Heap bytes of every field.
    pub fn heap_bytes(&self) -> usize {
        self.fields.values().map(FieldIndex::heap_bytes).sum()
    }
}

impl FieldIndex {
    /// A copy (the bitmaps and arrays are copied; a field is rebuilt rarely).
    fn shallow_clone(&self) -> FieldIndex {
        FieldIndex {
            schema: self.schema,
            present: self.present.clone(),
            null: self.null.clone(),
            values: match &self.values {
                Values::Keyword(m) => Values::Keyword(m.clone()),
                Values::Bool(b) => Values::Bool(b.clone()),
                Values::Numeric(l, b) => Values::Numeric(l.clone(), b.clone()),
            },
            mismatched: self.mismatched,
        }
    }

    /// Builds the index of one field from every document's metadata.
    pub fn build<V: std::borrow::Borrow<Value>>(
        key: &str,
        schema: FieldSchema,
        docs: impl Iterator<Item = (u32, V)>,
    ) -> FieldIndex {
        let mut index = FieldIndex::new(schema);
        for (doc, metadata) in docs {
            index.add(doc, metadata.borrow(), key);
        }
        index.seal();
        index
    }
}

/// Writes `payload.bin` at `path` for `count` documents from `(internal index, metadata)` in
/// any order; a document given no metadata (or `null`) has none. Returns size and checksum.
pub(crate) fn write_payload(
    path: &Path,
    count: usize,
    docs: impl Iterator<Item = (usize, Value)>,
) -> Result<FileInfo, IndexError> {
    // Texts go to a part file in the order given; the table is assembled in index order.
    let part = path.with_extension("part");
    let mut spans = vec![(0u64, 0u64); count];
    {
        let mut w = HashingWriter::create(&part)?;
        let mut at = 0u64;
        for (i, metadata) in docs {
            if i >= count {
                return Err(IndexError::InvalidInput(format!(
                    "metadata for document {i} of an index of {count}"
                )));
            }
            if metadata.is_null() {
                continue;
            }
            let text = serde_json::to_string(&metadata)
                .map_err(|e| IndexError::InvalidInput(format!("metadata: {e}")))?;
            w.put(text.as_bytes())?;
            spans[i] = (at, at + text.len() as u64);
            at += text.len() as u64;
        }
        w.finish()?;
    }
    let blob = std::fs::read(&part).map_err(|e| IndexError::io(&part, e))?;
    let mut w = HashingWriter::create(path)?;
    let blob_len: u64 = spans.iter().map(|s| s.1 - s.0).sum();
    w.put(MAGIC)?;
    w.put(&(count as u64).to_le_bytes())?;
    w.put(&blob_len.to_le_bytes())?;
    let mut end = 0u64;
    w.put(&0u64.to_le_bytes())?;
    for s in &spans {
        end += s.1 - s.0;
        w.put(&end.to_le_bytes())?;
    }
    for s in &spans {
        w.put(&blob[s.0 as usize..s.1 as usize])?;
    }
    let info = w.finish()?;
    let _ = std::fs::remove_file(&part);
    Ok(info)
}

/// `payload.bin` mapped and validated: each document's metadata, parsed when asked for.
pub struct PayloadStore {
    map: Mapped<u8>,
    count: usize,
}

impl std::fmt::Debug for PayloadStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PayloadStore")
            .field("count", &self.count)
            .finish_non_exhaustive()
    }
}

impl PayloadStore {
    /// Maps `path` and checks its header and offsets against `count` documents.
    pub(crate) fn open(path: &Path, count: usize) -> Result<Self, IndexError> {
        let map = Mapped::<u8>::open(path, None)?;
        let corrupt = |reason: String| IndexError::corrupt(path, reason);
        let b = map.as_slice();
        if b.len() < HEADER || &b[..8] != MAGIC {
            return Err(corrupt(
                "not a capot payload file (bad magic or truncated)".into(),
            ));
        }
        let word = |at: usize| {
            b.get(at..at + 8)
                .map(|w| u64::from_le_bytes(w.try_into().unwrap_or([0; 8])))
        };
        let n = word(8).unwrap_or(0) as usize;
        let blob_len = word(16).unwrap_or(0) as usize;
        if n != count {
            return Err(corrupt(format!(
                "holds {n} documents, the manifest says {count}"
            )));
        }
        let expected = HEADER + (count + 1) * 8 + blob_len;
        if b.len() != expected {
            return Err(corrupt(format!(
                "size is {} bytes, the header implies {expected}",
                b.len()
            )));
        }
        let mut last = 0u64;
        for i in 0..=count {
            let o = word(HEADER + i * 8).unwrap_or(u64::MAX);
            if o < last || o > blob_len as u64 || (i == 0 && o != 0) {
                return Err(corrupt(format!("offset {i} is out of order or range")));
            }
            last = o;
        }
        if last != blob_len as u64 {
            return Err(corrupt("offsets do not span the metadata".into()));
        }
        Ok(PayloadStore { map, count })
    }

    /// The JSON text of document `i`'s metadata, `None` when it has none.
    fn text(&self, i: usize) -> Option<&[u8]> {
        if i >= self.count {
            return None;
        }
        let b = self.map.as_slice();
        let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]));
        let start = word(HEADER + i * 8) as usize;
        let end = word(HEADER + (i + 1) * 8) as usize;
        let base = HEADER + (self.count + 1) * 8;
        (end > start).then(|| &b[base + start..base + end])
    }

    /// Document `i`'s metadata, `None` when it has none (or, for a file whose checksum was
    /// verified, never otherwise).
    pub fn get(&self, i: usize) -> Option<Value> {
        self.text(i).and_then(|t| serde_json::from_slice(t).ok())
    }

    /// Documents with metadata, parsed one at a time.
    pub fn iter(&self) -> impl Iterator<Item = (u32, Value)> + '_ {
        (0..self.count).filter_map(|i| self.get(i).map(|v| (i as u32, v)))
    }

    /// The indexes of `fields` over every document's metadata, the documents split between up
    /// to [`BUILD_THREADS`] threads (as many as the machine has) and their parts merged:
    /// parsing the JSON is what a build costs (at 1M documents with five fields, 3.6 s of a
    /// 5.4 s load on one thread).
    pub fn indexes(&self, fields: &BTreeMap<String, FieldSchema>) -> PayloadIndexes {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        self.indexes_on(fields, threads.clamp(1, BUILD_THREADS))
    }

    /// The index of one field, `key`, as [`PayloadStore::indexes`] builds it.
    pub fn field_index(&self, key: &str, schema: FieldSchema) -> FieldIndex {
        let mut built = self.indexes(&BTreeMap::from([(key.to_string(), schema)]));
        built
            .fields
            .remove(key)
            .unwrap_or_else(|| FieldIndex::new(schema))
    }

    /// [`PayloadStore::indexes`] on `threads` threads.
    fn indexes_on(&self, fields: &BTreeMap<String, FieldSchema>, threads: usize) -> PayloadIndexes {
        let empty = || -> BTreeMap<String, FieldIndex> {
            fields
                .iter()
                .map(|(k, s)| (k.clone(), FieldIndex::new(*s)))
                .collect()
        };
        let part = |range: std::ops::Range<usize>| {
            let mut built = empty();
            for i in range {
                if let Some(metadata) = self.get(i) {
                    for (key, index) in &mut built {
                        index.add(i as u32, &metadata, key);
                    }
                }
            }
            built
        };
        let chunk = self.count.div_ceil(threads.max(1)).max(1);
        let parts: Vec<BTreeMap<String, FieldIndex>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..self.count)
                .step_by(chunk)
                .map(|start| s.spawn(move || part(start..(start + chunk).min(self.count))))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        let mut built = empty();
        for part in parts {
            for (key, index) in part {
                if let Some(mine) = built.get_mut(&key) {
                    mine.absorb(index);
                }
            }
        }
        built.values_mut().for_each(FieldIndex::seal);
        PayloadIndexes { fields: built }
    }

    /// Bytes mapped.
    pub fn bytes(&self) -> usize {
        self.map.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `lang` keyword, `year` integer, `ok` bool, `at` datetime.
    fn four_fields() -> BTreeMap<String, FieldSchema> {
        [
            ("lang".to_string(), schema(FieldType::Keyword)),
            ("year".to_string(), schema(FieldType::Integer)),
            ("ok".to_string(), schema(FieldType::Bool)),
            ("at".to_string(), schema(FieldType::Datetime)),
        ]
        .into_iter()
        .collect()
    }

    fn schema(kind: FieldType) -> FieldSchema {
        FieldSchema {
            kind,
            tenant: false,
        }
    }

    #[test]
    fn values_at_walks_objects_and_arrays() {
        let m = json!({"a": {"b": [1, {"c": 2}]}, "tags": ["x", ["y"]], "n": null,
                       "list": [{"k": "p"}, {"k": "q"}]});
        assert_eq!(values_at(&m, "a.b").len(), 2);
        assert_eq!(values_at(&m, "a.b.c"), vec![&json!(2)]);
        assert_eq!(values_at(&m, "tags"), vec![&json!("x"), &json!("y")]);
        assert_eq!(values_at(&m, "n"), vec![&Value::Null]);
        assert_eq!(values_at(&m, "list.k"), vec![&json!("p"), &json!("q")]);
        assert!(values_at(&m, "missing").is_empty());
        assert!(values_at(&m, "a.b.c.d").is_empty());
    }

    #[test]
    fn field_indexes_answer_what_the_values_say() {
        let docs = [
            json!({"lang": "en", "year": 2020, "ok": true, "at": "2024-01-01T00:00:00Z"}),
            json!({"lang": ["en", "de"], "year": 2021.5, "ok": false}),
            json!({"lang": null, "year": "x", "at": "not a date"}),
            json!({}),
        ];
        let fields = four_fields();
        let p = PayloadIndexes::build(&fields, docs.iter().enumerate().map(|(i, d)| (i as u32, d)));
        let lang = p.field("lang").unwrap();
        assert_eq!(lang.keyword("en").iter().collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(lang.keyword("de").iter().collect::<Vec<_>>(), vec![1]);
        assert_eq!(lang.null().iter().collect::<Vec<_>>(), vec![2]);
        let year = p.field("year").unwrap();
        // 2021.5 is no integer and "x" no number: neither is indexed.
        assert_eq!(year.mismatched, 2);
        let all = NumericRange::default();
        assert_eq!(year.range(&all).iter().collect::<Vec<_>>(), vec![0]);
        let r = NumericRange {
            gt: Some(2020.0),
            ..Default::default()
        };
        assert!(year.range(&r).is_empty());
        assert_eq!(p.field("ok").unwrap().boolean(false).len(), 1);
        let at = p.field("at").unwrap();
        let since = NumericRange {
            gte: parse_datetime("2023-12-31T23:00:00-02:00"),
            ..Default::default()
        };
        // 2024-01-01T00:00Z is before 2024-01-01T01:00Z.
        assert!(at.range(&since).is_empty());
        assert_eq!(at.mismatched, 1);
    }

    #[test]
    fn payload_file_round_trips_and_rejects_damage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PAYLOAD_FILE);
        let docs = vec![
            (2, json!({"a": 1})),
            (0, json!({"b": "x"})),
            (1, Value::Null),
        ];
        let info = write_payload(&path, 3, docs.into_iter()).unwrap();
        assert_eq!(info.bytes, std::fs::metadata(&path).unwrap().len());
        let store = PayloadStore::open(&path, 3).unwrap();
        assert_eq!(store.get(0), Some(json!({"b": "x"})));
        assert_eq!(store.get(1), None);
        assert_eq!(store.get(2), Some(json!({"a": 1})));
        assert_eq!(store.get(3), None);
        assert!(PayloadStore::open(&path, 4).is_err());
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.truncate(bytes.len() - 1);
        std::fs::write(&path, &bytes).unwrap();
        assert!(PayloadStore::open(&path, 3).is_err());
    }

    /// Built on several threads from `payload.bin`, the indexes hold exactly what one pass over
    /// the same documents builds, whatever the number of threads (more than the documents too).
    #[test]
    fn indexes_built_on_several_threads_equal_one_pass() {
        let docs: Vec<Value> = (0..3001u64)
            .map(|i| match i % 11 {
                0 => Value::Null,
                1 => json!({"lang": null, "year": "x", "ok": "maybe"}),
                2 => json!({"lang": ["en", format!("l{}", i % 7)], "year": [i % 40, 1990 + i % 3]}),
                _ => {
                    json!({"lang": format!("l{}", i % 13), "year": 1990 + i % 35, "ok": i % 3 == 0,
                            "at": format!("2024-01-{:02}T00:00:00Z", 1 + i % 28)})
                }
            })
            .collect();
        let fields = four_fields();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PAYLOAD_FILE);
        write_payload(&path, docs.len(), docs.iter().cloned().enumerate()).unwrap();
        let store = PayloadStore::open(&path, docs.len()).unwrap();
        let one_pass = PayloadIndexes::build(&fields, store.iter());
        let ranges = [
            (0.0, 2e9),
            (5.0, 20.0),
            (1990.0, 1991.0),
            (1.7040672e9, 1.7045e9),
        ];
        for threads in [1, 2, 3, 8, 5000] {
            let built = store.indexes_on(&fields, threads);
            assert_eq!(built.report(), one_pass.report(), "{threads} threads");
            for (key, want) in &one_pass.fields {
                let got = built.field(key).unwrap();
                assert_eq!(got.present(), want.present(), "{key}, {threads} threads");
                assert_eq!(got.null(), want.null(), "{key}, {threads} threads");
                for value in ["en", "l0", "l6", "l12", "x"] {
                    assert_eq!(got.keyword(value), want.keyword(value), "{key}={value}");
                }
                for b in [false, true] {
                    assert_eq!(got.boolean(b), want.boolean(b), "{key}={b}");
                }
                for (lo, hi) in ranges {
                    let r = NumericRange {
                        gte: Some(lo),
                        lte: Some(hi),
                        ..Default::default()
                    };
                    assert_eq!(got.range(&r), want.range(&r), "{key} in {lo}..={hi}");
                }
            }
        }
        // What the ranges and keywords above look at is there to compare.
        let year = one_pass.field("year").unwrap();
        assert!(
            year.range(&NumericRange {
                gte: Some(1990.0),
                lte: Some(1991.0),
                ..Default::default()
            })
            .len()
                > 100
        );
        assert!(one_pass.field("lang").unwrap().keyword("en").len() > 100);
        assert!(one_pass.field("ok").unwrap().boolean(true).len() > 100);
        assert!(
            one_pass
                .field("at")
                .unwrap()
                .range(&NumericRange {
                    gte: Some(ranges[3].0),
                    lte: Some(ranges[3].1),
                    ..Default::default()
                })
                .len()
                > 100
        );
        // One field alone, as `PUT /admin/index/payload/{field}` builds it.
        let lang = store.field_index("lang", schema(FieldType::Keyword));
        assert_eq!(
            lang.report("lang"),
            one_pass.field("lang").unwrap().report("lang")
        );
    }

    #[test]
    fn wide_numeric_ranges_equal_the_values_one_by_one() {
        // Several buckets' worth of values, some documents with two: every range is checked
        // against the values themselves.
        let docs: Vec<Value> = (0..5000u64)
            .map(|i| match i % 7 {
                0 => json!({"x": [i % 300, (i * 13) % 300]}),
                _ => json!({"x": (i * 31) % 1000}),
            })
            .collect();
        let index = FieldIndex::build(
            "x",
            schema(FieldType::Integer),
            docs.iter().enumerate().map(|(i, d)| (i as u32, d)),
        );
        for (lo, hi) in [
            (0.0, 1000.0),
            (10.0, 990.0),
            (299.5, 300.5),
            (500.0, 500.0),
            (-5.0, 3.0),
        ] {
            let r = NumericRange {
                gte: Some(lo),
                lte: Some(hi),
                ..Default::default()
            };
            let want: Vec<u32> = docs
                .iter()
                .enumerate()
                .filter(|(_, d)| {
                    values_at(d, "x")
                        .iter()
                        .any(|v| r.contains(v.as_f64().unwrap()))
                })
                .map(|(i, _)| i as u32)
                .collect();
            assert_eq!(
                index.range(&r).iter().collect::<Vec<_>>(),
                want,
                "{lo}..={hi}"
            );
        }
    }
}
