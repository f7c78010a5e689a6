//! The job manager: accepts jobs, queues them, runs at most `max_running` at once through the
//! configured [`Runner`], follows their progress, evaluates the new encoder, registers it and
//! decides its promotion. Records and events go to the [`JobStore`] first; the broadcast
//! channel only wakes up live readers, who read the store.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::gate;
use super::record::{
    JobEvent, JobRecord, JobStatus, Overhead, Progress, Promotion, ResultEncoder, Stage, Timestamps,
};
use super::runner::{Exit, LineSink, RunHandle, Runner, Work};
use super::spec::{FieldError, JobSpec};
use super::store::{JobStore, Page, StoreError};
use crate::clock::now_rfc3339;
use crate::sync::lock;

/// What the manager needs from the service: the registry and the served index.
pub trait EncoderHost: Send + Sync {
    /// The encoder a name or alias points at, and its bundle directory.
    fn resolve(&self, name_or_alias: &str) -> Option<(String, PathBuf)>;
    /// Whether an encoder or an alias has this name.
    fn name_taken(&self, name: &str) -> bool;
    /// The served index directory.
    fn index_dir(&self) -> PathBuf;
    /// Loads a bundle under `name` (not aliased).
    fn register(&self, name: &str, path: &Path) -> Result<(), String>;
    /// Points `alias` at `encoder`; returns the alias's previous target.
    fn promote(&self, alias: &str, encoder: &str) -> Result<Option<String>, String>;
}

/// Settings of the job manager.
#[derive(Debug, Clone)]
pub struct JobsConfig {
    /// Jobs running at once; more wait in the queue.
    pub max_running: usize,
    /// After a restart, re-queue jobs that were running (resuming from their checkpoint)
    /// instead of marking them failed.
    pub requeue_on_restart: bool,
    /// Job working directories (`<dir>/<id>/`) and the store (`<dir>/jobs.db`).
    pub jobs_dir: PathBuf,
    /// Where finished bundles go (`<dir>/<name>/`).
    pub encoders_dir: PathBuf,
    /// The capot binary the commands run.
    pub binary: PathBuf,
    /// Environment passed to every command (e.g. `ORT_DYLIB_PATH`).
    pub env: Vec<(String, String)>,
}

/// Why a job call was refused.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// A request field is invalid (422).
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// No such job or base encoder (404).
    #[error("{0}")]
    NotFound(String),
    /// The name is taken, or the job cannot be cancelled any more (409).
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Counters and gauges of the jobs, registered by the server into `/metrics`.
pub struct JobMetrics {
    /// Jobs that ended, by final status (`capot_jobs_total{status}`).
    pub finished: prometheus::IntCounterVec,
    /// Jobs queued and running now (`capot_jobs{status}`).
    pub current: prometheus::IntGaugeVec,
}

impl JobMetrics {
    /// Creates the metrics; the caller registers them.
    pub fn new() -> Result<Self, prometheus::Error> {
        let finished = prometheus::IntCounterVec::new(
            prometheus::Opts::new("jobs_total", "Alignment jobs that ended, by final status."),
            &["status"],
        )?;
        let current = prometheus::IntGaugeVec::new(
            prometheus::Opts::new("jobs", "Alignment jobs queued and running now."),
            &["status"],
        )?;
        for s in ["succeeded", "failed", "cancelled"] {
            finished.with_label_values(&[s]);
        }
        for s in ["queued", "running"] {
            current.with_label_values(&[s]);
        }
        Ok(JobMetrics { finished, current })
    }
}

/// A job being run: its command handle (while a command runs) and whether cancel was asked.
#[derive(Default)]
struct Active {
    handle: Option<Arc<dyn RunHandle>>,
    cancel: bool,
    /// Past training and evaluation: registration is not interrupted.
    committing: bool,
}

#[derive(Default)]
struct Inner {
    queue: VecDeque<String>,
    running: HashMap<String, Active>,
    /// Names of jobs not yet ended (a second job may not take one).
    names: HashMap<String, String>,
    /// Last event number per job.
    event_seq: HashMap<String, u64>,
    /// When jobs of this server's life were submitted (sub-second, for the overhead numbers).
    submitted: HashMap<String, std::time::SystemTime>,
}

