//! Building an index one document at a time, with memory bounded whatever the corpus size,
//! and resumable after a crash.
//!
//! An [`IndexWriter`] appends each document's fields and its normalised vector to files in a
//! work directory beside the output, so the corpus text and the vectors never sit in memory:
//! what stays in memory is about 30 bytes per document (the duplicate-id check) until
//! [`IndexWriter::finish`] builds the graph over the memory-mapped vectors and renames the
//! directory into place (see `build.rs` for the commit).
//!
//! A *resumable* writer ([`IndexBuilder::resumable_writer`]) works in `<out>.partial` and makes
//! its progress durable at each [`IndexWriter::checkpoint`]: the part files are fsynced, then
//! `build.json` (documents so far, the caller's position in its input, and a description of the
//! input) is replaced atomically. After a crash or a failed finish, a writer for the same input
//! reopens the directory, cuts the part files back to the checkpoint and tells the caller where
//! to continue; a writer for another input discards it. A lock file keeps two builds of the
//! same output apart. A partial directory is never at `<out>`, so it is never served.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::build::{BuildProgress, BuildStage, IndexBuilder, ProgressFn, RemoveOnDrop};
use super::error::IndexError;
use super::fileio::{hash_file, sync_dir, write_values, ChunkWriter};
use super::graph::GRAPH_FILE;
use super::graph_build::{self, GraphCheckpoint, GraphStart};
use super::manifest::{
    HnswInfo, IndexManifest, Metric, DOCS_FILE, FORMAT_VERSION, GRAPH_DISTANCE, GRAPH_LIBRARY,
    VECTORS_FILE,
};
use super::mapped::Mapped;
use super::store::{DocStoreWriter, MappedDocs, BLOB_PART, OFFSETS_PART};
use super::vocab::Vocabulary;
use super::{vectors, Index, LoadOptions};

/// Checkpoint file of a resumable build (never part of a finished index).
pub const CHECKPOINT_FILE: &str = "build.json";
/// Lock file of a build's work directory (never part of a finished index).
const LOCK_FILE: &str = "build.lock";
/// The graph's saved progress in a resumable build (see `graph_build/checkpoint.rs`).
const GRAPH_PROGRESS_FILE: &str = "graph.progress";
/// Layout version of [`CHECKPOINT_FILE`].
const CHECKPOINT_VERSION: u32 = 1;

/// Where a resumable build stands, as recorded at its last checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SourcePosition {
    /// Bytes of the caller's input consumed (e.g. the corpus file offset).
    pub byte: u64,
    /// Lines (or records) of the input consumed.
    pub line: u64,
}

/// What [`IndexBuilder::resumable_writer`] found in the work directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    /// No interrupted build: start from the beginning of the input.
    Fresh,
    /// An interrupted build of the same input: `documents` are kept; continue reading the
    /// input at `position`.
    Continue {
        /// Documents already written.
        documents: usize,
        /// Where the input was at the checkpoint.
        position: SourcePosition,
    },
    /// An interrupted build of another input (or one without a usable checkpoint) was
    /// discarded; start from the beginning.
    Discarded {
        /// Why it could not be continued.
        reason: String,
    },
}

#[derive(Debug, Serialize, Deserialize)]
struct Checkpoint {
    checkpoint_version: u32,
    source: String,
    encoder_fingerprint: String,
    dimension: usize,
    documents: usize,
    docs_text_bytes: u64,
    position: SourcePosition,
}

/// An index under construction (see the module documentation).
pub struct IndexWriter {
    config: IndexBuilder,
    work: PathBuf,
    /// Removes a temporary work directory on drop (`None` for a resumable one, kept on failure).
    cleanup: Option<RemoveOnDrop>,
    /// Held for the writer's life: the lock on `build.lock`.
    _lock: Option<File>,
    source: Option<String>,
    vectors: ChunkWriter<File>,
    docs: DocStoreWriter,
    ids: IdSet,
    row: Vec<f32>,
    /// Documents made durable by the last checkpoint.
    checkpointed: usize,
}

