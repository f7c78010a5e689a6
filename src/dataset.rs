//! Readers for retrieval datasets in the BEIR layout.
//!
//! A dataset directory holds:
//!
//! - `corpus.jsonl`: one JSON object per line, `{"_id", "title", "text"}`
//!   (`title` optional or empty, other fields such as `metadata` ignored);
//! - `queries.jsonl`: `{"_id", "text"}` per line (a `queries.tsv` with
//!   `qid<TAB>text` lines is accepted instead);
//! - `qrels/<split>.tsv`: header `query-id<TAB>corpus-id<TAB>score`, graded
//!   integer gains (0 = judged non-relevant); the split used by default is
//!   `test`;
//! - optional query variant files `queries.<name>.tsv`: `qid<TAB>text`, no
//!   header (for example the ten `queries.typoN.tsv` typo versions).
//!
//! IDs may be JSON strings or numbers; both are kept as strings (numbers in
//! their JSON spelling, so `19335` and `"19335"` are the same id).
//!
//! Every error names the file and the 1-based line number. The readers take
//! a [`ReadMode`]: [`ReadMode::Strict`] fails at the first bad line,
//! [`ReadMode::Lenient`] skips bad lines and lists them in a [`ReadReport`].
//! Blank lines are ignored in both modes; a UTF-8 byte-order mark and `\r\n`
//! line ends are accepted.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Relevance judgements: query id → (document id → graded gain).
///
/// Gain 0 means judged non-relevant; binary metrics treat gain ≥ 1 as
/// relevant. Ordered maps keep every derived output deterministic.
pub type Qrels = BTreeMap<String, BTreeMap<String, i32>>;

/// The text a passage is encoded from: `title + " " + text` when the
/// document has a (non-blank) title, else `text` (else the title alone when
/// the text is blank). This is how BEIR-style bi-encoders encode passages.
pub fn document_text(title: &str, text: &str) -> String {
    let title = title.trim();
    let body = text.trim();
    match (title.is_empty(), body.is_empty()) {
        (false, false) => format!("{title} {body}"),
        (false, true) => title.to_string(),
        _ => body.to_string(),
    }
}

/// One corpus entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Document {
    /// Document id (`_id`), as a string.
    pub id: String,
    /// Title, empty when absent.
    pub title: String,
    /// Body text.
    pub text: String,
}

impl Document {
    /// The text to encode for this document (see [`document_text`]).
    pub fn encoded_text(&self) -> String {
        document_text(&self.title, &self.text)
    }
}

/// One query (or one query variant).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Query {
    /// Query id.
    pub id: String,
    /// Query text.
    pub text: String,
}

/// Documents in file order with lookup by id.
#[derive(Debug, Clone, Default)]
pub struct Corpus {
    docs: Vec<Document>,
    by_id: HashMap<String, usize>,
    lines: Vec<usize>,
}

impl Corpus {
    /// Builds a corpus; fails on a duplicate id (`line` is then the 1-based
    /// position of the duplicate in `docs`).
    pub fn from_docs(docs: Vec<Document>) -> Result<Self, LineError> {
        let mut corpus = Corpus::default();
        for (i, doc) in docs.into_iter().enumerate() {
            corpus.push(doc, i + 1)?;
        }
        Ok(corpus)
    }

    fn push(&mut self, doc: Document, line: usize) -> Result<(), LineError> {
        if let Some(&first) = self.by_id.get(&doc.id) {
            return Err(LineError::DuplicateId {
                id: doc.id,
                first_line: self.lines.get(first).copied().unwrap_or(0),
            });
        }
        self.by_id.insert(doc.id.clone(), self.docs.len());
        self.docs.push(doc);
        self.lines.push(line);
        Ok(())
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// True when there are no documents.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Documents in file order (the order an index is built in).
    pub fn docs(&self) -> &[Document] {
        &self.docs
    }

    /// Document by id.
    pub fn get(&self, id: &str) -> Option<&Document> {
        self.by_id.get(id).map(|&i| &self.docs[i])
    }

    /// Position of a document in file order.
    pub fn position(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    /// True when the id is in the corpus.
    pub fn contains(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }
}

/// Queries (or the variants of one variant file) in file order with lookup
/// by id. Ids are unique.
#[derive(Debug, Clone, Default)]
pub struct Queries {
    queries: Vec<Query>,
    by_id: HashMap<String, usize>,
    lines: Vec<usize>,
}

impl Queries {
    /// Builds a query set; fails on a duplicate id.
    pub fn from_queries(queries: Vec<Query>) -> Result<Self, LineError> {
        let mut set = Queries::default();
        for (i, q) in queries.into_iter().enumerate() {
            set.push(q, i + 1)?;
        }
        Ok(set)
    }

    fn push(&mut self, q: Query, line: usize) -> Result<(), LineError> {
        if let Some(&first) = self.by_id.get(&q.id) {
            return Err(LineError::DuplicateId {
                id: q.id,
                first_line: self.lines.get(first).copied().unwrap_or(0),
            });
        }
        self.by_id.insert(q.id.clone(), self.queries.len());
        self.queries.push(q);
        self.lines.push(line);
        Ok(())
    }

    /// Number of queries.
    pub fn len(&self) -> usize {
        self.queries.len()
    }

    /// True when there are no queries.
    pub fn is_empty(&self) -> bool {
        self.queries.is_empty()
    }

    /// Queries in file order.
    pub fn queries(&self) -> &[Query] {
        &self.queries
    }

    /// Query by id.
    pub fn get(&self, id: &str) -> Option<&Query> {
        self.by_id.get(id).map(|&i| &self.queries[i])
    }

    /// True when the id is present.
    pub fn contains(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }

    /// Ids of this set that `known` lacks, in file order (for checking that
    /// a variant file refers only to known queries).
    pub fn unknown_ids<'a>(&'a self, known: &Queries) -> Vec<&'a str> {
        self.queries
            .iter()
            .filter(|q| !known.contains(&q.id))
            .map(|q| q.id.as_str())
            .collect()
    }
}

