//! What a search or an embedding request does, independent of the transport: validation,
//! encoder resolution, query repair and tokenization off the async runtime, batched inference,
//! HNSW search (with the raw and repaired texts fused), timings and metrics. HTTP and gRPC
//! handlers are thin wrappers around these two functions.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use http::StatusCode;
use serde::Serialize;

use super::error::ApiError;
use super::filter::{Filter, FilterError};
use super::state::{AppState, Corpus};
use crate::index::{Admitted, Index, IndexError, Strategy};
use crate::live::segment::StoredDocument;
use crate::live::LiveCorpus;
use crate::registry::batcher::{BatchError, EncodeTimings};
use crate::registry::{LoadedEncoder, QueryPipeline, ResolveError, DEFAULT_ALIAS};
use crate::repair::retrieved::RetrievedWords;
use crate::repair::{Outcome, RepairFusion, RepairMode, Repaired, Repairer};

/// Largest `ef` a request may ask for.
pub const MAX_EF: usize = 10_000;

/// One search request.
#[derive(Debug, Clone)]
pub struct SearchParams {
    pub texts: Vec<String>,
    /// Name of the request field holding the texts, for error messages.
    pub field: &'static str,
    pub k: usize,
    pub encoder: Option<String>,
    pub ef: Option<usize>,
    /// Query repair; `None`: the alias's pipeline, else the service's default.
    pub repair: Option<RepairMode>,
    /// What a repaired query searches with; `None`: the alias's pipeline, else the default.
    pub repair_fusion: Option<RepairFusion>,
    /// Only documents whose metadata this admits are returned.
    pub filter: Option<Filter>,
    /// Each hit carries its document's metadata.
    pub with_metadata: bool,
    /// Read-your-writes: served only by a node that holds the write with this `operation_id`
    /// (a PostgreSQL store's replicas), or once the embedded index has applied it.
    pub after: Option<u64>,
    /// When the whole request must be answered: set once when it is admitted and shared by
    /// every search of a routed or fused request, so groups spend from one budget. `None`: the
    /// service's request timeout from the moment the search starts.
    pub deadline: Option<Instant>,
}

impl SearchParams {
    /// A search with the service's defaults for everything but the texts.
    pub fn new(texts: Vec<String>, field: &'static str, k: usize) -> Self {
        SearchParams {
            texts,
            field,
            k,
            encoder: None,
            ef: None,
            repair: None,
            repair_fusion: None,
            filter: None,
            with_metadata: false,
            after: None,
            deadline: None,
        }
    }
}

/// One retrieved document.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Hit {
    pub id: String,
    pub score: f32,
    pub rank: usize,
    pub title: String,
    pub text: String,
    /// The document's metadata (`with_metadata`; absent when it has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
}

/// What a filter admitted and how the search was answered under it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, utoipa::ToSchema)]
pub struct FilterReport {
    /// Documents the filter admits (frozen and live), counted before the search; absent where
    /// the store does not count them (PostgreSQL), but 0 for a filter that admits nothing by
    /// itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admitted: Option<u64>,
    /// How the frozen index was searched (see docs/api.md "Filters").
    pub strategy: Strategy,
}

/// Where the time of a request went, in milliseconds.
#[derive(Debug, Clone, Copy, Serialize, Default, utoipa::ToSchema)]
pub struct TimingsMs {
    /// Evaluating the filter into the set of admitted documents (0 without a filter).
    pub filter: f64,
    pub repair: f64,
    /// The index's vote: searching the raw texts and reading their documents' words (0 when
    /// it did not run; `--repair-vote-documents`).
    pub vote: f64,
    pub tokenize: f64,
    pub queue: f64,
    pub encode: f64,
    pub search: f64,
    pub total: f64,
}

/// Result of [`search`]: one hit list per query text.
#[derive(Debug, Clone)]
pub struct SearchOutput {
    pub results: Vec<Vec<Hit>>,
    pub encoder_name: String,
    pub encoder_version: String,
    pub timings_ms: TimingsMs,
    /// Per query: what repair changed, `None` when it changed nothing or did not run.
    pub repairs: Vec<Option<Repaired>>,
    /// The repair mode and fusion in effect.
    pub pipeline: QueryPipeline,
    /// With a filter: what it admitted and how the index was searched.
    pub filter: Option<FilterReport>,
}

/// Result of [`embed`].
#[derive(Debug, Clone)]
pub struct EmbedOutput {
    pub vectors: Vec<Vec<f32>>,
    pub encoder_name: String,
    pub encoder_version: String,
    /// Real (non-padding) tokens encoded.
    pub tokens: usize,
}

/// 503 `store_unavailable` for a store that fails its health checks.
pub fn store_unhealthy() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "store_unavailable",
        "the document store does not answer its health checks; retry shortly",
    )
}

fn ready_or_503(state: &AppState) -> Result<(), ApiError> {
    if state.is_ready() {
        Ok(())
    } else if state.draining.load(Ordering::Acquire) {
        Err(ApiError::not_ready("shutting down"))
    } else if state.ready.load(Ordering::Acquire) {
        // Loaded, so the store is what does not answer.
        Err(store_unhealthy())
    } else {
        Err(ApiError::not_ready("the service is still loading"))
    }
}

/// Lets a request in: 503 unless ready, 429 at once when `max_in_flight` requests are being
/// served. The permit is held for the whole request.
fn admit(state: &AppState) -> Result<tokio::sync::SemaphorePermit<'_>, ApiError> {
    ready_or_503(state)?;
    state
        .admission
        .try_acquire()
        .map_err(|_| ApiError::overloaded("too many requests in flight"))
}