impl std::fmt::Debug for IndexWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexWriter")
            .field("work", &self.work)
            .field("documents", &self.docs.len())
            .finish_non_exhaustive()
    }
}

impl IndexBuilder {
    /// A writer in a temporary directory (`<out>.tmp-<pid>-<seq>`) that is removed if the
    /// writer is dropped or fails: an all-or-nothing build.
    pub fn writer(&self) -> Result<IndexWriter, IndexError> {
        self.check_inputs()?;
        let work = self.temp_dir();
        if work.exists() {
            std::fs::remove_dir_all(&work).map_err(|e| IndexError::io(&work, e))?;
        }
        std::fs::create_dir_all(&work).map_err(|e| IndexError::io(&work, e))?;
        let cleanup = RemoveOnDrop::new(work.clone());
        let mut w = IndexWriter::create(self.clone(), work, None, None)?;
        w.cleanup = Some(cleanup);
        Ok(w)
    }

    /// A writer in `<out>.partial` that survives crashes and failed finishes (see the module
    /// documentation). `source` describes the input (e.g. corpus path, size and modification
    /// time, and how vectors are made): an interrupted build is continued only when it was
    /// writing the same `source` with the same document encoder.
    pub fn resumable_writer(&self, source: &str) -> Result<(IndexWriter, Resume), IndexError> {
        self.check_inputs()?;
        let work = self.partial_dir()?;
        std::fs::create_dir_all(&work).map_err(|e| IndexError::io(&work, e))?;
        let lock_path = work.join(LOCK_FILE);
        let lock = File::create(&lock_path).map_err(|e| IndexError::io(&lock_path, e))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(IndexError::InvalidInput(format!(
                    "another build is writing {} (its lock is held); wait for it or stop it",
                    work.display()
                )))
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(IndexError::io(&lock_path, e)),
        }
        let checkpoint = read_checkpoint(&work);
        let resume = match checkpoint {
            Ok(Some(c)) => match self.matches(&c, source) {
                Ok(()) => {
                    let held = lock
                        .try_clone()
                        .map_err(|e| IndexError::io(&lock_path, e))?;
                    match IndexWriter::reopen(self.clone(), work.clone(), source, &c, held) {
                        Ok(w) => {
                            let resume = Resume::Continue {
                                documents: c.documents,
                                position: c.position,
                            };
                            return Ok((w, resume));
                        }
                        Err(e) => Resume::Discarded {
                            reason: format!("its files do not match its checkpoint: {e}"),
                        },
                    }
                }
                Err(reason) => Resume::Discarded { reason },
            },
            Ok(None) => {
                if dir_has_data(&work)? {
                    Resume::Discarded {
                        reason: "it was stopped before its first checkpoint".into(),
                    }
                } else {
                    Resume::Fresh
                }
            }
            Err(reason) => Resume::Discarded { reason },
        };
        // Start over: everything but the lock goes.
        clear_dir(&work)?;
        let w = IndexWriter::create(self.clone(), work, Some(source.to_string()), Some(lock))?;
        Ok((w, resume))
    }

    /// Deletes the work directory of an interrupted resumable build of this output, if there
    /// is one (refused while another build holds its lock); true when one was deleted.
    pub fn discard_partial(&self) -> Result<bool, IndexError> {
        let work = self.partial_dir()?;
        if !work.exists() {
            return Ok(false);
        }
        let lock_path = work.join(LOCK_FILE);
        let lock = File::create(&lock_path).map_err(|e| IndexError::io(&lock_path, e))?;
        lock.try_lock().map_err(|_| {
            IndexError::InvalidInput(format!(
                "another build is writing {} (its lock is held); wait for it or stop it",
                work.display()
            ))
        })?;
        clear_dir(&work)?;
        drop(lock);
        std::fs::remove_dir_all(&work).map_err(|e| IndexError::io(&work, e))?;
        Ok(true)
    }

    /// Why checkpoint `c` cannot be continued by this builder for `source`, if it cannot.
    fn matches(&self, c: &Checkpoint, source: &str) -> Result<(), String> {
        let fields = self.fields();
        if c.checkpoint_version != CHECKPOINT_VERSION {
            return Err(format!(
                "its checkpoint has layout {} (this capot writes {CHECKPOINT_VERSION})",
                c.checkpoint_version
            ));
        }
        if c.encoder_fingerprint != fields.encoder_fingerprint || c.dimension != fields.dimension {
            return Err("it was made with another document encoder".into());
        }
        if c.source != source {
            return Err(format!(
                "it was reading another input ({}; now {source})",
                c.source
            ));
        }
        Ok(())
    }
}

