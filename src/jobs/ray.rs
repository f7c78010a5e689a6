//! The Ray runner: submits job commands to a Ray cluster through Ray's job REST API.
//!
//! Each command becomes one Ray job (`POST /api/jobs/`) whose entrypoint is
//! `cd <workdir> && exec <argv>`, shell-quoted: Ray runs the entrypoint with `/bin/sh -c` on the
//! node it schedules the job on (the head node unless entrypoint resources are requested), so
//! the working directory and the binary must exist there (shared file system). `wait` polls the
//! job's status and its log, `cancel` calls Ray's stop.
//!
//! Facts about Ray 2.60 this relies on:
//! - Submission ids are unique for the life of the cluster: reusing one is refused (HTTP 500,
//!   "already exists"), so ids carry a random suffix. They also name a log file on the head,
//!   so only `[A-Za-z0-9_-]` is used.
//! - Stop sends SIGTERM to the entrypoint and all its descendants, then SIGKILL after
//!   `RAY_JOB_STOP_WAIT_TIME_S` (default 3 s, read from the job's environment): too short for
//!   `capot align` to reach a step boundary and checkpoint, so every job gets
//!   [`RayRunner::stop_grace`] in that variable. The status then becomes `STOPPED` whatever the
//!   exit code.
//! - `GET /api/jobs/{id}/logs` returns the whole log so far (stdout and stderr together, plus
//!   a few lines Ray writes itself); the runner keeps an offset and forwards complete new
//!   lines.
//! - Environment variables go in `runtime_env.env_vars`, where Ray expands `$VAR` and drops
//!   unknown `${VAR}` with no escape; values holding a `$` are therefore `export`ed by the
//!   entrypoint (and so appear in its text and in the first line Ray writes to the log).
//!   Either way they are visible to anyone who can read the job API: no secrets.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::runner::{Exit, LineSink, RunHandle, Runner, RunnerError, Work};

/// Runs job commands as Ray jobs through the job REST API of a Ray cluster (the dashboard
/// address, `http://host:8265`).
pub struct RayRunner {
    api: Api,
    binary: Option<PathBuf>,
    /// How often a running job's status and log are fetched.
    pub poll_interval: Duration,
    /// How long `wait` keeps trying while the cluster does not answer (or answers with a server
    /// error) before it reports the command failed.
    pub retry_window: Duration,
    /// How long a stopped command may take to checkpoint and exit before Ray kills it
    /// (passed as `RAY_JOB_STOP_WAIT_TIME_S`; Ray's own default is 3 s).
    pub stop_grace: Duration,
    /// CPUs reserved for the command (`entrypoint_num_cpus`); `None` reserves nothing.
    pub entrypoint_num_cpus: Option<f64>,
    /// GPUs reserved for the command (`entrypoint_num_gpus`); with it Ray places the command
    /// on a node with a free GPU and sets `CUDA_VISIBLE_DEVICES`. `None` runs it on the head
    /// node, which then sees all of that node's GPUs.
    pub entrypoint_num_gpus: Option<f64>,
}

impl RayRunner {
    /// A runner for the Ray job API at `address` (`http://host:port`, the dashboard port).
    /// `binary` replaces `argv[0]` of every command: the capot binary's path as the Ray nodes
    /// see it (`None` keeps `argv[0]`).
    pub fn new(address: &str, binary: Option<PathBuf>) -> Result<RayRunner, RunnerError> {
        let base = address.trim().trim_end_matches('/').to_string();
        let invalid = |why: &str| RunnerError::Start {
            stage: "setup".into(),
            message: format!("invalid Ray address {address:?}: {why}"),
        };
        let Some(rest) = base.strip_prefix("http://") else {
            return Err(invalid(
                "it must be an http:// URL of the Ray dashboard (this build has no TLS client)",
            ));
        };
        if rest.is_empty() || rest.starts_with('/') || rest.contains(char::is_whitespace) {
            return Err(invalid("no host"));
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_connect(Some(Duration::from_secs(5)))
            .timeout_global(Some(Duration::from_secs(60)))
            .http_status_as_error(false)
            .build()
            .into();
        Ok(RayRunner {
            api: Api {
                base,
                agent,
                token: None,
            },
            binary,
            poll_interval: Duration::from_secs(1),
            retry_window: Duration::from_secs(30),
            stop_grace: Duration::from_secs(60),
            entrypoint_num_cpus: None,
            entrypoint_num_gpus: None,
        })
    }

    /// Sends `Authorization: Bearer <token>` with every request (clusters started with
    /// `RAY_AUTH_MODE=token`).
    pub fn with_token(mut self, token: impl Into<String>) -> RayRunner {
        self.api.token = Some(token.into());
        self
    }

    /// The job API address this runner submits to.
    pub fn address(&self) -> &str {
        &self.api.base
    }

    /// Submits a job and returns Ray's answer. A server error is tried again within the retry
    /// window: a head that has just started answers 500 until its job agent is up ("No
    /// available agent"), and so does one whose agent restarts. An address that refuses the
    /// connection, or a job Ray refuses (4xx), fails at once.
    fn submit(&self, body: &Value) -> Result<String, String> {
        let deadline = Instant::now() + self.retry_window;
        let mut tries = 0u32;
        loop {
            let reply = self
                .api
                .post("/api/jobs/", Some(body))
                .map_err(|e| format!("cannot reach Ray at {}: {e}", self.api.base))?;
            tries += 1;
            if reply.status == 200 {
                return Ok(reply.body);
            }
            // Our submission id is taken: by the try before this one, which reached the agent
            // after all; on the first try, by someone else.
            let taken = reply.body.contains("already exists");
            if taken && tries > 1 {
                return Ok(String::new());
            }
            let refused = format!(
                "Ray refused the job (HTTP {}{}): {}",
                reply.status,
                if tries > 1 {
                    format!(", {tries} tries")
                } else {
                    String::new()
                },
                summarize_error(&reply.body)
            );
            if reply.status < 500 || taken || Instant::now() >= deadline {
                return Err(refused);
            }
            tracing::warn!(
                ray = %self.api.base,
                tries,
                error = %refused,
                "job submission failed; trying again"
            );
            std::thread::sleep(self.poll_interval);
        }
    }
}

impl Runner for RayRunner {
    fn kind(&self) -> &'static str {
        "ray"
    }

