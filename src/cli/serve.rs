//! `capot serve`: flags, environment variables (`CAPOT_*`) and a TOML config file with the same
//! keys; a flag or variable wins over the file, the file over the defaults.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use serde::Deserialize;

use capot::query::{Limits, RepairDefaults};
use capot::registry::batcher::BatchConfig;
use capot::repair::{RepairFusion, RepairMode};
use capot::server::{serve, ServeOptions};

use super::{DeviceArgs, GlobalArgs, LexiconArgs};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// TOML file with any of the settings below (keys as the flags, with underscores).
    #[arg(long, env = "CAPOT_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Index directory (from `capot index build`).
    #[arg(
        long,
        env = "CAPOT_INDEX",
        value_name = "DIR",
        conflicts_with = "store"
    )]
    pub index: Option<PathBuf>,
    /// Serve from PostgreSQL + pgvector instead of an index directory:
    /// `postgres://USER@HOST:PORT/DB?table=NAME` (loaded by `capot index build --store`). The
    /// password comes from the URL, `PGPASSWORD` or --store-password-file.
    #[arg(long, env = "CAPOT_STORE", value_name = "URL", hide_env_values = true)]
    pub store: Option<String>,
    /// A streaming replica of the --store database that searches may be served by
    /// (`postgres://USER@HOST:PORT/DB?table=NAME`, same table); repeat for several. Searches go
    /// to healthy replicas in turn, to the primary when none can serve.
    #[arg(
        long = "store-replica",
        env = "CAPOT_STORE_REPLICAS",
        value_delimiter = ',',
        value_name = "URL",
        hide_env_values = true
    )]
    pub store_replicas: Vec<String>,
    /// File holding the store's password (first line).
    #[arg(long, env = "CAPOT_STORE_PASSWORD_FILE", value_name = "FILE")]
    pub store_password_file: Option<PathBuf>,
    /// Connections to the store at most [default: 16].
    #[arg(long, env = "CAPOT_STORE_MAX_CONNECTIONS", value_name = "N")]
    pub store_max_connections: Option<usize>,
    /// Attach to a table another pipeline filled instead of one `capot index build --store`
    /// loaded: `id=COL,embedding=COL,text=COL[,title=COL][,metadata=COL]`. Needs
    /// --document-encoder (the encoder that made the table's vectors); capot only searches it.
    #[arg(
        long,
        env = "CAPOT_STORE_COLUMNS",
        value_name = "SPEC",
        requires = "store"
    )]
    pub store_columns: Option<String>,
    /// How long a search that names a write (`after`) waits for a replica to replay it before
    /// the primary serves it, in milliseconds; never more than half the request's time left
    /// [default: 100].
    #[arg(long, env = "CAPOT_STORE_REPLICA_WAIT_MS", value_name = "MS")]
    pub store_replica_wait_ms: Option<u64>,
    /// Query encoder bundle; repeat for several. The first is the target of the alias `default`.
    #[arg(
        long = "encoder",
        env = "CAPOT_ENCODERS",
        value_delimiter = ',',
        value_name = "DIR"
    )]
    pub encoders: Vec<PathBuf>,
    /// The index's document encoder, for document writes only, when no `--encoder` is it (all
    /// are aligned query encoders): never searched with, never an alias's target.
    #[arg(long, env = "CAPOT_DOCUMENT_ENCODER", value_name = "DIR")]
    pub document_encoder: Option<PathBuf>,
    /// HTTP listen address [default: 127.0.0.1:8080].
    #[arg(long, env = "CAPOT_ADDR")]
    pub addr: Option<SocketAddr>,
    /// gRPC listen address, or `off` for no gRPC [default: 127.0.0.1:50051].
    #[arg(long, env = "CAPOT_GRPC_ADDR", value_name = "ADDR|off", value_parser = parse_grpc_addr)]
    pub grpc_addr: Option<GrpcAddr>,
    /// Directory for the service's own state [default: .data].
    #[arg(long, env = "CAPOT_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// API key required as `Authorization: Bearer <key>` on /search, /v1/embeddings, /info and the
    /// gRPC Retrieval methods.
    #[arg(long, env = "CAPOT_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// File holding the API key (first line).
    #[arg(long, env = "CAPOT_API_KEY_FILE", value_name = "FILE")]
    pub api_key_file: Option<PathBuf>,
    /// Most texts per inference [default: 64].
    #[arg(long, env = "CAPOT_MAX_BATCH")]
    pub max_batch: Option<usize>,
    /// Most padded tokens per inference [default: 4096].
    #[arg(long, env = "CAPOT_MAX_BATCH_TOKENS")]
    pub max_batch_tokens: Option<usize>,
    /// Inference sessions per encoder, each with --threads threads, fed by one batching queue:
    /// a number, or `auto` (one single-threaded session per core, at most 16; --threads then
    /// defaults to the cores divided among them): more throughput at saturation, a little more
    /// latency for a lone request (docs/benchmarks.md) [default: 1].
    #[arg(long, env = "CAPOT_ENCODER_WORKERS", value_name = "N|auto")]
    pub encoder_workers: Option<String>,
    /// Milliseconds a batch waits for more requests [default: 0, never waits].
    #[arg(long, env = "CAPOT_MAX_WAIT_MS")]
    pub max_wait_ms: Option<u64>,
    /// Requests that may wait per encoder before 429 [default: 256].
    #[arg(long, env = "CAPOT_QUEUE_CAPACITY")]
    pub queue_capacity: Option<usize>,
    /// Requests served at once before 429 [default: 512].
    #[arg(long, env = "CAPOT_MAX_IN_FLIGHT")]
    pub max_in_flight: Option<usize>,
    /// Documents the live segment holds (written since the index was built) before writes
    /// answer 503 [default: 100000].
    #[arg(long, env = "CAPOT_MAX_LIVE_DOCUMENTS")]
    pub max_live_documents: Option<usize>,
    /// A compaction starts by itself once the live segment holds this many documents; 0 never
    /// [default: 50000].
    #[arg(long, env = "CAPOT_COMPACT_LIVE_DOCUMENTS")]
    pub compact_live_documents: Option<usize>,
    /// A compaction starts by itself once the write-ahead log holds this many bytes; 0 never
    /// [default: 1073741824].
    #[arg(long, env = "CAPOT_COMPACT_LOG_BYTES")]
    pub compact_log_bytes: Option<u64>,
    /// Serve searches only: document writes answer 409 (replicas beside the one writer).
    #[arg(long, env = "CAPOT_READ_ONLY")]
    pub read_only: bool,
    /// Filters may name metadata keys without a payload index: every document's metadata is
    /// then read per search (slow on a large corpus). Off: such a filter answers 400
    /// `unindexed_field`.
    #[arg(long, env = "CAPOT_ALLOW_UNINDEXED_FILTERS")]
    pub allow_unindexed_filters: bool,
    /// Under a filter, documents are scanned exactly while admitted² ≤ F × ef × documents and
    /// the graph is walked above; 0 always walks (unless at most k are admitted), a large value
    /// always scans [default: 3, measured in docs/benchmarks.md "Filtered search"].
    #[arg(long, env = "CAPOT_FILTER_SCAN_FACTOR", value_name = "F")]
    pub filter_scan_factor: Option<f64>,
    /// Per-request time limit in milliseconds [default: 10000].
    #[arg(long, env = "CAPOT_REQUEST_TIMEOUT_MS")]
    pub request_timeout_ms: Option<u64>,
    /// Largest request body in bytes [default: 1048576].
    #[arg(long, env = "CAPOT_MAX_BODY_BYTES")]
    pub max_body_bytes: Option<usize>,
    /// HNSW ef when a request gives none [default: the index's ef_search].
    #[arg(long, env = "CAPOT_DEFAULT_EF")]
    pub default_ef: Option<usize>,
    /// Query repair when neither the request nor its alias says: off, on, auto [default: auto].
    #[arg(long, env = "CAPOT_REPAIR")]
    pub repair: Option<RepairMode>,
    /// What a repaired query searches with: repaired, max [default: max].
    #[arg(long, env = "CAPOT_REPAIR_FUSION")]
    pub repair_fusion: Option<RepairFusion>,
    /// Let the index vote on repair: each query as typed is encoded and searched first, and the
    /// words of its N nearest documents speak for and against corrections (docs/repair.md "The
    /// index's vote"); a query repair changed is encoded a second time. 0 turns it off
    /// [default: 0].
    #[arg(long, env = "CAPOT_REPAIR_VOTE_DOCUMENTS", value_name = "N")]
    pub repair_vote_documents: Option<usize>,
    #[command(flatten)]
    pub lexicon: LexiconArgs,
    #[command(flatten)]
    pub device: DeviceArgs,
    #[command(flatten)]
    pub admin: super::serve_admin::AdminArgs,
}

