//! `capot serve` settings of the admin API, the registry state file, the query router and the
//! alignment jobs.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;

use capot::registry::router::RouterConfig;
use capot::server::admin::{AdminOptions, JobRunnerKind, JobsOptions, DEFAULT_ADMIN_ADDR};

/// Admin API, state file and router flags of `capot serve`.
#[derive(Debug, Args)]
pub struct AdminArgs {
    /// Admin API listen address [default: 127.0.0.1:8081].
    #[arg(long, env = "CAPOT_ADMIN_ADDR")]
    pub admin_addr: Option<SocketAddr>,
    /// File holding the admin bearer token (first line). Without it, $CAPOT_ADMIN_TOKEN; without
    /// either, a random token is written to <data-dir>/admin-token (mode 0600).
    #[arg(long, env = "CAPOT_ADMIN_TOKEN_FILE", value_name = "FILE")]
    pub admin_token_file: Option<PathBuf>,
    /// Registry state file (encoders and aliases), written by the admin API, restored at start
    /// and watched for changes [default: <data-dir>/state.json].
    #[arg(long, env = "CAPOT_STATE_FILE", value_name = "FILE")]
    pub state_file: Option<PathBuf>,
    /// Milliseconds between checks of the state file for changes [default: 1000].
    #[arg(long, env = "CAPOT_STATE_POLL_MS")]
    pub state_poll_ms: Option<u64>,
    /// Query router for requests that name no encoder: `typo` sends queries that look
    /// misspelt to the alias `typo` (when it exists), the others to `default`.
    #[arg(long, env = "CAPOT_ROUTER")]
    pub router: Option<String>,
    /// Share of a query's words the router must find shattered to call it noisy [default: 0.15].
    #[arg(long, env = "CAPOT_ROUTER_THRESHOLD")]
    pub router_threshold: Option<f64>,
    /// Where alignment jobs run: `local` (child processes) or `ray` (a Ray cluster's job API,
    /// see --jobs-ray-address) [default: local].
    #[arg(long, env = "CAPOT_JOBS_RUNNER", value_name = "local|ray")]
    pub jobs_runner: Option<String>,
    /// Alignment jobs running at once; the rest wait in the queue [default: 1].
    #[arg(long, env = "CAPOT_JOBS_MAX_RUNNING", value_name = "N")]
    pub jobs_max_running: Option<usize>,
    /// Re-queue jobs that were running when the server stopped (they resume from their
    /// checkpoint) instead of marking them failed.
    #[arg(long, env = "CAPOT_JOBS_REQUEUE_ON_RESTART")]
    pub jobs_requeue_on_restart: bool,
    /// Niceness of local job processes, 0-19 [default: 10].
    #[arg(long, env = "CAPOT_JOBS_NICE", value_name = "N")]
    pub jobs_nice: Option<i32>,
    /// Directory for the encoders jobs make [default: <data-dir>/encoders].
    #[arg(long, env = "CAPOT_JOBS_ENCODERS_DIR", value_name = "DIR")]
    pub jobs_encoders_dir: Option<PathBuf>,
    /// Directory the admin API may load encoder bundles from (repeatable; comma-separated in
    /// $CAPOT_MODELS_DIR). Besides these, only the jobs' encoders directory and the directories
    /// of the --encoder bundles: paths elsewhere, `..` and symlinks out are refused (403).
    #[arg(
        long = "models-dir",
        env = "CAPOT_MODELS_DIR",
        value_name = "DIR",
        value_delimiter = ','
    )]
    pub models_dir: Vec<PathBuf>,
    /// Ray job API of the cluster for `--jobs-runner ray` (e.g. http://127.0.0.1:8265).
    #[arg(long, env = "CAPOT_JOBS_RAY_ADDRESS", value_name = "URL")]
    pub jobs_ray_address: Option<String>,
    /// The capot binary as the Ray cluster's nodes see it [default: this server's own path].
    #[arg(long, env = "CAPOT_JOBS_RAY_BINARY", value_name = "PATH")]
    pub jobs_ray_binary: Option<PathBuf>,
}

