//! `index.json`: what the index was built from and with, and the size and
//! SHA-256 of every data file. It is written last, so its presence marks a
//! complete index.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::IndexError;

/// Format version written by this code; `Index::load` refuses any other.
pub const FORMAT_VERSION: u32 = 1;
/// File name of the manifest inside an index directory.
pub const MANIFEST_FILE: &str = "index.json";
/// Document store file.
pub const DOCS_FILE: &str = "docs.bin";
/// Raw vectors: little-endian f32, `count × dimension`, row-major, no header.
pub const VECTORS_FILE: &str = "vectors.f32";
/// hnsw_rs dump basename; it writes `<basename>.hnsw.graph` and `<basename>.hnsw.data`.
pub const HNSW_BASENAME: &str = "hnsw";
/// hnsw_rs graph file.
pub const HNSW_GRAPH_FILE: &str = "hnsw.hnsw.graph";
/// hnsw_rs data file (a second copy of the vectors, in hnsw_rs's own format).
pub const HNSW_DATA_FILE: &str = "hnsw.hnsw.data";
/// Layers of the hnsw_rs graph. hnsw_rs 0.3.5 can only dump graphs built with
/// its maximum of 16 layers, so this is fixed.
pub const MAX_LAYERS: usize = 16;
/// Name of the hnsw_rs distance the graph is built with (checked on reload).
pub const HNSW_DISTANCE: &str = "DistDot";
/// Library and version the dump is written with.
pub const HNSW_LIBRARY: &str = "hnsw_rs 0.3.5";

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
}

impl Default for HnswParams {
    /// M=16, ef_construction=200, ef_search=64 (recall@10 ≈ 0.92 on 10k MiniLM vectors).
    fn default() -> Self {
        HnswParams {
            m: 16,
            ef_construction: 200,
            ef_search: 64,
        }
    }
}

impl HnswParams {
    /// Rejects values hnsw_rs cannot handle (it exits the process on m > 256
    /// and stores m in one byte).
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
    /// Number of graph layers (fixed by hnsw_rs).
    pub max_layers: usize,
    /// hnsw_rs distance type name.
    pub distance: String,
    /// Library that wrote the dump.
    pub library: String,
}

/// Size and SHA-256 of one data file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileInfo {
    /// Size in bytes.
    pub bytes: u64,
    /// Lower-case hex SHA-256.
    pub sha256: String,
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
        if self.hnsw.max_layers != MAX_LAYERS {
            return Err(format!(
                "hnsw.max_layers is {}, expected {MAX_LAYERS}",
                self.hnsw.max_layers
            ));
        }
        if self.hnsw.distance != HNSW_DISTANCE {
            return Err(format!(
                "hnsw.distance is {:?}, expected {HNSW_DISTANCE:?}",
                self.hnsw.distance
            ));
        }
        let expected_vec_bytes = (self.count as u64)
            .checked_mul(self.dimension as u64)
            .and_then(|x| x.checked_mul(4))
            .ok_or("count × dimension overflows")?;
        for name in [DOCS_FILE, VECTORS_FILE, HNSW_GRAPH_FILE, HNSW_DATA_FILE] {
            if !self.files.contains_key(name) {
                return Err(format!("files has no entry for {name}"));
            }
        }
        if let Some(v) = &self.vocab {
            for name in [&v.words_file, &v.pairs_file] {
                if !self.files.contains_key(name.as_str()) {
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
        let tmp = dir.join(format!("{MANIFEST_FILE}.tmp-{}", std::process::id()));
        self.write_as(&tmp)?;
        let path = dir.join(MANIFEST_FILE);
        std::fs::rename(&tmp, &path).map_err(|e| IndexError::io(&path, e))?;
        super::fileio::sync_dir(dir)
    }

    fn write_as(&self, path: &Path) -> Result<(), IndexError> {
        let path = path.to_path_buf();
        let mut text =
            serde_json::to_string_pretty(self).map_err(|e| IndexError::InvalidManifest {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        text.push('\n');
        let mut w = super::fileio::HashingWriter::create(&path)?;
        w.put(text.as_bytes())?;
        w.finish()?;
        Ok(())
    }
}
