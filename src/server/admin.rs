//! The admin API, on its own listener: load, replace and unload query encoders, point aliases
//! at them, and keep the declarative state file in step (see `docs/admin-api.md`).
//!
//! Every change is prepared off the async runtime and before anything switches: an encoder is
//! loaded, checked against the index and warmed up first, then one short critical section
//! writes the state file and publishes the new registry snapshot. Requests in flight keep the
//! snapshot they started with, so no request fails or changes encoder half-way.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::model_roots::{ModelRoots, Refusal};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use axum::extract::{DefaultBodyLimit, Path as UrlPath, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{ApiError, JsonBody};
use super::http::{constant_time_eq, encoder_view};
use super::state::AppState;
use super::{check_compatible, load_encoder, ServeError, ServeOptions};
use crate::encoder::{EncoderManifest, RuntimeOptions};
use crate::jobs::local::LocalRunner;
use crate::jobs::ray::RayRunner;
use crate::jobs::{EncoderHost, JobManager, JobMetrics, JobsConfig, Runner};
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

/// Starts the admin listener, prints `capot: admin listening on http://ADDR` on stderr, and
/// installs the query router. Changes are accepted once [`Admin::restore`] ran. When `stop`
/// turns true the listener drains like the public one: no new connections, requests in flight
/// (a bundle being loaded, a job being submitted) finish, live event streams end; the returned
/// task ends when it has drained.
pub async fn start(
    state: Arc<AppState>,
    options: &ServeOptions,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Result<(Arc<Admin>, tokio::task::JoinHandle<std::io::Result<()>>), ServeError> {
    let a = &options.admin;
    let metrics = Arc::new(
        RegistryMetrics::new(&|c| state.metrics.register(c))
            .map_err(|e| ServeError::Load(e.to_string()))?,
    );
    if let Some(cfg) = &a.router {
        let _ = state.router.set(Arc::new(QueryRouter::new(
            cfg.clone(),
            Some(metrics.router_choices.clone()),
        )));
    }
    let token = match &a.token {
        Some(t) => t.clone(),
        None => generate_token(&options.data_dir)?,
    };
    let state_path = a
        .state_file
        .clone()
        .unwrap_or_else(|| options.data_dir.join(STATE_FILE));
    let encoders_dir = jobs_encoders_dir(options);
    std::fs::create_dir_all(&encoders_dir)?;
    let roots = ModelRoots::new(
        a.models_dirs
            .iter()
            .cloned()
            .chain(std::iter::once(encoders_dir))
            .chain(options.encoders.iter().filter_map(|e| {
                std::fs::canonicalize(e)
                    .ok()
                    .and_then(|c| c.parent().map(Path::to_path_buf))
            })),
    )
    .map_err(|e| ServeError::Load(format!("--models-dir: {e}")))?;
    tracing::info!(dirs = ?roots.dirs(), "the admin API loads bundles from these directories only");
    let admin = Arc::new(Admin {
        state,
        runtime: options.runtime.clone(),
        batch: options.batch.clone(),
        token,
        state_path,
        watch_interval: a.watch_interval,
        metrics,
        sync: Mutex::new(FileSync::default()),
        loading: Mutex::new(BTreeMap::new()),
        next_load: AtomicU64::new(0),
        pinned: Mutex::new(BTreeSet::new()),
        restored: AtomicBool::new(false),
        index_dir: absolute(&options.index),
        jobs: OnceLock::new(),
        stopping: stop.clone(),
        roots,
    });
    let manager = start_jobs(&admin, options)?;
    let _ = admin.jobs.set(manager);
    let listener = tokio::net::TcpListener::bind(a.addr)
        .await
        .map_err(|source| ServeError::Bind {
            addr: a.addr,
            source,
        })?;
    let local = listener.local_addr()?;
    // A stable line on stderr that scripts and tests read to find the admin port.
    eprintln!("capot: admin listening on http://{local}");
    tracing::info!(%local, state_file = %admin.state_path.display(), "admin API listening");
    let app = router(admin.clone()).layer(DefaultBodyLimit::max(1 << 20));
    let served = tokio::spawn(async move {
        let mut stop = stop;
        let result = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop.wait_for(|s| *s).await;
            })
            .await;
        if let Err(e) = &result {
            tracing::error!("admin listener stopped: {e}");
        }
        result
    });
    Ok((admin, served))
}

