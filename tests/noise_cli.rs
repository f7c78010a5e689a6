//! `capot noise` through the binary: determinism, formats, errors.

mod common;

use common::*;

const QUERIES: &[u8] = b"q1\twhat is the daily life of thai people\nq2\tcauses of left ventricular hypertrophy\nq3\tcaf\xc3\xa9 na\xc3\xafve r\xc3\xa9sum\xc3\xa9 \xe6\x9d\xb1\xe4\xba\xac\n";

#[test]
fn same_seed_gives_byte_identical_output_and_another_seed_differs() {
    let args = [
        "noise",
        "--kind",
        "typos,typo,reorder,determiner,punct",
        "--seed",
        "7",
        "--variants",
        "3",
    ];
    let a = run_capot(&args, QUERIES);
    let b = run_capot(&args, QUERIES);
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
    let text = String::from_utf8(a.stdout.clone()).expect("UTF-8 output");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("query-id\tkind\tvariant\tapplied\ttext"));
    // 3 queries × 7 kinds (typos = 3) × 3 variants.
    assert_eq!(lines.clone().count(), 3 * 7 * 3);
    for l in lines {
        let cols: Vec<&str> = l.split('\t').collect();
        assert_eq!(cols.len(), 5, "{l}");
        assert!(cols[3] == "true" || cols[3] == "false");
    }
    let other = run_capot(
        &[
            "noise",
            "--kind",
            "typos,typo,reorder,determiner,punct",
            "--seed",
            "8",
            "--variants",
            "3",
        ],
        QUERIES,
    );
    assert_ne!(a.stdout, other.stdout);
}

#[test]
fn jsonl_input_and_per_kind_variant_files() {
    let dir = tempfile::tempdir().unwrap();
    let queries = shared().join("data/dl19-sample/queries.jsonl");
    let o = run_capot(
        &[
            "noise",
            "--kind",
            "typo",
            "--variants",
            "2",
            "--queries",
            queries.to_str().unwrap(),
            "--out-dir",
            dir.path().to_str().unwrap(),
        ],
        b"",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for v in ["typo-0.tsv", "typo-1.tsv"] {
        let text = std::fs::read_to_string(dir.path().join(v)).unwrap();
        assert_eq!(text.lines().count(), 50, "{v}: one line per query");
        assert!(
            text.lines().all(|l| l.split('\t').count() == 2),
            "{v}: plain qid<TAB>text"
        );
    }
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("typo: changed"), "{stderr}");
}

#[test]
fn unchanged_queries_are_reported_not_counted_as_changed() {
    let o = run_capot(
        &["noise", "--kind", "stopwords"],
        b"q1\tthe of and\nq2\tthe cat\n",
    );
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("q1\tstopwords\t0\tfalse\tthe of and"),
        "{text}"
    );
    assert!(text.contains("q2\tstopwords\t0\ttrue\tcat"), "{text}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("1 left unchanged"));
}

#[test]
fn bad_input_is_a_clear_error() {
    let o = run_capot(&["noise", "--kind", "typo,bogus"], QUERIES);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("bogus") && e.contains("typo"), "{e}");

    let o = run_capot(&["noise", "--kind", "typo"], b"q1 no tab here\n");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("<stdin>:1: bad TSV line"));

    let o = run_capot(&["noise", "--kind", "typo"], b"");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no queries"));

    let o = run_capot(
        &["noise", "--kind", "typo"],
        b"q1\tfine\nq1\tduplicate id\n",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("<stdin>:2: duplicate id"));
}

#[test]
fn real_misspellings_and_real_words_are_noise_kinds() {
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("list.txt");
    std::fs::write(&list, "people: peeple poeple\nhypertrophy: hypertrofy\n").unwrap();
    let o = run_capot(
        &[
            "noise",
            "--kind",
            "misspell",
            "--misspellings",
            list.to_str().unwrap(),
        ],
        QUERIES,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    let rows: Vec<Vec<&str>> = out
        .lines()
        .skip(1)
        .map(|l| l.split('\t').collect())
        .collect();
    assert_eq!(rows.len(), 3);
    assert!(
        [
            "what is the daily life of thai peeple",
            "what is the daily life of thai poeple"
        ]
        .contains(&rows[0][4]),
        "{rows:?}"
    );
    assert_eq!(rows[1][4], "causes of left ventricular hypertrofy");
    assert_eq!(
        (rows[2][3], rows[2][4]),
        ("false", "café naïve résumé 東京")
    );

    // Without a list, a clear reason and exit code 1.
    let o = run_capot(&["noise", "--kind", "misspell"], QUERIES);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("--misspellings"), "{e}");

    // Real words come from the lexicon: none loaded, a clear reason.
    let o = run_capot(&["noise", "--kind", "realword", "--no-lexicon"], QUERIES);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("lexicon"));
    // With a lexicon of its own: `causes` may become its neighbour `pauses`, `left` `lift`.
    let lex = dir.path().join("lex.txt");
    std::fs::write(&lex, "causes 1000\npauses 500\nleft 1000\nlift 900\n").unwrap();
    let o = run_capot(
        &[
            "noise",
            "--kind",
            "realword",
            "--lexicon",
            lex.to_str().unwrap(),
        ],
        QUERIES,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    let q2 = out.lines().find(|l| l.starts_with("q2\t")).unwrap();
    assert!(
        q2.ends_with("\tpauses of left ventricular hypertrophy")
            || q2.ends_with("\tcauses of lift ventricular hypertrophy"),
        "{q2}"
    );
}
