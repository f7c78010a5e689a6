//! The local runner: each command is a child process of the server, at lowered CPU priority
//! (`nice`), that dies with the server (a restarted server then marks the job failed or
//! re-queues it). Output lines of stdout and stderr go to the sink as they come.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::runner::{Exit, LineSink, RunHandle, Runner, RunnerError, Work};
use crate::sync::lock;

/// Runs job commands as child processes.
pub struct LocalRunner {
    /// Niceness added to the children (0-19): training must not starve the search path.
    pub nice: i32,
    /// How long a cancelled command may take to stop (checkpoint at a step boundary) before
    /// it is killed.
    pub grace: Duration,
}

impl Default for LocalRunner {
    fn default() -> Self {
        LocalRunner {
            nice: 10,
            grace: Duration::from_secs(30),
        }
    }
}

struct LocalHandle {
    child: Mutex<Child>,
    pid: u32,
    cancelled: AtomicBool,
    cancel_at: Mutex<Option<Instant>>,
    grace: Duration,
    readers: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

/// Sends `signal` to the process group a command leads (the command and anything it started);
/// false when it is gone.
fn signal_group(pid: u32, signal: libc::c_int) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill(2) on the process group of a child we started (or checked), constant signal.
    unsafe { libc::kill(-pid, signal) == 0 }
}

fn forward_lines(
    reader: impl Read + Send + 'static,
    sink: LineSink,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut r = BufReader::new(reader);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match r.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf);
                    sink(line.trim_end_matches(['\n', '\r']));
                }
            }
        }
    })
}

impl Runner for LocalRunner {
    fn kind(&self) -> &'static str {
        "local"
    }

    fn start(&self, work: Work, sink: LineSink) -> Result<Box<dyn RunHandle>, RunnerError> {
        let start_err = |message: String| RunnerError::Start {
            stage: work.stage.clone(),
            message,
        };
        let (program, args) = work
            .argv
            .split_first()
            .ok_or_else(|| start_err("empty command".into()))?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .envs(work.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .current_dir(&work.workdir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let nice = self.nice.clamp(0, 19);
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: only async-signal-safe calls between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    // Its own process group: a cancel reaches everything the command started,
                    // and a Ctrl-C meant for the server does not reach the job.
                    libc::setpgid(0, 0);
                    if nice > 0 {
                        libc::setpriority(libc::PRIO_PROCESS, 0, nice);
                    }
                    // Die with the server: a job never outlives the process that tracks it.
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                    Ok(())
                });
            }
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| start_err(format!("{program}: {e}")))?;
        let pid = child.id();
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            readers.push(forward_lines(out, sink.clone()));
        }
        if let Some(err) = child.stderr.take() {
            readers.push(forward_lines(err, sink));
        }
        Ok(Box::new(LocalHandle {
            child: Mutex::new(child),
            pid,
            cancelled: AtomicBool::new(false),
            cancel_at: Mutex::new(None),
            grace: self.grace,
            readers: Mutex::new(readers),
        }))
    }

    fn stop_orphan(&self, reference: &str) {
        // Only a process that is still a capot command of ours: pids are reused.
        let Some(pid) = reference
            .strip_prefix("pid:")
            .and_then(|p| p.parse::<u32>().ok())
        else {
            return;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        if cmdline.contains("--progress\0json") || cmdline.contains("eval\0--dataset") {
            signal_group(pid, libc::SIGTERM);
        }
    }
}

impl RunHandle for LocalHandle {
    fn reference(&self) -> String {
        format!("pid:{}", self.pid)
    }

