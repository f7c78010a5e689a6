//! A real single-node Ray head for tests: `RayHead::start()` runs `ray start --head --block` on
//! 127.0.0.1 with free ports and its own temp dir, waits until the job API answers, and stops
//! that head (only that one: `ray stop` would stop every head on the machine) when dropped.
//!
//! The `ray` CLI is the one beside `$CAPOT_TEST_PYTHON` (set by `scripts/test`, which installs
//! `tests/requirements.txt` into `.venv`), else `.venv/bin/ray`.
//!
//! Settings that make the head start reliably and stay on loopback, found with Ray 2.60:
//! - `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`: Ray otherwise replaces `--node-ip-address
//!   127.0.0.1` by the address of the default route's interface;
//! - every port with a fixed default is given a free one (GCS, client server 10001, dashboard
//!   8265, dashboard agent 52365, and the metric ports 44217/44227 set through
//!   `AUTOSCALER_METRIC_PORT`/`DASHBOARD_METRIC_PORT`), so heads of concurrent tests coexist;
//! - `RAY_USAGE_STATS_ENABLED=0` and `--disable-usage-stats`: nothing is reported outside;
//! - `RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S=0`: on SIGTERM the head otherwise "drains" for up
//!   to 30 s while a job runs; with it, it stops in about 2 s.
//!
//! Start takes about 5 s on 2 cores. A small watchdog process stops the head if the test
//! process ends without dropping it (a head kept in a `static`, a panic that aborts).

#![allow(dead_code)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the head may take to answer before the fixture gives up.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the head may take to stop after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// A running Ray head; stopped on drop.
pub struct RayHead {
    ray: Child,
    watchdog: Option<Child>,
    dir: Option<tempfile::TempDir>,
    address: String,
}

impl RayHead {
    /// Starts a head and waits (at most 120 s) until its job API answers. Panics with the
    /// head's output when it does not come up.
    pub fn start() -> RayHead {
        let ray_bin = ray_cli();
        // Ray puts Unix sockets under the temp dir: the path must stay short.
        let dir = tempfile::Builder::new()
            .prefix("capot-ray-")
            .tempdir_in("/tmp")
            .expect("create a temp dir under /tmp");
        let [gcs, client, agent, dashboard, autoscaler_metrics, dashboard_metrics] = free_ports();
        let log_path = dir.path().join("ray-start.log");
        let log = File::create(&log_path).expect("create the ray start log");
        let log_err = log.try_clone().expect("clone the log handle");
        let mut cmd = Command::new(&ray_bin);
        cmd.args(["start", "--head", "--block"])
            .args(["--node-ip-address", "127.0.0.1"])
            .arg(format!("--port={gcs}"))
            .arg(format!("--ray-client-server-port={client}"))
            .arg(format!("--dashboard-agent-listen-port={agent}"))
            .args(["--include-dashboard", "true"])
            .args(["--dashboard-host", "127.0.0.1"])
            .arg(format!("--dashboard-port={dashboard}"))
            .args(["--num-cpus", "1", "--num-gpus", "0"])
            .arg(format!("--object-store-memory={}", 200 << 20))
            .arg("--disable-usage-stats")
            .arg(format!("--temp-dir={}", dir.path().display()))
            .env("RAY_USAGE_STATS_ENABLED", "0")
            .env("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
            .env("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", "0")
            .env("AUTOSCALER_METRIC_PORT", autoscaler_metrics.to_string())
            .env("DASHBOARD_METRIC_PORT", dashboard_metrics.to_string())
            .env_remove("RAY_ADDRESS")
            .env_remove("RAY_JOB_STOP_WAIT_TIME_S")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err);
        {
            use std::os::unix::process::CommandExt;
            // Its own process group: a Ctrl-C on the test run reaches the watchdog's orderly
            // stop instead of killing `ray start` before it can stop what it started.
            cmd.process_group(0);
        }
        let ray = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", ray_bin.display()));
        let watchdog = spawn_watchdog(ray.id(), dir.path());
        let mut head = RayHead {
            ray,
            watchdog,
            dir: Some(dir),
            address: format!("http://127.0.0.1:{dashboard}"),
        };
        head.wait_ready(&log_path);
        head
    }

    /// The job API address, `http://127.0.0.1:PORT`.
    pub fn address(&self) -> String {
        self.address.clone()
    }

    /// The head's temp dir (sessions, logs).
    pub fn temp_dir(&self) -> &Path {
        self.dir
            .as_ref()
            .map(|d| d.path())
            .unwrap_or(Path::new("/"))
    }

