//! Document store: id, title and text of every document, addressed by the
//! internal index `0..n` that the HNSW graph and the vectors use.
//!
//! On disk (`docs.bin`, all integers little-endian):
//!
//! ```text
//! magic     8 bytes  b"CAPOTDS\x02"
//! count     u64
//! blob_len  u64
//! offsets   (3·count + 1) × u64   field f of doc i is blob[off[3i+f] .. off[3i+f+1]],
//!                                 f = 0 id, 1 title, 2 text
//! by_id     count × u32           document indices in order of id (for lookups by id)
//! blob      blob_len bytes of UTF-8
//! ```
//!
//! (Format 1 indexes had `b"CAPOTDS\x01"` and no `by_id`; [`DocStore::read`] reads both,
//! for `capot index upgrade`.)
//!
//! Loading maps the file once to check the offsets and the id order ([`MappedDocs`]); a
//! served index then reads a document only when a hit returns it, with positioned reads
//! ([`DocReader`]), so ten million documents cost neither load time nor resident memory: the
//! text stays in the OS page cache, shared, and is never mapped into the process. The corpus
//! stays inspectable through the original `corpus.jsonl`.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::IndexError;
use super::fileio::{HashingReader, HashingWriter};
use super::manifest::FileInfo;
use super::mapped::Mapped;

const MAGIC: &[u8; 8] = b"CAPOTDS\x02";
const MAGIC_V1: &[u8; 8] = b"CAPOTDS\x01";
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
pub(crate) struct DocRef<'a> {
    /// Document id.
    pub id: &'a str,
    /// Title (may be empty).
    pub title: &'a str,
    /// Body text.
    pub text: &'a str,
}

impl DocRef<'_> {
    /// Copies the view into an owned [`Document`].
    pub(crate) fn to_document(self) -> Document {
        Document {
            id: self.id.to_string(),
            title: self.title.to_string(),
            text: self.text.to_string(),
        }
    }
}

/// All documents of an index, in memory: what an upgrade and `capot index vocab` read.
#[derive(Debug)]
pub(crate) struct DocStore {
    blob: String,
    offsets: Vec<u64>,
    /// Document indices sorted by id, for `index_of`.
    by_id: Vec<u32>,
}

impl DocStore {
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

