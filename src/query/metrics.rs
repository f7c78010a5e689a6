//! Prometheus metrics of the service, exposed as text on `GET /metrics`.

use prometheus::{
    Encoder as _, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry, TextEncoder,
};

use crate::registry::batcher::BatchObserver;

/// Latency buckets (seconds) from 0.25 ms to 10 s.
const LATENCY_BUCKETS: &[f64] = &[
    0.00025, 0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.0,
    2.5, 5.0, 10.0,
];
const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

/// Every metric the service records.
pub struct Metrics {
    registry: Registry,
    /// Requests by route and HTTP status code.
    pub requests: IntCounterVec,
    /// Failed requests by route and reason (the error code of the response).
    pub failures: IntCounterVec,
    /// Time per request stage (tokenize, queue, encode, search, total) by encoder.
    pub stage_seconds: HistogramVec,
    /// Texts per inference, by encoder.
    pub batch_size: HistogramVec,
    /// Inference time per batch, by encoder.
    pub batch_seconds: HistogramVec,
    /// Requests waiting for an encoder's worker.
    pub queue_depth: IntGaugeVec,
    /// Requests being served now.
    pub in_flight: IntGauge,
    /// Requests past admission control now (what `max_in_flight` bounds).
    pub admitted: IntGauge,
    /// Documents in the loaded index.
    pub index_documents: IntGauge,
    /// The median margin of the loaded index's last scans of its sign codes (NaN before 32).
    pub index_sign_code_margin: prometheus::Gauge,
    /// How many times those scans multiply the candidates they re-score first (1, 2, 4, 8).
    pub index_sign_code_candidates_factor: IntGauge,
    /// Constant 1 per loaded encoder, labelled with what identifies it.
    pub encoder_info: GaugeVec,
    /// Requests served per encoder.
    pub encoder_requests: IntCounterVec,
    /// Queries by what query repair did (unchanged, changed, skipped) and encoder.
    pub repairs: IntCounterVec,
    /// Queries whose repair the index voted on (`--repair-vote-documents`), by encoder: their
    /// share of `repairs` is the vote's share of the traffic.
    pub repair_votes: IntCounterVec,
    /// Queued requests dropped before inference because their client had gone, by encoder.
    pub abandoned: IntCounterVec,
    /// Panics caught in inference workers, by encoder (each failed its batch's requests).
    pub worker_panics: IntCounterVec,
    /// Filtered searches by how the planner answered them (empty, exact, sign_scan,
    /// sign_scan_then_exact, graph, graph_then_exact).
    pub filtered_searches: IntCounterVec,
    /// A document store's nodes: 1 when the node answered its last health check, by role
    /// (`primary`, `replica`) and node (its location, without credentials).
    pub store_up: IntGaugeVec,
    /// Bytes of WAL a store's replica has still to replay, by node.
    pub store_replica_lag_bytes: IntGaugeVec,
    /// Searches each node of a document store has answered, by role and node.
    pub store_searches: IntCounterVec,
    /// Searches waiting now for a replica to replay the write they name (`after`).
    pub store_waiting_searches: prometheus::IntGauge,
    /// Live-corpus write batches by operation (upsert, delete) and outcome (the error code, or
    /// `ok`).
    pub corpus_writes: IntCounterVec,
    /// Documents in acknowledged batches, by operation.
    pub corpus_documents_written: IntCounterVec,
    /// Time to append a batch to the write-ahead log and fsync it.
    pub corpus_log_seconds: prometheus::Histogram,
    /// Live-corpus sizes: `live` documents, `deleted` ids, `hidden_frozen` documents.
    pub corpus_documents: IntGaugeVec,
    /// Bytes of the write-ahead log.
    pub corpus_log_bytes: IntGauge,
    /// Heap bytes of the live segment.
    pub corpus_memory_bytes: IntGauge,
    /// Live documents the segment takes before writes answer 503 (`--max-live-documents`).
    pub corpus_live_limit: IntGauge,
    /// Compactions by outcome (`ok`, `nothing_to_do`, `failed`).
    pub corpus_compactions: IntCounterVec,
    /// Time a compaction takes, build and switch.
    pub corpus_compaction_seconds: prometheus::Histogram,
    /// 1 while a compaction runs.
    pub corpus_compacting: IntGauge,
    /// The frozen version served (0: the index as built).
    pub corpus_version: IntGauge,
}