/// The absolute form of a path (canonical when it exists): job commands run in their own
/// working directory.
fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    })
}

/// Starts the job manager with the configured runner; its metrics go to `/metrics`.
/// Where alignment jobs write their bundles: `--jobs-encoders-dir`, else `<data-dir>/encoders`
/// (absolute).
fn jobs_encoders_dir(options: &ServeOptions) -> PathBuf {
    options
        .admin
        .jobs
        .encoders_dir
        .as_deref()
        .map(absolute)
        .unwrap_or_else(|| absolute(&options.data_dir).join("encoders"))
}

fn start_jobs(admin: &Arc<Admin>, options: &ServeOptions) -> Result<Arc<JobManager>, ServeError> {
    let j = &options.admin.jobs;
    let binary = std::env::current_exe()
        .map_err(|e| ServeError::Load(format!("cannot find the capot binary for jobs: {e}")))?;
    let runner: Arc<dyn Runner> = match &j.runner {
        JobRunnerKind::Local => Arc::new(LocalRunner {
            nice: j.nice,
            ..LocalRunner::default()
        }),
        JobRunnerKind::Ray { address, binary } => Arc::new(
            RayRunner::new(address, binary.clone())
                .map_err(|e| ServeError::Load(format!("--jobs-ray-address: {e}")))?,
        ),
    };
    let mut env = Vec::new();
    if let Ok(lib) = crate::encoder::runtime::locate_library(options.runtime.library.as_deref()) {
        env.push((
            "ORT_DYLIB_PATH".to_string(),
            absolute(&lib).display().to_string(),
        ));
    }
    std::fs::create_dir_all(&options.data_dir)?;
    let data_dir = absolute(&options.data_dir);
    let config = JobsConfig {
        max_running: j.max_running.max(1),
        requeue_on_restart: j.requeue_on_restart,
        jobs_dir: data_dir.join("jobs"),
        encoders_dir: jobs_encoders_dir(options),
        binary,
        env,
    };
    let metrics = JobMetrics::new().map_err(|e| ServeError::Load(e.to_string()))?;
    admin
        .state
        .metrics
        .register(Box::new(metrics.finished.clone()))
        .and_then(|()| {
            admin
                .state
                .metrics
                .register(Box::new(metrics.current.clone()))
        })
        .map_err(|e| ServeError::Load(e.to_string()))?;
    let host: Arc<dyn EncoderHost> = admin.clone();
    let manager = JobManager::start(config, runner, host, Some(metrics))
        .map_err(|e| ServeError::Load(format!("alignment jobs: {e}")))?;
    tracing::info!(runner = manager.runner_kind(), "alignment jobs ready");
    Ok(manager)
}

/// Generates a random token and writes it to `<data_dir>/admin-token` with mode 0600. The token
/// is never logged; the file's path is.
fn generate_token(data_dir: &Path) -> Result<String, std::io::Error> {
    use std::io::{Read, Write};
    let mut bytes = [0u8; 32];
    let from_os = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    let token = match from_os {
        Ok(()) => hex::encode(bytes),
        Err(_) => format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        ),
    };
    std::fs::create_dir_all(data_dir)?;
    let path = data_dir.join(TOKEN_FILE);
    crate::atomic_file::write_with(&path, crate::atomic_file::Access::Private, |w| {
        w.write_all(token.as_bytes())?;
        w.write_all(b"\n")
    })?;
    eprintln!("capot: admin token written to {}", path.display());
    tracing::info!(path = %path.display(), "generated an admin token");
    Ok(token)
}

impl EncoderHost for Admin {
    fn resolve(&self, name_or_alias: &str) -> Option<(String, PathBuf)> {
        let snap = self.state.registry.snapshot();
        let name = snap
            .aliases
            .get(name_or_alias)
            .cloned()
            .unwrap_or_else(|| name_or_alias.to_string());
        snap.encoders
            .get(&name)
            .map(|e| (name.clone(), absolute(e.encoder().dir())))
    }

    fn name_taken(&self, name: &str) -> bool {
        let snap = self.state.registry.snapshot();
        snap.encoders.contains_key(name) || snap.aliases.contains_key(name)
    }

    fn index_dir(&self) -> PathBuf {
        self.index_dir.clone()
    }