/// What went wrong on one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LineError {
    /// The line is not valid JSON (or not a JSON object).
    #[error("malformed JSON: {message}")]
    MalformedJson {
        /// Parser message.
        message: String,
    },
    /// The line is not valid UTF-8.
    #[error("invalid UTF-8")]
    InvalidUtf8,
    /// No `_id` field (or it is null/empty).
    #[error("missing `_id`")]
    MissingId,
    /// `_id` is neither a string nor a number.
    #[error("`_id` must be a string or a number, found {found}")]
    BadId {
        /// JSON type found.
        found: String,
    },
    /// A field has the wrong JSON type.
    #[error("field `{field}` must be a string, found {found}")]
    BadField {
        /// Field name.
        field: String,
        /// JSON type found.
        found: String,
    },
    /// The id was already seen.
    #[error("duplicate id {id:?} (first on line {first_line})")]
    DuplicateId {
        /// The id.
        id: String,
        /// Line of the first occurrence.
        first_line: usize,
    },
    /// The id is already in the index being built (found by the index writer, which knows
    /// documents by their position, not their line).
    #[error("duplicate id {id:?} (already indexed as document {first_document})")]
    DuplicateDocument {
        /// The id.
        id: String,
        /// 0-based position of the first document with this id.
        first_document: usize,
    },
    /// Nothing to encode: text (and title) empty or blank.
    #[error("empty text for id {id:?}")]
    EmptyText {
        /// The id.
        id: String,
    },
    /// A TSV line with the wrong shape or an unparsable field.
    #[error("bad TSV line: {message}")]
    BadTsv {
        /// What is wrong.
        message: String,
    },
    /// The same (query, document) pair judged twice in a qrels file.
    #[error("duplicate judgement for query {query_id:?}, document {doc_id:?}")]
    DuplicateJudgement {
        /// Query id.
        query_id: String,
        /// Document id.
        doc_id: String,
    },
}

/// Errors of the dataset readers; each names its file.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A bad line (strict mode).
    #[error("{path}:{line}: {error}")]
    Line {
        /// File (or a label such as `<stdin>`).
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        error: LineError,
    },
    /// A dataset directory lacks a required file.
    #[error("{dir}: no {what} found (looked for {tried})")]
    MissingFile {
        /// Directory.
        dir: PathBuf,
        /// What was looked for.
        what: String,
        /// Names tried.
        tried: String,
    },
}

impl DatasetError {
    /// The 1-based line number for line errors.
    pub fn line(&self) -> Option<usize> {
        match self {
            DatasetError::Line { line, .. } => Some(*line),
            _ => None,
        }
    }

    /// The line error, if this is one.
    pub fn line_error(&self) -> Option<&LineError> {
        match self {
            DatasetError::Line { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// How readers treat a bad line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadMode {
    /// Fail at the first bad line (default).
    #[default]
    Strict,
    /// Skip bad lines and report them.
    Lenient,
}

/// One line skipped in lenient mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedLine {
    /// 1-based line number.
    pub line: usize,
    /// Why it was skipped.
    pub reason: LineError,
}

/// What a reader did with a file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadReport {
    /// File (or label) read.
    pub path: PathBuf,
    /// Records accepted.
    pub accepted: usize,
    /// Lines skipped (always empty in strict mode).
    pub skipped: Vec<SkippedLine>,
}

impl fmt::Display for ReadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} accepted, {} skipped",
            self.path.display(),
            self.accepted,
            self.skipped.len()
        )?;
        for s in self.skipped.iter().take(10) {
            write!(f, "\n  line {}: {}", s.line, s.reason)?;
        }
        if self.skipped.len() > 10 {
            write!(f, "\n  ... {} more", self.skipped.len() - 10)?;
        }
        Ok(())
    }
}

/// Format of a query or variant file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueryFormat {
    /// Decide per file: by extension (`.jsonl`/`.json` → JSONL, anything
    /// else → TSV) for paths; by the first non-blank line (starts with `{`
    /// → JSONL) for streams.
    #[default]
    Auto,
    /// `qid<TAB>text` lines, no header.
    Tsv,
    /// `{"_id", "text"}` lines.
    Jsonl,
}