/// Resolves an encoder name or alias (`default` when none is given).
pub fn resolve(state: &AppState, name: Option<&str>) -> Result<Arc<LoadedEncoder>, ApiError> {
    resolve_with_pipeline(state, name).map(|(e, _)| e)
}

/// Resolves an encoder name or alias with the alias's query pipeline (empty for encoder names),
/// from one snapshot, so encoder and pipeline always belong together.
fn resolve_with_pipeline(
    state: &AppState,
    name: Option<&str>,
) -> Result<(Arc<LoadedEncoder>, QueryPipeline), ApiError> {
    let name = name.unwrap_or(DEFAULT_ALIAS);
    let snapshot = state.registry.snapshot();
    let encoder = snapshot.resolve(name).map_err(|e| match e {
        ResolveError::Unknown(_) => ApiError::not_found("unknown_encoder", e.to_string()),
        ResolveError::Dangling { .. } => ApiError::not_ready(e.to_string()),
    })?;
    Ok((encoder, snapshot.pipeline(name)))
}

/// The repairer a search uses under `mode`: `None` to search the text as it is. `on` without a
/// vocabulary is the client's error; `auto` without a vocabulary or a lexicon skips repair.
fn repairer_for(corpus: &Corpus, mode: RepairMode) -> Result<Option<Arc<Repairer>>, ApiError> {
    mode.repairer(corpus.repairer.as_ref())
        .map_err(|e| ApiError::invalid(format!("repair: {e}")).with_param("repair"))
}

/// What a search refuses before any work: 503 unless ready, then texts outside the limits (a
/// routed search checks this before the router chooses).
pub(crate) fn precheck(state: &AppState, texts: &[String], field: &str) -> Result<(), ApiError> {
    ready_or_503(state)?;
    validate_texts(state, texts, field)
}

/// Checks query texts against the limits.
fn validate_texts(state: &AppState, texts: &[String], field: &str) -> Result<(), ApiError> {
    if texts.is_empty() {
        return Err(ApiError::invalid(format!(
            "{field}: at least one text is required"
        )));
    }
    if texts.len() > state.limits.max_queries_per_request {
        return Err(ApiError::invalid(format!(
            "{field}: {} texts exceed the limit of {} per request",
            texts.len(),
            state.limits.max_queries_per_request
        )));
    }
    for (i, t) in texts.iter().enumerate() {
        // A single `query` is named as such; list items by position.
        let at = if field == "query" {
            field.to_string()
        } else {
            format!("{field}[{i}]")
        };
        if t.trim().is_empty() {
            return Err(ApiError::invalid(format!("{at}: text must not be empty")));
        }
        let chars = t.chars().count();
        if chars > state.limits.max_query_chars {
            return Err(ApiError::invalid(format!(
                "{at}: {chars} characters exceed the limit of {}",
                state.limits.max_query_chars
            )));
        }
    }
    Ok(())
}

fn timeout_error(state: &AppState) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "timeout",
        format!(
            "request took longer than {} ms",
            state.limits.request_timeout_ms
        ),
    )
}

/// Vectors for `texts` on `loaded`, with the tokenize time, the batch timings and the token count.
async fn encode_texts(
    loaded: &Arc<LoadedEncoder>,
    texts: Vec<String>,
) -> Result<(Vec<Vec<f32>>, f64, EncodeTimings, usize), ApiError> {
    let encoder = loaded.encoder().clone();
    let started = Instant::now();
    let tokens = tokio::task::spawn_blocking(move || encoder.tokenizer().encode_batch(&texts))
        .await
        .map_err(|e| ApiError::internal(format!("tokenizer task failed: {e}")))?
        .map_err(|e| ApiError::invalid(e.to_string()))?;
    let tokenize = started.elapsed().as_secs_f64();
    let (vectors, timings, real_tokens) = infer(loaded, tokens).await?;
    Ok((vectors, tokenize, timings, real_tokens))
}

/// Documents per inference request when writing: long passages padded together cost attention
/// over the longest, so a batch goes in length-sorted pieces, as `capot index build` does.
const DOCUMENTS_PER_PIECE: usize = 8;