impl Metrics {
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new_custom(Some("capot".into()), None)?;
        let requests = IntCounterVec::new(
            Opts::new(
                "http_requests_total",
                "HTTP requests by route and status code.",
            ),
            &["route", "status"],
        )?;
        let failures = IntCounterVec::new(
            Opts::new(
                "request_failures_total",
                "Failed requests by route and reason.",
            ),
            &["route", "reason"],
        )?;
        let stage_seconds = HistogramVec::new(
            HistogramOpts::new(
                "request_stage_duration_seconds",
                "Time spent per request stage (repair, tokenize, queue, encode, search, total).",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["stage", "encoder"],
        )?;
        let batch_size = HistogramVec::new(
            HistogramOpts::new("encode_batch_size", "Texts per inference call.")
                .buckets(BATCH_BUCKETS.to_vec()),
            &["encoder"],
        )?;
        let batch_seconds = HistogramVec::new(
            HistogramOpts::new("encode_batch_duration_seconds", "Inference time per batch.")
                .buckets(LATENCY_BUCKETS.to_vec()),
            &["encoder"],
        )?;
        let queue_depth = IntGaugeVec::new(
            Opts::new(
                "encode_queue_depth",
                "Requests waiting for an encoder's worker.",
            ),
            &["encoder"],
        )?;
        let in_flight = IntGauge::new("requests_in_flight", "Requests being served now.")?;
        let index_documents = IntGauge::new("index_documents", "Documents in the loaded index.")?;
        let index_sign_code_margin = prometheus::Gauge::new(
            "index_sign_code_margin",
            "Median margin of the index's last 256 scans of its sign codes, in standard deviations (NaN before 32 scans; below 3.5 the scans re-score more).",
        )?;
        let index_sign_code_candidates_factor = IntGauge::new(
            "index_sign_code_candidates_factor",
            "How many times the index's scans of its sign codes multiply the candidates they re-score first (1, 2, 4 or 8).",
        )?;
        let encoder_info = GaugeVec::new(
            Opts::new("encoder_info", "Loaded query encoders (value 1)."),
            &["encoder", "version", "provider", "fingerprint"],
        )?;
        let encoder_requests = IntCounterVec::new(
            Opts::new("encoder_requests_total", "Requests served per encoder."),
            &["encoder"],
        )?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(failures.clone()))?;
        registry.register(Box::new(stage_seconds.clone()))?;
        registry.register(Box::new(batch_size.clone()))?;
        registry.register(Box::new(batch_seconds.clone()))?;
        registry.register(Box::new(queue_depth.clone()))?;
        registry.register(Box::new(in_flight.clone()))?;
        let admitted = IntGauge::new(
            "requests_admitted",
            "Requests past admission control now (what max_in_flight bounds).",
        )?;
        registry.register(Box::new(admitted.clone()))?;
        registry.register(Box::new(index_documents.clone()))?;
        registry.register(Box::new(index_sign_code_margin.clone()))?;
        registry.register(Box::new(index_sign_code_candidates_factor.clone()))?;
        registry.register(Box::new(encoder_info.clone()))?;
        let repairs = IntCounterVec::new(
            Opts::new(
                "query_repairs_total",
                "Queries by what query repair did (unchanged, changed, skipped) and encoder.",
            ),
            &["outcome", "encoder"],
        )?;
        registry.register(Box::new(encoder_requests.clone()))?;
        registry.register(Box::new(repairs.clone()))?;
        let repair_votes = IntCounterVec::new(
            Opts::new(
                "query_repair_votes_total",
                "Queries whose repair the index voted on (the words of the documents the raw query retrieved), by encoder.",
            ),
            &["encoder"],
        )?;
        registry.register(Box::new(repair_votes.clone()))?;
        let filtered_searches = IntCounterVec::new(
            Opts::new(
                "filtered_searches_total",
                "Filtered searches by how the planner answered them (empty, exact, sign_scan, sign_scan_then_exact, graph, graph_then_exact).",
            ),
            &["strategy"],
        )?;
        registry.register(Box::new(filtered_searches.clone()))?;
        let store_up = IntGaugeVec::new(
            Opts::new(
                "store_up",
                "Whether each node of the document store answered its last health check (1) or not (0).",
            ),
            &["role", "node"],
        )?;
        registry.register(Box::new(store_up.clone()))?;
        let store_replica_lag_bytes = IntGaugeVec::new(
            Opts::new(
                "store_replica_lag_bytes",
                "Bytes of WAL a document store replica has still to replay (at its last health check).",
            ),
            &["node"],
        )?;
        registry.register(Box::new(store_replica_lag_bytes.clone()))?;
        let store_searches = IntCounterVec::new(
            Opts::new(
                "store_searches_total",
                "Searches each node of the document store has answered.",
            ),
            &["role", "node"],
        )?;
        registry.register(Box::new(store_searches.clone()))?;
        let store_waiting_searches = prometheus::IntGauge::with_opts(Opts::new(
            "store_waiting_searches",
            "Searches waiting now for a replica to replay the write they name (after).",
        ))?;
        registry.register(Box::new(store_waiting_searches.clone()))?;
        let abandoned = IntCounterVec::new(
            Opts::new(
                "encode_abandoned_total",
                "Queued requests dropped before inference because their client had gone (timeout, disconnect).",
            ),
            &["encoder"],
        )?;
        registry.register(Box::new(abandoned.clone()))?;
        let worker_panics = IntCounterVec::new(
            Opts::new(
                "worker_panics_total",
                "Panics caught in inference workers (each failed its batch's requests; the worker went on).",
            ),
            &["encoder"],
        )?;
        registry.register(Box::new(worker_panics.clone()))?;
        let corpus_writes = IntCounterVec::new(
            Opts::new(
                "corpus_writes_total",
                "Live-corpus write batches by operation and outcome (ok, or the error code).",
            ),
            &["operation", "outcome"],
        )?;
        let corpus_documents_written = IntCounterVec::new(
            Opts::new(
                "corpus_documents_written_total",
                "Documents in acknowledged write batches, by operation.",
            ),
            &["operation"],
        )?;
        let corpus_log_seconds = prometheus::Histogram::with_opts(
            HistogramOpts::new(
                "corpus_log_append_duration_seconds",
                "Time to append a batch to the write-ahead log and fsync it.",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
        )?;
        let corpus_documents = IntGaugeVec::new(
            Opts::new(
                "corpus_documents",
                "Live corpus: documents in the live segment (live), ids deleted (deleted), frozen documents hidden (hidden_frozen).",
            ),
            &["state"],
        )?;
        let corpus_log_bytes = IntGauge::new("corpus_log_bytes", "Bytes of the write-ahead log.")?;
        let corpus_memory_bytes =
            IntGauge::new("corpus_memory_bytes", "Heap bytes of the live segment.")?;
        registry.register(Box::new(corpus_writes.clone()))?;
        registry.register(Box::new(corpus_documents_written.clone()))?;
        registry.register(Box::new(corpus_log_seconds.clone()))?;
        registry.register(Box::new(corpus_documents.clone()))?;
        registry.register(Box::new(corpus_log_bytes.clone()))?;
        registry.register(Box::new(corpus_memory_bytes.clone()))?;
        let corpus_live_limit = IntGauge::new(
            "corpus_live_documents_limit",
            "Live documents the segment takes before writes answer 503 (--max-live-documents).",
        )?;
        registry.register(Box::new(corpus_live_limit.clone()))?;
        let corpus_compactions = IntCounterVec::new(
            Opts::new(
                "corpus_compactions_total",
                "Compactions of the live corpus into a new frozen version, by outcome.",
            ),
            &["outcome"],
        )?;
        let corpus_compaction_seconds = prometheus::Histogram::with_opts(
            HistogramOpts::new(
                "corpus_compaction_duration_seconds",
                "Time a compaction takes: the new version built, written and switched to.",
            )
            .buckets(vec![
                0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
            ]),
        )?;
        let corpus_compacting = IntGauge::new(
            "corpus_compacting",
            "1 while a compaction of the live corpus runs.",
        )?;
        let corpus_version = IntGauge::new(
            "corpus_version",
            "The frozen version served: 0 for the index as built, one more per compaction.",
        )?;
        registry.register(Box::new(corpus_compactions.clone()))?;
        registry.register(Box::new(corpus_compaction_seconds.clone()))?;
        registry.register(Box::new(corpus_compacting.clone()))?;
        registry.register(Box::new(corpus_version.clone()))?;
        let build_info = GaugeVec::new(
            Opts::new("build_info", "Version of the running capot (value 1)."),
            &["version"],
        )?;
        build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1.0);
        registry.register(Box::new(build_info))?;
        Ok(Metrics {
            registry,
            requests,
            failures,
            stage_seconds,
            batch_size,
            batch_seconds,
            queue_depth,
            in_flight,
            admitted,
            index_documents,
            index_sign_code_margin,
            index_sign_code_candidates_factor,
            encoder_info,
            encoder_requests,
            repairs,
            repair_votes,
            filtered_searches,
            store_up,
            store_replica_lag_bytes,
            store_searches,
            store_waiting_searches,
            abandoned,
            worker_panics,
            corpus_writes,
            corpus_documents_written,
            corpus_log_seconds,
            corpus_documents,
            corpus_log_bytes,
            corpus_memory_bytes,
            corpus_live_limit,
            corpus_compactions,
            corpus_compaction_seconds,
            corpus_compacting,
            corpus_version,
        })
    }

    /// Adds a metric defined elsewhere (registry, jobs) to the same exposition.
    pub fn register(
        &self,
        collector: Box<dyn prometheus::core::Collector>,
    ) -> Result<(), prometheus::Error> {
        self.registry.register(collector)
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        let encoder = TextEncoder::new();
        if let Err(e) = encoder.encode(&self.registry.gather(), &mut buf) {
            tracing::error!("cannot render metrics: {e}");
        }
        String::from_utf8(buf).unwrap_or_default()
    }

    /// Sets the sign-code gauges from what the loaded index reports.
    pub fn set_sign_codes(&self, r: &crate::index::SignCodesReport) {
        self.index_sign_code_margin
            .set(r.median_margin.map_or(f64::NAN, f64::from));
        self.index_sign_code_candidates_factor
            .set(i64::from(r.candidates_factor));
    }

    /// Sets the live-corpus gauges from its counts.
    pub fn set_corpus(&self, s: &crate::live::LiveStats) {
        let set = |state: &str, n: usize| {
            self.corpus_documents
                .with_label_values(&[state])
                .set(n as i64)
        };
        set("live", s.delta_documents);
        set("deleted", s.deleted);
        set("hidden_frozen", s.hidden_frozen);
        self.corpus_log_bytes.set(s.log_bytes as i64);
        self.corpus_memory_bytes.set(s.memory_bytes as i64);
        self.corpus_live_limit.set(s.max_live_documents as i64);
    }

    pub fn observe_stage(&self, stage: &str, encoder: &str, seconds: f64) {
        self.stage_seconds
            .with_label_values(&[stage, encoder])
            .observe(seconds);
    }
}