    /// Reads and validates `docs.bin`, expecting `count` documents.
    pub(crate) fn read(
        path: &Path,
        count: usize,
        checksum: Option<&str>,
    ) -> Result<Self, IndexError> {
        let mut r = HashingReader::open(path, checksum.is_some())?;
        let corrupt = |reason: String| IndexError::corrupt(path, reason);
        if r.len() < HEADER {
            return Err(corrupt(format!("truncated: {} bytes", r.len())));
        }
        let v2 = match &r.array::<8>()? {
            m if m == MAGIC => true,
            m if m == MAGIC_V1 => false,
            _ => return Err(corrupt("bad magic: not a capot document store".into())),
        };
        let n = u64::from_le_bytes(r.array()?);
        let blob_len = u64::from_le_bytes(r.array()?);
        if n != count as u64 {
            return Err(corrupt(format!(
                "holds {n} documents, the manifest says {count}"
            )));
        }
        let id_table = if v2 { 4 * n } else { 0 };
        let expected = (3 * n + 1)
            .checked_mul(8)
            .and_then(|x| x.checked_add(HEADER))
            .and_then(|x| x.checked_add(id_table))
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
        // The id order is recomputed below, so v2's stored one is skipped.
        let mut skip = vec![0u8; id_table as usize];
        r.take(&mut skip)?;
        drop(skip);
        let mut bytes = vec![0u8; blob_len as usize];
        r.take(&mut bytes)?;
        r.finish(checksum)?;
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

/// Part files of a [`DocStoreWriter`] in its directory: the text of every field, and the end
/// offset of each field (`3 × count` little-endian `u64`; the leading 0 of `docs.bin`'s table
/// is implied).
pub(crate) const BLOB_PART: &str = "docs.blob.part";
pub(crate) const OFFSETS_PART: &str = "docs.offsets.part";

/// `docs.bin` written one document at a time, so a build never holds the corpus text: fields
/// are appended to two part files as they come, and [`DocStoreWriter::finish`] sorts the ids
/// (reading them back through a mapping) and assembles `docs.bin` from the parts.
pub(crate) struct DocStoreWriter {
    dir: std::path::PathBuf,
    blob: std::io::BufWriter<std::fs::File>,
    offsets: std::io::BufWriter<std::fs::File>,
    count: usize,
    blob_len: u64,
}

impl DocStoreWriter {
    /// Starts empty part files in `dir` (truncating any).
    pub(crate) fn create(dir: &Path) -> Result<Self, IndexError> {
        Self::reopen(dir, 0, 0)
    }

    /// Opens the part files in `dir` keeping their first `count` documents (`blob_len` bytes of
    /// text): what a resumed build made durable. Fails when the files are shorter than that.
    pub(crate) fn reopen(dir: &Path, count: usize, blob_len: u64) -> Result<Self, IndexError> {
        let offsets_len = count as u64 * 24;
        let open = |name: &str, len: u64| -> Result<std::fs::File, IndexError> {
            let path = dir.join(name);
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true)
                .open(&path)
                .map_err(|e| IndexError::io(&path, e))?;
            let have = file.metadata().map_err(|e| IndexError::io(&path, e))?.len();
            if have < len {
                return Err(IndexError::corrupt(
                    &path,
                    format!("holds {have} bytes, the checkpoint says at least {len}"),
                ));
            }
            file.set_len(len).map_err(|e| IndexError::io(&path, e))?;
            use std::io::Seek;
            let mut file = file;
            file.seek(std::io::SeekFrom::End(0))
                .map_err(|e| IndexError::io(&path, e))?;
            Ok(file)
        };
        let blob = open(BLOB_PART, blob_len)?;
        let offsets = open(OFFSETS_PART, offsets_len)?;
        Ok(DocStoreWriter {
            dir: dir.to_path_buf(),
            blob: std::io::BufWriter::with_capacity(1 << 20, blob),
            offsets: std::io::BufWriter::with_capacity(1 << 16, offsets),
            count,
            blob_len,
        })
    }

    /// Documents written.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// Bytes of text written.
    pub(crate) fn blob_len(&self) -> u64 {
        self.blob_len
    }

    /// Appends one document.
    pub(crate) fn push(&mut self, id: &str, title: &str, text: &str) -> Result<(), IndexError> {
        use std::io::Write;
        if self.count >= u32::MAX as usize {
            return Err(IndexError::InvalidInput(format!(
                "more documents than the supported maximum of {}",
                u32::MAX
            )));
        }
        for field in [id, title, text] {
            self.blob
                .write_all(field.as_bytes())
                .map_err(|e| IndexError::io(self.dir.join(BLOB_PART), e))?;
            self.blob_len += field.len() as u64;
            self.offsets
                .write_all(&self.blob_len.to_le_bytes())
                .map_err(|e| IndexError::io(self.dir.join(OFFSETS_PART), e))?;
        }
        self.count += 1;
        Ok(())
    }

    /// Flushes both part files and fsyncs them: everything pushed so far survives a crash.
    pub(crate) fn sync(&mut self) -> Result<(), IndexError> {
        for (w, name) in [
            (&mut self.blob, BLOB_PART),
            (&mut self.offsets, OFFSETS_PART),
        ] {
            let path = self.dir.join(name);
            std::io::Write::flush(w).map_err(|e| IndexError::io(&path, e))?;
            w.get_ref()
                .sync_data()
                .map_err(|e| IndexError::io(&path, e))?;
        }
        Ok(())
    }

    /// The id of document `i` (< [`len`](Self::len)), read back from the part files.
    pub(crate) fn id(&mut self, i: usize) -> Result<String, IndexError> {
        use std::os::unix::fs::FileExt;
        for (w, name) in [
            (&mut self.blob, BLOB_PART),
            (&mut self.offsets, OFFSETS_PART),
        ] {
            std::io::Write::flush(w).map_err(|e| IndexError::io(self.dir.join(name), e))?;
        }
        let offsets_path = self.dir.join(OFFSETS_PART);
        let mut ends = [0u8; 16];
        let (start, end) = if i == 0 {
            let mut end = [0u8; 8];
            self.offsets
                .get_ref()
                .read_exact_at(&mut end, 0)
                .map_err(|e| IndexError::io(&offsets_path, e))?;
            (0, u64::from_le_bytes(end))
        } else {
            self.offsets
                .get_ref()
                .read_exact_at(&mut ends, (3 * i as u64 - 1) * 8)
                .map_err(|e| IndexError::io(&offsets_path, e))?;
            let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
            (word(&ends[..8]), word(&ends[8..]))
        };
        let mut bytes = vec![0u8; end.saturating_sub(start) as usize];
        self.blob
            .get_ref()
            .read_exact_at(&mut bytes, start)
            .map_err(|e| IndexError::io(self.dir.join(BLOB_PART), e))?;
        String::from_utf8(bytes)
            .map_err(|_| IndexError::corrupt(self.dir.join(BLOB_PART), "an id is not UTF-8"))
    }

    /// Writes `path` (`docs.bin`, fsynced) from the part files (which stay, for a build that
    /// fails later and is resumed; the writer removes them before its commit).
    pub(crate) fn finish(mut self, path: &Path) -> Result<FileInfo, IndexError> {
        if self.count == 0 {
            return Err(IndexError::EmptyCorpus);
        }
        self.sync()?;
        let n = self.count;
        let offsets_path = self.dir.join(OFFSETS_PART);
        let blob_path = self.dir.join(BLOB_PART);
        let ends = Mapped::<u64>::open(&offsets_path, Some(3 * n))?;
        let blob = Mapped::<u8>::open(&blob_path, Some(self.blob_len as usize))?;
        let (ends, text) = (ends.as_slice(), blob.as_slice());
        let id = |i: u32| -> &[u8] {
            let i = i as usize;
            let start = if i == 0 { 0 } else { ends[3 * i - 1] as usize };
            &text[start..ends[3 * i] as usize]
        };
        let mut by_id: Vec<u32> = (0..n as u32).collect();
        by_id.sort_unstable_by(|&a, &b| id(a).cmp(id(b)));
        if let Some(w) = by_id.windows(2).find(|w| id(w[0]) == id(w[1])) {
            let (a, b) = (w[0].min(w[1]), w[0].max(w[1]));
            return Err(IndexError::InvalidInput(format!(
                "duplicate document id {:?} (documents {a} and {b})",
                String::from_utf8_lossy(id(a))
            )));
        }
        let mut w = HashingWriter::create(path)?;
        w.put(MAGIC)?;
        w.put(&(n as u64).to_le_bytes())?;
        w.put(&self.blob_len.to_le_bytes())?;
        w.put(&0u64.to_le_bytes())?;
        for chunk in ends.chunks(1 << 17) {
            w.put(bytemuck::cast_slice(chunk))?;
        }
        for chunk in by_id.chunks(1 << 18) {
            w.put(bytemuck::cast_slice(chunk))?;
        }
        drop(by_id);
        for chunk in text.chunks(1 << 20) {
            w.put(chunk)?;
        }
        w.finish()
    }
}

/// Where the tables of a validated `docs.bin` lie (byte ranges inside the file).
#[derive(Debug, Clone)]
struct Layout {
    count: usize,
    offsets: std::ops::Range<usize>,
    by_id: std::ops::Range<usize>,
    blob: std::ops::Range<usize>,
}

/// `docs.bin` memory-mapped and validated: what passes over every document (the vocabulary of
/// a build) read. A served index keeps a [`DocReader`] instead (see the module documentation).
pub(crate) struct MappedDocs {
    map: Mapped<u8>,
    path: std::path::PathBuf,
    layout: Layout,
}

impl MappedDocs {
    /// Maps `path` and checks what a lookup relies on: header, sizes, offsets monotonic and
    /// inside the text, the id order a permutation. Text is not read (the checksum covers it).
    pub(crate) fn open(path: &Path, count: usize) -> Result<Self, IndexError> {
        let map = Mapped::<u8>::open(path, None)?;
        let corrupt = |reason: String| IndexError::corrupt(path, reason);
        let b = map.as_slice();
        if b.len() < HEADER as usize {
            return Err(corrupt(format!("truncated: {} bytes", b.len())));
        }
        if &b[..8] != MAGIC {
            return Err(corrupt(if &b[..8] == MAGIC_V1 {
                "document store of index format 1 (run `capot index upgrade`)".into()
            } else {
                "bad magic: not a capot document store".into()
            }));
        }
        let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]));
        let (n, blob_len) = (word(8), word(16));
        if n != count as u64 {
            return Err(corrupt(format!(
                "holds {n} documents, the manifest says {count}"
            )));
        }
        let offsets = HEADER as usize..HEADER as usize + (3 * count + 1) * 8;
        let by_id = offsets.end..offsets.end + 4 * count;
        let blob = by_id.end..(by_id.end as u64).saturating_add(blob_len) as usize;
        if blob.end as u64 != b.len() as u64 || (blob.end as u64) < blob_len {
            return Err(corrupt(format!(
                "size is {} bytes, the header implies {}",
                b.len(),
                blob.end
            )));
        }
        let docs = MappedDocs {
            map,
            path: path.to_path_buf(),
            layout: Layout {
                count,
                offsets,
                by_id,
                blob,
            },
        };
        let offs: &[u64] =
            bytemuck::try_cast_slice(&docs.map.as_slice()[docs.layout.offsets.clone()])
                .map_err(|_| corrupt("offsets table is not aligned".into()))?;
        if offs[0] != 0 || offs[offs.len() - 1] != blob_len {
            return Err(corrupt("offsets table does not span the text".into()));
        }
        if offs.windows(2).any(|w| w[0] > w[1]) {
            return Err(corrupt("offsets table is not monotonic".into()));
        }
        let mut seen = vec![false; count];
        for &i in docs.id_order() {
            match seen.get_mut(i as usize) {
                Some(s) if !*s => *s = true,
                _ => {
                    return Err(corrupt(format!(
                        "id order names document {i} twice or out of range"
                    )))
                }
            }
        }
        Ok(docs)
    }

    /// Positioned reads of the same file, for serving; the mapping (and with it every page
    /// the validation touched) is let go.
    pub(crate) fn into_reader(self) -> Result<DocReader, IndexError> {
        let file = std::fs::File::open(&self.path)
            .map_err(|e| super::fileio::open_error(&self.path, e))?;
        Ok(DocReader {
            file,
            path: self.path,
            layout: self.layout,
        })
    }

    fn offsets(&self) -> &[u64] {
        bytemuck::try_cast_slice(&self.map.as_slice()[self.layout.offsets.clone()]).unwrap_or(&[])
    }

    fn id_order(&self) -> &[u32] {
        bytemuck::try_cast_slice(&self.map.as_slice()[self.layout.by_id.clone()]).unwrap_or(&[])
    }

    /// Field `f` of document `i` (U+FFFD if its bytes are not UTF-8, which a verified
    /// checksum rules out).
    fn field(&self, i: usize, f: usize) -> &str {
        let offs = self.offsets();
        let (a, b) = (offs[3 * i + f] as usize, offs[3 * i + f + 1] as usize);
        let blob = &self.map.as_slice()[self.layout.blob.clone()];
        blob.get(a..b)
            .and_then(|bytes| std::str::from_utf8(bytes).ok())
            .unwrap_or("\u{FFFD}")
    }

    /// Document `i`, if in range.
    pub(crate) fn get(&self, i: usize) -> Option<DocRef<'_>> {
        (i < self.layout.count).then(|| DocRef {
            id: self.field(i, 0),
            title: self.field(i, 1),
            text: self.field(i, 2),
        })
    }
}

