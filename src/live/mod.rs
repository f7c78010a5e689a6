//! The live corpus: documents added, replaced and deleted online, beside the frozen index.
//!
//! A batch is written to the write-ahead log ([`wal`]) and fsynced before it is acknowledged,
//! then applied to the live segment ([`segment`]), which searches its documents exactly and hides
//! the frozen documents they replace or delete. On start the log is replayed, so what was
//! acknowledged survives a kill. The frozen index stays as built: the document encoder is frozen,
//! and query encoders aligned to it keep fitting both.

pub mod segment;
pub mod version;
pub mod wal;

use std::path::Path;
use std::sync::{Arc, RwLock};

use crate::index::{Index, IndexManifest};
use segment::{LiveHit, Segment, StoredDocument};
use wal::Wal;

/// File name of the log in the data directory.
pub const WAL_FILE: &str = "wal.log";
/// Live documents the segment holds before writes are refused until a compaction.
pub const DEFAULT_MAX_LIVE_DOCUMENTS: usize = 100_000;

/// Test hook of the crash tests: with `CAPOT_CRASH_AT=<point>` (or `<point>:<n>`, the n-th
/// time), the process kills itself with SIGKILL when it reaches `point` — as a crash there
/// would. Points: `wal.before_sync` (record written, not yet fsynced), `wal.after_sync` (durable,
/// not yet applied or acknowledged). Unset, it costs one relaxed load.
pub(crate) fn crash_point(point: &str) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static AT: std::sync::OnceLock<Option<(String, u64)>> = std::sync::OnceLock::new();
    static HITS: AtomicU64 = AtomicU64::new(0);
    let at = AT.get_or_init(|| {
        let v = std::env::var("CAPOT_CRASH_AT").ok()?;
        let (name, n) = match v.split_once(':') {
            Some((name, n)) => (name.to_string(), n.parse().unwrap_or(1)),
            None => (v, 1),
        };
        Some((name, n))
    });
    if let Some((name, n)) = at {
        if name == point && HITS.fetch_add(1, Ordering::Relaxed) + 1 == *n {
            tracing::warn!(point, "CAPOT_CRASH_AT: killing the process");
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &std::process::id().to_string()])
                .status();
            std::process::abort();
        }
    }
}

/// A document as written: its vector from the document encoder.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveDocument {
    pub id: String,
    pub title: String,
    pub text: String,
    pub metadata: Option<serde_json::Value>,
    pub vector: Vec<f32>,
}

/// One batch: all of it applies, or none.
#[derive(Debug, Clone, PartialEq)]
pub enum Operation {
    /// Add documents, or replace those with the same ids.
    Upsert(Vec<LiveDocument>),
    /// Delete documents by id (unknown ids are no error: the delete is idempotent).
    Delete(Vec<String>),
}

/// Why a write failed or the log could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("{0}")]
    Io(String),
    #[error("write-ahead log: {0}")]
    Log(String),
    /// No space left: nothing of the batch was acknowledged.
    #[error("no space left for the write-ahead log ({0}); nothing of the batch was written")]
    DiskFull(String),
    /// The log cannot vouch for writes any more (a failed fsync); a restart replays it.
    #[error("the write-ahead log stopped taking writes: {0}; restart the server to replay it")]
    LogFailed(String),
    #[error("{0}")]
    TooLarge(String),
    /// The live segment is full until a compaction folds it into a new frozen version.
    #[error("the live segment holds {0} documents, its limit; compact the index to take more")]
    Full(usize),
}

impl LiveError {
    fn from_write(e: std::io::Error, path: &Path) -> Self {
        // ENOSPC, EDQUOT
        if matches!(e.raw_os_error(), Some(28) | Some(122)) {
            LiveError::DiskFull(format!("{}: {e}", path.display()))
        } else {
            LiveError::Io(format!("{}: {e}", path.display()))
        }
    }
}

/// Counts for `/info` and `GET /admin/index`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct LiveStats {
    /// Documents served: frozen − hidden + live.
    pub documents: usize,
    /// Documents in the live segment.
    pub delta_documents: usize,
    /// Ids deleted and not written again since (tombstones, kept until a new version drops
    /// them).
    pub deleted: usize,
    /// Frozen documents a live document replaces or a delete removes, hidden from its answers.
    pub hidden_frozen: usize,
    /// Bytes of the write-ahead log.
    pub log_bytes: u64,
    /// Operation id of the last acknowledged batch (0 when none).
    pub last_operation_id: u64,
    /// Heap bytes the live segment holds.
    pub memory_bytes: usize,
    /// Live documents the segment takes before writes wait for a compaction.
    pub max_live_documents: usize,
}

