//! Query repair end to end: `capot index vocab` and `capot repair` as a user runs them, and the
//! `repair` stage of `/search` (single and batch), its errors, `/info`, `/metrics` and a
//! per-alias pipeline set through the admin API and kept in the state file.

mod common;
mod registry_common;

use std::path::{Path, PathBuf};

use common::{run_capot, Server};
use registry_common::Admin;
use serde_json::{json, Value};

fn curl_post(server: &Server, path: &str, body: &Value) -> (u16, Value) {
    let out = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "60", "-o", "-", "-w", "\n%{http_code}"])
        .args(["-H", "content-type: application/json", "-d"])
        .arg(body.to_string())
        .arg(format!("http://{}{path}", server.addr))
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').expect("status line");
    (
        code.trim().parse().expect("status"),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

/// A copy of the default index with its vocabulary removed, as an index built before it existed.
fn index_without_vocab(dir: &Path) -> PathBuf {
    let src = common::default_index();
    let out = dir.join("old-index");
    std::fs::create_dir_all(&out).unwrap();
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(src.join("index.json")).unwrap()).unwrap();
    let vocab = manifest
        .as_object_mut()
        .unwrap()
        .remove("vocab")
        .expect("a fresh index has a vocabulary");
    for f in [&vocab["words_file"], &vocab["pairs_file"]] {
        manifest["files"]
            .as_object_mut()
            .unwrap()
            .remove(f.as_str().unwrap());
    }
    for entry in std::fs::read_dir(src).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        if !name.starts_with("vocab-") && name != "index.json" {
            std::fs::copy(&p, out.join(&name)).unwrap();
        }
    }
    std::fs::write(out.join("index.json"), manifest.to_string()).unwrap();
    out
}

