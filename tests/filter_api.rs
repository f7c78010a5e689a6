//! Filtered search end to end, as a user drives it: `capot index build --payload-index` over a
//! corpus with metadata, `/search` with Qdrant-shaped filters and `with_metadata` (curl), the
//! 400s a bad filter gets, and a payload index declared and dropped on the running server.

mod common;
mod registry_common;

use std::time::{Duration, Instant};

use common::{filtered_index, minilm_bundle, test_metadata, Server};
use registry_common::Admin;
use serde_json::{json, Value};

fn post(server: &Server, body: &Value) -> (u16, Value) {
    let out = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "60", "-o", "-", "-w", "\n%{http_code}"])
        .args(["-H", "content-type: application/json", "-d"])
        .arg(body.to_string())
        .arg(format!("http://{}/search", server.addr))
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout);
    let (body, code) = text.rsplit_once('\n').expect("status line");
    (
        code.trim().parse().expect("status"),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

fn search(server: &Server, body: Value) -> Value {
    let (code, v) = post(server, &body);
    assert_eq!(code, 200, "{body} -> {v}");
    v
}

fn ids(v: &Value) -> Vec<String> {
    common::hit_ids(v)
}

/// Document number of an id of the built-in corpus (`d001` is 0).
fn number(id: &str) -> usize {
    id.trim_start_matches('d')
        .parse::<usize>()
        .expect("corpus id")
        - 1
}

/// How many of the 200 documents `pred` admits, from the metadata the corpus was given.
fn count(pred: impl Fn(&Value) -> bool) -> u64 {
    (0..200)
        .filter(|&i| test_metadata(i).is_some_and(|m| pred(&m)))
        .count() as u64
}

fn serve() -> (Server, tempfile::TempDir) {
    serve_index(filtered_index(), &[])
}

fn serve_index(index: &std::path::Path, extra: &[&str]) -> (Server, tempfile::TempDir) {
    let data = tempfile::tempdir().expect("data dir");
    let mut args = vec![
        "--index",
        index.to_str().unwrap(),
        "--encoder",
        minilm_bundle().to_str().unwrap(),
        "--data-dir",
        data.path().to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    (Server::start(&args), data)
}

/// A copy of the filtered index that a test may change (declare payload indexes on).
fn own_index() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let copy = dir.path().join("index");
    std::fs::create_dir(&copy).unwrap();
    for entry in std::fs::read_dir(filtered_index()).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
    }
    (dir, copy)
}

