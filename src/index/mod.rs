//! Frozen HNSW index of document vectors, with the document store, the raw
//! vectors (for exact search and for alignment training) and a manifest.
//!
//! An index directory holds:
//!
//! | file | content |
//! |---|---|
//! | `index.json` | [`IndexManifest`]; written last, its presence marks a complete index |
//! | `docs.bin` | document store (see `store.rs` for the layout) |
//! | `vectors.f32` | L2-normalised vectors, little-endian f32, `count × dimension` (memory-mapped) |
//! | `graph.bin` | the HNSW graph in a flat layout (see `graph.rs`; memory-mapped) |
//! | `vectors.f16` or `vectors.i8` | optional smaller copy the graph walk reads (see `quantized.rs`) |
//! | `vocab-<tag>.fst`, `vocab-<tag>.pairs` | the corpus vocabulary query repair reads (see `vocab.rs`) |
//!
//! Build with [`IndexBuilder`], open with [`Index::load`], share as
//! `Arc<Index>`: searching takes `&self` and `Index` is `Send + Sync`.

mod build;
mod error;
mod exact;
mod fileio;
mod filtered;
mod graph;
mod graph_build;
mod manifest;
mod mapped;
pub mod npy;
pub mod payload;
pub(crate) mod quantized;
mod sign;
mod store;
mod upgrade;
pub(crate) mod vectors;
pub mod vocab;
mod writer;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde::Serialize;

pub use build::{
    build, BuildProgress, BuildStage, IndexBuilder, ProgressFn, DEFAULT_GRAPH_CHECKPOINT_INTERVAL,
};
pub use error::IndexError;
pub use exact::merge_best;
pub use filtered::{
    Admitted, FilteredSearch, Strategy, DEFAULT_SCAN_FACTOR, DEFAULT_SIGN_ROW_COST,
};
pub use manifest::{
    FileInfo, HnswInfo, HnswParams, IndexManifest, ManifestFields, Metric, DEFAULT_LEVEL_SEED,
    DOCS_FILE, FORMAT_VERSION, GRAPH_FILE, MANIFEST_FILE, VECTORS_FILE,
};
pub use quantized::GraphVectors;
pub use store::Document;
pub use upgrade::{upgrade, Upgrade};
pub use writer::{IndexWriter, Resume, SourcePosition, CHECKPOINT_FILE};

use error::panic_message;
use graph::Graph;
use mapped::Mapped;
use payload::{FieldSchema, PayloadIndexes, PayloadInfo, PayloadStore, PAYLOAD_FILE};
use quantized::SmallVectors;
pub use sign::SignCodesReport;
use sign::{SignCodes, SignMargins};
use store::{DocReader, DocStore, MappedDocs};
use vocab::Vocabulary;

/// With a float16 or int8 graph walk, how many of its best candidates per requested hit are
/// re-scored in float32 (at least [`RESCORE_MIN`]): quantisation moves a candidate's rank by a
/// few places at most, so the true top-k is among them.
const RESCORE_PER_HIT: usize = 4;
/// The least number of candidates re-scored (see [`RESCORE_PER_HIT`]).
const RESCORE_MIN: usize = 32;

/// One search result: internal document index and cosine similarity
/// (dot product of the normalised query and document vectors).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Hit {
    /// Internal index of the document (`0..len`).
    pub index: usize,
    /// Cosine similarity, higher is better.
    pub score: f32,
}

/// Options for [`Index::load_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadOptions {
    /// Verify every file's BLAKE3 hash against the manifest (default true): one read of
    /// every file through the page cache, several GB/s per core when cached. Structural
    /// checks of all files run regardless.
    pub verify_checksums: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            verify_checksums: true,
        }
    }
}

