//! Building an index directory atomically.
//!
//! Everything is written into a temporary sibling directory
//! `<out>.tmp-<pid>-<seq>`, each file fsynced, the manifest last; then the
//! directory is renamed to `<out>`. An interrupted or failed build leaves
//! no directory at `<out>` (a failed build also removes its temporary
//! directory; one killed outright leaves a `.tmp-` sibling that never loads,
//! as it has no manifest or is not at `<out>`).
//!
//! With `overwrite`, an existing index at `<out>` is renamed away to
//! `<out>.old-<pid>-<seq>`, the new one renamed in, and the old one deleted.
//! Between the two renames (microseconds) `<out>` does not exist; a loader
//! racing with it gets a clear "missing" error, never a mixed directory.
//! Replacing refuses a directory that is neither an index nor empty, so a
//! wrong path cannot delete unrelated data.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::error::IndexError;
use super::fileio::{sync_dir, write_values};
use super::graph::GRAPH_FILE;
use super::manifest::{
    HnswInfo, HnswParams, IndexManifest, ManifestFields, Metric, DOCS_FILE, FORMAT_VERSION,
    GRAPH_DISTANCE, GRAPH_LIBRARY, MANIFEST_FILE, VECTORS_FILE,
};
use super::quantized::GraphVectors;
use super::store::{DocStore, Document};
use super::vocab::Vocabulary;
use super::{graph_build, vectors, Index, LoadOptions};

/// Stage of a running build, reported to the progress callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildStage {
    /// Inputs checked and vectors normalised (`done == total == count`).
    Validated,
    /// Graph insertion: `done` of `total` vectors inserted.
    Inserting,
    /// Files written: `done` of `total` (docs, vectors, graph).
    Writing,
    /// All files and the manifest written and synced; about to rename into place.
    Committing,
}

/// A progress report; the callback may return an error to cancel the build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildProgress {
    /// Current stage.
    pub stage: BuildStage,
    /// Units done in this stage.
    pub done: usize,
    /// Units in this stage.
    pub total: usize,
    /// Time since the build started.
    pub elapsed: Duration,
}

/// Progress callback: return `Err` (e.g. [`IndexError::Cancelled`]) to stop
/// the build; nothing is left at the output path.
pub type ProgressFn<'a> = &'a mut dyn FnMut(&BuildProgress) -> Result<(), IndexError>;

/// Builds an index directory from documents and their vectors.
#[derive(Debug, Clone)]
pub struct IndexBuilder {
    out_dir: PathBuf,
    fields: ManifestFields,
    params: HnswParams,
    overwrite: bool,
    threads: usize,
    graph_vectors: GraphVectors,
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

impl IndexBuilder {
    /// A builder writing to `out_dir` with default HNSW parameters and no overwrite.
    pub fn new(out_dir: impl Into<PathBuf>, fields: ManifestFields) -> Self {
        IndexBuilder {
            out_dir: out_dir.into(),
            fields,
            params: HnswParams::default(),
            overwrite: false,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            graph_vectors: GraphVectors::Float32,
        }
    }

    /// Sets the HNSW parameters.
    pub fn params(mut self, params: HnswParams) -> Self {
        self.params = params;
        self
    }

    /// Allows replacing an existing index at the output path.
    pub fn overwrite(mut self, overwrite: bool) -> Self {
        self.overwrite = overwrite;
        self
    }

    /// Precision of the vectors the graph walk reads (default float32; float16 and int8 write a
    /// smaller copy beside `vectors.f32` and re-score with it).
    pub fn graph_vectors(mut self, precision: GraphVectors) -> Self {
        self.graph_vectors = precision;
        self
    }

