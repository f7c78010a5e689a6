//! Frozen HNSW index of document vectors, with the document store, the raw
//! vectors (for exact search and for alignment training) and a manifest.
//!
//! An index directory holds:
//!
//! | file | content |
//! |---|---|
//! | `index.json` | [`IndexManifest`]; written last, its presence marks a complete index |
//! | `docs.bin` | document store (see `store.rs` for the layout) |
//! | `vectors.f32` | L2-normalised vectors, little-endian f32, `count × dimension` |
//! | `hnsw.hnsw.graph`, `hnsw.hnsw.data` | hnsw_rs 0.3.5 dump (`DistDot`) |
//! | `vocab-<tag>.fst`, `vocab-<tag>.pairs` | the corpus vocabulary query repair reads (see `vocab.rs`) |
//!
//! Build with [`IndexBuilder`], open with [`Index::load`], share as
//! `Arc<Index>`: searching takes `&self` and `Index` is `Send + Sync`.

mod build;
mod error;
mod exact;
mod fileio;
mod hnsw;
mod manifest;
pub mod npy;
mod store;
mod vectors;
pub mod vocab;

#[cfg(test)]
mod tests;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

pub use build::{build, BuildProgress, BuildStage, IndexBuilder, ProgressFn};
pub use error::IndexError;
pub use exact::merge_best;
pub use manifest::{
    FileInfo, HnswInfo, HnswParams, IndexManifest, ManifestFields, Metric, DOCS_FILE,
    FORMAT_VERSION, HNSW_DATA_FILE, HNSW_GRAPH_FILE, MANIFEST_FILE, VECTORS_FILE,
};
pub use store::{DocRef, Document};

use error::panic_message;
use store::DocStore;
use vocab::Vocabulary;

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
    /// Verify every file's SHA-256 against the manifest (default true). The
    /// hashing rides on reads that happen anyway, so it costs CPU only
    /// (~1–2 GB/s with SHA extensions, ~0.4 GB/s without). Structural checks
    /// of all files run regardless.
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
    store: DocStore,
    vectors: Vec<f32>,
    graph: hnsw::Graph,
    vocab: Option<Arc<Vocabulary>>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("dir", &self.dir)
            .field("manifest", &self.manifest)
            .finish_non_exhaustive()
    }
}

impl Index {
    pub(crate) fn from_parts(
        dir: PathBuf,
        manifest: IndexManifest,
        store: DocStore,
        vectors: Vec<f32>,
        graph: hnsw::Graph,
        vocab: Option<Arc<Vocabulary>>,
    ) -> Self {
        Index {
            dir,
            manifest,
            store,
            vectors,
            graph,
            vocab,
        }
    }

    /// Opens an index directory, verifying checksums. See [`Index::load_with`].
    pub fn load(dir: impl AsRef<Path>) -> Result<Index, IndexError> {
        Self::load_with(dir, LoadOptions::default())
    }

