//! What a search or an embedding request does, independent of the transport: validation,
//! encoder resolution, tokenization off the async runtime, batched inference, HNSW search,
//! timings and metrics. HTTP and gRPC handlers are thin wrappers around these two functions.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use axum::http::StatusCode;
use serde::Serialize;

use super::batcher::{BatchError, EncodeTimings};
use super::error::ApiError;
use super::state::AppState;
use crate::registry::{LoadedEncoder, ResolveError, DEFAULT_ALIAS};

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
}

/// One retrieved document.
#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    pub id: String,
    pub score: f32,
    pub rank: usize,
    pub title: String,
    pub text: String,
}

/// Where the time of a request went, in milliseconds.
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct TimingsMs {
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

fn ready_or_503(state: &AppState) -> Result<(), ApiError> {
    if state.is_ready() {
        Ok(())
    } else if state.draining.load(Ordering::Acquire) {
        Err(ApiError::not_ready("shutting down"))
    } else {
        Err(ApiError::not_ready("the service is still loading"))
    }
}

/// Resolves an encoder name or alias (`default` when none is given).
pub fn resolve(state: &AppState, name: Option<&str>) -> Result<Arc<LoadedEncoder>, ApiError> {
    let name = name.unwrap_or(DEFAULT_ALIAS);
    state
        .registry
        .snapshot()
        .resolve(name)
        .map_err(|e| match e {
            ResolveError::Unknown(_) => ApiError::not_found("unknown_encoder", e.to_string()),
            ResolveError::Dangling { .. } => ApiError::not_ready(e.to_string()),
        })
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
    let real_tokens = tokens.real_tokens();
    let rx = loaded.batcher.submit(tokens).map_err(|e| match e {
        BatchError::Overloaded(_) => ApiError::overloaded(e.to_string()),
        BatchError::Closed => ApiError::not_ready(e.to_string()),
        BatchError::Encoder(e) => ApiError::internal(e.to_string()),
    })?;
    let (vectors, timings) = rx
        .await
        .map_err(|_| ApiError::not_ready("the encoder stopped before answering"))?
        .map_err(|e| ApiError::internal(format!("inference failed: {e}")))?;
    Ok((vectors, tokenize, timings, real_tokens))
}

fn record(
    state: &AppState,
    encoder: &str,
    tokenize: f64,
    t: &EncodeTimings,
    search: Option<f64>,
    total: f64,
) {
    let m = &state.metrics;
    m.observe_stage("tokenize", encoder, tokenize);
    m.observe_stage("queue", encoder, t.queue);
    m.observe_stage("encode", encoder, t.encode);
    if let Some(s) = search {
        m.observe_stage("search", encoder, s);
    }
    m.observe_stage("total", encoder, total);
    m.encoder_requests.with_label_values(&[encoder]).inc();
}

fn ms(seconds: f64) -> f64 {
    (seconds * 1e6).round() / 1e3
}

/// Searches the index for each text. Admission control refuses at once (429) when too many
/// requests are in flight or the encoder's queue is full.
pub async fn search(state: &AppState, p: SearchParams) -> Result<SearchOutput, ApiError> {
    let started = Instant::now();
    ready_or_503(state)?;
    let _permit = state
        .admission
        .try_acquire()
        .map_err(|_| ApiError::overloaded("too many requests in flight"))?;
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
    let loaded = resolve(state, p.encoder.as_deref())?;
    let index = state
        .index
        .get()
        .cloned()
        .ok_or_else(|| ApiError::not_ready("the index is not loaded"))?;
    let k = p.k;
    let ef =
        p.ef.or(state.limits.default_ef)
            .unwrap_or_else(|| index.default_ef())
            .max(k);
    let work = async {
        let (vectors, tokenize, timings, _) = encode_texts(&loaded, p.texts).await?;
        let search_started = Instant::now();
        let idx = index.clone();
        let lists = tokio::task::spawn_blocking(move || {
            vectors
                .iter()
                .map(|v| idx.search(v, k, ef))
                .collect::<Result<Vec<_>, _>>()
        })
        .await
        .map_err(|e| ApiError::internal(format!("search task failed: {e}")))?
        .map_err(|e| ApiError::internal(e.to_string()))?;
        Ok::<_, ApiError>((
            lists,
            tokenize,
            timings,
            search_started.elapsed().as_secs_f64(),
        ))
    };
    let (lists, tokenize, timings, search_s) = tokio::time::timeout(state.request_timeout(), work)
        .await
        .map_err(|_| timeout_error(state))??;
    let results = lists
        .into_iter()
        .map(|hits| {
            hits.into_iter()
                .enumerate()
                .filter_map(|(rank, h)| {
                    index.document(h.index).map(|d| Hit {
                        id: d.id.to_string(),
                        score: h.score,
                        rank: rank + 1,
                        title: d.title.to_string(),
                        text: d.text.to_string(),
                    })
                })
                .collect()
        })
        .collect();
    let total = started.elapsed().as_secs_f64();
    let manifest = loaded.encoder().manifest();
    record(
        state,
        &manifest.name,
        tokenize,
        &timings,
        Some(search_s),
        total,
    );
    Ok(SearchOutput {
        results,
        encoder_name: manifest.name.clone(),
        encoder_version: manifest.version.clone(),
        timings_ms: TimingsMs {
            tokenize: ms(tokenize),
            queue: ms(timings.queue),
            encode: ms(timings.encode),
            search: ms(search_s),
            total: ms(total),
        },
    })
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
    ready_or_503(state)?;
    let _permit = state
        .admission
        .try_acquire()
        .map_err(|_| ApiError::overloaded("too many requests in flight"))?;
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
    record(
        state,
        &manifest.name,
        tokenize,
        &timings,
        None,
        started.elapsed().as_secs_f64(),
    );
    Ok(EmbedOutput {
        vectors,
        encoder_name: manifest.name.clone(),
        encoder_version: manifest.version.clone(),
        tokens,
    })
}