#[test]
fn filters_restrict_hits_to_what_they_admit_and_say_how() {
    let (server, _data) = serve();
    let q = "how long do antibiotics take to work";

    // One tenant: every hit is the tenant's, there are min(k, admitted), and the planner scans.
    let v = search(
        &server,
        json!({"query": q, "k": 10, "with_metadata": true,
               "filter": {"must": [{"key": "tenant", "match": {"value": "t1"}}]}}),
    );
    let admitted = count(|m| m["tenant"] == "t1");
    assert_eq!(v["filter"]["admitted"], admitted, "{v}");
    assert_eq!(v["filter"]["strategy"], "exact", "{v}");
    assert_eq!(ids(&v).len(), 10);
    for h in v["results"].as_array().unwrap() {
        assert_eq!(h["metadata"]["tenant"], "t1", "{h}");
        let i = number(h["id"].as_str().unwrap());
        let mut want = test_metadata(i).unwrap();
        assert_eq!(h["metadata"]["year"], want["year"], "{h}");
        assert_eq!(
            h["metadata"]["lang"],
            want["lang"].take(),
            "top-level field kept: {h}"
        );
    }
    assert!(v["timings_ms"]["filter"].as_f64().is_some(), "{v}");

    // The filtered answer is the unfiltered ranking with other tenants' documents removed.
    let all = search(&server, json!({"query": q, "k": 200}));
    let want: Vec<String> = ids(&all)
        .into_iter()
        .filter(|id| test_metadata(number(id)).is_some_and(|m| m["tenant"] == "t1"))
        .take(10)
        .collect();
    assert_eq!(ids(&v), want);

    // Fewer admitted than k: exactly the admitted ones.
    let v = search(
        &server,
        json!({"query": q, "k": 50,
               "filter": {"must": [{"key": "tenant", "match": {"value": "t2"}},
                                   {"key": "year", "range": {"gte": 2006}},
                                   {"key": "tags", "match": {"any": ["tag2"]}}]}}),
    );
    let admitted = count(|m| {
        m["tenant"] == "t2"
            && m["year"].as_u64().is_some_and(|y| y >= 2006)
            && m["tags"].as_array().unwrap().contains(&json!("tag2"))
    });
    assert!(admitted > 0 && admitted < 50, "{admitted}");
    assert_eq!(ids(&v).len() as u64, admitted, "{v}");

    // Nothing admitted: an empty list at once.
    let v = search(
        &server,
        json!({"query": q, "filter": {"must": [{"key": "tenant", "match": {"value": "nobody"}}]}}),
    );
    assert_eq!(v["results"], json!([]), "{v}");
    assert_eq!(v["filter"], json!({"admitted": 0, "strategy": "empty"}));

    // Equivalent filters give the same hits: a range and the `any` of its values, a datetime
    // range and the days it spans.
    let a = search(
        &server,
        json!({"query": q, "k": 20, "filter": {"must": [{"key": "year", "range": {"gte": 2002, "lte": 2004}}]}}),
    );
    let b = search(
        &server,
        json!({"query": q, "k": 20, "filter": {"must": [{"key": "year", "match": {"any": [2002, 2003, 2004]}}]}}),
    );
    assert_eq!(ids(&a), ids(&b));
    assert_eq!(a["filter"]["admitted"], b["filter"]["admitted"]);
    let a = search(
        &server,
        json!({"query": q, "k": 20, "filter": {"must": [{"key": "published",
               "range": {"gte": "2024-01-03T00:00:00Z", "lt": "2024-01-05T01:00:00+01:00"}}]}}),
    );
    let admitted = count(|m| {
        let day: u32 = m["published"].as_str().unwrap()[8..10].parse().unwrap();
        (3..=4).contains(&day)
    });
    assert_eq!(a["filter"]["admitted"], admitted, "{a}");

    // should, must_not, min_should, is_null, is_empty and has_id, nested.
    let v = search(
        &server,
        json!({"query": q, "k": 200, "filter": {
            "should": [{"is_null": {"key": "year"}}, {"has_id": ["d002", "d003"]}],
            "must_not": [{"key": "lang", "match": {"value": "fr"}}]}}),
    );
    let got: Vec<usize> = ids(&v).iter().map(|id| number(id)).collect();
    let mut want: Vec<usize> = (0..200)
        .filter(|&i| {
            let m = test_metadata(i);
            let null_year = m.as_ref().is_some_and(|m| m["year"].is_null());
            let fr = m.as_ref().is_some_and(|m| m["lang"] == "fr");
            (null_year || i == 1 || i == 2) && !fr
        })
        .collect();
    let mut sorted = got.clone();
    sorted.sort();
    want.sort();
    assert_eq!(sorted, want, "{v}");
    let v = search(
        &server,
        json!({"query": q, "k": 200, "filter": {"must": [{"is_empty": {"key": "tenant"}}]}}),
    );
    // Every eleventh document has no metadata.
    assert_eq!(ids(&v).len(), 19, "{v}");
    let v = search(
        &server,
        json!({"query": q, "k": 200, "filter": {"min_should": {"min_count": 2, "conditions": [
            {"key": "tenant", "match": {"value": "t0"}}, {"key": "lang", "match": {"value": "en"}},
            {"key": "tags", "match": {"value": "tag0"}}]}}}),
    );
    let admitted = count(|m| {
        let n = [
            m["tenant"] == "t0",
            m["lang"] == "en",
            m["tags"].as_array().unwrap().contains(&json!("tag0")),
        ]
        .iter()
        .filter(|&&x| x)
        .count();
        n >= 2
    });
    assert_eq!(ids(&v).len() as u64, admitted, "{v}");

    // Prometheus counts each filtered query by strategy.
    let (status, metrics) = common::http_get(server.addr, "/metrics").expect("metrics");
    assert_eq!(status, 200);
    for strategy in ["empty", "exact"] {
        assert!(
            metrics.contains(&format!(
                "capot_filtered_searches_total{{strategy=\"{strategy}\"}}"
            )),
            "{strategy}"
        );
    }
    assert!(metrics.contains("stage=\"filter\""), "filter stage timed");

    // A batch: one filter for every query.
    let v = search(
        &server,
        json!({"queries": [q, "boil an egg"], "k": 3,
               "filter": {"must": [{"key": "lang", "match": {"value": "de"}}]}}),
    );
    for list in v["results"].as_array().unwrap() {
        for h in list.as_array().unwrap() {
            let m = test_metadata(number(h["id"].as_str().unwrap())).unwrap();
            assert_eq!(m["lang"], "de");
        }
    }
}