    fn start(&self, work: Work, sink: LineSink) -> Result<Box<dyn RunHandle>, RunnerError> {
        let start_err = |message: String| RunnerError::Start {
            stage: work.stage.clone(),
            message,
        };
        let mut argv = work.argv.clone();
        if argv.is_empty() {
            return Err(start_err("empty command".into()));
        }
        if let Some(binary) = &self.binary {
            argv[0] = binary
                .to_str()
                .ok_or_else(|| start_err(format!("{} is not UTF-8", binary.display())))?
                .to_string();
        }
        let workdir = work
            .workdir
            .to_str()
            .ok_or_else(|| start_err(format!("{} is not UTF-8", work.workdir.display())))?;
        let submission_id = submission_id(&work.job_id, &work.stage, &uuid::Uuid::new_v4());
        let mut env = serde_json::Map::new();
        env.insert(
            "RAY_JOB_STOP_WAIT_TIME_S".into(),
            Value::String(self.stop_grace.as_secs().max(1).to_string()),
        );
        // Ray expands `$VAR` in `env_vars` values (and drops unknown `${VAR}`), with no way to
        // escape it: values with a `$` are exported by the entrypoint instead.
        let mut exports = Vec::new();
        for (k, v) in &work.env {
            if v.contains('$') && is_shell_name(k) {
                exports.push((k.clone(), v.clone()));
            } else {
                env.insert(k.clone(), Value::String(v.clone()));
            }
        }
        let entrypoint = entrypoint(workdir, &exports, &argv).map_err(start_err)?;
        let mut body = json!({
            "entrypoint": entrypoint,
            "submission_id": submission_id,
            "runtime_env": {"env_vars": env},
            "metadata": {"capot_job": work.job_id, "stage": work.stage},
        });
        if let Some(cpus) = self.entrypoint_num_cpus {
            body["entrypoint_num_cpus"] = json!(cpus);
        }
        if let Some(gpus) = self.entrypoint_num_gpus {
            body["entrypoint_num_gpus"] = json!(gpus);
        }
        let reply = self.submit(&body).map_err(start_err)?;
        // Ray echoes the id; keep ours if the answer is odd (it is the one we asked for).
        let id = serde_json::from_str::<Value>(&reply)
            .ok()
            .and_then(|v| v["submission_id"].as_str().map(str::to_string))
            .unwrap_or(submission_id);
        Ok(Box::new(RayHandle {
            api: self.api.clone(),
            ray_line: format!("Running entrypoint for job {id}: {entrypoint}\n"),
            id,
            sink,
            cancelled: Arc::new(AtomicBool::new(false)),
            poll_interval: self.poll_interval,
            retry_window: self.retry_window,
        }))
    }

    fn stop_orphan(&self, reference: &str) {
        if is_safe_id(reference) {
            let _ = self.api.post(&format!("/api/jobs/{reference}/stop"), None);
        }
    }
}

/// A command submitted as a Ray job.
struct RayHandle {
    api: Api,
    id: String,
    /// The line Ray writes to the log before it starts the entrypoint. Ray flushes it late, so
    /// it can land after the command's first output, even inside an unterminated line: it is
    /// cut out of the log before the log is split into lines.
    ray_line: String,
    sink: LineSink,
    cancelled: Arc<AtomicBool>,
    poll_interval: Duration,
    retry_window: Duration,
}

/// How often `wait` repeats the stop request while a cancelled job is still running (the
/// first request may have been lost).
const STOP_REPEAT: Duration = Duration::from_secs(10);

impl RunHandle for RayHandle {
    fn reference(&self) -> String {
        self.id.clone()
    }

