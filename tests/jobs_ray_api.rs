//! Alignment jobs through the admin API with the Ray runner, against a real Ray head on loopback:
//! a job runs on Ray, is followed, evaluated, registered and promoted; a running job is cancelled
//! through Ray; a server restart stops the Ray job it left behind.

mod common;
mod jobs_common;
mod ray_head;
mod registry_common;

use std::time::{Duration, Instant};

use jobs_common::*;
use serde_json::json;

/// The Ray job's status from Ray's own job API.
fn ray_status(head: &ray_head::RayHead, submission: &str) -> String {
    let out = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "20"])
        .arg(format!("{}/api/jobs/{submission}", head.address()))
        .output()
        .expect("curl");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["status"].as_str().unwrap_or("?").to_string()
}

#[test]
fn jobs_run_on_a_ray_cluster_and_are_cancelled_and_cleaned_up_through_it() {
    let head = ray_head::RayHead::start();
    let address = head.address();
    let data = tempfile::tempdir().unwrap();
    let ray_args = [
        "--jobs-runner",
        "ray",
        "--jobs-ray-address",
        address.as_str(),
    ];
    let s = serve(data.path(), &ray_args);
    let admin = &s.admin;

    // A job that trains, evaluates and is promoted, every command run by Ray.
    let body = job_body(
        "tiny-ray",
        3,
        json!({
            "eval": eval_body(),
            "promote": {"alias": "typo", "require": {"min_noisy_gain": -1.0, "max_clean_drop": 1.0}},
        }),
    );
    let id = submit(admin, &body);
    let events = follow_stream(admin, &id, Duration::from_secs(300));
    let kinds: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds.last(),
        Some(&"succeeded"),
        "{events:?}\n{}",
        admin.get(&format!("/admin/jobs/{id}"))
    );
    assert!(kinds.contains(&"progress"), "{kinds:?}");
    let job = admin.get(&format!("/admin/jobs/{id}"));
    assert_eq!(job["runner"], "ray", "{job}");
    let submission = job["runner_ref"].as_str().expect("a Ray submission id");
    assert!(submission.starts_with("capot-"), "{job}");
    assert_eq!(ray_status(&head, submission), "SUCCEEDED");
    assert_eq!(job["progress"]["step"], 3);
    assert_eq!(job["encoder"]["registered"], true);
    assert_eq!(job["promotion"]["promoted"], true, "{job}");
    assert_eq!(admin.get("/admin/aliases")["aliases"]["typo"], "tiny-ray");
    for k in [
        "submit_to_first_step_seconds",
        "training_end_to_registered_seconds",
    ] {
        assert!(job["overhead"][k].as_f64().is_some(), "{k}: {job}");
    }

    // Cancel: Ray stops the command (SIGTERM, the checkpoint at a step boundary).
    let long = submit(admin, &job_body("tiny-ray-long", 100_000, json!({})));
    let running = wait_for(admin, &long, Duration::from_secs(120), |j| {
        j["progress"]["step"].as_u64().unwrap_or(0) >= 2
    });
    let submission = running["runner_ref"].as_str().unwrap().to_string();
    assert_eq!(ray_status(&head, &submission), "RUNNING");
    let (code, v) = admin.call("POST", &format!("/admin/jobs/{long}/cancel"), None);
    assert_eq!(code, 202, "{v}");
    let job = wait_final(admin, &long, Duration::from_secs(120));
    assert_eq!(job["status"], "cancelled", "{job}");
    assert_eq!(ray_status(&head, &submission), "STOPPED");
    assert!(!data.path().join("encoders/tiny-ray-long").exists());
    let names: Vec<String> = admin.get("/admin/encoders")["encoders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    assert!(!names.contains(&"tiny-ray-long".to_string()), "{names:?}");

    // A server that dies leaves its Ray job running; the restarted server stops it.
    let mut s = s;
    let orphan = submit(&s.admin, &job_body("tiny-ray-orphan", 100_000, json!({})));
    let running = wait_for(&s.admin, &orphan, Duration::from_secs(120), |j| {
        j["progress"]["step"].as_u64().unwrap_or(0) >= 2
    });
    let submission = running["runner_ref"].as_str().unwrap().to_string();
    let _ = s.server.child.kill();
    let _ = s.server.child.wait();
    drop(s);
    assert_eq!(ray_status(&head, &submission), "RUNNING");
    let s = serve(data.path(), &ray_args);
    let job = s.admin.get(&format!("/admin/jobs/{orphan}"));
    assert_eq!(job["status"], "failed", "{job}");
    let deadline = Instant::now() + Duration::from_secs(90);
    while ray_status(&head, &submission) != "STOPPED" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(ray_status(&head, &submission), "STOPPED");
}