#[test]
fn bad_filters_get_a_400_naming_the_json_path() {
    let (server, _data) = serve();
    let cases = [
        (
            json!({"must": [{"key": "year", "match": {"value": "2020"}}]}),
            "invalid_filter",
            "filter.must[0].match",
        ),
        (
            json!({"must": [{"key": "tenant", "range": {"gt": 1}}]}),
            "invalid_filter",
            "filter.must[0].range",
        ),
        (
            json!({"must": [{"key": "published", "range": {"gt": "yesterday"}}]}),
            "invalid_filter",
            "filter.must[0].range.gt",
        ),
        (
            json!({"must": [{"key": "tenant", "match": {"like": "t"}}]}),
            "invalid_filter",
            "filter.must[0].match.like",
        ),
        (json!({"mist": []}), "invalid_filter", "filter.mist"),
        (
            json!({"must": [{"key": "author.country", "match": {"value": "nz"}}]}),
            "unindexed_field",
            "filter.must[0]",
        ),
    ];
    for (filter, code, param) in cases {
        let (status, v) = post(&server, &json!({"query": "x", "filter": filter}));
        assert_eq!(status, 400, "{filter}: {v}");
        assert_eq!(v["error"]["code"], code, "{filter}: {v}");
        assert_eq!(v["error"]["param"], param, "{filter}: {v}");
        assert!(
            v["error"]["message"].as_str().unwrap().starts_with(param),
            "{v}"
        );
    }
    let (_, v) = post(
        &server,
        &json!({"query": "x", "filter": {"must": [{"key": "author.country", "match": {"value": "nz"}}]}}),
    );
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("--payload-index author.country") && message.contains("PUT /admin"),
        "{message}"
    );
    // Deeper than the limit.
    let mut deep = json!({"has_id": ["d001"]});
    for _ in 0..10 {
        deep = json!({"must": [deep]});
    }
    let (status, v) = post(&server, &json!({"query": "x", "filter": deep}));
    assert_eq!(
        (status, v["error"]["code"].clone()),
        (400, json!("invalid_filter")),
        "{v}"
    );
    // The service still answers.
    search(&server, json!({"query": "x"}));
}

