//! `capot eval` end to end: MiniLM with exact search on the shared samples must reproduce the
//! independently computed reference values, and bad input must fail clearly.

mod common;

use common::*;

fn metrics(report: &serde_json::Value, condition: &str) -> serde_json::Value {
    report["encoders"][0]["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .find(|c| c["condition"] == condition)
        .unwrap_or_else(|| panic!("no condition {condition}"))
        .clone()
}

fn close(got: &serde_json::Value, want: f64, what: &str) {
    let g = got
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: not a number: {got}"));
    assert!((g - want).abs() <= 0.005, "{what}: {g} vs reference {want}");
}

#[test]
fn dl19_clean_and_typo_files_reproduce_the_reference() {
    let data = shared().join("data/dl19-sample");
    let index = cached_index(&data);
    let out = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = vec![
        "eval".into(),
        "--dataset".into(),
        data.display().to_string(),
        "--index".into(),
        index.display().to_string(),
        "--encoder".into(),
        minilm_bundle().display().to_string(),
        "--out".into(),
        out.path().display().to_string(),
    ];
    for i in 1..=10 {
        args.push("--variants".into());
        args.push(
            data.join(format!("queries.typo{i}.tsv"))
                .display()
                .to_string(),
        );
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = run_capot(&refs, b"");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("report.json")).unwrap())
            .unwrap();
    let clean = metrics(&report, "clean");
    assert_eq!(clean["queries_evaluated"], 43);
    close(&clean["metrics"]["ndcg@10"], 0.7977, "clean nDCG@10");
    close(&clean["metrics"]["mrr@10"], 1.0, "clean MRR@10");
    close(&clean["metrics"]["recall@10"], 0.2197, "clean Recall@10");
    close(&clean["metrics"]["recall@100"], 0.8032, "clean Recall@100");
    let typo = metrics(&report, "typo-files mean");
    close(&typo["metrics"]["ndcg@10"], 0.7147, "typo nDCG@10");
    close(&typo["metrics"]["mrr@10"], 0.9401, "typo MRR@10");
    close(&typo["metrics"]["recall@10"], 0.1915, "typo Recall@10");
    close(&typo["metrics"]["recall@100"], 0.7381, "typo Recall@100");
    close(
        &typo["relative_change"]["ndcg@10"],
        -0.104,
        "typo relative nDCG@10 change",
    );
    // Embedding robustness is reported for variant conditions.
    let cos = typo["mean_cosine"].as_f64().expect("mean cosine");
    assert!(cos > 0.5 && cos < 1.0, "{cos}");
    assert!(typo["adjusted_cosine"].as_f64().is_some());
    // Markdown and chart are written too.
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(md.contains("typo-files mean") && md.contains("nDCG@10"));
    let svg = std::fs::read_to_string(out.path().join("report.svg")).unwrap();
    assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"));
    assert_eq!(
        svg.matches("class=\"bar\"").count(),
        2 * 12,
        "12 conditions × 2 metrics"
    );
}

/// nDCG@10 of `condition` for the encoder reported as `name`.
fn ndcg_of(report: &serde_json::Value, name: &str, condition: &str) -> f64 {
    report["encoders"]
        .as_array()
        .expect("encoders")
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no encoder {name}"))["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .find(|c| c["condition"] == condition)
        .unwrap_or_else(|| panic!("no condition {condition}"))["metrics"]["ndcg@10"]
        .as_f64()
        .expect("nDCG@10")
}