/// The document store of a served index: a validated `docs.bin` read with positioned reads,
/// one document at a time. Reading the hits' text through a mapping would make the whole file
/// resident in the process over a few thousand searches (the kernel maps the cached neighbours
/// of every page a mapping faults in); two small reads per hit keep it in the page cache only.
pub(crate) struct DocReader {
    file: std::fs::File,
    path: std::path::PathBuf,
    layout: Layout,
}

impl DocReader {
    fn read_at(&self, buf: &mut [u8], at: usize) -> Result<(), IndexError> {
        use std::os::unix::fs::FileExt;
        self.file
            .read_exact_at(buf, at as u64)
            .map_err(|e| IndexError::io(&self.path, e))
    }

    /// Where document `i`'s fields lie in the text: id `e[0]..e[1]`, title `e[1]..e[2]`,
    /// text `e[2]..e[3]`.
    fn bounds(&self, i: usize) -> Result<[usize; 4], IndexError> {
        let mut raw = [0u8; 32];
        self.read_at(&mut raw, self.layout.offsets.start + 3 * i * 8)?;
        Ok(std::array::from_fn(|k| {
            u64::from_le_bytes(raw[8 * k..8 * k + 8].try_into().unwrap_or([0; 8])) as usize
        }))
    }

    /// Bytes `a..b` of the text.
    fn span(&self, a: usize, b: usize) -> Result<Vec<u8>, IndexError> {
        if a > b || b > self.layout.blob.len() {
            return Err(IndexError::corrupt(
                &self.path,
                format!("text range {a}..{b} outside the store (the file changed after load?)"),
            ));
        }
        let mut bytes = vec![0; b - a];
        self.read_at(&mut bytes, self.layout.blob.start + a)?;
        Ok(bytes)
    }

