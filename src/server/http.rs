//! The public HTTP API: `/search`, `/v1/embeddings`, `/health`, `/ready`, `/info`, `/metrics`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::error::{FailureReason, JsonBody};
use crate::query::stages::{self, SearchParams};
use crate::query::ApiError;
use crate::query::AppState;
use crate::query::{self, SearchOutcome, Served};
use crate::registry::LoadedEncoder;
use crate::repair::{RepairFusion, RepairMode, Repaired};

/// Builds the public router (without the transport layers added in [`super::serve`]).
pub fn router(state: Arc<AppState>) -> Router {
    let guarded = Router::new()
        .route("/search", post(search))
        .route("/v1/embeddings", post(embeddings))
        .route("/info", get(info))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            require_api_key,
        ));
    Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi_json))
        .merge(guarded)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            record_metrics,
        ))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::not_found("not_found", "no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "method not allowed on this route",
    )
}

/// Counts every response by route and status, and failures by reason.
async fn record_metrics(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    state.metrics.in_flight.inc();
    let resp = next.run(req).await;
    state.metrics.in_flight.dec();
    let status = resp.status();
    state
        .metrics
        .requests
        .with_label_values(&[route.as_str(), status.as_str()])
        .inc();
    if status.is_client_error() || status.is_server_error() {
        let reason = resp
            .extensions()
            .get::<FailureReason>()
            .map(|r| r.0)
            .unwrap_or("http_error");
        state
            .metrics
            .failures
            .with_label_values(&[route.as_str(), reason])
            .inc();
    }
    resp
}

/// `Authorization: Bearer <key>` when the service has an API key.
async fn require_api_key(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    if let Some(key) = &state.api_key {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_token);
        if !given.is_some_and(|g| constant_time_eq(g.as_bytes(), key.as_bytes())) {
            let mut resp = ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "missing or wrong API key (Authorization: Bearer <key>)",
            )
            .into_response();
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return resp;
        }
    }
    next.run(req).await
}

/// The credentials of `Authorization: Bearer <token>`; the scheme is case-insensitive
/// (RFC 9110 §11.1), so `bearer` and `BEARER` are accepted too.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Compares secrets (API key, admin token) in time independent of where they differ, with the
/// `subtle` crate's maintained constant-time comparison. Only the length may show.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.ct_eq(b).into()
}

/// `GET /openapi.json`: this listener's OpenAPI 3.1 document.
async fn openapi_json() -> Json<serde_json::Value> {
    static DOC: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    Json(DOC.get_or_init(super::openapi::public_document).clone())
}

async fn health() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

async fn ready(State(state): State<Arc<AppState>>) -> Response {
    if state.is_ready() {
        Json(json!({ "status": "ready" })).into_response()
    } else if state.draining.load(Ordering::Acquire) {
        ApiError::not_ready("shutting down").into_response()
    } else {
        ApiError::not_ready("loading the index and encoders").into_response()
    }
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    state.metrics.admitted.set(
        state
            .limits
            .max_in_flight
            .saturating_sub(state.admission.available_permits()) as i64,
    );
    if let Some(corpus) = state.corpus() {
        state.metrics.index_documents.set(corpus.index.len() as i64);
        state.metrics.set_sign_codes(&corpus.index.sign_codes());
    }
    if let Some(store) = state.store.get() {
        let m = &state.metrics;
        let replicas = store.replicas();
        m.store_up
            .with_label_values(&["primary", &store.info().location])
            .set(i64::from(store.primary_healthy()));
        for r in replicas {
            m.store_up
                .with_label_values(&["replica", &r.location])
                .set(i64::from(r.healthy));
            m.store_replica_lag_bytes
                .with_label_values(&[r.location.as_str()])
                .set(r.lag_bytes.map_or(-1, |l| l as i64));
        }
        let activity = store.activity();
        for node in &activity.served {
            // The store counts; the counter catches up with it at each scrape.
            let counter = m
                .store_searches
                .with_label_values(&[node.role, node.location.as_str()]);
            counter.inc_by(node.searches.saturating_sub(counter.get()));
        }
        m.store_waiting_searches.set(activity.waiting as i64);
    }
    let snapshot = state.registry.snapshot();
    for (name, e) in &snapshot.encoders {
        state
            .metrics
            .queue_depth
            .with_label_values(&[name.as_str()])
            .set(e.batcher.queue_depth() as i64);
    }
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        state.metrics.render(),
    )
        .into_response()
}

