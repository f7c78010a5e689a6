//! Shared state of the running service.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::Semaphore;

use super::metrics::Metrics;
use crate::index::Index;
use crate::live::LiveCorpus;
use crate::registry::router::QueryRouter;
use crate::registry::Registry;
use crate::repair::{RepairFusion, RepairMode, Repairer};

/// The query pipeline a request gets when neither it nor its alias says otherwise.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct RepairDefaults {
    pub mode: RepairMode,
    pub fusion: RepairFusion,
    /// How many of the documents a query as typed retrieves vote on its repair (0: no vote;
    /// `--repair-vote-documents`, docs/repair.md "The index's vote").
    pub vote_documents: usize,
}

/// Live documents past which a compaction starts by itself (half the segment's default limit).
pub const DEFAULT_COMPACT_LIVE_DOCUMENTS: usize = crate::live::DEFAULT_MAX_LIVE_DOCUMENTS / 2;
/// Log bytes past which a compaction starts by itself.
pub const DEFAULT_COMPACT_LOG_BYTES: u64 = 1 << 30;

/// Request limits, reported by `/info`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Limits {
    pub max_k: usize,
    pub max_queries_per_request: usize,
    pub max_query_chars: usize,
    pub max_body_bytes: usize,
    pub max_in_flight: usize,
    pub queue_capacity: usize,
    pub request_timeout_ms: u64,
    /// HNSW ef when a request gives none; `None`: the index manifest's `ef_search`.
    pub default_ef: Option<usize>,
    /// Documents the live segment holds before writes answer 503.
    pub max_live_documents: usize,
    /// Documents one write request may carry (413 above).
    pub max_write_documents: usize,
    /// Bytes of one document's text (400 above).
    pub max_document_bytes: usize,
    /// Document writes refused (409): a replica that serves searches beside the one writer.
    pub read_only: bool,
    /// A compaction starts by itself once the live segment holds this many documents (0: never).
    pub compact_live_documents: usize,
    /// ... or once the write-ahead log holds this many bytes (0: never).
    pub compact_log_bytes: u64,
    /// Filters may name fields without a payload index (every document's metadata is read);
    /// otherwise such a filter is refused with `unindexed_field`.
    pub allow_unindexed_filters: bool,
    /// The filter planner scans the admitted documents exactly while `admitted² ≤ factor × ef ×
    /// documents` and walks the graph above ([`crate::index::DEFAULT_SCAN_FACTOR`]).
    pub filter_scan_factor: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_k: 1000,
            max_queries_per_request: 256,
            max_query_chars: 4096,
            max_body_bytes: 1 << 20,
            max_in_flight: 512,
            queue_capacity: 256,
            request_timeout_ms: 10_000,
            default_ef: None,
            max_live_documents: crate::live::DEFAULT_MAX_LIVE_DOCUMENTS,
            max_write_documents: 256,
            max_document_bytes: 64 << 10,
            read_only: false,
            compact_live_documents: DEFAULT_COMPACT_LIVE_DOCUMENTS,
            compact_log_bytes: DEFAULT_COMPACT_LOG_BYTES,
            allow_unindexed_filters: false,
            filter_scan_factor: crate::index::DEFAULT_SCAN_FACTOR,
        }
    }
}

/// The corpus searches read: a frozen version, the live segment over it and the speller of its
/// vocabulary. A compaction swaps it whole; a request takes it once and uses it to its end, so
/// no request sees half of one version and half of the next.
pub struct Corpus {
    pub index: Arc<Index>,
    pub live: Arc<LiveCorpus>,
    /// Query repair over the version's vocabulary; `None` when it has none.
    pub repairer: Option<Arc<Repairer>>,
    /// The version served: 0 for the index as built, then one more per compaction.
    pub version: u64,
    /// Metadata of the frozen documents that had any (the index keeps none; compactions do).
    pub frozen_metadata: HashMap<String, serde_json::Value>,
    /// The live corpus's directory (`<data-dir>/corpus`) and the identity of the index as
    /// built, whose log it is: what a compaction needs.
    pub live_dir: PathBuf,
    pub identity: String,
    /// The version's directory once a newer one is served: removed when the last request that
    /// holds this corpus lets it go.
    retire: Mutex<Option<PathBuf>>,
    /// Last, so it drops after the index and the speller: their pages go back to the OS (a
    /// service that compacts all day would otherwise keep each replaced version's heap).
    _release: crate::encoder::ReleaseFreedMemory,
}

