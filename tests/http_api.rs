//! The HTTP contract of `capot serve`, driven with real clients against the spawned binary on
//! loopback: curl for the JSON API, the official OpenAI Python client for `/v1/embeddings`,
//! promtool for `/metrics`. Every server binds 127.0.0.1 port 0; every wait is bounded.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------
// Client helpers
// ---------------------------------------------------------------------------------------------

/// One HTTP exchange as curl saw it.
#[derive(Debug)]
struct Reply {
    status: u16,
    /// Header names lower-cased, of the final response.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// curl's `time_total`, seconds.
    seconds: f64,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == &name.to_ascii_lowercase())
            .map(|(_, v)| v.as_str())
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "status {}: body is not JSON ({e}): {}",
                self.status,
                self.text()
            )
        })
    }
}

/// Runs curl: `method url`, extra headers, an optional body sent byte for byte (from stdin).
fn curl(method: &str, url: &str, headers: &[(&str, &str)], body: Option<&[u8]>) -> Reply {
    let dir = tempfile::tempdir().expect("tempdir");
    let head = dir.path().join("headers");
    let out = dir.path().join("body");
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "120", "-X", method])
        .arg("-D")
        .arg(&head)
        .arg("-o")
        .arg(&out)
        .args(["-w", "%{http_code} %{time_total}"])
        // No `Expect: 100-continue` round trip for larger bodies.
        .args(["-H", "Expect:"]);
    for (k, v) in headers {
        cmd.arg("-H").arg(format!("{k}: {v}"));
    }
    if body.is_some() {
        cmd.args(["--data-binary", "@-"]);
    }
    cmd.arg(url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .expect("curl is installed (apt-get install curl)");
    let mut stdin = child.stdin.take().expect("stdin");
    let data = body.map(<[u8]>::to_vec).unwrap_or_default();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let o = child.wait_with_output().expect("curl ran");
    let _ = writer.join();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "curl {method} {url} failed ({}): {} {stdout}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let mut parts = stdout.split_whitespace();
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .expect("status code from curl");
    let seconds: f64 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .expect("time from curl");
    let head = std::fs::read_to_string(&head).unwrap_or_default();
    // With interim responses there are several header blocks; keep the last.
    let last = head
        .split("\r\n\r\n")
        .filter(|b| !b.trim().is_empty())
        .last()
        .unwrap_or("")
        .to_string();
    let headers = last
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Reply {
        status,
        headers,
        body: std::fs::read(&out).unwrap_or_default(),
        seconds,
    }
}

const JSON: (&str, &str) = ("Content-Type", "application/json");

fn post(server: &Server, path: &str, body: &Value) -> Reply {
    curl(
        "POST",
        &format!("{}{path}", server.base),
        &[JSON],
        Some(body.to_string().as_bytes()),
    )
}

fn post_raw(server: &Server, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    curl(
        "POST",
        &format!("{}{path}", server.base),
        headers,
        Some(body),
    )
}

fn get(server: &Server, path: &str) -> Reply {
    curl("GET", &format!("{}{path}", server.base), &[], None)
}

/// Asserts the documented error shape: status, `error.code` (= `error.type`), and a message
/// that contains `says` (case-insensitive).
#[track_caller]
/// `n` clients POST `body` to `/search` at the same moment (a barrier), each on its own
/// connection; their replies in client order.
fn post_at_once(server: &Server, body: &str, n: usize) -> Vec<Reply> {
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let url = format!("{}/search", server.base);
            let body = body.to_string();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                curl("POST", &url, &[JSON], Some(body.as_bytes()))
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("client thread"))
        .collect()
}

fn assert_error(r: &Reply, status: u16, code: &str, says: &str) {
    assert_eq!(
        r.status,
        status,
        "expected {status} {code}, got: {}",
        r.text()
    );
    assert!(
        r.header("content-type")
            .is_some_and(|c| c.starts_with("application/json")),
        "error body must be JSON: {:?}",
        r.headers
    );
    let v = r.json();
    assert_eq!(v["error"]["code"], code, "{v}");
    assert_eq!(v["error"]["type"], code, "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.to_lowercase().contains(&says.to_lowercase()),
        "message {message:?} should mention {says:?}"
    );
}

/// A server on the default corpus with MiniLM, plus extra flags.
fn default_server(extra: &[&str]) -> Server {
    let index = default_index().to_str().expect("utf-8 path").to_string();
    let bundle = minilm_bundle().to_str().expect("utf-8 path").to_string();
    let data = tempfile::tempdir().expect("tempdir");
    let mut args = vec![
        "--index".to_string(),
        index,
        "--encoder".into(),
        bundle,
        "--data-dir".into(),
        data.path().to_str().expect("utf-8").into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut server = Server::start(&refs);
    // Removed with the server.
    server.data_dir = Some(data);
    server
}

/// The value of one sample in a Prometheus text exposition (labels matched as a subset).
fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (n, set) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            if n != name {
                return None;
            }
            let have: BTreeMap<&str, &str> = set
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k, v.trim_matches('"')))
                .collect();
            if labels.iter().all(|(k, v)| have.get(k) == Some(v)) {
                value.parse().ok()
            } else {
                None
            }
        })
}

fn qrels(dir: &Path) -> BTreeMap<String, BTreeMap<String, i64>> {
    let text = std::fs::read_to_string(dir.join("qrels/test.tsv")).expect("qrels");
    let mut out: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() == 3 {
            out.entry(f[0].to_string())
                .or_default()
                .insert(f[1].to_string(), f[2].trim().parse().expect("grade"));
        }
    }
    out
}

fn queries(dir: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(dir.join("queries.jsonl"))
        .expect("queries.jsonl")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("query line");
            (
                v["_id"].as_str().expect("_id").to_string(),
                v["text"].as_str().expect("text").to_string(),
            )
        })
        .collect()
}

/// `capot encode` vectors for `texts` (the reference the service must agree with).
fn encode_cli(bundle: &Path, texts: &[&str]) -> Vec<Vec<f32>> {
    let input: String = texts
        .iter()
        .map(|t| json!({ "text": t }).to_string() + "\n")
        .collect();
    let o = run_capot(
        &["encode", "--encoder", bundle.to_str().expect("utf-8")],
        input.as_bytes(),
    );
    assert!(
        o.status.success(),
        "capot encode: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    parse_embeddings(&o.stdout)
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "dimension");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

/// Checks one hit list: shape, ranks 1..n, scores descending, at most `k`.
#[track_caller]
fn assert_hits(list: &Value, k: usize) {
    let hits = list
        .as_array()
        .unwrap_or_else(|| panic!("hit list: {list}"));
    assert!(
        !hits.is_empty() && hits.len() <= k,
        "{} hits for k={k}",
        hits.len()
    );
    let mut last = f64::INFINITY;
    for (i, h) in hits.iter().enumerate() {
        let obj = h.as_object().expect("hit object");
        let keys: HashSet<&str> = obj.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            HashSet::from(["id", "score", "rank", "title", "text"]),
            "{h}"
        );
        assert_eq!(
            h["rank"].as_u64(),
            Some(i as u64 + 1),
            "ranks are 1..k: {h}"
        );
        assert!(h["id"].as_str().is_some_and(|s| !s.is_empty()));
        assert!(h["title"].is_string() && h["text"].as_str().is_some_and(|s| !s.is_empty()));
        let score = h["score"].as_f64().expect("score");
        assert!(
            score <= last + 1e-6,
            "scores descending: {score} after {last}"
        );
        assert!((-1.0001..=1.0001).contains(&score), "cosine score {score}");
        last = score;
    }
}

