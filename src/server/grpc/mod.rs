//! The gRPC API (`proto/capot/v1/retrieval.proto`, service `capot.v1.Retrieval`), served by tonic
//! beside HTTP with the standard health service and server reflection.
//!
//! The handlers are thin wrappers around [`query::search`] and [`stages::embed`](crate::query::stages::embed), so validation,
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

use super::http::constant_time_eq;
use crate::query::stages::{self, SearchParams};
use crate::query::ApiError;
use crate::query::AppState;
use crate::query::{self, EncoderRef, SearchOutcome, Served};

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

mod convert;
mod filter;
mod health;

pub use convert::to_status;
use convert::{
    decode_errors_are_invalid_argument, info, is_decode_error, non_empty, search_request,
    search_response, to_usize,
};
pub use health::HealthService;

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
            let out = query::search(&self.state, search_request(request.into_inner())?).await?;
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
                        match async { query::search(&state, search_request(req)?).await }.await {
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
            let out = stages::embed(
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
    fn descriptor_set_names_the_service() {
        let text = String::from_utf8_lossy(pb::FILE_DESCRIPTOR_SET);
        assert!(text.contains("capot.v1") && text.contains("Retrieval"));
        assert_eq!(route("Search"), "grpc:/capot.v1.Retrieval/Search");
    }
}