/// Document vectors for the live corpus, through the same batching queue as queries: sorted by
/// length, tokenized and queued in small pieces all at once (the encoder's workers take them as
/// they come), and handed back in the order given.
pub async fn encode_documents(
    loaded: &Arc<LoadedEncoder>,
    texts: Vec<String>,
) -> Result<Vec<Vec<f32>>, ApiError> {
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| texts[i].len());
    let pieces: Vec<Vec<usize>> = order
        .chunks(DOCUMENTS_PER_PIECE)
        .map(<[usize]>::to_vec)
        .collect();
    let encoder = loaded.encoder().clone();
    let batches = {
        let pieces = pieces.clone();
        tokio::task::spawn_blocking(move || {
            pieces
                .iter()
                .map(|p| {
                    let piece: Vec<&str> = p.iter().map(|&i| texts[i].as_str()).collect();
                    encoder.tokenizer().encode_batch(&piece)
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .await
        .map_err(|e| ApiError::internal(format!("tokenizer task failed: {e}")))?
        .map_err(|e| ApiError::invalid(e.to_string()))?
    };
    let mut pending = Vec::with_capacity(batches.len());
    for tokens in batches {
        pending.push(loaded.batcher.submit(tokens).map_err(queue_error)?);
    }
    let mut vectors = vec![Vec::new(); order.len()];
    for (piece, rx) in pieces.iter().zip(pending) {
        let (piece_vectors, _) = rx
            .await
            .map_err(|_| ApiError::not_ready("the encoder stopped before answering"))?
            .map_err(|e| ApiError::internal(format!("inference failed: {e}")))?;
        for (&i, v) in piece.iter().zip(piece_vectors) {
            vectors[i] = v;
        }
    }
    Ok(vectors)
}

/// What a refused submission to an encoder's queue means to the client.
fn queue_error(e: BatchError) -> ApiError {
    match e {
        BatchError::Overloaded(_) => ApiError::overloaded(e.to_string()),
        BatchError::Closed => ApiError::not_ready(e.to_string()),
        BatchError::Encoder(e) => ApiError::internal(e.to_string()),
    }
}

/// Runs tokenized texts through the encoder's batching queue.
async fn infer(
    loaded: &Arc<LoadedEncoder>,
    tokens: crate::encoder::TokenBatch,
) -> Result<(Vec<Vec<f32>>, EncodeTimings, usize), ApiError> {
    let real_tokens = tokens.real_tokens();
    let rx = loaded.batcher.submit(tokens).map_err(queue_error)?;
    let (vectors, timings) = rx
        .await
        .map_err(|_| ApiError::not_ready("the encoder stopped before answering"))?
        .map_err(|e| ApiError::internal(format!("inference failed: {e}")))?;
    Ok((vectors, timings, real_tokens))
}

/// The texts a search encodes: each query's raw text, its repaired text, or both.
struct Prepared {
    /// Per query, what repair changed.
    repairs: Vec<Option<Repaired>>,
    /// Per query, the positions in the tokenized batch it searches with (one or two).
    slots: Vec<Vec<usize>>,
    tokens: crate::encoder::TokenBatch,
    repair_seconds: f64,
    tokenize_seconds: f64,
}

/// Repairs and tokenizes on a blocking thread (one hop for both stages).
/// Words of the live documents are left as typed (see [`Repairer::repair_knowing`]).
async fn prepare(
    loaded: &Arc<LoadedEncoder>,
    texts: Vec<String>,
    repairer: Option<Arc<Repairer>>,
    fusion: RepairFusion,
    live: Option<Arc<LiveCorpus>>,
) -> Result<Prepared, ApiError> {
    let encoder = loaded.encoder().clone();
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let repairs: Vec<Option<Repaired>> = match &repairer {
            Some(r) => {
                let segment = live.as_ref().map(|l| l.read());
                let known = |w: &str| segment.as_ref().is_some_and(|s| s.has_word(w));
                texts
                    .iter()
                    .map(|t| Some(r.repair_knowing(t, &known)).filter(Repaired::changed))
                    .collect()
            }
            None => vec![None; texts.len()],
        };
        let repair_seconds = started.elapsed().as_secs_f64();
        let mut batch: Vec<&str> = Vec::with_capacity(texts.len());
        let mut slots = Vec::with_capacity(texts.len());
        for (raw, repaired) in texts.iter().zip(&repairs) {
            let mut own = Vec::with_capacity(2);
            if repaired.is_none() || fusion == RepairFusion::Max {
                own.push(batch.len());
                batch.push(raw);
            }
            if let Some(r) = repaired {
                own.push(batch.len());
                batch.push(&r.text);
            }
            slots.push(own);
        }
        let tokenize_started = Instant::now();
        let tokens = encoder
            .tokenizer()
            .encode_batch(&batch)
            .map_err(|e| ApiError::invalid(e.to_string()))?;
        Ok(Prepared {
            repairs,
            slots,
            tokens,
            repair_seconds,
            tokenize_seconds: tokenize_started.elapsed().as_secs_f64(),
        })
    })
    .await
    .map_err(|e| ApiError::internal(format!("tokenizer task failed: {e}")))?
}

/// A request's texts encoded for search: per query its vectors' positions (`slots`, as
/// [`Prepared`]), and what each stage took.
struct Encoded {
    repairs: Vec<Option<Repaired>>,
    vectors: Vec<Vec<f32>>,
    slots: Vec<Vec<usize>>,
    repair_seconds: f64,
    tokenize_seconds: f64,
    /// Searching the raw texts and reading their documents' words, when the index voted.
    vote_seconds: Option<f64>,
    /// The vote's searches, per query, when they are the request's own search of the raw text
    /// ([`Voting::answers`]): a query the speller left unchanged is answered with them.
    raw_hits: Option<Vec<CorpusHits>>,
    timings: EncodeTimings,
}

/// Where the index's vote reads, how many documents vote, the walk's `ef`.
struct Voting {
    source: VoteSource,
    documents: usize,
    ef: usize,
    /// The request's `k` and whether its hits carry metadata, when it has no filter: the vote's
    /// search of the raw text then asks for what the request would (and at least `documents`
    /// hits), so that it also answers every query the speller leaves as typed, which is then not
    /// searched a second time. `None` under a filter: the vote reads the nearest documents
    /// whatever the filter admits.
    answers: Option<(usize, bool)>,
    /// A store's read-your-writes position and the request's deadline ([`StoreSearch`]).
    after: Option<u64>,
    deadline: Instant,
}

/// The documents that vote: the corpus served (its frozen index less what the live segment
/// replaced or deleted, and the live segment's own documents) or the store.
enum VoteSource {
    Corpus(Arc<Corpus>, Option<Arc<LiveCorpus>>),
    Store(Arc<dyn crate::store::DocumentStore>),
}

/// The documents nearest each of `vectors` (the raw texts'), unfiltered: the first
/// `voting.documents` of each list are the ones that vote ([`Voting::answers`] says how many
/// more).
async fn vote_documents(
    voting: &Voting,
    vectors: Arc<Vec<Vec<f32>>>,
) -> Result<Vec<CorpusHits>, ApiError> {
    let (k, with_metadata) = match voting.answers {
        Some((k, with_metadata)) => (k.max(voting.documents), with_metadata),
        None => (voting.documents, false),
    };
    let ef = voting.ef.max(k);
    match &voting.source {
        VoteSource::Corpus(corpus, live) => {
            let (corpus, live) = (corpus.clone(), live.clone());
            tokio::task::spawn_blocking(move || {
                let scope = Scope {
                    with_metadata,
                    frozen_metadata: Some(&corpus.frozen_metadata),
                    ..Scope::top(k, ef)
                };
                vectors
                    .iter()
                    .map(|v| corpus_search(&corpus.index, live.as_deref(), &[v.as_slice()], scope))
                    .collect::<Result<Vec<_>, IndexError>>()
            })
            .await
            .map_err(|e| ApiError::internal(format!("vote task failed: {e}")))?
            .map_err(|e| ApiError::internal(e.to_string()))
        }
        VoteSource::Store(store) => {
            let queries = vectors.iter().map(|v| vec![v.clone()]).collect();
            let scope = crate::store::StoreSearch {
                k,
                ef,
                filter: None,
                with_metadata,
                after: voting.after,
                deadline: Some(voting.deadline),
            };
            store.search(queries, scope).await.map_err(store_error)
        }
    }
}

/// The words of `hits`' titles and texts.
fn words_of(hits: &[Hit]) -> RetrievedWords {
    RetrievedWords::from_documents(hits.iter().map(|h| (h.title.as_str(), h.text.as_str())))
}

/// Repair with the index's vote ([`Repairer::repair_with`]): the raw texts are encoded and
/// searched first, the words of their nearest documents go to the speller, and only the texts
/// it changed are encoded again (a second trip to the encoder, for those requests alone). The
/// raw vectors are the ones fusion `max` searches with anyway.
async fn encode_voted(
    loaded: &Arc<LoadedEncoder>,
    texts: Vec<String>,
    repairer: Arc<Repairer>,
    fusion: RepairFusion,
    live: Option<Arc<LiveCorpus>>,
    voting: Voting,
) -> Result<Encoded, ApiError> {
    let raw = prepare(loaded, texts.clone(), None, fusion, None).await?;
    let (raw_vectors, mut timings, _) = infer(loaded, raw.tokens).await?;
    let raw_vectors = Arc::new(raw_vectors);
    let started = Instant::now();
    let found = vote_documents(&voting, raw_vectors.clone()).await?;
    let retrieved: Vec<RetrievedWords> = found
        .iter()
        .map(|f| words_of(&f.hits[..f.hits.len().min(voting.documents)]))
        .collect();
    let vote_seconds = started.elapsed().as_secs_f64();
    let (repairs, repair_seconds) = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let segment = live.as_ref().map(|l| l.read());
        let known = |w: &str| segment.as_ref().is_some_and(|s| s.has_word(w));
        let repairs: Vec<Option<Repaired>> = texts
            .iter()
            .zip(&retrieved)
            .map(|(t, d)| Some(repairer.repair_with(t, &known, Some(d))).filter(Repaired::changed))
            .collect();
        (repairs, started.elapsed().as_secs_f64())
    })
    .await
    .map_err(|e| ApiError::internal(format!("repair task failed: {e}")))?;
    let changed: Vec<String> = repairs.iter().flatten().map(|r| r.text.clone()).collect();
    let mut tokenize_seconds = raw.tokenize_seconds;
    let mut changed_vectors = Vec::new();
    if !changed.is_empty() {
        let again = prepare(loaded, changed, None, fusion, None).await?;
        tokenize_seconds += again.tokenize_seconds;
        let (vectors, more, _) = infer(loaded, again.tokens).await?;
        timings.queue += more.queue;
        timings.encode += more.encode;
        changed_vectors = vectors;
    }
    let raw_vectors = Arc::try_unwrap(raw_vectors).unwrap_or_else(|shared| (*shared).clone());
    let mut vectors = Vec::with_capacity(raw_vectors.len() + changed_vectors.len());
    let mut slots = Vec::with_capacity(raw_vectors.len());
    let mut changed_vectors = changed_vectors.into_iter();
    for (raw, repaired) in raw_vectors.into_iter().zip(&repairs) {
        let mut own = Vec::with_capacity(2);
        if repaired.is_none() || fusion == RepairFusion::Max {
            own.push(vectors.len());
            vectors.push(raw);
        }
        if repaired.is_some() {
            let v = changed_vectors
                .next()
                .ok_or_else(|| ApiError::internal("a repaired text was not encoded"))?;
            own.push(vectors.len());
            vectors.push(v);
        }
        slots.push(own);
    }
    Ok(Encoded {
        repairs,
        vectors,
        slots,
        repair_seconds,
        tokenize_seconds,
        vote_seconds: Some(vote_seconds),
        raw_hits: voting.answers.map(|_| found),
        timings,
    })
}