    fn register(&self, name: &str, path: &Path) -> Result<(), String> {
        self.load_and_register(LoadRequest {
            name: Some(name.to_string()),
            path: path.to_path_buf(),
            allow_incompatible: false,
        })
        .map(|_| ())
        .map_err(|e| e.to_string())
    }

    fn promote(&self, alias: &str, encoder: &str) -> Result<Option<String>, String> {
        self.switch_alias(alias, encoder, QueryPipeline::default())
            .map(|v| v["previous"].as_str().map(str::to_string))
            .map_err(|e| e.to_string())
    }
}

impl Admin {
    /// The alignment job manager (set once the admin API started).
    pub fn jobs(&self) -> Option<Arc<JobManager>> {
        self.jobs.get().cloned()
    }

    /// The state file's path.
    pub fn state_path(&self) -> &Path {
        &self.state_path
    }

    /// Called once the index and the `--encoder` flags are loaded (on a blocking thread): pins
    /// the flag encoders, applies the state file (or writes it when there is none yet), and
    /// starts watching it. A state file that cannot be applied is logged and counted; the
    /// service then runs with the flags' state.
    pub fn restore(self: &Arc<Self>) {
        let snapshot = self.state.registry.snapshot();
        *lock(&self.pinned) = snapshot.encoders.keys().cloned().collect();
        match state_file::read_bytes(&self.state_path) {
            Ok(Some(bytes)) => self.apply_and_record(&bytes),
            Ok(None) => {
                let mut sync = lock(&self.sync);
                match state_file::write_atomic(
                    &self.state_path,
                    &StateFile::from_snapshot(&snapshot),
                ) {
                    Ok(hash) => sync.applied = Some(hash),
                    Err(e) => tracing::warn!("cannot write the state file: {e}"),
                }
            }
            Err(e) => {
                tracing::error!("cannot read the state file: {e}");
                self.metrics.reload(false);
            }
        }
        self.metrics
            .publish_aliases(&self.state.registry.snapshot());
        self.restored.store(true, Ordering::Release);
        let weak = Arc::downgrade(self);
        let interval = self.watch_interval;
        let spawned = std::thread::Builder::new()
            .name("capot-state-watch".into())
            .spawn(move || loop {
                std::thread::sleep(interval);
                match weak.upgrade() {
                    Some(admin) => admin.poll_state_file(),
                    None => return,
                }
            });
        if let Err(e) = spawned {
            tracing::error!("cannot start the state file watcher: {e}");
        }
    }