    fn wait(&self) -> Exit {
        let status_path = format!("/api/jobs/{}", self.id);
        let logs_path = format!("/api/jobs/{}/logs", self.id);
        let mut cursor = LogCursor::default();
        let mut log = String::new();
        let mut failing_since: Option<Instant> = None;
        let mut last_stop: Option<Instant> = None;
        loop {
            let outcome = match self.api.get(&status_path) {
                Ok(r) if r.status == 200 => match serde_json::from_str::<Value>(&r.body) {
                    Ok(v) => Ok(JobInfo::from_json(&v)),
                    Err(e) => Err(format!("unreadable job status: {e}")),
                },
                Ok(r) if r.status == 404 => {
                    self.flush(&mut cursor, &without_first(&log, &self.ray_line));
                    return Exit::Failed(format!(
                        "Ray no longer knows job {} (cluster restarted?)",
                        self.id
                    ));
                }
                Ok(r) => Err(format!("HTTP {}: {}", r.status, summarize_error(&r.body))),
                Err(e) => Err(e),
            };
            match outcome {
                Ok(info) => {
                    failing_since = None;
                    let cancelled = self.cancelled.load(Ordering::SeqCst);
                    let exit = map_status(&info, cancelled);
                    // The log fetched after a terminal status is complete.
                    let mut fetched = self.fetch_log(&logs_path, &mut log);
                    if exit.is_some() {
                        let deadline = Instant::now() + self.retry_window;
                        while !fetched && Instant::now() < deadline {
                            std::thread::sleep(self.poll_interval);
                            fetched = self.fetch_log(&logs_path, &mut log);
                        }
                    }
                    let clean = without_first(&log, &self.ray_line);
                    for line in cursor.advance(&clean) {
                        (self.sink)(line);
                    }
                    if let Some(exit) = exit {
                        self.flush(&mut cursor, &clean);
                        return exit;
                    }
                    if cancelled && last_stop.is_none_or(|t| t.elapsed() >= STOP_REPEAT) {
                        if last_stop.is_some() {
                            let _ = self.api.post(&format!("{status_path}/stop"), None);
                        }
                        last_stop = Some(Instant::now());
                    }
                }
                Err(e) => {
                    let since = *failing_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= self.retry_window {
                        self.flush(&mut cursor, &without_first(&log, &self.ray_line));
                        return Exit::Failed(format!(
                            "lost track of Ray job {} at {} for {} s: {e}",
                            self.id,
                            self.api.base,
                            since.elapsed().as_secs()
                        ));
                    }
                }
            }
            std::thread::sleep(self.poll_interval);
        }
    }

    fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        // The request goes out from its own thread so that cancel returns at once even when
        // the cluster is slow; `wait` repeats it while the job keeps running.
        let api = self.api.clone();
        let path = format!("/api/jobs/{}/stop", self.id);
        std::thread::spawn(move || {
            let _ = api.post(&path, None);
        });
    }
}

impl RayHandle {
    /// Replaces `log` with the job's log so far; false when it could not be fetched.
    fn fetch_log(&self, path: &str, log: &mut String) -> bool {
        let Ok(reply) = self.api.get(path) else {
            return false;
        };
        if reply.status != 200 {
            return false;
        }
        match serde_json::from_str::<Value>(&reply.body) {
            Ok(v) => match v["logs"].as_str() {
                Some(text) => {
                    *log = text.to_string();
                    true
                }
                None => false,
            },
            Err(_) => false,
        }
    }

    /// Sends the complete lines not sent yet, then the unterminated last line.
    fn flush(&self, cursor: &mut LogCursor, log: &str) {
        for line in cursor.advance(log) {
            (self.sink)(line);
        }
        if let Some(rest) = cursor.finish(log) {
            (self.sink)(rest);
        }
    }
}

/// `text` without the first occurrence of `part`.
fn without_first<'a>(text: &'a str, part: &str) -> std::borrow::Cow<'a, str> {
    match text.find(part) {
        Some(at) if !part.is_empty() => {
            std::borrow::Cow::Owned(format!("{}{}", &text[..at], &text[at + part.len()..]))
        }
        _ => std::borrow::Cow::Borrowed(text),
    }
}

/// The HTTP side: base address, agent, optional token.
#[derive(Clone)]
struct Api {
    base: String,
    agent: ureq::Agent,
    token: Option<String>,
}

/// A reply of any status.
struct Reply {
    status: u16,
    body: String,
}

/// Largest body read (a job's whole log comes in one answer).
const BODY_LIMIT: u64 = 1 << 30;

