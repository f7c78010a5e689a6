//! Alignment (CAPOT and related objectives): fine-tune a copy of a query encoder so noisy queries
//! land where their clean versions do, anchored to a frozen copy of the base encoder so the new
//! encoder still fits the frozen document index. The document side is never touched.
//!
//! [`align`] validates everything first ([`prepare`]: base bundle with weights, queries, variant
//! files, index, objective, output location, checkpoint), then trains ([`Prepared::train`]) and
//! writes a normal encoder bundle whose `aligned_to` is the base's. Formulas and choices are in
//! `docs/alignment.md`.

mod bundle;
mod checkpoint;
pub mod data;
pub mod objective;
pub mod optim;
mod train;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

pub use data::{DataSummary, Schedule};
pub use objective::{LossParams, Objective, ObjectiveKind};
pub use optim::{AdamWParams, DecayTarget, LrDecay, LrSchedule};
pub use train::{prepare, AlignOutcome, AlignReport, Prepared, StepRecord};

use crate::encoder::RuntimeOptions;
use crate::noise::NoiseKind;

/// Errors of an alignment run. [`AlignError::Input`] and the wrapped read errors are raised
/// before training starts.
#[derive(Debug, thiserror::Error)]
pub enum AlignError {
    /// Bad arguments or data, found before any training.
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Dataset(#[from] crate::dataset::DatasetError),
    #[error(transparent)]
    Encoder(#[from] crate::encoder::EncoderError),
    #[error(transparent)]
    Model(#[from] crate::model::ModelError),
    #[error("index: {0}")]
    Index(#[from] crate::index::IndexError),
    #[error(transparent)]
    Noise(#[from] crate::noise::NoiseError),
    /// A tensor operation failed during training.
    #[error("candle: {0}")]
    Candle(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A checkpoint is unreadable or belongs to another run.
    #[error("checkpoint {path}: {message}")]
    Checkpoint { path: PathBuf, message: String },
}

impl AlignError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        AlignError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

impl From<candle_core::Error> for AlignError {
    fn from(e: candle_core::Error) -> Self {
        AlignError::Candle(e.to_string())
    }
}

/// Where training runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrainDevice {
    /// The CPU (deterministic for a given seed).
    Cpu,
    /// CUDA device N (needs a build with the `cuda-train` feature).
    Cuda(usize),
}

impl std::str::FromStr for TrainDevice {
    type Err = AlignError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "cpu" => Ok(TrainDevice::Cpu),
            "cuda" => Ok(TrainDevice::Cuda(0)),
            other => other
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(TrainDevice::Cuda)
                .ok_or_else(|| {
                    AlignError::Input(format!("unknown device `{other}`; use cpu, cuda or cuda:N"))
                }),
        }
    }
}

/// Everything an alignment run needs.
#[derive(Debug, Clone)]
pub struct AlignOptions {
    /// Base encoder bundle (must carry weights).
    pub base: PathBuf,
    /// Clean queries (TSV `qid<TAB>text`, BEIR `queries.jsonl`, or a dataset directory).
    pub queries: PathBuf,
    /// Variant files (`qid<TAB>text`): noisy positives.
    pub variants: Vec<PathBuf>,
    /// Noise generated on the fly (a fresh variant per epoch).
    pub noise: Vec<NoiseKind>,
    /// One-word queries to add from the base tokenizer's vocabulary (0: none); needs `noise`.
    pub word_queries: usize,
    /// The loss mix.
    pub objective: Objective,
    /// Frozen index (needed by the ranking objective).
    pub index: Option<PathBuf>,
    /// Run length.
    pub schedule: Schedule,
    /// Clean queries per step (B).
    pub batch_size: usize,
    /// Noisy positives per query and step (K).
    pub positives: usize,
    /// Optimiser settings (`adamw.lr` is the peak of `lr_schedule`).
    pub adamw: AdamWParams,
    /// Warm-up and decay of the learning rate.
    pub lr_schedule: LrSchedule,
    /// Token limit while training (special tokens included; the bundle keeps the base's limit).
    pub max_length: usize,
    /// Loss hyper-parameters.
    pub loss: LossParams,
    /// Freeze the word-embedding table.
    pub freeze_embeddings: bool,
    /// Seed of the batch plan, the per-step choices and the generated noise.
    pub seed: u64,
    /// Training device.
    pub device: TrainDevice,
    /// Where checkpoints go (`None`: only on interruption, into `<out>.checkpoint`).
    pub checkpoint_dir: Option<PathBuf>,
    /// Steps between checkpoints.
    pub checkpoint_every: usize,
    /// Continue from the checkpoint in `checkpoint_dir`.
    pub resume: bool,
    /// Output bundle directory.
    pub out: PathBuf,
    /// Replace an existing output bundle.
    pub force: bool,
    /// Output bundle name (default: `<base name>-aligned`).
    pub name: Option<String>,
    /// Output bundle version.
    pub version: Option<String>,
    /// ONNX Runtime settings for the smoke inference of the written bundle.
    pub runtime: RuntimeOptions,
}

impl AlignOptions {
    /// Defaults for everything but the paths and the objective.
    pub fn new(base: PathBuf, queries: PathBuf, out: PathBuf, objective: Objective) -> Self {
        AlignOptions {
            base,
            queries,
            variants: Vec::new(),
            noise: Vec::new(),
            word_queries: 0,
            objective,
            index: None,
            schedule: Schedule::Epochs(1),
            batch_size: 32,
            positives: 1,
            adamw: AdamWParams::default(),
            lr_schedule: LrSchedule::default(),
            max_length: 28,
            loss: LossParams::default(),
            freeze_embeddings: false,
            seed: 0,
            device: TrainDevice::Cpu,
            checkpoint_dir: None,
            checkpoint_every: 50,
            resume: false,
            out,
            force: false,
            name: None,
            version: None,
            runtime: RuntimeOptions::default(),
        }
    }

    /// The checkpoint directory used on interruption.
    pub fn interrupt_checkpoint_dir(&self) -> PathBuf {
        self.checkpoint_dir.clone().unwrap_or_else(|| {
            let mut s = self.out.as_os_str().to_owned();
            s.push(".checkpoint");
            PathBuf::from(s)
        })
    }
}

/// Receives progress of a run (the CLI draws a bar); every method has a no-op default.
pub trait AlignProgress {
    /// Anchor vectors computed so far (before training).
    fn anchors(&self, _done: usize, _total: usize) {}
    /// Training starts at `first_step` (0, or the resumed step) of `total_steps`.
    fn start(&self, _first_step: usize, _total_steps: usize) {}
    /// One step finished.
    fn step(&self, _record: &StepRecord) {}
    /// A one-line note (checkpoint written, bundle written, ...).
    fn note(&self, _message: &str) {}
}

/// A progress receiver that ignores everything.
pub struct NoProgress;

impl AlignProgress for NoProgress {}

/// Validates, trains and writes the bundle. `stop` is polled between steps: when it is set the
/// run saves a checkpoint and returns [`AlignOutcome::Interrupted`].
pub fn align(
    options: &AlignOptions,
    progress: &dyn AlignProgress,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<AlignOutcome, AlignError> {
    let prepared = prepare(options)?;
    prepared.train(progress, stop)
}
