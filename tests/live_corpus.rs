//! The live corpus through the admin API, driven as an operator would (curl, a plain HTTP/1.1
//! client): documents written are found at once, replaced and deleted ones are gone, bad batches
//! are refused whole, and what was acknowledged survives SIGKILL — in a loop of kills at random
//! moments and at named points around the log's fsync and through compactions, and with the
//! log's tail torn; compaction folds writes into a new frozen version under search load.

mod common;
mod jobs_common;
mod registry_common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Server;
use jobs_common::serve_with;
use registry_common::{Admin, Conn};
use serde_json::{json, Value};

fn start(data_dir: &Path, env: &[(&str, &str)]) -> (Server, Admin) {
    let s = serve_with(data_dir, &["--grpc-addr", "off"], env);
    (s.server, s.admin)
}

fn kill(server: &mut Server) {
    let _ = server.child.kill();
    let _ = server.child.wait();
}

/// Ids of the hits of `query` (k 10).
fn search(server: &Server, query: &str) -> Vec<String> {
    let (code, body) = Conn::new(server.addr)
        .request(
            "POST",
            "/search",
            &[],
            &json!({"query": query, "k": 10}).to_string(),
        )
        .expect("search");
    assert_eq!(code, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("JSON");
    common::hit_ids(&v)
}

fn text_of(admin: &Admin, id: &str) -> Option<String> {
    let (code, v) = admin.call("GET", &format!("/admin/documents/{id}"), None);
    match code {
        200 => Some(v["text"].as_str().expect("text").to_string()),
        404 => None,
        _ => panic!("GET document {id}: {code} {v}"),
    }
}

/// A frozen document of the built-in corpus: (id, text).
fn frozen_document() -> (String, String) {
    let corpus = common::root().join("data/default-corpus/corpus.jsonl");
    let line = std::fs::read_to_string(corpus)
        .expect("corpus")
        .lines()
        .nth(3)
        .expect("a document")
        .to_string();
    let v: Value = serde_json::from_str(&line).expect("JSON");
    let title = v["title"].as_str().unwrap_or("").trim().to_string();
    let text = v["text"].as_str().expect("text").trim().to_string();
    let query = if title.is_empty() {
        text
    } else {
        format!("{title} {text}")
    };
    (v["_id"].as_str().expect("id").to_string(), query)
}

#[test]
fn written_documents_are_found_replaced_and_deleted_and_survive_kill_9() {
    let data = tempfile::tempdir().unwrap();
    let (mut server, admin) = start(data.path(), &[]);
    let zorb = "The zorblax is a purple flightless bird of the outer moons.";
    let body = json!({"documents": [
        {"id": "live-1", "title": "Zorblax", "text": zorb, "metadata": {"lang": "en"}},
        {"id": "live-2", "text": "Gravel polishing is a slow and quiet hobby."},
    ]});
    let (code, v) = admin.call("POST", "/admin/documents", Some(&body.to_string()));
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["result"]["status"], "completed", "{v}");
    assert_eq!(v["status"], "ok");
    let first_op = v["result"]["operation_id"].as_u64().expect("operation id");
    // Searchable the moment it is acknowledged: its own text finds it first.
    assert_eq!(search(&server, &format!("Zorblax {zorb}"))[0], "live-1");
    let (code, doc) = admin.call("GET", "/admin/documents/live-1", None);
    assert_eq!(code, 200, "{doc}");
    assert_eq!(doc["source"], "live");
    assert_eq!(doc["metadata"]["lang"], "en");

    // Replace a frozen document and delete another: neither old copy is served again.
    let (frozen_id, frozen_text) = frozen_document();
    assert_eq!(search(&server, &frozen_text)[0], frozen_id);
    let (code, v) = admin.call(
        "POST",
        "/admin/documents?wait=false",
        Some(
            &json!({"documents": [{"id": frozen_id, "text": "Sourdough needs a lively starter."}]})
                .to_string(),
        ),
    );
    assert_eq!(code, 200, "{v}");
    assert!(
        ["acknowledged", "completed"].contains(&v["result"]["status"].as_str().unwrap_or("")),
        "{v}"
    );
    let replaced = "Sourdough needs a lively starter.";
    let deadline = Instant::now() + Duration::from_secs(30);
    while text_of(&admin, &frozen_id).as_deref() != Some(replaced) {
        assert!(Instant::now() < deadline, "wait=false write never applied");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (code, v) = admin.call("DELETE", "/admin/documents/live-2", None);
    assert_eq!(code, 200, "{v}");
    assert!(v["result"]["operation_id"].as_u64().unwrap() > first_op);
    assert!(
        !search(&server, "Gravel polishing is a slow and quiet hobby.")
            .contains(&"live-2".to_string())
    );
    assert_eq!(text_of(&admin, "live-2"), None);

    // Bad batches are refused whole, with a reason per item.
    let (code, v) = admin.call(
        "POST",
        "/admin/documents",
        Some(
            &json!({"documents": [
                {"id": "ok-1", "text": "fine"},
                {"id": "dup", "text": "one"},
                {"id": "dup", "text": "two"},
                {"id": "", "text": "no id"},
                {"id": "empty", "text": "  "},
            ]})
            .to_string(),
        ),
    );
    assert_eq!(code, 400, "{v}");
    assert_eq!(v["error"]["code"], "invalid_batch");
    assert_eq!(
        v["error"]["details"]["items"].as_array().unwrap().len(),
        3,
        "{v}"
    );
    assert_eq!(
        text_of(&admin, "ok-1"),
        None,
        "a refused batch wrote nothing"
    );
    let ids: Vec<String> = (0..257).map(|i| format!("x{i}")).collect();
    let (code, v) = admin.call(
        "POST",
        "/admin/documents/delete",
        Some(&json!({ "ids": ids }).to_string()),
    );
    assert_eq!(code, 413, "{v}");
    let (code, _) = admin.call_as(None, "POST", "/admin/documents", Some(&body.to_string()));
    assert_eq!(code, 401);
    // A path or a query string that cannot be read gets the JSON error shape too.
    let (code, v) = admin.call("GET", "/admin/documents/%FF%FE", None);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (400, Some("invalid_path")),
        "{v}"
    );
    let (code, v) = admin.call(
        "POST",
        "/admin/documents?wait=maybe",
        Some(&body.to_string()),
    );
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (422, Some("invalid_request")),
        "{v}"
    );

    let info = |server: &Server| -> Value {
        let (_, body) = common::http_get(server.addr, "/info").expect("info");
        serde_json::from_str::<Value>(&body).expect("JSON")["corpus"].clone()
    };
    let before = info(&server);
    assert_eq!(before["delta_documents"], 2, "{before}");
    assert_eq!(before["deleted"], 1, "{before}");
    assert_eq!(before["hidden_frozen"], 1, "{before}");
    let frozen = before["frozen_documents"].as_u64().unwrap();
    assert_eq!(
        before["documents"].as_u64().unwrap(),
        frozen + 1,
        "{before}"
    );

    // SIGKILL, then a torn record at the log's end (a batch whose fsync never came).
    kill(&mut server);
    let log = data.path().join("corpus/wal.log");
    let mut bytes = std::fs::read(&log).expect("log");
    let valid = bytes.len();
    bytes.extend_from_slice(&[200, 0, 0, 0, 1, 2, 3, 4, 9, 9]);
    std::fs::write(&log, &bytes).expect("tear the log");
    let (server, admin) = start(data.path(), &[]);
    assert_eq!(std::fs::metadata(&log).unwrap().len(), valid as u64);
    assert_eq!(info(&server), before);
    assert_eq!(search(&server, &format!("Zorblax {zorb}"))[0], "live-1");
    assert_eq!(text_of(&admin, &frozen_id).as_deref(), Some(replaced));
    assert_eq!(text_of(&admin, "live-2"), None);
    let (_, metrics) = common::http_get(server.addr, "/metrics").expect("metrics");
    assert!(
        metrics.contains("capot_corpus_documents{state=\"live\"} 2"),
        "{metrics}"
    );
}

