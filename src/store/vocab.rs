//! Query repair's vocabulary for a document store: the word and word-pair counts of the
//! table's titles and texts, built by `capot index vocab --store` or `POST /admin/index/vocab`
//! into the service's data directory (`<data-dir>/store-vocab/<table>/`), since the database
//! holds documents, not a speller.
//!
//! The files are the embedded index's vocabulary files (content-named, checksummed); a small
//! `vocab.json` names them with their checksums, when the vocabulary was built and from how many
//! documents. It is replaced atomically after the files are written, so a reader sees the old
//! vocabulary or the new one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::index::vocab::{VocabInfo, Vocabulary};
use crate::index::FileInfo;

/// The file that names a store vocabulary's files.
pub const VOCAB_JSON: &str = "vocab.json";

/// What `vocab.json` records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoreVocab {
    /// The store it was built from (no password).
    pub location: String,
    /// Documents read.
    pub documents: u64,
    /// RFC 3339 UTC.
    pub built_at: String,
    pub built_unix: u64,
    pub info: VocabInfo,
    pub files: BTreeMap<String, FileInfo>,
}

/// Why a store vocabulary could not be built, written or read.
#[derive(Debug, thiserror::Error)]
pub enum VocabError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Index(#[from] crate::index::IndexError),
    #[error("{path}: {message}")]
    Corrupt { path: PathBuf, message: String },
}

/// `<data_dir>/store-vocab/<table>`.
pub fn vocab_dir(data_dir: &Path, table: &str) -> PathBuf {
    data_dir.join("store-vocab").join(table)
}

/// Counts the words and pairs of `docs` (title, text) and writes them to `dir`, replacing the
/// vocabulary there; files the new one no longer names are removed.
pub fn build(
    dir: &Path,
    location: &str,
    docs: &[(String, String)],
) -> Result<StoreVocab, VocabError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| VocabError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let old = read_record(dir).ok().flatten();
    let mut vocab = Vocabulary::build(docs.iter().map(|(t, x)| (t.as_str(), x.as_str())));
    let (info, files) = vocab.write(dir)?;
    crate::atomic_file::sync_dir(dir).map_err(io(dir))?;
    let now = crate::clock::now_unix();
    let record = StoreVocab {
        location: location.to_string(),
        documents: docs.len() as u64,
        built_at: crate::clock::rfc3339_from_unix(now),
        built_unix: now,
        info,
        files: files.into_iter().collect(),
    };
    let json = serde_json::to_vec_pretty(&record).map_err(|e| VocabError::Corrupt {
        path: dir.join(VOCAB_JSON),
        message: e.to_string(),
    })?;
    let path = dir.join(VOCAB_JSON);
    crate::atomic_file::write(&path, &json).map_err(io(&path))?;
    if let Some(old) = old {
        for name in old.files.keys() {
            if !record.files.contains_key(name) {
                let _ = std::fs::remove_file(dir.join(name));
            }
        }
    }
    Ok(record)
}

fn read_record(dir: &Path) -> Result<Option<StoreVocab>, VocabError> {
    let path = dir.join(VOCAB_JSON);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(VocabError::Io { path, source }),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| VocabError::Corrupt {
            path,
            message: e.to_string(),
        })
}

/// The vocabulary in `dir` (checksums verified), `None` when none was built there.
pub fn load(dir: &Path) -> Result<Option<(Arc<Vocabulary>, StoreVocab)>, VocabError> {
    let Some(record) = read_record(dir)? else {
        return Ok(None);
    };
    let vocab = Vocabulary::read(dir, &record.info, &record.files, true)?;
    Ok(Some((Arc::new(vocab), record)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rebuilt_vocabulary_replaces_the_old_one_and_its_files() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load(dir.path()).unwrap().is_none());
        let docs = vec![
            (
                "Vaccines".to_string(),
                "how vaccines train the immune system".to_string(),
            ),
            (
                String::new(),
                "the immune system fights infection".to_string(),
            ),
        ];
        let first = build(dir.path(), "postgres://x@h:5432/db?table=t", &docs).unwrap();
        let (vocab, record) = load(dir.path()).unwrap().unwrap();
        assert_eq!(record, first);
        assert_eq!(vocab.count("immune"), 2);
        assert_eq!(record.documents, 2);
        let more = vec![(
            String::new(),
            "sourdough needs a lively starter".to_string(),
        )];
        let second = build(dir.path(), "postgres://x@h:5432/db?table=t", &more).unwrap();
        let (vocab, _) = load(dir.path()).unwrap().unwrap();
        assert_eq!((vocab.count("immune"), vocab.count("sourdough")), (0, 1));
        // Only the new vocabulary's files remain (and vocab.json).
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let mut want: Vec<String> = second.files.keys().cloned().collect();
        want.push(VOCAB_JSON.into());
        want.sort();
        assert_eq!(names, want);
        // A damaged file is refused, not served.
        let name = second.files.keys().next().unwrap();
        std::fs::write(dir.path().join(name), b"garbage").unwrap();
        assert!(load(dir.path()).is_err());
    }
}
