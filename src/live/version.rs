//! Frozen versions of a live corpus: a compaction folds the batches of the log into a new frozen
//! index (frozen + live − deleted, graph and vocabulary included), and `CURRENT` names the one a
//! start serves.
//!
//! Layout under the live corpus's directory (`<data-dir>/corpus/`):
//!
//! ```text
//! wal.log                 the log of the index as built, through every version
//! CURRENT                 {"version": N, "covers": S, "base": identity}, replaced atomically
//! versions/v000001/       version N: an index directory, as `capot index build` writes one,
//!                         and metadata.json (the documents' metadata, which the index lacks)
//! ```
//!
//! A version holds every batch up to operation id `covers`. Its order of writing makes each
//! crash safe: the version directory is complete and synced before `CURRENT` names it (a crash
//! before leaves the old version and the whole log); the log keeps the batches it holds until
//! `CURRENT` is durable, and a start skips those (a crash between serves the new version and
//! replays only the rest); the log is then cut to the batches after `covers`, swapped whole.
//! Tombstones are batches of the log, so a deleted document stays deleted until the version
//! that drops it is the one served.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{crash_point, LiveCorpus, LiveDocument, LiveError, Operation};
use crate::index::{
    BuildProgress, Document, HnswParams, Index, IndexBuilder, IndexManifest, ManifestFields,
};

/// Directory of the compacted versions, beside the log.
pub const VERSIONS_DIR: &str = "versions";
/// The file that names the version served.
pub const CURRENT_FILE: &str = "CURRENT";
/// The documents' metadata in a version directory (`{"id": metadata, ...}`).
pub const METADATA_FILE: &str = "metadata.json";

/// What `CURRENT` says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Current {
    /// The version served, from 1.
    pub version: u64,
    /// The last operation id the version holds.
    pub covers: u64,
    /// The identity of the index as built ([`super::index_identity`]), whose log this is.
    pub base: String,
}

/// The version a start serves: the index as built, or the newest compacted one.
pub struct Served {
    pub index: Index,
    /// 0 for the index as built.
    pub version: u64,
    /// The last operation id the version holds (0 for the index as built).
    pub covers: u64,
    /// The version's directory under the data directory (`None` for the index as built).
    pub dir: Option<PathBuf>,
    /// The metadata of its documents that had any.
    pub metadata: HashMap<String, Value>,
}

/// The directory of version `n`.
pub fn version_dir(live_dir: &Path, n: u64) -> PathBuf {
    live_dir.join(VERSIONS_DIR).join(format!("v{n:06}"))
}

fn io(path: &Path, e: impl std::fmt::Display) -> LiveError {
    LiveError::Io(format!("{}: {e}", path.display()))
}

/// The JSON at `path`, `None` when there is no such file.
fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, LiveError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| LiveError::Log(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(path, e)),
    }
}

/// `CURRENT` in `live_dir`, if a compaction has written one.
pub fn read_current(live_dir: &Path) -> Result<Option<Current>, LiveError> {
    read_json(&live_dir.join(CURRENT_FILE))
}

