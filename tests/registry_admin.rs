//! The admin API and the declarative state file, end to end through curl: refusals change
//! nothing, concurrent changes leave one consistent state (state file == registry == /info),
//! a restart restores it, an edited state file is applied without a restart and a bad one is
//! rejected as a whole. Also the query router and fusion modes of `/search`.

mod common;
mod registry_common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::Server;
use registry_common::{metric, second_bundle, second_bundle_dir, Admin};
use serde_json::{json, Value};

/// A server with an admin API that may load bundles from [`second_bundle`]'s directory and from
/// the directory holding `data` (the test's own bundles).
fn start(index: &Path, encoder: &Path, data: &Path, extra: &[&str]) -> Server {
    start_with_env(index, encoder, data, extra, &[])
}

/// [`start`] with environment variables.
fn start_with_env(
    index: &Path,
    encoder: &Path,
    data: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Server {
    let models = second_bundle_dir();
    let own = data.parent().unwrap().to_str().unwrap();
    let mut args = vec![
        "--index",
        index.to_str().unwrap(),
        "--encoder",
        encoder.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
        "--admin-addr",
        "127.0.0.1:0",
        "--state-poll-ms",
        "200",
        "--models-dir",
        &models,
        "--models-dir",
        own,
    ];
    args.extend_from_slice(extra);
    Server::start_with(&args, env, true)
}

/// A bundle that loads but whose vectors claim another space: symlinks to MiniLM's files and
/// a manifest with another fingerprint.
fn incompatible_bundle(dir: &Path, source: &Path) -> PathBuf {
    let out = dir.join("alien");
    std::fs::create_dir_all(&out).unwrap();
    for f in ["model.onnx", "tokenizer.json"] {
        std::os::unix::fs::symlink(source.join(f), out.join(f)).unwrap();
    }
    let mut m: Value =
        serde_json::from_str(&std::fs::read_to_string(source.join("encoder.json")).unwrap())
            .unwrap();
    m["name"] = json!("alien");
    m["fingerprint"] = json!("sha256:0000");
    m["aligned_to"] = json!("sha256:0000");
    std::fs::write(out.join("encoder.json"), m.to_string()).unwrap();
    out
}

fn info(server: &Server) -> Value {
    let (code, body) = common::http_get(server.addr, "/info").unwrap();
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

fn metrics(server: &Server) -> String {
    common::http_get(server.addr, "/metrics").unwrap().1
}

/// The state file, the admin API's view and /info must say the same; returns the state.
fn assert_consistent(server: &Server, admin: &Admin, state_path: &Path) -> Value {
    let file: Value = serde_json::from_str(&std::fs::read_to_string(state_path).unwrap()).unwrap();
    let api = admin.get("/admin/state")["state"].clone();
    assert_eq!(file, api, "state file and registry differ");
    let info = info(server);
    assert_eq!(
        info["aliases"], file["aliases"],
        "/info aliases differ from the state file"
    );
    let mut names: Vec<String> = info["encoders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    let file_names: Vec<String> = file["encoders"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        names, file_names,
        "/info encoders differ from the state file"
    );
    assert_eq!(admin.get("/admin/aliases")["aliases"], file["aliases"]);
    file
}

/// Writes a state file as a ConfigMap update does (new file, then rename).
fn replace_file(path: &Path, text: &str) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("timed out waiting for {what}");
}

#[test]
fn admin_changes_are_guarded_consistent_restored_and_declarative() {
    let index = common::default_index();
    let a = common::minilm_bundle();
    let b = second_bundle();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let state_path = data.join("state.json");
    let mut server = start(index, a, &data, &[]);
    let admin = Admin::of(&server, &data);

    // The generated token: 0600, never logged; its path is.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(data.join("admin-token"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let log = server.stderr.lock().unwrap().clone();
    assert!(!log.contains(&admin.token), "the token was logged");
    assert!(
        log.contains("admin-token"),
        "the token file's path was not logged: {log}"
    );

    let before_file = std::fs::read(&state_path).unwrap();
    let before = assert_consistent(&server, &admin, &state_path);
    assert_eq!(before["aliases"], json!({ "default": "minilm" }));

    // Unauthorised calls are refused before anything runs.
    let load_b = json!({ "name": "minilm-b", "path": b }).to_string();
    for token in [None, Some("wrong"), Some("")] {
        let (code, v) = admin.call_as(token, "GET", "/admin/encoders", None);
        assert_eq!(code, 401, "{v}");
        assert_eq!(v["error"]["code"], "unauthorized");
        assert_eq!(
            admin
                .call_as(token, "POST", "/admin/encoders", Some(&load_b))
                .0,
            401
        );
        assert_eq!(
            admin
                .call_as(
                    token,
                    "PUT",
                    "/admin/aliases/default",
                    Some(r#"{"encoder":"minilm"}"#)
                )
                .0,
            401
        );
        assert_eq!(
            admin
                .call_as(token, "DELETE", "/admin/encoders/minilm", None)
                .0,
            401
        );
    }

    // Malformed or impossible calls are refused with the reason.
    let alien = incompatible_bundle(tmp.path(), a);
    let corrupt = tmp.path().join("corrupt");
    std::fs::create_dir_all(&corrupt).unwrap();
    std::fs::write(corrupt.join("encoder.json"), "{").unwrap();
    // Outside the model directories: elsewhere, `..` out of one, a symlink out of one.
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(outside.path().join("bundle")).unwrap();
    let escape = tmp.path().join("escape");
    std::os::unix::fs::symlink(outside.path().join("bundle"), &escape).unwrap();
    let dotdot = format!(
        "{}/../{}/bundle",
        tmp.path().display(),
        outside.path().file_name().unwrap().to_string_lossy()
    );
    let mut cases: Vec<(&str, String, Option<String>, u16, &str)> = [
        outside.path().join("bundle").display().to_string(),
        dotdot,
        escape.display().to_string(),
    ]
    .into_iter()
    .map(|p| {
        (
            "POST",
            "/admin/encoders".to_string(),
            Some(json!({ "name": "x", "path": p }).to_string()),
            403,
            "outside_model_dirs",
        )
    })
    .collect();
    cases.extend(vec![
        (
            "POST",
            "/admin/encoders".into(),
            Some("not json".into()),
            400,
            "invalid_json",
        ),
        (
            "POST",
            "/admin/encoders".into(),
            Some(json!({ "path": b, "bogus": 1 }).to_string()),
            422,
            "invalid_request",
        ),
        (
            "POST",
            "/admin/encoders".into(),
            Some(json!({ "name": "a b", "path": b }).to_string()),
            422,
            "invalid_request",
        ),
        (
            "POST",
            "/admin/encoders".into(),
            Some(json!({ "name": "x", "path": "/nonexistent/bundle" }).to_string()),
            422,
            "invalid_request",
        ),
        (
            "POST",
            "/admin/encoders".into(),
            Some(json!({ "name": "x", "path": corrupt }).to_string()),
            422,
            "load_failed",
        ),
        (
            "POST",
            "/admin/encoders".into(),
            Some(json!({ "name": "alien", "path": alien }).to_string()),
            409,
            "incompatible",
        ),
        (
            "POST",
            "/admin/encoders".into(),
            Some(json!({ "name": "default", "path": b }).to_string()),
            409,
            "conflict",
        ),
        (
            "PUT",
            "/admin/aliases/default".into(),
            Some(r#"{"encoder":"nope"}"#.into()),
            404,
            "not_found",
        ),
        (
            "PUT",
            "/admin/aliases/bad%20name".into(),
            Some(r#"{"encoder":"minilm"}"#.into()),
            422,
            "invalid_request",
        ),
        (
            "PUT",
            "/admin/aliases/typo".into(),
            Some(r#"{"target":"minilm"}"#.into()),
            422,
            "invalid_request",
        ),
        (
            "PUT",
            "/admin/aliases/minilm".into(),
            Some(r#"{"encoder":"minilm"}"#.into()),
            409,
            "conflict",
        ),
        (
            "DELETE",
            "/admin/encoders/minilm".into(),
            None,
            409,
            "conflict",
        ),
        (
            "DELETE",
            "/admin/encoders/nope".into(),
            None,
            404,
            "not_found",
        ),
        (
            "DELETE",
            "/admin/aliases/default".into(),
            None,
            409,
            "conflict",
        ),
    ]);
    for (method, path, body, want, code) in &cases {
        let (got, v) = admin.call(method, path, body.as_deref());
        assert_eq!(
            (got, v["error"]["code"].as_str().unwrap_or("")),
            (*want, *code),
            "{method} {path} {body:?}: {v}"
        );
    }
    let log = server.stderr.lock().unwrap().clone();
    assert_eq!(
        log.matches("refused to load a bundle from outside the model directories")
            .count(),
        3,
        "each refusal is logged: {log}"
    );
    let (_, v) = admin.call(
        "POST",
        "/admin/encoders",
        Some(&json!({ "name": "alien", "path": alien }).to_string()),
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("allow_incompatible"),
        "{v}"
    );
    assert_eq!(
        std::fs::read(&state_path).unwrap(),
        before_file,
        "a refused call changed the state file"
    );
    assert_eq!(assert_consistent(&server, &admin, &state_path), before);
    assert!(
        metric(
            &metrics(&server),
            "capot_encoder_swaps_total{result=\"failed\"}"
        )
        .unwrap()
            >= 8.0
    );

    // The explicit override is recorded and shown.
    let (code, v) = admin.call(
        "POST",
        "/admin/encoders",
        Some(&json!({ "name": "alien", "path": alien, "allow_incompatible": true }).to_string()),
    );
    assert_eq!(code, 201, "{v}");
    assert!(
        v["encoder"]["compatibility_override"]
            .as_str()
            .unwrap()
            .contains("neither"),
        "{v}"
    );
    let listed = admin.get("/admin/encoders");
    let alien_view = listed["encoders"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "alien")
        .unwrap()
        .clone();
    assert_eq!(alien_view["state"], "ready");
    assert_eq!(alien_view["allow_incompatible"], true);
    assert!(alien_view["compatibility_override"].is_string());
    assert!(alien_view["provenance"].is_object() && alien_view["execution_provider"].is_string());
    let info_alien = info(&server)["encoders"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "alien")
        .unwrap()
        .clone();
    assert!(
        info_alien["compatibility_override"].is_string(),
        "{info_alien}"
    );

    // 20 concurrent changes: alias switches and loads.
    let (code, v) = admin.call("POST", "/admin/encoders", Some(&load_b));
    assert_eq!(code, 201, "{v}");
    let handles: Vec<_> = (0..20)
        .map(|i| {
            let admin = admin.clone();
            let a = a.to_path_buf();
            std::thread::spawn(move || {
                if i % 5 == 0 {
                    let body = json!({ "name": format!("c{i}"), "path": a }).to_string();
                    admin.call("POST", "/admin/encoders", Some(&body))
                } else {
                    let target = ["minilm", "minilm-b", "alien"][i % 3];
                    let body = json!({ "encoder": target }).to_string();
                    admin.call("PUT", &format!("/admin/aliases/p{}", i % 4), Some(&body))
                }
            })
        })
        .collect();
    for h in handles {
        let (code, v) = h.join().unwrap();
        assert!(code == 200 || code == 201, "{code}: {v}");
    }
    let (code, v) = admin.call(
        "PUT",
        "/admin/aliases/default",
        Some(r#"{"encoder":"minilm-b"}"#),
    );
    assert_eq!((code, v["previous"].as_str()), (200, Some("minilm")), "{v}");
    let state = assert_consistent(&server, &admin, &state_path);
    let names: Vec<&String> = state["encoders"].as_object().unwrap().keys().collect();
    assert_eq!(
        names,
        ["alien", "c0", "c10", "c15", "c5", "minilm", "minilm-b"]
    );
    assert_eq!(state["aliases"].as_object().unwrap().len(), 5);
    assert_eq!(state["encoders"]["alien"]["allow_incompatible"], true);

    // A restart restores the same encoders and aliases (and the override).
    let status = server.terminate();
    assert!(status.success(), "{status:?}");
    let server = start(index, a, &data, &[]);
    let admin = Admin::of(&server, &data);
    assert_eq!(assert_consistent(&server, &admin, &state_path), state);
    let alien_view = admin.get("/admin/encoders")["encoders"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "alien")
        .unwrap()
        .clone();
    assert!(alien_view["compatibility_override"].is_string());
    let served = |server: &Server| -> String {
        let out = std::process::Command::new("curl")
            .args([
                "-sS",
                "-H",
                "Content-Type: application/json",
                "--data",
                r#"{"query":"vitamin d","k":1}"#,
            ])
            .arg(format!("{}/search", server.base))
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["encoder"]["name"].as_str().unwrap_or("").to_string()
    };
    assert_eq!(served(&server), "minilm-b");

    // An edited state file is applied without a restart: aliases moved and removed, one
    // encoder unloaded, one added under a new name.
    let mut edited = state.clone();
    edited["aliases"] = json!({ "default": "minilm", "typo": "minilm-b", "p0": "c5" });
    let encs = edited["encoders"].as_object_mut().unwrap();
    encs.remove("c10");
    encs.remove("alien");
    encs.insert("fresh".into(), json!({ "path": b }));
    replace_file(&state_path, &serde_json::to_string_pretty(&edited).unwrap());
    wait_for("the edited state file", Duration::from_secs(30), || {
        admin.get("/admin/aliases")["aliases"] == edited["aliases"]
    });
    let now = assert_consistent(&server, &admin, &state_path);
    let names: Vec<&String> = now["encoders"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["c0", "c15", "c5", "fresh", "minilm", "minilm-b"]);
    assert_eq!(served(&server), "minilm");
    // What the contract promises is that the edit was applied by a reload; a slower poll may
    // apply this edit and an earlier one in a single reload, so count at least one.
    let m = metrics(&server);
    assert!(
        metric(&m, "capot_state_file_reloads_total{result=\"ok\"}").unwrap() >= 1.0,
        "{m}"
    );

    // Bad files are rejected as a whole; the old state stays.
    let good = std::fs::read_to_string(&state_path).unwrap();
    let mut dangling = edited.clone();
    dangling["aliases"]["typo"] = json!("ghost");
    let mut unloadable = edited.clone();
    unloadable["encoders"]["broken"] = json!({ "path": corrupt });
    unloadable["aliases"]["default"] = json!("broken");
    let bad = [
        ("{ not json".to_string(), "line 1"),
        (dangling.to_string(), "ghost"),
        (unloadable.to_string(), "broken"),
    ];
    for (i, (text, reason)) in bad.iter().enumerate() {
        replace_file(&state_path, text);
        let want = (i + 1) as f64;
        wait_for("the rejection", Duration::from_secs(30), || {
            metric(
                &metrics(&server),
                "capot_state_file_reloads_total{result=\"failed\"}",
            ) == Some(want)
        });
        let api = admin.get("/admin/state");
        assert_eq!(api["state"], now, "a bad state file changed the registry");
        assert!(
            api["last_error"].as_str().unwrap().contains(reason),
            "{api}"
        );
        assert_eq!(info(&server)["aliases"], now["aliases"]);
    }
    assert!(server.stderr.lock().unwrap().contains("rejected"));
    // A good file again is applied.
    replace_file(&state_path, &good);
    wait_for("the good file", Duration::from_secs(30), || {
        admin.get("/admin/state")["last_error"].is_null()
    });
    assert_consistent(&server, &admin, &state_path);
}

/// The default index and MiniLM behind the `typo` router, with an admin listener and the second
/// bundle's directory loadable; `extra` flags and `env` on top.
fn router_server(data: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
    let (index, a) = (common::default_index(), common::minilm_bundle());
    let mut args = vec!["--router", "typo"];
    args.extend_from_slice(extra);
    start_with_env(index, a, data, &args, env)
}

/// A routed request spends one request timeout in all: its alias groups run one after the other
/// from one budget, so the answer (200, or 503 `timeout`) comes within about one timeout, never
/// one per group.
#[test]
fn a_routed_search_answers_within_one_timeout_however_many_groups() {
    let b = second_bundle();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let timeout_ms = 1000u64;
    let server = router_server(
        &data,
        &["--request-timeout-ms", &timeout_ms.to_string()],
        &[],
    );
    let admin = Admin::of(&server, &data);
    let (code, v) = admin.call(
        "POST",
        "/admin/encoders",
        Some(&json!({ "name": "minilm-b", "path": b }).to_string()),
    );
    assert_eq!(code, 201, "{v}");
    let (code, v) = admin.call(
        "PUT",
        "/admin/aliases/typo",
        Some(r#"{"encoder":"minilm-b"}"#),
    );
    assert_eq!(code, 200, "{v}");
    let post = |body: &Value| -> (u16, Value, Duration) {
        let started = Instant::now();
        let out = std::process::Command::new("curl")
            .args(["-sS", "-o", "-", "-w", "\n%{http_code}", "--max-time", "60"])
            .args(["-H", "Content-Type: application/json", "--data-binary"])
            .arg(body.to_string())
            .arg(format!("{}/search", server.base))
            .output()
            .unwrap();
        let took = started.elapsed();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let (json, code) = text.rsplit_once('\n').unwrap();
        (
            code.parse().unwrap(),
            serde_json::from_str(json).unwrap_or(Value::Null),
            took,
        )
    };
    let clean = |i: usize| {
        format!(
            "question {i}: how long do antibiotics such as amoxicillin take to work for a sore \
             throat, an ear infection or a sinus infection, and when should you see a doctor"
        )
    };
    let noisy = |i: usize| {
        format!(
            "qeustion {i}: hwo lnog do antiboitics scuh as amoxicilin tkae to wrok for a sroe \
             thraot, an aer infectoin or a sinsu infectoin, adn wehn shuold yuo see a doctr"
        )
    };
    // This machine's time for 64 of these texts sizes the two groups (up to the request's 256
    // texts) so each takes much of the timeout: groups given a timeout each would answer after
    // nearly two (measured: 1.8 s against 1.0 s with one deadline).
    let (code, calib, _) = post(&json!({
        "queries": (0..64).map(clean).collect::<Vec<_>>(), "k": 1, "encoder": "minilm"
    }));
    let encode_ms = if code == 200 {
        calib["timings_ms"]["encode"]
            .as_f64()
            .unwrap_or(1.0)
            .max(1.0)
    } else {
        timeout_ms as f64
    };
    let per_group = ((0.9 * timeout_ms as f64 / encode_ms * 64.0) as usize).clamp(1, 128);
    let mut queries: Vec<String> = (0..per_group).map(clean).collect();
    queries.extend((0..per_group).map(noisy));
    let (code, v, took) = post(&json!({ "queries": queries, "k": 1 }));
    eprintln!(
        "routed: {per_group} texts per group ({encode_ms:.0} ms per 64 here): {code} after {took:?}, timings {}",
        v["timings_ms"]
    );
    if code == 200 {
        let routed = v["routed_to"].as_array().unwrap();
        assert!(
            routed.contains(&json!("typo")) && routed.contains(&json!("default")),
            "{v}"
        );
    } else {
        assert_eq!(
            (code, v["error"]["code"].as_str()),
            (503, Some("timeout")),
            "{v}"
        );
    }
    let limit = Duration::from_millis(timeout_ms * 14 / 10);
    assert!(
        took <= limit,
        "{per_group} texts per group ({encode_ms:.0} ms per 64): answered {code} after {took:?}, past one timeout ({timeout_ms} ms)"
    );
}

#[test]
fn router_sends_noisy_queries_to_typo_and_fusion_merges_by_rrf() {
    let b = second_bundle();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    // A token from the environment: used, and no token file is written.
    let server = router_server(&data, &[], &[("CAPOT_ADMIN_TOKEN", "env-token-123")]);
    let admin = Admin {
        base: format!("http://{}", registry_common::admin_addr(&server)),
        token: "env-token-123".into(),
    };
    assert!(!data.join("admin-token").exists());
    assert_eq!(
        admin
            .call_as(Some("wrong"), "GET", "/admin/aliases", None)
            .0,
        401
    );
    let search = |body: Value| -> Value {
        let out = std::process::Command::new("curl")
            .args([
                "-sS",
                "-H",
                "Content-Type: application/json",
                "--data",
                &body.to_string(),
            ])
            .arg(format!("{}/search", server.base))
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let noisy = "whta is teh captial of frnace";
    let clean = "what is the capital of france";
    // Without a `typo` alias everything goes to `default`.
    let v = search(json!({ "query": noisy, "k": 3 }));
    assert_eq!(
        (v["routed_to"].as_str(), v["encoder"]["name"].as_str()),
        (Some("default"), Some("minilm")),
        "{v}"
    );

    assert_eq!(
        admin
            .call(
                "POST",
                "/admin/encoders",
                Some(&json!({ "name": "minilm-b", "path": b }).to_string())
            )
            .0,
        201
    );
    assert_eq!(
        admin
            .call(
                "PUT",
                "/admin/aliases/typo",
                Some(r#"{"encoder":"minilm-b"}"#)
            )
            .0,
        200
    );
    let v = search(json!({ "query": noisy, "k": 3 }));
    assert_eq!(
        (v["routed_to"].as_str(), v["encoder"]["name"].as_str()),
        (Some("typo"), Some("minilm-b")),
        "{v}"
    );
    assert_eq!(v["results"].as_array().unwrap().len(), 3);
    let v = search(json!({ "query": clean, "k": 3 }));
    assert_eq!(
        (v["routed_to"].as_str(), v["encoder"]["name"].as_str()),
        (Some("default"), Some("minilm")),
        "{v}"
    );
    // A batch is routed per query, answered in order.
    let v = search(json!({ "queries": [clean, noisy, clean], "k": 2 }));
    assert_eq!(v["routed_to"], json!(["default", "typo", "default"]), "{v}");
    assert_eq!(v["encoders"][1]["name"], "minilm-b");
    assert_eq!(v["results"].as_array().unwrap().len(), 3);
    assert!(v.get("encoder").is_none());
    // Naming an encoder bypasses the router.
    let v = search(json!({ "query": noisy, "k": 3, "encoder": "minilm" }));
    assert!(
        v.get("routed_to").is_none() && v["encoder"]["name"] == "minilm",
        "{v}"
    );
    let m = metrics(&server);
    assert_eq!(
        metric(&m, "capot_router_choices_total{alias=\"typo\"}"),
        Some(2.0),
        "{m}"
    );
    assert_eq!(
        metric(&m, "capot_router_choices_total{alias=\"default\"}"),
        Some(4.0),
        "{m}"
    );

    // Fusion of two copies of one encoder: identical lists, so every fused score is 2/(60+rank).
    let v = search(json!({ "query": clean, "k": 5, "fusion": ["minilm", "typo"] }));
    let hits = v["results"].as_array().unwrap();
    assert_eq!(hits.len(), 5, "{v}");
    for (i, h) in hits.iter().enumerate() {
        let want = 2.0 / (60.0 + (i + 1) as f64);
        assert!((h["score"].as_f64().unwrap() - want).abs() < 1e-6, "{v}");
        assert_eq!(h["rank"], i + 1);
    }
    assert_eq!(v["fusion"]["method"], "rrf");
    assert_eq!(v["fusion"]["encoders"][1]["name"], "minilm-b");
    let plain = search(json!({ "query": clean, "k": 5, "encoder": "minilm" }));
    assert_eq!(common::hit_ids(&v), common::hit_ids(&plain));
    for bad in [
        json!({ "query": clean, "fusion": ["minilm"] }),
        json!({ "query": clean, "fusion": ["minilm", "minilm"] }),
        json!({ "query": clean, "fusion": ["minilm", "minilm-b"], "encoder": "minilm" }),
    ] {
        assert_eq!(
            search(bad.clone())["error"]["code"],
            "invalid_request",
            "{bad}"
        );
    }
    assert_eq!(
        search(json!({ "query": clean, "fusion": ["minilm", "nope"] }))["error"]["code"],
        "unknown_encoder"
    );
}

#[test]
fn kill_9_during_admin_changes_restarts_on_one_whole_state() {
    let index = common::default_index();
    let a = common::minilm_bundle();
    let b = second_bundle();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let state_path = data.join("state.json");
    let mut server = start(index, a, &data, &[]);
    let admin = Admin::of(&server, &data);
    let (code, v) = admin.call(
        "POST",
        "/admin/encoders",
        Some(&json!({ "name": "minilm-b", "path": b }).to_string()),
    );
    assert_eq!(code, 201, "{v}");
    // A stream of admin changes (each one a state-file write) until the process dies under it.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let acknowledged = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let changes = {
        let (stop, base, token) = (stop.clone(), admin.base.clone(), admin.token.clone());
        let acknowledged = acknowledged.clone();
        std::thread::spawn(move || {
            for i in 0u32.. {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let target = if i % 2 == 0 { "minilm-b" } else { "minilm" };
                let out = std::process::Command::new("curl")
                    .args([
                        "-s",
                        "-o",
                        "/dev/null",
                        "-w",
                        "%{http_code}",
                        "--max-time",
                        "5",
                    ])
                    .args(["-X", "PUT", "-H", &format!("Authorization: Bearer {token}")])
                    .args(["-H", "Content-Type: application/json"])
                    .args(["--data-binary", &json!({ "encoder": target }).to_string()])
                    .arg(format!("{base}/admin/aliases/a{}", i % 7))
                    .output()
                    .expect("curl");
                if String::from_utf8_lossy(&out.stdout) == "200" {
                    acknowledged.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                }
            }
        })
    };
    // Kill it once several changes are acknowledged, however long they take here; the stream
    // goes on meanwhile, so the kill lands amid writes.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while acknowledged.load(std::sync::atomic::Ordering::Acquire) < 5 {
        assert!(
            std::time::Instant::now() < deadline && !changes.is_finished(),
            "only {} changes acknowledged in 60 s",
            acknowledged.load(std::sync::atomic::Ordering::Acquire)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    changes.join().unwrap();
    let acknowledged = acknowledged.load(std::sync::atomic::Ordering::Acquire);
    assert!(
        acknowledged >= 5,
        "only {acknowledged} changes before the kill"
    );
    // The file on disk is whole: it parses, and names only aliases a change could have made.
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&state_path).unwrap())
        .expect("the state file is whole after kill -9");
    for (alias, target) in file["aliases"].as_object().unwrap() {
        assert!(
            alias == "default" || alias.starts_with('a'),
            "{alias} in {file}"
        );
        assert!(target == "minilm" || target == "minilm-b", "{file}");
    }
    // A restart serves exactly that state: registry, admin API and /info agree with the file.
    let server = start(index, a, &data, &[]);
    let admin = Admin::of(&server, &data);
    assert_eq!(assert_consistent(&server, &admin, &state_path), file);
}