/// The config-file keys of the same settings (paths already resolved against the file's
/// directory).
#[derive(Debug, Default)]
pub struct AdminFileKeys {
    pub admin_addr: Option<SocketAddr>,
    pub admin_token_file: Option<PathBuf>,
    pub state_file: Option<PathBuf>,
    pub state_poll_ms: Option<u64>,
    pub router: Option<String>,
    pub router_threshold: Option<f64>,
    pub jobs_runner: Option<String>,
    pub jobs_max_running: Option<usize>,
    pub jobs_requeue_on_restart: Option<bool>,
    pub jobs_nice: Option<i32>,
    pub jobs_encoders_dir: Option<PathBuf>,
    pub jobs_ray_address: Option<String>,
    pub jobs_ray_binary: Option<PathBuf>,
    pub models_dir: Vec<PathBuf>,
}

/// The jobs settings from flags and file.
fn jobs_options(args: &AdminArgs, file: &AdminFileKeys) -> anyhow::Result<JobsOptions> {
    let defaults = JobsOptions::default();
    let address = args
        .jobs_ray_address
        .clone()
        .or(file.jobs_ray_address.clone());
    let runner = match args
        .jobs_runner
        .clone()
        .or(file.jobs_runner.clone())
        .as_deref()
        .map(str::trim)
    {
        None | Some("local") => JobRunnerKind::Local,
        Some("ray") => JobRunnerKind::Ray {
            address: address
                .context("--jobs-runner ray needs --jobs-ray-address (the Ray job API URL)")?,
            binary: args
                .jobs_ray_binary
                .clone()
                .or(file.jobs_ray_binary.clone()),
        },
        Some(other) => bail!("--jobs-runner: unknown runner {other:?}; use local or ray"),
    };
    let max_running = args
        .jobs_max_running
        .or(file.jobs_max_running)
        .unwrap_or(defaults.max_running);
    if max_running == 0 {
        bail!("--jobs-max-running must be at least 1");
    }
    let nice = args.jobs_nice.or(file.jobs_nice).unwrap_or(defaults.nice);
    if !(0..=19).contains(&nice) {
        bail!("--jobs-nice must be between 0 and 19");
    }
    Ok(JobsOptions {
        runner,
        max_running,
        requeue_on_restart: args.jobs_requeue_on_restart
            || file.jobs_requeue_on_restart.unwrap_or(false),
        nice,
        encoders_dir: args
            .jobs_encoders_dir
            .clone()
            .or(file.jobs_encoders_dir.clone()),
    })
}

fn read_token(path: &PathBuf) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read admin token file {}", path.display()))?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.is_empty() {
        bail!("admin token file {} is empty", path.display());
    }
    Ok(token)
}

/// Merges flags, environment and config file: a flag or variable wins over the file.
pub fn options(args: AdminArgs, file: AdminFileKeys) -> anyhow::Result<AdminOptions> {
    let jobs = jobs_options(&args, &file)?;
    let env_token = std::env::var("CAPOT_ADMIN_TOKEN").ok();
    let token = match (args.admin_token_file, env_token, file.admin_token_file) {
        (Some(path), _, _) => Some(read_token(&path)?),
        (None, Some(t), _) => {
            let t = t.trim().to_string();
            if t.is_empty() {
                bail!("CAPOT_ADMIN_TOKEN is empty");
            }
            Some(t)
        }
        (None, None, Some(path)) => Some(read_token(&path)?),
        (None, None, None) => None,
    };
    let router = match args.router.or(file.router) {
        Some(kind) => Some(
            RouterConfig::from_kind(&kind, args.router_threshold.or(file.router_threshold))
                .map_err(anyhow::Error::msg)?,
        ),
        None => None,
    };
    let poll = args.state_poll_ms.or(file.state_poll_ms).unwrap_or(1000);
    if poll == 0 {
        bail!("--state-poll-ms must be at least 1");
    }
    Ok(AdminOptions {
        addr: args
            .admin_addr
            .or(file.admin_addr)
            .unwrap_or_else(|| SocketAddr::from(DEFAULT_ADMIN_ADDR)),
        token,
        state_file: args.state_file.or(file.state_file),
        watch_interval: Duration::from_millis(poll),
        router,
        jobs,
        models_dirs: if args.models_dir.is_empty() {
            file.models_dir
        } else {
            args.models_dir
        },
    })
}