/// Most documents the index's vote may read per query: each is a positioned read on the
/// request's path.
const MAX_VOTE_DOCUMENTS: usize = 100;

/// The config file: same keys as the flags.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServeFile {
    index: Option<PathBuf>,
    store: Option<String>,
    #[serde(default)]
    store_replicas: Vec<String>,
    store_password_file: Option<PathBuf>,
    store_max_connections: Option<usize>,
    store_replica_wait_ms: Option<u64>,
    store_columns: Option<String>,
    #[serde(default)]
    encoders: Vec<PathBuf>,
    document_encoder: Option<PathBuf>,
    addr: Option<SocketAddr>,
    #[serde(default, deserialize_with = "grpc_addr_from_file")]
    grpc_addr: Option<GrpcAddr>,
    data_dir: Option<PathBuf>,
    api_key_file: Option<PathBuf>,
    max_batch: Option<usize>,
    max_batch_tokens: Option<usize>,
    /// A number or "auto".
    encoder_workers: Option<toml::Value>,
    max_wait_ms: Option<u64>,
    queue_capacity: Option<usize>,
    max_in_flight: Option<usize>,
    max_live_documents: Option<usize>,
    compact_live_documents: Option<usize>,
    compact_log_bytes: Option<u64>,
    read_only: Option<bool>,
    allow_unindexed_filters: Option<bool>,
    filter_scan_factor: Option<f64>,
    request_timeout_ms: Option<u64>,
    max_body_bytes: Option<usize>,
    default_ef: Option<usize>,
    repair: Option<RepairMode>,
    repair_fusion: Option<RepairFusion>,
    repair_vote_documents: Option<usize>,
    #[serde(default)]
    lexicon: Vec<PathBuf>,
    #[serde(default)]
    models_dir: Vec<PathBuf>,
    threads: Option<usize>,
    device: Option<String>,
    admin_addr: Option<SocketAddr>,
    admin_token_file: Option<PathBuf>,
    state_file: Option<PathBuf>,
    state_poll_ms: Option<u64>,
    router: Option<String>,
    router_threshold: Option<f64>,
    jobs_runner: Option<String>,
    jobs_max_running: Option<usize>,
    jobs_requeue_on_restart: Option<bool>,
    jobs_nice: Option<i32>,
    jobs_encoders_dir: Option<PathBuf>,
    jobs_ray_address: Option<String>,
    jobs_ray_binary: Option<PathBuf>,
}