/// Seconds per stage of one request.
struct Stages {
    filter: f64,
    repair: f64,
    vote: Option<f64>,
    tokenize: f64,
    encode: EncodeTimings,
    search: Option<f64>,
}

fn record(state: &AppState, encoder: &str, s: &Stages, total: f64) {
    let m = &state.metrics;
    if s.search.is_some() {
        m.observe_stage("repair", encoder, s.repair);
    }
    if let Some(vote) = s.vote {
        m.observe_stage("vote", encoder, vote);
    }
    m.observe_stage("tokenize", encoder, s.tokenize);
    m.observe_stage("queue", encoder, s.encode.queue);
    m.observe_stage("encode", encoder, s.encode.encode);
    if let Some(x) = s.search {
        m.observe_stage("search", encoder, x);
    }
    if s.filter > 0.0 {
        m.observe_stage("filter", encoder, s.filter);
    }
    m.observe_stage("total", encoder, total);
    m.encoder_requests.with_label_values(&[encoder]).inc();
}

fn ms(seconds: f64) -> f64 {
    (seconds * 1e6).round() / 1e3
}

/// Searches the index for each text, top to bottom: admission, validation, encoder and query
/// pipeline, repair and tokenization, batched inference, HNSW search of the raw and repaired
/// vectors, fusion, timings and metrics. Admission control refuses at once (429) when too many
/// requests are in flight or the encoder's queue is full.
pub async fn search(state: &AppState, p: SearchParams) -> Result<SearchOutput, ApiError> {
    let started = Instant::now();
    let _permit = admit(state)?;
    validate_texts(state, &p.texts, p.field)?;
    if p.k == 0 || p.k > state.limits.max_k {
        return Err(ApiError::invalid(format!(
            "k must be in 1..={}, got {}",
            state.limits.max_k, p.k
        )));
    }
    if let Some(ef) = p.ef {
        if ef == 0 || ef > MAX_EF {
            return Err(ApiError::invalid(format!(
                "ef must be in 1..={MAX_EF}, got {ef}"
            )));
        }
    }
    let (loaded, alias_pipeline) = resolve_with_pipeline(state, p.encoder.as_deref())?;
    let pipeline = QueryPipeline {
        repair: p
            .repair
            .or(alias_pipeline.repair)
            .or(Some(state.repair_defaults.mode)),
        fusion: p
            .repair_fusion
            .or(alias_pipeline.fusion)
            .or(Some(state.repair_defaults.fusion)),
    };
    let mode = pipeline.repair.unwrap_or_default();
    let fusion = pipeline.fusion.unwrap_or_default();
    // One corpus (or store) for the whole request, though a compaction may swap it meanwhile.
    let target = Target::of(state)?;
    let repairer = match &target {
        Target::Corpus(corpus) => repairer_for(corpus, mode)?,
        Target::Store(_) => {
            let vocabulary = state.store_speller.get().and_then(|s| s.repairer());
            mode.repairer(vocabulary.as_ref())
                .map_err(|e| ApiError::invalid(format!("repair: {e}")).with_param("repair"))?
        }
    };
    let k = p.k;
    let default_ef = match &target {
        Target::Corpus(c) => c.index.default_ef(),
        Target::Store(s) => s.default_ef(),
    };
    let ef =
        p.ef.or(state.limits.default_ef)
            .unwrap_or(default_ef)
            .max(k);
    let repair_ran = repairer.is_some();
    let vote_documents = state.repair_defaults.vote_documents;
    let filter = match p.filter {
        Some(mut f) => {
            // A database reads any key of the metadata column: no field is refused there.
            let (fields, allow_unindexed) = match &target {
                Target::Corpus(c) => (
                    c.index.payload_fields(),
                    state.limits.allow_unindexed_filters,
                ),
                Target::Store(s) => (s.payload_fields(), true),
            };
            f.bind(&fields, allow_unindexed, "filter")
                .map_err(filter_error)?;
            Some(Arc::new(f))
        }
        None => None,
    };
    let with_metadata = p.with_metadata;
    let after = p.after;
    let live = match &target {
        Target::Corpus(c) => Some(c.live.clone()),
        Target::Store(_) => None,
    };
    let deadline = p
        .deadline
        .unwrap_or_else(|| started + state.request_timeout());
    let work = async {
        // Read-your-writes on the embedded index: a write acknowledged before it was applied
        // (`wait=false`) is waited for, within the request's time.
        if let (Some(after), Some(live)) = (after, &live) {
            live.applied(after).await;
        }
        let encoded = match (&target, repairer) {
            // The index's vote: the raw texts are encoded and searched before repair.
            (target, Some(r)) if vote_documents > 0 => {
                let voting = Voting {
                    source: match target {
                        Target::Corpus(corpus) => VoteSource::Corpus(corpus.clone(), live.clone()),
                        Target::Store(store) => VoteSource::Store(store.clone()),
                    },
                    documents: vote_documents,
                    ef,
                    answers: filter.is_none().then_some((k, with_metadata)),
                    after,
                    deadline,
                };
                encode_voted(&loaded, p.texts, r, fusion, live.clone(), voting).await?
            }
            (_, repairer) => {
                let prepared = prepare(&loaded, p.texts, repairer, fusion, live.clone()).await?;
                let (vectors, timings, _) = infer(&loaded, prepared.tokens).await?;
                Encoded {
                    repairs: prepared.repairs,
                    vectors,
                    slots: prepared.slots,
                    repair_seconds: prepared.repair_seconds,
                    tokenize_seconds: prepared.tokenize_seconds,
                    vote_seconds: None,
                    raw_hits: None,
                    timings,
                }
            }
        };
        let (vectors, slots, timings) = (encoded.vectors, encoded.slots, encoded.timings);
        // Queries the vote's search already answered (left as typed, no filter) are not
        // searched again.
        let mut answered: Vec<Option<CorpusHits>> = match encoded.raw_hits {
            Some(found) => found
                .into_iter()
                .zip(&encoded.repairs)
                .map(|(mut f, r)| {
                    r.is_none().then(|| {
                        f.hits.truncate(k);
                        f
                    })
                })
                .collect(),
            None => Vec::new(),
        };
        answered.resize_with(slots.len(), || None);
        let slots: Vec<Vec<usize>> = slots
            .into_iter()
            .zip(&answered)
            .filter(|(_, done)| done.is_none())
            .map(|(own, _)| own)
            .collect();
        let (searched, filter_seconds, search_seconds) = match target {
            _ if slots.is_empty() => (Vec::new(), 0.0, 0.0),
            Target::Corpus(corpus) => {
                let scan_factor = state.limits.filter_scan_factor;
                search_corpus(
                    corpus,
                    live,
                    vectors,
                    slots,
                    filter,
                    k,
                    ef,
                    scan_factor,
                    with_metadata,
                )
                .await?
            }
            Target::Store(store) => {
                let started = Instant::now();
                let queries: Vec<Vec<Vec<f32>>> = slots
                    .iter()
                    .map(|own| own.iter().map(|&i| vectors[i].clone()).collect())
                    .collect();
                let scope = crate::store::StoreSearch {
                    k,
                    ef,
                    filter,
                    with_metadata,
                    after,
                    deadline: Some(deadline),
                };
                let results = store.search(queries, scope).await.map_err(store_error)?;
                (results, 0.0, started.elapsed().as_secs_f64())
            }
        };
        let results = merge_answered(answered, searched)?;
        let stages = Stages {
            filter: filter_seconds,
            repair: encoded.repair_seconds,
            vote: encoded.vote_seconds,
            tokenize: encoded.tokenize_seconds,
            encode: timings,
            search: Some(search_seconds),
        };
        Ok::<_, ApiError>((results, encoded.repairs, stages))
    };
    let (results, repairs, stages) = tokio::time::timeout_at(deadline.into(), work)
        .await
        .map_err(|_| timeout_error(state))??;
    let filter_report = results.first().and_then(|r| r.filter);
    for r in results.iter().filter_map(|r| r.filter) {
        state
            .metrics
            .filtered_searches
            .with_label_values(&[r.strategy.as_str()])
            .inc();
    }
    let results: Vec<Vec<Hit>> = results.into_iter().map(|r| r.hits).collect();
    let total = started.elapsed().as_secs_f64();
    let manifest = loaded.encoder().manifest();
    record(state, loaded.name(), &stages, total);
    let outcome = |r: &Option<Repaired>| match (repair_ran, r) {
        (true, Some(_)) => Some(Outcome::Changed),
        (true, None) => Some(Outcome::Unchanged),
        (false, _) if mode == RepairMode::Auto => Some(Outcome::Skipped),
        (false, _) => None,
    };
    if stages.vote.is_some() {
        state
            .metrics
            .repair_votes
            .with_label_values(&[loaded.name()])
            .inc_by(repairs.len() as u64);
    }
    for o in repairs.iter().filter_map(outcome) {
        state
            .metrics
            .repairs
            .with_label_values(&[o.as_str(), loaded.name()])
            .inc();
    }
    Ok(SearchOutput {
        results,
        encoder_name: loaded.name().to_string(),
        encoder_version: manifest.version.clone(),
        timings_ms: TimingsMs {
            filter: ms(stages.filter),
            repair: ms(stages.repair),
            vote: ms(stages.vote.unwrap_or_default()),
            tokenize: ms(stages.tokenize),
            queue: ms(stages.encode.queue),
            encode: ms(stages.encode.encode),
            search: ms(stages.search.unwrap_or_default()),
            total: ms(total),
        },
        repairs,
        pipeline: QueryPipeline {
            repair: Some(mode),
            fusion: Some(fusion),
        },
        filter: filter_report,
    })
}

