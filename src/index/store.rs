//! Document store: id, title and text of every document, addressed by the
//! internal index `0..n` that the HNSW graph and the vectors use.
//!
//! On disk (`docs.bin`, all integers little-endian):
//!
//! ```text
//! magic     8 bytes  b"CAPOTDS\x01"
//! count     u64
//! blob_len  u64
//! offsets   (3·count + 1) × u64   field f of doc i is blob[off[3i+f] .. off[3i+f+1]],
//!                                 f = 0 id, 1 title, 2 text
//! blob      blob_len bytes of UTF-8
//! ```
//!
//! Why this and not JSONL: it loads with three reads and one UTF-8 check (no
//! per-document parsing or allocation), and in memory it is one `String` plus
//! 24 bytes of offsets and 4 bytes of id index per document — versus ~72 bytes
//! of `String` headers plus three allocations per document for a `Vec` of
//! structs. The corpus stays inspectable through the original `corpus.jsonl`.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::IndexError;
use super::fileio::{HashingReader, HashingWriter};
use super::manifest::FileInfo;

const MAGIC: &[u8; 8] = b"CAPOTDS\x01";
const HEADER: u64 = 8 + 8 + 8;

/// One document as given to the build. Same fields as the BEIR corpus
/// (`_id` is accepted as an alias of `id`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Document {
    /// Document id, unique and non-empty.
    #[serde(alias = "_id")]
    pub id: String,
    /// Title, empty when absent.
    #[serde(default)]
    pub title: String,
    /// Body text.
    #[serde(default)]
    pub text: String,
}

/// A borrowed view of one stored document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DocRef<'a> {
    /// Document id.
    pub id: &'a str,
    /// Title (may be empty).
    pub title: &'a str,
    /// Body text.
    pub text: &'a str,
}

impl DocRef<'_> {
    /// Copies the view into an owned [`Document`].
    pub fn to_document(&self) -> Document {
        Document {
            id: self.id.to_string(),
            title: self.title.to_string(),
            text: self.text.to_string(),
        }
    }
}

/// All documents of an index, in memory.
#[derive(Debug)]
pub(crate) struct DocStore {
    blob: String,
    offsets: Vec<u64>,
    /// Document indices sorted by id, for `index_of`.
    by_id: Vec<u32>,
}

impl DocStore {
    /// Packs documents; rejects empty and duplicate ids.
    pub(crate) fn from_docs(docs: Vec<Document>) -> Result<Self, IndexError> {
        if u32::try_from(docs.len()).is_err() {
            return Err(IndexError::InvalidInput(format!(
                "{} documents exceed the supported maximum of {}",
                docs.len(),
                u32::MAX
            )));
        }
        let total: usize = docs
            .iter()
            .map(|d| d.id.len() + d.title.len() + d.text.len())
            .sum();
        let mut blob = String::with_capacity(total);
        let mut offsets = Vec::with_capacity(3 * docs.len() + 1);
        offsets.push(0u64);
        for (i, d) in docs.iter().enumerate() {
            if d.id.is_empty() {
                return Err(IndexError::InvalidInput(format!(
                    "document {i} has an empty id"
                )));
            }
            for field in [&d.id, &d.title, &d.text] {
                blob.push_str(field);
                offsets.push(blob.len() as u64);
            }
        }
        drop(docs);
        let mut store = DocStore {
            blob,
            offsets,
            by_id: Vec::new(),
        };
        store.index_ids().map_err(IndexError::InvalidInput)?;
        Ok(store)
    }

    /// Builds the sorted id index; reports a duplicate id.
    fn index_ids(&mut self) -> Result<(), String> {
        let n = self.len() as u32;
        let mut by_id: Vec<u32> = (0..n).collect();
        by_id.sort_unstable_by(|&a, &b| self.id(a as usize).cmp(self.id(b as usize)));
        if let Some(w) = by_id
            .windows(2)
            .find(|w| self.id(w[0] as usize) == self.id(w[1] as usize))
        {
            let (a, b) = (w[0].min(w[1]), w[0].max(w[1]));
            return Err(format!(
                "duplicate document id {:?} (documents {a} and {b})",
                self.id(a as usize)
            ));
        }
        self.by_id = by_id;
        Ok(())
    }

