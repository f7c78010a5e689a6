//! Starting the admin side: the listener, the alignment job manager, the admin token.

use super::*;

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