/// Each query's hits: those `answered` already, the others taken from `searched` in order (it
/// holds one list per query not answered).
fn merge_answered(
    answered: Vec<Option<CorpusHits>>,
    searched: Vec<CorpusHits>,
) -> Result<Vec<CorpusHits>, ApiError> {
    let mut searched = searched.into_iter();
    answered
        .into_iter()
        .map(|a| {
            a.or_else(|| searched.next())
                .ok_or_else(|| ApiError::internal("a query was neither answered nor searched"))
        })
        .collect()
}

/// Where a search finds its documents: the embedded corpus (frozen index and live segment), or
/// a document store.
enum Target {
    Corpus(Arc<Corpus>),
    Store(Arc<dyn crate::store::DocumentStore>),
}

impl Target {
    /// The store when the service serves one, else the corpus served now; 503 while loading.
    fn of(state: &AppState) -> Result<Target, ApiError> {
        if let Some(store) = state.store.get() {
            return Ok(Target::Store(store.clone()));
        }
        state
            .corpus()
            .map(Target::Corpus)
            .ok_or_else(|| ApiError::not_ready("the index is not loaded"))
    }
}

/// A store's failure as the client sees it: 503 `store_unavailable` (with `Retry-After`) while
/// the database cannot be reached, else a 500 that says what the database reported.
pub fn store_error(e: crate::store::StoreError) -> ApiError {
    use crate::store::StoreError;
    match e {
        StoreError::Unavailable(_) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            e.to_string(),
        ),
        StoreError::Invalid(m) => ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", m),
        StoreError::ReadOnly(m) => ApiError::new(StatusCode::CONFLICT, "store_read_only", m),
        StoreError::Mismatch(_) | StoreError::Database(_) | StoreError::Local(_) => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "store_failed",
            e.to_string(),
        ),
    }
}

