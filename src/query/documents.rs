//! Writes to the live corpus, independent of the transport: validate a batch, encode it with the
//! document encoder, log it durably, apply it. A batch is all or nothing; the answer comes when
//! it is durable and (with `wait`) visible to every search that starts afterwards.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::error::ApiError;
use super::stages;
use super::state::{AppState, Corpus};
use crate::index::Index;
use crate::live::{LiveDocument, LiveError, Operation};
use crate::registry::LoadedEncoder;

/// Longest document id, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// A document as a client writes it.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DocumentInput {
    /// Unique id; writing an id that exists (frozen or live) replaces that document.
    pub id: String,
    #[serde(default)]
    pub title: Option<String>,
    pub text: String,
    /// Any JSON, kept with the document and returned by `GET /admin/documents/{id}`.
    #[serde(default)]
    pub metadata: Option<Value>,
}

/// Whether a write is visible yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WriteStatus {
    /// Durable and visible to every search that starts afterwards.
    Completed,
    /// Durable; being applied (`wait=false`).
    Acknowledged,
}

/// The answer to a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct WriteResult {
    /// The batch's position in the write-ahead log.
    pub operation_id: u64,
    pub status: WriteStatus,
}

/// A stored document: the live copy when there is one, else the frozen index's.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct DocumentView {
    pub id: String,
    pub title: String,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// `live` (written since the index was built), `frozen`, or `store` (a document store's).
    pub source: &'static str,
    /// The write that put it there (live documents).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<u64>,
}

/// 409 on a read-only replica: writes go to the one writer, whose log is the corpus's.
fn writable(state: &AppState) -> Result<(), ApiError> {
    if state.limits.read_only {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "read_only",
            "this replica serves searches only (--read-only); send writes to the writer, \
             the one server whose --data-dir keeps the write-ahead log",
        ));
    }
    Ok(())
}

fn corpus(state: &AppState) -> Result<Arc<Corpus>, ApiError> {
    state
        .corpus()
        .ok_or_else(|| ApiError::not_ready("the index is not loaded yet"))
}

/// The loaded encoder whose vectors the index holds: the only one documents may be encoded
/// with (an aligned query encoder's vectors fit queries, not documents).
pub fn document_encoder(state: &AppState, index: &Index) -> Result<Arc<LoadedEncoder>, ApiError> {
    let m = index.manifest();
    document_encoder_of(state, &m.encoder_fingerprint, &m.encoder_name)
}

/// The loaded encoder with this fingerprint (`name` says which one, in the error).
fn document_encoder_of(
    state: &AppState,
    fingerprint: &str,
    name: &str,
) -> Result<Arc<LoadedEncoder>, ApiError> {
    if let Some(e) = state.document_encoder.get() {
        return Ok(e.clone());
    }
    let snapshot = state.registry.snapshot();
    let found = snapshot
        .encoders
        .values()
        .find(|e| e.encoder().manifest().fingerprint == fingerprint)
        .cloned();
    found.ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            "no_document_encoder",
            format!(
                "no loaded encoder is the index's document encoder ({name}, fingerprint {fingerprint}); \
                 load it (capot serve --encoder or --document-encoder, or POST /admin/encoders) \
                 to write documents"
            ),
        )
    })
}

/// Per-item reasons of a refused batch, as one 400.
fn refuse(reasons: Vec<Value>) -> ApiError {
    let first = reasons
        .first()
        .and_then(|r| r["reason"].as_str())
        .unwrap_or("invalid item")
        .to_string();
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "invalid_batch",
        format!(
            "{} item(s) refused, nothing written; first: {first}",
            reasons.len()
        ),
    )
    .with_details(json!({ "items": reasons }))
}

fn check_id(id: &str) -> Option<String> {
    if id.trim().is_empty() {
        Some("id must not be empty".into())
    } else if id.len() > MAX_ID_BYTES {
        Some(format!("id is {} bytes; at most {MAX_ID_BYTES}", id.len()))
    } else if id.chars().any(char::is_control) {
        Some("id must not hold control characters".into())
    } else {
        None
    }
}

fn check_batch_size(state: &AppState, n: usize, what: &str) -> Result<(), ApiError> {
    let max = state.limits.max_write_documents;
    if n == 0 {
        return Err(ApiError::invalid(format!("{what} must not be empty")).with_param(what));
    }
    if n > max {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "batch_too_large",
            format!("{n} {what} in one request; at most {max}: split the batch"),
        ));
    }
    Ok(())
}

/// Ids must be unique in a batch: which of two writes of one id wins would be a guess.
fn duplicates<'a>(ids: impl Iterator<Item = &'a str>, field: &str, out: &mut Vec<Value>) {
    let mut first: HashMap<&str, usize> = HashMap::new();
    for (i, id) in ids.enumerate() {
        if let Some(j) = first.insert(id, i) {
            first.insert(id, j);
            out.push(json!({
                "index": i, "id": id,
                "reason": format!("{field}[{i}]: id {id:?} is also {field}[{j}]"),
            }));
        }
    }
}