/// Words of documents written live are no typos to query repair: a new name is searched as
/// typed while a document holds it, and corrected again once that document is gone.
#[test]
fn query_repair_leaves_the_words_of_live_documents_as_typed() {
    let data = tempfile::tempdir().unwrap();
    let (server, admin) = start(data.path(), &[]);
    let repaired = |q: &str| -> Option<String> {
        let body = json!({"query": q, "k": 3, "repair": "on"}).to_string();
        let (code, answer) = Conn::new(server.addr)
            .request("POST", "/search", &[], &body)
            .expect("search");
        assert_eq!(code, 200, "{answer}");
        let v: Value = serde_json::from_str(&answer).expect("JSON");
        v["repair"]["text"].as_str().map(str::to_string)
    };
    let query = "vitamn supplement dosage";
    assert_eq!(
        repaired(query).as_deref(),
        Some("vitamin supplement dosage")
    );
    let write =
        json!({"documents": [{"id": "brand-1", "text": "Vitamn is a new supplement brand."}]});
    let (code, v) = admin.call("POST", "/admin/documents", Some(&write.to_string()));
    assert_eq!(code, 200, "{v}");
    assert_eq!(repaired(query), None);
    assert_eq!(search(&server, query)[0], "brand-1");
    let delete = json!({"ids": ["brand-1"]});
    let (code, v) = admin.call("POST", "/admin/documents/delete", Some(&delete.to_string()));
    assert_eq!(code, 200, "{v}");
    assert_eq!(
        repaired(query).as_deref(),
        Some("vitamin supplement dosage")
    );
}