/// Searches the embedded corpus for each query's vectors, off the runtime (the hits'
/// documents are positioned reads of `docs.bin`): the hits, and the seconds spent evaluating
/// the filter and searching.
#[allow(clippy::too_many_arguments)]
async fn search_corpus(
    corpus: Arc<Corpus>,
    live: Option<Arc<LiveCorpus>>,
    vectors: Vec<Vec<f32>>,
    slots: Vec<Vec<usize>>,
    filter: Option<Arc<Filter>>,
    k: usize,
    ef: usize,
    scan_factor: f64,
    with_metadata: bool,
) -> Result<(Vec<CorpusHits>, f64, f64), ApiError> {
    tokio::task::spawn_blocking(move || {
        let idx = &corpus.index;
        let filter_started = Instant::now();
        let admitted = filter
            .as_ref()
            .map(|f| f.admitted_cached(idx))
            .transpose()?;
        let filter_seconds = filter_started.elapsed().as_secs_f64();
        let search_started = Instant::now();
        let scope = Scope {
            k,
            ef,
            filter: filter.as_deref().zip(admitted.as_deref()),
            scan_factor,
            with_metadata,
            frozen_metadata: Some(&corpus.frozen_metadata),
        };
        let results = slots
            .iter()
            .map(|own| {
                let own: Vec<&[f32]> = own.iter().map(|&i| vectors[i].as_slice()).collect();
                corpus_search(idx, live.as_deref(), &own, scope)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok::<_, IndexError>((
            results,
            filter_seconds,
            search_started.elapsed().as_secs_f64(),
        ))
    })
    .await
    .map_err(|e| ApiError::internal(format!("search task failed: {e}")))?
    .map_err(|e| ApiError::internal(e.to_string()))
}

/// A refused filter as the client sees it: 400 `invalid_filter`, or `unindexed_field` for a
/// field without a payload index; `param` is the JSON path.
pub fn filter_error(e: FilterError) -> ApiError {
    let code = if e.unindexed.is_some() {
        "unindexed_field"
    } else {
        "invalid_filter"
    };
    ApiError::new(StatusCode::BAD_REQUEST, code, e.to_string()).with_param(e.path)
}

/// What one query's search covers beyond its vectors: how many hits, the walk's `ef`, a filter
/// with the frozen documents it admits, and whether hits carry metadata.
#[derive(Clone, Copy)]
pub struct Scope<'a> {
    pub k: usize,
    pub ef: usize,
    /// A bound filter and the frozen documents it admits ([`Filter::admitted_in`]).
    pub filter: Option<(&'a Filter, &'a Admitted)>,
    /// The planner's scan/walk crossover under a filter ([`Index::search_admitted`]).
    pub scan_factor: f64,
    pub with_metadata: bool,
    /// Metadata of frozen documents of a version compacted before the index kept it.
    pub frozen_metadata: Option<&'a std::collections::HashMap<String, serde_json::Value>>,
}

impl Scope<'_> {
    /// `k` hits with the walk's `ef`, no filter, no metadata.
    pub fn top(k: usize, ef: usize) -> Scope<'static> {
        Scope {
            k,
            ef,
            filter: None,
            scan_factor: crate::index::DEFAULT_SCAN_FACTOR,
            with_metadata: false,
            frozen_metadata: None,
        }
    }
}

