//! The gRPC API (`proto/capot/v1/retrieval.proto`, service `capot.v1.Retrieval`), served by tonic
//! beside HTTP with the standard health service and server reflection.
//!
//! The handlers are thin wrappers around [`pipeline::search`] and [`core::embed`], so validation,
//! limits and errors are the HTTP API's; an [`ApiError`] becomes a [`Status`] by its HTTP status
//! ([`to_status`]).

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataMap;
use tonic::{Code, Request, Response, Status, Streaming};
use tonic_health::pb::health_check_response::ServingStatus as HealthStatus;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

use super::core::{self, SearchParams};
use super::error::ApiError;
use super::http::constant_time_eq;
use super::pipeline::{self, EncoderRef, SearchOutcome, Served};
use super::state::AppState;

/// Code generated from `proto/capot/v1/retrieval.proto` by `build.rs`.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod pb {
    tonic::include_proto!("capot.v1");

    /// Encoded `FileDescriptorSet` of the capot protos, served by reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/capot_descriptor.bin"));
}

use pb::retrieval_server::{Retrieval, RetrievalServer};

/// Fully qualified gRPC service name, also the name the health service reports on.
pub const SERVICE_NAME: &str = pb::retrieval_server::SERVICE_NAME;

/// Trailing metadata key carrying the stable error code (`ApiError::code`) of a failed call.
pub const ERROR_CODE_KEY: &str = "capot-error-code";

/// Results per query when a request gives no `k` (as over HTTP).
const DEFAULT_K: usize = 10;

/// Requests a `SearchStream` may have answered but not yet sent before it stops reading more.
const STREAM_BUFFER: usize = 4;

/// How often a health `Watch` re-reads readiness.
const HEALTH_POLL: Duration = Duration::from_millis(200);

/// Errors of the gRPC listener.
#[derive(Debug, thiserror::Error)]
pub enum GrpcError {
    #[error("reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// The gRPC status for an API error: the code follows the HTTP status, the message is kept, and
/// the stable error code travels in the `capot-error-code` metadata.
pub fn to_status(e: &ApiError) -> Status {
    let code = match e.status {
        StatusCode::BAD_REQUEST
        | StatusCode::UNPROCESSABLE_ENTITY
        | StatusCode::UNSUPPORTED_MEDIA_TYPE => Code::InvalidArgument,
        StatusCode::UNAUTHORIZED => Code::Unauthenticated,
        StatusCode::FORBIDDEN => Code::PermissionDenied,
        StatusCode::NOT_FOUND => Code::NotFound,
        StatusCode::METHOD_NOT_ALLOWED => Code::Unimplemented,
        StatusCode::CONFLICT => Code::FailedPrecondition,
        StatusCode::PAYLOAD_TOO_LARGE => Code::OutOfRange,
        StatusCode::TOO_MANY_REQUESTS => Code::ResourceExhausted,
        StatusCode::SERVICE_UNAVAILABLE => Code::Unavailable,
        s if s.is_client_error() => Code::InvalidArgument,
        _ => Code::Internal,
    };
    let mut metadata = MetadataMap::new();
    if let Ok(v) = e.code.parse() {
        metadata.insert(ERROR_CODE_KEY, v);
    }
    Status::with_metadata(code, e.message.clone(), metadata)
}

/// Whether a status is tonic's answer to bytes that do not decode as the method's message: the
/// client's error, though gRPC's status-code table names INTERNAL for it.
fn is_decode_error(code: Code, message: &str) -> bool {
    code == Code::Internal
        && (message.starts_with("failed to decode") || message.starts_with("failed%20to%20decode"))
}

/// Rewrites tonic's INTERNAL answer to an undecodable unary message (sent before any handler
/// runs, as a trailers-only response) to INVALID_ARGUMENT with capot's `invalid_request` code, so
/// a client's malformed bytes are never reported as a server fault.
fn decode_errors_are_invalid_argument(
    mut resp: axum::http::Response<tonic::body::Body>,
) -> axum::http::Response<tonic::body::Body> {
    let headers = resp.headers_mut();
    let decode = headers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i32>().ok())
        .is_some_and(|c| {
            let message = headers
                .get("grpc-message")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            is_decode_error(Code::from_i32(c), message)
        });
    if decode {
        let invalid = (Code::InvalidArgument as i32).to_string();
        if let Ok(v) = axum::http::HeaderValue::from_str(&invalid) {
            headers.insert("grpc-status", v);
        }
        headers.insert(
            ERROR_CODE_KEY,
            axum::http::HeaderValue::from_static("invalid_request"),
        );
    }
    resp
}

