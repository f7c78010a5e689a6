//! Hostile HTTP input to a running `capot serve`, over real sockets: generated JSON bodies with
//! the API's own field names and wrong types, raw bytes and invalid UTF-8, deeply nested JSON,
//! a megabyte of one character, odd methods, paths and query strings, missing or wrong content
//! types. Every answer must be a status the API documents with a JSON error body (never a 5xx,
//! never a dropped connection), and the service must still search afterwards. (gRPC messages
//! are fuzzed in tests/grpc_api.rs; the parsers themselves in src/fuzz.rs.)

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::{default_index, minilm_bundle, Server};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// Requests sent.
const CASES: u32 = 3000;

/// One request: method, path and query, content type, body.
#[derive(Debug, Clone)]
struct Request {
    method: &'static str,
    target: String,
    content_type: Option<&'static str>,
    body: Vec<u8>,
}

/// Sends one request on a fresh connection; (status, body). The server must answer: a closed
/// connection or a timeout is an error.
fn send(addr: SocketAddr, r: &Request) -> std::io::Result<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut head = format!(
        "{} {} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        r.method,
        r.target,
        r.body.len()
    );
    if let Some(ct) = r.content_type {
        head.push_str(&format!("Content-Type: {ct}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    // The server may answer (413) before reading a large body; a reset while writing is fine
    // as long as the answer arrives.
    let _ = s.write_all(&r.body);
    let mut reader = BufReader::new(s);
    let mut status_line = String::new();
    reader.read_line(&mut status_line)?;
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line {status_line:?}")))?;
    let mut body = Vec::new();
    let mut length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse::<usize>().ok();
            }
        }
    }
    match length {
        Some(n) => {
            body.resize(n, 0);
            reader.read_exact(&mut body)?;
        }
        None => {
            reader.read_to_end(&mut body)?;
        }
    }
    Ok((status, body))
}

/// JSON values with the API's field names, right and wrong types.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::{json, Value};
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        prop_oneof![
            Just(0u64),
            Just(1),
            Just(10),
            Just(1000),
            Just(1001),
            Just(u64::MAX)
        ]
        .prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        "\\PC{0,40}".prop_map(Value::from),
        "[\\x00-\\x1f]{0,10}".prop_map(Value::from),
        Just(Value::from("symptoms of vitamin d deficeincy")),
        prop_oneof![
            Just("off"),
            Just("on"),
            Just("auto"),
            Just("max"),
            Just("repaired"),
            Just("default"),
            Just("nope")
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 24, 6, |inner| {
        let key = prop_oneof![
            Just("query"),
            Just("queries"),
            Just("k"),
            Just("ef"),
            Just("encoder"),
            Just("repair"),
            Just("repair_fusion"),
            Just("input"),
            Just("model"),
            Just("dimensions"),
            Just("encoding_format"),
            Just("bogus")
        ];
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map(key.prop_map(str::to_string), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn request() -> impl Strategy<Value = Request> {
    let endpoint = prop_oneof![
        6 => Just(("POST", "/search".to_string())),
        4 => Just(("POST", "/v1/embeddings".to_string())),
        1 => Just(("GET", "/search".to_string())),
        1 => "[a-z/%?&=.]{0,30}".prop_map(|p| ("GET", format!("/{p}"))),
        // Query strings of URI characters (a request line that is not HTTP at all is refused
        // by the HTTP parser with a bare 400 before any route sees it).
        1 => "[A-Za-z0-9._~!$&'()*+,;=:@/?%-]{0,30}".prop_map(|q| ("GET", format!("/info?{q}"))),
        1 => "[A-Za-z0-9._~!$&'()*+,;=:@/?%-]{0,30}".prop_map(|q| ("POST", format!("/search?{q}"))),
        1 => Just(("DELETE", "/search".to_string())),
        1 => Just(("PUT", "/v1/embeddings".to_string())),
    ];
    let body = prop_oneof![
        8 => json_value().prop_map(|v| v.to_string().into_bytes()),
        2 => proptest::collection::vec(any::<u8>(), 0..300),
        1 => (1usize..200_000).prop_map(|d| format!("{{\"query\": {}", "[".repeat(d)).into_bytes()),
        1 => (any::<char>(), 100_000usize..1_100_000)
            .prop_map(|(c, n)| format!("{{\"query\": {}}}", serde_json::Value::from(c.to_string().repeat(n / c.len_utf8().max(1)))).into_bytes()),
        1 => Just(b"{\"query\": \"\xff\xfe invalid utf-8\"}".to_vec()),
    ];
    let content_type = prop_oneof![
        8 => Just(Some("application/json")),
        1 => Just(None),
        1 => Just(Some("text/plain")),
        1 => Just(Some("application/json; charset=latin1")),
    ];
    (endpoint, content_type, body).prop_map(|((method, target), content_type, body)| Request {
        method,
        target,
        content_type,
        body,
    })
}

#[test]
fn hostile_http_requests_get_documented_errors_never_5xx() {
    let server = Server::start(&[
        "--index",
        default_index().to_str().unwrap(),
        "--encoder",
        minilm_bundle().to_str().unwrap(),
    ]);
    let addr = server.addr;
    let mut runner = TestRunner::new_with_rng(
        Config {
            cases: CASES,
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &[11; 32]),
    );
    let started = Instant::now();
    let statuses = std::cell::RefCell::new(std::collections::BTreeMap::<u16, u32>::new());
    runner
        .run(&request(), |r| {
            let (status, body) = send(addr, &r).map_err(|e| {
                TestCaseError::fail(format!("{} {}: no answer: {e}", r.method, r.target))
            })?;
            *statuses.borrow_mut().entry(status).or_default() += 1;
            prop_assert!(
                matches!(status, 200 | 400 | 404 | 405 | 413 | 415 | 422),
                "{} {} → {status}: {}",
                r.method,
                r.target,
                String::from_utf8_lossy(&body)
            );
            if status != 200 && status != 404 && status != 405 {
                let v: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
                    TestCaseError::fail(format!(
                        "{status} body is not JSON ({e}): {}",
                        String::from_utf8_lossy(&body)
                    ))
                })?;
                prop_assert!(
                    v["error"]["message"]
                        .as_str()
                        .is_some_and(|m| !m.is_empty()),
                    "{status}: {v}"
                );
            }
            Ok(())
        })
        .unwrap_or_else(|e| {
            let log = server.stderr.lock().map(|l| l.clone()).unwrap_or_default();
            panic!("{e}\nserver log:\n{log}")
        });
    println!(
        "HTTP fuzz: {CASES} requests in {:.1}s, statuses {:?}",
        started.elapsed().as_secs_f64(),
        statuses.borrow()
    );
    // Every kind of answer was reached, and the service still searches.
    let seen = statuses.borrow();
    for status in [200, 400, 413, 415, 422] {
        assert!(seen.contains_key(&status), "no {status} among {seen:?}");
    }
    let (status, body) = send(
        addr,
        &Request {
            method: "POST",
            target: "/search".into(),
            content_type: Some("application/json"),
            body: br#"{"query": "vitamin d", "k": 3}"#.to_vec(),
        },
    )
    .expect("search after the fuzz");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let log = server.stderr.lock().unwrap().clone();
    assert!(!log.contains("panicked"), "{log}");
}