#[test]
fn a_payload_index_declared_on_the_running_server_serves_filters_until_dropped() {
    let (_keep, index) = own_index();
    let (mut server, data) = serve_index(&index, &[]);
    let admin = Admin::of(&server, data.path());
    let body = json!({"query": "antibiotics", "k": 100,
                      "filter": {"must": [{"key": "author.country", "match": {"value": "nz"}}]}});
    assert_eq!(post(&server, &body).0, 400);
    // The sign codes are reported: their size, and nothing judged of them before any scan.
    let codes = &admin.get("/admin/index")["sign_codes"];
    assert!(codes["bytes"].as_u64().unwrap() > 0, "{codes}");
    assert_eq!(codes["scans"], 0, "{codes}");
    assert_eq!(codes["median_margin"], Value::Null, "{codes}");
    assert_eq!(codes["candidates_factor"], 1, "{codes}");

    let (code, v) = admin.call(
        "PUT",
        "/admin/index/payload/author.country",
        Some(r#"{"type": "keyword"}"#),
    );
    assert_eq!(code, 202, "{v}");
    // Built in the background: wait until GET /admin/index lists it.
    let started = Instant::now();
    loop {
        let info = admin.get("/admin/index");
        let listed = info["payload"]["indexes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["key"] == "author.country");
        if listed {
            let f = info["payload"]["indexes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["key"] == "author.country")
                .unwrap()
                .clone();
            assert_eq!(f["type"], "keyword", "{f}");
            assert_eq!(f["distinct_values"], 2, "{f}");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "payload index never listed: {info}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let v = search(&server, body.clone());
    let admitted = count(|m| m["author"]["country"] == "nz");
    assert_eq!(ids(&v).len() as u64, admitted, "{v}");

    // Acknowledged is durable: killed outright, the server starts with the index declared.
    server.child.kill().expect("SIGKILL");
    server.child.wait().expect("reaped");
    let (restarted, data) = serve_index(&index, &[]);
    let server = restarted;
    let admin = Admin::of(&server, data.path());
    assert_eq!(ids(&search(&server, body.clone())).len() as u64, admitted);

    // A wrong type is refused before anything is built.
    let (code, v) = admin.call(
        "PUT",
        "/admin/index/payload/tenant",
        Some(r#"{"type": "integer", "tenant": true}"#),
    );
    assert_eq!(code, 422, "{v}");

    let (code, v) = admin.call("DELETE", "/admin/index/payload/author.country", None);
    assert_eq!(code, 200, "{v}");
    assert_eq!(post(&server, &body).0, 400);
    let (code, _) = admin.call("DELETE", "/admin/index/payload/author.country", None);
    assert_eq!(code, 404);
}

#[test]
fn serve_flags_scan_unindexed_fields_and_move_the_planners_crossover() {
    let (server, _data) = serve_index(
        filtered_index(),
        &["--allow-unindexed-filters", "--filter-scan-factor", "0"],
    );
    let v = search(
        &server,
        json!({"query": "antibiotics", "k": 100,
               "filter": {"must": [{"key": "author.country", "match": {"value": "nz"}},
                                   {"key": "tenant", "match": {"except": ["t0"]}}]}}),
    );
    let admitted = count(|m| m["author"]["country"] == "nz" && m["tenant"] != "t0");
    assert_eq!(v["filter"]["admitted"], admitted, "{v}");
    assert_eq!(ids(&v).len() as u64, admitted);

    // A factor of 0 walks the graph where the default scans (one tenant: `exact` in
    // filters_restrict_hits_to_what_they_admit_and_say_how), with the same tenant's hits.
    let v = search(
        &server,
        json!({"query": "antibiotics", "k": 10, "with_metadata": true,
               "filter": {"must": [{"key": "tenant", "match": {"value": "t1"}}]}}),
    );
    assert_ne!(v["filter"]["strategy"], "exact", "{v}");
    assert_eq!(ids(&v).len(), 10, "{v}");
    for h in v["results"].as_array().unwrap() {
        assert_eq!(h["metadata"]["tenant"], "t1", "{h}");
    }

    // A factor that is not a finite number >= 0 stops the server at start, with the reason.
    for bad in ["=-1", "=NaN", "=inf"] {
        let o = common::run_capot(
            &[
                "serve",
                "--index",
                filtered_index().to_str().unwrap(),
                "--encoder",
                minilm_bundle().to_str().unwrap(),
                &format!("--filter-scan-factor{bad}"),
            ],
            b"",
        );
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{bad}: {stderr}");
        assert!(
            stderr.contains("--filter-scan-factor must be a finite number >= 0"),
            "{bad}: {stderr}"
        );
    }
}

/// `capot bench filter`, as issue 41's tables are measured: every cell answers exactly
/// `min(k, admitted)` hits, equivalent filters agree, and each cell carries the unfiltered walk
/// timed between its own queries beside the run's first one.
#[test]
fn bench_filter_reports_each_cell_beside_an_unfiltered_walk_timed_with_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let index = common::default_index();
    let dim = serde_json::from_str::<Value>(
        &std::fs::read_to_string(index.join("index.json")).expect("manifest"),
    )
    .expect("manifest JSON")["dimension"]
        .as_u64()
        .expect("dimension") as usize;
    // Twelve query vectors of a fixed pseudo-random draw.
    let mut state = 0x9e37_79b9u32;
    let bytes: Vec<u8> = (0..12 * dim)
        .flat_map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state as f32 / u32::MAX as f32 - 0.5).to_le_bytes()
        })
        .collect();
    let queries = dir.path().join("queries.f32");
    std::fs::write(&queries, bytes).expect("write queries");
    let o = common::run_capot(
        &[
            "bench",
            "filter",
            "--index",
            index.to_str().unwrap(),
            "--queries-vectors",
            queries.to_str().unwrap(),
            "--queries",
            "12",
            "--selectivities",
            "0.1,0.5",
            "--work",
            dir.path().join("work").to_str().unwrap(),
        ],
        b"",
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let out: Value = serde_json::from_slice(&o.stdout).expect("bench JSON");
    assert_eq!(out["equivalent_filters_same_hits"], true, "{out}");
    let cells = out["cells"].as_array().expect("cells");
    // independent, correlated and anti-correlated at each share; one tenant; the Zipf head.
    assert_eq!(cells.len(), 2 * 3 + 2, "{out}");
    for c in cells {
        assert_eq!(c["exactly_min_k_admitted"], 1.0, "{c}");
        let recall = c["recall"].as_f64().expect("recall");
        assert!((0.0..=1.0).contains(&recall), "{c}");
        let paired = c["paired_unfiltered"]["queries_per_second"]
            .as_f64()
            .expect("paired q/s");
        assert!(paired > 0.0, "{c}");
        let (qps, ratio) = (
            c["queries_per_second"].as_f64().expect("q/s"),
            c["qps_vs_paired_unfiltered"].as_f64().expect("ratio"),
        );
        assert!((ratio - qps / paired).abs() <= 1e-9 * ratio.max(1.0), "{c}");
    }
    assert!(
        stderr.contains("| × paired unfiltered |"),
        "the Markdown table names the paired ratio: {stderr}"
    );
}