/// What the writers were told, per id: the content acknowledged last (`None`: deleted), and
/// batches sent but never answered (they may or may not be there, but whole).
#[derive(Default)]
struct Ledger {
    acked: HashMap<String, (u64, Option<String>)>,
    /// (operation kind, ids, tag) of batches whose answer never came.
    unanswered: Vec<(bool, Vec<String>, String)>,
    /// Ids acknowledged since the last restart: a batch left unanswered then may be older or
    /// newer than their write, so only its other ids tell whether it applied whole.
    acked_since_restart: std::collections::HashSet<String>,
}

/// Writes batches until the server dies. `name` makes every batch's tag unique in the whole test
/// (a tag that two writers could both write would make a batch look applied when it is not).
fn writer(
    admin_addr: std::net::SocketAddr,
    token: String,
    name: String,
    seed: u64,
    ledger: Arc<Mutex<Ledger>>,
) {
    let mut conn = Conn::new(admin_addr);
    let auth = format!("Bearer {token}");
    let mut rng = seed;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for round in 0.. {
        let upsert = next() % 4 != 0;
        let ids: Vec<String> = (0..1 + next() % 4)
            .map(|_| format!("doc-{}", next() % 24))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let tag = format!("{name}-b{round}");
        let (path, body) = if upsert {
            let docs: Vec<Value> = ids
                .iter()
                .map(|id| json!({"id": id, "text": format!("{id} written by {tag}")}))
                .collect();
            ("/admin/documents", json!({ "documents": docs }))
        } else {
            ("/admin/documents/delete", json!({ "ids": ids }))
        };
        match conn.request("POST", path, &[("Authorization", &auth)], &body.to_string()) {
            Ok((200, answer)) => {
                let v: Value = serde_json::from_str(&answer).expect("JSON");
                let op = v["result"]["operation_id"].as_u64().expect("operation id");
                let mut l = ledger.lock().unwrap();
                for (i, id) in ids.iter().enumerate() {
                    let content = upsert.then(|| format!("{} written by {tag}", ids[i]));
                    let e = l.acked.entry(id.clone()).or_insert((0, None));
                    if op > e.0 {
                        *e = (op, content);
                    }
                    l.acked_since_restart.insert(id.clone());
                }
            }
            Ok((code, answer)) => panic!("write refused: {code} {answer}"),
            Err(_) => {
                // The server died with this batch in flight.
                ledger.lock().unwrap().unanswered.push((upsert, ids, tag));
                return;
            }
        }
    }
}

