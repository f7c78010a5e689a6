//! Compaction of the live corpus under load: a new frozen version built in the background from
//! the served one and the log ([`crate::live::version::compact`]), then switched to whole while
//! writes wait a moment and searches go on.
//!
//! One runs at a time, started by `POST /admin/index/compact` or by itself past
//! [`super::state::Limits::compact_live_documents`] live documents or
//! [`super::state::Limits::compact_log_bytes`] log bytes. Its state, progress and events are
//! in `GET /admin/index` (`compaction`), and its events in `GET /admin/index/compaction/events`
//! (JSON, or a live server-sent event stream), like an alignment job's.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use super::state::{AppState, Corpus};
use crate::index::{BuildProgress, BuildStage};
use crate::live::version::{self, Compacted};
use crate::sync::lock;

/// Where a compaction is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionState {
    /// None has run since the start.
    #[default]
    Idle,
    Running,
    /// The new version is served.
    Succeeded,
    /// The log held no batch to fold.
    NothingToDo,
    /// It stopped; the version served and the log are as they were (see `error`).
    Failed,
}

/// One step of a compaction, as alignment jobs report theirs.
#[derive(Debug, Clone, Serialize)]
pub struct CompactionEvent {
    /// Numbered from 1 across the compactions since the start: a stream's event id.
    pub seq: u64,
    /// RFC 3339, UTC.
    pub at: String,
    pub kind: &'static str,
    pub message: String,
}

impl CompactionEvent {
    /// Whether it ends its compaction (`succeeded`, `nothing_to_do` or `failed`).
    pub fn is_final(&self) -> bool {
        matches!(self.kind, "succeeded" | "nothing_to_do" | "failed")
    }
}

/// The compaction running or last run, for `GET /admin/index`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CompactionStatus {
    pub state: CompactionState,
    /// What started it: `api`, `live_documents`, `log_bytes` or `live_segment_full`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trigger: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_version: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_version: Option<u64>,
    /// The build's stage (`validated`, `inserting`, `writing`, `committing`), then `switching`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<&'static str>,
    /// Units of the stage done, of `total`.
    pub done: usize,
    pub total: usize,
    /// Documents of the new version, live documents folded in, frozen ones dropped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub documents: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folded: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped: Option<usize>,
    /// The last operation id the new version holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub covers: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub events: Vec<CompactionEvent>,
    /// The number of the newest event, this compaction's or an earlier one's.
    #[serde(skip)]
    last_seq: u64,
}

impl CompactionStatus {
    fn event(&mut self, kind: &'static str, message: String) {
        self.last_seq += 1;
        self.events.push(CompactionEvent {
            seq: self.last_seq,
            at: crate::clock::now_rfc3339(),
            kind,
            message,
        });
    }

    /// The events after event `after`.
    pub fn events_after(&self, after: u64) -> Vec<CompactionEvent> {
        self.events
            .iter()
            .filter(|e| e.seq > after)
            .cloned()
            .collect()
    }
}

/// Changes the compaction's status under its lock, then wakes the streams that follow its
/// events.
fn update<T>(state: &AppState, f: impl FnOnce(&mut CompactionStatus) -> T) -> T {
    let mut st = lock(&state.compaction);
    let out = f(&mut st);
    state.compaction_news.send_replace(st.last_seq);
    out
}

/// Why a compaction did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("the index is not loaded yet")]
    NotReady,
    #[error("a compaction is already running (from version {0})")]
    Running(u64),
    #[error("this replica serves searches only (--read-only); the writer compacts")]
    ReadOnly,
    #[error("the payload index of {0:?} is being built; compact after it (the new version takes the declarations it starts with)")]
    PayloadBuilding(String),
}