    /// Applies the state file if its content changed since it was last written or applied.
    pub fn poll_state_file(&self) {
        let bytes = match state_file::read_bytes(&self.state_path) {
            Ok(Some(b)) => b,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!("cannot read the state file: {e}");
                return;
            }
        };
        let hash = state_file::content_hash(&bytes);
        {
            let mut sync = lock(&self.sync);
            if sync.applied.as_deref() == Some(hash.as_str()) {
                // Back to what is applied (e.g. a rejected edit was reverted).
                sync.rejected = None;
                sync.last_error = None;
                return;
            }
            if sync.rejected.as_deref() == Some(hash.as_str()) {
                return;
            }
        }
        self.apply_and_record(&bytes);
    }

    fn apply_and_record(&self, bytes: &[u8]) {
        let hash = state_file::content_hash(bytes);
        match self.apply_bytes(bytes, &hash) {
            Ok(Applied::Changed) => {
                tracing::info!(path = %self.state_path.display(), "state file applied");
                self.metrics.reload(true);
            }
            Ok(Applied::Unchanged) => self.metrics.reload(true),
            Ok(Applied::Superseded) => {}
            Err(reason) => {
                tracing::error!(path = %self.state_path.display(), %reason, "state file rejected; the current state is kept");
                eprintln!(
                    "capot: state file {} rejected: {reason}",
                    self.state_path.display()
                );
                self.metrics.reload(false);
                let mut sync = lock(&self.sync);
                sync.rejected = Some(hash);
                sync.last_error = Some(reason);
            }
        }
    }

    /// Applies a state file as a whole: loads what it adds or changes first, then switches
    /// everything at once; on any error nothing changes.
    fn apply_bytes(&self, bytes: &[u8], hash: &str) -> Result<Applied, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "the file is not UTF-8".to_string())?;
        let base = self
            .state_path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let desired = StateFile::parse(text, base)?;
        let pinned = lock(&self.pinned).clone();
        let current = self.state.registry.snapshot();
        let plan = state_file::plan(&current, &desired, &pinned)?;
        if plan.is_empty(&current) {
            let mut sync = lock(&self.sync);
            sync.applied = Some(hash.to_string());
            sync.rejected = None;
            sync.last_error = None;
            return Ok(Applied::Unchanged);
        }
        let mut loaded: BTreeMap<String, LoadedEncoder> = BTreeMap::new();
        for (name, entry) in &plan.load {
            let e = self
                .load(name, &entry.path, entry.allow_incompatible)
                .map_err(|e| format!("encoder {name:?}: {e}"))?;
            loaded.insert(name.clone(), e);
        }
        let mut sync = lock(&self.sync);
        // The file must still say what was loaded for, and the registry must not have moved.
        match state_file::read_bytes(&self.state_path) {
            Ok(Some(b)) if state_file::content_hash(&b) == hash => {}
            _ => return Ok(Applied::Superseded),
        }
        let current = self.state.registry.snapshot();
        let plan = state_file::plan(&current, &desired, &pinned)?;
        if plan.load.keys().any(|n| !loaded.contains_key(n)) {
            return Ok(Applied::Superseded);
        }
        let mut next = Snapshot::clone(&current);
        for name in &plan.unload {
            next.encoders.remove(name);
        }
        for (name, mut e) in loaded {
            if plan.load.contains_key(&name) {
                e.registration.revision = next
                    .encoders
                    .get(&name)
                    .map_or(1, |o| o.registration.revision + 1);
                next.encoders.insert(name, Arc::new(e));
            }
        }
        next.aliases = plan.aliases;
        next.pipelines = plan.pipelines;
        self.publish(&current, next);
        sync.applied = Some(hash.to_string());
        sync.rejected = None;
        sync.last_error = None;
        Ok(Applied::Changed)
    }

    /// Publishes `next` and updates the metrics; the caller holds `sync`.
    fn publish(&self, current: &Snapshot, next: Snapshot) {
        let removed: Vec<Arc<LoadedEncoder>> = current
            .encoders
            .iter()
            .filter(|(n, e)| next.encoders.get(*n).is_none_or(|x| !Arc::ptr_eq(x, e)))
            .map(|(_, e)| e.clone())
            .collect();
        let _ = self.state.registry.update(|s| {
            *s = next;
            Ok::<(), std::convert::Infallible>(())
        });
        let now = self.state.registry.snapshot();
        for e in removed {
            self.forget_metrics(&e, &now);
        }
        self.metrics.publish_aliases(&now);
    }

    /// Drops an encoder's `encoder_info` series unless another loaded encoder shares it.
    fn forget_metrics(&self, e: &LoadedEncoder, now: &Snapshot) {
        let m = e.encoder().manifest();
        let shared = now.encoders.values().any(|o| {
            let om = o.encoder().manifest();
            om.name == m.name && om.version == m.version && om.fingerprint == m.fingerprint
        });
        if !shared {
            let provider = e.encoder().provider().to_string();
            let _ = self.state.metrics.encoder_info.remove_label_values(&[
                m.name.as_str(),
                m.version.as_str(),
                provider.as_str(),
                m.fingerprint.as_str(),
            ]);
        }
    }

    /// Runs `change` on a copy of the registry, writes the state file and publishes the copy,
    /// all under one lock; on any error nothing changes. Counts the swap by result.
    fn commit<T>(
        &self,
        change: impl FnOnce(&mut Snapshot) -> Result<T, AdminError>,
    ) -> Result<T, AdminError> {
        let result = (|| {
            if !self.restored.load(Ordering::Acquire) {
                return Err(AdminError::NotReady("the service is still starting".into()));
            }
            let mut sync = lock(&self.sync);
            let current = self.state.registry.snapshot();
            let mut next = Snapshot::clone(&current);
            let out = change(&mut next)?;
            let hash = state_file::write_atomic(&self.state_path, &StateFile::from_snapshot(&next))
                .map_err(|e| {
                    AdminError::StateFile(format!(
                        "cannot write the state file, nothing changed: {e}"
                    ))
                })?;
            sync.applied = Some(hash);
            sync.rejected = None;
            self.publish(&current, next);
            Ok(out)
        })();
        self.metrics.swap(result.is_ok());
        result
    }

    /// Loads, checks and warms up a bundle without registering it.
    fn load(
        &self,
        name: &str,
        path: &Path,
        allow_incompatible: bool,
    ) -> Result<LoadedEncoder, AdminError> {
        let index = self
            .state
            .index
            .get()
            .cloned()
            .ok_or_else(|| AdminError::NotReady("the index is still loading".into()))?;
        let id = self.next_load.fetch_add(1, Ordering::Relaxed);
        lock(&self.loading).insert(
            id,
            Loading {
                name: name.to_string(),
                path: path.to_path_buf(),
                since: SystemTime::now(),
            },
        );
        let started = Instant::now();
        let result = (|| {
            let mut e = load_encoder(path, &self.runtime, &self.batch, &self.state.metrics)
                .map_err(AdminError::Load)?;
            let m = e.encoder().manifest();
            let im = index.manifest();
            let verdict = if m.dimension != im.dimension {
                // No override can make vectors of another size searchable.
                Err(AdminError::Incompatible(format!(
                    "encoder {} produces {}-dimensional vectors; the index holds {}-dimensional ones",
                    m.label(),
                    m.dimension,
                    im.dimension
                )))
            } else {
                match check_compatible(m, im) {
                    Ok(()) => Ok(()),
                    Err(reason) if allow_incompatible => {
                        tracing::warn!(encoder = name, %reason, "loaded despite incompatibility (allow_incompatible)");
                        e.compatibility_override = Some(format!("allow_incompatible: {reason}"));
                        Ok(())
                    }
                    Err(reason) => Err(AdminError::Incompatible(format!(
                        "{reason}; pass \"allow_incompatible\": true to load it anyway"
                    ))),
                }
            };
            if let Err(err) = verdict {
                self.forget_metrics(&e, &self.state.registry.snapshot());
                return Err(err);
            }
            e.registration = Registration {
                name: Some(name.to_string()),
                revision: 1,
                allow_incompatible,
            };
            Ok(e)
        })();
        lock(&self.loading).remove(&id);
        if result.is_ok() {
            self.metrics
                .load_seconds
                .observe(started.elapsed().as_secs_f64());
        }
        result
    }

    /// `POST /admin/encoders`: loads (or replaces) an encoder. Returns whether it is new.
    fn load_and_register(&self, req: LoadRequest) -> Result<(bool, Value), AdminError> {
        let result = (|| {
            if !self.restored.load(Ordering::Acquire) {
                return Err(AdminError::NotReady("the service is still starting".into()));
            }
            if req.path.as_os_str().is_empty() {
                return Err(AdminError::Invalid(
                    "path: the bundle directory is required".into(),
                ));
            }
            let path = self.roots.check(&req.path).map_err(|r| match r {
                Refusal::Outside(m) => {
                    tracing::warn!(path = %req.path.display(), reason = %m, "refused to load a bundle from outside the model directories");
                    AdminError::Forbidden(m)
                }
                Refusal::Invalid(m) => AdminError::Invalid(m),
            })?;
            let name = match req.name {
                Some(n) => n,
                None => {
                    EncoderManifest::read(&path)
                        .map_err(|e| AdminError::Load(e.to_string()))?
                        .name
                }
            };
            validate_name(&name).map_err(AdminError::Invalid)?;
            if self.state.registry.snapshot().aliases.contains_key(&name) {
                return Err(AdminError::Conflict(format!(
                    "{name:?} is an alias; give the encoder another name"
                )));
            }
            Ok((name, path))
        })();
        let (name, path) = match result {
            Ok(x) => x,
            Err(e) => {
                self.metrics.swap(false);
                return Err(e);
            }
        };
        let e = match self.load(&name, &path, req.allow_incompatible) {
            Ok(e) => e,
            Err(err) => {
                self.metrics.swap(false);
                return Err(err);
            }
        };
        self.commit(move |snap| {
            if snap.aliases.contains_key(&name) {
                return Err(AdminError::Conflict(format!(
                    "{name:?} is an alias; give the encoder another name"
                )));
            }
            let mut e = e;
            e.registration.revision = snap
                .encoders
                .get(&name)
                .map_or(1, |o| o.registration.revision + 1);
            let e = Arc::new(e);
            let created = snap.encoders.insert(name.clone(), e.clone()).is_none();
            Ok((created, admin_view(&e, snap)))
        })
    }

    /// `DELETE /admin/encoders/{name}`.
    fn unload(&self, name: &str) -> Result<Value, AdminError> {
        self.commit(|snap| {
            if !snap.encoders.contains_key(name) {
                return Err(AdminError::NotFound(format!("no encoder named {name:?}")));
            }
            let pointing: Vec<&str> = snap
                .aliases
                .iter()
                .filter(|(_, t)| t.as_str() == name)
                .map(|(a, _)| a.as_str())
                .collect();
            if !pointing.is_empty() {
                return Err(AdminError::Conflict(format!(
                    "alias {} point{} at {name:?}; point {} elsewhere first",
                    pointing.join(", "),
                    if pointing.len() == 1 { "s" } else { "" },
                    if pointing.len() == 1 { "it" } else { "them" }
                )));
            }
            snap.encoders.remove(name);
            Ok(json!({ "unloaded": name }))
        })
    }

    /// `PUT /admin/aliases/{alias}`: returns the previous target. The alias's query pipeline
    /// changes in the same snapshot as its target: fields of `pipeline` that are set replace
    /// the alias's, unset ones keep it.
    fn switch_alias(
        &self,
        alias: &str,
        encoder: &str,
        pipeline: QueryPipeline,
    ) -> Result<Value, AdminError> {
        let started = Instant::now();
        let (previous, now) = self.commit(|snap| {
            validate_name(alias)
                .map_err(|e| AdminError::Invalid(e.replace("encoder name", "alias name")))?;
            if !snap.encoders.contains_key(encoder) {
                let hint = if snap.aliases.contains_key(encoder) {
                    " (aliases point at encoders, not at aliases)"
                } else {
                    ""
                };
                return Err(AdminError::NotFound(format!(
                    "no encoder named {encoder:?}{hint}"
                )));
            }
            if snap.encoders.contains_key(alias) {
                return Err(AdminError::Conflict(format!(
                    "{alias:?} is an encoder's name; an alias needs another"
                )));
            }
            let previous = snap.aliases.insert(alias.to_string(), encoder.to_string());
            let mut p = snap.pipelines.get(alias).copied().unwrap_or_default();
            p.repair = pipeline.repair.or(p.repair);
            p.fusion = pipeline.fusion.or(p.fusion);
            if p.is_empty() {
                snap.pipelines.remove(alias);
            } else {
                snap.pipelines.insert(alias.to_string(), p);
            }
            Ok((previous, p))
        })?;
        Ok(json!({
            "alias": alias,
            "encoder": encoder,
            "pipeline": now,
            "previous": previous,
            "switch_ms": started.elapsed().as_secs_f64() * 1e3,
        }))
    }

    /// `DELETE /admin/aliases/{alias}` (never `default`).
    fn remove_alias(&self, alias: &str) -> Result<Value, AdminError> {
        self.commit(|snap| {
            if alias == DEFAULT_ALIAS {
                return Err(AdminError::Conflict(
                    "the alias default cannot be removed; point it elsewhere".into(),
                ));
            }
            snap.pipelines.remove(alias);
            match snap.aliases.remove(alias) {
                Some(t) => Ok(json!({ "removed": alias, "previous": t })),
                None => Err(AdminError::NotFound(format!("no alias named {alias:?}"))),
            }
        })
    }
}