/// The job manager.
pub struct JobManager {
    config: JobsConfig,
    runner: Arc<dyn Runner>,
    store: JobStore,
    host: Arc<dyn EncoderHost>,
    metrics: Option<JobMetrics>,
    inner: Mutex<Inner>,
    wake: Condvar,
    events: tokio::sync::broadcast::Sender<String>,
}

/// Most stored `log` events per job (all lines are in the job's log files).
const MAX_LOG_EVENTS: usize = 200;
/// Least time between two stored progress events.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

impl JobManager {
    /// Opens the store, recovers the jobs a previous server left running (failed or
    /// re-queued, per `config`), and starts the dispatcher.
    pub fn start(
        config: JobsConfig,
        runner: Arc<dyn Runner>,
        host: Arc<dyn EncoderHost>,
        metrics: Option<JobMetrics>,
    ) -> Result<Arc<JobManager>, JobError> {
        std::fs::create_dir_all(&config.jobs_dir).map_err(|e| StoreError {
            path: config.jobs_dir.clone(),
            message: e.to_string(),
        })?;
        let store = JobStore::open(&config.jobs_dir.join("jobs.db"))?;
        let (events, _) = tokio::sync::broadcast::channel(1024);
        let manager = Arc::new(JobManager {
            config,
            runner,
            store,
            host,
            metrics,
            inner: Mutex::new(Inner::default()),
            wake: Condvar::new(),
            events,
        });
        manager.recover()?;
        let weak = Arc::downgrade(&manager);
        std::thread::Builder::new()
            .name("capot-jobs".into())
            .spawn(move || dispatch(weak))
            .map_err(|e| StoreError {
                path: PathBuf::from("dispatcher"),
                message: e.to_string(),
            })?;
        Ok(manager)
    }