    fn wait_ready(&mut self, log_path: &Path) {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(5)))
            .http_status_as_error(false)
            .build()
            .into();
        let started = Instant::now();
        loop {
            let ok = agent
                .get(&format!("{}/api/jobs/", self.address))
                .call()
                .map(|r| r.status() == 200)
                .unwrap_or(false);
            if ok {
                return;
            }
            let exited = matches!(self.ray.try_wait(), Ok(Some(_)));
            if exited || started.elapsed() > START_TIMEOUT {
                let log = std::fs::read_to_string(log_path).unwrap_or_default();
                let tail: String = log
                    .lines()
                    .rev()
                    .take(40)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join("\n");
                panic!(
                    "the Ray head {} (after {:.0?}); ray start said:\n{tail}",
                    if exited { "exited" } else { "did not answer" },
                    started.elapsed()
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for RayHead {
    fn drop(&mut self) {
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
        let root = self.ray.id();
        let dir = self.temp_dir().to_string_lossy().into_owned();
        // Everything this head runs: what `ray start` started, and anything that names its
        // temp dir (in case something was re-parented), with their descendants.
        let before = head_processes(root, &dir);
        let _ = Command::new("kill")
            .args(["-TERM", &root.to_string()])
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            match self.ray.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() >= deadline => {
                    let _ = self.ray.kill();
                    let _ = self.ray.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
        // What did not stop with the head (it stops its processes in order, so normally
        // nothing is left).
        let left: Vec<String> = before
            .into_iter()
            .filter(|(pid, cmdline)| read_cmdline(*pid).as_deref() == Some(cmdline.as_str()))
            .map(|(pid, _)| pid.to_string())
            .collect();
        if !left.is_empty() {
            let _ = Command::new("kill")
                .arg("-KILL")
                .args(&left)
                .stderr(Stdio::null())
                .status();
        }
        if let Some(d) = self.dir.take() {
            let _ = d.close();
        }
    }
}

/// The `ray` CLI beside `$CAPOT_TEST_PYTHON`, else in the project's `.venv`.
fn ray_cli() -> PathBuf {
    let from_env = std::env::var_os("CAPOT_TEST_PYTHON")
        .map(PathBuf::from)
        .and_then(|p| p.parent().map(|d| d.join("ray")));
    let local = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/ray");
    for candidate in from_env.into_iter().chain([local]) {
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!(
        "the `ray` CLI is missing (looked beside $CAPOT_TEST_PYTHON and in .venv/bin): run the \
         tests with scripts/test, which installs tests/requirements.txt (ray[default]) into .venv"
    );
}

/// Six distinct free ports on 127.0.0.1 (free when asked; Ray binds them moments later).
fn free_ports() -> [u16; 6] {
    let listeners: Vec<std::net::TcpListener> = (0..6)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port"))
        .collect();
    let ports: Vec<u16> = listeners
        .iter()
        .map(|l| l.local_addr().expect("local address").port())
        .collect();
    [ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]]
}

/// Once the test process is gone, stops the head with SIGTERM (an orderly stop) and removes
/// its temp dir.
fn spawn_watchdog(ray_pid: u32, dir: &Path) -> Option<Child> {
    use std::os::unix::process::CommandExt;
    let script = r#"while kill -0 "$0" 2>/dev/null; do sleep 1; done
kill -TERM "$1" 2>/dev/null
n=0; while kill -0 "$1" 2>/dev/null && [ $n -lt 60 ]; do sleep 0.5; n=$((n+1)); done
kill -KILL "$1" 2>/dev/null
rm -rf "$2""#;
    Command::new("/bin/sh")
        .args(["-c", script])
        .arg(std::process::id().to_string())
        .arg(ray_pid.to_string())
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .ok()
}

fn read_cmdline(pid: u32) -> Option<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// `(pid, cmdline)` of the descendants of `root` and of processes whose command line names
/// `dir`, with their descendants.
fn head_processes(root: u32, dir: &str) -> Vec<(u32, String)> {
    let mut procs: Vec<(u32, u32, String)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // `pid (comm) state ppid ...`: comm may hold spaces and parentheses.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok())
                .unwrap_or(0);
            procs.push((pid, ppid, read_cmdline(pid).unwrap_or_default()));
        }
    }
    let mut chosen: Vec<u32> = procs
        .iter()
        .filter(|(pid, _, cmd)| *pid == root || (!dir.is_empty() && cmd.contains(dir)))
        .map(|(pid, _, _)| *pid)
        .collect();
    let mut i = 0;
    while i < chosen.len() {
        let parent = chosen[i];
        for (pid, ppid, _) in &procs {
            if *ppid == parent && !chosen.contains(pid) {
                chosen.push(*pid);
            }
        }
        i += 1;
    }
    procs
        .into_iter()
        .filter(|(pid, _, _)| *pid != root && chosen.contains(pid))
        .map(|(pid, _, cmd)| (pid, cmd))
        .collect()
}
