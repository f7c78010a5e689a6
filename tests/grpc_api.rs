//! The gRPC API as a user sees it: `capot serve` with `--grpc-addr 127.0.0.1:0`, driven by a
//! Python grpcio client (tests/python/grpc_client.py) whose stubs are generated here, at test
//! time, from proto/ with grpc_tools.protoc. The client prints JSON; the asserts are below.

mod common;
mod registry_common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{default_index, minilm_bundle, python, root, Server};
use serde_json::{json, Value};

/// Longest time one client run may take.
const CLIENT_LIMIT: Duration = Duration::from_secs(180);

/// Generates the Python stubs of capot.v1 and of the standard health and reflection protos.
fn generate_stubs(dir: &Path) {
    let py = python();
    let std_protos = root().join("tests/python/protos");
    let status = Command::new(&py)
        .args(["-m", "grpc_tools.protoc"])
        .arg(format!("-I{}", root().join("proto").display()))
        .arg(format!("-I{}", std_protos.display()))
        .arg(format!("--python_out={}", dir.display()))
        .arg(format!("--grpc_python_out={}", dir.display()))
        .args([
            "capot/v1/retrieval.proto",
            "grpc_std/health.proto",
            "grpc_std/reflection.proto",
        ])
        .status()
        .expect("run grpc_tools.protoc");
    assert!(status.success(), "grpc_tools.protoc failed");
}