/// Where gRPC listens: an address, or nowhere (`off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrpcAddr {
    Off,
    At(SocketAddr),
}

/// Parses `--grpc-addr`: `off` (also `none`, `disabled`) or `HOST:PORT`.
fn parse_grpc_addr(s: &str) -> Result<GrpcAddr, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "off" | "none" | "disabled" => Ok(GrpcAddr::Off),
        t => t
            .parse()
            .map(GrpcAddr::At)
            .map_err(|e| format!("expected HOST:PORT or `off`, got {s:?}: {e}")),
    }
}

fn grpc_addr_from_file<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<GrpcAddr>, D::Error> {
    let s = String::deserialize(d)?;
    parse_grpc_addr(&s)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

fn read_file(path: &Path) -> anyhow::Result<ServeFile> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config {}", path.display()))?;
    // toml's Display draws a multi-line snippet; errors are one line, so say where instead.
    toml::from_str(&text).map_err(|e| {
        let at = e
            .span()
            .and_then(|span| text.get(..span.start))
            .map(|before| {
                let line = before.matches('\n').count() + 1;
                let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
                format!(" at line {line}, column {column}")
            })
            .unwrap_or_default();
        let message = e.message().trim().replace('\n', " ");
        anyhow::anyhow!("invalid config {}{at}: {message}", path.display())
    })
}