    /// The runner's kind (`local`, `ray`).
    pub fn runner_kind(&self) -> &'static str {
        self.runner.kind()
    }

    fn recover(&self) -> Result<(), JobError> {
        let now = now_rfc3339();
        for mut job in self.store.with_status(&[JobStatus::Running])? {
            if let Some(r) = &job.runner_ref {
                self.runner.stop_orphan(r);
            }
            let reason = format!(
                "the server stopped while the job was running (attempt {}, stage {})",
                job.attempts,
                job.stage
                    .map(|s| format!("{s:?}").to_lowercase())
                    .unwrap_or_else(|| "align".into())
            );
            job.runner_ref = None;
            job.stage = None;
            if self.config.requeue_on_restart {
                job.status = JobStatus::Queued;
                let ev = self.event(&job.id, "requeued", json!({ "reason": reason }))?;
                self.store.save(&job, Some(&ev))?;
                tracing::warn!(job = %job.id, "re-queued after a restart");
            } else {
                job.status = JobStatus::Failed;
                job.error = Some(format!(
                    "{reason}; submit it again, or run the server with --jobs-requeue-on-restart"
                ));
                job.times.finished_at = Some(now.clone());
                let _ = std::fs::remove_dir_all(job.workdir.join("bundle"));
                let ev = self.event(&job.id, "failed", json!({ "error": job.error }))?;
                self.store.save(&job, Some(&ev))?;
                self.count_final(JobStatus::Failed);
                tracing::warn!(job = %job.id, "marked failed after a restart");
            }
        }
        let queued = self.store.with_status(&[JobStatus::Queued])?;
        let mut inner = lock(&self.inner);
        for job in queued {
            inner.names.insert(job.spec.name.clone(), job.id.clone());
            inner.queue.push_back(job.id);
        }
        self.publish_gauges(&inner);
        Ok(())
    }

    fn publish_gauges(&self, inner: &Inner) {
        if let Some(m) = &self.metrics {
            m.current
                .with_label_values(&["queued"])
                .set(inner.queue.len() as i64);
            m.current
                .with_label_values(&["running"])
                .set(inner.running.len() as i64);
        }
    }

    fn count_final(&self, status: JobStatus) {
        if let Some(m) = &self.metrics {
            m.finished.with_label_values(&[status.as_str()]).inc();
        }
    }

    /// A new event for `job` with the next number.
    fn event(&self, job: &str, kind: &str, data: Value) -> Result<JobEvent, StoreError> {
        let mut inner = lock(&self.inner);
        let seq = match inner.event_seq.get(job) {
            Some(n) => *n,
            None => self.store.last_event_seq(job)?,
        } + 1;
        inner.event_seq.insert(job.to_string(), seq);
        Ok(JobEvent {
            job: job.to_string(),
            seq,
            at: now_rfc3339(),
            kind: kind.to_string(),
            data,
        })
    }

    /// Saves the record with an event and wakes live readers.
    fn record(&self, job: &JobRecord, kind: &str, data: Value) -> Result<(), StoreError> {
        let ev = self.event(&job.id, kind, data)?;
        self.store.save(job, Some(&ev))?;
        let _ = self.events.send(job.id.clone());
        Ok(())
    }

    /// Validates and queues a job.
    pub fn submit(&self, spec: JobSpec) -> Result<JobRecord, JobError> {
        spec.validate()?;
        let (_, base_path) = self.host.resolve(&spec.base_encoder).ok_or_else(|| {
            JobError::NotFound(format!(
                "base_encoder: no encoder or alias named {:?} is loaded",
                spec.base_encoder
            ))
        })?;
        if !base_path.join("model.safetensors").is_file()
            || !base_path.join("config.json").is_file()
        {
            return Err(FieldError::new(
                "base_encoder",
                format!(
                    "the bundle {} carries no weights (model.safetensors + config.json) to train from",
                    base_path.display()
                ),
            )
            .into());
        }
        if self.host.name_taken(&spec.name) {
            return Err(JobError::Conflict(format!(
                "name: an encoder or alias named {:?} exists; choose another name",
                spec.name
            )));
        }
        let out = self.config.encoders_dir.join(&spec.name);
        if out.exists() {
            return Err(JobError::Conflict(format!(
                "name: {} exists already; choose another name or remove it",
                out.display()
            )));
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        let workdir = self.config.jobs_dir.join(&id);
        let job = JobRecord {
            id: id.clone(),
            status: JobStatus::Queued,
            stage: None,
            runner: self.runner.kind().to_string(),
            runner_ref: None,
            attempts: 0,
            base_path,
            progress: Progress::default(),
            times: Timestamps {
                created_at: now_rfc3339(),
                ..Default::default()
            },
            overhead: Overhead::default(),
            encoder: None,
            evaluation: None,
            promotion: None,
            error: None,
            workdir,
            spec,
        };
        let mut inner = lock(&self.inner);
        if let Some(other) = inner.names.get(&job.spec.name) {
            return Err(JobError::Conflict(format!(
                "name: job {other} is already making an encoder named {:?}",
                job.spec.name
            )));
        }
        inner.event_seq.insert(id.clone(), 1);
        let ev = JobEvent {
            job: id.clone(),
            seq: 1,
            at: now_rfc3339(),
            kind: "queued".into(),
            data: json!({ "name": job.spec.name, "runner": job.runner }),
        };
        self.store.insert(&job, &ev)?;
        inner.names.insert(job.spec.name.clone(), id.clone());
        inner.queue.push_back(id.clone());
        inner
            .submitted
            .insert(id.clone(), std::time::SystemTime::now());
        self.publish_gauges(&inner);
        drop(inner);
        let _ = self.events.send(id);
        self.wake.notify_all();
        tracing::info!(job = %job.id, name = %job.spec.name, "job queued");
        Ok(job)
    }

    /// One job.
    pub fn get(&self, id: &str) -> Result<JobRecord, JobError> {
        self.store
            .get(id)?
            .ok_or_else(|| JobError::NotFound(format!("no job {id:?}")))
    }

    /// Jobs newest first.
    pub fn list(
        &self,
        limit: usize,
        page_token: Option<&str>,
        status: Option<JobStatus>,
    ) -> Result<Page, JobError> {
        Ok(self.store.list(limit, page_token, status)?)
    }

    /// A job's events after `after`.
    pub fn events(&self, id: &str, after: u64) -> Result<Vec<JobEvent>, JobError> {
        self.get(id)?;
        Ok(self.store.events(id, after)?)
    }

    /// Wakes up when any job has a new event (the payload is the job id).
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.events.subscribe()
    }

    /// Cancels a job: a queued one at once, a running one at its next step boundary (the
    /// returned record still says `running` then; the job ends `cancelled`).
    pub fn cancel(&self, id: &str) -> Result<JobRecord, JobError> {
        let mut inner = lock(&self.inner);
        if let Some(pos) = inner.queue.iter().position(|q| q == id) {
            inner.queue.remove(pos);
            let mut job = self.get(id)?;
            inner.names.remove(&job.spec.name);
            self.publish_gauges(&inner);
            drop(inner);
            job.status = JobStatus::Cancelled;
            job.times.finished_at = Some(now_rfc3339());
            self.record(&job, "cancelled", json!({ "while": "queued" }))?;
            self.count_final(JobStatus::Cancelled);
            return Ok(job);
        }
        if let Some(active) = inner.running.get_mut(id) {
            if active.committing {
                return Err(JobError::Conflict(
                    "the job has finished training and evaluation and is registering its encoder; it can no longer be cancelled".into(),
                ));
            }
            let first = !active.cancel;
            active.cancel = true;
            let handle = active.handle.clone();
            drop(inner);
            if let Some(h) = handle {
                h.cancel();
            }
            let job = self.get(id)?;
            if first {
                let ev = self.event(id, "cancel_requested", json!({}))?;
                self.store.save(&job, Some(&ev))?;
                let _ = self.events.send(id.to_string());
            }
            return Ok(job);
        }
        drop(inner);
        let job = self.get(id)?;
        Err(JobError::Conflict(format!(
            "job {id} has ended ({}); there is nothing to cancel",
            job.status.as_str()
        )))
    }

    fn cancel_requested(&self, id: &str) -> bool {
        lock(&self.inner).running.get(id).is_some_and(|a| a.cancel)
    }

    /// Runs one job to its end on the calling thread.
    fn run(self: &Arc<Self>, mut job: JobRecord) {
        let id = job.id.clone();
        let outcome = self.drive(&mut job);
        let (status, kind, data) = match outcome {
            Ok(()) => (JobStatus::Succeeded, "succeeded", json!({})),
            Err(Ended::Cancelled) => (
                JobStatus::Cancelled,
                "cancelled",
                json!({ "while": "running" }),
            ),
            Err(Ended::Failed(e)) => {
                job.error = Some(e.clone());
                (JobStatus::Failed, "failed", json!({ "error": e }))
            }
        };
        if status != JobStatus::Succeeded {
            // Nothing half-made stays: the staging bundle goes, and on cancel the checkpoint.
            let _ = std::fs::remove_dir_all(job.workdir.join("bundle"));
            if status == JobStatus::Cancelled {
                let _ = std::fs::remove_dir_all(job.workdir.join("checkpoint"));
            }
        }
        job.status = status;
        job.stage = None;
        job.times.finished_at = Some(now_rfc3339());
        if let Err(e) = self.record(&job, kind, data) {
            tracing::error!(job = %id, "cannot save the job's end: {e}");
        }
        self.count_final(status);
        tracing::info!(job = %id, status = status.as_str(), error = job.error.as_deref().unwrap_or(""), "job ended");
        let mut inner = lock(&self.inner);
        inner.running.remove(&id);
        inner.names.remove(&job.spec.name);
        inner.event_seq.remove(&id);
        inner.submitted.remove(&id);
        self.publish_gauges(&inner);
        drop(inner);
        self.wake.notify_all();
    }

    /// The stages of a job; `Err` says how it ended otherwise.
    fn drive(self: &Arc<Self>, job: &mut JobRecord) -> Result<(), Ended> {
        let started = Instant::now();
        job.status = JobStatus::Running;
        job.stage = Some(Stage::Align);
        job.attempts += 1;
        job.error = None;
        job.times.started_at = Some(now_rfc3339());
        job.progress = Progress::default();
        std::fs::create_dir_all(&job.workdir)
            .map_err(|e| Ended::Failed(format!("cannot create {}: {e}", job.workdir.display())))?;
        self.record(
            job,
            "started",
            json!({ "attempt": job.attempts, "runner": job.runner }),
        )?;

        let staging = job.workdir.join("bundle");
        let checkpoint = job.workdir.join("checkpoint");
        let resume = job.attempts > 1 && checkpoint.join("latest.json").is_file();
        let index = self.host.index_dir();
        let mut argv = vec![self.config.binary.display().to_string()];
        argv.extend(
            job.spec
                .align_args(&job.base_path, &index, &staging, &checkpoint, resume),
        );
        let align_started = Instant::now();
        let followed = self.run_command(job, "align", argv, started)?;
        let training_ended = Instant::now();
        job.overhead.align_seconds = Some(align_started.elapsed().as_secs_f64());
        check(followed.exit, followed.last_error)?;
        if self.cancel_requested(&job.id) {
            return Err(Ended::Cancelled);
        }

        // The int8 bundle, when asked for, is what gets evaluated, registered and promoted.
        let aligned = staging.clone();
        let staging = match job
            .spec
            .quantize_args(&aligned, &job.workdir.join("bundle-int8"))
        {
            Some(args) => {
                job.stage = Some(Stage::Quantize);
                self.record(job, "stage", json!({ "stage": "quantize" }))?;
                let mut argv = vec![self.config.binary.display().to_string()];
                argv.extend(args);
                let followed = self.run_command(job, "quantize", argv, started)?;
                check(followed.exit, followed.last_error)?;
                job.workdir.join("bundle-int8")
            }
            None => aligned,
        };

        let mut eval_time = Duration::ZERO;
        if job.spec.eval.is_some() {
            job.stage = Some(Stage::Eval);
            self.record(job, "stage", json!({ "stage": "eval" }))?;
            let out = job.workdir.join("eval");
            let mut argv = vec![self.config.binary.display().to_string()];
            argv.extend(
                job.spec
                    .eval_args(&job.base_path, &staging, &index, &out)
                    .unwrap_or_default(),
            );
            let eval_started = Instant::now();
            let followed = self.run_command(job, "eval", argv, started)?;
            eval_time = eval_started.elapsed();
            job.overhead.eval_seconds = Some(eval_time.as_secs_f64());
            check(followed.exit, followed.last_error)?;
            let summary = gate::summarise(&out)
                .map_err(|e| Ended::Failed(format!("evaluation report: {e}")))?;
            job.evaluation = Some(summary.clone());
            self.record(
                job,
                "evaluated",
                serde_json::to_value(&summary).unwrap_or(Value::Null),
            )?;
        }

        // Past this point the job completes: registration is quick and not interrupted.
        {
            let mut inner = lock(&self.inner);
            match inner.running.get_mut(&job.id) {
                Some(a) if a.cancel => return Err(Ended::Cancelled),
                Some(a) => a.committing = true,
                None => {}
            }
        }
        job.stage = Some(Stage::Register);
        let dest = self.config.encoders_dir.join(&job.spec.name);
        move_dir(&staging, &dest).map_err(|e| {
            Ended::Failed(format!("cannot move the bundle to {}: {e}", dest.display()))
        })?;
        job.encoder = Some(ResultEncoder {
            name: job.spec.name.clone(),
            path: dest.clone(),
            registered: false,
        });
        if let Err(e) = self.host.register(&job.spec.name, &dest) {
            return Err(Ended::Failed(format!(
                "the encoder was trained ({}) but could not be registered: {e}",
                dest.display()
            )));
        }
        if let Some(enc) = &mut job.encoder {
            enc.registered = true;
        }
        job.overhead.training_end_to_registered_seconds =
            Some((training_ended.elapsed().saturating_sub(eval_time)).as_secs_f64());
        self.record(
            job,
            "registered",
            json!({ "encoder": job.spec.name, "path": dest }),
        )?;

        if let (Some(p), Some(summary)) = (job.spec.promote.clone(), job.evaluation.clone()) {
            job.stage = Some(Stage::Promote);
            let (pass, reasons) = gate::decide(&summary, &p.require);
            let mut promotion = Promotion {
                alias: p.alias.clone(),
                promoted: false,
                reasons,
                previous: None,
            };
            if pass {
                match self.host.promote(&p.alias, &job.spec.name) {
                    Ok(previous) => {
                        promotion.promoted = true;
                        promotion.previous = previous;
                    }
                    Err(e) => promotion.reasons.push(format!(
                        "the gate passed but the alias could not be moved: {e}"
                    )),
                }
            }
            job.promotion = Some(promotion.clone());
            self.record(
                job,
                "promotion",
                serde_json::to_value(&promotion).unwrap_or(Value::Null),
            )?;
        }
        Ok(())
    }

    /// Runs one command of a job through the runner, following its output, until it ends.
    fn run_command(
        self: &Arc<Self>,
        job: &mut JobRecord,
        stage: &str,
        argv: Vec<String>,
        job_started: Instant,
    ) -> Result<Followed, Ended> {
        if self.cancel_requested(&job.id) {
            return Err(Ended::Cancelled);
        }
        let log_path = job.workdir.join(format!("{stage}.log"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| Ended::Failed(format!("cannot open {}: {e}", log_path.display())))?;
        let follower = Arc::new(Follower {
            manager: Arc::downgrade(self),
            job: Mutex::new(job.clone()),
            stage: stage.to_string(),
            log: Mutex::new(log),
            state: Mutex::new(FollowState {
                last_saved: None,
                log_events: 0,
                last_error: None,
                first_step_seen: false,
            }),
            started: Instant::now(),
            job_started,
        });
        let sink: LineSink = {
            let f = follower.clone();
            Arc::new(move |line: &str| f.line(line))
        };
        let work = Work {
            job_id: job.id.clone(),
            stage: stage.to_string(),
            argv,
            env: self.config.env.clone(),
            workdir: job.workdir.clone(),
        };
        let handle: Arc<dyn RunHandle> = match self.runner.start(work, sink) {
            Ok(h) => Arc::from(h),
            Err(e) => return Err(Ended::Failed(e.to_string())),
        };
        {
            let mut inner = lock(&self.inner);
            let active = inner.running.entry(job.id.clone()).or_default();
            active.handle = Some(handle.clone());
            if active.cancel {
                handle.cancel();
            }
        }
        {
            let mut j = lock(&follower.job);
            j.runner_ref = Some(handle.reference());
            let _ = self.store.save(&j, None);
        }
        let exit = handle.wait();
        if let Some(a) = lock(&self.inner).running.get_mut(&job.id) {
            a.handle = None;
        }
        // The follower's copy has the progress and the first-step overheads; take it back.
        *job = lock(&follower.job).clone();
        let last_error = lock(&follower.state).last_error.clone();
        Ok(Followed { exit, last_error })
    }
}

