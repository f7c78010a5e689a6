//! Building an index directory atomically.
//!
//! Everything is written into a work directory beside the output, each file fsynced, the
//! manifest last; then the directory is renamed to `<out>`. An interrupted or failed build
//! leaves no directory at `<out>`. The work directory is `<out>.tmp-<pid>-<seq>` for an
//! all-or-nothing build (removed when it fails; one killed outright leaves a `.tmp-` sibling
//! that never loads), or `<out>.partial` for a resumable one (kept, so that running the build
//! again continues it; see `writer.rs`).
//!
//! With `overwrite`, an existing index at `<out>` is renamed away to
//! `<out>.old-<pid>-<seq>`, the new one renamed in, and the old one deleted.
//! Between the two renames (microseconds) `<out>` does not exist; a loader
//! racing with it gets a clear "missing" error, never a mixed directory.
//! Replacing refuses a directory that is neither an index nor empty, so a
//! wrong path cannot delete unrelated data.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::error::IndexError;
use super::fileio::sync_dir;
use super::manifest::{HnswParams, ManifestFields, MANIFEST_FILE};
use super::quantized::GraphVectors;
use super::store::Document;
use super::Index;

/// Stage of a running build, reported to the progress callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildStage {
    /// Documents stored and their vocabulary counted (`done == total == count`).
    Validated,
    /// Graph insertion: `done` of `total` vectors inserted.
    Inserting,
    /// Files written: `done` of `total` (graph, vectors, vocabulary).
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
    graph_checkpoint: Option<Duration>,
}

/// Default time between two saves of the graph's progress in a resumable build.
pub const DEFAULT_GRAPH_CHECKPOINT_INTERVAL: Duration = Duration::from_secs(600);

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
            graph_checkpoint: Some(DEFAULT_GRAPH_CHECKPOINT_INTERVAL),
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

    /// How often a [resumable](Self::resumable_writer) build saves the graph built so far
    /// (default every 10 minutes; `None`: never), so that after a crash the next build
    /// continues the graph instead of starting it again. Each save pauses insertion while the
    /// graph is written (about 1.3 GB at 10M documents with m = 16).
    pub fn graph_checkpoint_every(mut self, every: Option<Duration>) -> Self {
        self.graph_checkpoint = every;
        self
    }

    /// Threads inserting into the graph (default: all cores; 1 gives a deterministic graph).
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// The manifest fields (encoder, dimension) the index is built for.
    pub fn fields(&self) -> &ManifestFields {
        &self.fields
    }

    /// The output directory.
    pub fn out_dir(&self) -> &Path {
        &self.out_dir
    }

    pub(crate) fn hnsw_params(&self) -> &HnswParams {
        &self.params
    }

    pub(crate) fn thread_count(&self) -> usize {
        self.threads
    }

    pub(crate) fn graph_checkpoint_interval(&self) -> Option<Duration> {
        self.graph_checkpoint
    }

    pub(crate) fn graph_vector_precision(&self) -> GraphVectors {
        self.graph_vectors
    }

    /// Builds the index and returns it, ready to search (no reload needed).
    ///
    /// `vectors` is flat, `docs.len() × dimension`, row `i` for `docs[i]`.
    /// Vectors are L2-normalised here (the metric is cosine); zero or
    /// non-finite vectors are rejected. Graph insertion runs on
    /// [`threads`](Self::threads) threads; the graph is not reproducible
    /// bit for bit with more than one. The same as pushing every document to a
    /// [`writer`](Self::writer) and finishing it.
    pub fn build(
        &self,
        docs: Vec<Document>,
        vectors: Vec<f32>,
        progress: ProgressFn<'_>,
    ) -> Result<Index, IndexError> {
        self.check_inputs()?;
        let (n, dim) = (docs.len(), self.fields.dimension);
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
        let mut writer = self.writer()?;
        for (d, v) in docs.iter().zip(vectors.chunks_exact(dim)) {
            writer
                .push(&d.id, &d.title, &d.text, v)
                .map_err(|e| match e {
                    IndexError::DuplicateId { id, first } => IndexError::InvalidInput(format!(
                        "duplicate document id {id:?} (documents {first} and {})",
                        writer.len()
                    )),
                    e => e,
                })?;
        }
        drop((docs, vectors));
        writer.finish(progress)
    }

    /// Checks the parameters and the output path before any work.
    pub(crate) fn check_inputs(&self) -> Result<(), IndexError> {
        self.params.validate()?;
        if self.fields.dimension == 0 {
            return Err(IndexError::InvalidInput(
                "dimension must be at least 1".into(),
            ));
        }
        self.name_and_parent()?;
        self.check_target(&self.out_dir)
    }

    /// The output's final name and its parent directory (`.` for a bare name).
    fn name_and_parent(&self) -> Result<(String, PathBuf), IndexError> {
        let out = &self.out_dir;
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
        Ok((name, parent))
    }

    /// A fresh temporary work directory beside the output: `<out>.tmp-<pid>-<seq>`.
    pub(crate) fn temp_dir(&self) -> PathBuf {
        let (name, parent) = self
            .name_and_parent()
            .unwrap_or_else(|_| ("index".into(), PathBuf::from(".")));
        parent.join(format!(
            "{name}.tmp-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ))
    }

    /// The work directory of a resumable build: `<out>.partial`.
    pub(crate) fn partial_dir(&self) -> Result<PathBuf, IndexError> {
        let (name, parent) = self.name_and_parent()?;
        Ok(parent.join(format!("{name}.partial")))
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

    /// Renames the finished work directory `work` to the output, replacing the index there
    /// when overwriting (renamed away first, deleted last).
    pub(crate) fn commit(&self, work: &Path) -> Result<(), IndexError> {
        let out = &self.out_dir;
        let (name, parent) = self.name_and_parent()?;
        self.check_target(out)?;
        let old = parent.join(format!(
            "{name}.old-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let replaced = out.exists();
        if replaced {
            std::fs::rename(out, &old).map_err(|e| IndexError::io(out, e))?;
        }
        if let Err(e) = std::fs::rename(work, out) {
            if replaced {
                // Put the previous index back; best effort.
                let _ = std::fs::rename(&old, out);
            }
            return Err(IndexError::io(out, e));
        }
        sync_dir(&parent)?;
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
pub(crate) struct RemoveOnDrop(Option<PathBuf>);

impl RemoveOnDrop {
    pub(crate) fn new(dir: PathBuf) -> Self {
        RemoveOnDrop(Some(dir))
    }

    pub(crate) fn disarm(mut self) {
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
