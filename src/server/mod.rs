//! The transports: HTTP (axum) and gRPC (tonic) over the [`query`](crate::query) pipeline, the
//! admin listener, start-up and graceful shutdown.

pub mod admin;
pub mod error;
pub mod grpc;
pub mod http;
pub mod model_roots;
pub mod openapi;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use axum::extract::DefaultBodyLimit;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::encoder::{Encoder, EncoderManifest, RuntimeOptions};
use crate::index::Index;
use crate::query::metrics::Metrics;
use crate::query::{AppState, Limits, RepairDefaults};
use crate::registry::batcher::{self, BatchConfig, Batcher};
use crate::registry::{LoadedEncoder, DEFAULT_ALIAS};
use crate::repair::{Lexicon, Repairer};

/// Everything `capot serve` needs, after flags, environment and config file are merged.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The embedded index (unused when `store` is set).
    pub index: PathBuf,
    /// A PostgreSQL store searched and written instead of the embedded index (`--store`).
    pub store: Option<StoreOptions>,
    pub encoders: Vec<PathBuf>,
    /// The index's document encoder for writes, when no search encoder is it.
    pub document_encoder: Option<PathBuf>,
    pub addr: SocketAddr,
    /// gRPC listen address; `None` serves no gRPC.
    pub grpc_addr: Option<SocketAddr>,
    pub data_dir: PathBuf,
    pub api_key: Option<String>,
    pub runtime: RuntimeOptions,
    pub batch: BatchConfig,
    pub limits: Limits,
    /// Longest wait for in-flight requests at shutdown.
    pub drain_timeout: Duration,
    /// Admin API, state file and query router.
    pub admin: admin::AdminOptions,
    /// Query repair when neither a request nor its alias says otherwise.
    pub repair: RepairDefaults,
    /// Word lists of the language prior (none: repair without one, `auto` skips).
    pub lexicons: Vec<PathBuf>,
}

/// The PostgreSQL store to serve from (`--store`), its streaming replicas and pool options.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub primary: crate::store::postgres::PgLocation,
    pub replicas: Vec<crate::store::postgres::PgLocation>,
    pub pool: crate::store::postgres::PoolOptions,
    /// The columns of a table another pipeline filled (`--store-columns`): attach to it with
    /// the document encoder's identity instead of reading a capot record.
    pub columns: Option<crate::store::postgres::Columns>,
}

/// Errors that stop the service from starting.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Load(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Why an encoder's vectors do not fit an index.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Incompatible {
    /// Vectors of another size: nothing makes them searchable.
    #[error("encoder {encoder} produces {produces}-dimensional vectors; the index holds {holds}-dimensional ones")]
    Dimension {
        encoder: String,
        produces: usize,
        holds: usize,
    },
    /// Neither the index's document encoder nor aligned to it: searchable, but its vectors
    /// mean something else (an operator may load it anyway, `allow_incompatible`).
    #[error("encoder {encoder} (fingerprint {fingerprint}, aligned to {aligned_to}) is neither the index's document encoder nor aligned to it ({index})")]
    Unaligned {
        encoder: String,
        fingerprint: String,
        aligned_to: String,
        index: String,
    },
}

/// Checks that an encoder's vectors fit the index: same dimension, and either the index's own
/// document encoder or aligned to it.
pub fn check_compatible(
    encoder: &EncoderManifest,
    fingerprint: &str,
    dimension: usize,
) -> Result<(), Incompatible> {
    if encoder.dimension != dimension {
        return Err(Incompatible::Dimension {
            encoder: encoder.label(),
            produces: encoder.dimension,
            holds: dimension,
        });
    }
    if encoder.fingerprint != fingerprint && encoder.aligned_to != fingerprint {
        return Err(Incompatible::Unaligned {
            encoder: encoder.label(),
            fingerprint: encoder.fingerprint.clone(),
            aligned_to: encoder.aligned_to.clone(),
            index: fingerprint.to_string(),
        });
    }
    Ok(())
}

/// Loads a bundle (one session per batch worker), warms it up and starts its batching workers.
pub fn load_encoder(
    path: &std::path::Path,
    runtime: &RuntimeOptions,
    batch: &BatchConfig,
    metrics: &Arc<Metrics>,
) -> Result<LoadedEncoder, String> {
    let started = Instant::now();
    let load = || {
        Encoder::load(path, runtime)
            .map(Arc::new)
            .map_err(|e| format!("{}: {e}", path.display()))
    };
    let encoder = load()?;
    let mut sessions = vec![encoder.clone()];
    for _ in 1..batch.workers.max(1) {
        sessions.push(load()?);
    }
    let m = encoder.manifest();
    metrics
        .encoder_info
        .with_label_values(&[
            m.name.as_str(),
            m.version.as_str(),
            &encoder.provider().to_string(),
            m.fingerprint.as_str(),
        ])
        .set(1.0);
    let observer: Arc<dyn batcher::BatchObserver> = metrics.clone();
    let batcher = Batcher::start(sessions, batch.clone(), observer).map_err(|e| e.to_string())?;
    Ok(LoadedEncoder {
        batcher,
        loaded_at: SystemTime::now(),
        load_seconds: started.elapsed().as_secs_f64(),
        compatibility_override: None,
        registration: Default::default(),
    })
}