/// How a job ended other than by succeeding.
enum Ended {
    Cancelled,
    Failed(String),
}

impl From<StoreError> for Ended {
    fn from(e: StoreError) -> Self {
        Ended::Failed(e.to_string())
    }
}

/// Maps a command's exit onto the job's course; the command's own `error:` line is the reason.
fn check(exit: Exit, last_error: Option<String>) -> Result<(), Ended> {
    match exit {
        Exit::Succeeded => Ok(()),
        Exit::Cancelled => Err(Ended::Cancelled),
        Exit::Failed(reason) => Err(Ended::Failed(match last_error {
            Some(e) => format!("{e} ({reason})"),
            None => reason,
        })),
    }
}

struct Followed {
    exit: Exit,
    last_error: Option<String>,
}

struct FollowState {
    last_saved: Option<Instant>,
    log_events: usize,
    last_error: Option<String>,
    /// Whether this command's first step was seen (its overheads are then recorded).
    first_step_seen: bool,
}

/// Reads a command's output: progress events update the job, every line goes to the log file.
struct Follower {
    manager: Weak<JobManager>,
    job: Mutex<JobRecord>,
    stage: String,
    log: Mutex<std::fs::File>,
    state: Mutex<FollowState>,
    started: Instant,
    job_started: Instant,
}

