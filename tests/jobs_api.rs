//! Alignment jobs through the admin API with the local runner, driven as an operator would
//! (curl): create → live events → succeeded → encoder listed → alias moved by the gate, and a
//! failing gate that leaves the alias alone; invalid requests; cancel (queued and running);
//! the concurrency limit; a server restart while a job runs (failed, or re-queued and resumed).

mod common;
mod jobs_common;
mod registry_common;

use std::time::Duration;

use jobs_common::*;
use serde_json::json;

#[test]
fn a_job_trains_evaluates_registers_and_the_gate_decides_the_alias() {
    let data = tempfile::tempdir().unwrap();
    let s = serve(data.path(), &[]);
    let admin = &s.admin;

    // A gate any result passes (at most a 100% loss allowed): the alias moves.
    let body = job_body(
        "tiny-typo",
        3,
        json!({
            "eval": eval_body(),
            "promote": {"alias": "typo", "require": {"min_noisy_gain": -1.0, "max_clean_drop": 1.0}},
        }),
    );
    let id = submit(admin, &body);
    let events = follow_stream(admin, &id, Duration::from_secs(300));
    let kinds: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
    for expected in [
        "queued",
        "started",
        "progress",
        "stage",
        "evaluated",
        "registered",
        "promotion",
        "succeeded",
    ] {
        assert!(
            kinds.contains(&expected),
            "{expected} missing from {kinds:?}"
        );
    }
    assert_eq!(kinds.last(), Some(&"succeeded"), "{kinds:?}");
    // Events are numbered 1, 2, ... in order: the SSE id and the stored seq agree.
    for (i, (_, e)) in events.iter().enumerate() {
        assert_eq!(e["seq"], json!(i + 1), "{e}");
        assert_eq!(e["job"], json!(id));
    }
    let last_progress = events
        .iter()
        .rev()
        .find(|(k, e)| k == "progress" && e["data"]["step"].is_number())
        .expect("a step progress event");
    assert_eq!(last_progress.1["data"]["step"], 3);
    assert_eq!(last_progress.1["data"]["total_steps"], 3);

    let job = admin.get(&format!("/admin/jobs/{id}"));
    assert_eq!(job["status"], "succeeded", "{job}");
    assert_eq!(job["progress"]["step"], 3);
    assert!(job["progress"]["pairs_per_second"].as_f64().unwrap() > 0.0);
    assert_eq!(job["encoder"]["name"], "tiny-typo");
    assert_eq!(job["encoder"]["registered"], true);
    let ev = &job["evaluation"];
    for k in [
        "base_clean",
        "new_clean",
        "base_noisy",
        "new_noisy",
        "noisy_change",
    ] {
        assert!(ev[k].is_number(), "{k} in {ev}");
    }
    assert!(ev["conditions"]["queries.typo"].is_object(), "{ev}");
    assert_eq!(job["promotion"]["promoted"], true, "{job}");
    assert_eq!(job["promotion"]["reasons"].as_array().unwrap().len(), 2);
    assert!(job["promotion"]["previous"].is_null());
    for k in [
        "start_to_first_step_seconds",
        "submit_to_first_step_seconds",
        "training_end_to_registered_seconds",
        "align_seconds",
        "eval_seconds",
    ] {
        assert!(job["overhead"][k].as_f64().is_some(), "{k}: {job}");
    }
    for k in ["created_at", "started_at", "finished_at"] {
        assert!(job[k].is_string(), "{k}: {job}");
    }
    let report = std::path::Path::new(ev["report_dir"].as_str().unwrap());
    for f in ["report.json", "report.md", "report.svg"] {
        assert!(report.join(f).is_file(), "{f}");
    }

    // The encoder is registered, its bundle in <data-dir>/encoders, and the alias points at it.
    let encoders = admin.get("/admin/encoders");
    let made = encoders["encoders"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "tiny-typo")
        .expect("tiny-typo listed");
    assert_eq!(made["aliases"], json!(["typo"]));
    let aligned_to = made["aligned_to"].as_str().unwrap();
    let base = encoders["encoders"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "tiny")
        .unwrap();
    assert_eq!(aligned_to, base["fingerprint"].as_str().unwrap());
    assert!(data.path().join("encoders/tiny-typo/model.onnx").is_file());
    assert_eq!(admin.get("/admin/aliases")["aliases"]["typo"], "tiny-typo");
    let out = std::process::Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "30",
            "-H",
            "Content-Type: application/json",
            "-d",
        ])
        .arg(json!({"query": "river bank", "k": 3, "encoder": "typo"}).to_string())
        .arg(format!("{}/search", s.server.base))
        .output()
        .unwrap();
    let found: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        found["results"].as_array().map(Vec::len),
        Some(3),
        "{found}"
    );

    // A gate nothing passes (+1000% on noisy queries): registered, not promoted. This job also
    // asks for an int8 output: that is the bundle evaluated and registered.
    let body = job_body(
        "tiny-typo-2",
        2,
        json!({
            "quantize": "int8",
            "eval": eval_body(),
            "promote": {"alias": "typo", "require": {"min_noisy_gain": 10.0}},
        }),
    );
    let id2 = submit(admin, &body);
    let job2 = wait_final(admin, &id2, Duration::from_secs(300));
    assert_eq!(job2["status"], "succeeded", "{job2}");
    assert_eq!(job2["promotion"]["promoted"], false, "{job2}");
    let reasons = job2["promotion"]["reasons"].as_array().unwrap();
    assert!(
        reasons[0].as_str().unwrap().ends_with("failed"),
        "{reasons:?}"
    );
    assert_eq!(job2["encoder"]["registered"], true);
    assert_eq!(admin.get("/admin/aliases")["aliases"]["typo"], "tiny-typo");
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(data.path().join("encoders/tiny-typo-2/encoder.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["provenance"]["quantization"]["precision"], "int8");
    assert_eq!(manifest["name"], "tiny-typo-2");
    assert_eq!(manifest["aligned_to"], base["fingerprint"], "{manifest}");
    let stages: Vec<serde_json::Value> = admin.get(&format!("/admin/jobs/{id2}/events"))["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "stage")
        .map(|e| e["data"]["stage"].clone())
        .collect();
    assert_eq!(stages, [json!("quantize"), json!("eval")]);

    // Listing: newest first, paginated, totals; metrics count the jobs.
    let page = admin.get("/admin/jobs?limit=1");
    assert_eq!(page["jobs"][0]["id"], json!(id2));
    let token = page["next_page_token"].as_str().expect("a next page");
    let page2 = admin.get(&format!("/admin/jobs?limit=1&page_token={token}"));
    assert_eq!(page2["jobs"][0]["id"], json!(id));
    assert!(page2["next_page_token"].is_null());
    assert_eq!(page["totals"]["succeeded"], 2);
    assert_eq!(admin.get("/admin/jobs?status=failed")["jobs"], json!([]));
    let (_, metrics) = common::http_get(s.server.addr, "/metrics").unwrap();
    assert!(
        metrics.contains("capot_jobs_total{status=\"succeeded\"} 2"),
        "{metrics}"
    );
    // The stored event list matches what the stream delivered.
    let stored = admin.get(&format!("/admin/jobs/{id}/events"));
    assert_eq!(stored["events"].as_array().unwrap().len(), events.len());
    let after = admin.get(&format!("/admin/jobs/{id}/events?after=3"));
    assert_eq!(after["events"][0]["seq"], 4);
}

#[test]
fn invalid_job_requests_are_refused_with_the_field_at_fault() {
    let data = tempfile::tempdir().unwrap();
    let s = serve(data.path(), &[]);
    let admin = &s.admin;
    let w = world();
    let cases: Vec<(String, u16, &str)> = vec![
        (
            json!({"base_encoder": "tiny", "queries": w.queries, "variants": [w.variants]})
                .to_string(),
            422,
            "name",
        ),
        (job_body("x", 1, json!({"steps": "ten"})), 422, "steps"),
        (job_body("x", 0, json!({})), 422, "steps"),
        (job_body("x", 1, json!({"stepz": 3})), 422, "stepz"),
        (
            job_body("x", 1, json!({"batch_size": -4})),
            422,
            "batch_size",
        ),
        (job_body("x", 1, json!({"lr": 0.0})), 422, "lr"),
        (
            job_body("x", 1, json!({"queries": "/nonexistent/q.tsv"})),
            422,
            "queries",
        ),
        (
            job_body("x", 1, json!({"variants": [], "noise": "nonsense"})),
            422,
            "noise",
        ),
        (
            job_body("x", 1, json!({"objective": "magic"})),
            422,
            "objective",
        ),
        (
            job_body("x", 1, json!({"promote": {"alias": "typo"}})),
            422,
            "promote",
        ),
        (
            job_body("x", 1, json!({"eval": {"dataset": "/nonexistent"}})),
            422,
            "eval.dataset",
        ),
        (job_body("bad name!", 1, json!({})), 422, "name"),
        (
            job_body("x", 1, json!({"base_encoder": "nope"})),
            404,
            "base_encoder",
        ),
        (job_body("tiny", 1, json!({})), 409, "name"),
        (job_body("default", 1, json!({})), 409, "name"),
    ];
    for (body, status, field) in &cases {
        let (code, v) = admin.call("POST", "/admin/jobs", Some(body));
        assert_eq!(code, *status, "{body}: {v}");
        assert_eq!(v["error"]["param"], json!(field), "{body}: {v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(field),
            "{v}"
        );
    }
    // Not JSON, not an object, no token.
    let (code, _) = admin.call("POST", "/admin/jobs", Some("{not json"));
    assert_eq!(code, 400);
    let (code, _) = admin.call("POST", "/admin/jobs", Some("[1]"));
    assert_eq!(code, 422);
    let (code, _) = admin.call_as(
        None,
        "POST",
        "/admin/jobs",
        Some(&job_body("x", 1, json!({}))),
    );
    assert_eq!(code, 401);
    // Nothing was queued by any of them.
    assert_eq!(admin.get("/admin/jobs")["jobs"], json!([]));
    for (method, path, status) in [
        ("GET", "/admin/jobs/nope", 404),
        ("GET", "/admin/jobs/nope/events", 404),
        ("POST", "/admin/jobs/nope/cancel", 404),
        ("GET", "/admin/jobs?limit=0", 422),
        ("GET", "/admin/jobs?limit=x", 422),
        ("GET", "/admin/jobs?status=bogus", 422),
        ("GET", "/admin/jobs?page_token=abc", 422),
        ("GET", "/admin/jobs?sort=asc", 422),
        ("DELETE", "/admin/jobs", 405),
    ] {
        let (code, v) = admin.call(method, path, None);
        assert_eq!(code, status, "{method} {path}: {v}");
        assert!(v["error"]["message"].is_string(), "{v}");
    }
}

#[test]
fn cancel_queued_and_running_jobs_under_the_concurrency_limit() {
    let data = tempfile::tempdir().unwrap();
    let s = serve(data.path(), &["--jobs-max-running", "1"]);
    let admin = &s.admin;
    let long = submit(admin, &job_body("long", 100_000, json!({})));
    let queued = submit(admin, &job_body("queued", 2, json!({})));
    let after = submit(admin, &job_body("after", 2, json!({})));
    let running = wait_for(admin, &long, Duration::from_secs(120), |j| {
        j["progress"]["step"].as_u64().unwrap_or(0) >= 2
    });
    assert_eq!(running["status"], "running");
    // One runs, the others wait.
    let list = admin.get("/admin/jobs");
    assert_eq!(list["totals"]["running"], 1, "{list}");
    assert_eq!(list["totals"]["queued"], 2, "{list}");
    assert_eq!(
        admin.get(&format!("/admin/jobs/{queued}"))["status"],
        "queued"
    );

    // A queued job is cancelled at once.
    let (code, v) = admin.call("POST", &format!("/admin/jobs/{queued}/cancel"), None);
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["status"], "cancelled");

    // A running job stops at a step boundary; nothing it made is registered or kept.
    let pid: u32 = running["runner_ref"]
        .as_str()
        .and_then(|r| r.strip_prefix("pid:"))
        .and_then(|p| p.parse().ok())
        .expect("pid runner_ref");
    assert!(alive(pid));
    let (code, v) = admin.call("POST", &format!("/admin/jobs/{long}/cancel"), None);
    assert_eq!(code, 202, "{v}");
    let job = wait_final(admin, &long, Duration::from_secs(60));
    assert_eq!(job["status"], "cancelled", "{job}");
    assert!(job.get("encoder").is_none(), "{job}");
    assert!(!alive(pid), "the training process is gone");
    let workdir = std::path::Path::new(job["workdir"].as_str().unwrap());
    assert!(!workdir.join("bundle").exists());
    assert!(!workdir.join("checkpoint").exists());
    assert!(!data.path().join("encoders/long").exists());
    let names: Vec<String> = admin.get("/admin/encoders")["encoders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["tiny"]);
    // Cancelling an ended job is a conflict.
    let (code, _) = admin.call("POST", &format!("/admin/jobs/{long}/cancel"), None);
    assert_eq!(code, 409);

    // The queue moves on.
    let job = wait_final(admin, &after, Duration::from_secs(120));
    assert_eq!(job["status"], "succeeded", "{job}");
    let kinds: Vec<String> = admin.get(&format!("/admin/jobs/{long}/events"))["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect();
    assert!(kinds.contains(&"cancel_requested".to_string()), "{kinds:?}");
    assert_eq!(kinds.last().map(String::as_str), Some("cancelled"));
    let (_, metrics) = common::http_get(s.server.addr, "/metrics").unwrap();
    assert!(
        metrics.contains("capot_jobs_total{status=\"cancelled\"} 2"),
        "{metrics}"
    );
}

#[test]
fn a_restart_while_a_job_runs_fails_it_or_requeues_and_resumes_it() {
    let data = tempfile::tempdir().unwrap();
    let mut s = serve(data.path(), &[]);
    let id = submit(&s.admin, &job_body("crash", 100_000, json!({})));
    let running = wait_for(&s.admin, &id, Duration::from_secs(120), |j| {
        j["progress"]["step"].as_u64().unwrap_or(0) >= 3
    });
    let pid: u32 = running["runner_ref"].as_str().unwrap()[4..]
        .parse()
        .unwrap();
    // The server dies without a chance to clean up; its job process goes with it.
    let _ = s.server.child.kill();
    let _ = s.server.child.wait();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while alive(pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(pid), "the job process outlived its server");
    drop(s);

    let s = serve(data.path(), &[]);
    let job = s.admin.get(&format!("/admin/jobs/{id}"));
    assert_eq!(job["status"], "failed", "{job}");
    assert!(
        job["error"]
            .as_str()
            .unwrap()
            .contains("the server stopped while the job was running"),
        "{job}"
    );
    drop(s);

    // With re-queueing on, a job interrupted the same way resumes from its checkpoint.
    let mut s = serve(data.path(), &["--jobs-requeue-on-restart"]);
    let id = submit(&s.admin, &job_body("resumed", 40, json!({})));
    wait_for(&s.admin, &id, Duration::from_secs(120), |j| {
        j["progress"]["step"].as_u64().unwrap_or(0) >= 5
    });
    let _ = s.server.child.kill();
    let _ = s.server.child.wait();
    drop(s);
    let s = serve(data.path(), &["--jobs-requeue-on-restart"]);
    let job = wait_final(&s.admin, &id, Duration::from_secs(300));
    assert_eq!(job["status"], "succeeded", "{job}");
    assert_eq!(job["attempts"], 2, "{job}");
    assert_eq!(job["progress"]["step"], 40);
    let events = s.admin.get(&format!("/admin/jobs/{id}/events"))["events"].clone();
    let kinds: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"requeued"), "{kinds:?}");
    // The second attempt started from the checkpoint, not from step 0.
    let second_start = events
        .as_array()
        .unwrap()
        .iter()
        .skip_while(|e| e["kind"] != "requeued")
        .find(|e| e["kind"] == "progress" && e["data"]["step"].is_number())
        .expect("progress after the restart");
    assert!(
        second_start["data"]["step"].as_u64().unwrap() > 1,
        "resumed from a checkpoint: {second_start}"
    );
    // Both attempts' output is in the job's log: the second started where the first stopped.
    let log = std::fs::read_to_string(
        std::path::Path::new(job["workdir"].as_str().unwrap()).join("align.log"),
    )
    .unwrap();
    let starts: Vec<u64> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "start")
        .map(|e| e["first_step"].as_u64().unwrap())
        .collect();
    assert_eq!(starts.len(), 2, "{log}");
    assert_eq!(starts[0], 0);
    assert!(starts[1] > 0, "{log}");
}