#[test]
fn a_kill_loop_loses_no_acknowledged_write_and_applies_no_batch_in_part() {
    let seed: u64 = std::env::var("CAPOT_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        })
        | 1;
    let rounds: usize = std::env::var("CAPOT_KILL_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    eprintln!("kill loop: seed {seed} (CAPOT_KILL_SEED to replay), {rounds} rounds");
    let data = tempfile::tempdir().unwrap();
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut rng = seed;
    // Around the log's fsync, and through a compaction: the new version written, `CURRENT`
    // naming it, the log cut to what came after it.
    let points = [
        ("wal.before_sync", 6),
        ("wal.after_sync", 6),
        ("compact.version_written", 2),
        ("compact.current_written", 2),
        ("compact.log_cut", 2),
    ];
    for round in 0..rounds {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        // Every third round dies at a named point, the others at a random moment.
        let crash = (round % 3 == 2).then(|| {
            let (point, times) = points[(rng >> 40) as usize % points.len()];
            format!("{point}:{}", 1 + (rng >> 20) % times)
        });
        let env: Vec<(&str, &str)> = crash
            .as_deref()
            .map(|c| vec![("CAPOT_CRASH_AT", c)])
            .unwrap_or_default();
        let (mut server, admin) = start(data.path(), &env);
        {
            let mut l = ledger.lock().unwrap();
            check(&admin, &l, seed, round);
            // What the unanswered batches left is now known: it is the state later writes
            // build on (any later acknowledgement has a higher operation id).
            let unanswered = std::mem::take(&mut l.unanswered);
            l.acked_since_restart.clear();
            for id in unanswered.iter().flat_map(|(_, ids, _)| ids) {
                l.acked.insert(id.clone(), (0, text_of(&admin, id)));
            }
        }
        let addr: std::net::SocketAddr = admin.base.trim_start_matches("http://").parse().unwrap();
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let (token, ledger) = (admin.token.clone(), ledger.clone());
                let s =
                    (seed ^ ((round * 2 + w + 1) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1;
                let name = format!("k{round}w{w}");
                std::thread::spawn(move || writer(addr, token, name, s, ledger))
            })
            .collect();
        // Compactions while the writers write, until the server dies.
        let compactor = {
            let token = admin.token.clone();
            let pause = 20 + (rng >> 28) % 80;
            std::thread::spawn(move || {
                let mut conn = Conn::new(addr);
                let auth = format!("Bearer {token}");
                loop {
                    std::thread::sleep(Duration::from_millis(pause));
                    match conn.request(
                        "POST",
                        "/admin/index/compact",
                        &[("Authorization", &auth)],
                        "",
                    ) {
                        Ok((202 | 409, _)) => {}
                        Ok((code, answer)) => panic!("compact: {code} {answer}"),
                        Err(_) => return,
                    }
                }
            })
        };
        if crash.is_none() {
            std::thread::sleep(Duration::from_millis(30 + (rng >> 33) % 300));
            kill(&mut server);
        } else {
            // The server kills itself at the point; bounded in case the point is never reached.
            let deadline = Instant::now() + Duration::from_secs(60);
            while server.child.try_wait().ok().flatten().is_none() {
                assert!(
                    Instant::now() < deadline,
                    "crash point {crash:?} never reached"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        for w in writers {
            w.join().expect("writer");
        }
        compactor.join().expect("compactor");
    }
    let (_server, admin) = start(data.path(), &[]);
    let l = ledger.lock().unwrap();
    check(&admin, &l, seed, rounds);
    // The loop compacted too: what it checked was served from compacted versions.
    let v = admin.get("/admin/index");
    assert!(
        v["version"].as_u64().unwrap_or(0) >= 1,
        "no compaction finished: {v}"
    );
    assert!(
        l.acked.len() > 5,
        "too few writes acknowledged to test anything"
    );
}

/// After a restart: every acknowledged write is there as acknowledged last, unless a batch
/// never answered touched the id since; such a batch is there whole or not at all.
fn check(admin: &Admin, l: &Ledger, seed: u64, round: usize) {
    let touched: std::collections::HashSet<&String> =
        l.unanswered.iter().flat_map(|(_, ids, _)| ids).collect();
    for (id, (_, content)) in &l.acked {
        if touched.contains(id) {
            continue;
        }
        assert_eq!(
            &text_of(admin, id),
            content,
            "seed {seed}, round {round}: {id} lost its acknowledged state"
        );
    }
    for (upsert, ids, tag) in &l.unanswered {
        if !upsert {
            continue;
        }
        let applied: Vec<bool> = ids
            .iter()
            .map(|id| text_of(admin, id).is_some_and(|t| t.ends_with(&format!(" by {tag}"))))
            .collect();
        // Another writer may have written some of its ids since (acknowledged, or unanswered
        // too); all-or-none holds for the ids nobody else wrote before the kill.
        let own: Vec<bool> = ids
            .iter()
            .zip(&applied)
            .filter(|(id, _)| {
                !l.acked_since_restart.contains(*id)
                    && l.unanswered
                        .iter()
                        .filter(|(_, other, _)| other.contains(id))
                        .count()
                        == 1
            })
            .map(|(_, a)| *a)
            .collect();
        assert!(
            own.iter().all(|a| *a) || own.iter().all(|a| !*a),
            "seed {seed}, round {round}: batch {tag} applied in part: {ids:?} {applied:?}"
        );
    }
}

#[test]
fn a_read_only_replica_refuses_writes_and_still_serves() {
    let data = tempfile::tempdir().unwrap();
    let (server, admin) = start(data.path(), &[("CAPOT_READ_ONLY", "true")]);
    let (code, v) = admin.call(
        "POST",
        "/admin/documents",
        Some(&json!({"documents": [{"id": "x", "text": "y"}]}).to_string()),
    );
    assert_eq!(code, 409, "{v}");
    assert_eq!(v["error"]["code"], "read_only");
    let (code, v) = admin.call("DELETE", "/admin/documents/x", None);
    assert_eq!(code, 409, "{v}");
    let (frozen_id, frozen_text) = frozen_document();
    assert_eq!(search(&server, &frozen_text)[0], frozen_id);
}

#[test]
fn the_documents_command_writes_and_deletes_in_batches_and_stops_on_a_refusal() {
    let data = tempfile::tempdir().unwrap();
    let (server, admin) = start(data.path(), &[]);
    let token_file = data.path().join("admin-token");
    let input = data.path().join("docs.jsonl");
    let lines: Vec<String> = (0..7)
        .map(|i| {
            json!({"id": format!("cli-{i}"), "text": format!("Document {i} about kiln-dried walnut planks number {i}.")})
                .to_string()
        })
        .collect();
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let run = |args: &[&str], stdin: &[u8]| {
        let mut all = vec!["documents"];
        all.extend_from_slice(args);
        common::run_capot(&all, stdin)
    };
    let base = admin.base.clone();
    let tf = token_file.to_str().unwrap();
    let out = run(
        &[
            "add",
            "--server",
            &base,
            "--token-file",
            tf,
            "--input",
            input.to_str().unwrap(),
            "--batch",
            "3",
        ],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).expect("summary JSON");
    assert_eq!(summary["documents"], 7, "{summary}");
    assert_eq!(summary["batches"], 3, "{summary}");
    assert_eq!(
        search(
            &server,
            "Document 4 about kiln-dried walnut planks number 4."
        )[0],
        "cli-4"
    );
    // Plain ids and {"id"} lines from stdin.
    let out = run(
        &["delete", "--server", &base, "--token-file", tf],
        b"cli-0\n{\"id\": \"cli-1\"}\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(text_of(&admin, "cli-0"), None);
    assert_eq!(text_of(&admin, "cli-1"), None);
    assert!(text_of(&admin, "cli-2").is_some());
    // A batch the server refuses stops the run with its reason and where to resume.
    let out = run(
        &["add", "--server", &base, "--token-file", tf, "--batch", "2"],
        b"{\"id\": \"ok-1\", \"text\": \"fine\"}\n{\"id\": \"ok-2\", \"text\": \"fine\"}\n{\"id\": \"bad\", \"text\": \" \"}\n",
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("text must not be empty") && err.contains("--skip 2"),
        "{err}"
    );
    // No token, a line that is not a document: one-line reasons, exit code 1.
    let out = run(&["add", "--server", &base], b"{}\n");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no admin token"));
    let out = run(
        &["add", "--server", &base, "--token-file", tf],
        b"not json\n",
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 1: not JSON"));
}

/// A client searching `text` without pause until `stop`; each answer must be a 200 (holding
/// `must_hold` when given). Returns the searches served and the failures.
fn search_load(
    addr: std::net::SocketAddr,
    text: String,
    must_hold: Option<String>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<(u64, Vec<String>)> {
    std::thread::spawn(move || {
        let mut conn = Conn::new(addr);
        let (mut ok, mut failed) = (0u64, Vec::new());
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let body = json!({"query": text, "k": 10}).to_string();
            match conn.request("POST", "/search", &[], &body) {
                Ok((200, answer)) if must_hold.as_ref().is_none_or(|m| answer.contains(m)) => {
                    ok += 1
                }
                other => failed.push(format!("{other:?}")),
            }
        }
        (ok, failed)
    })
}

#[test]
fn under_search_load_writes_are_found_at_once_and_no_search_fails() {
    let data = tempfile::tempdir().unwrap();
    let (server, admin) = start(data.path(), &[]);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (frozen_id, frozen_text) = frozen_document();
    // Two clients searching without pause; every answer must be a 200.
    let load: Vec<_> = (0..2)
        .map(|_| search_load(server.addr, frozen_text.clone(), None, stop.clone()))
        .collect();
    for i in 0..20 {
        let text = format!("Batch {i}: the quokka number {i} smiles at visitor {i} on Rottnest.");
        let (code, v) = admin.call(
            "POST",
            "/admin/documents",
            Some(&json!({"documents": [{"id": format!("load-{i}"), "text": text}]}).to_string()),
        );
        assert_eq!(code, 200, "{v}");
        // Acknowledged means searchable: the next search finds it first.
        assert_eq!(search(&server, &text)[0], format!("load-{i}"), "batch {i}");
        if i == 10 {
            let (code, v) = admin.call("DELETE", &format!("/admin/documents/{frozen_id}"), None);
            assert_eq!(code, 200, "{v}");
            assert!(!search(&server, &frozen_text).contains(&frozen_id));
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut served = 0;
    for l in load {
        let (ok, failed) = l.join().expect("load thread");
        assert!(
            failed.is_empty(),
            "failed searches under writes: {failed:?}"
        );
        served += ok;
    }
    assert!(served > 0, "the load threads searched nothing");
}

/// Waits (bounded) until the compaction started last has ended; its status.
fn compaction_ended(admin: &Admin) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let v = admin.get("/admin/index");
        if v["compaction"]["state"] != "running" {
            return v;
        }
        assert!(Instant::now() < deadline, "compaction never ended: {v}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn compaction_folds_writes_into_a_new_version_under_search_load_and_a_restart_serves_it() {
    let data = tempfile::tempdir().unwrap();
    let (mut server, admin) = start(data.path(), &[]);
    let (frozen_id, frozen_text) = frozen_document();
    // Nothing written: nothing to fold, and the index as built stays served.
    let (code, v) = admin.call("POST", "/admin/index/compact", None);
    assert_eq!(code, 202, "{v}");
    let v = compaction_ended(&admin);
    assert_eq!(v["compaction"]["state"], "nothing_to_do", "{v}");
    assert_eq!(v["version"], 0);
    let served_before = v["documents"].as_u64().expect("documents");
    // Writes: new documents (one with metadata), a frozen one replaced, one deleted.
    let texts: Vec<String> = (0..12)
        .map(|i| format!("Note {i}: the axolotl named Pixel {i} regrows limb {i} in Xochimilco."))
        .collect();
    let docs: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"id": format!("ax-{i}"), "text": t, "metadata": {"n": i}}))
        .collect();
    let (code, v) = admin.call(
        "POST",
        "/admin/documents",
        Some(&json!({ "documents": docs }).to_string()),
    );
    assert_eq!(code, 200, "{v}");
    let (code, v) = admin.call("DELETE", &format!("/admin/documents/{frozen_id}"), None);
    assert_eq!(code, 200, "{v}");
    let (code, v) = admin.call("DELETE", "/admin/documents/ax-11", None);
    assert_eq!(code, 200, "{v}");
    // Searches without pause while it compacts: every answer a 200.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load: Vec<_> = (0..2)
        .map(|t| {
            let hit = Some(format!("\"ax-{t}\""));
            search_load(server.addr, texts[t].clone(), hit, stop.clone())
        })
        .collect();
    let (code, v) = admin.call("POST", "/admin/index/compact", None);
    assert_eq!(code, 202, "{v}");
    assert_eq!(v["state"], "running", "{v}");
    // Its events, followed live by a client as alignment jobs' are: the stream ends by itself
    // after the final one.
    let follower = {
        let admin = admin.clone();
        std::thread::spawn(move || {
            jobs_common::follow_events(
                &admin,
                "/admin/index/compaction/events",
                Duration::from_secs(120),
            )
        })
    };
    // A write while it runs lands in this version or in the next live segment: found either way.
    let late = "The late pangolin Quill curls up beside the axolotl tank.";
    let (code, v) = admin.call(
        "POST",
        "/admin/documents",
        Some(&json!({"documents": [{"id": "late", "text": late}]}).to_string()),
    );
    assert_eq!(code, 200, "{v}");
    // A payload declaration while it runs is refused (the new version takes the declarations
    // the compaction started with), or, when it already ended, made and kept.
    let (declared, v) = admin.call(
        "PUT",
        "/admin/index/payload/n",
        Some(&json!({"type": "integer"}).to_string()),
    );
    assert!(
        declared == 409 && v["error"]["code"] == "compaction_running" || declared == 202,
        "{declared} {v}"
    );
    let v = compaction_ended(&admin);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    if declared == 202 {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (_, v) = admin.call("GET", "/admin/index", None);
            let keys: Vec<&str> = v["payload"]["indexes"]
                .as_array()
                .map(|a| a.iter().filter_map(|f| f["key"].as_str()).collect())
                .unwrap_or_default();
            if keys.contains(&"n") {
                break;
            }
            assert!(Instant::now() < deadline, "the declaration was lost: {v}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    for l in load {
        let (ok, failed) = l.join().expect("load thread");
        assert!(
            failed.is_empty(),
            "failed searches while compacting: {failed:?}"
        );
        assert!(ok > 0);
    }
    let c = &v["compaction"];
    assert_eq!(c["state"], "succeeded", "{v}");
    assert_eq!(v["version"], 1, "{v}");
    let streamed = follower.join().expect("event stream");
    let names: Vec<&str> = streamed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"started"), "{names:?}");
    assert_eq!(names.last(), Some(&"succeeded"), "{names:?}");
    assert!(names.contains(&"built"), "{names:?}");
    let seqs: Vec<u64> = streamed
        .iter()
        .map(|(_, d)| d["seq"].as_u64().expect("seq"))
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    // The same as JSON, from any event on; a bad `after` is a 422 naming it.
    let (code, listed) = admin.call(
        "GET",
        &format!("/admin/index/compaction/events?after={}", seqs[0]),
        None,
    );
    assert_eq!(code, 200, "{listed}");
    let listed: Vec<u64> = listed["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["seq"].as_u64().expect("seq"))
        .collect();
    assert_eq!(listed, seqs[1..], "{listed:?}");
    let (code, err) = admin.call("GET", "/admin/index/compaction/events?after=x", None);
    assert_eq!(
        (code, err["error"]["param"].as_str()),
        (422, Some("after")),
        "{err}"
    );
    // Nothing runs now: a stream replays what is left and ends at once.
    let tail = jobs_common::follow_events(
        &admin,
        &format!(
            "/admin/index/compaction/events?after={}",
            seqs[seqs.len() - 1]
        ),
        Duration::from_secs(30),
    );
    assert!(tail.is_empty(), "{tail:?}");
    assert_eq!(c["to_version"], 1);
    assert!(c["folded"].as_u64().unwrap() >= 11, "{c}");
    let kinds: Vec<&str> = c["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(kinds.first(), Some(&"started"), "{kinds:?}");
    assert!(
        kinds.contains(&"built") && kinds.last() == Some(&"succeeded"),
        "{kinds:?}"
    );
    // 200 + 12 written − 1 frozen deleted − 1 written deleted + the late one.
    assert_eq!(v["documents"].as_u64().unwrap(), served_before + 11, "{v}");
    let check = |admin: &Admin, server: &Server| {
        for (i, t) in texts.iter().enumerate().take(11) {
            assert_eq!(search(server, t)[0], format!("ax-{i}"));
        }
        assert!(!search(server, &texts[11]).contains(&"ax-11".to_string()));
        assert!(!search(server, &frozen_text).contains(&frozen_id));
        assert_eq!(search(server, late)[0], "late");
        assert_eq!(text_of(admin, "ax-11"), None);
        assert_eq!(text_of(admin, &frozen_id), None);
        let (code, d) = admin.call("GET", "/admin/documents/ax-3", None);
        assert_eq!(code, 200, "{d}");
        assert_eq!(
            d["metadata"],
            json!({"n": 3}),
            "metadata survives compaction: {d}"
        );
    };
    check(&admin, &server);
    let (_, metrics) = common::http_get(server.addr, "/metrics").expect("metrics");
    assert!(
        metrics.contains("capot_corpus_compactions_total{outcome=\"ok\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("capot_corpus_version 1"));
    // kill -9 and a restart: version 1 is served, the log replays only what came after it.
    kill(&mut server);
    let (mut server, admin) = start(data.path(), &[]);
    let v = admin.get("/admin/index");
    assert_eq!(v["version"], 1, "{v}");
    check(&admin, &server);
    // A second compaction replaces version 1, whose files go once no request holds them.
    let (code, v) = admin.call(
        "POST",
        "/admin/documents",
        Some(
            &json!({"documents": [{"id": "v2", "text": "A second version's okapi."}]}).to_string(),
        ),
    );
    assert_eq!(code, 200, "{v}");
    let (code, _) = admin.call("POST", "/admin/index/compact", None);
    assert_eq!(code, 202);
    let v = compaction_ended(&admin);
    assert_eq!(
        (v["version"].as_u64(), v["delta_documents"].as_u64()),
        (Some(2), Some(0)),
        "{v}"
    );
    let versions = data.path().join("corpus/versions");
    let deadline = Instant::now() + Duration::from_secs(30);
    while versions.join("v000001").exists() {
        assert!(Instant::now() < deadline, "version 1 never removed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(versions.join("v000002").is_dir());
    check(&admin, &server);
    kill(&mut server);
}

#[test]
fn a_full_live_segment_answers_503_and_a_compaction_makes_room() {
    let data = tempfile::tempdir().unwrap();
    let (_server, admin) = start(
        data.path(),
        &[
            ("CAPOT_MAX_LIVE_DOCUMENTS", "3"),
            ("CAPOT_COMPACT_LIVE_DOCUMENTS", "0"),
        ],
    );
    let write = |ids: &[&str]| {
        let docs: Vec<Value> = ids
            .iter()
            .map(|id| json!({"id": id, "text": format!("The {id} of the full segment.")}))
            .collect();
        admin.call(
            "POST",
            "/admin/documents",
            Some(&json!({ "documents": docs }).to_string()),
        )
    };
    let (code, v) = write(&["a", "b", "c"]);
    assert_eq!(code, 200, "{v}");
    let (code, v) = write(&["d"]);
    assert_eq!(code, 503, "{v}");
    assert_eq!(v["error"]["code"], "live_segment_full", "{v}");
    // The refusal started a compaction; once it is done the write goes through.
    let v = compaction_ended(&admin);
    assert_eq!(v["compaction"]["state"], "succeeded", "{v}");
    assert_eq!(v["compaction"]["trigger"], "live_segment_full", "{v}");
    assert_eq!(v["delta_documents"], 0, "{v}");
    let (code, v) = write(&["d"]);
    assert_eq!(code, 200, "{v}");
    for id in ["a", "b", "c", "d"] {
        assert!(text_of(&admin, id).is_some(), "{id}");
    }
}

#[test]
fn a_document_encoder_loaded_for_writes_alone_encodes_them_and_is_never_searched() {
    let data = tempfile::tempdir().unwrap();
    let models = tempfile::tempdir().unwrap();
    // The index's document encoder under another name (the same weights), for writes only.
    let doc = common::import_tiny(models.path(), "tiny-doc", 11);
    let s = serve_with(
        data.path(),
        &[
            "--grpc-addr",
            "off",
            "--document-encoder",
            doc.to_str().unwrap(),
        ],
        &[],
    );
    let text = "The okapi Juniper naps beside the document encoder's own shelf.";
    let (code, v) = s.admin.call(
        "POST",
        "/admin/documents",
        Some(&json!({"documents": [{"id": "okapi", "text": text}]}).to_string()),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(search(&s.server, text)[0], "okapi");
    let (_, metrics) = common::http_get(s.server.addr, "/metrics").expect("metrics");
    assert!(
        metrics.contains("capot_encode_batch_size_count{encoder=\"tiny-doc\"} 1"),
        "the write was encoded by --document-encoder: {metrics}"
    );
    let (_, info) = common::http_get(s.server.addr, "/info").expect("info");
    let info: Value = serde_json::from_str(&info).unwrap();
    assert!(
        !info["encoders"].to_string().contains("tiny-doc"),
        "searches never see it: {info}"
    );
    drop(s);
    // A bundle that is not the index's document encoder stops the start, with the reason.
    let other = common::import_tiny(models.path(), "other", 12);
    let w = jobs_common::world();
    let o = common::run_capot(
        &[
            "serve",
            "--index",
            w.index.to_str().unwrap(),
            "--encoder",
            w.base.to_str().unwrap(),
            "--document-encoder",
            other.to_str().unwrap(),
            "--addr",
            "127.0.0.1:0",
            "--admin-addr",
            "127.0.0.1:0",
            "--grpc-addr",
            "off",
            "--data-dir",
            data.path().to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--document-encoder") && err.contains("not the index's document encoder"),
        "{err}"
    );
}