/// A loaded (or freshly built) index. Immutable; search from any thread.
pub struct Index {
    dir: PathBuf,
    manifest: IndexManifest,
    store: DocReader,
    vectors: Mapped<f32>,
    small: Option<SmallVectors>,
    /// Every vector's signs, in memory: what a filtered search scans when the filter admits
    /// too many documents to score each exactly (see `filtered`).
    sign: SignCodes,
    /// What the scans of `sign` have said about how well the codes rank these vectors.
    sign_margins: SignMargins,
    /// `vectors.f32` opened for reading the rows a smaller walk re-scores (see `search`).
    rescore_file: Option<std::fs::File>,
    graph: Graph,
    vocab: Option<Arc<Vocabulary>>,
    /// Each document's metadata (`payload.bin`), `None` when no document has any.
    payload: Option<PayloadStore>,
    /// The declared payload indexes, built at load; replaced whole when one is declared or
    /// dropped on a running server.
    payload_indexes: RwLock<Arc<PayloadIndexes>>,
    /// The admitted sets of the filters used last (see [`Index::admitted_cached`]).
    admitted: std::sync::Mutex<std::collections::VecDeque<(String, Arc<Admitted>)>>,
}

/// Filters whose admitted sets an index keeps: a tenant's or a category's filter comes back
/// with every query, and its set (up to 128 KiB at 1M documents) costs milliseconds to build.
const ADMITTED_CACHE: usize = 64;

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("dir", &self.dir)
            .field("manifest", &self.manifest)
            .finish_non_exhaustive()
    }
}

impl Index {
    /// Opens an index directory, verifying checksums. See [`Index::load_with`].
    pub fn load(dir: impl AsRef<Path>) -> Result<Index, IndexError> {
        Self::load_with(dir, LoadOptions::default())
    }

    /// Opens an index directory: reads and validates the manifest, maps the document store,
    /// the vectors and the graph (validating the graph's every count and id, the store's
    /// offsets and id order), and
    /// optionally verifies every file's checksum, on a second thread while the rest loads.
    /// Any missing, truncated or corrupt file gives an error naming it, never a panic.
    pub fn load_with(dir: impl AsRef<Path>, options: LoadOptions) -> Result<Index, IndexError> {
        let dir = dir.as_ref().to_path_buf();
        let manifest = IndexManifest::read(&dir)?;
        let (n, dim) = (manifest.count, manifest.dimension);
        let checksum = |name: &str| {
            options
                .verify_checksums
                .then(|| manifest.files[name].blake3.as_str())
        };
        // Cheap size checks first, so a truncated file is reported as such
        // before anything is parsed.
        for (name, info) in &manifest.files {
            let path = dir.join(name);
            let len = std::fs::metadata(&path)
                .map_err(|e| fileio::open_error(&path, e))?
                .len();
            if len != info.bytes {
                return Err(IndexError::corrupt(
                    &path,
                    format!(
                        "size is {len} bytes, the manifest says {}{}",
                        info.bytes,
                        if len < info.bytes { " (truncated)" } else { "" }
                    ),
                ));
            }
        }
        let (verified, store, vectors, small, graph, vocab) = std::thread::scope(|s| {
            // The big files are hashed apart from the mapping (see `fileio::verify_file`).
            let verified = s.spawn(|| {
                for name in [VECTORS_FILE, GRAPH_FILE, DOCS_FILE]
                    .into_iter()
                    .chain(manifest.graph_vectors.file())
                    .chain(
                        manifest
                            .files
                            .contains_key(PAYLOAD_FILE)
                            .then_some(PAYLOAD_FILE),
                    )
                {
                    if let Some(expected) = checksum(name) {
                        fileio::verify_file(&dir.join(name), expected)?;
                    }
                }
                Ok::<(), IndexError>(())
            });
            let store = MappedDocs::open(&dir.join(DOCS_FILE), n).and_then(MappedDocs::into_reader);
            let vectors = Mapped::<f32>::open(&dir.join(VECTORS_FILE), Some(n * dim));
            let small = SmallVectors::open(&dir, manifest.graph_vectors, n, dim);
            let graph = Graph::open(&dir.join(GRAPH_FILE), n, manifest.hnsw.m);
            let vocab = manifest
                .vocab
                .as_ref()
                .map(|v| {
                    Vocabulary::read(&dir, v, &manifest.files, options.verify_checksums)
                        .map(Arc::new)
                })
                .transpose();
            let verified = verified.join().unwrap_or_else(|p| {
                Err(IndexError::Hnsw(format!(
                    "checksum thread panicked: {}",
                    panic_message(&*p)
                )))
            });
            (verified, store, vectors, small, graph, vocab)
        });
        let (store, vectors, small, graph, vocab) = (store?, vectors?, small?, graph?, vocab?);
        verified?;
        let payload = manifest
            .files
            .contains_key(PAYLOAD_FILE)
            .then(|| PayloadStore::open(&dir.join(PAYLOAD_FILE), n))
            .transpose()?;
        let fields = manifest
            .payload
            .as_ref()
            .map(|p| p.fields.clone())
            .unwrap_or_default();
        let payload_indexes = Arc::new(match &payload {
            Some(p) if !fields.is_empty() => p.indexes(&fields),
            _ => PayloadIndexes::build(&fields, std::iter::empty::<(u32, serde_json::Value)>()),
        });
        // From what the walk reads, so the other copy is not made resident.
        let sign = match &small {
            None => SignCodes::from_rows(vectors.as_slice().chunks_exact(dim.max(1)), dim, |x| {
                x > 0.0
            }),
            Some(small) => small.sign_codes(n, dim),
        };
        // The float32 vectors are walked unless a smaller copy is; then they are only read
        // a few rows at a time for re-scoring.
        let rescore_file = match &small {
            None => {
                vectors.advise_walk();
                None
            }
            Some(small) => {
                vectors.advise_random();
                small.advise_walk();
                let path = dir.join(VECTORS_FILE);
                Some(std::fs::File::open(&path).map_err(|e| IndexError::io(&path, e))?)
            }
        };
        Ok(Index {
            dir,
            manifest,
            store,
            vectors,
            small,
            sign,
            sign_margins: SignMargins::default(),
            rescore_file,
            graph,
            vocab,
            payload,
            payload_indexes: RwLock::new(payload_indexes),
            admitted: Default::default(),
        })
    }