#[track_caller]
fn assert_search_envelope(v: &Value) {
    let keys: HashSet<&str> = v
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        HashSet::from(["results", "encoder", "timings_ms"]),
        "{v}"
    );
    assert_eq!(v["encoder"]["name"], "minilm");
    assert!(v["encoder"]["version"].is_string());
    for stage in ["tokenize", "queue", "encode", "search", "total"] {
        let t = v["timings_ms"][stage].as_f64().unwrap_or(-1.0);
        assert!(t >= 0.0, "timings_ms.{stage}: {v}");
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Happy paths
// ---------------------------------------------------------------------------------------------

#[test]
fn search_info_health_and_request_ids_with_curl() {
    let server = default_server(&[]);
    let corpus = root().join("data/default-corpus");
    let judged = qrels(&corpus);
    let all_queries = queries(&corpus);

    // Single form.
    let r = post(
        &server,
        "/search",
        &json!({ "query": "how long do antibiotics take to work", "k": 5 }),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r
        .header("content-type")
        .is_some_and(|c| c.starts_with("application/json")));
    let v = r.json();
    assert_search_envelope(&v);
    assert_hits(&v["results"], 5);
    assert_eq!(
        v["results"].as_array().map(Vec::len),
        Some(5),
        "k respected"
    );
    // A fresh id on every response.
    let id = r
        .header("x-request-id")
        .expect("x-request-id on the response");
    assert!(id.len() >= 8, "{id}");

    // Default k is 10; ef accepted; k above ef still gives k hits.
    let v = post(
        &server,
        "/search",
        &json!({ "query": "capital of australia" }),
    )
    .json();
    assert_eq!(v["results"].as_array().map(Vec::len), Some(10));
    let r = post(
        &server,
        "/search",
        &json!({ "query": "capital of australia", "k": 3, "ef": 200 }),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_hits(&r.json()["results"], 3);
    let v = post(
        &server,
        "/search",
        &json!({ "query": "capital of australia", "k": 100, "ef": 8 }),
    )
    .json();
    assert_hits(&v["results"], 100);
    assert!(
        v["results"].as_array().map_or(0, Vec::len) >= 90,
        "k > ef: {}",
        v["results"].as_array().map_or(0, Vec::len)
    );
    // `encoder` by name and by alias.
    for name in ["minilm", "default"] {
        let r = post(
            &server,
            "/search",
            &json!({ "query": "boil an egg", "k": 2, "encoder": name }),
        );
        assert_eq!(r.status, 200, "{name}: {}", r.text());
        assert_eq!(r.json()["encoder"]["name"], "minilm");
    }

    // Batch form: one list per query, in order; the top hit is judged relevant for most.
    let texts: Vec<&str> = all_queries.iter().map(|(_, t)| t.as_str()).collect();
    let r = post(&server, "/search", &json!({ "queries": texts, "k": 3 }));
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_search_envelope(&v);
    let lists = v["results"].as_array().expect("list of lists");
    assert_eq!(lists.len(), all_queries.len());
    let mut relevant_top = 0;
    for ((qid, text), list) in all_queries.iter().zip(lists) {
        assert_hits(list, 3);
        // Same answer as the single form.
        let single = post(&server, "/search", &json!({ "query": text, "k": 3 })).json();
        let ids = |l: &Value| -> Vec<String> {
            l.as_array()
                .into_iter()
                .flatten()
                .map(|h| h["id"].as_str().unwrap_or("").to_string())
                .collect()
        };
        assert_eq!(
            ids(list),
            ids(&single["results"]),
            "batch and single disagree for {qid}"
        );
        let top = list[0]["id"].as_str().unwrap_or("");
        if judged
            .get(qid)
            .and_then(|j| j.get(top))
            .is_some_and(|g| *g >= 1)
        {
            relevant_top += 1;
        }
    }
    println!(
        "top hit judged relevant for {relevant_top}/{} default-corpus queries",
        all_queries.len()
    );
    assert!(
        relevant_top * 10 >= all_queries.len() * 8,
        "top hit relevant for only {relevant_top}/{} queries",
        all_queries.len()
    );
    // A batch of one is still a list of lists.
    let v = post(
        &server,
        "/search",
        &json!({ "queries": ["symptoms of vitamin d deficiency"], "k": 1 }),
    )
    .json();
    assert_eq!(v["results"].as_array().map(Vec::len), Some(1));
    assert_hits(&v["results"][0], 1);

    // A given request id is propagated.
    let r = curl(
        "POST",
        &format!("{}/search", server.base),
        &[JSON, ("X-Request-Id", "test-req-42")],
        Some(br#"{"query":"egg","k":1}"#),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-request-id"), Some("test-req-42"));
    // Also on errors.
    let r = curl(
        "GET",
        &format!("{}/nope", server.base),
        &[("X-Request-Id", "err-7")],
        None,
    );
    assert_eq!(r.status, 404);
    assert_eq!(r.header("x-request-id"), Some("err-7"));

    // Health, readiness, info.
    let r = get(&server, "/health");
    assert_eq!((r.status, r.json()["status"].clone()), (200, json!("ok")));
    assert!(r.header("x-request-id").is_some());
    let r = get(&server, "/ready");
    assert_eq!(
        (r.status, r.json()["status"].clone()),
        (200, json!("ready"))
    );
    let r = get(&server, "/info");
    assert_eq!(r.status, 200);
    let info = r.json();
    assert_eq!(info["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(info["ready"], true);
    assert_eq!(info["index"]["documents"], 200);
    assert_eq!(info["index"]["dimension"], 384);
    assert_eq!(info["index"]["metric"], "cosine");
    assert!(info["index"]["hnsw"]["ef_search"]
        .as_u64()
        .is_some_and(|e| e > 0));
    assert_eq!(info["aliases"]["default"], "minilm");
    let enc = &info["encoders"][0];
    assert_eq!(enc["name"], "minilm");
    assert_eq!(enc["dimension"], 384);
    assert_eq!(enc["execution_provider"], "cpu");
    assert_eq!(info["execution_providers"], json!(["cpu"]));
    for key in [
        "max_k",
        "max_queries_per_request",
        "max_query_chars",
        "max_body_bytes",
        "max_in_flight",
        "queue_capacity",
        "request_timeout_ms",
    ] {
        assert!(
            info["limits"][key].as_u64().is_some_and(|n| n > 0),
            "limits.{key}: {info}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Bad input
// ---------------------------------------------------------------------------------------------

#[test]
fn bad_input_gets_documented_status_and_json_error() {
    let server = default_server(&["--max-body-bytes", "20000"]);
    let s = &server;
    let search = |body: &str| post_raw(s, "/search", &[JSON], body.as_bytes());
    // (route, reason) -> expected count of failures
    let mut expected: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    let mut check = |r: Reply, route: &'static str, status: u16, code: &'static str, says: &str| {
        assert_error(&r, status, code, says);
        *expected.entry((route, code)).or_default() += 1;
    };

    check(
        search(r#"{"query": ""}"#),
        "/search",
        422,
        "invalid_request",
        "must not be empty",
    );
    check(
        search(r#"{"query": " \t\n "}"#),
        "/search",
        422,
        "invalid_request",
        "must not be empty",
    );
    check(
        search(r#"{"queries": ["ok", "  "]}"#),
        "/search",
        422,
        "invalid_request",
        "queries[1]",
    );
    check(
        search(r#"{"queries": []}"#),
        "/search",
        422,
        "invalid_request",
        "at least one",
    );
    check(
        search(r#"{"query": "egg", "k": "ten"}"#),
        "/search",
        422,
        "invalid_request",
        "k:",
    );
    check(
        search(r#"{"query": 5}"#),
        "/search",
        422,
        "invalid_request",
        "query:",
    );
    check(
        search(r#"{"queries": "egg"}"#),
        "/search",
        422,
        "invalid_request",
        "queries:",
    );
    check(
        search(r#"{"query": "egg", "k": 0}"#),
        "/search",
        422,
        "invalid_request",
        "k must be in 1..=1000",
    );
    check(
        search(r#"{"query": "egg", "k": 1001}"#),
        "/search",
        422,
        "invalid_request",
        "k must be in 1..=1000",
    );
    check(
        search(r#"{"query": "egg", "k": -1}"#),
        "/search",
        422,
        "invalid_request",
        "k:",
    );
    check(
        search(r#"{"query": "egg", "k": 2.5}"#),
        "/search",
        422,
        "invalid_request",
        "k:",
    );
    check(
        search(r#"{"query": "egg", "ef": 0}"#),
        "/search",
        422,
        "invalid_request",
        "ef must be in",
    );
    check(
        search(r#"{"query": "egg", "ef": 10001}"#),
        "/search",
        422,
        "invalid_request",
        "ef must be in",
    );
    check(
        search(r#"{"query": "egg", "ef": -5}"#),
        "/search",
        422,
        "invalid_request",
        "ef:",
    );
    check(
        search(r#"{"query": "egg", "queries": ["egg"]}"#),
        "/search",
        422,
        "invalid_request",
        "not both",
    );
    check(
        search(r#"{"k": 3}"#),
        "/search",
        422,
        "invalid_request",
        "query",
    );
    check(
        search(r#"{"query": null}"#),
        "/search",
        422,
        "invalid_request",
        "query",
    );
    check(
        search(r#"{"query": "egg", "top_k": 3}"#),
        "/search",
        422,
        "invalid_request",
        "unknown field `top_k`",
    );
    // The body must be an object, not a bare value that serde could read as a struct.
    check(
        search(r#"["egg"]"#),
        "/search",
        422,
        "invalid_request",
        "object",
    );
    check(
        search(r#""egg""#),
        "/search",
        422,
        "invalid_request",
        "object",
    );
    check(
        search(r#"{"query": "egg", "encoder": "nope"}"#),
        "/search",
        404,
        "unknown_encoder",
        "\"nope\"",
    );
    // Limits: texts per request and characters per text.
    let many: Vec<String> = (0..257).map(|i| format!("q{i}")).collect();
    check(
        post(s, "/search", &json!({ "queries": many })),
        "/search",
        422,
        "invalid_request",
        "257 texts exceed the limit of 256",
    );
    check(
        post(s, "/search", &json!({ "query": "a".repeat(4097) })),
        "/search",
        422,
        "invalid_request",
        "4097 characters exceed the limit of 4096",
    );
    // A text at the limit is fine.
    let r = post(
        s,
        "/search",
        &json!({ "query": "word ".repeat(819) + "x", "k": 1 }),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // Body size, content type, encoding, syntax.
    let big = json!({ "query": "a".repeat(30_000) }).to_string();
    check(
        search(&big),
        "/search",
        413,
        "payload_too_large",
        "max_body_bytes",
    );
    check(
        post_raw(
            s,
            "/search",
            &[("Content-Type", "text/plain")],
            br#"{"query":"egg"}"#,
        ),
        "/search",
        415,
        "unsupported_media_type",
        "application/json",
    );
    check(
        post_raw(s, "/search", &[], br#"{"query":"egg"}"#),
        "/search",
        415,
        "unsupported_media_type",
        "application/json",
    );
    check(
        post_raw(s, "/search", &[JSON], b"{\"query\": \"caf\xe9 \xff\"}"),
        "/search",
        400,
        "invalid_json",
        "UTF-8",
    );
    check(
        search(r#"{"query": "egg""#),
        "/search",
        400,
        "invalid_json",
        "not valid JSON",
    );
    check(
        search(r#"{"query": 'egg'}"#),
        "/search",
        400,
        "invalid_json",
        "not valid JSON",
    );
    check(
        search(r#"{"query": "egg"} trailing"#),
        "/search",
        400,
        "invalid_json",
        "trailing",
    );
    check(search(""), "/search", 400, "invalid_json", "not valid JSON");
    // Methods and routes.
    let r = get(s, "/search");
    assert_eq!(
        r.header("allow"),
        Some("POST"),
        "405 names the allowed method"
    );
    check(r, "/search", 405, "method_not_allowed", "not allowed");
    check(
        post(s, "/health", &json!({})),
        "/health",
        405,
        "method_not_allowed",
        "not allowed",
    );
    check(
        get(s, "/v1/embeddings"),
        "/v1/embeddings",
        405,
        "method_not_allowed",
        "not allowed",
    );
    check(
        get(s, "/nope"),
        "unmatched",
        404,
        "not_found",
        "no such route",
    );
    check(
        get(s, "/search/extra"),
        "unmatched",
        404,
        "not_found",
        "no such route",
    );
    // Embeddings-specific shapes.
    check(
        post(s, "/v1/embeddings", &json!({ "input": [[101, 102]] })),
        "/v1/embeddings",
        422,
        "invalid_request",
        "token-id",
    );
    check(
        post(
            s,
            "/v1/embeddings",
            &json!({ "input": "egg", "encoding_format": "int8" }),
        ),
        "/v1/embeddings",
        422,
        "invalid_request",
        "encoding_format",
    );
    check(
        post(
            s,
            "/v1/embeddings",
            &json!({ "input": "egg", "dimensions": 128 }),
        ),
        "/v1/embeddings",
        422,
        "invalid_request",
        "dimensions",
    );
    check(
        post(
            s,
            "/v1/embeddings",
            &json!({ "input": "egg", "model": "gpt-4" }),
        ),
        "/v1/embeddings",
        404,
        "unknown_encoder",
        "gpt-4",
    );
    check(
        post(s, "/v1/embeddings", &json!({ "model": "minilm" })),
        "/v1/embeddings",
        422,
        "invalid_request",
        "input",
    );

    // The failure metric counts each of these under its route and reason, and nothing else.
    let text = get(s, "/metrics").text();
    for ((route, reason), n) in &expected {
        let got = metric(
            &text,
            "capot_request_failures_total",
            &[("route", route), ("reason", reason)],
        );
        assert_eq!(
            got,
            Some(*n as f64),
            "failures{{route={route},reason={reason}}}\n{text}"
        );
    }
    let total_failures: f64 = text
        .lines()
        // (The start-up polls of /ready that answered 503 are failures of their own.)
        .filter(|l| {
            l.starts_with("capot_request_failures_total{") && !l.contains("route=\"/ready\"")
        })
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        .sum();
    assert_eq!(
        total_failures,
        expected.values().sum::<u64>() as f64,
        "{text}"
    );
    // The service is unharmed.
    assert_eq!(
        post(s, "/search", &json!({ "query": "egg", "k": 1 })).status,
        200
    );
}

// ---------------------------------------------------------------------------------------------
// 3. OpenAI embeddings
// ---------------------------------------------------------------------------------------------

#[test]
fn openai_python_client_gets_the_same_vectors_as_capot_encode() {
    let server = default_server(&["--api-key", "sk-test-123"]);
    let texts = [
        "how long do antibiotics take to work",
        "boil an egg",
        "Ünïcödé café — 東京",
    ];
    let script = root().join("tests/python/openai_client.py");
    let o = Command::new(python())
        .arg(&script)
        .args([server.base.as_str(), "sk-test-123", "minilm", "default"])
        .args(texts)
        .output()
        .expect("run python");
    assert!(
        o.status.success(),
        "openai client script failed: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        server.stderr.lock().expect("log")
    );
    let out: Value = serde_json::from_slice(&o.stdout).expect("script prints JSON");
    let reference = encode_cli(minilm_bundle(), &texts);

    // The client's default asks for base64 on the wire; `float` asks for floats.
    assert_eq!(
        out["sent_encoding_formats"],
        json!(["base64", "base64", "float", "float", "base64", "base64"]),
        "{out}"
    );
    let to_vecs = |v: &Value| -> Vec<Vec<f32>> {
        v.as_array()
            .expect("vectors")
            .iter()
            .map(|row| {
                row.as_array()
                    .expect("row")
                    .iter()
                    .map(|x| x.as_f64().expect("f") as f32)
                    .collect()
            })
            .collect()
    };
    for (case, n) in [
        ("default_list", 3),
        ("default_string", 1),
        ("float_list", 3),
        ("alias_string", 1),
    ] {
        let c = &out[case];
        assert_eq!(c["object"], "list", "{case}");
        assert_eq!(c["model"], "minilm", "{case}");
        assert_eq!(c["indexes"], json!((0..n).collect::<Vec<_>>()), "{case}");
        let vecs = to_vecs(&c["vectors"]);
        assert_eq!(vecs.len(), n, "{case}");
        for (i, v) in vecs.iter().enumerate() {
            assert_eq!(v.len(), 384, "{case}[{i}]");
            assert!((norm(v) - 1.0).abs() < 1e-4, "{case}[{i}] norm {}", norm(v));
            let d = max_abs_diff(v, &reference[i]);
            assert!(d < 1e-5, "{case}[{i}]: max |diff| {d} against capot encode");
        }
        let usage = &c["usage"];
        assert!(
            usage["prompt_tokens"].as_u64().is_some_and(|t| t > 0),
            "{case}: {usage}"
        );
        assert_eq!(usage["prompt_tokens"], usage["total_tokens"]);
    }
    // A list uses more tokens than its first text alone.
    assert!(
        out["default_list"]["usage"]["prompt_tokens"].as_u64()
            > out["default_string"]["usage"]["prompt_tokens"].as_u64()
    );

    // Errors surface as the client's typed exceptions with our status and message.
    let e = &out["token_ids"];
    assert_eq!(
        (e["exception"].as_str(), e["status"].as_u64()),
        (Some("UnprocessableEntityError"), Some(422)),
        "{e}"
    );
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("token-id")),
        "{e}"
    );
    assert_eq!(e["body"]["code"], "invalid_request");
    let e = &out["unknown_model"];
    assert_eq!(
        (e["exception"].as_str(), e["status"].as_u64()),
        (Some("NotFoundError"), Some(404)),
        "{e}"
    );
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("text-embedding-3-small")),
        "{e}"
    );
    let e = &out["wrong_key"];
    assert_eq!(
        (e["exception"].as_str(), e["status"].as_u64()),
        (Some("AuthenticationError"), Some(401)),
        "{e}"
    );
}

// ---------------------------------------------------------------------------------------------
// 4. Metrics
// ---------------------------------------------------------------------------------------------

fn promtool() -> PathBuf {
    let candidates = [
        PathBuf::from("/usr/bin/promtool"),
        PathBuf::from("/usr/local/bin/promtool"),
    ];
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("promtool"))
        .chain(candidates)
        .find(|p| p.is_file());
    found.unwrap_or_else(|| {
        panic!(
            "promtool is missing: `apt-get install --no-install-recommends prometheus` \
             (Debian's prometheus package ships /usr/bin/promtool; .ci/run installs it)"
        )
    })
}

#[test]
fn metrics_pass_promtool_and_have_the_expected_families() {
    let promtool = promtool();
    let server = default_server(&[]);
    for q in ["egg", "capital of australia", "vitamin d"] {
        assert_eq!(post(&server, "/search", &json!({ "query": q })).status, 200);
    }
    assert_eq!(
        post(
            &server,
            "/search",
            &json!({ "queries": ["a", "b", "c", "d"] })
        )
        .status,
        200
    );
    assert_eq!(
        post(&server, "/v1/embeddings", &json!({ "input": "egg" })).status,
        200
    );
    assert_eq!(
        post(&server, "/search", &json!({ "query": "" })).status,
        422
    );
    assert_eq!(
        post(
            &server,
            "/search",
            &json!({ "query": "x", "encoder": "nope" })
        )
        .status,
        404
    );

    let r = get(&server, "/metrics");
    assert_eq!(r.status, 200);
    assert!(
        r.header("content-type")
            .is_some_and(|c| c.starts_with("text/plain")),
        "{:?}",
        r.headers
    );
    let text = r.text();

    let mut child = Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write metrics");
    let o = child.wait_with_output().expect("promtool ran");
    assert!(
        o.status.success(),
        "promtool check metrics failed:\n{}{}\n--- metrics ---\n{text}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );

    let m = |name: &str, labels: &[(&str, &str)]| metric(&text, name, labels);
    assert_eq!(
        m(
            "capot_http_requests_total",
            &[("route", "/search"), ("status", "200")]
        ),
        Some(4.0),
        "{text}"
    );
    assert_eq!(
        m(
            "capot_http_requests_total",
            &[("route", "/v1/embeddings"), ("status", "200")]
        ),
        Some(1.0)
    );
    assert_eq!(
        m(
            "capot_http_requests_total",
            &[("route", "/search"), ("status", "422")]
        ),
        Some(1.0)
    );
    assert_eq!(
        m(
            "capot_http_requests_total",
            &[("route", "/search"), ("status", "404")]
        ),
        Some(1.0)
    );
    assert_eq!(
        m(
            "capot_request_failures_total",
            &[("route", "/search"), ("reason", "invalid_request")]
        ),
        Some(1.0)
    );
    assert_eq!(
        m(
            "capot_request_failures_total",
            &[("route", "/search"), ("reason", "unknown_encoder")]
        ),
        Some(1.0)
    );
    for stage in ["tokenize", "queue", "encode", "search", "total"] {
        let count = m(
            "capot_request_stage_duration_seconds_count",
            &[("stage", stage), ("encoder", "minilm")],
        );
        // Searches record every stage; the embedding request all but `search`.
        let want = if stage == "search" { 4.0 } else { 5.0 };
        assert_eq!(count, Some(want), "stage {stage}\n{text}");
        assert!(m(
            "capot_request_stage_duration_seconds_bucket",
            &[("stage", stage), ("encoder", "minilm"), ("le", "+Inf")]
        )
        .is_some());
    }
    assert!(
        m("capot_encode_queue_depth", &[("encoder", "minilm")]).is_some(),
        "queue depth gauge"
    );
    let batches = m("capot_encode_batch_size_count", &[("encoder", "minilm")]).unwrap_or(0.0);
    assert!(batches >= 1.0, "batch size histogram");
    assert!(m("capot_encode_batch_size_sum", &[("encoder", "minilm")]).unwrap_or(0.0) >= 8.0);
    assert_eq!(m("capot_index_documents", &[]), Some(200.0));
    // No filtered scan of the sign codes yet: nothing judged, no more candidates.
    assert!(
        m("capot_index_sign_code_margin", &[]).is_some_and(f64::is_nan),
        "{text}"
    );
    assert_eq!(m("capot_index_sign_code_candidates_factor", &[]), Some(1.0));
    assert_eq!(
        m(
            "capot_encoder_info",
            &[("encoder", "minilm"), ("provider", "cpu"), ("version", "1")]
        ),
        Some(1.0)
    );
    assert_eq!(
        m(
            "capot_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        Some(1.0)
    );
}

// ---------------------------------------------------------------------------------------------
// 5. API key
// ---------------------------------------------------------------------------------------------

fn check_api_key(server: &Server, key: &str) {
    let bearer = format!("Bearer {key}");
    let body = br#"{"query":"egg","k":1}"#;
    let emb = br#"{"input":"egg"}"#;
    for (method, path, payload) in [
        ("POST", "/search", Some(&body[..])),
        ("POST", "/v1/embeddings", Some(&emb[..])),
        ("GET", "/info", None),
    ] {
        let url = format!("{}{path}", server.base);
        for headers in [
            vec![JSON],
            vec![JSON, ("Authorization", "Bearer wrong")],
            vec![JSON, ("Authorization", key)],
            vec![JSON, ("Authorization", "Basic c2VjcmV0")],
        ] {
            let r = curl(method, &url, &headers, payload);
            assert_error(&r, 401, "unauthorized", "API key");
            assert_eq!(r.header("www-authenticate"), Some("Bearer"), "{path}");
        }
        let r = curl(method, &url, &[JSON, ("Authorization", &bearer)], payload);
        assert_eq!(r.status, 200, "{path} with the key: {}", r.text());
        // The scheme is case-insensitive (RFC 9110 §11.1).
        let lower = format!("bearer {key}");
        let r = curl(method, &url, &[JSON, ("Authorization", &lower)], payload);
        assert_eq!(r.status, 200, "{path} with `bearer`: {}", r.text());
    }
    for path in ["/health", "/ready", "/metrics"] {
        assert_eq!(get(server, path).status, 200, "{path} stays open");
    }
    let text = get(server, "/metrics").text();
    assert!(
        metric(
            &text,
            "capot_request_failures_total",
            &[("route", "/search"), ("reason", "unauthorized")]
        )
        .is_some_and(|n| n >= 4.0),
        "{text}"
    );
}

#[test]
fn api_key_from_flag_file_and_environment() {
    let key = "k3y-from-flag";
    check_api_key(&default_server(&["--api-key", key]), key);

    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("key");
    std::fs::write(&file, "k3y-from-file\n").expect("write key");
    check_api_key(
        &default_server(&["--api-key-file", file.to_str().expect("utf-8")]),
        "k3y-from-file",
    );

    let index = default_index().to_str().expect("utf-8").to_string();
    let bundle = minilm_bundle().to_str().expect("utf-8").to_string();
    let data = dir.path().join("data");
    let server = Server::start_with(
        &[
            "--index",
            &index,
            "--encoder",
            &bundle,
            "--data-dir",
            data.to_str().expect("utf-8"),
        ],
        &[("CAPOT_API_KEY", "k3y-from-env")],
        true,
    );
    check_api_key(&server, "k3y-from-env");
    // The key never appears in the log.
    assert!(!server.stderr.lock().expect("log").contains("k3y-from-env"));
}

// ---------------------------------------------------------------------------------------------
// 6. Overload
// ---------------------------------------------------------------------------------------------

/// A worker pool: two inference sessions of one thread each behind one queue serve concurrent
/// searches with the same results as one session; /info says how many; a bad count is refused.
#[test]
fn encoder_worker_pools_serve_the_same_results() {
    let single = default_server(&[]);
    let pooled = default_server(&["--encoder-workers", "2", "--threads", "1"]);
    let info = get(&pooled, "/info").json();
    assert_eq!(info["encoders"][0]["workers"], 2, "{info}");
    assert_eq!(get(&single, "/info").json()["encoders"][0]["workers"], 1);
    let queries = [
        "how long do antibiotics take to work",
        "symptoms of vitamin d deficiency",
        "what is the capital of australia",
        "how long to boil an egg",
    ];
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let url = format!("{}/search", pooled.base);
            let body = json!({ "query": queries[i % 4], "k": 3, "repair": "off" }).to_string();
            std::thread::spawn(move || curl("POST", &url, &[JSON], Some(body.as_bytes())))
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        let r = h.join().unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        let want = post(
            &single,
            "/search",
            &json!({ "query": queries[i % 4], "k": 3, "repair": "off" }),
        );
        assert_eq!(common::hit_ids(&r.json()), common::hit_ids(&want.json()));
    }
    let index = default_index().to_str().unwrap().to_string();
    let bundle = minilm_bundle().to_str().unwrap().to_string();
    for bad in ["0", "many"] {
        let o = run_capot(
            &[
                "serve",
                "--index",
                &index,
                "--encoder",
                &bundle,
                "--encoder-workers",
                bad,
            ],
            b"",
        );
        assert_eq!(o.status.code(), Some(1), "--encoder-workers {bad}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("--encoder-workers"), "{err}");
    }
}

/// `capot encoder quantize` makes an int8 copy of MiniLM that the float32 index accepts; served
/// beside the float32 encoder (pooled), it finds nearly the same documents for every default
/// query.
#[test]
fn int8_encoder_serves_the_float32_index_with_nearly_the_same_results() {
    let dir = tempfile::tempdir().unwrap();
    let q = dir.path().join("minilm-int8");
    let o = run_capot(
        &[
            "encoder",
            "quantize",
            minilm_bundle().to_str().unwrap(),
            "--out",
            q.to_str().unwrap(),
        ],
        b"",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("int8") && err.contains("cosine"), "{err}");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(q.join("encoder.json")).unwrap()).unwrap();
    let source: Value = serde_json::from_str(
        &std::fs::read_to_string(minilm_bundle().join("encoder.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["aligned_to"], source["aligned_to"]);
    assert_eq!(manifest["provenance"]["quantization"]["precision"], "int8");
    let min_cos = manifest["provenance"]["quantization"]["probe_cosine_min"]
        .as_f64()
        .unwrap();
    assert!(min_cos > 0.97, "{manifest}");

    let server = default_server(&[
        "--encoder",
        q.to_str().unwrap(),
        "--encoder-workers",
        "2",
        "--threads",
        "1",
    ]);
    let info = get(&server, "/info").json();
    let names: Vec<&str> = info["encoders"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(names, ["minilm", "minilm-int8"], "{info}");
    let texts: Vec<String> = queries(&root().join("data/default-corpus"))
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    let lists = |encoder: &str| -> Vec<Vec<String>> {
        let r = post(
            &server,
            "/search",
            &json!({ "queries": texts, "k": 10, "encoder": encoder, "repair": "off" }),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                l.as_array()
                    .unwrap()
                    .iter()
                    .map(|h| h["id"].as_str().unwrap().to_string())
                    .collect()
            })
            .collect()
    };
    let (f32_lists, int8_lists) = (lists("minilm"), lists("minilm-int8"));
    let same_top = f32_lists
        .iter()
        .zip(&int8_lists)
        .filter(|(a, b)| a.first() == b.first())
        .count();
    let overlap: usize = f32_lists
        .iter()
        .zip(&int8_lists)
        .map(|(a, b)| a.iter().filter(|id| b.contains(id)).count())
        .sum();
    let overlap = overlap as f64 / (10 * texts.len()) as f64;
    eprintln!(
        "int8 vs float32 on {} queries: same top hit {same_top}, top-10 overlap {overlap:.3}",
        texts.len()
    );
    assert!(
        same_top * 10 >= texts.len() * 9,
        "{same_top}/{}",
        texts.len()
    );
    assert!(overlap >= 0.85, "{overlap}");
}

/// Requests whose client is gone before their turn (here: the request timeout fired while they
/// waited in the queue) are dropped before inference and counted, and nothing else suffers.
#[test]
fn queued_requests_of_clients_that_left_are_not_encoded() {
    let server = default_server(&["--request-timeout-ms", "300", "--max-batch", "64"]);
    // Each request fills one inference (64 texts of ~40 tokens: ~0.1-0.2 s on 2 cores). Enough of
    // them at once that the last wait in the queue well past their 300 ms on any machine: the
    // number comes from this machine's own time for one inference.
    let queries: Vec<String> = (0..64)
        .map(|i| {
            format!(
                "question {i}: how long do antibiotics such as amoxicillin take to work for a \
                 sore throat, an ear infection or a sinus infection, and when should you see a doctor"
            )
        })
        .collect();
    let body = json!({ "queries": queries, "k": 1, "repair": "off" }).to_string();
    // A search that succeeds: on a starved machine even a one-text inference may outlast
    // 300 ms, so it is asked again until it does, each refusal a timeout.
    let until_answered = |request: &Value| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let r = post(&server, "/search", request);
            if r.status == 200 {
                break r;
            }
            assert_error(&r, 503, "timeout", "");
            assert!(
                std::time::Instant::now() < deadline,
                "no search succeeded within 60 s: {}",
                r.text()
            );
        }
    };
    let one = post(
        &server,
        "/search",
        &serde_json::from_str::<Value>(&body).unwrap(),
    );
    let encode_ms = one.json()["timings_ms"]["encode"].as_f64().unwrap_or(300.0);
    let n = ((4.0 * 300.0 / encode_ms.max(1.0)).ceil() as usize + 2).clamp(16, 200);
    // What was encoded and dropped unencoded, once the queue has drained (waited for, not slept
    // on: on a busy machine one batch here has taken 1.3 s).
    let read = || {
        let text = get(&server, "/metrics").text();
        let value = |name: &str| metric(&text, name, &[("encoder", "minilm")]).unwrap_or(0.0);
        let counts = (
            value("capot_encode_batch_size_sum"),
            value("capot_encode_abandoned_total"),
            value("capot_encode_queue_depth"),
        );
        (text, counts)
    };
    let drained = || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut before = read().1;
        loop {
            std::thread::sleep(std::time::Duration::from_millis(500));
            let (text, now) = read();
            if (now == before && now.2 == 0.0) || std::time::Instant::now() > deadline {
                break (text, now);
            }
            before = now;
        }
    };
    // The first request's batch, counted once it is done: before it answered, or after it timed
    // out on a busy machine.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let (encoded_before, abandoned_before) = loop {
        let (_, (encoded, abandoned, depth)) = read();
        if (encoded + 64.0 * abandoned >= 64.0 && depth == 0.0)
            || std::time::Instant::now() > deadline
        {
            break (encoded, abandoned);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let replies = post_at_once(&server, &body, n);
    let timed_out = replies.iter().filter(|r| r.status == 503).count();
    for r in replies.iter().filter(|r| r.status != 200) {
        assert_error(r, 503, "timeout", "");
    }
    let (text, (encoded, abandoned, _)) = drained();
    let (encoded, abandoned) = (encoded - encoded_before, abandoned - abandoned_before);
    println!(
        "{timed_out} of {n} requests timed out; {abandoned} dropped unencoded; {encoded} texts encoded"
    );
    assert!(
        timed_out >= 2,
        "{n} requests of {encode_ms:.0} ms inference each must outlast a 300 ms budget"
    );
    // A request whose client left while it waited is not encoded: it is dropped when its turn
    // comes (counted as abandoned) or, on a starved machine, never reaches the queue at all.
    assert!(
        encoded < (64 * n) as f64,
        "every request was encoded: {text}"
    );
    assert!(encoded + 64.0 * abandoned <= (64 * n) as f64, "{text}");
    assert!(abandoned <= timed_out as f64);
    // The service still answers.
    until_answered(&json!({ "query": "boil an egg", "k": 1 }));
}

#[test]
fn overload_is_refused_at_once_with_429_and_the_service_recovers() {
    let server = default_server(&[
        "--max-in-flight",
        "2",
        "--queue-capacity",
        "1",
        "--max-wait-ms",
        "0",
    ]);
    // Each request is a batch of medium-length queries, so requests overlap.
    let queries: Vec<String> = (0..24)
        .map(|i| {
            format!(
                "query number {i} about how long antibiotics take to work and when to see a doctor"
            )
        })
        .collect();
    let body = json!({ "queries": queries, "k": 5 }).to_string();
    let n = 50;
    let replies = post_at_once(&server, &body, n);
    let ok = replies.iter().filter(|r| r.status == 200).count();
    let refused: Vec<&Reply> = replies.iter().filter(|r| r.status == 429).collect();
    let other: Vec<String> = replies
        .iter()
        .filter(|r| r.status != 200 && r.status != 429)
        .map(|r| format!("{} {}", r.status, r.text()))
        .collect();
    let slowest_429 = refused.iter().map(|r| r.seconds).fold(0.0, f64::max);
    let slowest_200 = replies
        .iter()
        .filter(|r| r.status == 200)
        .map(|r| r.seconds)
        .fold(0.0, f64::max);
    println!("overload: {ok} × 200, {} × 429 (slowest 429 {slowest_429:.3} s, slowest 200 {slowest_200:.3} s)", refused.len());
    assert!(other.is_empty(), "only 200 and 429 expected: {other:?}");
    assert!(ok >= 1, "some requests are served");
    assert!(
        !refused.is_empty(),
        "with 2 in flight and a queue of 1, 50 concurrent requests must see 429"
    );
    for r in &refused {
        assert_error(r, 429, "overloaded", "");
        assert_eq!(r.header("retry-after"), Some("1"));
        // Refused at once, not parked until the request timeout (10 s).
        assert!(r.seconds < 2.0, "a 429 took {:.3} s", r.seconds);
    }
    for r in replies.iter().filter(|r| r.status == 200) {
        assert_eq!(r.json()["results"].as_array().map(Vec::len), Some(24));
    }
    // Afterwards the service is healthy and serves normally.
    assert_eq!(get(&server, "/health").status, 200);
    assert_eq!(get(&server, "/ready").status, 200);
    let r = post(
        &server,
        "/search",
        &json!({ "query": "boil an egg", "k": 3 }),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let text = get(&server, "/metrics").text();
    assert_eq!(
        metric(
            &text,
            "capot_request_failures_total",
            &[("route", "/search"), ("reason", "overloaded")]
        ),
        Some(refused.len() as f64)
    );
    assert_eq!(
        metric(&text, "capot_encode_queue_depth", &[("encoder", "minilm")]),
        Some(0.0)
    );
}

// ---------------------------------------------------------------------------------------------
// 7. Readiness and start-up failures
// ---------------------------------------------------------------------------------------------

#[test]
fn ready_is_503_until_loaded_and_a_bad_index_stops_the_service() {
    let index = default_index().to_str().expect("utf-8").to_string();
    let bundle = minilm_bundle().to_str().expect("utf-8").to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let server = Server::start_with(
        &[
            "--index",
            &index,
            "--encoder",
            &bundle,
            "--data-dir",
            data.to_str().expect("utf-8"),
        ],
        &[],
        false,
    );
    // Poll at once: /health answers at the first try, /ready is 503 (JSON) until it is 200.
    let (status, body) = http_get(server.addr, "/health").expect("health");
    assert_eq!(status, 200, "{body}");
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut not_ready = 0;
    let mut search_while_loading = None;
    loop {
        let (status, body) = http_get(server.addr, "/ready").expect("ready");
        if status == 200 {
            break;
        }
        assert_eq!(status, 503, "before ready: {body}");
        let v: Value = serde_json::from_str(&body).expect("503 body is JSON");
        assert_eq!(v["error"]["code"], "not_ready", "{v}");
        not_ready += 1;
        if search_while_loading.is_none() {
            search_while_loading = Some(post(&server, "/search", &json!({ "query": "egg" })));
        }
        assert!(
            Instant::now() < deadline,
            "never ready: {}",
            server.stderr.lock().expect("log")
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    println!("/ready answered 503 {not_ready} time(s) before 200");
    // Those 503s are the service saying it is loading: no error in the log for them.
    let log = server.stderr.lock().expect("log").clone();
    assert!(
        !log.lines().any(|l| l.contains("ERROR")),
        "503s while loading were logged as errors:\n{log}"
    );
    // Loading the index and MiniLM takes far longer than the first poll.
    assert!(
        not_ready >= 1,
        "the first /ready poll came after loading finished"
    );
    if let Some(r) = search_while_loading {
        // Either still loading (503) or loaded in between (200); never anything else.
        if r.status != 200 {
            assert_error(&r, 503, "not_ready", "loading");
            assert_eq!(r.header("retry-after"), Some("1"));
        }
    }
    assert_eq!(
        post(&server, "/search", &json!({ "query": "egg", "k": 1 })).status,
        200
    );

    // A bad index path: non-zero exit, one `error:` line naming the path and the reason.
    let missing = dir.path().join("no-such-index");
    let started = Instant::now();
    let o = run_capot(
        &[
            "serve",
            "--index",
            missing.to_str().expect("utf-8"),
            "--encoder",
            &bundle,
            "--addr",
            "127.0.0.1:0",
            "--data-dir",
            data.to_str().expect("utf-8"),
        ],
        b"",
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(1), "exit status");
    let stderr = String::from_utf8_lossy(&o.stderr);
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "one error line: {stderr}");
    assert!(
        errors[0].contains("no-such-index") && errors[0].contains("does not exist"),
        "{stderr}"
    );

    // A bundle that is not an encoder: same.
    let o = run_capot(
        &[
            "serve",
            "--index",
            &index,
            "--encoder",
            dir.path().to_str().expect("utf-8"),
            "--addr",
            "127.0.0.1:0",
            "--data-dir",
            data.to_str().expect("utf-8"),
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&o.stderr);
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "one error line: {stderr}");
}

// ---------------------------------------------------------------------------------------------
// 8. Graceful shutdown
// ---------------------------------------------------------------------------------------------

#[test]
fn sigterm_drains_in_flight_requests_then_exits_zero() {
    let mut server = default_server(&["--request-timeout-ms", "120000"]);
    let long = "the quick brown fox jumps over the lazy dog while the committee reviews the \
                annual budget for the municipal water treatment plant and its pipes "
        .repeat(2);
    // Seconds of work per request on 2 cores: in flight for sure when the signal comes, and
    // well inside the 30 s the service waits for in-flight requests even on a busy machine.
    let queries: Vec<String> = (0..96).map(|i| format!("{i} {long}")).collect();
    let body = json!({ "queries": queries, "k": 5 }).to_string();
    let clients = 2;
    let handles: Vec<_> = (0..clients)
        .map(|_| {
            let url = format!("{}/search", server.base);
            let body = body.clone();
            std::thread::spawn(move || curl("POST", &url, &[JSON], Some(body.as_bytes())))
        })
        .collect();
    // Wait until all are in flight (the gauge also counts the /metrics request itself).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, text) = http_get(server.addr, "/metrics").expect("metrics");
        if metric(&text, "capot_requests_in_flight", &[]).unwrap_or(0.0) >= (clients + 1) as f64 {
            break;
        }
        assert!(
            Instant::now() < deadline && handles.iter().any(|h| !h.is_finished()),
            "requests never all in flight:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // The gauge counts a request from the HTTP layer on; it is admitted (past the readiness
    // check that refuses requests arriving during the drain) a moment later: wait for that too,
    // so the signal finds them admitted, not arriving.
    loop {
        let (_, text) = http_get(server.addr, "/metrics").expect("metrics");
        if metric(&text, "capot_requests_admitted", &[]).unwrap_or(0.0) >= clients as f64 {
            break;
        }
        assert!(
            Instant::now() < deadline && handles.iter().any(|h| !h.is_finished()),
            "requests never all admitted:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status();
    let unfinished_at_signal = handles.iter().filter(|h| !h.is_finished()).count();
    assert!(
        unfinished_at_signal >= 1,
        "the requests finished before SIGTERM; make them slower"
    );
    // New connections are refused once the signal is handled, while the old ones finish.
    let deadline = Instant::now() + Duration::from_secs(10);
    let refused_while_draining = loop {
        match std::net::TcpStream::connect_timeout(&server.addr, Duration::from_secs(1)) {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                break handles.iter().any(|h| !h.is_finished());
            }
            _ => {}
        }
        assert!(
            Instant::now() < deadline,
            "still accepting connections 10 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let replies: Vec<Reply> = handles
        .into_iter()
        .map(|h| h.join().expect("client"))
        .collect();
    let status = server.terminate();
    println!(
        "shutdown: {} in-flight replies {:?}, refused while draining: {refused_while_draining}",
        replies.len(),
        replies
            .iter()
            .map(|r| (r.status, r.seconds))
            .collect::<Vec<_>>()
    );
    for r in &replies {
        assert_eq!(r.status, 200, "in-flight request finished: {}", r.text());
        let v = r.json();
        assert_eq!(v["results"].as_array().map(Vec::len), Some(96));
    }
    assert_eq!(
        status.code(),
        Some(0),
        "exit status; log:\n{}",
        server.stderr.lock().expect("log")
    );
    assert!(std::net::TcpStream::connect_timeout(&server.addr, Duration::from_secs(1)).is_err());
}

// ---------------------------------------------------------------------------------------------
// 9. Configuration
// ---------------------------------------------------------------------------------------------

#[test]
fn config_file_with_env_and_flags_on_top() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("capot.toml");
    std::fs::write(dir.path().join("key.txt"), "from-config-file\n").expect("key");
    std::fs::write(
        &config,
        format!(
            "index = {index:?}\nencoders = [{bundle:?}]\ndata_dir = \"state\"\n\
             api_key_file = \"key.txt\"\nmax_body_bytes = 5000\nmax_in_flight = 7\n\
             queue_capacity = 5\nrequest_timeout_ms = 4321\ndefault_ef = 33\nmax_batch = 16\n",
            index = default_index(),
            bundle = minilm_bundle(),
        ),
    )
    .expect("config");
    let cfg = config.to_str().expect("utf-8");
    let server = Server::start_with(
        &["--config", cfg, "--queue-capacity", "11"],
        &[
            ("CAPOT_MAX_IN_FLIGHT", "9"),
            ("CAPOT_MAX_BODY_BYTES", "6000"),
        ],
        false,
    );
    server.wait_ready(Duration::from_secs(120));
    // The key file (relative to the config file) is in force.
    let r = get(&server, "/info");
    assert_error(&r, 401, "unauthorized", "API key");
    let r = curl(
        "GET",
        &format!("{}/info", server.base),
        &[("Authorization", "Bearer from-config-file")],
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let info = r.json();
    let limits = &info["limits"];
    assert_eq!(limits["queue_capacity"], 11, "flag over file: {limits}");
    assert_eq!(limits["max_in_flight"], 9, "env over file: {limits}");
    assert_eq!(limits["max_body_bytes"], 6000, "env over file: {limits}");
    assert_eq!(limits["request_timeout_ms"], 4321, "file: {limits}");
    assert_eq!(limits["default_ef"], 33, "file: {limits}");
    assert_eq!(info["index"]["hnsw"]["ef_search"], 33);
    assert_eq!(info["index"]["documents"], 200, "index from the file");
    assert_eq!(
        info["encoders"][0]["name"], "minilm",
        "encoder from the file"
    );
    assert!(
        dir.path().join("state").is_dir(),
        "data_dir relative to the config file"
    );
    // The body limit in force is the environment's.
    let body = json!({ "query": "x".repeat(5500), "k": 1 }).to_string();
    let auth = ("Authorization", "Bearer from-config-file");
    let r = post_raw(&server, "/search", &[JSON, auth], body.as_bytes());
    assert_error(&r, 422, "invalid_request", "characters exceed");
    let body = json!({ "query": "x".repeat(6500), "k": 1 }).to_string();
    let r = post_raw(&server, "/search", &[JSON, auth], body.as_bytes());
    assert_error(&r, 413, "payload_too_large", "max_body_bytes");
    drop(server);

    // A flag wins over the environment.
    let server = Server::start_with(
        &["--config", cfg, "--max-in-flight", "3"],
        &[("CAPOT_MAX_IN_FLIGHT", "9"), ("CAPOT_API_KEY", "env-key")],
        true,
    );
    let r = curl(
        "GET",
        &format!("{}/info", server.base),
        &[("Authorization", "Bearer env-key")],
        None,
    );
    assert_eq!(
        r.status,
        200,
        "CAPOT_API_KEY wins over the file's api_key_file: {}",
        r.text()
    );
    assert_eq!(r.json()["limits"]["max_in_flight"], 3);
    drop(server);

    // An unknown key is a clear error, before anything starts.
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        format!("index = {:?}\nmax_inflight = 3\n", default_index()),
    )
    .expect("bad config");
    let o = run_capot(
        &[
            "serve",
            "--config",
            bad.to_str().expect("utf-8"),
            "--addr",
            "127.0.0.1:0",
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("listening"), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.starts_with("error: ")
            && stderr.contains("bad.toml")
            && stderr.contains("unknown field `max_inflight`"),
        "{stderr}"
    );
    assert!(stderr.contains("line 2"), "says where: {stderr}");
    // A value of the wrong type too.
    std::fs::write(&bad, "max_in_flight = \"many\"\n").expect("bad config");
    let o = run_capot(
        &[
            "serve",
            "--config",
            bad.to_str().expect("utf-8"),
            "--addr",
            "127.0.0.1:0",
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains("invalid type") && stderr.contains("line 1"),
        "{stderr}"
    );
}

// ---------------------------------------------------------------------------------------------
// 10. Quality gate on dl19-sample
// ---------------------------------------------------------------------------------------------

fn report_ndcg(dir: &Path) -> f64 {
    let text = std::fs::read_to_string(dir.join("report.json")).expect("report.json");
    let v: Value = serde_json::from_str(&text).expect("report JSON");
    let clean = v["encoders"][0]["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .find(|c| c["condition"] == "clean")
        .expect("clean row");
    clean["metrics"]["ndcg@10"].as_f64().expect("ndcg@10")
}

#[test]
fn dl19_hnsw_recall_and_ndcg_match_exact_search() {
    let data = shared().join("data/dl19-sample");
    assert!(
        data.join("corpus.jsonl").is_file(),
        "{} is missing",
        data.display()
    );
    let bundle = minilm_bundle();
    // Built once and shared with the other test binaries (see common::cached_index).
    let index_dir = cached_index(&data);
    let work = tempfile::tempdir().expect("tempdir");

    // Recall@10 of HNSW at the default ef against exact search, in process and through /search.
    let index = capot::index::Index::load(&index_dir).expect("load index");
    assert_eq!(index.len(), 5000);
    let qs = queries(&data);
    let texts: Vec<&str> = qs.iter().map(|(_, t)| t.as_str()).collect();
    let vectors = encode_cli(bundle, &texts);
    let ef = index.default_ef();
    let exact: Vec<Vec<usize>> = vectors
        .iter()
        .map(|v| {
            index
                .search_exact(v, 10)
                .expect("exact")
                .iter()
                .map(|h| h.index)
                .collect()
        })
        .collect();
    let recall = |lists: &[Vec<usize>]| -> f64 {
        let found: usize = lists
            .iter()
            .zip(&exact)
            .map(|(got, want)| got.iter().filter(|i| want.contains(i)).count())
            .sum();
        found as f64 / exact.iter().map(Vec::len).sum::<usize>() as f64
    };
    let hnsw: Vec<Vec<usize>> = vectors
        .iter()
        .map(|v| {
            index
                .search(v, 10, ef)
                .expect("hnsw")
                .iter()
                .map(|h| h.index)
                .collect()
        })
        .collect();
    let recall_lib = recall(&hnsw);

    let server = Server::start(&[
        "--index",
        index_dir.to_str().expect("utf-8"),
        "--encoder",
        bundle.to_str().expect("utf-8"),
        "--data-dir",
        work.path().join("data").to_str().expect("utf-8"),
    ]);
    let r = post(&server, "/search", &json!({ "queries": texts, "k": 10 }));
    assert_eq!(r.status, 200, "{}", r.text());
    let served: Vec<Vec<usize>> = r.json()["results"]
        .as_array()
        .expect("lists")
        .iter()
        .map(|l| {
            l.as_array()
                .expect("hits")
                .iter()
                .map(|h| {
                    index
                        .index_of(h["id"].as_str().expect("id"))
                        .expect("docs.bin readable")
                        .expect("known id")
                })
                .collect()
        })
        .collect();
    let recall_http = recall(&served);

    // nDCG@10: exact (local eval) against /search (eval through the service).
    let exact_out = work.path().join("exact");
    let o = run_capot(
        &[
            "eval",
            "--dataset",
            data.to_str().expect("utf-8"),
            "--index",
            index_dir.to_str().expect("utf-8"),
            "--encoder",
            bundle.to_str().expect("utf-8"),
            "--out",
            exact_out.to_str().expect("utf-8"),
        ],
        b"",
    );
    assert!(
        o.status.success(),
        "eval exact: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let served_out = work.path().join("served");
    let o = run_capot(
        &[
            "eval",
            "--dataset",
            data.to_str().expect("utf-8"),
            "--server",
            &server.base,
            "--encoder",
            "minilm",
            "--out",
            served_out.to_str().expect("utf-8"),
        ],
        b"",
    );
    assert!(
        o.status.success(),
        "eval via /search: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let ndcg_exact = report_ndcg(&exact_out);
    let ndcg_served = report_ndcg(&served_out);
    println!(
        "dl19-sample ({} queries, ef {ef}): recall@10 HNSW vs exact {recall_lib:.4} (library), \
         {recall_http:.4} (/search); nDCG@10 exact {ndcg_exact:.4}, /search {ndcg_served:.4} (Δ {:+.4})",
        qs.len(),
        ndcg_served - ndcg_exact
    );
    assert!(recall_lib >= 0.99, "recall@10 (library) {recall_lib}");
    assert!(recall_http >= 0.99, "recall@10 (/search) {recall_http}");
    assert!(
        (ndcg_served - ndcg_exact).abs() <= 0.005,
        "nDCG@10 {ndcg_served} vs exact {ndcg_exact}"
    );
    // A sanity floor: MiniLM on this sample is far from random.
    assert!(ndcg_exact > 0.3, "nDCG@10 exact {ndcg_exact}");
}

#[test]
fn openapi_documents_are_valid_and_describe_the_live_answers() {
    let index = default_index().to_str().expect("utf-8").to_string();
    let bundle = minilm_bundle().to_str().expect("utf-8").to_string();
    let server = Server::start(&["--index", &index, "--encoder", &bundle]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let admin = loop {
        let log = server.stderr.lock().expect("log").clone();
        if let Some(a) = log
            .lines()
            .find_map(|l| l.strip_prefix("capot: admin listening on "))
        {
            break a.trim().to_string();
        }
        assert!(Instant::now() < deadline, "no admin address: {log}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let token = std::fs::read_to_string(
        server
            .data_dir
            .as_ref()
            .expect("data dir")
            .path()
            .join("admin-token"),
    )
    .expect("admin token");
    let out = Command::new(python())
        .arg(root().join("tests/python/openapi_check.py"))
        .args(["--base", &server.base, "--admin", &admin])
        .args(["--admin-token", token.trim()])
        .output()
        .expect("run openapi_check.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["public"]["openapi"], "3.1.0", "{v}");
    for path in [
        "/search",
        "/v1/embeddings",
        "/info",
        "/health",
        "/ready",
        "/metrics",
    ] {
        assert!(
            v["public"]["paths"]
                .as_array()
                .unwrap()
                .contains(&json!(path)),
            "{path} missing: {v}"
        );
    }
    assert_eq!(v["public"]["security_schemes"], json!(["api_key"]), "{v}");
    let admin_paths = v["admin"]["paths"].as_array().unwrap();
    for path in [
        "/admin/encoders",
        "/admin/encoders/{name}",
        "/admin/aliases",
        "/admin/aliases/{alias}",
        "/admin/state",
        "/admin/jobs",
        "/admin/jobs/{id}",
        "/admin/jobs/{id}/events",
        "/admin/jobs/{id}/cancel",
        "/admin/documents",
        "/admin/documents/delete",
        "/admin/documents/{id}",
        "/admin/index",
        "/admin/index/compact",
    ] {
        assert!(admin_paths.contains(&json!(path)), "{path} missing: {v}");
    }
    assert_eq!(
        v["admin"]["security_schemes"],
        json!(["admin_token"]),
        "{v}"
    );
    // Every live answer — single, batch, repaired, fused, both error kinds, embeddings in both
    // encodings — matches the schema the document gives for its status.
    let checked = v["checked"].as_array().unwrap();
    let statuses: Vec<u64> = checked
        .iter()
        .map(|c| c["status"].as_u64().unwrap())
        .collect();
    assert_eq!(
        statuses,
        [200, 200, 200, 200, 200, 422, 404, 200, 200, 422, 200, 400, 200],
        "{v}"
    );
    assert!(
        checked[4]["keys"]
            .as_array()
            .unwrap()
            .contains(&json!("fusion")),
        "the fused answer is checked: {v}"
    );
    for c in checked {
        assert_eq!(c["errors"], json!([]), "{c}");
    }
    assert!(
        checked[2]["keys"]
            .as_array()
            .unwrap()
            .contains(&json!("repair")),
        "the repaired answer is checked with its repair member: {v}"
    );
}