impl Api {
    fn get(&self, path: &str) -> Result<Reply, String> {
        let mut req = self.agent.get(&format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        Self::read(req.call())
    }

    fn post(&self, path: &str, body: Option<&Value>) -> Result<Reply, String> {
        let mut req = self.agent.post(&format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        Self::read(match body {
            Some(b) => req.send_json(b),
            None => req.send_empty(),
        })
    }

    fn read(r: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Result<Reply, String> {
        let mut resp = r.map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let body = resp
            .body_mut()
            .with_config()
            .limit(BODY_LIMIT)
            .read_to_string()
            .map_err(|e| format!("reading the answer: {e}"))?;
        Ok(Reply { status, body })
    }
}

/// What `wait` needs from `GET /api/jobs/{id}`.
#[derive(Debug, Default, Clone, PartialEq)]
struct JobInfo {
    status: String,
    message: Option<String>,
    error_type: Option<String>,
    exit_code: Option<i64>,
}

impl JobInfo {
    fn from_json(v: &Value) -> JobInfo {
        JobInfo {
            status: v["status"].as_str().unwrap_or("").to_string(),
            message: v["message"].as_str().map(str::to_string),
            error_type: v["error_type"].as_str().map(str::to_string),
            exit_code: v["driver_exit_code"].as_i64(),
        }
    }
}

/// How a job with this status ended, or `None` while it is `PENDING`, `RUNNING` (or in a
/// status this code does not know).
fn map_status(info: &JobInfo, cancelled: bool) -> Option<Exit> {
    match info.status.as_str() {
        "SUCCEEDED" => Some(Exit::Succeeded),
        "STOPPED" if cancelled => Some(Exit::Cancelled),
        "STOPPED" => Some(Exit::Failed(format!(
            "stopped by Ray, not by capot (someone stopped the Ray job, or the cluster did): {}",
            first_line(info.message.as_deref().unwrap_or("no message"))
        ))),
        "FAILED" => {
            // Ray appends the log tail after the first line; the sink has the log already.
            let message = first_line(info.message.as_deref().unwrap_or(""))
                .trim_end_matches(':')
                .trim_end_matches(" (truncated to 20,000 chars)")
                .trim_end_matches(", last available logs")
                .to_string();
            let mut reason = String::from("Ray job failed");
            if let Some(t) = &info.error_type {
                reason.push_str(&format!(" ({t})"));
            }
            if !message.is_empty() {
                reason.push_str(&format!(": {message}"));
            }
            if let Some(code) = info.exit_code {
                let said = format!("exit code {code}");
                if !message.contains(&said) {
                    reason.push_str(&format!(" ({said})"));
                }
                if code < 0 {
                    reason.push_str(&format!(" (killed by signal {})", -code));
                }
            }
            Some(Exit::Failed(reason))
        }
        _ => None,
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("").trim()
}

/// Ray answers errors with a Python traceback; its last line says what went wrong.
fn summarize_error(body: &str) -> String {
    let line = body
        .lines()
        .map(str::trim)
        .rfind(|l| l.len() > 1)
        .unwrap_or("(empty answer)");
    let mut s: String = line.chars().take(300).collect();
    if s.len() < line.len() {
        s.push('…');
    }
    s
}

/// Follows a log that is fetched whole each time: remembers how much was forwarded.
#[derive(Debug, Default)]
struct LogCursor {
    /// Bytes of the log already forwarded; always just after a `\n` (or 0).
    offset: usize,
}

impl LogCursor {
    /// The complete lines (without line ends) after the offset; moves the offset past them.
    /// A log shorter than the offset was replaced: it is followed from its start again.
    fn advance<'a>(&mut self, log: &'a str) -> Vec<&'a str> {
        if log.len() < self.offset || !log.is_char_boundary(self.offset) {
            self.offset = 0;
        }
        let new = &log[self.offset..];
        let Some(end) = new.rfind('\n') else {
            return Vec::new();
        };
        self.offset += end + 1;
        new[..end]
            .split('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .collect()
    }

    /// The unterminated last line, if any (for the end of the job); marks it forwarded.
    fn finish<'a>(&mut self, log: &'a str) -> Option<&'a str> {
        if log.len() <= self.offset || !log.is_char_boundary(self.offset) {
            return None;
        }
        let rest = &log[self.offset..];
        self.offset = log.len();
        Some(rest.strip_suffix('\r').unwrap_or(rest))
    }
}

/// `capot-<job>-<stage>-<8 hex>`, restricted to `[A-Za-z0-9_-]` (the id names a file on the
/// head node) and to a length Ray's file names take.
fn submission_id(job_id: &str, stage: &str, unique: &uuid::Uuid) -> String {
    let clean = |s: &str, max: usize| -> String {
        s.chars()
            .take(max)
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let hex = unique.simple().to_string();
    format!(
        "capot-{}-{}-{}",
        clean(job_id, 64),
        clean(stage, 32),
        &hex[..8]
    )
}

/// Whether `id` can go into a URL path as is (ids this runner made always can).
fn is_safe_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 200
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The shell command Ray runs: `cd <workdir> && [export K=V && ...] exec <argv...>`. `exec`
/// makes the command itself the process Ray signals and whose exit code it reports.
fn entrypoint(
    workdir: &str,
    exports: &[(String, String)],
    argv: &[String],
) -> Result<String, String> {
    let mut s = format!("cd {} &&", shell_quote(workdir)?);
    for (k, v) in exports {
        s.push_str(&format!(" export {k}={} &&", shell_quote(v)?));
    }
    s.push_str(" exec");
    for a in argv {
        s.push(' ');
        s.push_str(&shell_quote(a)?);
    }
    Ok(s)
}

/// Whether `k` can be `export`ed by a POSIX shell.
fn is_shell_name(k: &str) -> bool {
    let mut chars = k.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Quotes `s` as one word for a POSIX shell (the `shlex` crate); an error for a word no shell
/// can pass (a NUL byte).
fn shell_quote(s: &str) -> Result<String, String> {
    shlex::try_quote(s)
        .map(std::borrow::Cow::into_owned)
        .map_err(|e| format!("{s:?} cannot be passed through a shell: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;
    use std::sync::Mutex;

    #[test]
    fn plain_words_stay_plain_and_a_nul_byte_is_refused() {
        assert_eq!(shell_quote("align").unwrap(), "align");
        assert_eq!(shell_quote("/a/b-c_d.e").unwrap(), "/a/b-c_d.e");
        assert!(shell_quote("a\0b")
            .unwrap_err()
            .contains("cannot be passed"));
        assert!(entrypoint("/w", &[], &["a\0".to_string()]).is_err());
    }

    #[test]
    fn quoted_words_reach_the_program_unchanged() {
        let words = [
            "plain",
            "",
            "two words",
            "it's",
            "'",
            "''",
            "\"double\"",
            "$HOME $(id) `id` \\ \\n",
            "*?[a]{b,c}~ ; & | < > ( ) #",
            "line\nbreak\ttab",
            "A=1",
            "-",
            "!x",
            "ünï",
        ];
        let mut script = String::from("printf '%s\\0'");
        for w in &words {
            script.push(' ');
            script.push_str(&shell_quote(w).unwrap());
        }
        let out = std::process::Command::new("/bin/sh")
            .args(["-c", &script])
            .output()
            .expect("run /bin/sh");
        assert!(out.status.success());
        let got: Vec<String> = out
            .stdout
            .split(|b| *b == 0)
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect();
        let mut want: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        want.push(String::new()); // after the last NUL
        assert_eq!(got, want);
    }

    #[test]
    fn entrypoint_changes_directory_then_execs() {
        let argv = vec!["/opt/capot".to_string(), "align".into(), "a b".into()];
        let words = |s: String| shlex::split(&s).unwrap();
        assert_eq!(
            words(entrypoint("/srv/jobs/j 1", &[], &argv).unwrap()),
            [
                "cd",
                "/srv/jobs/j 1",
                "&&",
                "exec",
                "/opt/capot",
                "align",
                "a b"
            ]
        );
        let exports = [("KEY".to_string(), "a$b'c".to_string())];
        assert_eq!(
            words(entrypoint("/w", &exports, &argv[..1]).unwrap()),
            [
                "cd",
                "/w",
                "&&",
                "export",
                "KEY=a$b'c",
                "&&",
                "exec",
                "/opt/capot"
            ]
        );
        assert!(is_shell_name("_A1") && !is_shell_name("1A") && !is_shell_name("A-B"));
    }

    #[test]
    fn submission_ids_are_unique_and_path_safe() {
        let a = submission_id("job/1 ü", "align", &uuid::Uuid::new_v4());
        let b = submission_id("job/1 ü", "align", &uuid::Uuid::new_v4());
        assert_ne!(a, b);
        assert!(a.starts_with("capot-job_1__-align-"), "{a}");
        assert!(is_safe_id(&a));
        assert_eq!(a.len(), "capot-job_1__-align-".len() + 8);
        let long = submission_id(&"x".repeat(500), "eval", &uuid::Uuid::new_v4());
        assert!(long.len() < 120 && is_safe_id(&long));
        assert!(!is_safe_id("../x"));
        assert!(!is_safe_id(""));
    }

    fn info(status: &str, message: Option<&str>, code: Option<i64>) -> JobInfo {
        JobInfo {
            status: status.into(),
            message: message.map(str::to_string),
            error_type: None,
            exit_code: code,
        }
    }

    #[test]
    fn statuses_map_to_exits() {
        assert_eq!(map_status(&info("PENDING", None, None), false), None);
        assert_eq!(map_status(&info("RUNNING", None, None), true), None);
        assert_eq!(map_status(&info("SOMETHING_NEW", None, None), false), None);
        assert_eq!(
            map_status(&info("SUCCEEDED", None, Some(0)), false),
            Some(Exit::Succeeded)
        );
        assert_eq!(
            map_status(
                &info("STOPPED", Some("Job was intentionally stopped."), None),
                true
            ),
            Some(Exit::Cancelled)
        );
        match map_status(
            &info("STOPPED", Some("Job was intentionally stopped."), None),
            false,
        ) {
            Some(Exit::Failed(m)) => {
                assert!(
                    m.contains("stopped by Ray") && m.contains("intentionally"),
                    "{m}"
                )
            }
            other => panic!("{other:?}"),
        }
        let ray_message = "Job entrypoint command failed with exit code 3, last available logs \
                           (truncated to 20,000 chars):\nline one\nline two\n";
        let mut failed = info("FAILED", Some(ray_message), Some(3));
        failed.error_type = Some("JOB_ENTRYPOINT_COMMAND_ERROR".into());
        assert_eq!(
            map_status(&failed, false),
            Some(Exit::Failed(
                "Ray job failed (JOB_ENTRYPOINT_COMMAND_ERROR): Job entrypoint command failed \
                 with exit code 3"
                    .into()
            ))
        );
        // A failure after a cancel is still a failure: the command ended on its own.
        assert!(matches!(map_status(&failed, true), Some(Exit::Failed(_))));
        match map_status(
            &info("FAILED", Some("Failed to start supervisor actor"), Some(-9)),
            false,
        ) {
            Some(Exit::Failed(m)) => assert!(
                m.contains("supervisor") && m.contains("exit code -9") && m.contains("signal 9"),
                "{m}"
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            map_status(&info("FAILED", None, None), false),
            Some(Exit::Failed("Ray job failed".into()))
        );
    }

    #[test]
    fn log_cursor_emits_each_complete_line_once() {
        let mut c = LogCursor::default();
        assert!(c.advance("").is_empty());
        assert!(c.advance("par").is_empty());
        assert_eq!(c.advance("partial\r\nsecond"), vec!["partial"]);
        assert!(c.advance("partial\r\nsecond").is_empty());
        assert_eq!(
            c.advance("partial\r\nsecond line\n\nthird\nfou"),
            vec!["second line", "", "third"]
        );
        assert_eq!(
            c.finish("partial\r\nsecond line\n\nthird\nfourth"),
            Some("fourth")
        );
        assert_eq!(c.finish("partial\r\nsecond line\n\nthird\nfourth"), None);

        let mut c = LogCursor::default();
        assert_eq!(c.advance("ü1\nü2\n"), vec!["ü1", "ü2"]);
        assert_eq!(c.finish("ü1\nü2\n"), None);
        // A replaced (shorter) log is read from its start.
        assert_eq!(c.advance("new\n"), vec!["new"]);
    }

    #[test]
    fn error_bodies_are_summarised_by_their_last_line() {
        let body = "Traceback (most recent call last):\n  File \"x.py\", line 1\n\
                    ValueError: Job with submission_id t1 already exists. Please use a different \
                    submission_id.\n.\n";
        assert_eq!(
            summarize_error(body),
            "ValueError: Job with submission_id t1 already exists. Please use a different \
             submission_id."
        );
        assert_eq!(summarize_error(""), "(empty answer)");
        assert!(summarize_error(&"x".repeat(1000)).chars().count() <= 301);
    }

    #[test]
    fn addresses_must_be_http_urls() {
        assert!(RayRunner::new("http://127.0.0.1:8265", None).is_ok());
        assert!(RayRunner::new("http://ray-head:8265/", None).is_ok());
        for bad in [
            "127.0.0.1:8265",
            "https://h:8265",
            "ray://h:10001",
            "http://",
            "",
        ] {
            assert!(
                matches!(RayRunner::new(bad, None), Err(RunnerError::Start { .. })),
                "{bad}"
            );
        }
    }

    /// A scripted stand-in for Ray's job API: answers each request with `answer(method, path,
    /// body)` and records the requests.
    struct FakeRay {
        address: String,
        requests: Arc<Mutex<Vec<(String, String, String)>>>,
    }

    type Answer = dyn Fn(&str, &str, &str) -> (u16, String) + Send + Sync;

    impl FakeRay {
        fn start(answer: Arc<Answer>) -> FakeRay {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            let address = format!("http://{}", listener.local_addr().expect("addr"));
            let requests = Arc::new(Mutex::new(Vec::new()));
            let log = requests.clone();
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    let Ok(mut stream) = stream else { continue };
                    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                    let mut first = String::new();
                    if reader.read_line(&mut first).is_err() {
                        continue;
                    }
                    let mut length = 0usize;
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
                            break;
                        }
                        if let Some((k, v)) = h.split_once(':') {
                            if k.eq_ignore_ascii_case("content-length") {
                                length = v.trim().parse().unwrap_or(0);
                            }
                        }
                    }
                    let mut body = vec![0u8; length];
                    let _ = reader.read_exact(&mut body);
                    let body = String::from_utf8_lossy(&body).into_owned();
                    let mut parts = first.split_whitespace();
                    let method = parts.next().unwrap_or("").to_string();
                    let path = parts.next().unwrap_or("").to_string();
                    let (status, text) = answer(&method, &path, &body);
                    log.lock().unwrap().push((method, path, body));
                    let _ = write!(
                        stream,
                        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n\
                         Content-Length: {}\r\nConnection: close\r\n\r\n{text}",
                        text.len()
                    );
                }
            });
            FakeRay { address, requests }
        }
    }

    fn work(argv: &[&str]) -> Work {
        Work {
            job_id: "job1".into(),
            stage: "align".into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: vec![("ORT_DYLIB_PATH".into(), "/x/lib.so".into())],
            workdir: PathBuf::from("/jobs/job1"),
        }
    }

    fn collecting_sink() -> (LineSink, Arc<Mutex<Vec<String>>>) {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let l = lines.clone();
        (
            Arc::new(move |s: &str| l.lock().unwrap().push(s.to_string())),
            lines,
        )
    }

    fn fast(mut r: RayRunner) -> RayRunner {
        r.poll_interval = Duration::from_millis(20);
        r.retry_window = Duration::from_millis(500);
        r
    }

    #[test]
    fn a_job_is_submitted_followed_and_its_lines_streamed() {
        let polls = Arc::new(Mutex::new(0usize));
        let p = polls.clone();
        let fake = FakeRay::start(Arc::new(move |method, path, _body| {
            if method == "POST" && path == "/api/jobs/" {
                return (
                    200,
                    r#"{"job_id":"x","submission_id":"capot-job1-align-0"}"#.into(),
                );
            }
            let mut n = p.lock().unwrap();
            if path.ends_with("/logs") {
                let ray = "Running entrypoint for job capot-job1-align-0: cd /jobs/job1 && exec \
                           /opt/capot align --out 'a b'\n";
                let logs = [
                    String::new(),
                    "one\ntw".into(),
                    format!("one\ntw{ray}o\nthr"),
                    format!("one\ntw{ray}o\nthree\nlast"),
                ];
                return (200, json!({ "logs": logs[(*n).min(3)] }).to_string());
            }
            *n += 1;
            match *n {
                // A passing server error is retried.
                2 => (500, "Traceback\nRuntimeError: busy\n".into()),
                1 => (200, json!({"status": "PENDING"}).to_string()),
                3 | 4 => (200, json!({"status": "RUNNING"}).to_string()),
                _ => (
                    200,
                    json!({"status": "SUCCEEDED", "driver_exit_code": 0}).to_string(),
                ),
            }
        }));
        let runner =
            fast(RayRunner::new(&fake.address, Some(PathBuf::from("/opt/capot"))).unwrap());
        let (sink, lines) = collecting_sink();
        let handle = runner
            .start(work(&["capot", "align", "--out", "a b"]), sink)
            .unwrap();
        assert_eq!(handle.reference(), "capot-job1-align-0");
        assert_eq!(handle.wait(), Exit::Succeeded);
        assert_eq!(*lines.lock().unwrap(), vec!["one", "two", "three", "last"]);

        let requests = fake.requests.lock().unwrap();
        let submit: Value = serde_json::from_str(&requests[0].2).unwrap();
        assert_eq!(
            submit["entrypoint"],
            "cd /jobs/job1 && exec /opt/capot align --out 'a b'"
        );
        assert!(submit["submission_id"]
            .as_str()
            .unwrap()
            .starts_with("capot-job1-align-"));
        assert_eq!(
            submit["runtime_env"]["env_vars"]["ORT_DYLIB_PATH"],
            "/x/lib.so"
        );
        assert_eq!(
            submit["runtime_env"]["env_vars"]["RAY_JOB_STOP_WAIT_TIME_S"],
            "60"
        );
        assert_eq!(
            submit["metadata"],
            json!({"capot_job": "job1", "stage": "align"})
        );
        assert!(submit.get("entrypoint_num_gpus").is_none());
    }

    #[test]
    fn refusals_unreachable_clusters_and_lost_jobs_are_reported() {
        let fake = FakeRay::start(Arc::new(|method, path, _| {
            if method == "POST" && path == "/api/jobs/" {
                (
                    500,
                    "Traceback\nValueError: Job with submission_id x already exists.\n.\n".into(),
                )
            } else {
                (404, "Job x does not exist".into())
            }
        }));
        let runner = fast(RayRunner::new(&fake.address, None).unwrap());
        let (sink, _) = collecting_sink();
        match runner.start(work(&["capot"]), sink.clone()) {
            Err(RunnerError::Start { stage, message }) => {
                assert_eq!(stage, "align");
                assert!(
                    message.contains("HTTP 500") && message.contains("already exists"),
                    "{message}"
                );
            }
            other => panic!("{:?}", other.map(|h| h.reference())),
        }
        assert!(matches!(
            runner.start(work(&[]), sink.clone()),
            Err(RunnerError::Start { .. })
        ));

        // A job the cluster does not know (any more).
        let handle = RayHandle {
            api: runner.api.clone(),
            id: "gone".into(),
            ray_line: String::new(),
            sink: sink.clone(),
            cancelled: Arc::new(AtomicBool::new(false)),
            poll_interval: Duration::from_millis(20),
            retry_window: Duration::from_millis(300),
        };
        match handle.wait() {
            Exit::Failed(m) => assert!(m.contains("no longer knows"), "{m}"),
            other => panic!("{other:?}"),
        }

        // A cluster that stops answering: failed after the retry window.
        let closed = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = format!("http://{}", closed.local_addr().unwrap());
        drop(closed);
        let runner = fast(RayRunner::new(&address, None).unwrap());
        let t = Instant::now();
        assert!(matches!(
            runner.start(work(&["capot"]), sink.clone()),
            Err(RunnerError::Start { .. })
        ));
        let handle = RayHandle {
            api: runner.api.clone(),
            id: "x".into(),
            ray_line: String::new(),
            sink,
            cancelled: Arc::new(AtomicBool::new(false)),
            poll_interval: Duration::from_millis(20),
            retry_window: Duration::from_millis(300),
        };
        match handle.wait() {
            Exit::Failed(m) => assert!(m.contains("lost track"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(t.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_submission_the_head_cannot_take_yet_is_tried_again() {
        let posts = Arc::new(Mutex::new(0usize));
        let p = posts.clone();
        let fake = FakeRay::start(Arc::new(move |method, path, _| {
            if method != "POST" {
                return (404, String::new());
            }
            let mut n = p.lock().unwrap();
            *n += 1;
            match (path, *n) {
                // A head whose job agent is not up yet.
                ("/api/jobs/", 1 | 2) => (
                    500,
                    "No available agent to submit job, please try again later.".into(),
                ),
                ("/api/jobs/", 3) => (200, r#"{"submission_id":"capot-job1-align-2"}"#.into()),
                // The answer to the first try was lost, but the job was taken.
                ("/api/jobs/", 4) => (500, "Traceback\nRuntimeError: busy\n".into()),
                ("/api/jobs/", _) => (
                    500,
                    "Traceback\nValueError: Job with submission_id y already exists.\n".into(),
                ),
                _ => (404, String::new()),
            }
        }));
        let runner = fast(RayRunner::new(&fake.address, None).unwrap());
        let (sink, _) = collecting_sink();
        let handle = runner.start(work(&["capot"]), sink.clone()).unwrap();
        assert_eq!(handle.reference(), "capot-job1-align-2");
        assert_eq!(*posts.lock().unwrap(), 3);
        let handle = runner.start(work(&["capot"]), sink.clone()).unwrap();
        assert!(handle.reference().starts_with("capot-job1-align-"));
        assert_eq!(*posts.lock().unwrap(), 5);
        let requests = fake.requests.lock().unwrap();
        let ids: Vec<Value> = requests[3..5]
            .iter()
            .map(|(_, _, b)| serde_json::from_str::<Value>(b).unwrap()["submission_id"].clone())
            .collect();
        assert_eq!(ids[0], ids[1], "a retry keeps the submission id");
        assert_eq!(handle.reference(), ids[0].as_str().unwrap());
        drop(requests);

        // A head that never gets there: refused after the retry window, with the last reason.
        let fake = FakeRay::start(Arc::new(|_, _, _| (503, "Service Unavailable".into())));
        let runner = fast(RayRunner::new(&fake.address, None).unwrap());
        match runner.start(work(&["capot"]), sink) {
            Err(RunnerError::Start { message, .. }) => {
                assert!(
                    message.contains("HTTP 503") && message.contains("tries"),
                    "{message}"
                )
            }
            other => panic!("{:?}", other.map(|h| h.reference())),
        }
        assert!(fake.requests.lock().unwrap().len() > 2);
    }

    #[test]
    fn cancel_calls_stop_and_a_stopped_job_is_cancelled() {
        let stopped = Arc::new(AtomicBool::new(false));
        let s = stopped.clone();
        let fake = FakeRay::start(Arc::new(move |method, path, _| {
            if method == "POST" && path == "/api/jobs/" {
                return (200, r#"{"submission_id":"capot-job1-align-1"}"#.into());
            }
            if method == "POST" && path == "/api/jobs/capot-job1-align-1/stop" {
                s.store(true, Ordering::SeqCst);
                return (200, r#"{"stopped": true}"#.into());
            }
            if path.ends_with("/logs") {
                return (200, json!({"logs": "working\n"}).to_string());
            }
            let status = if s.load(Ordering::SeqCst) {
                "STOPPED"
            } else {
                "RUNNING"
            };
            (200, json!({ "status": status }).to_string())
        }));
        let runner = fast(RayRunner::new(&fake.address, None).unwrap());
        runner.stop_orphan("../../etc"); // not an id: nothing is sent
        let (sink, lines) = collecting_sink();
        let handle: Arc<dyn RunHandle> =
            Arc::from(runner.start(work(&["capot", "align"]), sink).unwrap());
        let h = handle.clone();
        let waiter = std::thread::spawn(move || h.wait());
        // Cancel once the job is seen running (its log has come), not after a guessed delay.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while lines.lock().unwrap().is_empty() {
            assert!(std::time::Instant::now() < deadline, "no log line in 30 s");
            std::thread::sleep(Duration::from_millis(5));
        }
        handle.cancel();
        assert_eq!(waiter.join().unwrap(), Exit::Cancelled);
        assert_eq!(*lines.lock().unwrap(), vec!["working"]);
        runner.stop_orphan("capot-job1-align-1");
        let requests = fake.requests.lock().unwrap();
        let stops = requests
            .iter()
            .filter(|(m, p, _)| m == "POST" && p.ends_with("/stop"))
            .count();
        assert_eq!(stops, 2);
        assert!(!requests.iter().any(|(_, p, _)| p.contains("..")));
    }
}