    /// Document `i`, `None` if out of range. Fields that are not UTF-8 (which a verified
    /// checksum rules out) have U+FFFD in place of the bad bytes.
    pub(crate) fn get(&self, i: usize) -> Result<Option<Document>, IndexError> {
        if i >= self.layout.count {
            return Ok(None);
        }
        let [a, b, c, d] = self.bounds(i)?;
        let bytes = self.span(a, d)?;
        let field = |x: usize, y: usize| {
            bytes
                .get(x.saturating_sub(a)..y.saturating_sub(a))
                .map_or_else(
                    || "\u{FFFD}".into(),
                    |f| String::from_utf8_lossy(f).into_owned(),
                )
        };
        Ok(Some(Document {
            id: field(a, b),
            title: field(b, c),
            text: field(c, d),
        }))
    }

    /// Internal index of the document with this id: a binary search over the id order.
    pub(crate) fn index_of(&self, id: &str) -> Result<Option<usize>, IndexError> {
        let (mut lo, mut hi) = (0, self.layout.count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let mut raw = [0u8; 4];
            self.read_at(&mut raw, self.layout.by_id.start + 4 * mid)?;
            let j = u32::from_le_bytes(raw) as usize;
            if j >= self.layout.count {
                return Err(IndexError::corrupt(
                    &self.path,
                    format!("id order names document {j} (the file changed after load?)"),
                ));
            }
            let [a, b, ..] = self.bounds(j)?;
            match self.span(a, b)?.as_slice().cmp(id.as_bytes()) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(Some(j)),
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_store(dir: &Path, docs: &[(&str, &str, &str)]) -> std::path::PathBuf {
        let mut w = DocStoreWriter::create(dir).unwrap();
        for (id, title, text) in docs {
            w.push(id, title, text).unwrap();
        }
        let path = dir.join("docs.bin");
        w.finish(&path).unwrap();
        path
    }

    #[test]
    fn a_reader_returns_every_document_and_finds_every_id() {
        let tmp = tempfile::tempdir().unwrap();
        let docs = [
            ("ab", "Title", "text of ab"),
            ("a", "", "empty title"),
            ("z\u{e9}", "caf\u{e9}", "\u{1F600} emoji"),
            ("b", "only a title", ""),
            ("", "", ""),
        ];
        let path = write_store(tmp.path(), &docs);
        let reader = MappedDocs::open(&path, docs.len())
            .unwrap()
            .into_reader()
            .unwrap();
        for (i, (id, title, text)) in docs.iter().enumerate() {
            let d = reader.get(i).unwrap().unwrap();
            assert_eq!(
                (d.id.as_str(), d.title.as_str(), d.text.as_str()),
                (*id, *title, *text)
            );
            assert_eq!(reader.index_of(id).unwrap(), Some(i), "{id:?}");
        }
        assert!(reader.get(docs.len()).unwrap().is_none());
        for missing in ["aa", "abc", "c", "z", "\u{ffff}"] {
            assert_eq!(reader.index_of(missing).unwrap(), None, "{missing:?}");
        }
    }

    #[test]
    fn a_store_cut_short_after_load_is_an_error_not_a_panic() {
        let tmp = tempfile::tempdir().unwrap();
        let path = write_store(
            tmp.path(),
            &[("a", "t", "some text"), ("b", "u", "more text")],
        );
        let reader = MappedDocs::open(&path, 2).unwrap().into_reader().unwrap();
        // Outside the contract (index files are immutable), but still no panic.
        let len = std::fs::metadata(&path).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len - 4)
            .unwrap();
        assert!(
            matches!(reader.get(1), Err(IndexError::Io { .. })),
            "{:?}",
            reader.get(1)
        );
        assert!(reader.get(0).unwrap().is_some());
    }
}