#[test]
fn index_vocab_and_repair_cli() {
    let tmp = tempfile::tempdir().unwrap();
    let old = index_without_vocab(tmp.path());
    let old_s = old.to_str().unwrap();
    let typo = common::root().join("data/default-corpus/queries.typo.tsv");
    let typo_s = typo.to_str().unwrap();

    // An old index: one clear line, exit 1.
    let o = run_capot(&["repair", "--index", old_s, "--queries", typo_s], b"");
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no vocabulary") && err.contains("capot index vocab"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    // `capot index vocab` adds it without touching the vectors; the index still loads.
    let vectors_before = std::fs::read(old.join("vectors.f32")).unwrap();
    let o = run_capot(&["index", "vocab", old_s], b"");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let info: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(info["words"].as_u64().unwrap() > 500, "{info}");
    assert_eq!(
        std::fs::read(old.join("vectors.f32")).unwrap(),
        vectors_before
    );
    let shown = run_capot(&["index", "show", old_s], b"");
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["vocab"]["words"], info["words"]);

    // JSON lines: the edits and a confidence; the typo queries of the built-in corpus are
    // mostly restored.
    let o = run_capot(&["repair", "--index", old_s, "--queries", typo_s], b"");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let changed: Vec<&Value> = lines.iter().filter(|l| l["changed"] == true).collect();
    assert!(
        changed.len() * 2 > lines.len(),
        "{} of {}",
        changed.len(),
        lines.len()
    );
    let q2 = lines.iter().find(|l| l["id"] == "q02").expect("q02");
    assert_eq!(q2["repaired"], "symptoms of vitamin d deficiency", "{q2}");
    assert_eq!(q2["edits"][0]["from"], "deficeincy");
    assert_eq!(q2["edits"][0]["to"], "deficiency");
    assert_eq!(q2["edits"][0]["kind"], "non_word");
    assert!(q2["confidence"].as_f64().unwrap() > 0.0);
    let summary = String::from_utf8_lossy(&o.stderr);
    assert!(
        summary.contains(&format!("changed {} of", changed.len())),
        "{summary}"
    );

    // Clean queries stay as they are; TSV output from stdin.
    let clean = "q1\twhat is the capital of australia\nq2\thow long do antibiotics take to work\n";
    let o = run_capot(
        &["repair", "--index", old_s, "--format", "tsv"],
        clean.as_bytes(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), clean);

    // --explain: why a word was corrected, with the readings weighed; not with TSV.
    let o = run_capot(
        &["repair", "--index", old_s, "--explain"],
        b"q1\tsymptoms of vitamin d deficeincy\n",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let typo = &v["explain"]["words"][4];
    assert_eq!(typo["word"], "deficeincy", "{v}");
    let taken: Vec<&Value> = typo["readings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["chosen"] == true)
        .collect();
    assert_eq!(taken.len(), 1, "{v}");
    assert_eq!(taken[0]["meant"], "deficiency", "{v}");
    // Both paths reading by reading: what each pair gave, less the costs, is the path's score.
    for (path, score) in [("best_path", "best_score"), ("typed_path", "typed_score")] {
        let steps = v["explain"][path].as_array().unwrap();
        assert_eq!(steps.len(), 5, "{v}");
        let sum: f64 = steps
            .iter()
            .map(|s| s["ln_context"].as_f64().unwrap() - s["cost"].as_f64().unwrap())
            .sum();
        let want = v["explain"][score].as_f64().unwrap();
        assert!(
            (sum - want).abs() < 1e-6,
            "{path}: {sum} against {want}: {v}"
        );
    }
    assert_eq!(v["explain"]["best_path"][4]["meant"], "deficiency", "{v}");
    assert_eq!(v["explain"]["typed_path"][4]["meant"], "deficeincy", "{v}");
    let o = run_capot(
        &["repair", "--index", old_s, "--explain", "--format", "tsv"],
        clean.as_bytes(),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--format json"));

    // A lexicon that cannot be read is an error, not a silent fallback.
    let o = run_capot(
        &[
            "repair",
            "--index",
            old_s,
            "--lexicon",
            "/nonexistent/words.txt",
        ],
        clean.as_bytes(),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/words.txt"));
}

#[test]
fn repair_cli_lets_the_index_vote_with_an_encoder() {
    let index = common::default_index();
    let index_s = index.to_str().unwrap();
    let minilm = common::minilm_bundle().to_str().unwrap().to_string();
    let typo = common::root().join("data/default-corpus/queries.typo.tsv");
    let typo_s = typo.to_str().unwrap();

    // With the encoder the index was built with, each query is searched first and the words of
    // what it retrieves are in the explanation, per word and per reading.
    let o = run_capot(
        &[
            "repair",
            "--index",
            index_s,
            "--encoder",
            &minilm,
            "--explain",
        ],
        b"q1\tsymptoms of vitamin d deficeincy\n",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["repaired"], "symptoms of vitamin d deficiency", "{v}");
    let words = v["explain"]["words"].as_array().unwrap();
    let vitamin = words
        .iter()
        .find(|w| w["word"] == "vitamin")
        .expect("vitamin");
    assert!(vitamin["documents_using"].as_u64().unwrap() >= 1, "{v}");
    let typo_word = words.iter().find(|w| w["word"] == "deficeincy").unwrap();
    assert_eq!(typo_word["documents_using"], 0, "{v}");
    let meant = typo_word["readings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["meant"] == "deficiency")
        .expect("deficiency weighed");
    assert!(meant["documents_using"].as_u64().unwrap() >= 2, "{v}");

    // The built-in typo queries: the vote keeps or adds to what the speller restores alone.
    let restored = |args: &[&str]| {
        let o = run_capot(args, b"");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.contains("\"changed\":true"))
            .count()
    };
    let alone = restored(&[
        "repair",
        "--index",
        index_s,
        "--queries",
        typo_s,
        "--no-vote",
    ]);
    let voted = restored(&[
        "repair",
        "--index",
        index_s,
        "--queries",
        typo_s,
        "--encoder",
        &minilm,
    ]);
    assert!(
        voted >= alone && alone > 0,
        "{voted} with the vote, {alone} without"
    );

    // An encoder that does not fit the index, or the vote turned off, is one clear line.
    let tmp = tempfile::tempdir().unwrap();
    let tiny = common::import_tiny(tmp.path(), "tiny", 7);
    let o = run_capot(
        &[
            "repair",
            "--index",
            index_s,
            "--encoder",
            tiny.to_str().unwrap(),
        ],
        b"q1\tvitamin d\n",
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("tiny"), "{err}");
    let o = run_capot(
        &[
            "repair",
            "--index",
            index_s,
            "--encoder",
            &minilm,
            "--params",
            r#"{"vote_documents": 0}"#,
        ],
        b"q1\tvitamin d\n",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("vote"));
}

#[test]
fn repair_cli_votes_with_the_encoder_that_built_the_index_when_the_assets_hold_it() {
    let index = common::default_index().to_str().unwrap().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let assets = tmp.path().join("assets");
    let encoders = assets.join("encoders");
    std::fs::create_dir_all(&encoders).unwrap();
    std::os::unix::fs::symlink(common::assets().join("lexicon"), assets.join("lexicon")).unwrap();
    // A bundle of another vector space sorts first: the fingerprint, not the order, decides.
    common::import_tiny(&encoders, "a-tiny", 7);
    let query = b"q1\tsymptoms of vitamin d deficeincy\n";
    let repair = |extra: &[&str]| {
        let mut c = common::capot();
        c.env("CAPOT_ASSETS", &assets)
            .args(["repair", "--index", &index, "--explain"])
            .args(extra)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = c.spawn().expect("spawn capot");
        use std::io::Write;
        child.stdin.take().unwrap().write_all(query).unwrap();
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        (v, String::from_utf8_lossy(&o.stderr).to_string())
    };
    let voted = |v: &Value| {
        v["explain"]["words"]
            .as_array()
            .unwrap()
            .iter()
            .all(|w| w.get("documents_using").is_some())
    };

    // Only a bundle of another space: the speller decides alone, silently.
    let (v, err) = repair(&[]);
    assert!(!voted(&v), "{v}");
    assert!(!err.contains("vote"), "{err}");

    // The index's own encoder among the assets: it votes, and says with which bundle.
    let own = encoders.join("minilm");
    std::os::unix::fs::symlink(common::minilm_bundle(), &own).unwrap();
    let (v, err) = repair(&[]);
    assert!(voted(&v), "{v}");
    assert_eq!(v["repaired"], "symptoms of vitamin d deficiency", "{v}");
    assert!(err.contains("the index's vote, with minilm@"), "{err}");
    assert!(err.contains(own.to_str().unwrap()), "{err}");

    // `--no-vote` decides without it; `vote_documents` 0 too.
    for off in [
        &["--no-vote"][..],
        &["--params", r#"{"vote_documents": 0}"#],
    ] {
        let (v, err) = repair(off);
        assert!(!voted(&v), "{off:?}: {v}");
        assert!(!err.contains("vote"), "{off:?}: {err}");
    }
}

#[test]
fn repair_eval_measures_how_much_meaning_repair_brings_back() {
    let index = common::default_index().to_str().unwrap().to_string();
    let minilm = common::minilm_bundle().to_str().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("list.txt");
    std::fs::write(&list, "deficiency: deficeincy\n").unwrap();
    let queries = dir.path().join("queries.tsv");
    std::fs::write(
        &queries,
        "q1\tsymptoms of vitamin d deficiency\nq2\tvitamin d deficiency in adults\n",
    )
    .unwrap();
    let out = dir.path().join("report.json");
    let args = |extra: &[&str]| {
        let mut a: Vec<String> = [
            "repair",
            "eval",
            "--index",
            &index,
            "--queries",
            queries.to_str().unwrap(),
            "--misspellings",
            list.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let run = |extra: &[&str]| {
        let a = args(extra);
        run_capot(&a.iter().map(String::as_str).collect::<Vec<_>>(), b"")
    };

    let o = run(&["--meaning", &minilm]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("meaning (cosine to clean)"), "{table}");
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let report = &v["injected"][0]["report"];
    assert_eq!(report["restored"], 2, "{report}");
    let m = &report["meaning"];
    assert_eq!(m["queries"], 2, "{m}");
    let (typed, repaired) = (
        m["typed"].as_f64().unwrap(),
        m["repaired"].as_f64().unwrap(),
    );
    // Both restored: the repaired query is the clean one; the typo moved the typed one away.
    assert!((repaired - 1.0).abs() < 1e-4, "{m}");
    assert!(typed > 0.3 && typed < 0.99, "{m}");

    // Without it, neither the column nor the field.
    let o = run(&[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("meaning"));
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert!(v["injected"][0]["report"].get("meaning").is_none(), "{v}");

    // A directory that holds no encoder: one line naming it, exit 1.
    let o = run(&["--meaning", dir.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--meaning"), "{err}");
}

#[test]
fn bench_repair_measures_several_settings_on_one_vocabulary() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/default-corpus");
    let queries = dir.path().join("q.tsv");
    std::fs::write(
        &queries,
        "q1\tsymptoms of vitamin d deficeincy\nq2\twhat is the capital of australia\n",
    )
    .unwrap();
    let (c, q) = (corpus.to_str().unwrap(), queries.to_str().unwrap());
    // Two settings: the defaults, and one that lets no word change (no candidate is close).
    let o = run_capot(
        &[
            "bench",
            "repair",
            "--corpus",
            c,
            "--queries",
            q,
            "--passes",
            "2",
            "--params",
            "{}",
            "--params",
            r#"{"min_letters": 40, "min_split_letters": 40, "min_join_letters": 40}"#,
        ],
        b"",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let runs = v["repair"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{v}");
    assert_eq!(runs[0]["params"], json!({}));
    assert_eq!(runs[0]["changed"], 1, "{v}");
    assert_eq!(
        runs[0]["changes"],
        json!([[
            "symptoms of vitamin d deficeincy",
            "symptoms of vitamin d deficiency"
        ]])
    );
    assert_eq!(runs[1]["params"]["min_letters"], 40);
    assert_eq!(runs[1]["changed"], 0, "{v}");
    assert!(runs.iter().all(|r| r["p50_us"].as_f64().unwrap() > 0.0));
    // A setting that is not one is refused with its reason, before any work.
    let o = run_capot(
        &[
            "bench",
            "repair",
            "--corpus",
            c,
            "--queries",
            q,
            "--params",
            r#"{"no_such": 1}"#,
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--params"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A server on the built-in index and MiniLM, with its data directory under `dir`.
fn minilm_server(dir: &Path, extra: &[&str]) -> Server {
    let data = dir.join("data");
    let index = common::default_index().to_str().unwrap().to_string();
    let bundle = common::minilm_bundle().to_str().unwrap().to_string();
    let mut args = vec![
        "--index",
        &index,
        "--encoder",
        &bundle,
        "--data-dir",
        data.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    Server::start(&args)
}

/// The typo query searched with the server's defaults: 200, repaired; the response.
fn typo_search_is_repaired(server: &Server) -> Value {
    let (code, v) = curl_post(
        server,
        "/search",
        &json!({ "query": "symptoms of vitamin d deficeincy", "k": 3 }),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(
        v["repair"]["text"], "symptoms of vitamin d deficiency",
        "{v}"
    );
    v
}

/// The typo query searched with its repaired text alone finds what the clean query finds, and
/// the clean query is not repaired.
fn repaired_alone_finds_what_the_clean_query_finds(server: &Server) {
    let (_, repaired) = curl_post(
        server,
        "/search",
        &json!({ "query": "symptoms of vitamin d deficeincy", "k": 3, "repair_fusion": "repaired" }),
    );
    let (_, clean) = curl_post(
        server,
        "/search",
        &json!({ "query": "symptoms of vitamin d deficiency", "k": 3 }),
    );
    assert!(
        clean.get("repair").is_none(),
        "a clean query is not repaired: {clean}"
    );
    assert_eq!(common::hit_ids(&repaired), common::hit_ids(&clean));
}

#[test]
fn search_repairs_reports_and_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let server = minilm_server(tmp.path(), &[]);
    let data = tmp.path().join("data");

    let (code, info) = {
        let (c, b) = common::http_get(server.addr, "/info").unwrap();
        (c, serde_json::from_str::<Value>(&b).unwrap())
    };
    assert_eq!(code, 200);
    assert_eq!(info["repair"]["status"], "ready", "{}", info["repair"]);
    assert_eq!(info["repair"]["default_mode"], "auto");
    assert_eq!(info["repair"]["default_fusion"], "max");
    assert!(info["repair"]["lexicon"]["words"].as_u64().unwrap() > 80_000);
    // The default lists include SymSpell's word pairs; the index its own bigram counts.
    assert!(
        info["repair"]["lexicon"]["pairs"].as_u64().unwrap() > 200_000,
        "{}",
        info["repair"]
    );
    assert_eq!(
        info["repair"]["model"]["corpus_bigrams"], true,
        "{}",
        info["repair"]
    );
    assert_eq!(
        info["repair"]["model"]["missing"],
        json!([]),
        "{}",
        info["repair"]
    );

    // The default (auto, max) repairs and says so.
    let v = typo_search_is_repaired(&server);
    assert_eq!(v["repair"]["edits"][0]["from"], "deficeincy");
    assert_eq!(v["repair"]["fusion"], "max");
    assert!(v["timings_ms"]["repair"].as_f64().unwrap() >= 0.0);
    repaired_alone_finds_what_the_clean_query_finds(&server);
    // Off: searched as written.
    let (_, off) = curl_post(
        &server,
        "/search",
        &json!({ "query": "symptoms of vitamin d deficeincy", "repair": "off" }),
    );
    assert!(off.get("repair").is_none(), "{off}");

    // Batches: one entry per query, null where nothing changed.
    let (code, b) = curl_post(
        &server,
        "/search",
        &json!({ "queries": ["what is the capital of austrlia", "how long to boil an egg"], "k": 2 }),
    );
    assert_eq!(code, 200, "{b}");
    assert_eq!(
        b["repairs"][0]["text"], "what is the capital of australia",
        "{b}"
    );
    assert!(b["repairs"][1].is_null(), "{b}");

    // Bad values: 422 naming the field.
    for body in [
        json!({ "query": "x", "repair": "sometimes" }),
        json!({ "query": "x", "repair_fusion": "rrf" }),
    ] {
        let (code, e) = curl_post(&server, "/search", &body);
        assert!(code == 422 || code == 400, "{code} {e}");
        assert!(
            e["error"]["message"].as_str().unwrap().contains("repair"),
            "{e}"
        );
    }

    // Metrics by outcome and encoder.
    let (_, text) = common::http_get(server.addr, "/metrics").unwrap();
    let value = |outcome: &str| -> f64 {
        let want = format!("outcome=\"{outcome}\"");
        text.lines()
            .filter(|l| l.starts_with("capot_query_repairs_total{"))
            .filter(|l| l.contains(&want) && l.contains("encoder=\"minilm\""))
            .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
            .sum()
    };
    assert!(value("changed") >= 3.0, "{text}");
    assert!(value("unchanged") >= 2.0, "{text}");
    assert!(text.contains("stage=\"repair\""), "no repair stage timing");

    // A per-alias pipeline, swapped through the admin API and kept in the state file.
    let admin = Admin::of(&server, &data);
    let (code, r) = admin.call(
        "PUT",
        "/admin/aliases/strict",
        Some(r#"{"encoder": "minilm", "repair": "off"}"#),
    );
    assert_eq!(code, 200, "{r}");
    assert_eq!(r["pipeline"]["repair"], "off");
    let (_, strict) = curl_post(
        &server,
        "/search",
        &json!({ "query": "symptoms of vitamin d deficeincy", "encoder": "strict" }),
    );
    assert!(strict.get("repair").is_none(), "{strict}");
    // The request still wins over its alias.
    let (_, forced) = curl_post(
        &server,
        "/search",
        &json!({ "query": "symptoms of vitamin d deficeincy", "encoder": "strict", "repair": "on" }),
    );
    assert!(forced["repair"].is_object(), "{forced}");
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("state.json")).unwrap()).unwrap();
    assert_eq!(state["pipelines"]["strict"]["repair"], "off", "{state}");
    let (code, r) = admin.call(
        "PUT",
        "/admin/aliases/strict",
        Some(r#"{"encoder": "minilm", "repair": "never"}"#),
    );
    assert!(code == 422 || code == 400, "{code} {r}");
}

#[test]
fn search_lets_the_index_vote_when_asked_and_reports_its_cost() {
    let tmp = tempfile::tempdir().unwrap();
    let server = minilm_server(tmp.path(), &["--repair-vote-documents", "10"]);
    let (_, info) = common::http_get(server.addr, "/info").unwrap();
    let info: Value = serde_json::from_str(&info).unwrap();
    assert_eq!(info["repair"]["vote_documents"], 10, "{}", info["repair"]);

    // A typo is still repaired (the raw text searched first, the corrected one after), fused,
    // and the vote's time is reported beside the other stages.
    let v = typo_search_is_repaired(&server);
    assert!(v["timings_ms"]["vote"].as_f64().unwrap() > 0.0, "{v}");
    repaired_alone_finds_what_the_clean_query_finds(&server);
    // A batch: each query voted on by its own documents, in order.
    let (code, b) = curl_post(
        &server,
        "/search",
        &json!({ "queries": ["how long to boil an egg", "what is the capital of austrlia"], "k": 2 }),
    );
    assert_eq!(code, 200, "{b}");
    assert!(b["repairs"][0].is_null(), "{b}");
    assert_eq!(
        b["repairs"][1]["text"], "what is the capital of australia",
        "{b}"
    );
    // Off: no vote, no time for it.
    let (_, off) = curl_post(
        &server,
        "/search",
        &json!({ "query": "symptoms of vitamin d deficeincy", "repair": "off" }),
    );
    assert_eq!(off["timings_ms"]["vote"], 0.0, "{off}");

    // Prometheus counts the queries the index voted on (the four above), and times the stage.
    let (_, metrics) = common::http_get(server.addr, "/metrics").unwrap();
    let votes: f64 = metrics
        .lines()
        .find(|l| l.starts_with("capot_query_repair_votes_total{"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("no vote counter in {metrics}"));
    assert_eq!(votes, 5.0, "{metrics}");
    assert!(
        metrics.contains(
            "capot_request_stage_duration_seconds_count{encoder=\"minilm\",stage=\"vote\"}"
        ),
        "{metrics}"
    );

    // A query the speller leaves as typed is answered by the vote's own search of it (not
    // searched again): the same hits, scores and metadata as with repair off, for fewer or more
    // hits than the 10 documents that vote.
    for k in [3, 15] {
        let body = |repair: &str| json!({ "query": "how long to boil an egg", "k": k, "with_metadata": true, "repair": repair });
        let (code, voted) = curl_post(&server, "/search", &body("auto"));
        assert_eq!(code, 200, "{voted}");
        let (_, off) = curl_post(&server, "/search", &body("off"));
        assert!(voted.get("repair").is_none(), "{voted}");
        assert!(
            voted["timings_ms"]["vote"].as_f64().unwrap() > 0.0,
            "{voted}"
        );
        // Its search is the vote's: none after it.
        assert_eq!(voted["timings_ms"]["search"], 0.0, "{voted}");
        assert_eq!(
            voted["results"].as_array().map(Vec::len),
            Some(k),
            "{voted}"
        );
        assert_eq!(voted["results"], off["results"], "k {k}");
    }
    // In a batch each query keeps its place, answered by the vote's search or searched again.
    let texts = [
        "what is the capital of austrlia",
        "how long to boil an egg",
        "symptoms of vitamin d deficeincy",
    ];
    let (_, batch) = curl_post(&server, "/search", &json!({ "queries": texts, "k": 2 }));
    for (i, text) in texts.iter().enumerate() {
        let (_, single) = curl_post(&server, "/search", &json!({ "query": text, "k": 2 }));
        assert_eq!(batch["results"][i], single["results"], "{text}: {batch}");
    }
}