    /// The admitted set of the filter `key` names (a bound filter's canonical form): from the
    /// cache of the last [`ADMITTED_CACHE`] filters, else `compute`d and kept. The frozen
    /// documents never change; a payload index declared or dropped empties the cache.
    pub fn admitted_cached(
        &self,
        key: &str,
        compute: impl FnOnce() -> Result<roaring::RoaringBitmap, IndexError>,
    ) -> Result<Arc<Admitted>, IndexError> {
        {
            let mut cache = crate::sync::lock(&self.admitted);
            if let Some(at) = cache.iter().position(|(k, _)| k == key) {
                let hit = cache.remove(at).expect("position is in range");
                let set = hit.1.clone();
                cache.push_front(hit);
                return Ok(set);
            }
        }
        let set = Arc::new(Admitted::from(compute()?));
        let mut cache = crate::sync::lock(&self.admitted);
        cache.push_front((key.to_string(), set.clone()));
        cache.truncate(ADMITTED_CACHE);
        Ok(set)
    }

    /// Writes `payload.bin` (each document's metadata, `(internal index, metadata)` in any
    /// order) into the index at `dir` and declares `fields` as its payload indexes, replacing
    /// what it had: the new file first, then the manifest atomically, as [`Index::add_vocab`].
    pub fn set_payload(
        dir: impl AsRef<Path>,
        docs: impl Iterator<Item = (usize, serde_json::Value)>,
        fields: BTreeMap<String, FieldSchema>,
    ) -> Result<(), IndexError> {
        let dir = dir.as_ref();
        let mut manifest = IndexManifest::read(dir)?;
        let tmp = dir.join(format!("{PAYLOAD_FILE}.tmp-{}", std::process::id()));
        let mut docs = docs.peekable();
        let info = if docs.peek().is_some() {
            let info = payload::write_payload(&tmp, manifest.count, docs)?;
            std::fs::rename(&tmp, dir.join(PAYLOAD_FILE)).map_err(|e| IndexError::io(&tmp, e))?;
            fileio::sync_dir(dir)?;
            Some(info)
        } else {
            None
        };
        match info {
            Some(info) => {
                manifest.files.insert(PAYLOAD_FILE.to_string(), info);
            }
            None => {
                manifest.files.remove(PAYLOAD_FILE);
            }
        }
        manifest.payload = Some(PayloadInfo { fields });
        manifest.replace(dir)
    }

