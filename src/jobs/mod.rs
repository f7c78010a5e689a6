//! Alignment jobs launched from the admin API: records and events in an embedded store, runners
//! that execute `capot align` and `capot eval` (child processes, or a Ray cluster), and the
//! manager that evaluates a finished encoder, registers it and promotes it behind an alias when
//! it passes the quality gate. See `docs/jobs.md`.

pub mod gate;
pub mod local;
pub mod manager;
pub mod ray;
pub mod record;
pub mod runner;
pub mod spec;
pub mod store;

pub use manager::{EncoderHost, JobError, JobManager, JobMetrics, JobsConfig};
pub use record::{JobEvent, JobRecord, JobStatus};
pub use runner::{Exit, LineSink, RunHandle, Runner, RunnerError, Work};
pub use spec::{FieldError, JobSpec};