fn progress_json(p: &Progress) -> Value {
    json!({
        "step": p.step, "total_steps": p.total_steps, "loss": p.loss,
        "pairs_per_second": p.pairs_per_second, "eta_seconds": p.eta_seconds,
    })
}

impl Follower {
    fn line(&self, line: &str) {
        {
            let mut f = lock(&self.log);
            let _ = writeln!(f, "{line}");
        }
        let Some(manager) = self.manager.upgrade() else {
            return;
        };
        // `capot align --progress json` events: one JSON object per line with an "event" key.
        let event: Option<Value> = line
            .starts_with('{')
            .then(|| serde_json::from_str::<Value>(line).ok())
            .flatten()
            .filter(|v| v["event"].is_string());
        let mut st = lock(&self.state);
        let Some(ev) = event else {
            if let Some(e) = line.strip_prefix("error: ") {
                st.last_error = Some(e.to_string());
            }
            if !line.trim().is_empty()
                && (self.stage == "align" || line.starts_with("error: "))
                && st.log_events < MAX_LOG_EVENTS
            {
                st.log_events += 1;
                let job = lock(&self.job);
                let _ = manager.record(&job, "log", json!({ "stage": self.stage, "line": line }));
            }
            return;
        };
        let mut job = lock(&self.job);
        match ev["event"].as_str() {
            Some("anchors") => {
                let done = ev["done"].as_u64().unwrap_or(0) as usize;
                let total = ev["total"].as_u64().unwrap_or(0) as usize;
                job.progress.anchors = Some((done, total));
                if done == total {
                    let _ = manager.record(&job, "progress", json!({ "anchors": [done, total] }));
                }
            }
            Some("start") => {
                job.progress.total_steps = ev["total_steps"].as_u64().unwrap_or(0) as usize;
                job.progress.step = ev["first_step"].as_u64().unwrap_or(0) as usize;
            }
            Some("step") => {
                let p = &mut job.progress;
                p.step = ev["step"].as_u64().unwrap_or(0) as usize;
                p.total_steps = ev["total_steps"].as_u64().unwrap_or(0) as usize;
                p.loss = ev["loss"].as_f64();
                p.pairs_per_second = ev["pairs_per_second"].as_f64();
                p.eta_seconds = ev["eta_seconds"].as_f64();
                if !st.first_step_seen {
                    st.first_step_seen = true;
                    let step_seconds = ev["seconds"].as_f64().unwrap_or(0.0);
                    job.overhead.start_to_first_step_seconds =
                        Some((self.started.elapsed().as_secs_f64() - step_seconds).max(0.0));
                    let submitted = lock(&manager.inner).submitted.get(&job.id).copied();
                    let since_submit = match submitted {
                        Some(t) => t.elapsed().map(|d| d.as_secs_f64()).unwrap_or(0.0),
                        // Submitted before a restart: from this attempt's start.
                        None => self.job_started.elapsed().as_secs_f64(),
                    };
                    job.overhead.submit_to_first_step_seconds =
                        Some((since_submit - step_seconds).max(0.0));
                }
                let last_step = job.progress.step == job.progress.total_steps;
                let due = st.last_saved.is_none_or(|t| t.elapsed() >= PROGRESS_EVERY) || last_step;
                if due {
                    st.last_saved = Some(Instant::now());
                    let data = progress_json(&job.progress);
                    let _ = manager.record(&job, "progress", data);
                }
            }
            Some("note") if st.log_events < MAX_LOG_EVENTS => {
                st.log_events += 1;
                let _ = manager.record(
                    &job,
                    "log",
                    json!({ "stage": self.stage, "line": ev["message"] }),
                );
            }
            _ => {}
        }
    }
}