    /// Declares (or, with `None`, drops) the payload index of `key` on this loaded index: built
    /// from the stored metadata, recorded in the manifest (replaced atomically), then swapped in
    /// for the searches that start afterwards.
    pub fn set_payload_index(
        &self,
        key: &str,
        schema: Option<FieldSchema>,
    ) -> Result<(), IndexError> {
        payload::check_key(key).map_err(IndexError::InvalidInput)?;
        let built = schema.map(|s| match &self.payload {
            Some(p) => p.field_index(key, s),
            None => {
                payload::FieldIndex::build(key, s, std::iter::empty::<(u32, serde_json::Value)>())
            }
        });
        // The manifest on disk is read afresh: another process may not share this one's copy.
        let mut manifest = IndexManifest::read(&self.dir)?;
        let mut info = manifest.payload.take().unwrap_or_default();
        match schema {
            Some(s) => {
                info.fields.insert(key.to_string(), s);
            }
            None => {
                info.fields.remove(key);
            }
        }
        manifest.payload = Some(info);
        manifest.replace(&self.dir)?;
        let mut current = crate::sync::write(&self.payload_indexes);
        let next = current.with(key, built);
        *current = Arc::new(next);
        crate::sync::lock(&self.admitted).clear();
        Ok(())
    }

    /// The payload indexes searches use now.
    pub fn payload_indexes(&self) -> Arc<PayloadIndexes> {
        crate::sync::read(&self.payload_indexes).clone()
    }

    /// The declared payload indexes' schemas.
    pub fn payload_fields(&self) -> BTreeMap<String, FieldSchema> {
        self.payload_indexes().schemas()
    }

    /// Document `i`'s metadata, `None` when it has none.
    pub fn metadata(&self, i: usize) -> Option<serde_json::Value> {
        self.payload.as_ref().and_then(|p| p.get(i))
    }

    /// Whether any document has metadata.
    pub fn has_metadata(&self) -> bool {
        self.payload.is_some()
    }

    /// Reads only the vocabulary of the index at `dir` (checksums verified), without the
    /// vectors or the graph: what `capot repair` needs. `None` when the index has none.
    pub fn load_vocab(dir: impl AsRef<Path>) -> Result<Option<Vocabulary>, IndexError> {
        let dir = dir.as_ref();
        let manifest = IndexManifest::read(dir)?;
        manifest
            .vocab
            .as_ref()
            .map(|v| Vocabulary::read(dir, v, &manifest.files, true))
            .transpose()
    }

    /// The corpus vocabulary (query repair's), `None` for an index built before it existed.
    pub fn vocab(&self) -> Option<&Arc<Vocabulary>> {
        self.vocab.as_ref()
    }

