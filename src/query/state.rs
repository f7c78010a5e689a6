//! Shared state of the running service.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

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
}

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
        }
    }
}

/// Everything handlers need. The index is set once loading finishes; until then the service
/// is live but not ready.
pub struct AppState {
    pub index: OnceLock<Arc<Index>>,
    pub registry: Registry,
    pub metrics: Arc<Metrics>,
    pub limits: Limits,
    pub admission: Semaphore,
    pub api_key: Option<String>,
    pub ready: AtomicBool,
    pub draining: AtomicBool,
    pub started: std::time::Instant,
    /// Picks an alias per query when a request names no encoder (`--router`).
    pub router: OnceLock<Arc<QueryRouter>>,
    /// Query repair over the index's vocabulary, set with the index; `None` inside when the
    /// index has no vocabulary.
    pub repairer: OnceLock<Option<Arc<Repairer>>>,
    /// Repair mode and fusion when neither the request nor its alias sets them.
    pub repair_defaults: RepairDefaults,
    /// Documents written since the index was built, and the log that keeps them; set with the
    /// index.
    pub live: OnceLock<Arc<LiveCorpus>>,
}

impl AppState {
    pub fn new(metrics: Arc<Metrics>, limits: Limits, api_key: Option<String>) -> Self {
        AppState {
            index: OnceLock::new(),
            registry: Registry::new(),
            metrics,
            admission: Semaphore::new(limits.max_in_flight),
            limits,
            api_key,
            ready: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            started: std::time::Instant::now(),
            router: OnceLock::new(),
            repairer: OnceLock::new(),
            repair_defaults: RepairDefaults::default(),
            live: OnceLock::new(),
        }
    }

    /// Ready: index and default encoder loaded, and not shutting down.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire) && !self.draining.load(Ordering::Acquire)
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.limits.request_timeout_ms)
    }
}