/// An encoder as the admin API shows it: the `/info` view plus state, revision, path,
/// aliases pointing at it and provenance.
fn admin_view(e: &LoadedEncoder, snap: &Snapshot) -> Value {
    let mut v = encoder_view(e);
    let m = e.encoder().manifest();
    let aliases: Vec<&String> = snap
        .aliases
        .iter()
        .filter(|(_, t)| t.as_str() == e.name())
        .map(|(a, _)| a)
        .collect();
    if let Value::Object(o) = &mut v {
        o.insert("state".into(), json!("ready"));
        o.insert("revision".into(), json!(e.registration.revision));
        o.insert("path".into(), json!(e.encoder().dir()));
        o.insert("bundle_name".into(), json!(m.name));
        o.insert(
            "allow_incompatible".into(),
            json!(e.registration.allow_incompatible),
        );
        o.insert("aliases".into(), json!(aliases));
        o.insert(
            "provenance".into(),
            serde_json::to_value(&m.provenance).unwrap_or(Value::Null),
        );
    }
    v
}

/// The admin router; every route requires the bearer token.
pub fn router(admin: Arc<Admin>) -> Router {
    Router::new()
        .route("/admin/encoders", get(list_encoders).post(post_encoder))
        .route(
            "/admin/encoders/{name}",
            axum::routing::delete(delete_encoder),
        )
        .route("/admin/aliases", get(list_aliases))
        .route(
            "/admin/aliases/{alias}",
            axum::routing::put(put_alias).delete(delete_alias),
        )
        .route("/admin/state", get(get_state))
        .route(
            "/admin/jobs",
            get(super::admin_jobs::list).post(super::admin_jobs::create),
        )
        .route("/admin/jobs/{id}", get(super::admin_jobs::show))
        .route("/admin/jobs/{id}/events", get(super::admin_jobs::events))
        .route(
            "/admin/jobs/{id}/cancel",
            axum::routing::post(super::admin_jobs::cancel),
        )
        .fallback(|| async { ApiError::not_found("not_found", "no such admin route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "method not allowed on this route",
            )
        })
        .layer(axum::middleware::from_fn_with_state(
            admin.clone(),
            require_token,
        ))
        .with_state(admin)
}