    /// Threads inserting into the graph (default: all cores; 1 gives a deterministic graph).
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// Builds the index and returns it, ready to search (no reload needed).
    ///
    /// `vectors` is flat, `docs.len() × dimension`, row `i` for `docs[i]`.
    /// Vectors are L2-normalised here (the metric is cosine); zero or
    /// non-finite vectors are rejected. Graph insertion uses the global rayon
    /// pool (`RAYON_NUM_THREADS` bounds it); the graph is not reproducible
    /// bit for bit (parallel insertion, random levels).
    pub fn build(
        &self,
        docs: Vec<Document>,
        mut vectors: Vec<f32>,
        progress: ProgressFn<'_>,
    ) -> Result<Index, IndexError> {
        let start = Instant::now();
        let report =
            |p: &mut dyn FnMut(&BuildProgress) -> Result<(), IndexError>, stage, done, total| {
                p(&BuildProgress {
                    stage,
                    done,
                    total,
                    elapsed: start.elapsed(),
                })
            };
        // 1. Inputs.
        self.params.validate()?;
        let dim = self.fields.dimension;
        if dim == 0 {
            return Err(IndexError::InvalidInput(
                "dimension must be at least 1".into(),
            ));
        }
        let n = docs.len();
        if n == 0 {
            return Err(IndexError::EmptyCorpus);
        }
        if Some(vectors.len()) != n.checked_mul(dim) {
            return Err(IndexError::InvalidInput(format!(
                "vector count mismatch: got {} values, expected {n} documents × {dim} = {}",
                vectors.len(),
                n.saturating_mul(dim)
            )));
        }
        for (i, v) in vectors.chunks_exact_mut(dim).enumerate() {
            vectors::normalize(v).map_err(|e| {
                IndexError::InvalidInput(format!("vector of document {i} ({:?}) {e}", docs[i].id))
            })?;
        }
        let out = self.out_dir.clone();
        let name = out
            .file_name()
            .ok_or_else(|| {
                IndexError::InvalidInput(format!("output path {} has no final name", out.display()))
            })?
            .to_string_lossy()
            .into_owned();
        let parent = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        self.check_target(&out)?;
        let mut vocab = Vocabulary::build(docs.iter().map(|d| (d.title.as_str(), d.text.as_str())));
        let store = DocStore::from_docs(docs)?;
        report(progress, BuildStage::Validated, n, n)?;

        // 2. Temporary directory, removed on any early return.
        std::fs::create_dir_all(&parent).map_err(|e| IndexError::io(&parent, e))?;
        let tag = format!(
            "{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let tmp = parent.join(format!("{name}.tmp-{tag}"));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(|e| IndexError::io(&tmp, e))?;
        }
        std::fs::create_dir(&tmp).map_err(|e| IndexError::io(&tmp, e))?;
        let guard = RemoveOnDrop(Some(tmp.clone()));

        // 3. Graph.
        let graph = graph_build::build(
            &vectors,
            dim,
            &self.params,
            self.threads,
            &mut |done, total| report(progress, BuildStage::Inserting, done, total),
        )?;
        let top_level = graph.get(7).map_or(0, |&l| l as usize);

        // 4. Files, manifest last.
        let mut files = std::collections::BTreeMap::new();
        files.insert(DOCS_FILE.to_string(), store.write(&tmp.join(DOCS_FILE))?);
        report(progress, BuildStage::Writing, 1, 3)?;
        files.insert(
            VECTORS_FILE.to_string(),
            write_values(&tmp.join(VECTORS_FILE), &vectors)?,
        );
        if let Some(file) = self.graph_vectors.file() {
            let copy = self.graph_vectors.encode(&vectors, dim);
            files.insert(file.to_string(), write_values(&tmp.join(file), &copy)?);
        }
        report(progress, BuildStage::Writing, 2, 3)?;
        files.insert(
            GRAPH_FILE.to_string(),
            write_values(&tmp.join(GRAPH_FILE), &graph)?,
        );
        drop(graph);
        let (vocab_info, vocab_files) = vocab.write(&tmp)?;
        files.extend(vocab_files);
        report(progress, BuildStage::Writing, 3, 3)?;
        let created = crate::clock::now_unix();
        let manifest = IndexManifest {
            format_version: FORMAT_VERSION,
            capot_version: self.fields.capot_version.clone(),
            encoder_fingerprint: self.fields.encoder_fingerprint.clone(),
            encoder_name: self.fields.encoder_name.clone(),
            dimension: dim,
            metric: Metric::Cosine,
            count: n,
            hnsw: HnswInfo {
                m: self.params.m,
                ef_construction: self.params.ef_construction,
                ef_search: self.params.ef_search,
                top_level,
                distance: GRAPH_DISTANCE.to_string(),
                library: GRAPH_LIBRARY.to_string(),
            },
            graph_vectors: self.graph_vectors,
            build_seconds: (start.elapsed().as_secs_f64() * 1e3).round() / 1e3,
            created_unix: created,
            created_at: crate::clock::rfc3339_from_unix(created),
            files,
            vocab: Some(vocab_info),
        };
        manifest.write(&tmp)?;
        sync_dir(&tmp)?;
        report(progress, BuildStage::Committing, 0, 1)?;

        // 5. Commit.
        self.commit(&tmp, &out, &parent, &name, &tag)?;
        guard.disarm();
        drop((store, vectors, vocab));
        // Served from the files just written, exactly as a restart would serve them.
        Index::load_with(
            &out,
            LoadOptions {
                verify_checksums: false,
            },
        )
    }

