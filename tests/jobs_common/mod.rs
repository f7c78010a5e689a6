//! Helpers of the jobs tests: a tiny randomly initialised encoder with weights, the built-in
//! corpus indexed with it, training queries with typo variants, a served instance with the
//! admin API, and ways to follow jobs (polling and the live event stream, with curl).

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{self, run_capot, Server};
use crate::registry_common::Admin;

pub fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// What every jobs test needs, made once per test binary.
pub struct World {
    /// The tiny encoder bundle (`tiny`), with weights.
    pub base: PathBuf,
    /// The built-in corpus indexed with it.
    pub index: PathBuf,
    /// The built-in corpus as the evaluation dataset, with its typo file.
    pub dataset: PathBuf,
    pub eval_variants: PathBuf,
    /// Training queries (not the evaluation ones) and a typo variant file of them.
    pub queries: PathBuf,
    pub variants: PathBuf,
}

pub fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(make_world)
}

fn make_world() -> World {
    let dir = common::fixture_dir("jobs-world");
    let base = common::import_tiny(&dir, "tiny", 11);
    let dataset = common::root().join("data/default-corpus");
    let index = dir.join("index");
    let o = run_capot(
        &[
            "index",
            "build",
            "--doc-encoder",
            p(&base),
            "--corpus",
            p(&dataset),
            "--out",
            p(&index),
        ],
        b"",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let words = [
        "river", "bank", "loan", "rate", "city", "map", "song", "lyrics", "train", "ticket",
    ];
    let (mut q, mut v) = (String::new(), String::new());
    for i in 0..24 {
        let text = format!(
            "{} {} {}",
            words[i % 10],
            words[(i + 3) % 10],
            words[(i * 7 + 1) % 10]
        );
        q += &format!("t{i}\t{text}\n");
        v += &format!("t{i}\t{}\n", text.replacen('a', "", 1));
    }
    let queries = dir.join("train.tsv");
    let variants = dir.join("train.typo1.tsv");
    std::fs::write(&queries, q).unwrap();
    std::fs::write(&variants, v).unwrap();
    World {
        eval_variants: dataset.join("queries.typo.tsv"),
        base,
        index,
        dataset,
        queries,
        variants,
    }
}

/// A served tiny index with the admin API, its data directory kept by the test.
pub struct Served {
    pub server: Server,
    pub admin: Admin,
}

/// Starts `capot serve` on the tiny index and encoder with `data_dir` and extra `args`.
pub fn serve(data_dir: &Path, args: &[&str]) -> Served {
    serve_with(data_dir, args, &[])
}

/// [`serve`] with extra environment variables.
pub fn serve_with(data_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Served {
    let w = world();
    let mut all = vec![
        "--index",
        p(&w.index),
        "--encoder",
        p(&w.base),
        "--data-dir",
        p(data_dir),
        "--threads",
        "1",
    ];
    all.extend_from_slice(args);
    let server = Server::start_with(&all, env, true);
    let admin = Admin::of(&server, data_dir);
    Served { server, admin }
}

/// A job body: `steps` steps of batch 4 on the training queries, plus `extra` fields.
pub fn job_body(name: &str, steps: usize, extra: Value) -> String {
    let w = world();
    let mut body = json!({
        "name": name,
        "base_encoder": "tiny",
        "queries": w.queries,
        "variants": [w.variants],
        "objective": "capot",
        "steps": steps,
        "batch_size": 4,
        "threads": 1,
        "checkpoint_every": 1,
    });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    body.to_string()
}

/// The evaluation part of a job body, on the built-in corpus and its typo file.
pub fn eval_body() -> Value {
    let w = world();
    json!({ "dataset": w.dataset, "variants": [w.eval_variants] })
}

/// Submits a job; returns its id.
pub fn submit(admin: &Admin, body: &str) -> String {
    let (code, v) = admin.call("POST", "/admin/jobs", Some(body));
    assert_eq!(code, 202, "POST /admin/jobs: {v}");
    assert_eq!(v["status"], "queued", "{v}");
    v["id"].as_str().expect("job id").to_string()
}

/// Polls the job until `done` holds for it (bounded); returns the job.
pub fn wait_for(admin: &Admin, id: &str, limit: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let job = admin.get(&format!("/admin/jobs/{id}"));
        if done(&job) {
            return job;
        }
        assert!(
            Instant::now() < deadline,
            "job {id} did not get there within {limit:?}: {job}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until the job has ended (succeeded, failed or cancelled).
pub fn wait_final(admin: &Admin, id: &str, limit: Duration) -> Value {
    wait_for(admin, id, limit, |j| {
        matches!(
            j["status"].as_str(),
            Some("succeeded" | "failed" | "cancelled")
        )
    })
}

/// Follows the job's live event stream with curl until the server closes it (after the final
/// event); returns the (event name, data) pairs in order.
pub fn follow_stream(admin: &Admin, id: &str, limit: Duration) -> Vec<(String, Value)> {
    follow_events(admin, &format!("/admin/jobs/{id}/events"), limit)
}

/// Follows the live event stream at `path` with curl until the server closes it; returns the
/// (event name, data) pairs in order.
#[allow(dead_code)]
pub fn follow_events(admin: &Admin, path: &str, limit: Duration) -> Vec<(String, Value)> {
    read_event_stream(admin, path, limit, None)
}

/// Follows the live event stream at `path` on a thread, as [`follow_events`]; the receiver
/// hears once the server has answered (its status line came back). A test that signals the
/// server waits for that first: a request the server has not yet read when it starts draining
/// is closed unanswered, as any draining HTTP server does.
#[allow(dead_code)]
pub fn spawn_event_follower(
    admin: &Admin,
    path: &str,
    limit: Duration,
) -> (
    mpsc::Receiver<()>,
    std::thread::JoinHandle<Vec<(String, Value)>>,
) {
    let (tx, rx) = mpsc::channel();
    let (admin, path) = (admin.clone(), path.to_string());
    let follower = std::thread::spawn(move || read_event_stream(&admin, &path, limit, Some(tx)));
    (rx, follower)
}

fn read_event_stream(
    admin: &Admin,
    path: &str,
    limit: Duration,
    mut answered: Option<mpsc::Sender<()>>,
) -> Vec<(String, Value)> {
    // `-i`: the status line and headers come first on stdout, so the start of the answer is
    // seen; the parser below reads only `event:` and `data:` lines.
    let mut child = Command::new("curl")
        .args([
            "-sS",
            "-N",
            "-i",
            "--max-time",
            &limit.as_secs().to_string(),
            "-H",
            "Accept: text/event-stream",
            "-H",
            &format!("Authorization: Bearer {}", admin.token),
        ])
        .arg(format!("{}{path}", admin.base))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run curl");
    let stdout = child.stdout.take().expect("curl's stdout is piped");
    let mut events = Vec::new();
    let mut name = String::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("read curl's output");
        if let Some(tx) = answered.take() {
            let _ = tx.send(());
        }
        let line = line.trim_end_matches('\r');
        if let Some(n) = line.strip_prefix("event: ") {
            name = n.to_string();
        } else if let Some(d) = line.strip_prefix("data: ") {
            let v: Value = serde_json::from_str(d).expect("event data is JSON");
            events.push((name.clone(), v));
        }
    }
    let out = child.wait_with_output().expect("wait for curl");
    assert!(
        out.status.success(),
        "the stream did not end by itself within {limit:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    events
}

/// Whether a process is alive (and not a zombie).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next())
                .is_some_and(|state| state != "Z")
        })
        .unwrap_or(false)
}