/// Opens what a start serves for the index built at `base` with the live corpus in
/// `live_dir`: the version `CURRENT` names, or the index as built. What a compaction that did
/// not finish left in `versions/` is removed.
pub fn open_served(base: &Path, live_dir: &Path) -> Result<(Served, String), LiveError> {
    let identity = super::index_identity(&IndexManifest::read(base).map_err(|e| io(base, e))?);
    let current = read_current(live_dir)?;
    if let Some(c) = &current {
        if c.base != identity {
            return Err(LiveError::Log(format!(
                "{}: its versions extend index {}, not {} ({identity}); start with the index \
                 they were compacted from, or give this one its own --data-dir",
                live_dir.join(CURRENT_FILE).display(),
                c.base,
                base.display()
            )));
        }
    }
    let keep = current.as_ref().map(|c| version_dir(live_dir, c.version));
    remove_stale(live_dir, keep.as_deref());
    let served = match current {
        None => Served {
            index: Index::load(base).map_err(|e| io(base, e))?,
            version: 0,
            covers: 0,
            dir: None,
            metadata: HashMap::new(),
        },
        Some(c) => {
            let dir = version_dir(live_dir, c.version);
            let mut index = Index::load(&dir).map_err(|e| io(&dir, e))?;
            let metadata = read_metadata(&dir)?;
            if !metadata.is_empty() && !index.has_metadata() {
                // A version compacted before the index kept metadata: store it in the index
                // once, so filters see the frozen documents' metadata.
                let mut payload = Vec::with_capacity(metadata.len());
                for (id, m) in &metadata {
                    if let Some(i) = index.index_of(id).map_err(|e| io(&dir, e))? {
                        payload.push((i, m.clone()));
                    }
                }
                let fields = index.payload_fields();
                drop(index);
                Index::set_payload(&dir, payload.into_iter(), fields).map_err(|e| io(&dir, e))?;
                index = Index::load(&dir).map_err(|e| io(&dir, e))?;
            }
            tracing::info!(version = c.version, covers = c.covers, dir = %dir.display(), "serving a compacted version");
            Served {
                index,
                version: c.version,
                covers: c.covers,
                dir: Some(dir),
                metadata,
            }
        }
    };
    Ok((served, identity))
}

/// Removes every entry of `versions/` but `keep`: older versions, and what an interrupted
/// compaction left. Failures are logged: they cost disk, not correctness.
fn remove_stale(live_dir: &Path, keep: Option<&Path>) {
    let Ok(entries) = std::fs::read_dir(live_dir.join(VERSIONS_DIR)) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if Some(path.as_path()) != keep {
            tracing::info!(path = %path.display(), "removing a version no longer served");
            let removed = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            if let Err(e) = removed {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove an old version");
            }
        }
    }
}

fn read_metadata(dir: &Path) -> Result<HashMap<String, Value>, LiveError> {
    Ok(read_json(&dir.join(METADATA_FILE))?.unwrap_or_default())
}

/// What a compaction built.
pub struct Compacted {
    pub index: Index,
    pub current: Current,
    pub dir: PathBuf,
    pub metadata: HashMap<String, Value>,
    /// Frozen documents carried over.
    pub kept: usize,
    /// Live documents folded in.
    pub folded: usize,
    /// Frozen documents dropped (deleted or replaced).
    pub dropped: usize,
}

/// The version served now, as a compaction starts from it.
pub struct From<'a> {
    pub index: &'a Index,
    pub version: u64,
    pub metadata: &'a HashMap<String, Value>,
    pub live: &'a LiveCorpus,
}