/// The store's password: the first line of `file`, else `PGPASSWORD`, else none (the URL's).
pub fn store_password(file: Option<&Path>) -> anyhow::Result<Option<String>> {
    match file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read store password file {}", path.display()))?;
            Ok(Some(text.lines().next().unwrap_or("").to_string()))
        }
        None => Ok(std::env::var("PGPASSWORD").ok()),
    }
}

/// Paths in the config file are relative to the file's directory.
fn relative_to(base: &Path, p: PathBuf) -> PathBuf {
    if p.is_absolute() {
        p
    } else {
        base.join(p)
    }
}

pub fn options(args: ServeArgs, global: &GlobalArgs) -> anyhow::Result<ServeOptions> {
    let file = match &args.config {
        Some(p) => {
            let f = read_file(p)?;
            let base = p.parent().map(Path::to_path_buf).unwrap_or_default();
            ServeFile {
                index: f.index.map(|p| relative_to(&base, p)),
                store_password_file: f.store_password_file.map(|p| relative_to(&base, p)),
                encoders: f
                    .encoders
                    .into_iter()
                    .map(|p| relative_to(&base, p))
                    .collect(),
                document_encoder: f.document_encoder.map(|p| relative_to(&base, p)),
                data_dir: f.data_dir.map(|p| relative_to(&base, p)),
                api_key_file: f.api_key_file.map(|p| relative_to(&base, p)),
                admin_token_file: f.admin_token_file.map(|p| relative_to(&base, p)),
                state_file: f.state_file.map(|p| relative_to(&base, p)),
                jobs_encoders_dir: f.jobs_encoders_dir.map(|p| relative_to(&base, p)),
                models_dir: f
                    .models_dir
                    .into_iter()
                    .map(|p| relative_to(&base, p))
                    .collect(),
                lexicon: f
                    .lexicon
                    .into_iter()
                    .map(|p| relative_to(&base, p))
                    .collect(),
                ..f
            }
        }
        None => ServeFile::default(),
    };
    let store = match args.store.or(file.store.clone()) {
        Some(url) => {
            let password = store_password(
                args.store_password_file
                    .or(file.store_password_file.clone())
                    .as_deref(),
            )?;
            let location = capot::store::postgres::PgLocation::parse(&url, password.clone())?;
            let replicas = if args.store_replicas.is_empty() {
                file.store_replicas.clone()
            } else {
                args.store_replicas
            };
            let replicas = replicas
                .iter()
                .map(|r| capot::store::postgres::PgLocation::parse(r, password.clone()))
                .collect::<Result<Vec<_>, _>>()?;
            let mut pool = capot::store::postgres::PoolOptions::default();
            if let Some(n) = args.store_max_connections.or(file.store_max_connections) {
                if n == 0 {
                    bail!("--store-max-connections must be at least 1");
                }
                pool.max_connections = n;
            }
            if let Some(ms) = args.store_replica_wait_ms.or(file.store_replica_wait_ms) {
                pool.replica_wait = std::time::Duration::from_millis(ms);
            }
            let columns = args
                .store_columns
                .or(file.store_columns.clone())
                .map(|spec| capot::store::postgres::Columns::parse(&spec))
                .transpose()?;
            if columns.is_some()
                && args
                    .document_encoder
                    .as_ref()
                    .or(file.document_encoder.as_ref())
                    .is_none()
            {
                bail!("--store-columns needs --document-encoder: the encoder that made the table's vectors");
            }
            Some(capot::server::StoreOptions {
                primary: location,
                replicas,
                pool,
                columns,
            })
        }
        None => None,
    };
    let index = match (args.index.or(file.index.clone()), &store) {
        (Some(_), Some(_)) => bail!("give either --index or --store, not both"),
        (Some(i), None) => i,
        (None, Some(_)) => PathBuf::new(),
        (None, None) => {
            bail!("--index or --store is required (or `index` / `store` in the config file)")
        }
    };
    let encoders = if args.encoders.is_empty() {
        file.encoders
    } else {
        args.encoders
    };
    if encoders.is_empty() {
        bail!("at least one --encoder is required (or `encoders` in the config file)");
    }
    let api_key = match (args.api_key, args.api_key_file.or(file.api_key_file)) {
        (Some(k), _) => Some(k),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read API key file {}", path.display()))?;
            let key = text.lines().next().unwrap_or("").trim().to_string();
            if key.is_empty() {
                bail!("API key file {} is empty", path.display());
            }
            Some(key)
        }
        (None, None) => None,
    };
    let mut device = args.device.clone();
    if let (true, Some(d)) = (device.device == "cpu", file.device) {
        device.device = d;
    }
    device.threads = device.threads.or(file.threads);
    let file_workers = file.encoder_workers.map(|v| match v {
        toml::Value::String(s) => s,
        other => other.to_string(),
    });
    let workers = super::encoder_workers(
        args.encoder_workers.or(file_workers).as_deref(),
        &mut device,
    )?;
    let runtime = device.runtime(global)?;
    let defaults = Limits::default();
    let batch_defaults = BatchConfig::default();
    let positive = |name: &str, v: usize| -> anyhow::Result<usize> {
        if v == 0 {
            bail!("--{name} must be at least 1");
        }
        Ok(v)
    };
    let queue_capacity = positive(
        "queue-capacity",
        args.queue_capacity
            .or(file.queue_capacity)
            .unwrap_or(defaults.queue_capacity),
    )?;
    let limits = Limits {
        max_in_flight: positive(
            "max-in-flight",
            args.max_in_flight
                .or(file.max_in_flight)
                .unwrap_or(defaults.max_in_flight),
        )?,
        queue_capacity,
        max_live_documents: positive(
            "max-live-documents",
            args.max_live_documents
                .or(file.max_live_documents)
                .unwrap_or(defaults.max_live_documents),
        )?,
        compact_live_documents: args
            .compact_live_documents
            .or(file.compact_live_documents)
            .unwrap_or(defaults.compact_live_documents),
        compact_log_bytes: args
            .compact_log_bytes
            .or(file.compact_log_bytes)
            .unwrap_or(defaults.compact_log_bytes),
        read_only: args.read_only || file.read_only.unwrap_or(false),
        allow_unindexed_filters: args.allow_unindexed_filters
            || file.allow_unindexed_filters.unwrap_or(false),
        filter_scan_factor: super::filter_scan_factor(
            args.filter_scan_factor
                .or(file.filter_scan_factor)
                .unwrap_or(defaults.filter_scan_factor),
        )?,
        request_timeout_ms: args
            .request_timeout_ms
            .or(file.request_timeout_ms)
            .unwrap_or(defaults.request_timeout_ms)
            .max(1),
        max_body_bytes: positive(
            "max-body-bytes",
            args.max_body_bytes
                .or(file.max_body_bytes)
                .unwrap_or(defaults.max_body_bytes),
        )?,
        default_ef: match args.default_ef.or(file.default_ef) {
            Some(ef) => Some(positive("default-ef", ef)?),
            None => None,
        },
        ..defaults
    };
    let batch = BatchConfig {
        max_batch: positive(
            "max-batch",
            args.max_batch
                .or(file.max_batch)
                .unwrap_or(batch_defaults.max_batch),
        )?,
        max_tokens: positive(
            "max-batch-tokens",
            args.max_batch_tokens
                .or(file.max_batch_tokens)
                .unwrap_or(batch_defaults.max_tokens),
        )?,
        max_wait: Duration::from_millis(args.max_wait_ms.or(file.max_wait_ms).unwrap_or(0)),
        queue_capacity,
        workers,
    };
    let admin = super::serve_admin::options(
        args.admin,
        super::serve_admin::AdminFileKeys {
            admin_addr: file.admin_addr,
            admin_token_file: file.admin_token_file,
            state_file: file.state_file,
            state_poll_ms: file.state_poll_ms,
            router: file.router,
            router_threshold: file.router_threshold,
            jobs_runner: file.jobs_runner,
            jobs_max_running: file.jobs_max_running,
            jobs_requeue_on_restart: file.jobs_requeue_on_restart,
            jobs_nice: file.jobs_nice,
            jobs_encoders_dir: file.jobs_encoders_dir,
            jobs_ray_address: file.jobs_ray_address,
            jobs_ray_binary: file.jobs_ray_binary,
            models_dir: file.models_dir,
        },
    )?;
    let repair = RepairDefaults {
        mode: args.repair.or(file.repair).unwrap_or_default(),
        fusion: args
            .repair_fusion
            .or(file.repair_fusion)
            .unwrap_or_default(),
        vote_documents: args
            .repair_vote_documents
            .or(file.repair_vote_documents)
            .unwrap_or(0),
    };
    anyhow::ensure!(
        repair.vote_documents <= MAX_VOTE_DOCUMENTS,
        "--repair-vote-documents must be at most {MAX_VOTE_DOCUMENTS}, got {}",
        repair.vote_documents
    );
    let lexicon_args = if args.lexicon.lexicons.is_empty() && !args.lexicon.no_lexicon {
        LexiconArgs {
            lexicons: file.lexicon,
            no_lexicon: false,
        }
    } else {
        args.lexicon
    };
    Ok(ServeOptions {
        index,
        store,
        encoders,
        document_encoder: args.document_encoder.or(file.document_encoder),
        repair,
        lexicons: lexicon_args.files(),
        addr: args
            .addr
            .or(file.addr)
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8080))),
        grpc_addr: match args.grpc_addr.or(file.grpc_addr) {
            Some(GrpcAddr::Off) => None,
            Some(GrpcAddr::At(a)) => Some(a),
            None => Some(SocketAddr::from(([127, 0, 0, 1], 50051))),
        },
        data_dir: args
            .data_dir
            .or(file.data_dir)
            .unwrap_or_else(|| PathBuf::from(".data")),
        api_key,
        runtime,
        batch,
        limits,
        drain_timeout: Duration::from_secs(30),
        admin,
    })
}

