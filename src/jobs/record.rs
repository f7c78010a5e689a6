//! A job as the API shows it and the store keeps it: status, progress, timestamps, result
//! encoder, evaluation summary, promotion decision, error; and the events of its life.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::spec::JobSpec;

/// Where a job is in its life. `succeeded`, `failed` and `cancelled` are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl JobStatus {
    /// Every status, in life order (for metrics and filters).
    pub const ALL: [JobStatus; 5] = [
        JobStatus::Queued,
        JobStatus::Running,
        JobStatus::Succeeded,
        JobStatus::Failed,
        JobStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::Running => "running",
            JobStatus::Succeeded => "succeeded",
            JobStatus::Failed => "failed",
            JobStatus::Cancelled => "cancelled",
        }
    }

    /// Whether nothing will change any more.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobStatus::Succeeded | JobStatus::Failed | JobStatus::Cancelled
        )
    }
}

impl std::str::FromStr for JobStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        JobStatus::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                format!("unknown status {s:?}; use queued, running, succeeded, failed or cancelled")
            })
    }
}

/// What a running job is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// Training (`capot align`), anchor vectors first.
    Align,
    /// Quantising the aligned encoder (`capot encoder quantize`), when the spec asks for it.
    Quantize,
    /// Evaluating base against new (`capot eval`).
    Eval,
    /// Loading the new encoder into the registry.
    Register,
    /// Deciding the promotion and moving the alias.
    Promote,
}

/// Training progress, from the `capot align` step events.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    pub step: usize,
    pub total_steps: usize,
    /// Total loss of the last step.
    pub loss: Option<f64>,
    /// Running training throughput of this attempt (clean + noisy query pairs per second).
    pub pairs_per_second: Option<f64>,
    /// Seconds of training left at the running rate.
    pub eta_seconds: Option<f64>,
    /// Anchor vectors computed / to compute (before the first step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchors: Option<(usize, usize)>,
}

/// The encoder a job made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultEncoder {
    pub name: String,
    pub path: PathBuf,
    /// Whether it is loaded in the registry (false when registration failed or was not reached).
    pub registered: bool,
}

/// One metric of the base and the new encoder on clean queries and on the noisy conditions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalSummary {
    pub dataset: String,
    /// The gate's metric (`ndcg@10`).
    pub metric: String,
    pub base_clean: f64,
    pub new_clean: f64,
    /// Mean over the noisy conditions (variant files and generated noise, not mean rows).
    pub base_noisy: f64,
    pub new_noisy: f64,
    /// `(new_clean − base_clean) / base_clean`.
    pub clean_change: f64,
    /// `(new_noisy − base_noisy) / base_noisy`.
    pub noisy_change: f64,
    /// Share of the base's clean→noisy loss won back: `(new_noisy − base_noisy) / (base_clean − base_noisy)`.
    pub gap_recovered: Option<f64>,
    /// The noisy conditions averaged, each with the base's and the new encoder's value.
    pub conditions: BTreeMap<String, BaseNew>,
    /// Where the full report is (report.json, report.md, report.svg).
    pub report_dir: PathBuf,
}

/// A metric of the base and of the new encoder.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BaseNew {
    pub base: f64,
    pub new: f64,
}

/// What the promotion step decided and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Promotion {
    pub alias: String,
    pub promoted: bool,
    /// One line per gate condition, passed or not, with the numbers.
    pub reasons: Vec<String>,
    /// The alias's target before, when it was moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
}

/// Moments of a job's life, for the API and the overhead measurements.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timestamps {
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

/// Measured overheads of a job, in seconds (absent until reached).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Overhead {
    /// From the runner starting the training command to its first step starting (process
    /// start, model load, anchor vectors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_to_first_step_seconds: Option<f64>,
    /// From submission to the first training step starting (queueing included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submit_to_first_step_seconds: Option<f64>,
    /// From the end of training (align exited) to the encoder registered, evaluation excluded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training_end_to_registered_seconds: Option<f64>,
    /// Training (align command) wall time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub align_seconds: Option<f64>,
    /// Evaluation (eval command) wall time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval_seconds: Option<f64>,
}

/// A job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub id: String,
    pub status: JobStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<Stage>,
    /// `local` or `ray`.
    pub runner: String,
    /// What identifies the running command to its runner (`pid:N`, a Ray submission id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_ref: Option<String>,
    /// Times it was started (more than 1 after a re-queue on restart).
    pub attempts: u32,
    pub spec: JobSpec,
    /// The base encoder's bundle, resolved at submission.
    pub base_path: PathBuf,
    pub progress: Progress,
    #[serde(flatten)]
    pub times: Timestamps,
    pub overhead: Overhead,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoder: Option<ResultEncoder>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluation: Option<EvalSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion: Option<Promotion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The job's working directory (logs, checkpoint, staging bundle, evaluation report).
    pub workdir: PathBuf,
}

/// One event of a job. `seq` counts from 1 per job; it is the SSE event id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobEvent {
    pub job: String,
    pub seq: u64,
    pub at: String,
    /// `queued`, `started`, `progress`, `stage`, `log`, `evaluated`, `registered`, `promotion`,
    /// `requeued`, `succeeded`, `failed`, `cancelled`.
    pub kind: String,
    pub data: Value,
}

impl JobEvent {
    /// Whether this event ends the job (the live stream closes after it).
    pub fn is_final(&self) -> bool {
        matches!(self.kind.as_str(), "succeeded" | "failed" | "cancelled")
    }
}