/// Resolves `path` as a file, or as a dataset directory holding one of
/// `names` (first existing wins).
fn resolve(path: &Path, what: &str, names: &[&str]) -> Result<PathBuf, DatasetError> {
    if !path.is_dir() {
        return Ok(path.to_path_buf());
    }
    for name in names {
        let candidate = path.join(name);
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    Err(DatasetError::MissingFile {
        dir: path.to_path_buf(),
        what: what.to_string(),
        tried: names.join(", "),
    })
}

fn open(path: &Path) -> Result<BufReader<File>, DatasetError> {
    File::open(path)
        .map(BufReader::new)
        .map_err(|source| DatasetError::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// Iterates over lines as (1-based number, text); invalid UTF-8 becomes a
/// line error, I/O failures end the read with an error.
struct Lines<R> {
    reader: R,
    line: usize,
    /// Bytes consumed so far.
    bytes: u64,
    buf: Vec<u8>,
}

impl<R: BufRead> Lines<R> {
    fn new(reader: R) -> Self {
        Lines {
            reader,
            line: 0,
            bytes: 0,
            buf: Vec::new(),
        }
    }

    /// Next line: `Ok(None)` at end, `Ok(Some((n, Err)))` for bad UTF-8.
    #[allow(clippy::type_complexity)]
    fn next_line(&mut self) -> std::io::Result<Option<(usize, Result<String, LineError>)>> {
        self.buf.clear();
        let n = self.reader.read_until(b'\n', &mut self.buf)?;
        if n == 0 {
            return Ok(None);
        }
        self.bytes += n as u64;
        self.line += 1;
        let mut bytes: &[u8] = &self.buf;
        if self.line == 1 && bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
            bytes = &bytes[3..];
        }
        while let Some((&last, rest)) = bytes.split_last() {
            if last == b'\n' || last == b'\r' {
                bytes = rest;
            } else {
                break;
            }
        }
        Ok(Some((
            self.line,
            std::str::from_utf8(bytes)
                .map(str::to_string)
                .map_err(|_| LineError::InvalidUtf8),
        )))
    }
}

/// Shared driver: feeds each non-blank line to `parse`, applying `mode`.
fn drive<R: BufRead>(
    reader: R,
    label: &Path,
    mode: ReadMode,
    mut parse: impl FnMut(usize, &str) -> Result<(), LineError>,
) -> Result<ReadReport, DatasetError> {
    let mut lines = Lines::new(reader);
    let mut report = ReadReport {
        path: label.to_path_buf(),
        ..ReadReport::default()
    };
    loop {
        let next = lines.next_line().map_err(|source| DatasetError::Io {
            path: label.to_path_buf(),
            source,
        })?;
        let Some((line, text)) = next else { break };
        let result = match text {
            Ok(t) if t.trim().is_empty() => continue,
            Ok(t) => parse(line, &t),
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => report.accepted += 1,
            Err(error) => match mode {
                ReadMode::Strict => {
                    return Err(DatasetError::Line {
                        path: label.to_path_buf(),
                        line,
                        error,
                    });
                }
                ReadMode::Lenient => report.skipped.push(SkippedLine {
                    line,
                    reason: error,
                }),
            },
        }
    }
    Ok(report)
}

#[derive(Deserialize)]
struct RawRecord {
    #[serde(rename = "_id", default)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    title: Option<serde_json::Value>,
    #[serde(default)]
    text: Option<serde_json::Value>,
}

fn json_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

fn parse_id(v: Option<serde_json::Value>) -> Result<String, LineError> {
    match v {
        None | Some(serde_json::Value::Null) => Err(LineError::MissingId),
        Some(serde_json::Value::String(s)) => {
            let s = s.trim().to_string();
            if s.is_empty() {
                Err(LineError::MissingId)
            } else {
                Ok(s)
            }
        }
        Some(serde_json::Value::Number(n)) => Ok(n.to_string()),
        Some(other) => Err(LineError::BadId {
            found: json_type(&other).to_string(),
        }),
    }
}

fn parse_text_field(field: &str, v: Option<serde_json::Value>) -> Result<String, LineError> {
    match v {
        None | Some(serde_json::Value::Null) => Ok(String::new()),
        Some(serde_json::Value::String(s)) => Ok(s),
        Some(other) => Err(LineError::BadField {
            field: field.to_string(),
            found: json_type(&other).to_string(),
        }),
    }
}

fn parse_json_record(line: &str) -> Result<(String, String, String), LineError> {
    // serde would read a struct from an array positionally: demand an object.
    if !line.trim_start().starts_with('{') {
        return Err(LineError::MalformedJson {
            message: "expected a JSON object".to_string(),
        });
    }
    let raw: RawRecord = serde_json::from_str(line).map_err(|e| LineError::MalformedJson {
        message: e.to_string(),
    })?;
    let id = parse_id(raw.id)?;
    let title = parse_text_field("title", raw.title)?;
    let text = parse_text_field("text", raw.text)?;
    Ok((id, title, text))
}

fn parse_document(line: &str) -> Result<Document, LineError> {
    let (id, title, text) = parse_json_record(line)?;
    if title.trim().is_empty() && text.trim().is_empty() {
        return Err(LineError::EmptyText { id });
    }
    Ok(Document { id, title, text })
}

fn parse_query_json(line: &str) -> Result<Query, LineError> {
    let (id, _title, text) = parse_json_record(line)?;
    if text.trim().is_empty() {
        return Err(LineError::EmptyText { id });
    }
    Ok(Query { id, text })
}

fn parse_query_tsv(line: &str) -> Result<Query, LineError> {
    let Some((id, text)) = line.split_once('\t') else {
        return Err(LineError::BadTsv {
            message: "expected `qid<TAB>text`, found no tab".to_string(),
        });
    };
    let id = id.trim();
    if id.is_empty() {
        return Err(LineError::MissingId);
    }
    // A text holding further tabs is kept whole (tabs become spaces).
    let text = text.replace('\t', " ");
    let text = text.trim();
    if text.is_empty() {
        return Err(LineError::EmptyText { id: id.to_string() });
    }
    Ok(Query {
        id: id.to_string(),
        text: text.to_string(),
    })
}

/// The metadata of a corpus's documents, as the index stores it: the `metadata` object of a
/// line merged with its other top-level fields (all but `_id`, `id`, `title`, `text`; a
/// `metadata` that is no object is kept under its name). Calls `f(id, metadata)` for each line
/// that has any; lines that do not parse are passed over (reading the documents reports them).
/// Returns how many documents had metadata.
pub fn for_each_metadata(
    path: &Path,
    mut f: impl FnMut(String, serde_json::Value),
) -> Result<usize, DatasetError> {
    let path = resolve(path, "corpus", &["corpus.jsonl"])?;
    let reader = open(&path)?;
    let mut count = 0;
    for line in reader.lines() {
        let line = line.map_err(|source| DatasetError::Io {
            path: path.clone(),
            source,
        })?;
        let line = line.trim_start_matches('\u{feff}');
        let Ok(serde_json::Value::Object(mut o)) = serde_json::from_str::<serde_json::Value>(line)
        else {
            continue;
        };
        let Ok(id) = parse_id(o.remove("_id")) else {
            continue;
        };
        for k in ["id", "title", "text"] {
            o.remove(k);
        }
        let mut metadata = match o.remove("metadata") {
            Some(serde_json::Value::Object(m)) => m,
            Some(serde_json::Value::Null) | None => serde_json::Map::new(),
            Some(other) => serde_json::Map::from_iter([("metadata".to_string(), other)]),
        };
        for (k, v) in o {
            metadata.entry(k).or_insert(v);
        }
        if !metadata.is_empty() {
            count += 1;
            f(id, serde_json::Value::Object(metadata));
        }
    }
    Ok(count)
}

/// Reads a BEIR `corpus.jsonl` from a file, or from a dataset directory
/// (its `corpus.jsonl`).
pub fn read_corpus(path: &Path, mode: ReadMode) -> Result<(Corpus, ReadReport), DatasetError> {
    let path = resolve(path, "corpus", &["corpus.jsonl"])?;
    read_corpus_from(open(&path)?, &path, mode)
}

/// Reads corpus JSONL from any reader; `label` names it in errors.
pub fn read_corpus_from<R: BufRead>(
    reader: R,
    label: &Path,
    mode: ReadMode,
) -> Result<(Corpus, ReadReport), DatasetError> {
    let mut corpus = Corpus::default();
    let report = drive(reader, label, mode, |line, text| {
        let doc = parse_document(text)?;
        corpus.push(doc, line)
    })?;
    Ok((corpus, report))
}

/// A BEIR `corpus.jsonl` read one document at a time, so that a corpus larger than memory can
/// be indexed, and resumed at a byte offset. Bad lines are handled as by [`read_corpus`]
/// (skipped and reported in lenient mode); duplicate ids are left to the consumer, which is
/// the one that remembers the ids.
pub struct CorpusStream {
    lines: Lines<BufReader<File>>,
    path: PathBuf,
    mode: ReadMode,
    len: u64,
    skipped: Vec<SkippedLine>,
}

impl CorpusStream {
    /// Opens a corpus file, or a dataset directory's `corpus.jsonl`.
    pub fn open(path: &Path, mode: ReadMode) -> Result<Self, DatasetError> {
        let path = resolve(path, "corpus", &["corpus.jsonl"])?;
        let io = |source| DatasetError::Io {
            path: path.clone(),
            source,
        };
        let file = File::open(&path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        Ok(CorpusStream {
            lines: Lines::new(BufReader::with_capacity(1 << 20, file)),
            path,
            mode,
            len,
            skipped: Vec::new(),
        })
    }

    /// The corpus file read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Size of the file in bytes.
    pub fn len_bytes(&self) -> u64 {
        self.len
    }

    /// Bytes and lines consumed so far.
    pub fn position(&self) -> (u64, usize) {
        (self.lines.bytes, self.lines.line)
    }

    /// Continues reading at byte `byte`, which must be the start of line `line + 1` (a
    /// position this stream reported earlier).
    pub fn seek(&mut self, byte: u64, line: usize) -> Result<(), DatasetError> {
        use std::io::{Seek, SeekFrom};
        self.lines
            .reader
            .seek(SeekFrom::Start(byte))
            .map_err(|source| DatasetError::Io {
                path: self.path.clone(),
                source,
            })?;
        self.lines.bytes = byte;
        self.lines.line = line;
        Ok(())
    }

    /// The next document and its 1-based line; `Ok(None)` at the end. In strict mode a bad
    /// line is an error; in lenient mode it is skipped and kept for [`take_skipped`](Self::take_skipped).
    pub fn next_document(&mut self) -> Result<Option<(usize, Document)>, DatasetError> {
        loop {
            let next = self.lines.next_line().map_err(|source| DatasetError::Io {
                path: self.path.clone(),
                source,
            })?;
            let Some((line, text)) = next else {
                return Ok(None);
            };
            let result = match text {
                Ok(t) if t.trim().is_empty() => continue,
                Ok(t) => parse_document(&t),
                Err(e) => Err(e),
            };
            match result {
                Ok(doc) => return Ok(Some((line, doc))),
                Err(error) => self.bad_line(line, error)?,
            }
        }
    }

    /// Records a bad line: an error in strict mode, a skipped line in lenient mode. For
    /// problems the consumer finds (a duplicate id).
    pub fn bad_line(&mut self, line: usize, error: LineError) -> Result<(), DatasetError> {
        match self.mode {
            ReadMode::Strict => Err(DatasetError::Line {
                path: self.path.clone(),
                line,
                error,
            }),
            ReadMode::Lenient => {
                self.skipped.push(SkippedLine {
                    line,
                    reason: error,
                });
                Ok(())
            }
        }
    }

    /// Lines skipped since the last call.
    pub fn take_skipped(&mut self) -> Vec<SkippedLine> {
        std::mem::take(&mut self.skipped)
    }
}

/// Reads queries from a file (`.jsonl`/`.json` → JSONL, else TSV) or a
/// dataset directory (`queries.jsonl`, else `queries.tsv`).
pub fn read_queries(path: &Path, mode: ReadMode) -> Result<(Queries, ReadReport), DatasetError> {
    let path = resolve(path, "queries", &["queries.jsonl", "queries.tsv"])?;
    let format = format_of_path(&path);
    read_queries_from(open(&path)?, &path, format, mode)
}

/// Reads a query variant file (`qid<TAB>text`, or JSONL by extension).
/// Same rules as [`read_queries`]; kept separate for intent and for a
/// directory argument being an error here.
pub fn read_variants(path: &Path, mode: ReadMode) -> Result<(Queries, ReadReport), DatasetError> {
    let format = format_of_path(path);
    read_queries_from(open(path)?, path, format, mode)
}

fn format_of_path(path: &Path) -> QueryFormat {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("jsonl") | Some("json") => QueryFormat::Jsonl,
        _ => QueryFormat::Tsv,
    }
}

/// Reads queries or variants from any reader (stdin included). With
/// [`QueryFormat::Auto`] the first non-blank line decides: `{` → JSONL,
/// else TSV.
pub fn read_queries_from<R: BufRead>(
    reader: R,
    label: &Path,
    format: QueryFormat,
    mode: ReadMode,
) -> Result<(Queries, ReadReport), DatasetError> {
    let mut queries = Queries::default();
    let mut format = format;
    let report = drive(reader, label, mode, |line, text| {
        if format == QueryFormat::Auto {
            format = if text.trim_start().starts_with('{') {
                QueryFormat::Jsonl
            } else {
                QueryFormat::Tsv
            };
        }
        let q = match format {
            QueryFormat::Jsonl => parse_query_json(text)?,
            _ => parse_query_tsv(text)?,
        };
        queries.push(q, line)
    })?;
    Ok((queries, report))
}

/// Reads qrels from a file, or from a dataset directory
/// (`qrels/test.tsv`). See [`read_qrels_from`] for the accepted lines.
pub fn read_qrels(path: &Path, mode: ReadMode) -> Result<(Qrels, ReadReport), DatasetError> {
    let path = resolve(path, "qrels", &["qrels/test.tsv"])?;
    read_qrels_from(open(&path)?, &path, mode)
}

/// Reads qrels from any reader. Lines are BEIR `query-id<TAB>corpus-id<TAB>score`
/// (a header line whose score is not an integer is skipped when it is the
/// first line), or TREC `qid iter docid score` (4 whitespace-separated
/// fields). Scores are integers; a repeated (query, document) pair is an
/// error, as in trec_eval.
pub fn read_qrels_from<R: BufRead>(
    reader: R,
    label: &Path,
    mode: ReadMode,
) -> Result<(Qrels, ReadReport), DatasetError> {
    let mut qrels = Qrels::new();
    let mut first = true;
    let mut header_skipped = false;
    let report = drive(reader, label, mode, |_line, text| {
        let is_first = std::mem::replace(&mut first, false);
        let fields: Vec<&str> = if text.contains('\t') {
            text.split('\t').map(str::trim).collect()
        } else {
            text.split_whitespace().collect()
        };
        let (qid, did, score) = match fields.as_slice() {
            [q, d, s] => (*q, *d, *s),
            [q, _iter, d, s] => (*q, *d, *s),
            _ => {
                return Err(LineError::BadTsv {
                    message: format!(
                        "expected 3 fields (query-id, corpus-id, score), found {}",
                        fields.len()
                    ),
                });
            }
        };
        let score: i32 = match score.parse() {
            Ok(s) => s,
            Err(_) if is_first => {
                header_skipped = true;
                return Ok(());
            }
            Err(_) => {
                return Err(LineError::BadTsv {
                    message: format!("score {score:?} is not an integer"),
                });
            }
        };
        if qid.is_empty() || did.is_empty() {
            return Err(LineError::BadTsv {
                message: "empty query or corpus id".to_string(),
            });
        }
        let entry = qrels.entry(qid.to_string()).or_default();
        if entry.contains_key(did) {
            return Err(LineError::DuplicateJudgement {
                query_id: qid.to_string(),
                doc_id: did.to_string(),
            });
        }
        entry.insert(did.to_string(), score);
        Ok(())
    })?;
    let mut report = report;
    if header_skipped {
        report.accepted = report.accepted.saturating_sub(1);
    }
    Ok((qrels, report))
}

/// Lists the query variant files `queries.<name>.tsv` (or `.jsonl`) of a
/// dataset directory as (name, path), in natural order (`typo2` before
/// `typo10`).
pub fn variant_files(dir: &Path) -> Result<Vec<(String, PathBuf)>, DatasetError> {
    let entries = std::fs::read_dir(dir).map_err(|source| DatasetError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| DatasetError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = entry.path();
        if !path.is_file() {
            continue;
        }
        let Some(file) = path.file_name().and_then(|f| f.to_str()) else {
            continue;
        };
        let Some(rest) = file.strip_prefix("queries.") else {
            continue;
        };
        let name = rest
            .strip_suffix(".tsv")
            .or_else(|| rest.strip_suffix(".jsonl"));
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            out.push((name.to_string(), path.clone()));
        }
    }
    out.sort_by(|a, b| natural_cmp(&a.0, &b.0).then_with(|| a.1.cmp(&b.1)));
    Ok(out)
}

/// Compares strings treating digit runs as numbers (`typo2` < `typo10`).
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn chunks(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let mut digit = None;
        for (i, c) in s.char_indices() {
            let d = c.is_ascii_digit();
            if digit != Some(d) {
                if i > start {
                    out.push((digit.unwrap_or(false), &s[start..i]));
                }
                start = i;
                digit = Some(d);
            }
        }
        if start < s.len() {
            out.push((digit.unwrap_or(false), &s[start..]));
        }
        out
    }
    let (ca, cb) = (chunks(a), chunks(b));
    for (x, y) in ca.iter().zip(cb.iter()) {
        let ord = match (x, y) {
            ((true, x), (true, y)) => {
                let (tx, ty) = (x.trim_start_matches('0'), y.trim_start_matches('0'));
                tx.len().cmp(&ty.len()).then_with(|| tx.cmp(ty))
            }
            ((_, x), (_, y)) => x.cmp(y),
        };
        if ord != std::cmp::Ordering::Equal {
            return ord;
        }
    }
    ca.len().cmp(&cb.len()).then_with(|| a.cmp(b))
}