impl IndexWriter {
    fn create(
        config: IndexBuilder,
        work: PathBuf,
        source: Option<String>,
        lock: Option<File>,
    ) -> Result<Self, IndexError> {
        let path = work.join(VECTORS_FILE);
        let vectors = File::create(&path).map_err(|e| IndexError::io(&path, e))?;
        let docs = DocStoreWriter::create(&work)?;
        let dim = config.fields().dimension;
        Ok(IndexWriter {
            config,
            work,
            cleanup: None,
            _lock: lock,
            source,
            vectors: ChunkWriter::new(vectors, 0),
            docs,
            ids: IdSet::default(),
            row: vec![0f32; dim],
            checkpointed: 0,
        })
    }

    /// Reopens the files of checkpoint `c`, cut back to it, and re-reads the ids written.
    fn reopen(
        config: IndexBuilder,
        work: PathBuf,
        source: &str,
        c: &Checkpoint,
        lock: File,
    ) -> Result<Self, IndexError> {
        let dim = config.fields().dimension;
        let path = work.join(VECTORS_FILE);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| IndexError::io(&path, e))?;
        let want = (c.documents * dim * 4) as u64;
        let have = file.metadata().map_err(|e| IndexError::io(&path, e))?.len();
        if have < want {
            return Err(IndexError::corrupt(
                &path,
                format!("holds {have} bytes, the checkpoint says at least {want}"),
            ));
        }
        file.set_len(want).map_err(|e| IndexError::io(&path, e))?;
        let mut file = file;
        std::io::Seek::seek(&mut file, std::io::SeekFrom::End(0))
            .map_err(|e| IndexError::io(&path, e))?;
        let mut docs = DocStoreWriter::reopen(&work, c.documents, c.docs_text_bytes)?;
        let mut ids = IdSet::default();
        for i in 0..c.documents {
            let id = docs.id(i)?;
            if let Err(first) = ids.insert(&id, i as u32, &mut docs) {
                return Err(IndexError::InvalidInput(format!(
                    "duplicate document id {id:?} (documents {first} and {i})"
                )));
            }
        }
        Ok(IndexWriter {
            config,
            work,
            cleanup: None,
            _lock: Some(lock),
            source: Some(source.to_string()),
            vectors: ChunkWriter::new(file, want),
            docs,
            ids,
            row: vec![0f32; dim],
            checkpointed: c.documents,
        })
    }

    /// Nodes already in the graph according to the graph progress saved by an interrupted
    /// [`finish`](Self::finish), which the next one continues (if the file proves usable).
    pub fn saved_graph_progress(&self) -> Option<usize> {
        graph_build::saved_progress(&self.work.join(GRAPH_PROGRESS_FILE))
    }

    /// Documents a checkpoint has made durable (from this run or the one it resumed; always 0
    /// for a temporary writer): what running the build again keeps.
    pub fn checkpointed(&self) -> usize {
        self.checkpointed
    }

    /// Gives the build up and deletes its work directory (a resumable one too).
    pub fn discard(self) -> Result<(), IndexError> {
        let IndexWriter {
            work,
            cleanup,
            _lock: lock,
            vectors,
            docs,
            ..
        } = self;
        drop((vectors, docs));
        if let Some(c) = cleanup {
            c.disarm();
        }
        std::fs::remove_dir_all(&work).map_err(|e| IndexError::io(&work, e))?;
        drop(lock);
        Ok(())
    }

    /// The work directory.
    pub fn work_dir(&self) -> &Path {
        &self.work
    }

    /// Documents written so far.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// True before the first document.
    pub fn is_empty(&self) -> bool {
        self.docs.len() == 0
    }

    /// Appends one document and its vector (normalised here; a zero or non-finite vector, a
    /// wrong dimension, an empty or duplicate id is refused and nothing is written).
    /// [`IndexError::DuplicateId`] names the earlier document with the same id.
    pub fn push(
        &mut self,
        id: &str,
        title: &str,
        text: &str,
        vector: &[f32],
    ) -> Result<(), IndexError> {
        let dim = self.row.len();
        if vector.len() != dim {
            return Err(IndexError::DimensionMismatch {
                expected: dim,
                got: vector.len(),
            });
        }
        if id.is_empty() {
            return Err(IndexError::InvalidInput(format!(
                "document {} has an empty id",
                self.docs.len()
            )));
        }
        self.row.copy_from_slice(vector);
        vectors::normalize(&mut self.row).map_err(|e| {
            IndexError::InvalidInput(format!(
                "vector of document {} ({id:?}) {e}",
                self.docs.len()
            ))
        })?;
        let index = self.docs.len() as u32;
        if let Err(first) = self.ids.insert(id, index, &mut self.docs) {
            return Err(IndexError::DuplicateId {
                id: id.to_string(),
                first: first as usize,
            });
        }
        let path = || self.work.join(VECTORS_FILE);
        self.vectors
            .write_all(bytemuck::cast_slice(&self.row))
            .map_err(|e| IndexError::io(path(), e))?;
        self.docs.push(id, title, text)
    }

    /// Makes everything pushed so far durable and records `position` as where the input
    /// continues (a no-op for a temporary writer, which is never resumed).
    pub fn checkpoint(&mut self, position: SourcePosition) -> Result<(), IndexError> {
        let Some(source) = &self.source else {
            return Ok(());
        };
        let path = self.work.join(VECTORS_FILE);
        self.vectors.flush().map_err(|e| IndexError::io(&path, e))?;
        self.vectors
            .get_ref()
            .sync_data()
            .map_err(|e| IndexError::io(&path, e))?;
        self.docs.sync()?;
        let fields = self.config.fields();
        let c = Checkpoint {
            checkpoint_version: CHECKPOINT_VERSION,
            source: source.clone(),
            encoder_fingerprint: fields.encoder_fingerprint.clone(),
            dimension: fields.dimension,
            documents: self.docs.len(),
            docs_text_bytes: self.docs.blob_len(),
            position,
        };
        let json = serde_json::to_vec_pretty(&c)
            .map_err(|e| IndexError::InvalidInput(format!("checkpoint: {e}")))?;
        let dest = self.work.join(CHECKPOINT_FILE);
        crate::atomic_file::write(&dest, &json).map_err(|e| IndexError::io(&dest, e))?;
        self.checkpointed = self.docs.len();
        Ok(())
    }

    /// Writes the document store, the vocabulary, the graph and the manifest, renames the
    /// work directory to the output and returns the index, ready to search.
    ///
    /// On failure a temporary writer's directory is removed; a resumable one keeps its
    /// vectors and documents up to the last checkpoint, so running the same build again goes
    /// straight to this step.
    pub fn finish(self, progress: ProgressFn<'_>) -> Result<Index, IndexError> {
        let IndexWriter {
            config,
            work,
            cleanup,
            _lock: lock,
            mut vectors,
            docs,
            ids,
            source,
            ..
        } = self;
        let resumable = source.is_some();
        // The duplicate check is over (~20 B per document): free it before the graph is built
        // (fields left in a partly moved `self` would live to the end of this function).
        drop(ids);
        // The graph and the files: what `build_seconds` has always measured.
        let started = Instant::now();
        let report =
            |p: &mut dyn FnMut(&BuildProgress) -> Result<(), IndexError>, stage, done, total| {
                p(&BuildProgress {
                    stage,
                    done,
                    total,
                    elapsed: started.elapsed(),
                })
            };
        let n = docs.len();
        if n == 0 {
            return Err(IndexError::EmptyCorpus);
        }
        let fields = config.fields();
        let dim = fields.dimension;
        // 1. The vectors, durable and mapped.
        let vectors_path = work.join(VECTORS_FILE);
        vectors
            .flush()
            .map_err(|e| IndexError::io(&vectors_path, e))?;
        vectors
            .get_ref()
            .sync_data()
            .map_err(|e| IndexError::io(&vectors_path, e))?;
        drop(vectors);
        // 2. Documents and vocabulary, streamed from the store just written.
        let mut files = BTreeMap::new();
        files.insert(DOCS_FILE.to_string(), docs.finish(&work.join(DOCS_FILE))?);
        let store = MappedDocs::open(&work.join(DOCS_FILE), n)?;
        let mut vocab = Vocabulary::build(
            (0..n)
                .filter_map(|i| store.get(i))
                .map(|d| (d.title, d.text)),
        );
        drop(store);
        report(progress, BuildStage::Validated, n, n)?;
        // 3. Graph over the mapped vectors.
        let mapped = Mapped::<f32>::open(&vectors_path, Some(n * dim))?;
        mapped.advise_walk();
        let params = config.hnsw_params();
        let progress_path = work.join(GRAPH_PROGRESS_FILE);
        let checkpoint = match (resumable, config.graph_checkpoint_interval()) {
            (true, Some(every)) => Some(GraphCheckpoint {
                path: &progress_path,
                every,
            }),
            _ => None,
        };
        let (graph, start) = graph_build::build(
            mapped.as_slice(),
            dim,
            params,
            config.thread_count(),
            checkpoint.as_ref(),
            &mut |done, total| report(progress, BuildStage::Inserting, done, total),
        )?;
        if let GraphStart::Discarded { reason } = start {
            tracing::warn!(
                "the graph's saved progress in {} was not used: {reason}",
                progress_path.display()
            );
        }
        let top_level = graph.get(7).map_or(0, |&l| l as usize);
        // 4. Files, manifest last.
        files.insert(
            GRAPH_FILE.to_string(),
            write_values(&work.join(GRAPH_FILE), &graph)?,
        );
        drop(graph);
        report(progress, BuildStage::Writing, 1, 3)?;
        let precision = config.graph_vector_precision();
        if let Some(file) = precision.file() {
            files.insert(
                file.to_string(),
                precision.write(mapped.as_slice(), dim, &work.join(file))?,
            );
        }
        drop(mapped);
        files.insert(VECTORS_FILE.to_string(), hash_file(&vectors_path)?);
        report(progress, BuildStage::Writing, 2, 3)?;
        let (vocab_info, vocab_files) = vocab.write(&work)?;
        files.extend(vocab_files);
        report(progress, BuildStage::Writing, 3, 3)?;
        let created = crate::clock::now_unix();
        let manifest = IndexManifest {
            format_version: FORMAT_VERSION,
            capot_version: fields.capot_version.clone(),
            encoder_fingerprint: fields.encoder_fingerprint.clone(),
            encoder_name: fields.encoder_name.clone(),
            dimension: dim,
            metric: Metric::Cosine,
            count: n,
            hnsw: HnswInfo {
                m: params.m,
                ef_construction: params.ef_construction,
                ef_search: params.ef_search,
                seed: params.seed,
                top_level,
                distance: GRAPH_DISTANCE.to_string(),
                library: GRAPH_LIBRARY.to_string(),
            },
            graph_vectors: precision,
            build_seconds: (started.elapsed().as_secs_f64() * 1e3).round() / 1e3,
            created_unix: created,
            created_at: crate::clock::rfc3339_from_unix(created),
            files,
            vocab: Some(vocab_info),
            payload: None,
        };
        manifest.write(&work)?;
        // What only the build needs goes before the rename; the lock stays held by its open
        // file until the commit is done.
        for name in [
            CHECKPOINT_FILE,
            GRAPH_PROGRESS_FILE,
            LOCK_FILE,
            BLOB_PART,
            OFFSETS_PART,
        ] {
            match std::fs::remove_file(work.join(name)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(IndexError::io(work.join(name), e)),
            }
        }
        sync_dir(&work)?;
        report(progress, BuildStage::Committing, 0, 1)?;
        // 5. Commit.
        config.commit(&work)?;
        if let Some(c) = cleanup {
            c.disarm();
        }
        drop(lock);
        // Served from the files just written, exactly as a restart would serve them.
        Index::load_with(
            config.out_dir(),
            LoadOptions {
                verify_checksums: false,
            },
        )
    }
}