/// Hits of one query and, under a filter, what it admitted and how the index was searched.
pub struct CorpusHits {
    pub hits: Vec<Hit>,
    pub filter: Option<FilterReport>,
}

/// The `k` best documents for one query's vectors (the raw text's, and the repaired text's when
/// fused): the frozen index's hits less the documents the live corpus replaced or deleted, merged
/// with the live documents' own, each document once with its best score. Under a filter only
/// admitted documents count, and there are exactly `min(k, admitted)` hits.
pub fn corpus_search(
    index: &Index,
    live: Option<&LiveCorpus>,
    vectors: &[&[f32]],
    scope: Scope<'_>,
) -> Result<CorpusHits, IndexError> {
    let Scope {
        k, ef, scan_factor, ..
    } = scope;
    let (frozen, segment, report) = match scope.filter {
        None => {
            let (frozen, segment) = unfiltered_frozen(index, live, vectors, k, ef)?;
            (frozen, segment, None)
        }
        Some((_, admitted)) => {
            // Hidden documents leave the admitted set, so the index is asked for exactly k (a
            // copy only when there are any).
            let segment = live.map(|l| l.read());
            let admitted: std::borrow::Cow<'_, Admitted> = match &segment {
                Some(s) if s.hidden() > 0 => {
                    std::borrow::Cow::Owned(admitted.without(s.hidden_frozen().map(|i| i as u32)))
                }
                _ => std::borrow::Cow::Borrowed(admitted),
            };
            let mut strategy = Strategy::Empty;
            let mut lists = Vec::with_capacity(vectors.len());
            for v in vectors {
                let found = index.search_admitted(v, k, ef, &admitted, scan_factor)?;
                strategy = found.strategy;
                lists.push(found.hits);
            }
            let report = FilterReport {
                admitted: Some(admitted.len()),
                strategy,
            };
            (crate::index::merge_best(lists, k), segment, Some(report))
        }
    };
    enum From {
        Frozen(usize),
        Live(StoredDocument),
    }
    let mut merged: Vec<(f32, From)> = frozen
        .into_iter()
        .map(|h| (h.score, From::Frozen(h.index)))
        .collect();
    let mut live_admitted = 0u64;
    if let Some(segment) = &segment {
        let admit = scope
            .filter
            .map(|(f, _)| move |d: &StoredDocument| f.admits(&d.id, d.metadata.as_ref()));
        let admit = admit
            .as_ref()
            .map(|a| a as &dyn Fn(&StoredDocument) -> bool);
        let mut best: std::collections::HashMap<String, (f32, StoredDocument)> =
            std::collections::HashMap::new();
        for v in vectors {
            let (hits, admitted) = segment.search_counting(v, k, admit);
            live_admitted = admitted as u64;
            for h in hits {
                match best.get_mut(&h.document.id) {
                    Some(b) if b.0 >= h.score => {}
                    _ => {
                        best.insert(h.document.id.clone(), (h.score, h.document));
                    }
                }
            }
        }
        merged.extend(best.into_values().map(|(s, d)| (s, From::Live(d))));
    }
    drop(segment);
    merged.sort_by(|a, b| b.0.total_cmp(&a.0));
    merged.truncate(k);
    let hits = merged
        .into_iter()
        .enumerate()
        .filter_map(|(rank, (score, from))| match from {
            From::Frozen(i) => index.document(i).transpose().map(|d| {
                d.map(|d| {
                    let metadata = scope.with_metadata.then(|| {
                        index
                            .metadata(i)
                            .or_else(|| scope.frozen_metadata.and_then(|m| m.get(&d.id).cloned()))
                    });
                    Hit {
                        id: d.id,
                        score,
                        rank: rank + 1,
                        title: d.title,
                        text: d.text,
                        metadata: metadata.flatten(),
                    }
                })
            }),
            From::Live(d) => Some(Ok(Hit {
                id: d.id,
                score,
                rank: rank + 1,
                title: d.title,
                text: d.text,
                metadata: if scope.with_metadata {
                    d.metadata
                } else {
                    None
                },
            })),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(CorpusHits {
        hits,
        filter: report.map(|r| FilterReport {
            admitted: r.admitted.map(|a| a + live_admitted),
            // The live segment scores each document it admits: a filter only live documents
            // pass was answered by an exact scan, not at once.
            strategy: match r.strategy {
                Strategy::Empty if live_admitted > 0 => Strategy::Exact,
                s => s,
            },
        }),
    })
}

/// The frozen index's best hits for `vectors` with no filter, less the hidden documents: asks
/// for a few more than `k` first, all the hidden ones at worst. Returns the segment read.
fn unfiltered_frozen<'a>(
    index: &Index,
    live: Option<&'a LiveCorpus>,
    vectors: &[&[f32]],
    k: usize,
    ef: usize,
) -> Result<
    (
        Vec<crate::index::Hit>,
        Option<std::sync::RwLockReadGuard<'a, crate::live::segment::Segment>>,
    ),
    IndexError,
