//! A short soak in CI: deploy/k6/soak.js (the real k6 binary) drives mixed HTTP and gRPC
//! traffic for 40 s while the alias flips every 2 s, an encoder is loaded and unloaded every 8 s,
//! an alignment job trains, a document is written (and every third time one deleted) every second
//! and found (or not) by the next search, and the live corpus is compacted every 10 s; no request
//! may fail, and the process's open file descriptors and
//! threads must not grow between the middle and the end. The 30-minute version is bench/soak.sh
//! (figures in docs/operations.md "Reliability"). Tiny models keep it cheap.

mod common;
mod jobs_common;
mod registry_common;

use std::time::Duration;

use common::{python, root};
use jobs_common::*;
use serde_json::json;

/// (open file descriptors, threads) of a process.
/// Open descriptors of `pid` other than sockets, its open sockets, and its threads.
fn fds_and_threads(pid: u32) -> (usize, usize, usize) {
    let (mut files, mut sockets) = (0, 0);
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
    {
        match std::fs::read_link(entry.path()) {
            Ok(target) if target.to_string_lossy().starts_with("socket:") => sockets += 1,
            _ => files += 1,
        }
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    (files, sockets, threads)
}

#[test]
fn a_short_soak_fails_no_request_and_leaks_no_descriptors_or_threads() {
    let data = tempfile::tempdir().unwrap();
    // A second and a third name for the tiny encoder: alias flips and reloads.
    let models = tempfile::tempdir().unwrap();
    let b = common::import_tiny(models.path(), "tiny-b", 11);
    let extra = common::import_tiny(models.path(), "tiny-c", 11);
    let s = serve(
        data.path(),
        &[
            "--grpc-addr",
            "127.0.0.1:0",
            "--models-dir",
            p(models.path()),
            "--jobs-nice",
            "19",
        ],
    );
    let (code, v) = s.admin.call(
        "POST",
        "/admin/encoders",
        Some(&json!({ "name": "tiny-b", "path": b }).to_string()),
    );
    assert_eq!(code, 201, "{v}");
    let pid = s.server.child.id();
    let k6 = python().with_file_name("k6");
    let summary = data.path().join("summary.json");
    let job = job_body("soak", 100_000, json!({}));
    let child = std::process::Command::new(&k6)
        .args(["run", "--quiet", "--no-usage-report"])
        .args(["-e", &format!("BASE_URL={}", s.server.base)])
        .args(["-e", &format!("ADMIN_URL={}", s.admin.base)])
        .args(["-e", &format!("ADMIN_TOKEN={}", s.admin.token)])
        .args([
            "-e",
            &format!("GRPC_ADDR={}", s.server.grpc_addr.expect("grpc address")),
        ])
        .args([
            "-e",
            &format!("PROTO_DIR={}", root().join("proto").display()),
        ])
        .args(["-e", "ENCODERS=tiny-b,tiny"])
        .args(["-e", &format!("EXTRA_BUNDLE={}", p(&extra))])
        .args(["-e", &format!("JOB_BODY={job}")])
        .args(["-e", "RATE=20", "-e", "DURATION=40s", "-e", "WINDOW=10s"])
        .args(["-e", "FLIP_EVERY=2s", "-e", "RELOAD_EVERY=8s"])
        .args([
            "-e",
            "DOC_ENCODER=tiny",
            "-e",
            "WRITE_EVERY=1s",
            "-e",
            "COMPACT_EVERY=10s",
        ])
        .args(["-e", &format!("SUMMARY_FILE={}", summary.display())])
        .arg(root().join("deploy/k6/soak.js"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run k6");
    // Resources in the middle (after warm-up) and at the end.
    std::thread::sleep(Duration::from_secs(15));
    let middle = fds_and_threads(pid);
    std::thread::sleep(Duration::from_secs(20));
    let end = fds_and_threads(pid);
    let out = child.wait_with_output().expect("k6 output");
    // The clients are gone: their connections must be too (only the listeners stay).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let after = loop {
        let now = fds_and_threads(pid);
        if now.1 < middle.1 || std::time::Instant::now() > deadline {
            break now;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).expect("summary")).unwrap();
    println!("soak: {v}, (files, sockets, threads) middle {middle:?} end {end:?} after {after:?}");
    assert_eq!(v["failed_http"], 0, "{v}");
    assert_eq!(v["checks_failed"], 0, "{v}");
    assert!(v["requests"].as_u64().unwrap() > 500, "{v}");
    assert!(v["grpc_requests"].as_u64().unwrap() > 0, "{v}");
    let passes = |name: &str| v["checks"][name].as_u64().unwrap_or(0);
    assert!(passes("alias flip is 200") >= 15, "{v}");
    assert!(passes("encoder load is 2xx") >= 4, "{v}");
    assert!(passes("encoder unload is 200") >= 4, "{v}");
    assert!(
        passes("grpc SearchStream answered every message") >= 1,
        "{v}"
    );
    assert_eq!(passes("job accepted"), 1, "{v}");
    // Writes were found at once and deletes gone at once, through compactions.
    assert!(passes("a write is found at once") >= 20, "{v}");
    assert!(passes("a deleted document is gone at once") >= 6, "{v}");
    assert!(passes("compaction accepted") >= 3, "{v}");
    let index = s.admin.get("/admin/index");
    assert!(
        index["version"].as_u64().unwrap_or(0) >= 1,
        "no compaction finished: {index}"
    );
    // The job ran meanwhile.
    let jobs = s.admin.get("/admin/jobs");
    let soak = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["spec"]["name"] == "soak")
        .expect("the soak job");
    assert!(soak["progress"]["step"].as_u64().unwrap_or(0) > 0, "{soak}");
    // Nothing accumulates. Files: a little slack for a bundle being loaded at that moment.
    // Sockets follow the clients' connections, which come and go with the load: checked once
    // the clients have left.
    assert!(
        end.0 <= middle.0 + 4,
        "open files grew: {middle:?} → {end:?}"
    );
    assert!(
        after.1 < middle.1,
        "connections stayed open after the clients left: {middle:?} → {after:?}"
    );
    assert!(end.2 <= middle.2 + 2, "threads grew: {middle:?} → {end:?}");
}