/// Consistency findings of [`Dataset::check`]; none of them is fatal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatasetCheck {
    /// Query ids in the qrels that are not in the queries file.
    pub qrels_unknown_queries: Vec<String>,
    /// Judged documents (any gain) absent from the corpus.
    pub judged_docs_missing: usize,
    /// Relevant judgements (gain ≥ 1) whose document is absent.
    pub relevant_docs_missing: usize,
    /// Queries without any qrels (they are excluded from evaluation).
    pub queries_without_qrels: Vec<String>,
    /// Queries with qrels but no relevant (gain ≥ 1) document.
    pub queries_without_relevant: Vec<String>,
}

/// A loaded BEIR dataset.
#[derive(Debug, Clone, Default)]
pub struct Dataset {
    /// Documents.
    pub corpus: Corpus,
    /// Clean queries.
    pub queries: Queries,
    /// Judgements of the split loaded (default `test`).
    pub qrels: Qrels,
}

impl Dataset {
    /// Loads `corpus.jsonl`, `queries.jsonl` (or `queries.tsv`) and
    /// `qrels/test.tsv` from `dir`, strictly.
    pub fn load(dir: &Path) -> Result<Self, DatasetError> {
        Self::load_split(dir, "test", ReadMode::Strict).map(|(d, _)| d)
    }