> {
    let hidden = live.map_or(0, |l| l.read().hidden());
    let mut want = k + hidden.min(4 * k);
    loop {
        let lists = vectors
            .iter()
            .map(|v| index.search(v, want, ef.max(want)))
            .collect::<Result<Vec<_>, _>>()?;
        let exhausted = lists.iter().all(|l| l.len() < want);
        let hits = crate::index::merge_best(lists, want);
        let segment = live.map(|l| l.read());
        let kept: Vec<crate::index::Hit> = hits
            .into_iter()
            .filter(|h| !segment.as_ref().is_some_and(|s| s.hides(h.index)))
            .collect();
        if kept.len() >= k || exhausted || want >= k + hidden {
            return Ok((kept, segment));
        }
        want = (2 * want).min(k + hidden);
    }
}

/// Encodes texts with an encoder (OpenAI's `model`), optionally checking the dimension asked for.
pub async fn embed(
    state: &AppState,
    texts: Vec<String>,
    field: &'static str,
    encoder: Option<String>,
    dimensions: Option<usize>,
) -> Result<EmbedOutput, ApiError> {
    let started = Instant::now();
    let _permit = admit(state)?;
    validate_texts(state, &texts, field)?;
    let loaded = resolve(state, encoder.as_deref())?;
    if let Some(d) = dimensions {
        if d != loaded.encoder().dimension() {
            return Err(ApiError::invalid(format!(
                "dimensions: encoder {} produces {}-dimensional vectors and cannot shorten them",
                loaded.name(),
                loaded.encoder().dimension()
            )));
        }
    }
    let (vectors, tokenize, timings, tokens) =
        tokio::time::timeout(state.request_timeout(), encode_texts(&loaded, texts))
            .await
            .map_err(|_| timeout_error(state))??;
    let manifest = loaded.encoder().manifest();
    let stages = Stages {
        filter: 0.0,
        repair: 0.0,
        vote: None,
        tokenize,
        encode: timings,
        search: None,
    };
    record(
        state,
        loaded.name(),
        &stages,
        started.elapsed().as_secs_f64(),
    );
    Ok(EmbedOutput {
        vectors,
        encoder_name: loaded.name().to_string(),
        encoder_version: manifest.version.clone(),
        tokens,
    })
}