/// `Authorization: Bearer <token>` on every admin call; 401 otherwise, before anything runs.
async fn require_token(State(admin): State<Arc<Admin>>, req: Request, next: Next) -> Response {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if !given.is_some_and(|g| constant_time_eq(g.as_bytes(), admin.token.as_bytes())) {
        let mut resp = ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or wrong admin token (Authorization: Bearer <token>)",
        )
        .into_response();
        resp.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return resp;
    }
    next.run(req).await
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

async fn list_encoders(State(admin): State<Arc<Admin>>) -> Json<Value> {
    let snap = admin.state.registry.snapshot();
    let mut list: Vec<Value> = snap
        .encoders
        .values()
        .map(|e| admin_view(e, &snap))
        .collect();
    for l in lock(&admin.loading).values() {
        let secs = l
            .since
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        list.push(json!({
            "name": l.name,
            "state": "loading",
            "path": l.path,
            "since": crate::clock::rfc3339_from_unix(secs),
        }));
    }
    Json(json!({ "encoders": list }))
}

/// `POST /admin/encoders` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadRequest {
    /// Name to register it under (default: the bundle manifest's name).
    #[serde(default)]
    name: Option<String>,
    /// The bundle directory, as the server sees it.
    path: PathBuf,
    #[serde(default)]
    allow_incompatible: bool,
}