#[derive(Serialize)]
struct EncoderView {
    name: String,
    version: String,
    role: crate::encoder::Role,
    dimension: usize,
    fingerprint: String,
    aligned_to: String,
    execution_provider: String,
    loaded_at: String,
    load_seconds: f64,
    /// Inference sessions (batch workers) serving this encoder's queue.
    workers: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    compatibility_override: Option<String>,
}

pub(crate) fn encoder_view(e: &LoadedEncoder) -> serde_json::Value {
    let m = e.encoder().manifest();
    serde_json::to_value(EncoderView {
        name: e.name().to_string(),
        version: m.version.clone(),
        role: m.role,
        dimension: m.dimension,
        fingerprint: m.fingerprint.clone(),
        aligned_to: m.aligned_to.clone(),
        execution_provider: e.encoder().provider().to_string(),
        loaded_at: e.loaded_at_rfc3339(),
        load_seconds: e.load_seconds,
        workers: e.batcher.workers(),
        compatibility_override: e.compatibility_override.clone(),
    })
    .unwrap_or_default()
}

async fn info(State(state): State<Arc<AppState>>) -> Json<serde_json::Value> {
    let snapshot = state.registry.snapshot();
    let encoders: Vec<serde_json::Value> = snapshot
        .encoders
        .values()
        .map(|e| encoder_view(e))
        .collect();
    let mut providers: Vec<String> = snapshot
        .encoders
        .values()
        .map(|e| e.encoder().provider().to_string())
        .collect();
    providers.sort();
    providers.dedup();
    let served = state.corpus();
    let index = served.as_ref().map(|c| {
        let i = &c.index;
        let m = i.manifest();
        json!({
            "documents": i.len(),
            "dimension": m.dimension,
            "metric": m.metric,
            "document_encoder": m.encoder_name,
            "document_encoder_fingerprint": m.encoder_fingerprint,
            "hnsw": { "m": m.hnsw.m, "ef_construction": m.hnsw.ef_construction, "ef_search": state.limits.default_ef.unwrap_or_else(|| i.default_ef()) },
            "graph_vectors": m.graph_vectors,
            "format_version": m.format_version,
            "mapped_bytes": i.mapped_bytes(),
            "heap_bytes": i.heap_bytes(),
        })
    });
    let corpus = served.as_ref().map_or(serde_json::Value::Null, |c| {
        crate::query::documents::corpus_view(c, crate::query::compaction::running(&state))
    });
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "ready": state.is_ready(),
        "corpus": corpus,
        "uptime_seconds": state.started.elapsed().as_secs(),
        "execution_providers": providers,
        "index": index,
        "store": state.store.get().map(|s| json!({
            "info": s.info(),
            "healthy": s.healthy(),
            "replicas": s.replicas(),
        })),
        "encoders": encoders,
        "aliases": snapshot.aliases,
        "pipelines": snapshot.pipelines,
        "repair": repair_info(&state),
        "limits": state.limits,
    }))
}

/// `/info`'s `repair`: the defaults, the vocabulary and the lexicon, and whether `auto` runs.
pub(crate) fn repair_info(state: &AppState) -> serde_json::Value {
    let served = state.corpus();
    let speller = state.store_speller.get();
    let from_store = speller.and_then(|s| s.repairer());
    let repairer = served
        .as_ref()
        .and_then(|c| c.repairer.as_ref())
        .or(from_store.as_ref());
    let vocabulary = repairer.map(|r| {
        let v = r.vocab().info();
        json!({
            "words": v.words, "tokens": v.tokens, "pairs": v.pairs, "window": v.window,
            "bigrams": v.bigrams,
            "bytes": r.vocab().heap_bytes(),
        })
    });
    let lexicon = repairer
        .and_then(|r| r.lexicon())
        .map(|l| json!({ "words": l.len(), "pairs": l.bigram_len(), "sources": l.sources() }));
    let model = repairer.map(|r| r.model_info());
    let status = match (repairer, repairer.and_then(|r| r.lexicon())) {
        (None, _) if served.is_none() && speller.is_none() => "loading",
        (None, _) => "no_vocabulary",
        (Some(_), None) => "no_lexicon",
        (Some(_), Some(_)) => "ready",
    };
    json!({
        "status": status,
        "default_mode": state.repair_defaults.mode,
        "default_fusion": state.repair_defaults.fusion,
        // Documents of the raw query's results that vote on its repair (0: off).
        "vote_documents": state.repair_defaults.vote_documents,
        "vocabulary": vocabulary,
        // Served from a store: when its vocabulary was built, and from how many documents.
        "store_vocabulary": speller.and_then(|s| s.record()).map(|v| json!({
            "built_at": v.built_at,
            "age_seconds": crate::clock::now_unix().saturating_sub(v.built_unix),
            "documents": v.documents,
        })),
        "lexicon": lexicon,
        "model": model,
    })
}