/// Threads of the runtime's blocking pool (request preparation, admin loads, job store calls).
const MAX_BLOCKING_THREADS: usize = 64;

pub fn run(args: ServeArgs, global: &GlobalArgs) -> anyhow::Result<()> {
    let options = options(args, global)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("capot-async")
        // Every request takes one short blocking hop (tokenization, repair); tokio's default of
        // 512 blocking threads would let a burst of slow clients leave hundreds of idle threads.
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .build()
        .context("cannot start the async runtime")?;
    let drain = options.drain_timeout;
    let served = rt.block_on(serve(options));
    // A load still running when the service stops (an index being read, a database not yet
    // answering) holds a blocking thread: give it the drain time, then exit without it.
    rt.shutdown_timeout(drain);
    served?;
    Ok(())
}

#[cfg(test)]
mod grpc_addr_tests {
    use super::*;

    #[test]
    fn grpc_addr_parses_addresses_and_off_from_flags_and_file() {
        assert_eq!(parse_grpc_addr("off"), Ok(GrpcAddr::Off));
        assert_eq!(parse_grpc_addr("OFF"), Ok(GrpcAddr::Off));
        assert_eq!(
            parse_grpc_addr("0.0.0.0:50051"),
            Ok(GrpcAddr::At(SocketAddr::from(([0, 0, 0, 0], 50051))))
        );
        assert!(parse_grpc_addr("localhost").is_err());
        let file: ServeFile = toml::from_str("grpc_addr = \"127.0.0.1:0\"").unwrap();
        assert_eq!(
            file.grpc_addr,
            Some(GrpcAddr::At(SocketAddr::from(([127, 0, 0, 1], 0))))
        );
        let file: ServeFile = toml::from_str("grpc_addr = \"off\"").unwrap();
        assert_eq!(file.grpc_addr, Some(GrpcAddr::Off));
        let file: ServeFile = toml::from_str("").unwrap();
        assert_eq!(file.grpc_addr, None);
        assert!(toml::from_str::<ServeFile>("grpc_addr = \"nowhere\"").is_err());
    }