/// The frozen index's internal index of `id`. A read error of its id table is logged, not
/// hidden: the frozen copy of a document written or deleted then stays visible.
fn frozen_index(index: &Index, id: &str) -> Option<usize> {
    index.index_of(id).unwrap_or_else(|e| {
        tracing::error!(id, error = %e, "cannot look a document up in the frozen index");
        None
    })
}

/// The log and the segment of one frozen version.
pub struct LiveCorpus {
    wal: Arc<Wal>,
    segment: RwLock<Segment>,
    frozen_documents: usize,
    max_live_documents: usize,
    /// The last operation id the frozen version holds (0 for the index as built): the segment
    /// holds the batches after it.
    covers: u64,
    /// Documents of upserts logged and not yet applied: counted against the limit with the
    /// segment's own, so concurrent writers cannot all pass the check before any applies.
    reserved: std::sync::Mutex<usize>,
    /// Operation ids applied past the highest one below which every batch is applied (batches
    /// acknowledged before they are applied, `wait=false`, may be applied out of order).
    applied_above: std::sync::Mutex<std::collections::BTreeSet<u64>>,
    /// That highest id, for searches that must see a write (`after`).
    applied_through: tokio::sync::watch::Sender<u64>,
}

/// What identifies a frozen index to its log: its document encoder and its vectors' hash, so a
/// log is never replayed over another index.
pub fn index_identity(m: &IndexManifest) -> String {
    let vectors = m
        .files
        .get(crate::index::VECTORS_FILE)
        .map_or("", |f| f.blake3.as_str());
    format!("{}/{}/{}", m.encoder_fingerprint, m.count, vectors)
}