fn default_k() -> usize {
    10
}

/// `POST /search` body: `query` (one) or `queries` (a batch).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    #[serde(default)]
    query: Option<String>,
    #[serde(default)]
    queries: Option<Vec<String>>,
    #[serde(default = "default_k")]
    #[schema(default = 10, minimum = 1)]
    k: usize,
    #[serde(default)]
    encoder: Option<String>,
    #[serde(default)]
    ef: Option<usize>,
    /// Encoders or aliases whose results are merged by reciprocal rank fusion.
    #[serde(default)]
    fusion: Option<Vec<String>>,
    /// Query repair: `off`, `on` or `auto` (default: the alias's, else the service's).
    #[serde(default)]
    repair: Option<RepairMode>,
    /// What a repaired query searches with: `repaired` or `max`.
    #[serde(default)]
    repair_fusion: Option<RepairFusion>,
    /// Only documents whose metadata this admits (Qdrant's filter shape; docs/api.md "Filters").
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    filter: Option<serde_json::Value>,
    /// Each hit carries its document's metadata.
    #[serde(default)]
    with_metadata: bool,
    /// Read-your-writes: served only by a node that holds the write whose `operation_id` this
    /// is (a PostgreSQL store's replicas, else its primary), or once the embedded index has
    /// applied it.
    #[serde(default)]
    after: Option<u64>,
}

/// The `repair` member of a search response for one query: `None` when nothing changed.
pub(crate) fn repair_view(r: &Option<Repaired>, fusion: RepairFusion) -> serde_json::Value {
    match r {
        None => serde_json::Value::Null,
        Some(r) => json!({
            "text": r.text,
            "edits": r.edits,
            "confidence": r.confidence(),
            "fusion": fusion,
        }),
    }
}

/// The JSON body of a search outcome: `results` (a list for `query`, a list per query for
/// `queries`), `timings_ms`, what served it (`encoder`; `routed_to` and, for a batch, `encoders`
/// when routed; `fusion` when fused), and `repair` / `repairs` when any query was repaired.
fn search_body(out: SearchOutcome, batch_form: bool) -> Result<serde_json::Value, ApiError> {
    let one_or_all = |v: Vec<serde_json::Value>| -> serde_json::Value {
        if batch_form {
            json!(v)
        } else {
            v.into_iter().next().unwrap_or(serde_json::Value::Null)
        }
    };
    let results: Vec<serde_json::Value> = out
        .results
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let mut body = serde_json::Map::new();
    body.insert("results".into(), one_or_all(results));
    if let Some(e) = out.served.encoder() {
        body.insert("encoder".into(), json!(e));
    }
    match out.served {
        Served::One(_) => {
            body.insert("timings_ms".into(), json!(out.timings));
        }
        Served::Routed {
            routed_to,
            encoders,
        } => {
            if batch_form {
                body.insert("encoders".into(), json!(encoders));
            }
            body.insert(
                "routed_to".into(),
                one_or_all(routed_to.into_iter().map(serde_json::Value::from).collect()),
            );
            body.insert("timings_ms".into(), json!(out.timings));
        }
        Served::Fused(fusion) => {
            body.insert("fusion".into(), json!(fusion));
            body.insert("timings_ms".into(), json!({ "total": out.timings.total }));
        }
    }
    if let Some(f) = &out.filter {
        body.insert("filter".into(), json!(f));
    }
    if out.repairs.iter().any(Option::is_some) {
        let views: Vec<serde_json::Value> = out
            .repairs
            .iter()
            .map(|r| repair_view(r, out.repair_fusion))
            .collect();
        if batch_form {
            body.insert("repairs".into(), json!(views));
        } else if let Some(v) = views.into_iter().next() {
            body.insert("repair".into(), v);
        }
    }
    Ok(serde_json::Value::Object(body))
}