/// Builds version `from.version + 1` in `live_dir` from the served version and every durable
/// batch of the log after the one it holds, and makes `CURRENT` name it. `None` when the log
/// holds no batch to fold. Writes go on meanwhile: what lands after the batches taken stays in
/// the log for the successor's segment ([`LiveCorpus::successor`]).
pub fn compact(
    live_dir: &Path,
    identity: &str,
    from: From<'_>,
    progress: &mut dyn FnMut(&BuildProgress),
) -> Result<Option<Compacted>, LiveError> {
    // A switch that failed after `CURRENT` named its version leaves the old one served: a
    // version built from it now would take the number `CURRENT` names.
    let named = read_current(live_dir)?.map_or(0, |c| c.version);
    if named != from.version {
        return Err(LiveError::Log(format!(
            "{} names version {named} but version {} is served (a compaction's switch failed); \
             restart capot to serve version {named}",
            live_dir.join(CURRENT_FILE).display(),
            from.version
        )));
    }
    let index = from.index;
    let start = from.live.covers();
    let covers = from.live.wal().durable_seq();
    if covers <= start {
        return Ok(None);
    }
    // The batches in order: the last write of each id wins, as the segment applies them.
    let mut latest: HashMap<String, Option<LiveDocument>> = HashMap::new();
    for r in from.live.wal().records(start + 1..=covers)? {
        match r.operation {
            Operation::Upsert(docs) => {
                for d in docs {
                    latest.insert(d.id.clone(), Some(d));
                }
            }
            Operation::Delete(ids) => {
                for id in ids {
                    latest.insert(id, None);
                }
            }
        }
    }
    let dim = index.dimension();
    let mut docs = Vec::with_capacity(index.len() + latest.len());
    let mut vectors = Vec::with_capacity((index.len() + latest.len()) * dim);
    let mut metadata = HashMap::new();
    // (position in `docs`, metadata): the new version's payload.bin.
    let mut payload: Vec<(usize, Value)> = Vec::new();
    let (mut kept, mut dropped) = (0, 0);
    let read_error = |e: crate::index::IndexError| LiveError::Io(format!("frozen index: {e}"));
    for i in 0..index.len() {
        let Some(d) = index.document(i).map_err(read_error)? else {
            continue;
        };
        if latest.contains_key(&d.id) {
            dropped += 1;
            continue;
        }
        let v = index
            .vector(i)
            .ok_or_else(|| LiveError::Io(format!("frozen index: no vector {i}")))?;
        if let Some(m) = from
            .metadata
            .get(&d.id)
            .cloned()
            .or_else(|| index.metadata(i))
        {
            payload.push((docs.len(), m.clone()));
            metadata.insert(d.id.clone(), m);
        }
        vectors.extend_from_slice(v);
        docs.push(d);
        kept += 1;
    }
    let mut live: Vec<LiveDocument> = latest.into_values().flatten().collect();
    // A reproducible order: the version's internal ids do not depend on a hash map's.
    live.sort_by(|a, b| a.id.cmp(&b.id));
    let folded = live.len();
    for d in live {
        if let Some(m) = d.metadata {
            payload.push((docs.len(), m.clone()));
            metadata.insert(d.id.clone(), m);
        }
        vectors.extend_from_slice(&d.vector);
        docs.push(Document {
            id: d.id,
            title: d.title,
            text: d.text,
        });
    }
    if docs.is_empty() {
        return Err(LiveError::Log(
            "every document is deleted; a version must hold at least one".into(),
        ));
    }
    let m = index.manifest();
    let fields = ManifestFields {
        encoder_fingerprint: m.encoder_fingerprint.clone(),
        encoder_name: m.encoder_name.clone(),
        dimension: dim,
        capot_version: env!("CARGO_PKG_VERSION").to_string(),
    };
    let params = HnswParams {
        m: m.hnsw.m,
        ef_construction: m.hnsw.ef_construction,
        ef_search: m.hnsw.ef_search,
        seed: m.hnsw.seed,
    };
    let version = from.version + 1;
    let dir = version_dir(live_dir, version);
    let parent = live_dir.join(VERSIONS_DIR);
    std::fs::create_dir_all(&parent).map_err(|e| io(&parent, e))?;
    let built = IndexBuilder::new(&dir, fields)
        .params(params)
        .overwrite(true)
        .graph_vectors(m.graph_vectors)
        .build(docs, vectors, &mut |p| {
            progress(p);
            Ok(())
        })
        .map_err(|e| io(&dir, e))?;
    // The payload and its declared indexes carry over, so filters keep working on the version.
    let payload_fields = index.payload_fields();
    let built = if payload.is_empty() && payload_fields.is_empty() {
        built
    } else {
        drop(built);
        Index::set_payload(&dir, payload.into_iter(), payload_fields).map_err(|e| io(&dir, e))?;
        Index::load(&dir).map_err(|e| io(&dir, e))?
    };
    let meta_path = dir.join(METADATA_FILE);
    let bytes = serde_json::to_vec(&metadata).map_err(|e| io(&meta_path, e))?;
    crate::atomic_file::write(&meta_path, &bytes).map_err(|e| io(&meta_path, e))?;
    crash_point("compact.version_written");
    let current = Current {
        version,
        covers,
        base: identity.to_string(),
    };
    let path = live_dir.join(CURRENT_FILE);
    let bytes = serde_json::to_vec_pretty(&current).map_err(|e| io(&path, e))?;
    crate::atomic_file::write(&path, &bytes).map_err(|e| io(&path, e))?;
    crash_point("compact.current_written");
    Ok(Some(Compacted {
        index: built,
        current,
        dir,
        metadata,
        kept,
        folded,
        dropped,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{HnswParams, IndexBuilder, ManifestFields};

    fn vector(seed: u64, dim: usize) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..dim)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect()
    }

    fn doc(id: &str, seed: u64) -> LiveDocument {
        LiveDocument {
            id: id.into(),
            title: String::new(),
            text: format!("{id} text"),
            metadata: Some(serde_json::json!({ "seed": seed })),
            vector: vector(seed, 8),
        }
    }

    /// An 8-dimensional index of `docs` at `dir`, as built by an encoder of `fingerprint`.
    fn build(dir: &Path, fingerprint: &str, docs: Vec<Document>, vectors: Vec<f32>) {
        IndexBuilder::new(
            dir,
            ManifestFields {
                encoder_fingerprint: fingerprint.into(),
                encoder_name: "test".into(),
                dimension: 8,
                capot_version: "0.0.0-test".into(),
            },
        )
        .params(HnswParams::default())
        .build(docs, vectors, &mut |_| Ok(()))
        .unwrap();
    }

    fn ids(index: &Index) -> Vec<String> {
        let mut v: Vec<String> = (0..index.len())
            .map(|i| index.document(i).unwrap().unwrap().id)
            .collect();
        v.sort();
        v
    }

    /// Twenty frozen documents `f00..f19` (vectors from seeds `seed..seed + 20`) built at `base`.
    fn frozen20(base: &Path, seed: u64) {
        let docs: Vec<Document> = (0..20)
            .map(|i| Document {
                id: format!("f{i:02}"),
                title: String::new(),
                text: format!("frozen {i}"),
            })
            .collect();
        let vectors: Vec<f32> = (0..20).flat_map(|i| vector(seed + i, 8)).collect();
        build(base, "sha256:test", docs, vectors);
    }

    #[test]
    fn a_compaction_keeps_the_metadata_and_every_payload_index() {
        use crate::index::payload::{FieldSchema, FieldType, NumericRange};
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("index");
        frozen20(&base, 2000);
        let fields: std::collections::BTreeMap<String, FieldSchema> =
            [("seed", FieldType::Integer), ("kind", FieldType::Keyword)]
                .into_iter()
                .map(|(k, kind)| {
                    (
                        k.to_string(),
                        FieldSchema {
                            kind,
                            tenant: false,
                        },
                    )
                })
                .collect();
        Index::set_payload(
            &base,
            (0..20).map(|i| (i, serde_json::json!({"kind": "frozen", "seed": 100 + i}))),
            fields.clone(),
        )
        .unwrap();
        let live_dir = dir.path().join("data/corpus");
        let (served, identity) = open_served(&base, &live_dir).unwrap();
        let live = LiveCorpus::open(&live_dir, &identity, &served.index, 0, 100).unwrap();
        let op = Operation::Upsert(vec![doc("new-a", 7), doc("f03", 8)]);
        let seq = live.log(&op).unwrap();
        live.apply(seq, &op, &served.index);
        let no_metadata = HashMap::new();
        let c = compact(
            &live_dir,
            &identity,
            From {
                index: &served.index,
                version: 0,
                metadata: &no_metadata,
                live: &live,
            },
            &mut |_| {},
        )
        .unwrap()
        .expect("a batch to fold");
        assert_eq!(
            c.index.payload_fields(),
            fields,
            "declarations carried over"
        );
        let at = |id: &str| c.index.index_of(id).unwrap().unwrap();
        assert_eq!(
            c.index.metadata(at("f04")),
            Some(serde_json::json!({"kind": "frozen", "seed": 104}))
        );
        // The replaced document has its live metadata, the new one its own.
        assert_eq!(
            c.index.metadata(at("f03")),
            Some(serde_json::json!({"seed": 8}))
        );
        let seed = c.index.payload_indexes();
        let seed = seed.field("seed").unwrap();
        let low = seed.range(&NumericRange {
            lt: Some(100.0),
            ..Default::default()
        });
        let mut got: Vec<u32> = low.iter().collect();
        got.sort();
        let mut want = vec![at("new-a") as u32, at("f03") as u32];
        want.sort();
        assert_eq!(got, want);
        // A start serves the version with them.
        let (again, _) = open_served(&base, &live_dir).unwrap();
        assert_eq!(again.index.payload_fields(), fields);
        assert!(again.index.has_metadata());
    }

    #[test]
    fn a_compacted_version_holds_frozen_plus_live_minus_deleted_and_a_start_serves_it() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("index");
        frozen20(&base, 1000);
        let live_dir = dir.path().join("data/corpus");
        let (served, identity) = open_served(&base, &live_dir).unwrap();
        assert_eq!((served.version, served.covers), (0, 0));
        let live = LiveCorpus::open(&live_dir, &identity, &served.index, 0, 100).unwrap();
        let no_metadata = HashMap::new();
        let nothing = compact(
            &live_dir,
            &identity,
            From {
                index: &served.index,
                version: 0,
                metadata: &no_metadata,
                live: &live,
            },
            &mut |_| {},
        )
        .unwrap();
        assert!(nothing.is_none(), "no batch, no version");
        let write = |live: &LiveCorpus, index: &Index, op: Operation| {
            let seq = live.log(&op).unwrap();
            live.apply(seq, &op, index);
        };
        write(
            &live,
            &served.index,
            Operation::Upsert(vec![doc("new-a", 1), doc("f03", 2)]),
        );
        write(
            &live,
            &served.index,
            Operation::Delete(vec!["f05".into(), "new-a".into()]),
        );
        write(
            &live,
            &served.index,
            Operation::Upsert(vec![doc("new-b", 3)]),
        );
        let mut stages = Vec::new();
        let c = compact(
            &live_dir,
            &identity,
            From {
                index: &served.index,
                version: 0,
                metadata: &no_metadata,
                live: &live,
            },
            &mut |p| stages.push(p.stage),
        )
        .unwrap()
        .expect("batches to fold");
        assert!(!stages.is_empty());
        assert_eq!((c.current.version, c.current.covers), (1, 3));
        assert_eq!((c.folded, c.dropped, c.kept), (2, 2, 18));
        let got = ids(&c.index);
        assert_eq!(got.len(), 20);
        assert!(got.contains(&"new-b".to_string()) && got.contains(&"f03".to_string()));
        assert!(!got.contains(&"f05".to_string()) && !got.contains(&"new-a".to_string()));
        assert_eq!(c.metadata["f03"], serde_json::json!({ "seed": 2 }));
        assert!(c.index.vocab().is_some(), "a version has its vocabulary");
        // A write after the version's batches: the successor's segment holds it alone.
        write(
            &live,
            &served.index,
            Operation::Upsert(vec![doc("after", 4)]),
        );
        let next = live.successor(&c.index, c.current.covers).unwrap();
        assert_eq!(next.stats().delta_documents, 1);
        assert!(next.get("after").is_some() && next.get("new-b").is_none());
        assert_eq!(live.wal().records(..).unwrap().len(), 1, "the log is cut");
        drop((next, live));
        // A start serves version 1 with the batch after it, and removes what no CURRENT names.
        std::fs::create_dir_all(live_dir.join("versions/v000002.tmp-1-1")).unwrap();
        let (served, identity) = open_served(&base, &live_dir).unwrap();
        assert_eq!((served.version, served.covers), (1, 3));
        assert_eq!(served.metadata["f03"], serde_json::json!({ "seed": 2 }));
        assert!(!live_dir.join("versions/v000002.tmp-1-1").exists());
        let live = LiveCorpus::open(&live_dir, &identity, &served.index, 3, 100).unwrap();
        assert_eq!(live.stats().delta_documents, 1);
        assert_eq!(live.log(&Operation::Delete(vec!["x".into()])).unwrap(), 5);
        // Another index's data directory is refused.
        let other = dir.path().join("other");
        build(
            &other,
            "sha256:other",
            vec![Document {
                id: "o".into(),
                title: String::new(),
                text: "o".into(),
            }],
            vector(7, 8),
        );
        let err = open_served(&other, &live_dir).err().expect("refused");
        assert!(err.to_string().contains("compacted from"), "{err}");
    }
}