/// Adds or replaces `docs`; see the module doc for when it answers.
pub async fn upsert(
    state: &Arc<AppState>,
    docs: Vec<DocumentInput>,
    wait: bool,
) -> Result<WriteResult, ApiError> {
    counted(state, "upsert", upsert_inner(state, docs, wait)).await
}

async fn upsert_inner(
    state: &Arc<AppState>,
    docs: Vec<DocumentInput>,
    wait: bool,
) -> Result<WriteResult, ApiError> {
    writable(state)?;
    check_batch_size(state, docs.len(), "documents")?;
    let mut reasons = Vec::new();
    let max_bytes = state.limits.max_document_bytes;
    for (i, d) in docs.iter().enumerate() {
        let mut why = check_id(&d.id);
        if why.is_none() && d.text.trim().is_empty() {
            why = Some("text must not be empty".into());
        }
        let bytes = d.text.len() + d.title.as_ref().map_or(0, String::len);
        if why.is_none() && bytes > max_bytes {
            why = Some(format!(
                "title and text take {bytes} bytes; at most {max_bytes}"
            ));
        }
        if let Some(why) = why {
            reasons
                .push(json!({"index": i, "id": d.id, "reason": format!("documents[{i}]: {why}")}));
        }
    }
    duplicates(
        docs.iter().map(|d| d.id.as_str()),
        "documents",
        &mut reasons,
    );
    if !reasons.is_empty() {
        return Err(refuse(reasons));
    }
    let store = state.store.get().cloned();
    let encoder = match &store {
        Some(s) => {
            let info = s.info();
            document_encoder_of(state, &info.encoder_fingerprint, &info.encoder_name)?
        }
        None => document_encoder(state, &corpus(state)?.index)?,
    };
    let texts: Vec<String> = docs
        .iter()
        .map(|d| crate::dataset::document_text(d.title.as_deref().unwrap_or(""), &d.text))
        .collect();
    let vectors = stages::encode_documents(&encoder, texts).await?;
    if let Some(store) = store {
        let records = docs
            .into_iter()
            .zip(vectors)
            .map(|(d, vector)| crate::store::RecordWrite {
                id: d.id,
                title: d.title.unwrap_or_default(),
                text: d.text,
                metadata: d.metadata,
                vector,
            })
            .collect::<Vec<_>>();
        let n = records.len();
        let position = store.upsert(records).await.map_err(stages::store_error)?;
        return Ok(stored(state, "upsert", n, position));
    }
    let documents = docs
        .into_iter()
        .zip(vectors)
        .map(|(d, vector)| LiveDocument {
            id: d.id,
            title: d.title.unwrap_or_default(),
            text: d.text,
            metadata: d.metadata,
            vector,
        })
        .collect();
    write(state, Operation::Upsert(documents), wait).await
}

/// Deletes documents by id (ids that exist nowhere are no error).
pub async fn delete(
    state: &Arc<AppState>,
    ids: Vec<String>,
    wait: bool,
) -> Result<WriteResult, ApiError> {
    counted(state, "delete", delete_inner(state, ids, wait)).await
}

async fn delete_inner(
    state: &Arc<AppState>,
    ids: Vec<String>,
    wait: bool,
) -> Result<WriteResult, ApiError> {
    writable(state)?;
    check_batch_size(state, ids.len(), "ids")?;
    let mut reasons: Vec<Value> = ids
        .iter()
        .enumerate()
        .filter_map(|(i, id)| {
            check_id(id)
                .map(|why| json!({"index": i, "id": id, "reason": format!("ids[{i}]: {why}")}))
        })
        .collect();
    duplicates(ids.iter().map(String::as_str), "ids", &mut reasons);
    if !reasons.is_empty() {
        return Err(refuse(reasons));
    }
    if let Some(store) = state.store.get() {
        let n = ids.len();
        let position = store.delete(ids).await.map_err(stages::store_error)?;
        return Ok(stored(state, "delete", n, position));
    }
    write(state, Operation::Delete(ids), wait).await
}

/// The answer to a write a document store committed: `operation_id` is the commit's position
/// in the store's log (PostgreSQL: the WAL position in bytes), and it is visible to every search
/// that starts afterwards whatever `wait` said.
fn stored(state: &AppState, operation: &str, items: usize, position: u64) -> WriteResult {
    state
        .metrics
        .corpus_documents_written
        .with_label_values(&[operation])
        .inc_by(items as u64);
    WriteResult {
        operation_id: position,
        status: WriteStatus::Completed,
    }
}

/// Runs a write and counts it by operation and outcome (`ok`, or the error code).
async fn counted(
    state: &AppState,
    operation: &str,
    write: impl std::future::Future<Output = Result<WriteResult, ApiError>>,
) -> Result<WriteResult, ApiError> {
    let result = write.await;
    let outcome = match &result {
        Ok(_) => "ok",
        Err(e) => e.code,
    };
    state
        .metrics
        .corpus_writes
        .with_label_values(&[operation, outcome])
        .inc();
    result
}

