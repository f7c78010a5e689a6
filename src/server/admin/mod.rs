//! The admin API, on its own listener: load, replace and unload query encoders, point aliases
//! at them, and keep the declarative state file in step (see `docs/admin-api.md`).
//!
//! Every change is prepared off the async runtime and before anything switches: an encoder is
//! loaded, checked against the index and warmed up first, then one short critical section
//! writes the state file and publishes the new registry snapshot. Requests in flight keep the
//! snapshot they started with, so no request fails or changes encoder half-way.
//!
//! One file per concern: [`bootstrap`] starts the listener, the job manager and the token;
//! [`state_sync`] keeps the registry and the state file in step; [`registry_ops`] loads, unloads
//! and switches; [`handlers`], [`jobs`] and [`documents`] (the live corpus) are the HTTP routes,
//! [`events`] the event streams of jobs and compactions.

mod bootstrap;
pub mod documents;
mod events;
mod handlers;
mod jobs;
mod openapi;
mod registry_ops;
mod state_sync;

pub use bootstrap::start;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::model_roots::{ModelRoots, Refusal};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{JsonBody, QueryParams, UrlPath};
use super::http::{constant_time_eq, encoder_view};
use super::{check_compatible, load_encoder, Incompatible, ServeError, ServeOptions};
use crate::encoder::{EncoderManifest, RuntimeOptions};
use crate::jobs::local::LocalRunner;
use crate::jobs::ray::RayRunner;
use crate::jobs::{EncoderHost, JobManager, JobMetrics, JobsConfig, Runner};
use crate::query::ApiError;
use crate::query::AppState;
use crate::registry::batcher::BatchConfig;
use crate::registry::metrics::RegistryMetrics;
use crate::registry::router::{QueryRouter, RouterConfig};
use crate::registry::state_file::{self, StateFile};
use crate::registry::{
    validate_name, LoadedEncoder, QueryPipeline, Registration, Snapshot, DEFAULT_ALIAS,
};
use crate::repair::{RepairFusion, RepairMode};
use crate::sync::lock;

/// Where the admin API listens unless told otherwise.
pub const DEFAULT_ADMIN_ADDR: ([u8; 4], u16) = ([127, 0, 0, 1], 8081);
/// File under the data directory that receives a generated admin token.
pub const TOKEN_FILE: &str = "admin-token";
/// File under the data directory that holds the registry state unless `--state-file` is given.
pub const STATE_FILE: &str = "state.json";

/// Settings of the admin API, the state file and the query router.
#[derive(Debug, Clone)]
pub struct AdminOptions {
    pub addr: SocketAddr,
    /// The bearer token; `None`: generate one and write it to `<data-dir>/admin-token`.
    pub token: Option<String>,
    /// The state file; `None`: `<data-dir>/state.json`.
    pub state_file: Option<PathBuf>,
    /// How often the state file is checked for changes.
    pub watch_interval: Duration,
    /// The query router, when one is configured.
    pub router: Option<RouterConfig>,
    /// Alignment jobs.
    pub jobs: JobsOptions,
    /// Directories the admin API may load bundles from, besides the jobs' encoders directory
    /// and the directories of the `--encoder` bundles (see [`ModelRoots`]).
    pub models_dirs: Vec<PathBuf>,
}

impl Default for AdminOptions {
    fn default() -> Self {
        AdminOptions {
            addr: SocketAddr::from(DEFAULT_ADMIN_ADDR),
            token: None,
            state_file: None,
            watch_interval: Duration::from_secs(1),
            router: None,
            jobs: JobsOptions::default(),
            models_dirs: Vec::new(),
        }
    }
}

/// Where alignment jobs run.
#[derive(Debug, Clone, PartialEq)]
pub enum JobRunnerKind {
    /// Child processes of the server.
    Local,
    /// A Ray cluster, through its job REST API at `address` (`http://head:8265`); `binary` is
    /// the capot binary as the cluster sees it (default: this server's own path).
    Ray {
        address: String,
        binary: Option<PathBuf>,
    },
}

/// Settings of the alignment jobs.
#[derive(Debug, Clone)]
pub struct JobsOptions {
    pub runner: JobRunnerKind,
    /// Jobs running at once; the rest wait in the queue.
    pub max_running: usize,
    /// Re-queue jobs that were running when the server stopped (they resume from their
    /// checkpoint) instead of marking them failed.
    pub requeue_on_restart: bool,
    /// Niceness of local job processes (0-19).
    pub nice: i32,
    /// Where finished bundles go (default `<data-dir>/encoders`).
    pub encoders_dir: Option<PathBuf>,
}