/// Directory of the live corpus's write-ahead log under `--data-dir`.
pub const LIVE_DIR: &str = "corpus";

/// Loads the index and encoders into `state` (the caller marks it ready).
fn load_all(state: &AppState, options: &ServeOptions) -> Result<(), String> {
    if let Some(store) = &options.store {
        return load_store(state, options, store);
    }
    let started = Instant::now();
    // The index as built, or the newest version a compaction made of it and the live corpus.
    let live_dir = options.data_dir.join(LIVE_DIR);
    let (served, identity) = crate::live::version::open_served(&options.index, &live_dir)
        .map_err(|e| format!("cannot load index {}: {e}", options.index.display()))?;
    let index = Arc::new(served.index);
    state.metrics.index_documents.set(index.len() as i64);
    state.metrics.corpus_version.set(served.version as i64);
    let repairer = load_repairer(&index, &options.lexicons)?;
    let m = index.manifest();
    load_encoders(
        state,
        options,
        &m.encoder_fingerprint,
        &m.encoder_name,
        m.dimension,
    )?;
    let live = crate::live::LiveCorpus::open(
        &live_dir,
        &identity,
        &index,
        served.covers,
        state.limits.max_live_documents,
    )
    .map_err(|e| format!("cannot open the live corpus: {e}"))?;
    state.metrics.set_corpus(&live.stats());
    state.set_corpus(Arc::new(crate::query::state::Corpus::new(
        index,
        Arc::new(live),
        repairer,
        served.version,
        served.metadata,
        live_dir,
        identity,
    )));
    tracing::info!(
        seconds = started.elapsed().as_secs_f64(),
        "index and encoders loaded"
    );
    Ok(())
}

/// Loads the encoders (`--encoder`, `--document-encoder`) for a corpus whose vectors come from
/// the document encoder `fingerprint`: each must be it or aligned to it; the first is `default`.
fn load_encoders(
    state: &AppState,
    options: &ServeOptions,
    fingerprint: &str,
    name: &str,
    dimension: usize,
) -> Result<(), String> {
    let mut loaded = Vec::new();
    for path in &options.encoders {
        let e = load_encoder(path, &options.runtime, &options.batch, &state.metrics)?;
        check_compatible(e.encoder().manifest(), fingerprint, dimension)
            .map_err(|reason| format!("{}: {reason}", path.display()))?;
        loaded.push(e);
    }
    if let Some(path) = &options.document_encoder {
        let e = load_encoder(path, &options.runtime, &options.batch, &state.metrics)?;
        let got = &e.encoder().manifest().fingerprint;
        if got != fingerprint {
            return Err(format!(
                "--document-encoder {}: its fingerprint {got} is not the index's document encoder ({fingerprint}, {name})",
                path.display(),
            ));
        }
        let _ = state.document_encoder.set(Arc::new(e));
    }
    let first = loaded
        .first()
        .map(|e| e.name().to_string())
        .ok_or("at least one --encoder is required")?;
    state.registry.update(|snap| {
        for e in loaded {
            let name = e.name().to_string();
            if snap.encoders.contains_key(&name) {
                return Err(format!(
                    "two encoders are named {name:?}; give them distinct names"
                ));
            }
            snap.encoders.insert(name, Arc::new(e));
        }
        snap.aliases
            .insert(DEFAULT_ALIAS.to_string(), first.clone());
        Ok(())
    })
}

