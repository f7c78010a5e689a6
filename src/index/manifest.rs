//! `index.json`: what the index was built from and with, and the size and
//! SHA-256 of every data file. It is written last, so its presence marks a
//! complete index.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::IndexError;

/// Format version written by this code; `Index::load` refuses any other. Version 1 held an
/// hnsw_rs dump; `capot index upgrade` turns it into version 2 without re-encoding.
pub const FORMAT_VERSION: u32 = 2;
/// File name of the manifest inside an index directory.
pub const MANIFEST_FILE: &str = "index.json";
/// Document store file.
pub const DOCS_FILE: &str = "docs.bin";
/// Raw vectors: little-endian f32, `count × dimension`, row-major, no header.
pub const VECTORS_FILE: &str = "vectors.f32";
pub use super::graph::GRAPH_FILE;
/// What scores graph neighbours: the dot product of unit vectors.
pub const GRAPH_DISTANCE: &str = "dot";
/// What wrote the graph (recorded in the manifest).
pub const GRAPH_LIBRARY: &str = "capot hnsw, graph.bin layout 1";

/// Fields of the manifest that only the caller knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestFields {
    /// Fingerprint of the document encoder the vectors come from (query
    /// encoders must be aligned to the same fingerprint).
    pub encoder_fingerprint: String,
    /// Human-readable document-encoder name.
    pub encoder_name: String,
    /// Vector dimension (checked against the vectors given to the build).
    pub dimension: usize,
    /// Version of capot that builds the index.
    pub capot_version: String,
}

/// HNSW construction and search parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HnswParams {
    /// Max connections per node and layer (layer 0 keeps 2×m). 2..=255.
    pub m: usize,
    /// Candidate list size during construction.
    pub ef_construction: usize,
    /// Default candidate list size for searches (what a server should use
    /// when the request does not say).
    pub ef_search: usize,
    /// Seed of the nodes' level draw. The same vectors, parameters and seed give the same
    /// levels (and, built on one thread, the same graph); another seed gives another graph of
    /// the same law, which is how a benchmark measures the spread between builds.
    #[serde(default = "default_level_seed")]
    pub seed: u64,
}

/// The level seed of an index that does not name one ([`HnswParams::default`], and every
/// index built before the seed was recorded).
pub const DEFAULT_LEVEL_SEED: u64 = 0x5eed_ca90_7000_0001;

fn default_level_seed() -> u64 {
    DEFAULT_LEVEL_SEED
}

impl Default for HnswParams {
    /// M=16, ef_construction=200, ef_search=64 (recall@10 ≈ 0.92 on 10k MiniLM vectors),
    /// [`DEFAULT_LEVEL_SEED`].
    fn default() -> Self {
        HnswParams {
            m: 16,
            ef_construction: 200,
            ef_search: 64,
            seed: DEFAULT_LEVEL_SEED,
        }
    }
}

impl HnswParams {
    /// Rejects values outside what the graph supports (m in 2..=255, ef ≥ 1).
    pub fn validate(&self) -> Result<(), IndexError> {
        if !(2..=255).contains(&self.m) {
            return Err(IndexError::InvalidInput(format!(
                "HNSW m must be in 2..=255, got {}",
                self.m
            )));
        }
        if self.ef_construction == 0 || self.ef_search == 0 {
            return Err(IndexError::InvalidInput(
                "HNSW ef_construction and ef_search must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// Similarity metric. Only cosine exists: vectors are L2-normalised at build
/// time and scored by dot product.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Cosine similarity = dot product of L2-normalised vectors.
    Cosine,
}

/// HNSW section of the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HnswInfo {
    /// Max connections per node and layer.
    pub m: usize,
    /// Construction candidate list size.
    pub ef_construction: usize,
    /// Default search candidate list size.
    pub ef_search: usize,
    /// Seed of the level draw ([`HnswParams::seed`]; absent in manifests written before it
    /// was recorded, which were all built with [`DEFAULT_LEVEL_SEED`]).
    #[serde(default = "default_level_seed")]
    pub seed: u64,
    /// Highest level of the built graph (layer 0 is the bottom).
    pub top_level: usize,
    /// How neighbours are scored ([`GRAPH_DISTANCE`]).
    pub distance: String,
    /// What wrote the graph ([`GRAPH_LIBRARY`]).
    pub library: String,
}

/// Size and BLAKE3 hash of one data file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileInfo {
    /// Size in bytes.
    pub bytes: u64,
    /// Lower-case hex BLAKE3 (fast enough to verify a 1M-document index at start-up).
    pub blake3: String,
}

/// The index manifest, serialised as `index.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexManifest {
    /// On-disk format version ([`FORMAT_VERSION`]).
    pub format_version: u32,
    /// capot version that built the index.
    pub capot_version: String,
    /// Document-encoder fingerprint.
    pub encoder_fingerprint: String,
    /// Document-encoder name.
    pub encoder_name: String,
    /// Vector dimension.
    pub dimension: usize,
    /// Similarity metric.
    pub metric: Metric,
    /// Number of documents (= vectors = graph points).
    pub count: usize,
    /// HNSW parameters.
    pub hnsw: HnswInfo,
    /// Precision of the vectors the graph walk reads (a float16 or int8 copy of `vectors.f32`,
    /// re-scored exactly), chosen at build time.
    #[serde(default)]
    pub graph_vectors: super::quantized::GraphVectors,
    /// Wall-clock seconds the build took (graph plus files).
    pub build_seconds: f64,
    /// Creation time, unix seconds.
    pub created_unix: u64,
    /// Creation time, RFC 3339 UTC.
    pub created_at: String,
    /// Data files by name.
    pub files: BTreeMap<String, FileInfo>,
    /// The corpus vocabulary for query repair; absent in indexes built before it existed
    /// (`capot index vocab` adds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vocab: Option<super::vocab::VocabInfo>,
    /// The declared payload indexes (the metadata itself is `payload.bin`, in `files` when any
    /// document has metadata); absent in indexes built before filters existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<super::payload::PayloadInfo>,
}

impl IndexManifest {
    /// Reads and validates `dir/index.json` (version first, then fields).
    pub fn read(dir: &Path) -> Result<Self, IndexError> {
        let path = dir.join(MANIFEST_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(if dir.is_dir() {
                    IndexError::MissingManifest(dir.to_path_buf())
                } else {
                    IndexError::io(
                        dir,
                        std::io::Error::new(
                            std::io::ErrorKind::NotFound,
                            "index directory does not exist",
                        ),
                    )
                });
            }
            Err(e) => return Err(IndexError::io(&path, e)),
        };
        let invalid = |reason: String| IndexError::InvalidManifest {
            path: path.clone(),
            reason,
        };
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        match value.get("format_version").and_then(|v| v.as_u64()) {
            Some(v) if v == u64::from(FORMAT_VERSION) => {}
            Some(found) => {
                return Err(IndexError::UnsupportedVersion {
                    found,
                    supported: FORMAT_VERSION,
                })
            }
            None => return Err(invalid("format_version is missing".into())),
        }
        let m: IndexManifest = serde_json::from_value(value).map_err(|e| invalid(e.to_string()))?;
        m.check().map_err(invalid)?;
        Ok(m)
    }