/// Reads `build.json`: `Ok(None)` when there is none, `Err(reason)` when it is unreadable.
fn read_checkpoint(work: &Path) -> Result<Option<Checkpoint>, String> {
    let path = work.join(CHECKPOINT_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| format!("its checkpoint {} is unreadable: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// Whether `work` holds anything besides the lock file.
fn dir_has_data(work: &Path) -> Result<bool, IndexError> {
    let entries = std::fs::read_dir(work).map_err(|e| IndexError::io(work, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| IndexError::io(work, e))?;
        if entry.file_name() != LOCK_FILE {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Removes everything in `work` but the lock file. Only files a build writes are expected
/// there; anything else (a directory) is refused rather than deleted.
fn clear_dir(work: &Path) -> Result<(), IndexError> {
    let entries = std::fs::read_dir(work).map_err(|e| IndexError::io(work, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| IndexError::io(work, e))?;
        let path = entry.path();
        if entry.file_name() == LOCK_FILE {
            continue;
        }
        let kind = entry.file_type().map_err(|e| IndexError::io(&path, e))?;
        if kind.is_dir() {
            return Err(IndexError::InvalidInput(format!(
                "{} holds a directory ({}); it is not an interrupted capot build, so it is left alone",
                work.display(),
                path.display()
            )));
        }
        std::fs::remove_file(&path).map_err(|e| IndexError::io(&path, e))?;
    }
    Ok(())
}

/// The ids written so far, for refusing a duplicate when it arrives: a map from a 64-bit hash
/// of the id to the first document with that hash (about 20 bytes per document), and, for
/// the rare different ids that share a hash, their exact text. A hash match is confirmed by
/// reading the earlier id back from the store's part files, so the check is exact.
#[derive(Default)]
struct IdSet {
    by_hash: HashMap<u64, u32>,
    collided: HashMap<String, u32>,
}

impl IdSet {
    /// Records `id` as document `index`; `Err(first)` when document `first` has it already.
    fn insert(&mut self, id: &str, index: u32, docs: &mut DocStoreWriter) -> Result<(), u32> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        id.hash(&mut h);
        let hash = h.finish();
        let Some(&first) = self.by_hash.get(&hash) else {
            self.by_hash.insert(hash, index);
            return Ok(());
        };
        // Same hash: the same id, or (about once in 10¹² pairs) another one.
        let first_id = docs.id(first as usize).unwrap_or_default();
        if first_id == id {
            return Err(first);
        }
        match self.collided.get(id) {
            Some(&f) => Err(f),
            None => {
                self.collided.insert(id.to_string(), index);
                Ok(())
            }
        }
    }
}