    /// Opens an index directory: reads and validates the manifest, the
    /// document store, the vectors and the HNSW dump (sizes, structure,
    /// counts, dimension, optionally checksums) and reloads the graph. Any
    /// missing, truncated or corrupt file gives an error, never a panic.
    /// The store and vectors are read while the graph loads on a second thread.
    pub fn load_with(dir: impl AsRef<Path>, options: LoadOptions) -> Result<Index, IndexError> {
        let dir = dir.as_ref().to_path_buf();
        let manifest = IndexManifest::read(&dir)?;
        let (n, dim) = (manifest.count, manifest.dimension);
        let sha = |name: &str| {
            options
                .verify_checksums
                .then(|| manifest.files[name].sha256.as_str())
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
        let (graph, store, vectors, vocab) = std::thread::scope(|s| {
            let graph = s.spawn(|| {
                let shas = options.verify_checksums.then(|| {
                    (
                        manifest.files[HNSW_GRAPH_FILE].sha256.as_str(),
                        manifest.files[HNSW_DATA_FILE].sha256.as_str(),
                    )
                });
                hnsw::validate_dump(&dir, n, dim, manifest.hnsw.m, shas)?;
                hnsw::load(&dir)
            });
            let store = DocStore::read(&dir.join(DOCS_FILE), n, sha(DOCS_FILE));
            let vectors = vectors::read(&dir.join(VECTORS_FILE), n, dim, sha(VECTORS_FILE));
            let vocab = manifest
                .vocab
                .as_ref()
                .map(|v| {
                    Vocabulary::read(
                        &dir,
                        v,
                        &manifest.files[&v.words_file],
                        &manifest.files[&v.pairs_file],
                        options.verify_checksums,
                    )
                    .map(Arc::new)
                })
                .transpose();
            let graph = graph.join().unwrap_or_else(|p| {
                Err(IndexError::Hnsw(format!(
                    "graph loading thread panicked: {}",
                    panic_message(&*p)
                )))
            });
            (graph, store, vectors, vocab)
        });
        let (store, vectors, graph, vocab) = (store?, vectors?, graph?, vocab?);
        if graph.get_nb_point() != n {
            return Err(IndexError::corrupt(
                dir.join(HNSW_GRAPH_FILE),
                format!("graph holds {} points, expected {n}", graph.get_nb_point()),
            ));
        }
        Ok(Index::from_parts(
            dir, manifest, store, vectors, graph, vocab,
        ))
    }

    /// Reads only the vocabulary of the index at `dir` (checksums verified), without the
    /// vectors or the graph: what `capot repair` needs. `None` when the index has none.
    pub fn load_vocab(dir: impl AsRef<Path>) -> Result<Option<Vocabulary>, IndexError> {
        let dir = dir.as_ref();
        let manifest = IndexManifest::read(dir)?;
        manifest
            .vocab
            .as_ref()
            .map(|v| {
                Vocabulary::read(
                    dir,
                    v,
                    &manifest.files[&v.words_file],
                    &manifest.files[&v.pairs_file],
                    true,
                )
            })
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
            Some(manifest.files[DOCS_FILE].sha256.as_str()),
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
            manifest.files.remove(&old.words_file);
            manifest.files.remove(&old.pairs_file);
        }
        manifest.files.extend(files);
        manifest.replace(dir)?;
        if let Some(old) = old {
            for name in [old.words_file, old.pairs_file] {
                if name != info.words_file && name != info.pairs_file {
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
        self.vectors.get(i.checked_mul(d)?..(i + 1).checked_mul(d)?)
    }

    /// All vectors, flat, `len × dimension`.
    pub fn vectors(&self) -> &[f32] {
        &self.vectors
    }

    /// Document `i`, `None` if out of range.
    pub fn document(&self, i: usize) -> Option<DocRef<'_>> {
        self.store.get(i)
    }

    /// Internal index of the document with id `id`.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.store.index_of(id)
    }

    /// Approximate heap bytes of the store and vectors (the graph is not
    /// included; hnsw_rs does not expose its size).
    pub fn heap_bytes_without_graph(&self) -> usize {
        self.store.heap_bytes()
            + self.vectors.capacity() * 4
            + self.vocab.as_ref().map_or(0, |v| v.heap_bytes())
    }

    /// Checks the dimension and normalises the query (cosine is scale
    /// invariant; unit length also keeps hnsw_rs's `DistDot` assertion safe).
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

    /// Approximate top-`k` by HNSW with candidate list `max(ef, k)` (capped
    /// at the corpus size). Scores are recomputed exactly from the stored
    /// vectors; hits are sorted by score descending, then index. It may
    /// return fewer than `k` hits when `k` approaches the corpus size and the
    /// graph walk does not reach that many documents.
    pub fn search(&self, query: &[f32], k: usize, ef: usize) -> Result<Vec<Hit>, IndexError> {
        let q = self.prepare_query(query)?;
        let k = k.min(self.len());
        if k == 0 {
            return Ok(Vec::new());
        }
        let ef = ef.min(self.len()).max(k);
        let found =
            catch_unwind(AssertUnwindSafe(|| self.graph.search(&q, k, ef))).map_err(|p| {
                IndexError::Hnsw(format!(
                    "hnsw_rs panicked in search: {}",
                    panic_message(&*p)
                ))
            })?;
        let mut hits: Vec<Hit> = found
            .iter()
            .filter_map(|nb| {
                let index = nb.get_origin_id();
                self.vector(index).map(|v| Hit {
                    index,
                    score: vectors::dot(&q, v),
                })
            })
            .collect();
        hits.sort_unstable_by(exact::hit_order);
        hits.dedup_by_key(|h| h.index);
        hits.truncate(k);
        Ok(hits)
    }

    /// Exact top-`k` by brute force over all vectors (ground truth for
    /// recall, or the whole search for small corpora). Same scores and order
    /// as [`Index::search`].
    pub fn search_exact(&self, query: &[f32], k: usize) -> Result<Vec<Hit>, IndexError> {
        let q = self.prepare_query(query)?;
        Ok(exact::top_k(&self.vectors, self.dimension(), &q, k))
    }
}
