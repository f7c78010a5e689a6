//! Retrieval evaluation and robustness reports.
//!
//! - [`metrics`]: nDCG@10, MRR@10, Recall@10/100 and MAP with trec_eval's
//!   conventions, relative degradation, and clean/variant embedding
//!   similarity (plain and anisotropy-adjusted cosine).
//! - [`report`]: the report data model (per encoder, per condition), its
//!   JSON schema and Markdown rendering.
//! - [`chart`]: a dependency-free SVG bar chart of a report.

pub mod chart;
pub mod metrics;
pub mod report;
pub mod run;

pub use metrics::{evaluate, relative_change, Evaluation, Metric, MetricSet};
pub use report::{ConditionKind, ConditionReport, EncoderReport, Report};

use std::path::PathBuf;

/// Errors of the evaluation module.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// Two vectors of different lengths were compared.
    #[error("vector dimensions differ: {left} vs {right}")]
    DimensionMismatch {
        /// First length.
        left: usize,
        /// Second length.
        right: usize,
    },
    /// A variant refers to a clean query that does not exist.
    #[error("clean query index {index} out of range ({len} clean vectors)")]
    IndexOutOfRange {
        /// Index given.
        index: usize,
        /// Number of clean vectors.
        len: usize,
    },
    /// Not enough vectors for the statistic.
    #[error("need at least {needed} vectors, got {got}")]
    TooFewVectors {
        /// Minimum.
        needed: usize,
        /// Given.
        got: usize,
    },
    /// A mean row names a condition the encoder does not have.
    #[error("encoder {encoder:?} has no condition {condition:?}")]
    UnknownCondition {
        /// Encoder name.
        encoder: String,
        /// Condition asked for.
        condition: String,
    },
    /// A mean row with no members.
    #[error("mean row {label:?} needs at least one member condition")]
    EmptyMean {
        /// Row label.
        label: String,
    },
    /// The system under evaluation failed (encoder, index or server).
    #[error("retrieval: {0}")]
    Retrieval(String),
    /// Generating noisy variants failed.
    #[error(transparent)]
    Noise(#[from] crate::noise::NoiseError),
    /// JSON (de)serialisation failed.
    #[error("report JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// Reading or writing a report file failed.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}