    #[test]
    fn encoder_workers_in_the_file_may_be_a_number_or_auto() {
        let f: ServeFile = toml::from_str("encoder_workers = 2").unwrap();
        assert_eq!(f.encoder_workers, Some(toml::Value::Integer(2)));
        let f: ServeFile = toml::from_str("encoder_workers = \"auto\"").unwrap();
        assert_eq!(f.encoder_workers, Some(toml::Value::String("auto".into())));
    }
}

#[cfg(test)]
mod config_fuzz {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    /// Any text as `--config`: read or refused with one line naming the file and the place,
    /// never a panic (see `src/fuzz.rs` for the other parsers).
    #[test]
    fn config_files_of_any_text_are_read_or_refused_on_one_line() {
        let key = prop_oneof![
            Just("index"),
            Just("encoders"),
            Just("addr"),
            Just("grpc_addr"),
            Just("encoder_workers"),
            Just("max_batch"),
            Just("repair"),
            Just("models_dir"),
            Just("lexicon"),
            Just("jobs_nice"),
            Just("bogus")
        ];
        let value = prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            ".{0,20}".prop_map(|s| format!("{s:?}")),
            Just("[\"a\", 1]".to_string()),
            Just("true".to_string()),
            Just("{ x = 1 }".to_string()),
            Just("\"auto\"".to_string()),
            Just("\"off\"".to_string()),
            Just("1e400".to_string()),
        ];
        let text = prop_oneof![
            3 => proptest::collection::vec((key, value), 0..6).prop_map(|kv| {
                kv.iter()
                    .map(|(k, v)| format!("{k} = {v}\n"))
                    .collect::<String>()
            }),
            1 => "\\PC{0,200}",
            1 => (1usize..100_000).prop_map(|n| format!("x = {}", "[".repeat(n))),
        ];
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("capot.toml");
        let mut runner = TestRunner::new_with_rng(
            Config {
                cases: 512,
                failure_persistence: None,
                ..Config::default()
            },
            TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
        );
        runner
            .run(&text, |text| {
                std::fs::write(&path, &text).expect("write");
                if let Err(e) = read_file(&path) {
                    let line = format!("{e:#}");
                    prop_assert!(!line.contains('\n'), "{}", line);
                    prop_assert!(line.contains("capot.toml"), "{}", line);
                }
                Ok(())
            })
            .expect("config reader");
    }
}