#[test]
fn sigterm_drains_the_admin_listener_and_ends_event_streams() {
    let data = tempfile::tempdir().unwrap();
    let minilm = common::minilm_bundle();
    let models = p(minilm.parent().unwrap()).to_string();
    let mut s = serve(data.path(), &["--models-dir", &models]);
    let admin = s.admin.clone();
    let long = submit(&admin, &job_body("long", 100_000, json!({})));
    wait_for(&admin, &long, Duration::from_secs(120), |j| {
        j["progress"]["step"].as_u64().unwrap_or(0) >= 1
    });
    // A live event stream of the running job: it must end cleanly at shutdown (curl exits 0
    // only when the server ends the stream, not when the connection is cut). It is live once
    // the server has answered; a request not yet read when the signal comes is closed unanswered.
    let (answered, follower) = spawn_event_follower(
        &admin,
        &format!("/admin/jobs/{long}/events"),
        Duration::from_secs(60),
    );
    answered
        .recv_timeout(Duration::from_secs(60))
        .expect("the event stream was not answered within 60s");
    // A bundle load in flight when the signal comes (MiniLM takes a moment to load and warm
    // up; its 384-d vectors do not fit the tiny 32-d index, so the finished load is answered
    // 409 — what matters is that the answer comes whole, after the signal).
    let loader = {
        let admin = admin.clone();
        let body = json!({ "name": "big", "path": minilm, "allow_incompatible": true }).to_string();
        std::thread::spawn(move || admin.call("POST", "/admin/encoders", Some(&body)))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let listed = admin.get("/admin/encoders");
        let loading = listed["encoders"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["state"] == "loading");
        if loading {
            break;
        }
        assert!(!loader.is_finished(), "the load ended before the signal");
        assert!(std::time::Instant::now() < deadline, "{listed}");
        std::thread::sleep(Duration::from_millis(10));
    }
    let status = s.server.terminate();
    assert!(status.success(), "{status:?}");
    let (code, v) = loader.join().unwrap();
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (409, Some("incompatible")),
        "the load in flight at SIGTERM was not answered: {v}"
    );
    let events = follower.join().unwrap();
    assert!(!events.is_empty());
}