impl Corpus {
    pub fn new(
        index: Arc<Index>,
        live: Arc<LiveCorpus>,
        repairer: Option<Arc<Repairer>>,
        version: u64,
        frozen_metadata: HashMap<String, serde_json::Value>,
        live_dir: PathBuf,
        identity: String,
    ) -> Self {
        Corpus {
            index,
            live,
            repairer,
            version,
            frozen_metadata,
            live_dir,
            identity,
            retire: Mutex::new(None),
            _release: crate::encoder::ReleaseFreedMemory,
        }
    }

    /// Removes `dir` (this version's, now replaced) once no request holds this corpus.
    pub fn retire(&self, dir: PathBuf) {
        *crate::sync::lock(&self.retire) = Some(dir);
    }
}

impl Drop for Corpus {
    fn drop(&mut self) {
        if let Some(dir) = crate::sync::lock(&self.retire).take() {
            // Usually the end of the last search that held this version, on a runtime worker.
            crate::blocking::off_runtime(move || match std::fs::remove_dir_all(&dir) {
                Ok(()) => tracing::info!(dir = %dir.display(), "replaced version removed"),
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "cannot remove a replaced version")
                }
            });
        }
    }
}

/// Where a payload index declared on a running server stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PayloadBuildState {
    Building,
    Failed,
}

/// A payload index being built (or whose build failed), as `GET /admin/index` reports it.
#[derive(Debug, Clone, Serialize)]
pub struct PayloadBuild {
    pub state: PayloadBuildState,
    #[serde(flatten)]
    pub schema: crate::index::payload::FieldSchema,
    pub started_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl PayloadBuild {
    /// A build starting now.
    pub fn building(schema: crate::index::payload::FieldSchema) -> Self {
        PayloadBuild {
            state: PayloadBuildState::Building,
            schema,
            started_at: crate::clock::rfc3339_from_unix(crate::clock::now_unix()),
            error: None,
        }
    }

    /// Marks the build failed with `error`.
    pub fn fail(&mut self, error: String) {
        self.state = PayloadBuildState::Failed;
        self.error = Some(error);
    }
}

/// Everything handlers need. The corpus is set once loading finishes; until then the service
/// is live but not ready.
pub struct AppState {
    corpus: RwLock<Option<Arc<Corpus>>>,
    /// Writes hold it shared from logging a batch to applying it; a compaction's switch holds
    /// it alone, so no batch is applied to a segment that is being replaced.
    pub write_gate: Arc<tokio::sync::RwLock<()>>,
    /// The compaction running or last run.
    pub compaction: Mutex<super::compaction::CompactionStatus>,
    /// The number of the newest compaction event, for streams that follow them.
    pub compaction_news: tokio::sync::watch::Sender<u64>,
    pub registry: Registry,
    pub metrics: Arc<Metrics>,
    pub limits: Limits,
    pub admission: Semaphore,
    pub api_key: Option<String>,
    pub ready: AtomicBool,
    pub draining: AtomicBool,
    pub started: std::time::Instant,
    /// The index's document encoder loaded for writes alone (`--document-encoder`).
    pub document_encoder: OnceLock<Arc<crate::registry::LoadedEncoder>>,
    /// Picks an alias per query when a request names no encoder (`--router`).
    pub router: OnceLock<Arc<QueryRouter>>,
    /// Repair mode and fusion when neither the request nor its alias sets them.
    pub repair_defaults: RepairDefaults,
    /// Payload indexes being built on this server (`PUT /admin/index/payload/{field}`).
    pub payload_builds: Mutex<std::collections::BTreeMap<String, PayloadBuild>>,
    /// The document store searches and writes go to instead of the embedded corpus
    /// (`--store`); set once at start.
    pub store: OnceLock<Arc<dyn crate::store::DocumentStore>>,
    /// Query repair over the store's vocabulary (`--store`).
    pub store_speller: OnceLock<Arc<StoreSpeller>>,
}

/// Query repair for a document store: the vocabulary built from its table into the data
/// directory, swapped whole when it is rebuilt (`POST /admin/index/vocab`).
pub struct StoreSpeller {
    /// Where the vocabulary's files live (`<data-dir>/store-vocab/<table>`).
    pub dir: PathBuf,
    /// The word lists repair weighs corrections with (`--lexicon`).
    pub lexicon: Option<Arc<crate::repair::lexicon::Lexicon>>,
    current: RwLock<Option<(Arc<Repairer>, crate::store::vocab::StoreVocab)>>,
    /// A rebuild running (`None`), or the last one's failure.
    pub build: Mutex<Option<Result<(), String>>>,
}

impl StoreSpeller {
    /// A speller over the vocabulary in `dir`, if one was built there.
    pub fn open(
        dir: PathBuf,
        lexicon: Option<Arc<crate::repair::lexicon::Lexicon>>,
    ) -> Result<Self, crate::store::vocab::VocabError> {
        let speller = StoreSpeller {
            current: RwLock::new(None),
            build: Mutex::new(Some(Ok(()))),
            dir,
            lexicon,
        };
        speller.reload()?;
        Ok(speller)
    }

