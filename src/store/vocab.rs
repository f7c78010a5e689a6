//! Query repair's vocabulary for a document store: the word and word-pair counts of the
//! table's titles and texts, built by `capot index vocab --store` or `POST /admin/index/vocab`
//! into the service's data directory (`<data-dir>/store-vocab/<table>/`), since the database
//! holds documents, not a speller.
//!
//! The files are the embedded index's vocabulary files (content-named, checksummed); a small
//! `vocab.json` names them with their checksums, when the vocabulary was built and from how many
//! documents. It is replaced atomically after the files are written, so a reader sees the old
//! vocabulary or the new one.
//!
//! The table's titles and texts are streamed into a spill file beside the vocabulary
//! ([`TextSpill`]) and counted from its mapping, not held in memory: the counting reads them
//! twice, and a table's text can be larger than the machine's memory.

use std::collections::BTreeMap;
use std::io::Write;
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

/// Documents' titles and texts written one after the other into an unnamed file in a
/// vocabulary's directory (removed when dropped), to be counted from its mapping
/// ([`TextSpill::finish`]). Each record: the title's length (u32, little-endian), the title,
/// the text's length, the text.
pub struct TextSpill {
    file: std::io::BufWriter<tempfile::NamedTempFile>,
    documents: u64,
}

impl TextSpill {
    /// An empty spill in `dir` (created if missing).
    pub fn create(dir: &Path) -> Result<TextSpill, VocabError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let file = tempfile::Builder::new()
            .prefix(".texts-")
            .suffix(".spill")
            .tempfile_in(dir)
            .map_err(io(dir))?;
        Ok(TextSpill {
            file: std::io::BufWriter::with_capacity(1 << 20, file),
            documents: 0,
        })
    }

    /// Appends one document's title and text.
    pub fn push(&mut self, title: &str, text: &str) -> std::io::Result<()> {
        for part in [title, text] {
            let len = u32::try_from(part.len()).map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "a title or text of 4 GiB or more",
                )
            })?;
            self.file.write_all(&len.to_le_bytes())?;
            self.file.write_all(part.as_bytes())?;
        }
        self.documents += 1;
        Ok(())
    }

    /// Documents pushed so far.
    pub fn documents(&self) -> u64 {
        self.documents
    }

    /// The spill, written out and mapped for reading.
    pub fn finish(self) -> Result<SpilledTexts, VocabError> {
        let file = self.file.into_inner().map_err(|e| VocabError::Io {
            path: PathBuf::from("(text spill)"),
            source: e.into_error(),
        })?;
        let path = file.path().to_path_buf();
        // An empty file cannot be mapped; no documents need no mapping.
        let map = if self.documents == 0 {
            None
        } else {
            // SAFETY: the file is this process's own unnamed temporary, written out above and
            // never written again; the mapping is read-only.
            Some(unsafe { memmap2::Mmap::map(file.as_file()) }.map_err(io(&path))?)
        };
        Ok(SpilledTexts {
            _file: file,
            map,
            documents: self.documents,
        })
    }
}

/// A finished [`TextSpill`], mapped.
pub struct SpilledTexts {
    _file: tempfile::NamedTempFile,
    map: Option<memmap2::Mmap>,
    documents: u64,
}

impl SpilledTexts {
    /// Each document's title and text, in the order pushed.
    pub fn iter(&self) -> SpilledIter<'_> {
        SpilledIter {
            bytes: self.map.as_deref().unwrap_or(&[]),
        }
    }

    /// How many documents it holds.
    pub fn documents(&self) -> u64 {
        self.documents
    }
}

/// The documents of [`SpilledTexts`]; it ends early, rather than failing, at bytes that are not
/// a whole record (the spill is this process's own, so that does not happen).
#[derive(Clone)]
pub struct SpilledIter<'a> {
    bytes: &'a [u8],
}

impl<'a> Iterator for SpilledIter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        let mut part = || {
            let len = u32::from_le_bytes(self.bytes.get(..4)?.try_into().ok()?) as usize;
            let text = self.bytes.get(4..4 + len)?;
            self.bytes = &self.bytes[4 + len..];
            std::str::from_utf8(text).ok()
        };
        let title = part()?;
        let text = part()?;
        Some((title, text))
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> VocabError {
    let path = path.to_path_buf();
    move |source| VocabError::Io { path, source }
}

/// Counts the words and pairs of `docs` (title, text; read twice) and writes them to `dir`,
/// replacing the vocabulary there; files the new one no longer names are removed.
pub fn build<'a>(
    dir: &Path,
    location: &str,
    docs: impl Iterator<Item = (&'a str, &'a str)> + Clone,
) -> Result<StoreVocab, VocabError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let old = read_record(dir).ok().flatten();
    let documents = docs.clone().count() as u64;
    let mut vocab = Vocabulary::build(docs);
    let (info, files) = vocab.write(dir)?;
    crate::atomic_file::sync_dir(dir).map_err(io(dir))?;
    let now = crate::clock::now_unix();
    let record = StoreVocab {
        location: location.to_string(),
        documents,
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

    fn pairs(docs: &[(String, String)]) -> impl Iterator<Item = (&str, &str)> + Clone {
        docs.iter().map(|(t, x)| (t.as_str(), x.as_str()))
    }

    #[test]
    fn a_spill_gives_back_what_was_pushed_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let docs = [
            ("", "no title"),
            ("Ünïcode — title", "text with\0 a nul and\nlines"),
            ("", ""),
            ("last", "one"),
        ];
        let mut spill = TextSpill::create(&dir.path().join("vocab")).unwrap();
        for (title, text) in docs {
            spill.push(title, text).unwrap();
        }
        assert_eq!(spill.documents(), 4);
        let spilled = spill.finish().unwrap();
        assert_eq!(spilled.documents(), 4);
        assert_eq!(spilled.iter().collect::<Vec<_>>(), docs);
        // Read twice, as the counting does.
        assert_eq!(spilled.iter().count(), 4);
        let record = build(&dir.path().join("vocab"), "x", spilled.iter()).unwrap();
        assert_eq!(record.documents, 4);
        drop(spilled);
        let left: Vec<String> = std::fs::read_dir(dir.path().join("vocab"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".spill"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
        // No documents: an empty spill, an empty vocabulary.
        let empty = TextSpill::create(dir.path()).unwrap().finish().unwrap();
        assert_eq!(empty.iter().count(), 0);
    }

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
        let first = build(dir.path(), "postgres://x@h:5432/db?table=t", pairs(&docs)).unwrap();
        let (vocab, record) = load(dir.path()).unwrap().unwrap();
        assert_eq!(record, first);
        assert_eq!(vocab.count("immune"), 2);
        assert_eq!(record.documents, 2);
        let more = vec![(
            String::new(),
            "sourdough needs a lively starter".to_string(),
        )];
        let second = build(dir.path(), "postgres://x@h:5432/db?table=t", pairs(&more)).unwrap();
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