#[test]
fn repair_settings_are_weighed_by_retrieval_quality() {
    let data = shared().join("data/dl19-sample");
    let index = cached_index(&data);
    let typo = data.join("queries.typo1.tsv");
    let eval = |params: Option<&str>| {
        let out = tempfile::tempdir().unwrap();
        let mut args = vec![
            "eval".to_string(),
            "--dataset".into(),
            data.display().to_string(),
            "--index".into(),
            index.display().to_string(),
            "--encoder".into(),
            minilm_bundle().display().to_string(),
            "--variants".into(),
            typo.display().to_string(),
            "--repair".into(),
            "off,on".into(),
            "--out".into(),
            out.path().display().to_string(),
        ];
        if let Some(p) = params {
            args.extend(["--repair-params".to_string(), p.to_string()]);
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run_capot(&refs, b"");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.path().join("report.json")).unwrap())
                .unwrap();
        (
            ndcg_of(&report, "minilm", "queries.typo1"),
            ndcg_of(&report, "minilm+repair", "queries.typo1"),
        )
    };
    // The default speller wins back part of the loss.
    let (raw, repaired) = eval(None);
    assert!(repaired > raw + 0.01, "repair {repaired} vs none {raw}");
    // A speller that may change nothing (no word is long enough to edit, split or join) gives
    // back exactly what the raw queries find.
    let (raw_again, unchanged) = eval(Some(
        r#"{"min_letters": 100, "min_split_letters": 100, "min_join_letters": 100}"#,
    ));
    assert_eq!(raw_again, raw);
    assert_eq!(
        unchanged, raw,
        "a speller that edits nothing must not move nDCG"
    );
    // Settings that are no settings fail before any work, with the reason.
    let o = run_capot(
        &[
            "eval",
            "--dataset",
            data.to_str().unwrap(),
            "--index",
            index.to_str().unwrap(),
            "--encoder",
            minilm_bundle().to_str().unwrap(),
            "--repair",
            "on",
            "--repair-params",
            r#"{"no_such_setting": 1}"#,
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--repair-params") && err.contains("no_such_setting"),
        "{err}"
    );
}

#[test]
fn dbpedia_clean_reproduces_the_reference_and_noise_runs_over_seeds() {
    let data = shared().join("data/dbpedia-sample");
    let index = cached_index(&data);
    let out = tempfile::tempdir().unwrap();
    let o = run_capot(
        &[
            "eval",
            "--dataset",
            data.to_str().unwrap(),
            "--index",
            index.to_str().unwrap(),
            "--encoder",
            minilm_bundle().to_str().unwrap(),
            "--noise",
            "typo,reorder",
            "--seeds",
            "2",
            "--out",
            out.path().to_str().unwrap(),
        ],
        b"",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("report.json")).unwrap())
            .unwrap();
    let clean = metrics(&report, "clean");
    assert_eq!(clean["queries_evaluated"], 40);
    close(
        &clean["metrics"]["ndcg@10"],
        0.5114,
        "dbpedia clean nDCG@10",
    );
    for c in [
        "typo seed 0",
        "typo seed 1",
        "typo mean over seeds",
        "reorder mean over seeds",
    ] {
        let row = metrics(&report, c);
        assert!(
            row["metrics"]["ndcg@10"].as_f64().unwrap()
                < clean["metrics"]["ndcg@10"].as_f64().unwrap() + 0.05,
            "{c}"
        );
    }
}

#[test]
fn a_filtered_evaluation_finds_only_what_the_filter_admits() {
    // The built-in corpus, its queries and judgements, indexed with metadata.
    let data = root().join("data/default-corpus");
    let bundle = minilm_bundle();
    let relevant: Vec<String> = std::fs::read_to_string(data.join("qrels/test.tsv"))
        .unwrap()
        .lines()
        .skip(1)
        .filter_map(|l| l.split('\t').nth(1).map(str::to_string))
        .collect();
    let eval = |filter: &serde_json::Value| {
        let out = tempfile::tempdir().unwrap();
        let o = run_capot(
            &[
                "eval",
                "--dataset",
                data.to_str().unwrap(),
                "--index",
                filtered_index().to_str().unwrap(),
                "--encoder",
                bundle.to_str().unwrap(),
                "--out",
                out.path().to_str().unwrap(),
                "--filter",
                &filter.to_string(),
            ],
            b"",
        );
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        let report = std::fs::read_to_string(out.path().join("report.json"))
            .ok()
            .map(|t| serde_json::from_str::<serde_json::Value>(&t).unwrap());
        (o.status.code(), stderr, report)
    };
    // A filter refusing one document nobody judged: the unfiltered figures.
    let (code, stderr, all) = eval(&serde_json::json!({"must_not": [{"has_id": ["nope"]}]}));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("admits 200 of 200"), "{stderr}");
    let all = metrics(&all.expect("report"), "clean")["metrics"]["ndcg@10"]
        .as_f64()
        .unwrap();
    assert!(all > 0.5, "nDCG@10 {all}");
    // Refusing every judged document leaves nothing to find.
    let (code, stderr, none) = eval(&serde_json::json!({"must_not": [{"has_id": relevant}]}));
    assert_eq!(code, Some(0), "{stderr}");
    let none = metrics(&none.expect("report"), "clean")["metrics"]["ndcg@10"]
        .as_f64()
        .unwrap();
    assert_eq!(none, 0.0);
    // A filter that admits nothing (a value no document has) measures nothing: refused.
    let (code, stderr, report) =
        eval(&serde_json::json!({"must": [{"key": "lang", "match": {"value": "klingon"}}]}));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.starts_with("error: --filter admits none"),
        "{stderr}"
    );
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        report.is_none(),
        "no report for a filter that admits nothing"
    );
}