    /// Loads with a chosen qrels split (`qrels/<split>.tsv`) and read mode;
    /// returns the read reports of corpus, queries and qrels.
    pub fn load_split(
        dir: &Path,
        split: &str,
        mode: ReadMode,
    ) -> Result<(Self, Vec<ReadReport>), DatasetError> {
        let (corpus, r1) = read_corpus(&dir.join("corpus.jsonl"), mode)?;
        let queries_path = resolve(dir, "queries", &["queries.jsonl", "queries.tsv"])?;
        let (queries, r2) = read_queries(&queries_path, mode)?;
        let qrels_path = dir.join("qrels").join(format!("{split}.tsv"));
        let (qrels, r3) = read_qrels(&qrels_path, mode)?;
        Ok((
            Dataset {
                corpus,
                queries,
                qrels,
            },
            vec![r1, r2, r3],
        ))
    }

    /// Cross-checks queries, qrels and corpus.
    pub fn check(&self) -> DatasetCheck {
        let mut c = DatasetCheck::default();
        for (qid, judged) in &self.qrels {
            if !self.queries.contains(qid) {
                c.qrels_unknown_queries.push(qid.clone());
            }
            if !judged.values().any(|&g| g >= 1) {
                c.queries_without_relevant.push(qid.clone());
            }
            for (did, &gain) in judged {
                if !self.corpus.contains(did) {
                    c.judged_docs_missing += 1;
                    if gain >= 1 {
                        c.relevant_docs_missing += 1;
                    }
                }
            }
        }
        for q in self.queries.queries() {
            if !self.qrels.contains_key(&q.id) {
                c.queries_without_qrels.push(q.id.clone());
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn label() -> PathBuf {
        PathBuf::from("<test>")
    }

    fn corpus(s: &str, mode: ReadMode) -> Result<(Corpus, ReadReport), DatasetError> {
        read_corpus_from(Cursor::new(s.as_bytes()), &label(), mode)
    }

    fn queries(s: &str) -> Result<(Queries, ReadReport), DatasetError> {
        read_queries_from(
            Cursor::new(s.as_bytes()),
            &label(),
            QueryFormat::Auto,
            ReadMode::Strict,
        )
    }

    fn qrels(s: &str) -> Result<(Qrels, ReadReport), DatasetError> {
        read_qrels_from(Cursor::new(s.as_bytes()), &label(), ReadMode::Strict)
    }

    #[test]
    fn document_text_joins_title() {
        assert_eq!(document_text("Title", "body"), "Title body");
        assert_eq!(document_text("", "body"), "body");
        assert_eq!(document_text("  ", "body"), "body");
        assert_eq!(document_text("Title", ""), "Title");
    }

    #[test]
    fn corpus_accepts_numbers_strings_missing_titles() {
        let s = "\u{feff}{\"_id\": 12, \"title\": \"T\", \"text\": \"a\", \"metadata\": {}}\r\n\
                 \n\
                 {\"_id\": \"x\", \"text\": \"b\"}\n\
                 {\"_id\": \"y\", \"title\": null, \"text\": \"c\"}";
        let (c, r) = corpus(s, ReadMode::Strict).unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!(r.accepted, 3);
        assert_eq!(c.get("12").unwrap().encoded_text(), "T a");
        assert_eq!(c.get("x").unwrap().title, "");
        assert_eq!(c.position("y"), Some(2));
        assert_eq!(c.docs()[0].id, "12");
    }

    #[test]
    fn corpus_strict_errors_name_the_line() {
        type Case = (&'static str, usize, fn(&LineError) -> bool);
        let cases: &[Case] = &[
            ("{\"_id\":\"a\",\"text\":\"x\"}\n{bad", 2, |e| {
                matches!(e, LineError::MalformedJson { .. })
            }),
            ("{\"text\":\"x\"}", 1, |e| matches!(e, LineError::MissingId)),
            ("{\"_id\":\"\",\"text\":\"x\"}", 1, |e| {
                matches!(e, LineError::MissingId)
            }),
            ("{\"_id\":[1],\"text\":\"x\"}", 1, |e| {
                matches!(e, LineError::BadId { .. })
            }),
            (
                "{\"_id\":\"a\",\"text\":\"x\"}\n\n{\"_id\":\"a\",\"text\":\"y\"}",
                3,
                |e| matches!(e, LineError::DuplicateId { first_line: 1, .. }),
            ),
            ("{\"_id\":\"a\",\"text\":\"  \"}", 1, |e| {
                matches!(e, LineError::EmptyText { .. })
            }),
            ("{\"_id\":\"a\",\"text\":5}", 1, |e| {
                matches!(e, LineError::BadField { .. })
            }),
            ("[1,2]", 1, |e| matches!(e, LineError::MalformedJson { .. })),
        ];
        for (input, line, check) in cases {
            let err = corpus(input, ReadMode::Strict).unwrap_err();
            assert_eq!(err.line(), Some(*line), "{input}: {err}");
            assert!(check(err.line_error().unwrap()), "{input}: {err}");
            assert!(
                err.to_string().starts_with(&format!("<test>:{line}: ")),
                "{err}"
            );
        }
        // Invalid UTF-8 is a line error, not an I/O failure.
        let bytes = b"{\"_id\":\"a\",\"text\":\"x\"}\n\xff\xfe\n".to_vec();
        let err = read_corpus_from(Cursor::new(bytes), &label(), ReadMode::Strict).unwrap_err();
        assert_eq!(err.line(), Some(2));
        assert_eq!(err.line_error(), Some(&LineError::InvalidUtf8));
    }

    #[test]
    fn corpus_lenient_skips_and_reports() {
        let s = "{\"_id\":\"a\",\"text\":\"x\"}\n{oops\n{\"text\":\"y\"}\n\
                 {\"_id\":\"a\",\"text\":\"dup\"}\n{\"_id\":\"b\",\"text\":\"z\"}\n";
        let (c, r) = corpus(s, ReadMode::Lenient).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c.get("a").unwrap().text, "x");
        assert_eq!(r.accepted, 2);
        let lines: Vec<usize> = r.skipped.iter().map(|s| s.line).collect();
        assert_eq!(lines, [2, 3, 4]);
        assert!(matches!(r.skipped[2].reason, LineError::DuplicateId { .. }));
        assert!(r.to_string().contains("line 3: missing `_id`"));
    }

    #[test]
    fn queries_tsv_jsonl_and_auto_detect() {
        let (q, _) = queries("1\thello world\n2\tsecond\ttabbed\n").unwrap();
        assert_eq!(q.len(), 2);
        assert_eq!(q.get("2").unwrap().text, "second tabbed");
        let (q, _) = queries("{\"_id\": 7, \"text\": \"seven\"}\n").unwrap();
        assert_eq!(q.get("7").unwrap().text, "seven");
        // Explicit format wins over content.
        let err = read_queries_from(
            Cursor::new("{\"_id\": 7, \"text\": \"seven\"}"),
            &label(),
            QueryFormat::Tsv,
            ReadMode::Strict,
        )
        .unwrap_err();
        assert!(matches!(err.line_error(), Some(LineError::BadTsv { .. })));
        for (input, line) in [
            ("1\tok\nnotab", 2),
            ("1\tok\n1\tagain", 2),
            ("\tx", 1),
            ("1\t  ", 1),
        ] {
            assert_eq!(queries(input).unwrap_err().line(), Some(line), "{input:?}");
        }
        let (known, _) = queries("1\ta\n2\tb\n").unwrap();
        let (variants, _) = queries("2\tbb\n3\tcc\n").unwrap();
        assert_eq!(variants.unknown_ids(&known), ["3"]);
    }

    #[test]
    fn qrels_header_trec_and_errors() {
        let (q, r) =
            qrels("query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\nq2\td1\t1\n").unwrap();
        assert_eq!(r.accepted, 3);
        assert_eq!(q["q1"]["d1"], 2);
        assert_eq!(q["q1"]["d2"], 0);
        let (q, _) = qrels("q1\td1\t1\n").unwrap();
        assert_eq!(q["q1"]["d1"], 1);
        let (q, _) = qrels("301 0 FBIS3-10082 1\n301 0 FBIS3-10169 0\n").unwrap();
        assert_eq!(q["301"].len(), 2);
        assert_eq!(qrels("q\td\t1\nq\td\tx\n").unwrap_err().line(), Some(2));
        assert_eq!(qrels("q\td\n").unwrap_err().line(), Some(1));
        let err = qrels("q\td\t1\nq\td\t2\n").unwrap_err();
        assert!(matches!(
            err.line_error(),
            Some(LineError::DuplicateJudgement { .. })
        ));
    }

    #[test]
    fn natural_order() {
        let mut v = vec!["typo10", "typo2", "typo1", "para"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["para", "typo1", "typo2", "typo10"]);
    }

    #[test]
    fn missing_files_are_errors() {
        let err =
            read_corpus(Path::new("/nonexistent/corpus.jsonl"), ReadMode::Strict).unwrap_err();
        assert!(matches!(err, DatasetError::Io { .. }));
        let dir = std::env::temp_dir();
        let err = Dataset::load(&dir.join("capot-eval-no-such-dir")).unwrap_err();
        assert!(matches!(
            err,
            DatasetError::Io { .. } | DatasetError::MissingFile { .. }
        ));
    }

    /// A data set of `../shared/data`, which every developer and CI run has: a missing one
    /// fails the test with the reason, never passes it unseen.
    fn shared(name: &str) -> PathBuf {
        let p = crate::test_assets::shared().join("data").join(name);
        assert!(
            p.is_dir(),
            "{} is missing: these tests read ../shared beside the checkout",
            p.display()
        );
        p
    }

    #[test]
    fn shared_dl19_sample_loads() {
        let dir = shared("dl19-sample");
        let ds = Dataset::load(&dir).unwrap();
        assert_eq!(ds.corpus.len(), 5000);
        assert_eq!(ds.queries.len(), 50);
        assert_eq!(ds.qrels.len(), 43);
        assert_eq!(ds.qrels.values().map(|j| j.len()).sum::<usize>(), 4102);
        let check = ds.check();
        assert!(check.qrels_unknown_queries.is_empty());
        assert_eq!(check.queries_without_qrels.len(), 7);
        assert!(check.queries_without_relevant.is_empty());
        eprintln!("dl19-sample: {check:?}");
        let files = variant_files(&dir).unwrap();
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        let expected: Vec<String> = (1..=10).map(|i| format!("typo{i}")).collect();
        assert_eq!(names, expected);
        for (name, path) in &files {
            let (v, r) = read_variants(path, ReadMode::Strict).unwrap();
            assert_eq!(v.len(), 43, "{name}");
            assert!(r.skipped.is_empty());
            assert!(v.unknown_ids(&ds.queries).is_empty(), "{name}");
            assert!(v.queries().iter().all(|q| ds.qrels.contains_key(&q.id)));
        }
    }

    #[test]
    fn shared_dbpedia_sample_loads() {
        let dir = shared("dbpedia-sample");
        let ds = Dataset::load(&dir).unwrap();
        assert_eq!(ds.corpus.len(), 5000);
        assert_eq!(ds.queries.len(), 50);
        assert_eq!(ds.qrels.len(), 40);
        assert_eq!(ds.qrels.values().map(|j| j.len()).sum::<usize>(), 3709);
        let doc = ds.corpus.get("<dbpedia:Oceanic_Airlines>").unwrap();
        assert!(doc
            .encoded_text()
            .starts_with("Oceanic Airlines Oceanic Airlines and"));
        let check = ds.check();
        assert!(check.qrels_unknown_queries.is_empty());
        eprintln!("dbpedia-sample: {check:?}");
        assert!(variant_files(&dir).unwrap().is_empty());
    }

    #[test]
    fn shared_marco_dev_queries_tsv_directory() {
        let dir = shared("marco-dev-queries");
        let (q, _) = read_queries(&dir, ReadMode::Strict).unwrap();
        assert_eq!(q.len(), 6980);
        let (v, _) = read_variants(&dir.join("queries.typo1.tsv"), ReadMode::Strict).unwrap();
        assert!(v.unknown_ids(&q).is_empty());
    }
}