/// Moves a directory; across file systems it copies and then removes the source.
fn move_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    if to.exists() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "the destination exists",
        ));
    }
    match std::fs::rename(from, to) {
        Ok(()) => Ok(()),
        Err(_) => {
            copy_dir(from, to)?;
            std::fs::remove_dir_all(from)
        }
    }
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// The dispatcher: starts queued jobs while fewer than `max_running` run.
fn dispatch(manager: Weak<JobManager>) {
    loop {
        let Some(m) = manager.upgrade() else {
            return;
        };
        let mut inner = lock(&m.inner);
        while inner.running.len() < m.config.max_running.max(1) {
            let Some(id) = inner.queue.pop_front() else {
                break;
            };
            let job = match m.store.get(&id) {
                Ok(Some(j)) => j,
                Ok(None) => continue,
                Err(e) => {
                    tracing::error!(job = %id, "cannot read the job to start it: {e}");
                    continue;
                }
            };
            inner.running.insert(id.clone(), Active::default());
            let mc = m.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("capot-job-{}", &id[..8.min(id.len())]))
                .spawn(move || mc.run(job));
            if let Err(e) = spawned {
                tracing::error!(job = %id, "cannot start a job thread: {e}");
                inner.running.remove(&id);
                inner.queue.push_front(id);
                break;
            }
        }
        m.publish_gauges(&inner);
        let (guard, _) = match m.wake.wait_timeout(inner, Duration::from_secs(1)) {
            Ok(x) => x,
            Err(p) => p.into_inner(),
        };
        drop(guard);
    }
}

impl JobManager {
    /// Jobs per status, every status present (0 when none).
    pub fn totals(&self) -> Result<BTreeMap<&'static str, u64>, JobError> {
        let mut out: BTreeMap<&'static str, u64> =
            JobStatus::ALL.iter().map(|s| (s.as_str(), 0)).collect();
        for (s, n) in self.store.counts()? {
            out.insert(s.as_str(), n);
        }
        Ok(out)
    }
}