#[test]
fn bad_input_fails_before_any_work() {
    let data = shared().join("data/dl19-sample");
    let bundle = minilm_bundle();
    let dir = tempfile::tempdir().unwrap();
    // Variants for query ids the dataset does not have.
    let stray = dir.path().join("stray.tsv");
    std::fs::write(&stray, "no-such-query\tsome text\n").unwrap();
    let o = run_capot(
        &[
            "eval",
            "--dataset",
            data.to_str().unwrap(),
            "--index",
            "/nonexistent",
            "--encoder",
            bundle.to_str().unwrap(),
            "--variants",
            stray.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no-such-query"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // No such dataset.
    let o = run_capot(
        &[
            "eval",
            "--dataset",
            "/nonexistent",
            "--index",
            "/x",
            "--encoder",
            "/y",
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("error: "));
    // Unknown noise kind.
    let o = run_capot(
        &[
            "eval",
            "--dataset",
            data.to_str().unwrap(),
            "--index",
            "/x",
            "--encoder",
            "/y",
            "--noise",
            "typoo",
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("typoo"));
    // A server that is not there.
    let o = run_capot(
        &[
            "eval",
            "--dataset",
            data.to_str().unwrap(),
            "--server",
            "http://127.0.0.1:9",
            "--encoder",
            "default",
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("127.0.0.1:9"));
    // Speller settings are the server's own.
    let o = run_capot(
        &[
            "eval",
            "--dataset",
            data.to_str().unwrap(),
            "--server",
            "http://127.0.0.1:9",
            "--encoder",
            "default",
            "--repair",
            "on",
            "--repair-params",
            "{}",
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--repair-params"));
    // Neither --index nor --server.
    let o = run_capot(
        &[
            "eval",
            "--dataset",
            data.to_str().unwrap(),
            "--encoder",
            "/y",
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(2), "usage error");
}

#[test]
fn evaluating_the_live_service_equals_local_evaluation_with_the_same_ef() {
    let data = root().join("data/default-corpus");
    let index = default_index();
    let bundle = minilm_bundle();
    let server = Server::start(&[
        "--index",
        index.to_str().unwrap(),
        "--encoder",
        bundle.to_str().unwrap(),
    ]);
    let typo = data.join("queries.typo.tsv");
    let run = |target: &[&str], out: &std::path::Path| -> serde_json::Value {
        let mut args = vec![
            "eval",
            "--dataset",
            data.to_str().unwrap(),
            "--variants",
            typo.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(target);
        let o = run_capot(&args, b"");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap()
    };
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let live = run(
        &["--server", &server.base, "--encoder", "default"],
        a.path(),
    );
    let local = run(
        &[
            "--index",
            index.to_str().unwrap(),
            "--encoder",
            bundle.to_str().unwrap(),
            "--ef",
            "64",
        ],
        b.path(),
    );
    for cond in ["clean", "queries.typo"] {
        let l = metrics(&live, cond);
        let r = metrics(&local, cond);
        for m in ["ndcg@10", "mrr@10", "recall@10", "recall@100", "map"] {
            let (x, y) = (
                l["metrics"][m].as_f64().unwrap(),
                r["metrics"][m].as_f64().unwrap(),
            );
            assert!((x - y).abs() < 1e-6, "{cond} {m}: live {x} vs local {y}");
        }
    }
    assert_eq!(live["encoders"][0]["name"], "default");
    // The built-in corpus is searchable: clean quality is far above chance.
    assert!(
        metrics(&live, "clean")["metrics"]["ndcg@10"]
            .as_f64()
            .unwrap()
            > 0.5
    );
}