/// Connects to the PostgreSQL store (retrying while the database does not answer: the service
/// is live, not ready), loads the encoders its vectors fit and watches the database's health.
fn load_store(
    state: &AppState,
    options: &ServeOptions,
    store_options: &StoreOptions,
) -> Result<(), String> {
    let location = &store_options.primary;
    use crate::store::{DocumentStore, StoreError};
    let started = Instant::now();
    let runtime = tokio::runtime::Handle::current();
    let attach = match &store_options.columns {
        Some(columns) => {
            let path = options.document_encoder.as_ref().ok_or_else(|| {
                "--store-columns needs --document-encoder: the encoder that made the table's vectors"
                    .to_string()
            })?;
            let m = crate::encoder::manifest::EncoderManifest::read(path)
                .map_err(|e| format!("--document-encoder {}: {e}", path.display()))?;
            Some(crate::store::postgres::Attach {
                columns: columns.clone(),
                encoder_fingerprint: m.fingerprint.clone(),
                encoder_name: m.label(),
                dimension: m.dimension,
                ef_search: 64,
            })
        }
        None => None,
    };
    let store = loop {
        let opened = match &attach {
            Some(a) => runtime.block_on(crate::store::postgres::PgStore::attach(
                location.clone(),
                store_options.pool,
                &store_options.replicas,
                a.clone(),
            )),
            None => runtime.block_on(crate::store::postgres::PgStore::open(
                location.clone(),
                store_options.pool,
                &store_options.replicas,
            )),
        };
        match opened {
            Ok(s) => break s,
            Err(StoreError::Unavailable(why)) => {
                // A service told to stop while it waits stops waiting (and then exits).
                if state.draining.load(Ordering::Acquire) {
                    return Err(format!("stopped while waiting for {location}: {why}"));
                }
                tracing::warn!(store = %location, reason = %why, "waiting for the document store");
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(e) => return Err(format!("cannot serve {location}: {e}")),
        }
    };
    let info = store.info();
    load_encoders(
        state,
        options,
        &info.encoder_fingerprint,
        &info.encoder_name,
        info.dimension,
    )?;
    let _watch = {
        let _entered = runtime.enter();
        store.watch_health(Duration::from_secs(1))
    };
    if let Ok(n) = runtime.block_on(store.count()) {
        state.metrics.index_documents.set(n as i64);
    }
    let lexicon = load_lexicon(&options.lexicons)?;
    let dir = crate::store::vocab::vocab_dir(&options.data_dir, &location.table);
    let speller = crate::query::state::StoreSpeller::open(dir.clone(), lexicon)
        .map_err(|e| format!("cannot load the store's vocabulary: {e}"))?;
    match speller.record() {
        Some(v) => {
            tracing::info!(words = v.info.words, built_at = %v.built_at, "query repair ready")
        }
        None => tracing::warn!(
            dir = %dir.display(),
            "the store has no vocabulary: query repair is off (build one with `capot index vocab --store` or POST /admin/index/vocab)"
        ),
    }
    let _ = state.store_speller.set(Arc::new(speller));
    let _ = state.store.set(Arc::new(store));
    tracing::info!(
        store = %location,
        seconds = started.elapsed().as_secs_f64(),
        "document store and encoders loaded"
    );
    Ok(())
}

/// Logs a failed HTTP response: a 503 is the service saying what it is doing (loading, draining,
/// over its time limit) — expected while `/ready` is polled during a start — and is logged at
/// DEBUG, counted by `capot_request_failures_total`; other 5xx and transport failures are errors.
fn log_failure(
    class: tower_http::classify::ServerErrorsFailureClass,
    latency: std::time::Duration,
    _span: &tracing::Span,
) {
    use tower_http::classify::ServerErrorsFailureClass;
    let ms = latency.as_secs_f64() * 1e3;
    match class {
        ServerErrorsFailureClass::StatusCode(s)
            if s == axum::http::StatusCode::SERVICE_UNAVAILABLE =>
        {
            tracing::debug!(status = s.as_u16(), latency_ms = ms, "service unavailable")
        }
        other => tracing::error!(classification = %other, latency_ms = ms, "response failed"),
    }
}

/// The index's query repairer with the language prior, `None` when the index has no
/// vocabulary. What is missing is logged: repair degrades, serving does not.
/// The word lists of `--lexicon` (none given: none).
fn load_lexicon(lexicons: &[PathBuf]) -> Result<Option<Arc<Lexicon>>, String> {
    if lexicons.is_empty() {
        return Ok(None);
    }
    Ok(Some(Arc::new(
        Lexicon::load(lexicons).map_err(|e| e.to_string())?,
    )))
}

fn load_repairer(index: &Index, lexicons: &[PathBuf]) -> Result<Option<Arc<Repairer>>, String> {
    let lexicon = load_lexicon(lexicons)?;
    let Some(vocab) = index.vocab() else {
        tracing::warn!(
            "the index has no vocabulary: query repair is off (add one with `capot index vocab {}`)",
            index.dir().display()
        );
        return Ok(None);
    };
    match &lexicon {
        Some(l) => tracing::info!(
            words = vocab.info().words,
            lexicon_words = l.len(),
            "query repair ready"
        ),
        None => tracing::warn!(
            words = vocab.info().words,
            "query repair has no lexicon: `on` repairs from the corpus alone, `auto` skips"
        ),
    }
    let repairer = Repairer::new(vocab.clone(), lexicon);
    for missing in repairer.model_info().missing {
        tracing::warn!("query repair: {missing}");
    }
    Ok(Some(Arc::new(repairer)))
}

/// Runs the service until SIGTERM or SIGINT, then drains in-flight requests.
pub async fn serve(options: ServeOptions) -> Result<(), ServeError> {
    std::fs::create_dir_all(&options.data_dir)?;
    let metrics = Arc::new(Metrics::new().map_err(|e| ServeError::Load(e.to_string()))?);
    let mut state = AppState::new(metrics, options.limits.clone(), options.api_key.clone());
    state.repair_defaults = options.repair;
    let state = Arc::new(state);

    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|source| ServeError::Bind {
            addr: options.addr,
            source,
        })?;
    let local = listener.local_addr()?;
    // A stable line on stderr that scripts and tests read to find the port.
    eprintln!("capot: listening on http://{local}");
    tracing::info!(%local, "HTTP listening");
    // Both listeners (and gRPC) drain when this turns true; `finish` below waits for all.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (admin, admin_server) = admin::start(state.clone(), &options, stop_rx.clone()).await?;
    let grpc_listener = match options.grpc_addr {
        Some(addr) => {
            let l = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|source| ServeError::Bind { addr, source })?;
            let local = l.local_addr()?;
            // Stable, like the HTTP line: scripts and tests read the gRPC port from it.
            eprintln!("capot: grpc listening on {local}");
            tracing::info!(%local, "gRPC listening");
            Some(l)
        }
        None => None,
    };

    // Load in the background: /health answers at once, /ready once loading is done.
    let (load_tx, load_rx) = tokio::sync::oneshot::channel::<Result<(), String>>();
    {
        let state = state.clone();
        let options = options.clone();
        tokio::task::spawn_blocking(move || {
            // The state file is restored before the service reports ready.
            let loaded = load_all(&state, &options).map(|()| {
                admin.restore();
                state.ready.store(true, Ordering::Release);
                tracing::info!("ready");
            });
            let _ = load_tx.send(loaded);
        });
    }

    let app = http::router(state.clone())
        .layer(DefaultBodyLimit::max(options.limits.max_body_bytes))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(
            TraceLayer::new_for_http().make_span_with(|req: &axum::http::Request<_>| {
                let id = req
                    .headers()
                    .get("x-request-id")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-");
                tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), request_id = %id)
            })
            .on_failure(log_failure),
        )
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid));

    let shutdown_state = state.clone();
    // gRPC and the admin listener stop with HTTP; `finish` below waits for all three.
    let grpc_server =
        grpc_listener.map(|l| tokio::spawn(grpc::serve(l, state.clone(), stop_rx.clone())));
    let server = axum::serve(listener, app).with_graceful_shutdown(async move {
        let mut rx = stop_rx;
        let _ = rx.wait_for(|stop| *stop).await;
    });
    let server = tokio::spawn(async move {
        let http = server.await;
        match admin_server.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(e) => {
                return Err(std::io::Error::other(format!(
                    "admin listener task failed: {e}"
                )))
            }
        }
        if let Some(g) = grpc_server {
            match g.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(std::io::Error::other(e)),
                Err(e) => {
                    return Err(std::io::Error::other(format!(
                        "gRPC server task failed: {e}"
                    )))
                }
            }
        }
        http
    });

    // A failed load stops the service with the reason.
    let load_failure = tokio::select! {
        r = load_rx => match r {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(_) => Some("loading task ended unexpectedly".to_string()),
        },
        _ = shutdown_signal() => {
            shutdown_state.draining.store(true, Ordering::Release);
            let _ = stop_tx.send(true);
            return finish(server, options.drain_timeout).await;
        }
    };
    if let Some(e) = load_failure {
        let _ = stop_tx.send(true);
        let _ = finish(server, options.drain_timeout).await;
        return Err(ServeError::Load(e));
    }

    shutdown_signal().await;
    tracing::info!("shutdown signal received; draining in-flight requests");
    shutdown_state.draining.store(true, Ordering::Release);
    let _ = stop_tx.send(true);
    finish(server, options.drain_timeout).await
}

async fn finish(
    server: tokio::task::JoinHandle<Result<(), std::io::Error>>,
    drain_timeout: Duration,
) -> Result<(), ServeError> {
    match tokio::time::timeout(drain_timeout, server).await {
        Ok(Ok(Ok(()))) => {
            eprintln!("capot: stopped");
            Ok(())
        }
        Ok(Ok(Err(e))) => Err(ServeError::Io(e)),
        Ok(Err(e)) => Err(ServeError::Load(format!("server task failed: {e}"))),
        Err(_) => {
            tracing::warn!(
                "in-flight requests did not finish within {drain_timeout:?}; stopping anyway"
            );
            Ok(())
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