impl BatchObserver for Metrics {
    fn batch_done(&self, encoder: &str, size: usize, seconds: f64) {
        self.batch_size
            .with_label_values(&[encoder])
            .observe(size as f64);
        self.batch_seconds
            .with_label_values(&[encoder])
            .observe(seconds);
    }

    fn queue_depth(&self, encoder: &str, depth: usize) {
        self.queue_depth
            .with_label_values(&[encoder])
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    fn abandoned(&self, encoder: &str, requests: usize) {
        self.abandoned
            .with_label_values(&[encoder])
            .inc_by(requests as u64);
    }

    fn worker_panicked(&self, encoder: &str) {
        self.worker_panics.with_label_values(&[encoder]).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text_with_prefix() {
        let m = Metrics::new().unwrap();
        m.requests.with_label_values(&["/search", "200"]).inc();
        m.observe_stage("total", "minilm", 0.003);
        m.batch_done("minilm", 4, 0.01);
        let text = m.render();
        assert!(
            text.contains("capot_http_requests_total{route=\"/search\",status=\"200\"} 1"),
            "{text}"
        );
        assert!(text.contains("capot_request_stage_duration_seconds_bucket"));
        assert!(text.contains("capot_encode_batch_size_count{encoder=\"minilm\"} 1"));
        assert!(text.contains("capot_build_info"));
    }
}