/// Starts a compaction in the background; its status as it starts.
pub fn start(state: &Arc<AppState>, trigger: &'static str) -> Result<CompactionStatus, StartError> {
    if state.limits.read_only {
        return Err(StartError::ReadOnly);
    }
    let corpus = state.corpus().ok_or(StartError::NotReady)?;
    // A payload index built while the version is rebuilt would be recorded in the old version
    // only. Held across the start (payload builds, then the compaction: the declarations' order
    // too), so neither begins while the other does.
    let builds = lock(&state.payload_builds);
    if let Some(field) = builds
        .iter()
        .find(|(_, b)| b.state == crate::query::state::PayloadBuildState::Building)
        .map(|(f, _)| f.clone())
    {
        return Err(StartError::PayloadBuilding(field));
    }
    let status = update(state, |st| {
        if st.state == CompactionState::Running {
            return Err(StartError::Running(st.from_version.unwrap_or_default()));
        }
        *st = CompactionStatus {
            state: CompactionState::Running,
            trigger: Some(trigger),
            from_version: Some(corpus.version),
            last_seq: st.last_seq,
            ..Default::default()
        };
        st.event(
            "started",
            format!(
                "compacting version {} and the log ({trigger})",
                corpus.version
            ),
        );
        Ok(st.clone())
    })?;
    drop(builds);
    state.metrics.corpus_compacting.set(1);
    let state = state.clone();
    tokio::spawn(async move {
        let started = Instant::now();
        let outcome = run(&state, corpus).await;
        let seconds = started.elapsed().as_secs_f64();
        let label = update(&state, |st| {
            st.seconds = Some(seconds);
            st.stage = None;
            match outcome {
                Ok(Some(version)) => {
                    st.state = CompactionState::Succeeded;
                    st.event(
                        "succeeded",
                        format!("version {version} served ({seconds:.2} s)"),
                    );
                    tracing::info!(version, seconds, "compaction done");
                    "ok"
                }
                Ok(None) => {
                    st.state = CompactionState::NothingToDo;
                    st.event("nothing_to_do", "the log holds no batch to fold".into());
                    "nothing_to_do"
                }
                Err(e) => {
                    st.state = CompactionState::Failed;
                    st.event("failed", e.clone());
                    tracing::error!(error = %e, "compaction failed; the served version and the log are unchanged");
                    st.error = Some(e);
                    "failed"
                }
            }
        });
        state.metrics.corpus_compacting.set(0);
        state
            .metrics
            .corpus_compactions
            .with_label_values(&[label])
            .inc();
        state.metrics.corpus_compaction_seconds.observe(seconds);
    });
    Ok(status)
}

/// Whether a compaction runs now.
pub fn running(state: &AppState) -> bool {
    lock(&state.compaction).state == CompactionState::Running
}

/// Starts a compaction when the live segment or the log has grown past its threshold and none
/// runs.
pub fn start_if_due(state: &Arc<AppState>) {
    let Some(corpus) = state.corpus() else {
        return;
    };
    let limits = &state.limits;
    let stats = corpus.live.stats();
    let trigger = if limits.compact_live_documents > 0
        && stats.delta_documents >= limits.compact_live_documents
    {
        "live_documents"
    } else if limits.compact_log_bytes > 0 && stats.log_bytes >= limits.compact_log_bytes {
        "log_bytes"
    } else {
        return;
    };
    if !running(state) {
        // Lost a race with another writer's start: that one runs.
        let _ = start(state, trigger);
    }
}

/// Starts a compaction, unless one runs, when a write found the live segment full: the
/// writer's 503 tells it to try again, and this is what makes room.
pub fn start_if_full(state: &Arc<AppState>) {
    if !running(state) {
        let _ = start(state, "live_segment_full");
    }
}

fn stage_name(stage: BuildStage) -> &'static str {
    match stage {
        BuildStage::Validated => "validated",
        BuildStage::Inserting => "inserting",
        BuildStage::Writing => "writing",
        BuildStage::Committing => "committing",
    }
}