    /// Builds the vocabulary of the index at `dir` from its stored documents and adds it (or
    /// replaces the one it has) without touching the vectors or the graph. The new files are
    /// written first; the manifest is then replaced atomically, so a reader sees the old index
    /// or the new one; files of a replaced vocabulary are removed last.
    pub fn add_vocab(dir: impl AsRef<Path>) -> Result<vocab::VocabInfo, IndexError> {
        let dir = dir.as_ref();
        let mut manifest = IndexManifest::read(dir)?;
        let store = DocStore::read(
            &dir.join(DOCS_FILE),
            manifest.count,
            Some(manifest.files[DOCS_FILE].blake3.as_str()),
        )?;
        let mut vocab = Vocabulary::build(
            (0..store.len())
                .filter_map(|i| store.get(i))
                .map(|d| (d.title, d.text)),
        );
        let (info, files) = vocab.write(dir)?;
        fileio::sync_dir(dir)?;
        let old = manifest.vocab.replace(info.clone());
        if let Some(old) = &old {
            for name in old.files() {
                manifest.files.remove(name);
            }
        }
        manifest.files.extend(files);
        manifest.replace(dir)?;
        if let Some(old) = old {
            let new = info.files();
            for name in old.files() {
                if !new.contains(&name) {
                    let _ = std::fs::remove_file(dir.join(name));
                }
            }
        }
        Ok(info)
    }

    /// The manifest (encoder fingerprint, dimension, parameters, ...).
    pub fn manifest(&self) -> &IndexManifest {
        &self.manifest
    }