impl LiveCorpus {
    /// Opens the log in `data_dir` of the index named `identity` (the index as built, whose
    /// log it is through every compacted version) and replays into a new live segment over
    /// `index`, the version served, the batches after `covers`, the last one it holds.
    pub fn open(
        data_dir: &Path,
        identity: &str,
        index: &Index,
        covers: u64,
        max_live_documents: usize,
    ) -> Result<LiveCorpus, LiveError> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| LiveError::Io(format!("{}: {e}", data_dir.display())))?;
        let path = data_dir.join(WAL_FILE);
        let (wal, recovery) = Wal::open(&path, identity, covers)?;
        let records: Vec<_> = recovery
            .records
            .into_iter()
            .filter(|r| r.seq > covers)
            .collect();
        let live = LiveCorpus::over(Arc::new(wal), index, covers, &records, max_live_documents);
        if !records.is_empty() {
            let s = live.read();
            tracing::info!(
                log = %path.display(),
                batches = records.len(),
                live = s.len(),
                deleted = s.hidden(),
                "write-ahead log replayed"
            );
        }
        Ok(live)
    }

    /// A segment over `index` holding `records`, on `wal`.
    fn over(
        wal: Arc<Wal>,
        index: &Index,
        covers: u64,
        records: &[wal::Record],
        max_live_documents: usize,
    ) -> LiveCorpus {
        let mut segment = Segment::new(index.dimension());
        let frozen = |id: &str| frozen_index(index, id);
        for r in records {
            segment.apply(r.seq, &r.operation, &frozen);
        }
        // Every batch logged so far is in the segment (replayed, or applied before a compaction
        // switched versions: the caller holds the write gate).
        let through = wal.last_seq().max(covers);
        LiveCorpus {
            wal,
            segment: RwLock::new(segment),
            frozen_documents: index.len(),
            max_live_documents,
            covers,
            reserved: std::sync::Mutex::new(0),
            applied_above: Default::default(),
            applied_through: tokio::sync::watch::Sender::new(through),
        }
    }

    /// The live corpus over `index`, a new version that holds every batch up to `covers`: the
    /// log cut to the batches after it (only those are read), replayed into a new segment.
    /// Writes must wait while this runs (the caller holds the write gate), or one applied to
    /// this segment meanwhile would miss the new one.
    pub fn successor(&self, index: &Index, covers: u64) -> Result<LiveCorpus, LiveError> {
        let records = self.wal.retain_after(covers)?;
        crash_point("compact.log_cut");
        Ok(LiveCorpus::over(
            self.wal.clone(),
            index,
            covers,
            &records,
            self.max_live_documents,
        ))
    }

    /// The last operation id the frozen version holds.
    pub fn covers(&self) -> u64 {
        self.covers
    }

    /// The log.
    pub fn wal(&self) -> &Wal {
        &self.wal
    }

    /// Logs `op` durably and returns its operation id; [`LiveCorpus::apply`] makes it visible.
    /// Refused when the segment is full (deletes are always taken: they free room).
    pub fn log(&self, op: &Operation) -> Result<u64, LiveError> {
        let Operation::Upsert(docs) = op else {
            return self.wal.append(op);
        };
        // Reserve room first: the check and the append are two steps, and writers run at once.
        {
            let mut reserved = crate::sync::lock(&self.reserved);
            let live = self.read().len() + *reserved;
            if live + docs.len() > self.max_live_documents {
                return Err(LiveError::Full(live));
            }
            *reserved += docs.len();
        }
        let appended = self.wal.append(op);
        if appended.is_err() {
            self.release(docs.len());
        }
        appended
    }

    /// Gives back room reserved by [`LiveCorpus::log`].
    fn release(&self, documents: usize) {
        let mut reserved = crate::sync::lock(&self.reserved);
        *reserved = reserved.saturating_sub(documents);
    }

    /// Applies a logged batch to the segment.
    pub fn apply(&self, seq: u64, op: &Operation, index: &Index) {
        let frozen = |id: &str| frozen_index(index, id);
        crate::sync::write(&self.segment).apply(seq, op, &frozen);
        // Applied: the documents count in the segment itself now. Released after the segment's
        // lock is let go (`log` takes the two the other way round); meanwhile they count twice.
        if let Operation::Upsert(docs) = op {
            self.release(docs.len());
        }
        let mut above = crate::sync::lock(&self.applied_above);
        above.insert(seq);
        let mut through = *self.applied_through.borrow();
        while above.remove(&(through + 1)) {
            through += 1;
        }
        above.retain(|&s| s > through);
        self.applied_through.send_if_modified(|t| {
            let moved = through > *t;
            *t = (*t).max(through);
            moved
        });
    }

    /// The highest operation id below which every batch is applied: a search that starts now
    /// sees every write up to it.
    pub fn applied_through(&self) -> u64 {
        *self.applied_through.borrow()
    }

    /// Returns once the batch `seq` is applied (at once when it is, or when no such batch was
    /// logged): read-your-writes for a search after a write acknowledged before it was applied
    /// (`wait=false`). The caller bounds the wait (a batch whose log sync failed never is).
    pub async fn applied(&self, seq: u64) {
        if seq > self.wal.last_seq() {
            return;
        }
        let mut through = self.applied_through.subscribe();
        // The sender lives as long as `self`: the wait cannot see it dropped.
        let _ = through.wait_for(|&t| t >= seq).await;
    }

    /// The `k` nearest live documents.
    pub fn search(&self, query: &[f32], k: usize) -> Vec<LiveHit> {
        self.read().search(query, k)
    }

    /// A read view of the segment (for filtering a frozen answer under one consistent state).
    pub fn read(&self) -> std::sync::RwLockReadGuard<'_, Segment> {
        crate::sync::read(&self.segment)
    }

    /// The live document `id`, if the segment has one.
    pub fn get(&self, id: &str) -> Option<StoredDocument> {
        self.read().get(id).cloned()
    }

    /// Counts for `/info` and the admin API.
    pub fn stats(&self) -> LiveStats {
        let s = self.read();
        LiveStats {
            documents: self.frozen_documents - s.hidden().min(self.frozen_documents) + s.len(),
            delta_documents: s.len(),
            deleted: s.tombstones(),
            hidden_frozen: s.hidden(),
            log_bytes: self.wal.bytes(),
            last_operation_id: self.wal.last_seq(),
            memory_bytes: s.heap_bytes(),
            max_live_documents: self.max_live_documents,
        }
    }

    /// Where the log is.
    pub fn log_path(&self) -> &Path {
        self.wal.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{Admitted, Document, HnswParams, IndexBuilder, ManifestFields};
    use crate::query::stages::corpus_search;

    fn unit(rng: &mut u64, dim: usize) -> Vec<f32> {
        let mut v: Vec<f32> = (0..dim)
            .map(|_| {
                *rng ^= *rng << 13;
                *rng ^= *rng >> 7;
                *rng ^= *rng << 17;
                (*rng >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= n);
        v
    }

    /// `n` frozen documents `f0..` with random unit vectors of `dim`, built into an index at
    /// `path` (M 16, the given ef_construction); returns the index and the vectors.
    fn frozen(
        path: &Path,
        n: usize,
        dim: usize,
        rng: &mut u64,
        ef_construction: usize,
    ) -> (Index, Vec<f32>) {
        let docs: Vec<Document> = (0..n)
            .map(|i| Document {
                id: format!("f{i}"),
                title: String::new(),
                text: format!("frozen {i}"),
            })
            .collect();
        let vectors: Vec<f32> = (0..n).flat_map(|_| unit(rng, dim)).collect();
        let index = IndexBuilder::new(
            path,
            ManifestFields {
                encoder_fingerprint: "sha256:test".into(),
                encoder_name: "test".into(),
                dimension: dim,
                capot_version: "0.0.0-test".into(),
            },
        )
        .params(HnswParams {
            m: 16,
            ef_construction,
            ef_search: 64,
            ..HnswParams::default()
        })
        .build(docs, vectors.clone(), &mut |_| Ok(()))
        .unwrap();
        (index, vectors)
    }

    /// Every served document (frozen ones not hidden, live ones) that `admit(id, metadata)`
    /// passes, scored exactly against `q`, best first: the merge a search must equal. Frozen
    /// documents are `f{i}` with row `i` of `vectors` and no metadata given.
    fn exact_merge(
        live: &LiveCorpus,
        vectors: &[f32],
        dim: usize,
        q: &[f32],
        admit: &dyn Fn(&str, Option<&serde_json::Value>) -> bool,
    ) -> Vec<(f32, String)> {
        let segment = live.read();
        let mut all: Vec<(f32, String)> = (0..vectors.len() / dim)
            .filter(|&i| !segment.hides(i) && admit(&format!("f{i}"), None))
            .map(|i| {
                let v = &vectors[i * dim..(i + 1) * dim];
                (q.iter().zip(v).map(|(a, b)| a * b).sum(), format!("f{i}"))
            })
            .chain(
                segment
                    .search(q, usize::MAX)
                    .into_iter()
                    .filter(|h| admit(&h.document.id, h.document.metadata.as_ref()))
                    .map(|h| (h.score, h.document.id)),
            )
            .collect();
        all.sort_by(|a, b| b.0.total_cmp(&a.0));
        all
    }

    #[test]
    fn concurrent_writers_never_pass_the_live_limit() {
        let (n, dim, limit) = (50, 8, 100);
        let mut rng = 0x1234_5678_u64;
        let dir = tempfile::tempdir().unwrap();
        let (index, _) = frozen(&dir.path().join("index"), n, dim, &mut rng, 100);
        let live = LiveCorpus::open(&dir.path().join("data"), "test", &index, 0, limit).unwrap();
        let accepted = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for t in 0..8 {
                let (live, index, accepted) = (&live, &index, &accepted);
                s.spawn(move || {
                    let mut rng = 0x9e37_79b9_u64 + t;
                    for b in 0..10 {
                        let op = Operation::Upsert(
                            (0..7)
                                .map(|j| LiveDocument {
                                    id: format!("w{t}-{b}-{j}"),
                                    title: String::new(),
                                    text: "x".into(),
                                    metadata: None,
                                    vector: unit(&mut rng, dim),
                                })
                                .collect(),
                        );
                        if let Ok(seq) = live.log(&op) {
                            accepted.fetch_add(7, std::sync::atomic::Ordering::SeqCst);
                            live.apply(seq, &op, index);
                        }
                    }
                });
            }
        });
        let accepted = accepted.into_inner();
        assert!(accepted <= limit, "{accepted} documents taken past {limit}");
        assert_eq!(live.read().len(), accepted);
        // 8 writers × 70 documents asked for: the limit was reached, not merely respected.
        assert!(accepted + 7 > limit, "{accepted}");
    }

    #[test]
    fn a_search_after_a_write_waits_until_every_batch_up_to_it_is_applied() {
        use futures_util::FutureExt;
        let (n, dim) = (20, 8);
        let mut rng = 0x5eed_u64;
        let dir = tempfile::tempdir().unwrap();
        let (index, _) = frozen(&dir.path().join("index"), n, dim, &mut rng, 100);
        let data = dir.path().join("data");
        let live = LiveCorpus::open(&data, "test", &index, 0, 100).unwrap();
        let upsert = |id: &str, rng: &mut u64| {
            Operation::Upsert(vec![LiveDocument {
                id: id.into(),
                title: String::new(),
                text: "x".into(),
                metadata: None,
                vector: unit(rng, dim),
            }])
        };
        let (a, b) = (upsert("a", &mut rng), upsert("b", &mut rng));
        let (sa, sb) = (live.log(&a).unwrap(), live.log(&b).unwrap());
        assert_eq!(live.applied_through(), 0);
        // No such batch: nothing to wait for.
        assert!(live.applied(sb + 1).now_or_never().is_some());
        // Acknowledged, applied out of order: the later batch alone is not enough...
        live.apply(sb, &b, &index);
        assert_eq!(live.applied_through(), 0);
        let mut waiting = Box::pin(live.applied(sb));
        assert!(waiting.as_mut().now_or_never().is_none());
        assert!(live.applied(sa).now_or_never().is_none());
        // ...both are.
        live.apply(sa, &a, &index);
        assert_eq!(live.applied_through(), sb);
        assert!(waiting.now_or_never().is_some());
        // Reopened, the log replayed: everything it holds is applied.
        drop(live);
        let live = LiveCorpus::open(&data, "test", &index, 0, 100).unwrap();
        assert_eq!(live.applied_through(), sb);
        assert!(live.applied(sb).now_or_never().is_some());
    }

    #[test]
    fn a_filtered_search_equals_the_exact_filtered_merge_over_ten_thousand_live_documents() {
        use crate::index::payload::{FieldSchema, FieldType};
        use crate::query::filter::Filter;
        use crate::query::stages::Scope;
        use serde_json::json;
        let (n, dim, k, live_n) = (2000, 16, 10, 10_000);
        let mut rng = 0x5eed_f11e_u64;
        let meta = |i: usize, round: usize| json!({"bucket": (i * 7 + round) % 100, "side": if i.is_multiple_of(2) { "even" } else { "odd" }});
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        let (_, vectors) = frozen(&path, n, dim, &mut rng, 100);
        let fields: std::collections::BTreeMap<String, FieldSchema> = [
            (
                "bucket".to_string(),
                FieldSchema {
                    kind: FieldType::Integer,
                    tenant: false,
                },
            ),
            (
                "side".to_string(),
                FieldSchema {
                    kind: FieldType::Keyword,
                    tenant: false,
                },
            ),
        ]
        .into_iter()
        .collect();
        crate::index::Index::set_payload(&path, (0..n).map(|i| (i, meta(i, 0))), fields).unwrap();
        let index = crate::index::Index::load(&path).unwrap();
        let live = LiveCorpus::open(&dir.path().join("data"), "test", &index, 0, 20_000).unwrap();
        let write = |op: Operation| {
            let seq = live.log(&op).unwrap();
            live.apply(seq, &op, &index);
        };
        // 10,000 new documents, a replacement of every tenth frozen one (with other metadata),
        // and deletes of frozen and live documents.
        for round in 0..10 {
            let docs = (0..live_n / 10 + n / 100)
                .map(|j| {
                    let (id, m) = if j < live_n / 10 {
                        let i = round * (live_n / 10) + j;
                        (format!("live-{i}"), meta(i, 1))
                    } else {
                        let i = (round * (n / 100) + j - live_n / 10) * 10 % n;
                        (format!("f{i}"), meta(i, 3))
                    };
                    LiveDocument {
                        text: format!("{id} round {round}"),
                        id,
                        title: String::new(),
                        metadata: Some(m),
                        vector: unit(&mut rng, dim),
                    }
                })
                .collect();
            write(Operation::Upsert(docs));
            write(Operation::Delete(
                (0..20)
                    .map(|j| match j % 2 {
                        0 => format!("f{}", (round * 53 + j * 7) % n),
                        _ => format!("live-{}", round * 997 + j * 31),
                    })
                    .collect(),
            ));
        }
        assert!(live.stats().delta_documents >= live_n - 200);
        let filters = [
            json!({"must": [{"key": "side", "match": {"value": "even"}}]}),
            json!({"must": [{"key": "bucket", "range": {"lt": 3}}]}),
            json!({"must": [{"key": "bucket", "match": {"any": [5, 50]}}], "must_not": [{"key": "side", "match": {"value": "odd"}}]}),
        ];
        for fv in &filters {
            let mut f = Filter::parse(fv, "filter").unwrap();
            f.bind(&index.payload_fields(), false, "filter").unwrap();
            let admitted = Admitted::from(f.admitted_in(&index).unwrap());
            for _ in 0..10 {
                let q = unit(&mut rng, dim);
                let scope = Scope {
                    filter: Some((&f, &admitted)),
                    with_metadata: true,
                    ..Scope::top(k, 64)
                };
                let got = corpus_search(&index, Some(&live), &[&q], scope).unwrap();
                let all = exact_merge(&live, &vectors, dim, &q, &|id, m| {
                    let frozen = id.strip_prefix('f').and_then(|i| i.parse::<usize>().ok());
                    match frozen {
                        Some(i) if m.is_none() => f.admits(id, Some(&meta(i, 0))),
                        _ => f.admits(id, m),
                    }
                });
                let want: Vec<&str> = all.iter().take(k).map(|x| x.1.as_str()).collect();
                let ids: Vec<&str> = got.hits.iter().map(|h| h.id.as_str()).collect();
                assert_eq!(ids, want, "{fv}");
                let report = got.filter.unwrap();
                assert_eq!(report.admitted, Some(all.len() as u64), "{fv}");
                for h in &got.hits {
                    let m = h.metadata.as_ref().expect("with_metadata");
                    assert!(f.admits(&h.id, Some(m)), "{fv}: {} {m}", h.id);
                }
            }
        }
        // A filter no frozen document passes and a live one does: the live segment's exact scan
        // answered it, not the empty plan.
        let mut f = Filter::parse(&json!({"must": [{"has_id": ["live-1"]}]}), "filter").unwrap();
        f.bind(&index.payload_fields(), false, "filter").unwrap();
        let admitted = Admitted::from(f.admitted_in(&index).unwrap());
        let scope = Scope {
            filter: Some((&f, &admitted)),
            ..Scope::top(k, 64)
        };
        let got = corpus_search(&index, Some(&live), &[&unit(&mut rng, dim)], scope).unwrap();
        assert_eq!(got.hits.len(), 1);
        let report = got.filter.unwrap();
        assert_eq!(report.admitted, Some(1));
        assert_eq!(report.strategy, crate::index::Strategy::Exact);
    }

    #[test]
    fn the_merged_answer_is_the_frozen_answer_filtered_merged_with_the_live_one() {
        let (n, dim, k) = (300, 16, 10);
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let dir = tempfile::tempdir().unwrap();
        let (index, vectors) = frozen(&dir.path().join("index"), n, dim, &mut rng, 200);
        let live = LiveCorpus::open(&dir.path().join("data"), "test", &index, 0, 1000).unwrap();
        // New documents, replacements of frozen ones, deletes of frozen and live ones.
        let write = |op: Operation| {
            let seq = live.log(&op).unwrap();
            live.apply(seq, &op, &index);
        };
        for round in 0..6 {
            let docs = (0..20)
                .map(|j| {
                    let id = if j % 4 == 0 {
                        format!("f{}", (round * 37 + j * 11) % n)
                    } else {
                        format!("live-{}", (round * 13 + j) % 50)
                    };
                    LiveDocument {
                        text: format!("{id} round {round}"),
                        id,
                        title: String::new(),
                        metadata: None,
                        vector: unit(&mut rng, dim),
                    }
                })
                .collect();
            write(Operation::Upsert(docs));
            write(Operation::Delete(
                (0..8)
                    .map(|j| {
                        if j % 2 == 0 {
                            format!("f{}", (round * 53 + j * 7) % n)
                        } else {
                            format!("live-{}", (round * 17 + j) % 50)
                        }
                    })
                    .collect(),
            ));
        }
        let stats = live.stats();
        assert!(
            stats.delta_documents > 20 && stats.hidden_frozen > 20,
            "{stats:?}"
        );
        for _ in 0..40 {
            let q = unit(&mut rng, dim);
            let got = corpus_search(
                &index,
                Some(&live),
                &[&q],
                crate::query::stages::Scope::top(k, n),
            )
            .unwrap()
            .hits;
            // Expected: every served document scored exactly, the best k.
            let all = exact_merge(&live, &vectors, dim, &q, &|_, _| true);
            let want: Vec<&str> = all.iter().take(k).map(|x| x.1.as_str()).collect();
            let ids: Vec<&str> = got.iter().map(|h| h.id.as_str()).collect();
            assert_eq!(ids, want);
            for (h, (s, _)) in got.iter().zip(&all) {
                assert!((h.score - s).abs() < 1e-4);
            }
            // No id twice, ranks in order.
            let unique: std::collections::HashSet<_> = ids.iter().collect();
            assert_eq!(unique.len(), ids.len());
            assert!(got.iter().enumerate().all(|(i, h)| h.rank == i + 1));
        }
    }
}