impl Default for JobsOptions {
    fn default() -> Self {
        JobsOptions {
            runner: JobRunnerKind::Local,
            max_running: 1,
            requeue_on_restart: false,
            nice: 10,
            encoders_dir: None,
        }
    }
}

/// Why an admin call was refused. Nothing changed when one is returned.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The request is malformed (bad name, missing bundle directory).
    #[error("{0}")]
    Invalid(String),
    /// No such encoder or alias.
    #[error("{0}")]
    NotFound(String),
    /// The change contradicts the current state (alias still points at it, name taken).
    #[error("{0}")]
    Conflict(String),
    /// The encoder's vectors do not fit the index.
    #[error("{0}")]
    Incompatible(String),
    /// The bundle did not load (corrupt, unreadable, failed warm-up).
    #[error("{0}")]
    Load(String),
    /// The service is still starting.
    #[error("{0}")]
    NotReady(String),
    /// The state file could not be written.
    #[error("{0}")]
    StateFile(String),
    /// The bundle lies outside the model directories.
    #[error("{0}")]
    Forbidden(String),
}

impl From<AdminError> for ApiError {
    fn from(e: AdminError) -> Self {
        match e {
            AdminError::Invalid(m) => ApiError::invalid(m),
            AdminError::NotFound(m) => ApiError::not_found("not_found", m),
            AdminError::Conflict(m) => ApiError::new(StatusCode::CONFLICT, "conflict", m),
            AdminError::Incompatible(m) => ApiError::new(StatusCode::CONFLICT, "incompatible", m),
            AdminError::Load(m) => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "load_failed", m)
            }
            AdminError::NotReady(m) => ApiError::not_ready(m),
            AdminError::StateFile(m) => {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "state_file", m)
            }
            AdminError::Forbidden(m) => {
                ApiError::new(StatusCode::FORBIDDEN, "outside_model_dirs", m).with_param("path")
            }
        }
    }
}

/// What the state file last did, for `GET /admin/state`.
#[derive(Default)]
struct FileSync {
    /// Hash of the content last written or applied.
    applied: Option<String>,
    /// Hash of the content last rejected (not retried until it changes).
    rejected: Option<String>,
    last_error: Option<String>,
}

/// An encoder being loaded, for `GET /admin/encoders`.
struct Loading {
    name: String,
    path: PathBuf,
    since: SystemTime,
}

/// How applying a state file ended.
enum Applied {
    Changed,
    Unchanged,
    /// The file or the registry changed meanwhile; the next poll tries again.
    Superseded,
}

/// The admin side of a running service.
pub struct Admin {
    state: Arc<AppState>,
    runtime: RuntimeOptions,
    batch: BatchConfig,
    token: String,
    state_path: PathBuf,
    watch_interval: Duration,
    /// The registry's metrics.
    pub metrics: Arc<RegistryMetrics>,
    /// Serialises every change of the registry with the state file write.
    sync: Mutex<FileSync>,
    loading: Mutex<BTreeMap<u64, Loading>>,
    next_load: AtomicU64,
    /// Encoders from `--encoder` flags: a state file that does not list them leaves them loaded.
    pinned: Mutex<BTreeSet<String>>,
    /// Set once the state file was restored; changes are refused before.
    restored: AtomicBool,
    /// The served index directory (absolute).
    index_dir: PathBuf,
    /// The alignment job manager.
    jobs: OnceLock<Arc<JobManager>>,
    /// Becomes true when the service shuts down: live event streams end so the drain does not
    /// wait for them.
    pub(crate) stopping: tokio::sync::watch::Receiver<bool>,
    /// Where `POST /admin/encoders` may load bundles from.
    roots: ModelRoots,
}

/// The absolute form of a path (canonical when it exists): job commands run in their own
/// working directory.
pub(super) fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    })
}

/// Runs a blocking admin operation off the async runtime.
pub(super) async fn blocking<T: Send + 'static, E: Into<ApiError> + Send + 'static>(
    f: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::internal(format!("admin task failed: {e}")))?
        .map_err(Into::into)
}

/// The admin router: every route requires the bearer token but `/openapi.json`, which only
/// describes them.
pub fn router(admin: Arc<Admin>) -> Router {
    let openapi = || async {
        static DOC: OnceLock<Value> = OnceLock::new();
        Json(DOC.get_or_init(openapi::document).clone())
    };
    Router::new()
        .route("/openapi.json", get(openapi))
        .merge(handlers::guarded(admin))
}