    /// Number of documents.
    pub(crate) fn len(&self) -> usize {
        (self.offsets.len() - 1) / 3
    }

    fn field(&self, i: usize, f: usize) -> &str {
        let a = self.offsets[3 * i + f] as usize;
        let b = self.offsets[3 * i + f + 1] as usize;
        &self.blob[a..b]
    }

    fn id(&self, i: usize) -> &str {
        self.field(i, 0)
    }

    /// Document `i`, if in range.
    pub(crate) fn get(&self, i: usize) -> Option<DocRef<'_>> {
        (i < self.len()).then(|| DocRef {
            id: self.field(i, 0),
            title: self.field(i, 1),
            text: self.field(i, 2),
        })
    }

    /// Internal index of the document with this id.
    pub(crate) fn index_of(&self, id: &str) -> Option<usize> {
        self.by_id
            .binary_search_by(|&j| self.id(j as usize).cmp(id))
            .ok()
            .map(|pos| self.by_id[pos] as usize)
    }

    /// Heap bytes held (for sizing).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.blob.capacity() + self.offsets.capacity() * 8 + self.by_id.capacity() * 4
    }

    /// Writes `docs.bin` (fsynced).
    pub(crate) fn write(&self, path: &Path) -> Result<FileInfo, IndexError> {
        let mut w = HashingWriter::create(path)?;
        w.put(MAGIC)?;
        w.put(&(self.len() as u64).to_le_bytes())?;
        w.put(&(self.blob.len() as u64).to_le_bytes())?;
        let mut buf = Vec::with_capacity(self.offsets.len() * 8);
        for o in &self.offsets {
            buf.extend_from_slice(&o.to_le_bytes());
        }
        w.put(&buf)?;
        w.put(self.blob.as_bytes())?;
        w.finish()
    }

    /// Reads and validates `docs.bin`, expecting `count` documents.
    pub(crate) fn read(
        path: &Path,
        count: usize,
        sha256: Option<&str>,
    ) -> Result<Self, IndexError> {
        let mut r = HashingReader::open(path, sha256.is_some())?;
        let corrupt = |reason: String| IndexError::corrupt(path, reason);
        if r.len() < HEADER {
            return Err(corrupt(format!("truncated: {} bytes", r.len())));
        }
        if &r.array::<8>()? != MAGIC {
            return Err(corrupt("bad magic: not a capot document store".into()));
        }
        let n = u64::from_le_bytes(r.array()?);
        let blob_len = u64::from_le_bytes(r.array()?);
        if n != count as u64 {
            return Err(corrupt(format!(
                "holds {n} documents, the manifest says {count}"
            )));
        }
        let expected = (3 * n + 1)
            .checked_mul(8)
            .and_then(|x| x.checked_add(HEADER))
            .and_then(|x| x.checked_add(blob_len));
        if expected != Some(r.len()) {
            return Err(corrupt(format!(
                "size is {} bytes, the header implies {}",
                r.len(),
                expected.map_or("an overflow".to_string(), |e| e.to_string())
            )));
        }
        let mut raw = vec![0u8; (3 * count + 1) * 8];
        r.take(&mut raw)?;
        let offsets: Vec<u64> = raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect();
        drop(raw);
        if offsets[0] != 0 || offsets[offsets.len() - 1] != blob_len {
            return Err(corrupt("offsets table does not span the text".into()));
        }
        if offsets.windows(2).any(|w| w[0] > w[1]) {
            return Err(corrupt("offsets table is not monotonic".into()));
        }
        let mut bytes = vec![0u8; blob_len as usize];
        r.take(&mut bytes)?;
        r.finish(sha256)?;
        let blob = String::from_utf8(bytes).map_err(|e| corrupt(format!("invalid UTF-8: {e}")))?;
        if let Some(o) = offsets
            .iter()
            .find(|&&o| !blob.is_char_boundary(o as usize))
        {
            return Err(corrupt(format!("offset {o} splits a UTF-8 character")));
        }
        let mut store = DocStore {
            blob,
            offsets,
            by_id: Vec::new(),
        };
        store.index_ids().map_err(corrupt)?;
        Ok(store)
    }
}