    /// Reads the vocabulary in `dir` again and serves it; false when none was built.
    pub fn reload(&self) -> Result<bool, crate::store::vocab::VocabError> {
        let Some((vocab, record)) = crate::store::vocab::load(&self.dir)? else {
            return Ok(false);
        };
        let repairer = Arc::new(Repairer::new(vocab, self.lexicon.clone()));
        *crate::sync::write(&self.current) = Some((repairer, record));
        Ok(true)
    }

    /// The repairer served now, if a vocabulary was built.
    pub fn repairer(&self) -> Option<Arc<Repairer>> {
        crate::sync::read(&self.current)
            .as_ref()
            .map(|(r, _)| r.clone())
    }

    /// When and from what the vocabulary served now was built.
    pub fn record(&self) -> Option<crate::store::vocab::StoreVocab> {
        crate::sync::read(&self.current)
            .as_ref()
            .map(|(_, v)| v.clone())
    }
}

impl AppState {
    pub fn new(metrics: Arc<Metrics>, limits: Limits, api_key: Option<String>) -> Self {
        AppState {
            corpus: RwLock::new(None),
            write_gate: Arc::new(tokio::sync::RwLock::new(())),
            compaction: Mutex::new(Default::default()),
            compaction_news: tokio::sync::watch::Sender::new(0),
            registry: Registry::new(),
            metrics,
            admission: Semaphore::new(limits.max_in_flight),
            limits,
            api_key,
            ready: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            started: std::time::Instant::now(),
            document_encoder: OnceLock::new(),
            router: OnceLock::new(),
            repair_defaults: RepairDefaults::default(),
            payload_builds: Mutex::new(Default::default()),
            store: OnceLock::new(),
            store_speller: OnceLock::new(),
        }
    }

    /// The corpus served now (`None` while loading).
    pub fn corpus(&self) -> Option<Arc<Corpus>> {
        crate::sync::read(&self.corpus).clone()
    }

    /// Serves `corpus` from now on; returns the one it replaces.
    pub fn set_corpus(&self, corpus: Arc<Corpus>) -> Option<Arc<Corpus>> {
        crate::sync::write(&self.corpus).replace(corpus)
    }

    /// Ready: index (or store) and default encoder loaded, the store answering its health
    /// checks, and not shutting down.
    /// Loaded, not draining, the store (if any) answering, and every encoder with a running
    /// inference worker.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
            && !self.draining.load(Ordering::Acquire)
            && self.store.get().is_none_or(|s| s.healthy())
            && self
                .registry
                .snapshot()
                .encoders
                .values()
                .all(|e| e.batcher.live_workers() > 0)
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.limits.request_timeout_ms)
    }
}
