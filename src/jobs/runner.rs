//! Where a job's commands run. A [`Runner`] starts one command (`capot align ...` or
//! `capot eval ...`) and hands back a [`RunHandle`] that streams the command's output lines,
//! reports how it ended, and stops it on request. The job manager runs a job as a sequence of
//! such commands and does not care whether they ran as a child process or on a Ray cluster.

use std::path::PathBuf;
use std::sync::Arc;

/// One command of a job.
#[derive(Debug, Clone)]
pub struct Work {
    /// The job it belongs to (Ray submission ids are derived from it).
    pub job_id: String,
    /// What this command is within the job (`align`, `eval`), for ids and logs.
    pub stage: String,
    /// The program and its arguments; `argv[0]` is the capot binary as the runner sees it.
    pub argv: Vec<String>,
    /// Environment variables set for the command.
    pub env: Vec<(String, String)>,
    /// The job's working directory (logs, checkpoints); it exists when `start` is called.
    pub workdir: PathBuf,
}

/// Receives the command's output, one line at a time (stdout and stderr interleaved as they come).
pub type LineSink = Arc<dyn Fn(&str) + Send + Sync>;

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// Exit code 0.
    Succeeded,
    /// Stopped through [`RunHandle::cancel`].
    Cancelled,
    /// Anything else, with the reason (exit code, signal, runner status and message).
    Failed(String),
}

/// Why a runner could not start or follow a command.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The command could not be started (binary missing, cluster unreachable, refused).
    #[error("cannot start {stage}: {message}")]
    Start { stage: String, message: String },
    /// The runner lost track of a started command.
    #[error("{0}")]
    Follow(String),
}

/// Runs commands for jobs. Implementations: [`super::local::LocalRunner`] (child processes) and
/// [`super::ray::RayRunner`] (Ray job REST API).
pub trait Runner: Send + Sync {
    /// `local` or `ray`, as in the config and on job records.
    fn kind(&self) -> &'static str;

    /// Starts `work`; every output line goes to `sink` while the command runs.
    fn start(&self, work: Work, sink: LineSink) -> Result<Box<dyn RunHandle>, RunnerError>;

    /// Stops a command this runner started before the server restarted, given its
    /// [`RunHandle::reference`]. Best effort: the command may be gone already.
    fn stop_orphan(&self, reference: &str);
}

/// A started command. `wait` and `cancel` are called from different threads.
pub trait RunHandle: Send + Sync {
    /// What identifies the command to its runner: `pid:1234`, or the Ray submission id.
    fn reference(&self) -> String;

    /// Blocks until the command ends and all its output went to the sink.
    fn wait(&self) -> Exit;

    /// Asks the command to stop (SIGTERM, then SIGKILL after a grace period; Ray's stop call).
    /// Returns at once; `wait` then reports [`Exit::Cancelled`].
    fn cancel(&self);
}
