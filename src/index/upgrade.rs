//! Upgrading an index written by an older format in place, without re-encoding.
//!
//! Format 1 kept the graph as an hnsw_rs dump (`hnsw.hnsw.graph`, `hnsw.hnsw.data`, the
//! latter a second copy of the vectors) and SHA-256 checksums. Its `docs.bin` and
//! `vectors.f32` are the same as today's, so an upgrade verifies them against the old
//! manifest, builds capot's graph from the stored vectors and replaces the directory
//! atomically (see `build.rs`): a reader sees the old index or the new one.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::build::{IndexBuilder, ProgressFn};
use super::error::IndexError;
use super::manifest::{
    HnswParams, ManifestFields, DOCS_FILE, FORMAT_VERSION, MANIFEST_FILE, VECTORS_FILE,
};
use super::mapped::Mapped;
use super::store::DocStore;
use super::Index;

/// What an upgrade did.
#[derive(Debug)]
pub enum Upgrade {
    /// The index was already at [`FORMAT_VERSION`]; nothing was changed.
    Current,
    /// The index was rebuilt from format `from`.
    Upgraded {
        /// The format version it had.
        from: u64,
        /// The upgraded index.
        index: Box<Index>,
    },
}

#[derive(Deserialize)]
struct V1Manifest {
    capot_version: String,
    encoder_fingerprint: String,
    encoder_name: String,
    dimension: usize,
    count: usize,
    hnsw: V1Hnsw,
    files: BTreeMap<String, V1File>,
}

#[derive(Deserialize)]
struct V1Hnsw {
    m: usize,
    ef_construction: usize,
    ef_search: usize,
}

#[derive(Deserialize)]
struct V1File {
    bytes: u64,
    sha256: String,
}

/// Upgrades the index at `dir` to the current format (see the module documentation).
pub fn upgrade(dir: &Path, progress: ProgressFn<'_>) -> Result<Upgrade, IndexError> {
    let path = dir.join(MANIFEST_FILE);
    let invalid = |reason: String| IndexError::InvalidManifest {
        path: path.clone(),
        reason,
    };
    let text = std::fs::read_to_string(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            IndexError::MissingManifest(dir.to_path_buf())
        } else {
            IndexError::io(&path, e)
        }
    })?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
    let version = value.get("format_version").and_then(|v| v.as_u64());
    match version {
        Some(v) if v == u64::from(FORMAT_VERSION) => return Ok(Upgrade::Current),
        Some(1) => {}
        Some(found) => {
            return Err(IndexError::UnsupportedVersion {
                found,
                supported: FORMAT_VERSION,
            })
        }
        None => return Err(invalid("format_version is missing".into())),
    }
    let old: V1Manifest = serde_json::from_value(value).map_err(|e| invalid(e.to_string()))?;
    let file = |name: &str| {
        old.files
            .get(name)
            .ok_or_else(|| invalid(format!("files has no entry for {name}")))
    };
    let values = old
        .count
        .checked_mul(old.dimension)
        .filter(|&v| v > 0)
        .ok_or_else(|| invalid("count × dimension is 0 or overflows".into()))?;
    for name in [DOCS_FILE, VECTORS_FILE] {
        verify_sha256(&dir.join(name), file(name)?)?;
    }
    let store = DocStore::read(&dir.join(DOCS_FILE), old.count, None)?;
    let docs = (0..store.len())
        .filter_map(|i| store.get(i).map(|d| d.to_document()))
        .collect();
    drop(store);
    let vectors = Mapped::<f32>::open(&dir.join(VECTORS_FILE), Some(values))?
        .as_slice()
        .to_vec();
    let fields = ManifestFields {
        encoder_fingerprint: old.encoder_fingerprint,
        encoder_name: old.encoder_name,
        dimension: old.dimension,
        capot_version: old.capot_version,
    };
    let params = HnswParams {
        m: old.hnsw.m,
        ef_construction: old.hnsw.ef_construction,
        ef_search: old.hnsw.ef_search,
        ..HnswParams::default()
    };
    let index = IndexBuilder::new(dir, fields)
        .params(params)
        .overwrite(true)
        .build(docs, vectors, progress)?;
    Ok(Upgrade::Upgraded {
        from: 1,
        index: Box::new(index),
    })
}

/// Checks size and SHA-256 of a format-1 file.
fn verify_sha256(path: &Path, expected: &V1File) -> Result<(), IndexError> {
    let mut f = std::fs::File::open(path).map_err(|e| super::fileio::open_error(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(|e| IndexError::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        bytes += n as u64;
    }
    if bytes != expected.bytes {
        return Err(IndexError::corrupt(
            path,
            format!(
                "size is {bytes} bytes, the manifest says {}",
                expected.bytes
            ),
        ));
    }
    let actual = hex::encode(hasher.finalize());
    if !actual.eq_ignore_ascii_case(&expected.sha256) {
        return Err(IndexError::ChecksumMismatch {
            path: path.to_path_buf(),
            expected: expected.sha256.clone(),
            actual,
        });
    }
    Ok(())
}