/// Route label of a method in the request metrics, e.g. `grpc:/capot.v1.Retrieval/Search`.
fn route(method: &str) -> String {
    format!("grpc:/{SERVICE_NAME}/{method}")
}

/// One call in the metrics: in flight from [`Call::start`] until it is dropped; [`Call::done`]
/// counts it by route and gRPC status code (the numeric `grpc-status`), and failures by reason.
struct Call {
    state: Arc<AppState>,
    route: String,
}

impl Call {
    fn start(state: &Arc<AppState>, method: &str) -> Self {
        state.metrics.in_flight.inc();
        Call {
            state: state.clone(),
            route: route(method),
        }
    }

    fn done(&self, code: Code, reason: Option<&str>) {
        let status = (code as i32).to_string();
        self.state
            .metrics
            .requests
            .with_label_values(&[self.route.as_str(), status.as_str()])
            .inc();
        if code != Code::Ok {
            self.state
                .metrics
                .failures
                .with_label_values(&[self.route.as_str(), reason.unwrap_or("grpc_error")])
                .inc();
        }
    }

    /// Records the outcome of a unary call and turns it into the tonic result.
    fn finish<T>(self, result: Result<T, ApiError>) -> Result<Response<T>, Status> {
        match result {
            Ok(v) => {
                self.done(Code::Ok, None);
                Ok(Response::new(v))
            }
            Err(e) => {
                let status = to_status(&e);
                self.done(status.code(), Some(e.code));
                Err(status)
            }
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        self.state.metrics.in_flight.dec();
    }
}

/// The `capot.v1.Retrieval` service.
#[derive(Clone)]
pub struct RetrievalService {
    state: Arc<AppState>,
    /// Becomes true at shutdown: open streams end instead of holding the drain up.
    stop: watch::Receiver<bool>,
}

impl RetrievalService {
    /// A service over `state` whose streams end when `stop` turns true.
    pub fn new(state: Arc<AppState>, stop: watch::Receiver<bool>) -> Self {
        RetrievalService { state, stop }
    }

    /// `authorization: Bearer <key>` when the service has an API key.
    fn authorize(&self, metadata: &MetadataMap) -> Result<(), ApiError> {
        let Some(key) = &self.state.api_key else {
            return Ok(());
        };
        let given = metadata
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        if given.is_some_and(|g| constant_time_eq(g.as_bytes(), key.as_bytes())) {
            Ok(())
        } else {
            Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "missing or wrong API key (metadata authorization: Bearer <key>)",
            ))
        }
    }
}

fn non_empty(s: String) -> Option<String> {
    if s.is_empty() {
        None
    } else {
        Some(s)
    }
}

fn to_usize(v: u32) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