/// Builds the next version from `corpus` and serves it; the new version's number, or `None`
/// when there was nothing to fold.
async fn run(state: &Arc<AppState>, corpus: Arc<Corpus>) -> Result<Option<u64>, String> {
    let st = state.clone();
    let from = corpus.clone();
    let built = tokio::task::spawn_blocking(move || {
        let mut last_stage = None;
        let mut progress = |p: &BuildProgress| {
            update(&st, |s| {
                let name = stage_name(p.stage);
                if last_stage != Some(name) {
                    last_stage = Some(name);
                    s.event("stage", format!("{name}: {} units", p.total));
                }
                s.stage = Some(name);
                s.done = p.done;
                s.total = p.total;
            })
        };
        let compacted = version::compact(
            &from.live_dir,
            &from.identity,
            version::From {
                index: &from.index,
                version: from.version,
                metadata: &from.frozen_metadata,
                live: &from.live,
            },
            &mut progress,
        )
        .map_err(|e| e.to_string())?;
        // The speller of the new vocabulary, made before writes are held.
        Ok::<_, String>(compacted.map(|c| {
            let repairer = match (&from.repairer, c.index.vocab()) {
                (Some(r), Some(v)) => Some(Arc::new(r.with_vocabulary(v.clone()))),
                _ => None,
            };
            (c, repairer)
        }))
    })
    .await
    .map_err(|e| format!("compaction task failed: {e}"))??;
    // The build's documents and vectors are freed: give their pages back.
    crate::encoder::release_freed_memory();
    let Some((compacted, repairer)) = built else {
        return Ok(None);
    };
    update(state, |s| {
        s.stage = Some("switching");
        s.to_version = Some(compacted.current.version);
        s.covers = Some(compacted.current.covers);
        s.documents = Some(compacted.index.len());
        s.folded = Some(compacted.folded);
        s.dropped = Some(compacted.dropped);
        s.event(
            "built",
            format!(
                "version {} holds {} documents ({} carried over, {} folded in, {} dropped) up to operation {}",
                compacted.current.version,
                compacted.index.len(),
                compacted.kept,
                compacted.folded,
                compacted.dropped,
                compacted.current.covers
            ),
        );
    });
    // Writes wait from here to the switch: a batch applied meanwhile to the old segment would
    // miss the new one. Searches go on with the corpus they hold.
    let gate = state.write_gate.clone().write_owned().await;
    let st = state.clone();
    let version = tokio::task::spawn_blocking(move || switch(&st, &corpus, compacted, repairer))
        .await
        .map_err(|e| format!("switch task failed: {e}"))??;
    drop(gate);
    Ok(Some(version))
}

/// Serves the compacted version: its live segment replayed from the log's batches after what
/// it holds, the log cut to them, the corpus swapped whole.
fn switch(
    state: &AppState,
    old: &Arc<Corpus>,
    c: Compacted,
    repairer: Option<Arc<crate::repair::Repairer>>,
) -> Result<u64, String> {
    let served = state.corpus().ok_or("the corpus went away")?;
    if !Arc::ptr_eq(&served, old) {
        return Err("the served corpus changed while the new version was built".into());
    }
    let live = old
        .live
        .successor(&c.index, c.current.covers)
        .map_err(|e| e.to_string())?;
    let version = c.current.version;
    c.index.take_over_sign_codes(&old.index);
    let next = Corpus::new(
        Arc::new(c.index),
        Arc::new(live),
        repairer,
        version,
        c.metadata,
        old.live_dir.clone(),
        old.identity.clone(),
    );
    state.metrics.set_corpus(&next.live.stats());
    state.metrics.index_documents.set(next.index.len() as i64);
    state.metrics.corpus_version.set(version as i64);
    state.set_corpus(Arc::new(next));
    if old.version > 0 {
        // The replaced version's files go when the last request holding it ends.
        old.retire(old.index.dir().to_path_buf());
    }
    Ok(version)
}