/// Runs the client against `server`'s gRPC address and parses its JSON output (bounded in time).
fn run_client(server: &Server, stubs: &Path, extra: &[&str]) -> Value {
    let target = server.grpc_addr.expect("grpc address").to_string();
    let mut child = Command::new(python())
        .arg(root().join("tests/python/grpc_client.py"))
        .args(["--target", &target, "--stubs"])
        .arg(stubs)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn python client");
    let started = Instant::now();
    loop {
        if child.try_wait().expect("poll client").is_some() {
            break;
        }
        if started.elapsed() > CLIENT_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "client ran past {CLIENT_LIMIT:?}; server log:\n{}",
                server.stderr.lock().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("client output");
    assert!(
        out.status.success(),
        "client failed:\n{}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.stderr.lock().unwrap()
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "client output is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn serve_args<'a>(index: &'a str, bundle: &'a str) -> Vec<&'a str> {
    vec![
        "--index",
        index,
        "--encoder",
        bundle,
        "--grpc-addr",
        "127.0.0.1:0",
    ]
}

fn top_id(hits: &Value) -> &str {
    hits[0]["id"].as_str().expect("hit id")
}

fn assert_error(v: &Value, code: &str, error_code: &str, what: &str) {
    assert_eq!(v["code"], code, "{what}: {v}");
    assert_eq!(v["error_code"], error_code, "{what}: {v}");
    assert!(
        !v["message"].as_str().unwrap_or("").is_empty(),
        "{what}: message kept: {v}"
    );
}

#[test]
fn grpc_search_stream_embed_info_health_reflection_and_errors() {
    let index = default_index().to_str().unwrap().to_string();
    let bundle = minilm_bundle().to_str().unwrap().to_string();
    let stubs = tempfile::tempdir().expect("tempdir");
    generate_stubs(stubs.path());
    let server = Server::start(&serve_args(&index, &bundle));
    let out = run_client(&server, stubs.path(), &["--mode", "main"]);

    assert_eq!(out["health"], "SERVING", "{out}");
    assert_eq!(out["health_retrieval"], "SERVING", "{out}");
    assert_eq!(out["health_unknown"]["code"], "NOT_FOUND", "{out}");
    assert_eq!(out["health_watch_first"], "SERVING", "{out}");

    // One query: 5 hits ranked 1..=5, best first, the relevant document on top.
    let search = &out["search"];
    let hits = &search["results"][0];
    assert_eq!(search["results"].as_array().unwrap().len(), 1);
    let ranks: Vec<u64> = hits
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["rank"].as_u64().unwrap())
        .collect();
    assert_eq!(ranks, [1, 2, 3, 4, 5], "{search}");
    let scores: Vec<f64> = hits
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["score"].as_f64().unwrap())
        .collect();
    assert!(
        scores.windows(2).all(|w| w[0] >= w[1]),
        "scores descend: {scores:?}"
    );
    assert_eq!(top_id(hits), "d001", "{search}");
    assert_eq!(hits[0]["title"], "How Fast Antibiotics Work");
    assert_eq!(hits[0]["has_text"], true);
    assert_eq!(search["encoder"]["name"], "minilm");
    assert!(!search["encoder"]["version"].as_str().unwrap().is_empty());
    assert!(
        search["timings"]["total_ms"].as_f64().unwrap() > 0.0,
        "{search}"
    );
    assert_eq!(out["search_default_k"], 10);

    // Batch: one list per query, in order.
    let batch = out["batch"].as_array().unwrap();
    assert_eq!(batch.len(), 2);
    assert_eq!(top_id(&batch[0]), "d001");
    assert_eq!(top_id(&batch[1]), "d003");
    assert!(batch.iter().all(|b| b.as_array().unwrap().len() == 3));

    // Stream: three answers, in request order.
    let stream = out["stream"].as_array().unwrap();
    assert_eq!(stream.len(), 3, "{out}");
    let tops: Vec<&str> = stream.iter().map(|s| s[0].as_str().unwrap()).collect();
    assert_eq!(tops, ["d001", "d003", "d031"]);
    assert!(stream.iter().all(|s| s.as_array().unwrap().len() == 2));
    // The first failing request ends the stream with its status, after earlier answers.
    let se = &out["stream_error"];
    assert_eq!(se["answered"], serde_json::json!(["d017"]), "{se}");
    assert_error(
        &se["error"],
        "INVALID_ARGUMENT",
        "invalid_request",
        "stream",
    );

    // Embed: 384-d unit vectors.
    let embed = &out["embed"];
    assert_eq!(embed["count"], 2);
    assert_eq!(embed["dims"], serde_json::json!([384, 384]));
    for n in embed["norms"].as_array().unwrap() {
        assert!(
            (n.as_f64().unwrap() - 1.0).abs() < 1e-4,
            "unit norm: {embed}"
        );
    }
    assert_eq!(embed["encoder"], "minilm");
    assert!(embed["tokens"].as_u64().unwrap() > 0);

    // Info.
    let info = &out["info"];
    assert_eq!(info["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(info["ready"], true);
    assert!(info["documents"].as_u64().unwrap() >= 30, "{info}");
    assert_eq!(info["dimension"], 384);
    assert_eq!(info["metric"], "cosine");
    assert_eq!(info["encoders"][0]["name"], "minilm");
    assert_eq!(info["encoders"][0]["dimension"], 384);
    assert_eq!(info["aliases"]["default"], "minilm");
    assert_eq!(info["max_k"], 1000);

    // Reflection: the three services, and the file defining Retrieval with its methods.
    let services: Vec<&str> = out["reflection_services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    for s in [
        "capot.v1.Retrieval",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
    ] {
        assert!(services.contains(&s), "{s} listed: {services:?}");
    }
    let file = out["reflection_file"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["package"] == "capot.v1")
        .unwrap_or_else(|| panic!("capot.v1 file served: {}", out["reflection_file"]));
    assert_eq!(file["name"], "capot/v1/retrieval.proto");
    assert_eq!(
        file["methods"],
        serde_json::json!(["Search", "SearchStream", "Embed", "Info"])
    );

    // Query repair, as over HTTP.
    let r = &out["repair"];
    assert_eq!(r["repairs"][0]["changed"], true, "{r}");
    assert_eq!(r["repairs"][0]["text"], "symptoms of vitamin d deficiency");
    assert_eq!(r["repairs"][0]["fusion"], "max");
    assert_eq!(r["repairs"][0]["edits"][0]["from"], "deficeincy");
    assert_eq!(r["repairs"][0]["edits"][0]["kind"], "non_word", "{r}");
    assert_eq!(r["repairs"][1]["changed"], false, "{r}");
    assert!(r["repair_ms"].as_f64().unwrap() >= 0.0);
    assert_eq!(out["repair_off_changed"], serde_json::json!([false]));
    assert_eq!(
        out["repair_stream"],
        serde_json::json!(["what is the capital of australia"])
    );

    // Errors keep the HTTP API's semantics.
    let e = &out["errors"];
    assert_error(
        &e["repair_unknown"],
        "INVALID_ARGUMENT",
        "invalid_request",
        "unknown repair mode",
    );
    assert_error(
        &e["empty_query"],
        "INVALID_ARGUMENT",
        "invalid_request",
        "empty query",
    );
    assert!(
        e["empty_query"]["message"]
            .as_str()
            .unwrap()
            .contains("queries[0]"),
        "{e}"
    );
    assert_error(
        &e["no_queries"],
        "INVALID_ARGUMENT",
        "invalid_request",
        "no queries",
    );
    assert_error(
        &e["unknown_encoder"],
        "NOT_FOUND",
        "unknown_encoder",
        "unknown encoder",
    );
    assert!(
        e["unknown_encoder"]["message"]
            .as_str()
            .unwrap()
            .contains("no-such-encoder"),
        "{e}"
    );
    assert_error(&e["k_zero"], "INVALID_ARGUMENT", "invalid_request", "k = 0");
    assert_error(
        &e["k_too_large"],
        "INVALID_ARGUMENT",
        "invalid_request",
        "k too large",
    );
    assert_error(
        &e["ef_zero"],
        "INVALID_ARGUMENT",
        "invalid_request",
        "ef = 0",
    );
    assert_error(
        &e["embed_empty"],
        "INVALID_ARGUMENT",
        "invalid_request",
        "embed empty",
    );
    assert_error(
        &e["embed_wrong_dimensions"],
        "INVALID_ARGUMENT",
        "invalid_request",
        "dimensions",
    );
    assert_error(
        &e["embed_unknown_encoder"],
        "NOT_FOUND",
        "unknown_encoder",
        "embed encoder",
    );

    // gRPC calls are counted in the service's metrics by route and gRPC status code.
    let (status, metrics) = common::http_get(server.addr, "/metrics").expect("GET /metrics");
    assert_eq!(status, 200);
    for line in [
        r#"capot_http_requests_total{route="grpc:/capot.v1.Retrieval/Search",status="0"}"#,
        r#"capot_http_requests_total{route="grpc:/capot.v1.Retrieval/Search",status="3"}"#,
        r#"capot_http_requests_total{route="grpc:/capot.v1.Retrieval/Search",status="5"}"#,
        r#"capot_http_requests_total{route="grpc:/capot.v1.Retrieval/SearchStream",status="0"}"#,
        r#"capot_http_requests_total{route="grpc:/capot.v1.Retrieval/Embed",status="0"}"#,
        r#"capot_http_requests_total{route="grpc:/capot.v1.Retrieval/Info",status="0"}"#,
        r#"capot_request_failures_total{reason="unknown_encoder",route="grpc:/capot.v1.Retrieval/Search"}"#,
    ] {
        assert!(metrics.contains(line), "{line} in metrics:\n{metrics}");
    }
}

#[test]
fn grpc_api_key_guards_retrieval_but_not_health_or_reflection() {
    let index = default_index().to_str().unwrap().to_string();
    let bundle = minilm_bundle().to_str().unwrap().to_string();
    let stubs = tempfile::tempdir().expect("tempdir");
    generate_stubs(stubs.path());
    let mut args = serve_args(&index, &bundle);
    args.extend(["--api-key", "s3cret"]);
    let server = Server::start(&args);
    let out = run_client(
        &server,
        stubs.path(),
        &["--mode", "auth", "--api-key", "s3cret"],
    );

    for what in [
        "search_without_key",
        "search_wrong_key",
        "info_without_key",
        "embed_without_key",
        "stream_without_key",
    ] {
        assert_error(&out[what], "UNAUTHENTICATED", "unauthorized", what);
    }
    assert_eq!(out["search_with_key"], Value::Null, "{out}");
    assert_eq!(out["search_with_key_top"], "d017");
    assert_eq!(out["health_without_key"], "SERVING");
    assert!(
        out["reflection_without_key"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == "capot.v1.Retrieval"),
        "{out}"
    );
}

#[test]
fn grpc_can_be_turned_off_and_the_address_comes_from_the_environment() {
    let index = default_index().to_str().unwrap().to_string();
    let bundle = minilm_bundle().to_str().unwrap().to_string();
    let server = Server::start(&[
        "--index",
        &index,
        "--encoder",
        &bundle,
        "--grpc-addr",
        "off",
    ]);
    assert_eq!(server.grpc_addr, None);
    assert!(!server.stderr.lock().unwrap().contains("grpc listening"));

    let server = Server::start_with(
        &["--index", &index, "--encoder", &bundle],
        &[("CAPOT_GRPC_ADDR", "127.0.0.1:0")],
        false,
    );
    let addr = server.grpc_addr.expect("gRPC address from CAPOT_GRPC_ADDR");
    assert_ne!(addr.port(), 0);
    assert!(std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).is_ok());
}

#[test]
fn sigterm_ends_open_streams_and_stops_promptly() {
    use std::io::BufRead;
    let index = default_index().to_str().unwrap().to_string();
    let bundle = minilm_bundle().to_str().unwrap().to_string();
    let stubs = tempfile::tempdir().expect("tempdir");
    generate_stubs(stubs.path());
    let mut server = Server::start(&serve_args(&index, &bundle));
    let target = server.grpc_addr.expect("grpc address").to_string();
    let mut client = Command::new(python())
        .arg(root().join("tests/python/grpc_client.py"))
        .args(["--target", &target, "--mode", "hold", "--stubs"])
        .arg(stubs.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn python client");
    let mut lines = std::io::BufReader::new(client.stdout.take().expect("stdout")).lines();
    // Bounded: the client's own deadline (30 s) ends the stream if nothing else does.
    assert_eq!(
        lines.next().and_then(Result::ok).as_deref(),
        Some("answered")
    );

    // The stream is open and idle; shutdown must end it rather than wait for the drain timeout.
    let started = Instant::now();
    let status = server.terminate();
    assert!(
        status.success(),
        "exit status {status}: {}",
        server.stderr.lock().unwrap()
    );
    eprintln!("stopped after {:?}", started.elapsed());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "stopped after {:?}",
        started.elapsed()
    );
    let out: Value = serde_json::from_str(&lines.next().and_then(Result::ok).expect("client JSON"))
        .expect("JSON");
    let _ = client.wait();
    assert_eq!(out["answered"], serde_json::json!(["d017"]), "{out}");
    assert_eq!(out["error"]["code"], "UNAVAILABLE", "{out}");
    assert_eq!(out["error"]["error_code"], "not_ready", "{out}");
    assert!(server.stderr.lock().unwrap().contains("capot: stopped"));
}

#[test]
fn hostile_grpc_messages_get_status_codes_never_internal_errors() {
    let index = default_index().to_str().unwrap().to_string();
    let bundle = minilm_bundle().to_str().unwrap().to_string();
    let stubs = tempfile::tempdir().expect("tempdir");
    generate_stubs(stubs.path());
    let server = Server::start(&serve_args(&index, &bundle));
    let out = run_client(&server, stubs.path(), &["--mode", "fuzz", "--cases", "600"]);
    println!("gRPC fuzz: {out}");
    let count = |kind: &str| -> u64 {
        out["codes"][kind]
            .as_object()
            .expect("codes")
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum()
    };
    assert_eq!(count("raw") + count("typed"), 600, "{out}");
    // Well-formed messages with hostile values: answered, or refused with the reason.
    for (code, n) in out["codes"]["typed"].as_object().unwrap() {
        assert!(
            matches!(
                code.as_str(),
                "OK" | "INVALID_ARGUMENT" | "NOT_FOUND" | "OUT_OF_RANGE" | "RESOURCE_EXHAUSTED"
            ),
            "{n} calls answered {code}: {out}\nserver log:\n{}",
            server.stderr.lock().unwrap()
        );
    }
    // Bytes that are not a message of the method's type fail to decode: the client's error,
    // INVALID_ARGUMENT (tonic answers INTERNAL, as gRPC's status-code table names it for
    // "error parsing request proto"; capot rewrites it). Nothing is INTERNAL or UNKNOWN.
    for (code, n) in out["codes"]["raw"].as_object().unwrap() {
        assert!(
            matches!(code.as_str(), "OK" | "INVALID_ARGUMENT" | "NOT_FOUND"),
            "{n} raw calls answered {code}: {out}"
        );
    }
    assert!(
        out["codes"]["raw"]["INVALID_ARGUMENT"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "some random bytes must fail to decode: {out}"
    );
    assert_eq!(out["internal_messages"], serde_json::json!([]), "{out}");
    assert!(
        out["codes"]["typed"]["OK"].as_u64().unwrap_or(0) > 0,
        "{out}"
    );
    assert!(
        out["codes"]["typed"]["INVALID_ARGUMENT"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "{out}"
    );
    assert_eq!(out["health_after"], "SERVING", "{out}");
    assert_eq!(out["hits_after"], 3, "{out}");
    let log = server.stderr.lock().unwrap().clone();
    assert!(!log.contains("panicked"), "{log}");
}

/// One HTTP `/search` answer, by curl.
fn http_search(server: &Server, body: &Value) -> Value {
    let out = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "60",
            "-H",
            "Content-Type: application/json",
            "--data",
        ])
        .arg(body.to_string())
        .arg(format!("{}/search", server.base))
        .output()
        .expect("run curl");
    serde_json::from_slice(&out.stdout).expect("JSON answer")
}

/// Per query, the (id, score) pairs of an HTTP answer (`results` of a batch).
fn http_hits(v: &Value) -> Vec<Vec<(String, f64)>> {
    v["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|hits| {
            hits.as_array()
                .expect("hits")
                .iter()
                .map(|h| {
                    (
                        h["id"].as_str().unwrap().to_string(),
                        h["score"].as_f64().unwrap(),
                    )
                })
                .collect()
        })
        .collect()
}