/// Logs `op` durably (off the async runtime: it fsyncs) and applies it, before answering or
/// after (`wait` false). From logging to applying it holds the write gate shared: a
/// compaction's switch waits for it, so the batch lands in the segment it replays into the
/// next version's.
async fn write(state: &Arc<AppState>, op: Operation, wait: bool) -> Result<WriteResult, ApiError> {
    let (name, items) = match &op {
        Operation::Upsert(d) => ("upsert", d.len()),
        Operation::Delete(i) => ("delete", i.len()),
    };
    let gate = state.write_gate.clone().read_owned().await;
    let corpus = corpus(state)?;
    let (live, index) = (corpus.live.clone(), corpus.index.clone());
    drop(corpus);
    let metrics = state.metrics.clone();
    let logged = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let seq = live.log(&op)?;
        metrics
            .corpus_log_seconds
            .observe(started.elapsed().as_secs_f64());
        if wait {
            live.apply(seq, &op, &index);
            metrics.set_corpus(&live.stats());
            drop(gate);
            Ok::<_, LiveError>((seq, None))
        } else {
            Ok((seq, Some((live, index, op, gate))))
        }
    })
    .await
    .map_err(|e| ApiError::internal(format!("write task failed: {e}")))?;
    let (seq, pending) = match logged {
        Ok(l) => l,
        Err(e) => {
            if matches!(e, LiveError::Full(_)) {
                // The 503's Retry-After holds while a compaction folds the segment away.
                super::compaction::start_if_full(state);
            }
            return Err(write_error(e));
        }
    };
    state
        .metrics
        .corpus_documents_written
        .with_label_values(&[name])
        .inc_by(items as u64);
    let status = match pending {
        None => WriteStatus::Completed,
        Some((live, index, op, gate)) => {
            let metrics = state.metrics.clone();
            tokio::task::spawn_blocking(move || {
                live.apply(seq, &op, &index);
                metrics.set_corpus(&live.stats());
                drop(gate);
            });
            WriteStatus::Acknowledged
        }
    };
    super::compaction::start_if_due(state);
    Ok(WriteResult {
        operation_id: seq,
        status,
    })
}

fn write_error(e: LiveError) -> ApiError {
    match e {
        LiveError::Full(_) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "live_segment_full",
            e.to_string(),
        ),
        LiveError::DiskFull(_) => {
            ApiError::new(StatusCode::INSUFFICIENT_STORAGE, "disk_full", e.to_string())
        }
        LiveError::LogFailed(_) => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "log_failed", e.to_string())
        }
        LiveError::TooLarge(_) => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "batch_too_large",
            e.to_string(),
        ),
        LiveError::Io(_) | LiveError::Log(_) => ApiError::internal(e.to_string()),
    }
}

/// The document `id` from the document store (`source: "store"`), absent when it holds none.
pub async fn get_stored(
    store: &dyn crate::store::DocumentStore,
    id: &str,
) -> Result<Option<DocumentView>, ApiError> {
    Ok(store
        .get(id)
        .await
        .map_err(stages::store_error)?
        .map(|d| DocumentView {
            id: d.id,
            title: d.title,
            text: d.text,
            metadata: d.metadata,
            source: "store",
            operation_id: None,
        }))
}

/// The document `id` as searches see it: live, frozen, or absent (deleted or never written).
pub fn get(state: &AppState, id: &str) -> Result<Option<DocumentView>, ApiError> {
    let corpus = corpus(state)?;
    let (live, index) = (&corpus.live, &corpus.index);
    if let Some(d) = live.get(id) {
        return Ok(Some(DocumentView {
            id: d.id,
            title: d.title,
            text: d.text,
            metadata: d.metadata,
            source: "live",
            operation_id: Some(d.seq),
        }));
    }
    let segment = live.read();
    let Some(i) = index
        .index_of(id)
        .map_err(|e| ApiError::internal(e.to_string()))?
    else {
        return Ok(None);
    };
    if segment.hides(i) {
        return Ok(None);
    }
    drop(segment);
    Ok(index
        .document(i)
        .map_err(|e| ApiError::internal(e.to_string()))?
        .map(|d| DocumentView {
            metadata: corpus.frozen_metadata.get(&d.id).cloned(),
            id: d.id,
            title: d.title,
            text: d.text,
            source: "frozen",
            operation_id: None,
        }))
}

/// The served corpus: the frozen version and what the live segment adds, as `/info` and
/// `GET /admin/index` report it.
pub fn corpus_view(corpus: &Corpus, compacting: bool) -> Value {
    let (index, live) = (&corpus.index, &corpus.live);
    let m = index.manifest();
    let s = live.stats();
    json!({
        "version": corpus.version,
        "created_at": m.created_at,
        "covers_operation_id": live.covers(),
        "path": index.dir(),
        "frozen_documents": index.len(),
        "documents": s.documents,
        "delta_documents": s.delta_documents,
        "deleted": s.deleted,
        "hidden_frozen": s.hidden_frozen,
        "log_bytes": s.log_bytes,
        "last_operation_id": s.last_operation_id,
        "memory_bytes": s.memory_bytes,
        "max_live_documents": s.max_live_documents,
        "compacting": compacting,
    })
}