    /// Fails early if the output exists and may not (or must not) be replaced.
    fn check_target(&self, out: &Path) -> Result<(), IndexError> {
        match std::fs::symlink_metadata(out) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(IndexError::io(out, e)),
            Ok(_) if !self.overwrite => Err(IndexError::AlreadyExists(out.to_path_buf())),
            Ok(meta) => {
                if !meta.is_dir() {
                    return Err(IndexError::InvalidInput(format!(
                        "{} exists and is not a directory; refusing to replace it",
                        out.display()
                    )));
                }
                if out.join(MANIFEST_FILE).is_file() {
                    return Ok(());
                }
                let mut entries = std::fs::read_dir(out).map_err(|e| IndexError::io(out, e))?;
                if entries.next().is_some() {
                    return Err(IndexError::InvalidInput(format!(
                        "{} is a non-empty directory without {MANIFEST_FILE}: not an index; refusing to replace it",
                        out.display()
                    )));
                }
                Ok(())
            }
        }
    }

    /// Renames the finished temporary directory into place.
    fn commit(
        &self,
        tmp: &Path,
        out: &Path,
        parent: &Path,
        name: &str,
        tag: &str,
    ) -> Result<(), IndexError> {
        self.check_target(out)?;
        let old = parent.join(format!("{name}.old-{tag}"));
        let replaced = out.exists();
        if replaced {
            std::fs::rename(out, &old).map_err(|e| IndexError::io(out, e))?;
        }
        if let Err(e) = std::fs::rename(tmp, out) {
            if replaced {
                // Put the previous index back; best effort.
                let _ = std::fs::rename(&old, out);
            }
            return Err(IndexError::io(out, e));
        }
        sync_dir(parent)?;
        if replaced {
            std::fs::remove_dir_all(&old).map_err(|e| IndexError::io(&old, e))?;
        }
        Ok(())
    }
}

/// Builds an index with [`IndexBuilder`] (no overwrite). See [`IndexBuilder::build`].
pub fn build(
    out_dir: &Path,
    fields: ManifestFields,
    docs: Vec<Document>,
    vectors: Vec<f32>,
    params: HnswParams,
    progress: ProgressFn<'_>,
) -> Result<Index, IndexError> {
    IndexBuilder::new(out_dir, fields)
        .params(params)
        .build(docs, vectors, progress)
}

/// Deletes a temporary directory unless disarmed.
struct RemoveOnDrop(Option<PathBuf>);

impl RemoveOnDrop {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}