/// The same from a gRPC answer (protobuf JSON: empty fields are left out).
fn grpc_hits(v: &Value) -> Vec<Vec<(String, f64)>> {
    v["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            r["hits"]
                .as_array()
                .map(|hits| {
                    hits.iter()
                        .map(|h| {
                            (
                                h["id"].as_str().unwrap().to_string(),
                                h["score"].as_f64().unwrap_or(0.0),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect()
}

fn assert_same_hits(http: &Value, grpc: &Value, what: &str) {
    let (a, b) = (http_hits(http), grpc_hits(grpc));
    assert_eq!(a.len(), b.len(), "{what}: queries");
    for (q, (x, y)) in a.iter().zip(&b).enumerate() {
        let ids = |l: &[(String, f64)]| l.iter().map(|h| h.0.clone()).collect::<Vec<_>>();
        assert_eq!(ids(x), ids(y), "{what}: query {q} documents and order");
        for ((_, s1), (_, s2)) in x.iter().zip(y) {
            assert!(
                (s1 - s2).abs() <= 1e-4,
                "{what}: query {q} scores {s1} vs {s2}"
            );
        }
    }
}

#[test]
fn http_and_grpc_give_the_same_answer_routed_fused_and_repaired() {
    let index = default_index().to_str().unwrap().to_string();
    let a = minilm_bundle().to_str().unwrap().to_string();
    let b = registry_common::second_bundle();
    let data = tempfile::tempdir().expect("data dir");
    let server = Server::start(&[
        "--index",
        &index,
        "--encoder",
        &a,
        "--grpc-addr",
        "127.0.0.1:0",
        "--data-dir",
        data.path().to_str().unwrap(),
        "--router",
        "typo",
        "--models-dir",
        &registry_common::second_bundle_dir(),
    ]);
    let admin = registry_common::Admin::of(&server, data.path());
    let load = json!({ "name": "minilm-b", "path": b });
    assert_eq!(
        admin
            .call("POST", "/admin/encoders", Some(&load.to_string()))
            .0,
        201
    );
    let alias = json!({ "encoder": "minilm-b", "repair": "on" });
    assert_eq!(
        admin
            .call("PUT", "/admin/aliases/typo", Some(&alias.to_string()))
            .0,
        200
    );

    let clean = "what is the capital of france";
    // Two unknown words of six: a typo'd query (more would read as another language).
    let noisy = "what is the captial of frnace";
    let requests = [
        // Routed per query: no encoder named and a router configured.
        json!({ "queries": [clean, noisy, clean], "k": 5 }),
        // Fused by RRF over two aliases, with repair.
        json!({ "queries": [noisy, clean], "k": 5, "fusion": ["default", "typo"], "repair": "on" }),
        // One encoder named: no routing.
        json!({ "queries": [noisy], "k": 3, "encoder": "minilm", "repair": "on", "repair_fusion": "repaired" }),
    ];
    let file = data.path().join("requests.json");
    std::fs::write(&file, serde_json::to_vec(&requests).unwrap()).unwrap();
    let stubs = tempfile::tempdir().expect("tempdir");
    generate_stubs(stubs.path());
    let out = run_client(
        &server,
        stubs.path(),
        &["--mode", "search", "--requests", file.to_str().unwrap()],
    );
    let grpc = out["answers"].as_array().expect("answers");
    assert_eq!(grpc.len(), requests.len(), "{out}");
    let http: Vec<Value> = requests.iter().map(|r| http_search(&server, r)).collect();

    // Routed: the same aliases chosen, the same encoders, the same documents.
    let (h, g) = (&http[0], &grpc[0]);
    assert_same_hits(h, g, "routed");
    assert_eq!(h["routed_to"], json!(["default", "typo", "default"]), "{h}");
    assert_eq!(g["routed_to"], h["routed_to"], "{g}");
    let names = |v: &Value| -> Vec<String> {
        v["encoders"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(g), names(h));
    assert_eq!(names(h), ["minilm", "minilm-b", "minilm"]);

    // Fused: the same fusion, the same merged lists, the same repairs.
    let (h, g) = (&http[1], &grpc[1]);
    assert_same_hits(h, g, "fused");
    assert_eq!(g["fusion"]["method"], "rrf", "{g}");
    assert_eq!(
        g["fusion"]["depth"].as_u64(),
        h["fusion"]["depth"].as_u64(),
        "{g}"
    );
    let fused_names = |v: &Value| -> Vec<(String, String)> {
        v["fusion"]["encoders"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["requested"].as_str().unwrap().to_string(),
                    e["name"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    assert_eq!(fused_names(g), fused_names(h));
    assert_eq!(g["repairs"][0]["text"], h["repairs"][0]["text"], "{g} {h}");
    assert!(
        h["repairs"][0]["text"].as_str().is_some_and(|t| t != noisy),
        "{h}"
    );

    // Named encoder: no routing either way, the same repaired search.
    let (h, g) = (&http[2], &grpc[2]);
    assert_same_hits(h, g, "named");
    assert!(
        h.get("routed_to").is_none() && g.get("routed_to").is_none(),
        "{h} {g}"
    );
    assert_eq!(g["encoder"]["name"], "minilm");
    assert_eq!(g["repairs"][0]["text"], h["repairs"][0]["text"]);
    assert_eq!(g["repairs"][0]["fusion"], "repaired");
}

#[test]
fn http_and_grpc_give_the_same_answer_under_a_filter() {
    let index = common::filtered_index().to_str().unwrap().to_string();
    let bundle = minilm_bundle().to_str().unwrap().to_string();
    let server = Server::start(&serve_args(&index, &bundle));
    let q = "how long do antibiotics take to work";
    // (HTTP body, the same request as gRPC fields in protobuf JSON)
    let cases = [
        (
            json!({"queries": [q], "k": 7, "with_metadata": true,
                   "filter": {"must": [{"key": "tenant", "match": {"value": "t3"}}]}}),
            json!({"queries": [q], "k": 7, "with_metadata": true,
                   "filter": {"must": [{"field": {"key": "tenant", "match": {"keyword": "t3"}}}]}}),
        ),
        (
            json!({"queries": [q, "boil an egg"], "k": 5,
                   "filter": {"must": [{"key": "year", "range": {"gte": 2003, "lt": 2008}}],
                              "must_not": [{"key": "tags", "match": {"any": ["tag1", "tag2"]}}],
                              "should": [{"key": "published", "range": {"lt": "2024-01-15T00:00:00Z"}},
                                         {"is_null": {"key": "year"}}]}}),
            json!({"queries": [q, "boil an egg"], "k": 5,
                   "filter": {"must": [{"field": {"key": "year", "range": {"gte": 2003, "lt": 2008}}}],
                              "must_not": [{"field": {"key": "tags", "match": {"keywords": {"strings": ["tag1", "tag2"]}}}}],
                              "should": [{"field": {"key": "published", "datetime_range": {"lt": "2024-01-15T00:00:00Z"}}},
                                         {"is_null": {"key": "year"}}]}}),
        ),
        (
            json!({"queries": [q], "k": 4, "filter": {"must": [{"key": "year", "range": {"gt": 2002, "lte": 2007}}]}}),
            json!({"queries": [q], "k": 4,
                   "filter": {"must": [{"field": {"key": "year", "integer_range": {"gt": "2002", "lte": "2007"}}}]}}),
        ),
        (
            json!({"queries": [q], "k": 3, "filter": {"must": [{"key": "published", "range": {"gt": "soon"}}]}}),
            json!({"queries": [q], "k": 3, "filter": {"must": [{"field": {"key": "published", "datetime_range": {"gt": "soon"}}}]}}),
        ),
    ];
    let data = tempfile::tempdir().expect("tempdir");
    let file = data.path().join("requests.json");
    let grpc_requests: Vec<&Value> = cases.iter().map(|c| &c.1).collect();
    std::fs::write(&file, serde_json::to_vec(&grpc_requests).unwrap()).unwrap();
    let stubs = tempfile::tempdir().expect("tempdir");
    generate_stubs(stubs.path());
    let out = run_client(
        &server,
        stubs.path(),
        &["--mode", "search", "--requests", file.to_str().unwrap()],
    );
    let grpc = out["answers"].as_array().expect("answers");
    for (i, (body, _)) in cases.iter().enumerate().take(3) {
        let (h, g) = (http_search(&server, body), &grpc[i]);
        assert_same_hits(&h, g, &format!("filter case {i}"));
        assert_eq!(
            g["filter"]["admitted"]
                .as_str()
                .and_then(|s| s.parse::<u64>().ok()),
            h["filter"]["admitted"].as_u64(),
            "{g} {h}"
        );
        assert_eq!(g["filter"]["strategy"], h["filter"]["strategy"], "{g} {h}");
        assert!(h["filter"]["admitted"].as_u64().unwrap() > 0, "{h}");
    }
    // with_metadata: the same metadata, as a JSON string in gRPC.
    let h = http_search(&server, &cases[0].0);
    let meta: Value = serde_json::from_str(
        grpc[0]["results"][0]["hits"][0]["metadata_json"]
            .as_str()
            .expect("metadata_json"),
    )
    .unwrap();
    assert_eq!(meta, h["results"][0][0]["metadata"]);
    assert_eq!(meta["tenant"], "t3");
    // A bad filter: INVALID_ARGUMENT with the same message as HTTP's 400.
    let h = http_search(&server, &cases[3].0);
    assert_eq!(h["error"]["code"], "invalid_filter", "{h}");
    assert_eq!(grpc[3]["error"]["code"], "INVALID_ARGUMENT", "{}", grpc[3]);
    assert_eq!(grpc[3]["error"]["message"], h["error"]["message"]);
}

#[test]
fn http_and_grpc_give_the_same_answer_from_a_postgres_store() {
    let pg = common::postgres::Postgres::start();
    let tmp = tempfile::tempdir().expect("tempdir");
    let corpus = common::metadata_corpus(tmp.path());
    let url = pg.url("docs");
    let bundle = minilm_bundle().to_str().unwrap().to_string();
    let o = common::run_capot(
        &[
            "index",
            "build",
            "--doc-encoder",
            &bundle,
            "--corpus",
            corpus.to_str().unwrap(),
            "--store",
            &url,
        ],
        b"",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let server = Server::start(&[
        "--store",
        &url,
        "--encoder",
        &bundle,
        "--grpc-addr",
        "127.0.0.1:0",
    ]);
    let q = "how long do antibiotics take to work";
    let cases = [
        (
            json!({"queries": [q, "boil an egg"], "k": 5, "with_metadata": true,
                   "filter": {"must": [{"key": "tenant", "match": {"value": "t3"}}]}}),
            json!({"queries": [q, "boil an egg"], "k": 5, "with_metadata": true,
                   "filter": {"must": [{"field": {"key": "tenant", "match": {"keyword": "t3"}}}]}}),
        ),
        // `after`: a position every node has reached (the primary serves; no replicas here).
        (
            json!({"queries": [q], "k": 4, "after": 1}),
            json!({"queries": [q], "k": 4, "after": "1"}),
        ),
    ];
    let data = tempfile::tempdir().expect("tempdir");
    let file = data.path().join("requests.json");
    let grpc_requests: Vec<&Value> = cases.iter().map(|c| &c.1).collect();
    std::fs::write(&file, serde_json::to_vec(&grpc_requests).unwrap()).unwrap();
    let stubs = tempfile::tempdir().expect("tempdir");
    generate_stubs(stubs.path());
    let out = run_client(
        &server,
        stubs.path(),
        &["--mode", "search", "--requests", file.to_str().unwrap()],
    );
    let grpc = out["answers"].as_array().expect("answers");
    for (i, (body, _)) in cases.iter().enumerate() {
        let (h, g) = (http_search(&server, body), &grpc[i]);
        assert_same_hits(&h, g, &format!("store case {i}"));
    }
    // Under a filter the store reports its strategy and no admitted count, on either transport.
    let h = http_search(&server, &cases[0].0);
    assert!(h["filter"]["admitted"].is_null(), "{h}");
    assert_eq!(grpc[0]["filter"]["strategy"], h["filter"]["strategy"]);
    assert!(grpc[0]["filter"].get("admitted").is_none(), "{}", grpc[0]);
    let meta: Value = serde_json::from_str(
        grpc[0]["results"][0]["hits"][0]["metadata_json"]
            .as_str()
            .expect("metadata_json"),
    )
    .unwrap();
    assert_eq!(meta, h["results"][0][0]["metadata"]);
    assert_eq!(meta["tenant"], "t3");
}