    fn wait(&self) -> Exit {
        let status = loop {
            match lock(&self.child).try_wait() {
                Ok(Some(status)) => break Ok(status),
                Ok(None) => {}
                Err(e) => break Err(e),
            }
            // A cancelled command that ignores SIGTERM past the grace period is killed.
            if let Some(at) = *lock(&self.cancel_at) {
                if at.elapsed() > self.grace {
                    signal_group(self.pid, libc::SIGKILL);
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        for r in lock(&self.readers).drain(..) {
            let _ = r.join();
        }
        if self.cancelled.load(Ordering::Acquire) {
            return Exit::Cancelled;
        }
        match status {
            Ok(s) if s.success() => Exit::Succeeded,
            Ok(s) => {
                use std::os::unix::process::ExitStatusExt;
                match (s.code(), s.signal()) {
                    (Some(code), _) => Exit::Failed(format!("exited with code {code}")),
                    (None, Some(sig)) => Exit::Failed(format!("killed by signal {sig}")),
                    _ => Exit::Failed(format!("ended with {s}")),
                }
            }
            Err(e) => Exit::Failed(format!("cannot wait for the process: {e}")),
        }
    }

    fn cancel(&self) {
        if !self.cancelled.swap(true, Ordering::AcqRel) {
            *lock(&self.cancel_at) = Some(Instant::now());
            // SIGTERM: capot align stops at the next step boundary with a checkpoint.
            signal_group(self.pid, libc::SIGTERM);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn work(dir: &std::path::Path, argv: &[&str]) -> Work {
        Work {
            job_id: "t".into(),
            stage: "test".into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: vec![("CAPOT_TEST_VAR".into(), "42".into())],
            workdir: dir.to_path_buf(),
        }
    }

    fn collect() -> (LineSink, Arc<Mutex<Vec<String>>>) {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let l = lines.clone();
        (Arc::new(move |s: &str| lock(&l).push(s.to_string())), lines)
    }

    #[test]
    fn output_exit_codes_priority_and_cancel() {
        let dir = tempfile::tempdir().unwrap();
        let runner = LocalRunner {
            nice: 7,
            grace: Duration::from_secs(5),
        };
        let (sink, lines) = collect();
        let h = runner
            .start(
                work(
                    dir.path(),
                    &[
                        "/bin/sh",
                        "-c",
                        "echo out $CAPOT_TEST_VAR; echo err >&2; cut -d' ' -f19 /proc/self/stat; pwd",
                    ],
                ),
                sink,
            )
            .unwrap();
        assert!(h.reference().starts_with("pid:"));
        assert_eq!(h.wait(), Exit::Succeeded);
        let got = lock(&lines).clone();
        assert!(got.contains(&"out 42".to_string()), "{got:?}");
        assert!(got.contains(&"err".to_string()), "{got:?}");
        assert!(
            got.contains(&"7".to_string()),
            "niceness 7 expected: {got:?}"
        );
        let cwd = dir.path().canonicalize().unwrap();
        assert!(got.contains(&cwd.display().to_string()), "{got:?}");

        let (sink, _) = collect();
        let h = runner
            .start(work(dir.path(), &["/bin/sh", "-c", "exit 3"]), sink)
            .unwrap();
        assert_eq!(h.wait(), Exit::Failed("exited with code 3".into()));

        let (sink, _) = collect();
        let started = Instant::now();
        let h = runner
            .start(work(dir.path(), &["/bin/sleep", "30"]), sink)
            .unwrap();
        h.cancel();
        assert_eq!(h.wait(), Exit::Cancelled);
        assert!(started.elapsed() < Duration::from_secs(20));

        let (sink, _) = collect();
        let e = runner
            .start(work(dir.path(), &["/nonexistent/capot"]), sink)
            .err()
            .unwrap();
        assert!(e.to_string().contains("cannot start test"), "{e}");
    }

    #[test]
    fn a_command_that_ignores_sigterm_is_killed_after_the_grace_period() {
        let dir = tempfile::tempdir().unwrap();
        let runner = LocalRunner {
            nice: 0,
            grace: Duration::from_millis(300),
        };
        let (sink, lines) = collect();
        let h = runner
            .start(
                work(
                    dir.path(),
                    &["/bin/sh", "-c", "trap '' TERM; echo ready; sleep 30"],
                ),
                sink,
            )
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while lock(&lines).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let started = Instant::now();
        h.cancel();
        assert_eq!(h.wait(), Exit::Cancelled);
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