    /// Directory the index lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.manifest.count
    }

    /// Always false: empty indexes cannot be built.
    pub fn is_empty(&self) -> bool {
        self.manifest.count == 0
    }

    /// Vector dimension.
    pub fn dimension(&self) -> usize {
        self.manifest.dimension
    }

    /// Default `ef` for searches (from the build parameters).
    pub fn default_ef(&self) -> usize {
        self.manifest.hnsw.ef_search
    }

    /// Normalised vector of document `i`, `None` if out of range.
    pub fn vector(&self, i: usize) -> Option<&[f32]> {
        let d = self.dimension();
        self.vectors
            .as_slice()
            .get(i.checked_mul(d)?..(i + 1).checked_mul(d)?)
    }

    /// All vectors, flat, `len × dimension` (mapped from `vectors.f32`).
    pub fn vectors(&self) -> &[f32] {
        self.vectors.as_slice()
    }

    /// Document `i`, `None` if out of range; read from `docs.bin` on each call (an error only
    /// if the file cannot be read).
    pub fn document(&self, i: usize) -> Result<Option<Document>, IndexError> {
        self.store.get(i)
    }

    /// Internal index of the document with id `id`.
    pub fn index_of(&self, id: &str) -> Result<Option<usize>, IndexError> {
        self.store.index_of(id)
    }

    /// Heap bytes of the index (the vocabulary and the sign codes; everything else is mapped).
    pub fn heap_bytes(&self) -> usize {
        self.vocab.as_ref().map_or(0, |v| v.heap_bytes()) + self.sign.bytes()
    }

    /// The sign codes' size, how well they have ranked this index's vectors for the filtered
    /// scans that used them, and how many more candidates those scans re-score because of it.
    pub fn sign_codes(&self) -> SignCodesReport {
        self.sign_margins.report(self.sign.bytes())
    }

    /// Takes over what `older`'s scans learnt of the sign codes (see [`Index::sign_codes`]):
    /// for the version a compaction makes of the same encoder's vectors.
    pub fn take_over_sign_codes(&self, older: &Index) {
        self.sign_margins.take_over(&older.sign_margins);
    }

    /// Bytes mapped from `vectors.f32`, `graph.bin` and the graph walk's smaller copy of the
    /// vectors if any (resident as far as searches touch them; shared with every process that
    /// maps the same files). `docs.bin` is read, not mapped.
    pub fn mapped_bytes(&self) -> usize {
        self.vectors.bytes() + self.graph.bytes() + self.small.as_ref().map_or(0, |s| s.bytes())
    }

    /// Checks the dimension and normalises the query (cosine is scale invariant).
    fn prepare_query(&self, query: &[f32]) -> Result<Vec<f32>, IndexError> {
        if query.len() != self.dimension() {
            return Err(IndexError::DimensionMismatch {
                expected: self.dimension(),
                got: query.len(),
            });
        }
        let mut q = query.to_vec();
        vectors::normalize(&mut q).map_err(|e| IndexError::InvalidQuery(format!("query {e}")))?;
        Ok(q)
    }

    /// Approximate top-`k` by HNSW with candidate list `max(ef, k)` (capped at the corpus
    /// size), walking the graph on the precision the index was built with; scores are exact
    /// dot products with the float32 vectors (a float16 or int8 walk's best `max(4k, 32)`
    /// candidates are re-scored), sorted by score descending, then index. It may return fewer than `k` hits when `k` approaches the
    /// corpus size and the graph walk does not reach that many documents.
    pub fn search(&self, query: &[f32], k: usize, ef: usize) -> Result<Vec<Hit>, IndexError> {
        let q = self.prepare_query(query)?;
        let k = k.min(self.len());
        if k == 0 {
            return Ok(Vec::new());
        }
        let ef = ef.min(self.len()).max(k);
        let rows = self.vectors.as_slice();
        let dim = self.dimension();
        let row = |i: u32| {
            let i = i as usize;
            rows.get(i * dim..(i + 1) * dim).unwrap_or(&[])
        };
        let found = match &self.small {
            None => self
                .graph
                .search(ef, &mut |i| vectors::dot(&q, row(i)), &|i| {
                    vectors::prefetch(row(i))
                }),
            Some(small) => self
                .graph
                .search(ef, &mut |i| small.score(&q, i), &|i| small.prefetch(i, dim)),
        };
        self.exact_hits(&q, &found, k)
    }

    /// Hits with exact scores from a walk's candidates (best first): the float32 rows' own
    /// scores, or for a walk on a smaller copy its best `max(4k, 32)` re-scored from float32;
    /// the best `k`, sorted.
    fn exact_hits(
        &self,
        q: &[f32],
        found: &[graph::Scored],
        k: usize,
    ) -> Result<Vec<Hit>, IndexError> {
        let dim = self.dimension();
        // Scores are exact: from the float32 rows. For a smaller copy, the walk's best
        // candidates are re-scored, read with positioned reads (see `read_row`).
        let mut hits: Vec<Hit> = match &self.rescore_file {
            None => found
                .iter()
                .map(|s| Hit {
                    index: s.1 as usize,
                    score: s.0,
                })
                .collect(),
            Some(file) => {
                let rescored = found.len().min((RESCORE_PER_HIT * k).max(RESCORE_MIN));
                let mut buf = vec![0f32; dim];
                let mut hits = Vec::with_capacity(rescored);
                for s in &found[..rescored] {
                    self.read_row(file, s.1, &mut buf)?;
                    hits.push(Hit {
                        index: s.1 as usize,
                        score: vectors::dot(q, &buf),
                    });
                }
                hits
            }
        };
        hits.sort_unstable_by(exact::hit_order);
        hits.truncate(k);
        Ok(hits)
    }

    /// Reads float32 row `i` with a positioned read rather than through the mapping: the kernel
    /// maps the cached neighbours of every page a mapping faults in, so a few re-scored rows
    /// per query would soon make the whole float32 file resident in this process.
    fn read_row(&self, file: &std::fs::File, i: u32, buf: &mut [f32]) -> Result<(), IndexError> {
        let path = || self.dir.join(VECTORS_FILE);
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileExt;
            let offset = u64::from(i) * (buf.len() as u64) * 4;
            file.read_exact_at(bytemuck::cast_slice_mut(buf), offset)
                .map_err(|e| IndexError::io(path(), e))
        }
        #[cfg(not(unix))]
        {
            let _ = file;
            let row = self
                .vector(i as usize)
                .ok_or_else(|| IndexError::corrupt(path(), format!("row {i} out of range")))?;
            buf.copy_from_slice(row);
            Ok(())
        }
    }

    /// Exact top-`k` by brute force over all vectors (ground truth for
    /// recall, or the whole search for small corpora). Same scores and order
    /// as [`Index::search`].
    pub fn search_exact(&self, query: &[f32], k: usize) -> Result<Vec<Hit>, IndexError> {
        let q = self.prepare_query(query)?;
        Ok(exact::top_k(self.vectors(), self.dimension(), &q, k))
    }
}