async fn post_encoder(
    State(admin): State<Arc<Admin>>,
    JsonBody(req): JsonBody<LoadRequest>,
) -> Result<Response, ApiError> {
    let (created, view) = blocking(move || admin.load_and_register(req)).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(json!({ "encoder": view, "replaced": !created })),
    )
        .into_response())
}

async fn delete_encoder(
    State(admin): State<Arc<Admin>>,
    UrlPath(name): UrlPath<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(blocking(move || admin.unload(&name)).await?))
}

async fn list_aliases(State(admin): State<Arc<Admin>>) -> Json<Value> {
    let snap = admin.state.registry.snapshot();
    Json(json!({ "aliases": snap.aliases, "pipelines": snap.pipelines }))
}

/// `PUT /admin/aliases/{alias}` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AliasRequest {
    encoder: String,
    /// Query repair for requests through this alias: off, on, auto.
    #[serde(default)]
    repair: Option<RepairMode>,
    /// What a repaired query searches with: repaired, max.
    #[serde(default)]
    fusion: Option<RepairFusion>,
}

async fn put_alias(
    State(admin): State<Arc<Admin>>,
    UrlPath(alias): UrlPath<String>,
    JsonBody(req): JsonBody<AliasRequest>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(
        blocking(move || {
            let pipeline = QueryPipeline {
                repair: req.repair,
                fusion: req.fusion,
            };
            admin.switch_alias(&alias, &req.encoder, pipeline)
        })
        .await?,
    ))
}

async fn delete_alias(
    State(admin): State<Arc<Admin>>,
    UrlPath(alias): UrlPath<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(blocking(move || admin.remove_alias(&alias)).await?))
}

async fn get_state(State(admin): State<Arc<Admin>>) -> Json<Value> {
    let snap = admin.state.registry.snapshot();
    let sync = lock(&admin.sync);
    Json(json!({
        "path": admin.state_path,
        "state": StateFile::from_snapshot(&snap),
        "pinned": *lock(&admin.pinned),
        "last_error": sync.last_error,
    }))
}