    /// Internal consistency of the fields.
    fn check(&self) -> Result<(), String> {
        if self.dimension == 0 {
            return Err("dimension is 0".into());
        }
        if self.count == 0 {
            return Err("count is 0".into());
        }
        if u32::try_from(self.count).is_err() {
            return Err(format!("count {} exceeds u32", self.count));
        }
        if !(2..=255).contains(&self.hnsw.m) {
            return Err(format!("hnsw.m {} out of range 2..=255", self.hnsw.m));
        }
        if self.hnsw.distance != GRAPH_DISTANCE {
            return Err(format!(
                "hnsw.distance is {:?}, expected {GRAPH_DISTANCE:?}",
                self.hnsw.distance
            ));
        }
        let expected_vec_bytes = (self.count as u64)
            .checked_mul(self.dimension as u64)
            .and_then(|x| x.checked_mul(4))
            .ok_or("count × dimension overflows")?;
        for name in [DOCS_FILE, VECTORS_FILE, GRAPH_FILE] {
            if !self.files.contains_key(name) {
                return Err(format!("files has no entry for {name}"));
            }
        }
        if let Some(name) = self.graph_vectors.file() {
            let expected = self.graph_vectors.bytes(self.count, self.dimension) as u64;
            match self.files.get(name) {
                None => {
                    return Err(format!(
                        "graph_vectors needs {name}, but files has no entry for it"
                    ))
                }
                Some(f) if f.bytes != expected => {
                    return Err(format!(
                        "files.{name}.bytes is {}, expected {expected}",
                        f.bytes
                    ))
                }
                Some(_) => {}
            }
        }
        if let Some(v) = &self.vocab {
            for name in v.files() {
                if !self.files.contains_key(name) {
                    return Err(format!("vocab names {name}, but files has no entry for it"));
                }
                if name.contains(['/', '\\']) || name.starts_with('.') {
                    return Err(format!("vocab file name {name:?} is not a plain file name"));
                }
            }
        }
        if self.files[VECTORS_FILE].bytes != expected_vec_bytes {
            return Err(format!(
                "files.{VECTORS_FILE}.bytes is {}, but count × dimension × 4 = {expected_vec_bytes}",
                self.files[VECTORS_FILE].bytes
            ));
        }
        Ok(())
    }

    /// Writes `dir/index.json` and fsyncs it.
    pub(crate) fn write(&self, dir: &Path) -> Result<(), IndexError> {
        self.write_as(&dir.join(MANIFEST_FILE))
    }

    /// Replaces `dir/index.json` atomically (write a sibling, fsync, rename, fsync the
    /// directory): a reader sees the old manifest or the new one, never a mix.
    pub(crate) fn replace(&self, dir: &Path) -> Result<(), IndexError> {
        let path = dir.join(MANIFEST_FILE);
        crate::atomic_file::write(&path, self.text(&path)?.as_bytes())
            .map_err(|e| IndexError::io(&path, e))
    }

    /// The manifest as written: pretty JSON and a newline.
    fn text(&self, path: &Path) -> Result<String, IndexError> {
        let mut text =
            serde_json::to_string_pretty(self).map_err(|e| IndexError::InvalidManifest {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?;
        text.push('\n');
        Ok(text)
    }

    fn write_as(&self, path: &Path) -> Result<(), IndexError> {
        let path = path.to_path_buf();
        let text = self.text(&path)?;
        let mut w = super::fileio::HashingWriter::create(&path)?;
        w.put(text.as_bytes())?;
        w.finish()?;
        Ok(())
    }
}
