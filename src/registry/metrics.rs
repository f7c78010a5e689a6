//! Metrics of the registry: swaps, alias targets, state-file reloads and router choices.

use std::collections::BTreeSet;
use std::sync::Mutex;

use prometheus::{Histogram, HistogramOpts, IntCounterVec, IntGaugeVec, Opts};

use super::Snapshot;
use prometheus::core::Collector;

/// Load-time buckets (seconds), from 50 ms to 2 minutes.
const LOAD_BUCKETS: &[f64] = &[
    0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 120.0,
];

/// The registry's metrics; registered through the service's metrics registry so `/metrics`
/// shows them.
pub struct RegistryMetrics {
    /// Registry changes (load, replace, unload, alias switch) by result (`ok`, `failed`).
    pub swaps: IntCounterVec,
    /// 1 for each alias's current target, 0 for its former targets.
    pub alias_target: IntGaugeVec,
    /// State-file applications by result (`ok`, `failed`).
    pub state_reloads: IntCounterVec,
    /// Router decisions by alias chosen.
    pub router_choices: IntCounterVec,
    /// Seconds to load and warm up an encoder at run time.
    pub load_seconds: Histogram,
    published: Mutex<BTreeSet<(String, String)>>,
}

impl RegistryMetrics {
    /// Creates the metrics and registers them into `metrics`.
    pub fn new(
        register: &dyn Fn(Box<dyn Collector>) -> Result<(), prometheus::Error>,
    ) -> Result<Self, prometheus::Error> {
        let swaps = IntCounterVec::new(
            Opts::new(
                "encoder_swaps_total",
                "Registry changes (load, replace, unload, alias switch) by result.",
            ),
            &["result"],
        )?;
        let alias_target = IntGaugeVec::new(
            Opts::new(
                "alias_target",
                "1 when the alias points at the encoder, 0 for former targets.",
            ),
            &["alias", "encoder"],
        )?;
        let state_reloads = IntCounterVec::new(
            Opts::new(
                "state_file_reloads_total",
                "State-file applications by result.",
            ),
            &["result"],
        )?;
        let router_choices = IntCounterVec::new(
            Opts::new(
                "router_choices_total",
                "Queries routed per alias by the query router.",
            ),
            &["alias"],
        )?;
        let load_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "encoder_load_duration_seconds",
                "Time to load and warm up an encoder at run time.",
            )
            .buckets(LOAD_BUCKETS.to_vec()),
        )?;
        register(Box::new(swaps.clone()))?;
        register(Box::new(alias_target.clone()))?;
        register(Box::new(state_reloads.clone()))?;
        register(Box::new(router_choices.clone()))?;
        register(Box::new(load_seconds.clone()))?;
        for result in ["ok", "failed"] {
            swaps.with_label_values(&[result]);
            state_reloads.with_label_values(&[result]);
        }
        Ok(RegistryMetrics {
            swaps,
            alias_target,
            state_reloads,
            router_choices,
            load_seconds,
            published: Mutex::new(BTreeSet::new()),
        })
    }

    /// Counts one registry change.
    pub fn swap(&self, ok: bool) {
        self.swaps
            .with_label_values(&[if ok { "ok" } else { "failed" }])
            .inc();
    }

    /// Counts one state-file application.
    pub fn reload(&self, ok: bool) {
        self.state_reloads
            .with_label_values(&[if ok { "ok" } else { "failed" }])
            .inc();
    }

    /// Sets `alias_target` from a snapshot: 1 for current pairs, 0 for pairs that no longer hold.
    pub fn publish_aliases(&self, snapshot: &Snapshot) {
        let mut published = match self.published.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let now: BTreeSet<(String, String)> = snapshot
            .aliases
            .iter()
            .map(|(a, e)| (a.clone(), e.clone()))
            .collect();
        for (a, e) in published.difference(&now) {
            self.alias_target
                .with_label_values(&[a.as_str(), e.as_str()])
                .set(0);
        }
        for (a, e) in &now {
            self.alias_target
                .with_label_values(&[a.as_str(), e.as_str()])
                .set(1);
        }
        published.extend(now);
    }
}