async fn search(
    State(state): State<Arc<AppState>>,
    JsonBody(req): JsonBody<SearchRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let (texts, batch_form) = match (req.query, req.queries) {
        (Some(q), None) => (vec![q], false),
        (None, Some(qs)) => (qs, true),
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid("give either query or queries, not both"))
        }
        (None, None) => {
            return Err(ApiError::invalid(
                "missing field `query` (or `queries` for a batch)",
            ))
        }
    };
    let filter = req
        .filter
        .as_ref()
        .map(|f| query::Filter::parse(f, "filter"))
        .transpose()
        .map_err(stages::filter_error)?;
    let out = query::search(
        &state,
        query::SearchRequest {
            params: SearchParams {
                texts,
                field: if batch_form { "queries" } else { "query" },
                k: req.k,
                encoder: req.encoder,
                ef: req.ef,
                repair: req.repair,
                repair_fusion: req.repair_fusion,
                filter,
                with_metadata: req.with_metadata,
                after: req.after,
                deadline: None,
            },
            fusion: req.fusion,
        },
    )
    .await?;
    Ok(Json(search_body(out, batch_form)?))
}

/// `POST /v1/embeddings` body, as OpenAI defines it.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct EmbeddingsRequest {
    /// One text or a list of texts.
    #[schema(value_type = super::openapi::EmbeddingInput)]
    input: serde_json::Value,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    encoding_format: Option<String>,
    #[serde(default)]
    dimensions: Option<usize>,
    #[serde(default)]
    #[allow(dead_code)]
    user: Option<String>,
}

async fn embeddings(
    State(state): State<Arc<AppState>>,
    JsonBody(req): JsonBody<EmbeddingsRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let texts: Vec<String> = match req.input {
        serde_json::Value::String(s) => vec![s],
        serde_json::Value::Array(items) => items
            .into_iter()
            .enumerate()
            .map(|(i, v)| match v {
                serde_json::Value::String(s) => Ok(s),
                _ => Err(ApiError::invalid(format!(
                    "input[{i}]: only strings are supported (token-id inputs are not)"
                ))),
            })
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(ApiError::invalid(
                "input must be a string or an array of strings",
            ))
        }
    };
    let base64 = match req.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "encoding_format must be \"float\" or \"base64\", got {other:?}"
            )))
        }
    };
    let out = stages::embed(&state, texts, "input", req.model, req.dimensions).await?;
    let data: Vec<serde_json::Value> = out
        .vectors
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let embedding = if base64 {
                let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                json!(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(v)
            };
            json!({ "object": "embedding", "index": i, "embedding": embedding })
        })
        .collect();
    Ok(Json(json!({
        "object": "list",
        "data": data,
        "model": out.encoder_name,
        "usage": { "prompt_tokens": out.tokens, "total_tokens": out.tokens },
    })))
}

#[cfg(test)]
mod tests {
    use super::{bearer_token, constant_time_eq};

    #[test]
    fn secrets_compare_equal_only_when_identical() {
        assert!(constant_time_eq(b"s3cret-token", b"s3cret-token"));
        assert!(!constant_time_eq(b"s3cret-token", b"s3cret-tokeN"));
        assert!(!constant_time_eq(b"s3cret-token", b"s3cret-toke"));
        assert!(!constant_time_eq(b"", b"x"));
        assert!(constant_time_eq(b"", b""));
    }

    #[test]
    fn bearer_scheme_is_case_insensitive() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer abc "), Some("abc"));
        assert_eq!(bearer_token("BEARER  abc"), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer"), None);
        assert_eq!(bearer_token("abc"), None);
    }
}
