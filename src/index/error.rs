//! Errors of the index module.

use std::path::PathBuf;

/// Everything that can go wrong while building, loading or searching an index.
///
/// Every failure on user input or on-disk content maps to one of these; the
/// module never panics on them.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// An operating-system I/O error on a named path.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The directory has no `index.json`: not an index, or an interrupted build.
    #[error("{0} is not an index directory: index.json is missing (not an index, or an interrupted build)")]
    MissingManifest(PathBuf),
    /// `index.json` exists but cannot be parsed or has inconsistent values.
    #[error("invalid index manifest {path}: {reason}")]
    InvalidManifest {
        /// Path of the manifest.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The manifest was written by an incompatible format version.
    #[error(
        "index format version {found} is not supported (this build reads version {supported}; `capot index upgrade <dir>` converts a version 1 index without re-encoding)"
    )]
    UnsupportedVersion {
        /// Version found in the manifest.
        found: u64,
        /// Version this code reads and writes.
        supported: u32,
    },
    /// A data file is missing, truncated, or structurally invalid.
    #[error("corrupt index file {path}: {reason}")]
    Corrupt {
        /// The offending file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A data file's BLAKE3 hash does not match the manifest.
    #[error("checksum mismatch for {path}: manifest says {expected}, file hashes to {actual}")]
    ChecksumMismatch {
        /// The offending file.
        path: PathBuf,
        /// Hex BLAKE3 recorded in the manifest.
        expected: String,
        /// Hex BLAKE3 of the file as read.
        actual: String,
    },
    /// A vector has the wrong number of components.
    #[error("dimension mismatch: the index has dimension {expected}, got {got}")]
    DimensionMismatch {
        /// Index dimension.
        expected: usize,
        /// Length of the given vector.
        got: usize,
    },
    /// Build called with no documents.
    #[error("cannot build an index from an empty corpus (0 documents)")]
    EmptyCorpus,
    /// Invalid build input (count mismatch, duplicate or empty id, bad vector, bad parameter).
    #[error("invalid build input: {0}")]
    InvalidInput(String),
    /// Invalid query (non-finite or zero vector).
    #[error("invalid query: {0}")]
    InvalidQuery(String),
    /// A document id that an earlier document of the same build already has.
    #[error("duplicate document id {id:?} (document {first} has it already)")]
    DuplicateId {
        /// The id.
        id: String,
        /// Index of the earlier document with this id.
        first: usize,
    },
    /// The output directory exists and overwrite was not requested.
    #[error("output directory {0} already exists (set overwrite to replace it)")]
    AlreadyExists(PathBuf),
    /// The build was stopped by its progress callback.
    #[error("build cancelled: {0}")]
    Cancelled(String),
    /// The graph build failed (a worker thread panicked).
    #[error("HNSW graph error: {0}")]
    Hnsw(String),
}

impl IndexError {
    /// Wraps an I/O error with the path it happened on.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        IndexError::Io {
            path: path.into(),
            source,
        }
    }

    /// A structural problem in a data file.
    pub(crate) fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        IndexError::Corrupt {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// Turns a caught panic payload into a message.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}