fn to_u32(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// An optional name field: empty means unset; anything else must parse.
fn parse_name<T: std::str::FromStr<Err = String>>(
    value: String,
    field: &str,
) -> Result<Option<T>, ApiError> {
    non_empty(value)
        .map(|v| {
            v.parse()
                .map_err(|e: String| ApiError::invalid(format!("{field}: {e}")).with_param(field))
        })
        .transpose()
}

fn search_request(req: pb::SearchRequest) -> Result<pipeline::SearchRequest, ApiError> {
    Ok(pipeline::SearchRequest {
        params: SearchParams {
            texts: req.queries,
            field: "queries",
            k: req.k.map(to_usize).unwrap_or(DEFAULT_K),
            encoder: non_empty(req.encoder),
            ef: req.ef.map(to_usize),
            repair: parse_name(req.repair, "repair")?,
            repair_fusion: parse_name(req.repair_fusion, "repair_fusion")?,
        },
        fusion: (!req.fusion.is_empty()).then_some(req.fusion),
    })
}

fn encoder_ref(e: EncoderRef) -> pb::EncoderRef {
    pb::EncoderRef {
        name: e.name,
        version: e.version,
    }
}

fn search_response(out: SearchOutcome) -> pb::SearchResponse {
    let fusion_name = out.repair_fusion.as_str();
    let repairs = out
        .repairs
        .iter()
        .map(|r| match r {
            None => pb::QueryRepair::default(),
            Some(r) => pb::QueryRepair {
                changed: true,
                text: r.text.clone(),
                edits: r
                    .edits
                    .iter()
                    .map(|e| pb::RepairEdit {
                        from: e.from.clone(),
                        to: e.to.clone(),
                        distance: u32::from(e.distance),
                        confidence: e.confidence,
                        kind: e.kind.as_str().to_string(),
                        start: u32::try_from(e.start).unwrap_or(u32::MAX),
                    })
                    .collect(),
                fusion: fusion_name.to_string(),
            },
        })
        .collect();
    let (encoder, routed_to, encoders, fusion) = match out.served {
        Served::One(e) => (Some(encoder_ref(e)), Vec::new(), Vec::new(), None),
        Served::Routed {
            routed_to,
            encoders,
        } => {
            let single = encoders
                .first()
                .filter(|first| encoders.iter().all(|e| e == *first))
                .cloned()
                .map(encoder_ref);
            (
                single,
                routed_to,
                encoders.into_iter().map(encoder_ref).collect(),
                None,
            )
        }
        Served::Fused(f) => (
            None,
            Vec::new(),
            Vec::new(),
            Some(pb::FusionInfo {
                method: f.method.to_string(),
                k: f.k,
                depth: to_u32(f.depth),
                encoders: f
                    .encoders
                    .into_iter()
                    .map(|e| pb::FusedEncoder {
                        requested: e.requested,
                        name: e.name,
                        version: e.version,
                    })
                    .collect(),
            }),
        ),
    };
    let t = out.timings;
    pb::SearchResponse {
        repairs,
        results: out
            .results
            .into_iter()
            .map(|hits| pb::QueryResult {
                hits: hits
                    .into_iter()
                    .map(|h| pb::SearchHit {
                        id: h.id,
                        score: h.score,
                        rank: to_u32(h.rank),
                        title: h.title,
                        text: h.text,
                    })
                    .collect(),
            })
            .collect(),
        encoder,
        timings: Some(pb::Timings {
            repair_ms: t.repair,
            tokenize_ms: t.tokenize,
            queue_ms: t.queue,
            encode_ms: t.encode,
            search_ms: t.search,
            total_ms: t.total,
        }),
        routed_to,
        encoders,
        fusion,
    }
}

/// Serialised name of a serde enum (`Role`, `Metric`), as `/info` shows it.
fn enum_name<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

/// The data of `GET /info`, as a message.
fn info(state: &AppState) -> pb::InfoResponse {
    let snapshot = state.registry.snapshot();
    let encoders: Vec<pb::EncoderInfo> = snapshot
        .encoders
        .values()
        .map(|e| {
            let m = e.encoder().manifest();
            let secs = e
                .loaded_at
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            pb::EncoderInfo {
                name: m.name.clone(),
                version: m.version.clone(),
                role: enum_name(&m.role),
                dimension: to_u32(m.dimension),
                fingerprint: m.fingerprint.clone(),
                aligned_to: m.aligned_to.clone(),
                execution_provider: e.encoder().provider().to_string(),
                loaded_at: crate::clock::rfc3339_from_unix(secs),
                load_seconds: e.load_seconds,
                compatibility_override: e.compatibility_override.clone(),
            }
        })
        .collect();
    let mut providers: Vec<String> = encoders
        .iter()
        .map(|e| e.execution_provider.clone())
        .collect();
    providers.sort();
    providers.dedup();
    let index = state.index.get().map(|i| {
        let m = i.manifest();
        pb::IndexInfo {
            documents: i.len() as u64,
            dimension: to_u32(m.dimension),
            metric: enum_name(&m.metric),
            document_encoder: m.encoder_name.clone(),
            document_encoder_fingerprint: m.encoder_fingerprint.clone(),
            hnsw_m: to_u32(m.hnsw.m),
            hnsw_ef_construction: to_u32(m.hnsw.ef_construction),
            hnsw_ef_search: to_u32(state.limits.default_ef.unwrap_or_else(|| i.default_ef())),
        }
    });
    let l = &state.limits;
    pb::InfoResponse {
        version: env!("CARGO_PKG_VERSION").to_string(),
        ready: state.is_ready(),
        uptime_seconds: state.started.elapsed().as_secs(),
        execution_providers: providers,
        index,
        encoders,
        aliases: snapshot.aliases.clone().into_iter().collect(),
        limits: Some(pb::Limits {
            max_k: to_u32(l.max_k),
            max_queries_per_request: to_u32(l.max_queries_per_request),
            max_query_chars: to_u32(l.max_query_chars),
            max_body_bytes: l.max_body_bytes as u64,
            max_in_flight: to_u32(l.max_in_flight),
            queue_capacity: to_u32(l.queue_capacity),
            request_timeout_ms: l.request_timeout_ms,
        }),
    }
}

type SearchStream =
    Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::SearchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Retrieval for RetrievalService {
    async fn search(
        &self,
        request: Request<pb::SearchRequest>,
    ) -> Result<Response<pb::SearchResponse>, Status> {
        let call = Call::start(&self.state, "Search");
        let result = async {
            self.authorize(request.metadata())?;
            let out = pipeline::search(&self.state, search_request(request.into_inner())?).await?;
            Ok(search_response(out))
        }
        .await;
        call.finish(result)
    }

    type SearchStreamStream = SearchStream;

    /// Answers each request in order, one at a time; the first failure ends the stream with its
    /// status, and so does shutdown (UNAVAILABLE).
    async fn search_stream(
        &self,
        request: Request<Streaming<pb::SearchRequest>>,
    ) -> Result<Response<Self::SearchStreamStream>, Status> {
        let call = Call::start(&self.state, "SearchStream");
        if let Err(e) = self.authorize(request.metadata()) {
            return call.finish(Err(e));
        }
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        let state = self.state.clone();
        let mut stop = self.stop.clone();
        tokio::spawn(async move {
            // (code, reason) the stream ended with.
            let (code, reason): (Code, Option<&'static str>) = loop {
                let next = tokio::select! {
                    m = inbound.message() => m,
                    _ = tx.closed() => break (Code::Cancelled, Some("cancelled")),
                    () = async {
                        let _ = stop.wait_for(|s| *s).await;
                    } => {
                        let e = ApiError::not_ready("shutting down");
                        let _ = tx.send(Err(to_status(&e))).await;
                        break (Code::Unavailable, Some(e.code));
                    }
                };
                match next {
                    Ok(Some(req)) => {
                        match async { pipeline::search(&state, search_request(req)?).await }.await {
                            Ok(out) => {
                                if tx.send(Ok(search_response(out))).await.is_err() {
                                    break (Code::Cancelled, Some("cancelled"));
                                }
                            }
                            Err(e) => {
                                let status = to_status(&e);
                                let code = status.code();
                                let _ = tx.send(Err(status)).await;
                                break (code, Some(e.code));
                            }
                        }
                    }
                    Ok(None) => break (Code::Ok, None),
                    Err(status) if is_decode_error(status.code(), status.message()) => {
                        let e = ApiError::invalid(status.message().to_string());
                        let status = to_status(&e);
                        let code = status.code();
                        let _ = tx.send(Err(status)).await;
                        break (code, Some(e.code));
                    }
                    Err(status) => {
                        let code = status.code();
                        let _ = tx.send(Err(status)).await;
                        break (code, Some("stream_error"));
                    }
                }
            };
            call.done(code, reason);
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn embed(
        &self,
        request: Request<pb::EmbedRequest>,
    ) -> Result<Response<pb::EmbedResponse>, Status> {
        let call = Call::start(&self.state, "Embed");
        let result = async {
            self.authorize(request.metadata())?;
            let req = request.into_inner();
            let out = core::embed(
                &self.state,
                req.texts,
                "texts",
                non_empty(req.encoder),
                req.dimensions.map(to_usize),
            )
            .await?;
            Ok(pb::EmbedResponse {
                embeddings: out
                    .vectors
                    .into_iter()
                    .map(|values| pb::Embedding { values })
                    .collect(),
                encoder: Some(pb::EncoderRef {
                    name: out.encoder_name,
                    version: out.encoder_version,
                }),
                tokens: out.tokens as u64,
            })
        }
        .await;
        call.finish(result)
    }

    async fn info(
        &self,
        request: Request<pb::InfoRequest>,
    ) -> Result<Response<pb::InfoResponse>, Status> {
        let call = Call::start(&self.state, "Info");
        let result = self
            .authorize(request.metadata())
            .map(|()| info(&self.state));
        call.finish(result)
    }
}

/// The standard `grpc.health.v1.Health` service, answered from the service state itself so it
/// always agrees with `GET /ready`: NOT_SERVING while loading, SERVING once ready, NOT_SERVING
/// again from the moment shutdown begins. Known services: `""` (the whole server) and
/// `capot.v1.Retrieval`.
#[derive(Clone)]
pub struct HealthService {
    state: Arc<AppState>,
    stop: watch::Receiver<bool>,
}

impl HealthService {
    /// Health of the service over `state`; `Watch` streams end when `stop` turns true.
    pub fn new(state: Arc<AppState>, stop: watch::Receiver<bool>) -> Self {
        HealthService { state, stop }
    }

    fn status(state: &AppState, service: &str) -> Option<HealthStatus> {
        if !service.is_empty() && service != SERVICE_NAME {
            return None;
        }
        Some(if state.is_ready() {
            HealthStatus::Serving
        } else {
            HealthStatus::NotServing
        })
    }
}

type WatchStream =
    Pin<Box<dyn tokio_stream::Stream<Item = Result<HealthCheckResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Health for HealthService {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        let service = &request.get_ref().service;
        match Self::status(&self.state, service) {
            Some(s) => Ok(Response::new(HealthCheckResponse { status: s as i32 })),
            None => Err(Status::not_found(format!("unknown service {service:?}"))),
        }
    }

    type WatchStream = WatchStream;

    /// Sends the status at once and again on every change (polled); an unknown service gets
    /// SERVICE_UNKNOWN, as the health protocol asks. The stream ends, NOT_SERVING, at shutdown.
    async fn watch(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let service = request.into_inner().service;
        let (tx, rx) = mpsc::channel(1);
        let state = self.state.clone();
        let mut stop = self.stop.clone();
        tokio::spawn(async move {
            let mut last = None;
            loop {
                let stopping = *stop.borrow();
                let status = match Self::status(&state, &service) {
                    Some(_) if stopping => HealthStatus::NotServing,
                    Some(s) => s,
                    None => HealthStatus::ServiceUnknown,
                };
                if last != Some(status) {
                    if tx
                        .send(Ok(HealthCheckResponse {
                            status: status as i32,
                        }))
                        .await
                        .is_err()
                    {
                        return;
                    }
                    last = Some(status);
                }
                if stopping {
                    return;
                }
                tokio::select! {
                    _ = tokio::time::sleep(HEALTH_POLL) => {}
                    _ = stop.changed() => {}
                    _ = tx.closed() => return,
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// Serves Retrieval, `grpc.health.v1.Health` and reflection (v1 and v1alpha) on `listener` until
/// `stop` turns true, then lets in-flight calls finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    stop: watch::Receiver<bool>,
) -> Result<(), GrpcError> {
    let health = HealthServer::new(HealthService::new(state.clone(), stop.clone()));
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    let retrieval = RetrievalServer::new(RetrievalService::new(state.clone(), stop.clone()))
        .max_decoding_message_size(state.limits.max_body_bytes);

    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    let mut stop = stop;
    tonic::transport::Server::builder()
        .layer(tower::util::MapResponseLayer::new(
            decode_errors_are_invalid_argument,
        ))
        .add_service(health)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(retrieval)
        .serve_with_incoming_shutdown(incoming, async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_map_to_grpc_codes_with_message_and_reason() {
        let cases = [
            (
                ApiError::invalid("queries[0]: text must not be empty"),
                Code::InvalidArgument,
            ),
            (
                ApiError::new(StatusCode::BAD_REQUEST, "invalid_json", "x"),
                Code::InvalidArgument,
            ),
            (
                ApiError::not_found("unknown_encoder", "no encoder"),
                Code::NotFound,
            ),
            (ApiError::overloaded("busy"), Code::ResourceExhausted),
            (ApiError::not_ready("loading"), Code::Unavailable),
            (
                ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "key"),
                Code::Unauthenticated,
            ),
            (
                ApiError::new(StatusCode::CONFLICT, "conflict", "c"),
                Code::FailedPrecondition,
            ),
            (
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", "big"),
                Code::OutOfRange,
            ),
            (ApiError::internal("boom"), Code::Internal),
        ];
        for (e, code) in cases {
            let s = to_status(&e);
            assert_eq!(s.code(), code, "{e:?}");
            assert_eq!(s.message(), e.message);
            assert_eq!(
                s.metadata()
                    .get(ERROR_CODE_KEY)
                    .and_then(|v| v.to_str().ok()),
                Some(e.code)
            );
        }
    }

    #[test]
    fn search_request_default_k_empty_encoder_and_fusion() {
        use crate::repair::{RepairFusion, RepairMode};
        let p = search_request(pb::SearchRequest {
            queries: vec!["a".into()],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(p.fusion, None, "no names, no fusion");
        let p = p.params;
        assert_eq!(p.k, DEFAULT_K);
        assert_eq!((p.encoder, p.repair, p.repair_fusion), (None, None, None));
        let p = search_request(pb::SearchRequest {
            queries: vec!["a".into()],
            k: Some(0),
            encoder: "minilm".into(),
            ef: Some(64),
            repair: "on".into(),
            repair_fusion: "repaired".into(),
            fusion: vec!["default".into(), "typo".into()],
        })
        .unwrap();
        assert_eq!(
            p.fusion,
            Some(vec!["default".to_string(), "typo".to_string()])
        );
        let p = p.params;
        assert_eq!(
            (p.k, p.encoder.as_deref(), p.ef),
            (0, Some("minilm"), Some(64))
        );
        assert_eq!(
            (p.repair, p.repair_fusion),
            (Some(RepairMode::On), Some(RepairFusion::Repaired))
        );
        let err = search_request(pb::SearchRequest {
            queries: vec!["a".into()],
            repair: "sometimes".into(),
            ..Default::default()
        })
        .unwrap_err();
        assert!(err.message.contains("repair"), "{}", err.message);
    }

    #[test]
    fn descriptor_set_names_the_service() {
        let text = String::from_utf8_lossy(pb::FILE_DESCRIPTOR_SET);
        assert!(text.contains("capot.v1") && text.contains("Retrieval"));
        assert_eq!(route("Search"), "grpc:/capot.v1.Retrieval/Search");
    }
}
