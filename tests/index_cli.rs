//! `capot index build` as a user runs it: with a pool of encoder sessions, and from precomputed
//! vectors in a `.npy` file (checked against the encoder; bad files refused with the reason).

mod common;

use std::path::Path;

use capot::index::npy;
use common::*;

fn read_vectors(index: &Path) -> Vec<f32> {
    std::fs::read(index.join("vectors.f32"))
        .expect("vectors.f32")
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max)
}

/// The arguments of `capot index build` of `corpus` with MiniLM into `out`, plus `extra` flags.
fn build_args(corpus: &Path, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut all: Vec<String> = [
        "index",
        "build",
        "--doc-encoder",
        minilm_bundle().to_str().unwrap(),
        "--corpus",
        corpus.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    all.extend(extra.iter().map(|s| s.to_string()));
    all
}

/// Runs `capot index build` of `corpus` into `out` with `extra` flags.
fn build_corpus(corpus: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let args = build_args(corpus, out, extra);
    run_capot(&args.iter().map(String::as_str).collect::<Vec<_>>(), b"")
}

/// `capot index build` of the default corpus with MiniLM into `out`, plus `extra` flags.
fn build(out: &Path, extra: &[&str]) -> std::process::Output {
    build_corpus(&root().join("data/default-corpus"), out, extra)
}

#[test]
fn pooled_build_and_build_from_vectors_give_the_same_index() {
    let reference = default_index();
    let want = read_vectors(reference);
    let dir = tempfile::tempdir().unwrap();

    // Two single-threaded sessions encode the corpus; corpus order is kept.
    let pooled = dir.path().join("pooled");
    let o = build(&pooled, &["--encoder-workers", "2", "--threads", "1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let d = max_abs_diff(&read_vectors(&pooled), &want);
    assert!(d < 1e-5, "pooled build differs by {d}");

    // The same vectors as a .npy: nothing encoded but the check sample, same index.
    let dim = 384;
    let rows = want.len() / dim;
    let npy_path = dir.path().join("vectors.npy");
    npy::write_f32_matrix(&npy_path, rows, dim, &want).unwrap();
    let from_npy = dir.path().join("from-npy");
    let o = build(&from_npy, &["--vectors", npy_path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("vectors read and checked"), "{err}");
    assert_eq!(read_vectors(&from_npy), want);
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(from_npy.join("index.json")).unwrap())
            .unwrap();
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(reference.join("index.json")).unwrap())
            .unwrap();
    assert_eq!(m["encoder_fingerprint"], r["encoder_fingerprint"]);
    assert_eq!(m["count"], r["count"]);
    assert!(
        m["vocab"].is_object(),
        "the vocabulary is built from the corpus text"
    );

    // Rows out of corpus order are caught by the check, and pass with --check-vectors 0.
    let mut shuffled = want.clone();
    shuffled.rotate_left(dim);
    npy::write_f32_matrix(&npy_path, rows, dim, &shuffled).unwrap();
    let out = dir.path().join("shuffled");
    let args = ["--vectors", npy_path.to_str().unwrap()];
    let o = build(&out, &args);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("corpus order"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!out.exists());
    let mut unchecked = args.to_vec();
    unchecked.extend(["--check-vectors", "0"]);
    let o = build(&out, &unchecked);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // A matrix of the wrong shape, or not a .npy at all: one line, exit 1, nothing written.
    npy::write_f32_matrix(&npy_path, rows - 1, dim, &want[dim..]).unwrap();
    let junk = dir.path().join("junk.npy");
    std::fs::write(&junk, b"not numpy").unwrap();
    for (file, want_msg) in [(&npy_path, "200 documents"), (&junk, "not a .npy file")] {
        let out = dir.path().join("bad");
        let o = build(&out, &["--vectors", file.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(want_msg), "{err}");
        assert!(!out.exists());
    }
}

#[test]
fn int8_graph_vectors_build_and_upgrade_cli() {
    let reference = default_index();
    let want = read_vectors(reference);
    let dir = tempfile::tempdir().unwrap();
    let dim = 384;
    let rows = want.len() / dim;
    let npy_path = dir.path().join("vectors.npy");
    npy::write_f32_matrix(&npy_path, rows, dim, &want).unwrap();
    let out = dir.path().join("int8");
    let o = build(
        &out,
        &[
            "--vectors",
            npy_path.to_str().unwrap(),
            "--graph-vectors",
            "int8",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("index.json")).unwrap()).unwrap();
    assert_eq!(m["graph_vectors"], "int8");
    assert_eq!(
        m["files"]["vectors.i8"]["bytes"],
        (rows * 4 + rows * dim) as u64
    );

    // Same hits as the float32 index for documents' own vectors, with float32 scores.
    let f32_index = capot::index::Index::load(reference).unwrap();
    let int8_index = capot::index::Index::load(&out).unwrap();
    for i in (0..rows).step_by((rows / 25).max(1)) {
        let q = f32_index.vector(i).unwrap();
        let (a, b) = (
            f32_index.search(q, 10, 64).unwrap(),
            int8_index.search(q, 10, 64).unwrap(),
        );
        assert_eq!(a[0], b[0], "document {i} finds itself (or its twin) first");
        assert!((b[0].score - 1.0).abs() < 1e-5);
    }

    let o = run_capot(&["index", "upgrade", out.to_str().unwrap()], b"");
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("already at index format 2"));
    let o = run_capot(&["index", "upgrade", dir.path().to_str().unwrap()], b"");
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("index.json is missing"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let o = build(&out, &["--graph-vectors", "int4"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "clap rejects an unknown precision"
    );
}

/// Number of documents the checkpoint of the build of `out` has made durable, if any.
fn checkpointed(out: &Path) -> Option<u64> {
    let partial = out.with_file_name(format!(
        "{}.partial",
        out.file_name().unwrap().to_string_lossy()
    ));
    let text = std::fs::read_to_string(partial.join("build.json")).ok()?;
    serde_json::from_str::<serde_json::Value>(&text).ok()?["documents"].as_u64()
}

/// Starts `capot index build` of `corpus` into `out` and kills it (SIGKILL) once at least
/// `docs` documents are durable; returns how many were.
fn build_and_kill(corpus: &Path, out: &Path, docs: u64) -> u64 {
    let mut child = capot()
        .args(build_args(corpus, out, &["--chunk-size", "50", "--force"]))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    let done = loop {
        if let Some(n) = checkpointed(out).filter(|&n| n >= docs) {
            break n;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the build ended before it was killed"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "no checkpoint in time"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    done
}

#[test]
fn a_killed_build_leaves_the_old_index_served_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    // 400 dl19 passages (their first sentences: enough to encode), then a bad line and a
    // duplicate id near the end.
    let text = std::fs::read_to_string(shared().join("data/dl19-sample/corpus.jsonl")).unwrap();
    let mut lines: Vec<String> = text
        .lines()
        .take(400)
        .map(|l| {
            let mut doc: serde_json::Value = serde_json::from_str(l).unwrap();
            let body: String = doc["text"].as_str().unwrap().chars().take(120).collect();
            doc["text"] = body.into();
            doc.to_string()
        })
        .collect();
    let duplicate = lines[5].clone();
    lines.insert(360, "{not json".into());
    lines.push(duplicate);
    let corpus = dir.path().join("corpus.jsonl");
    std::fs::write(&corpus, lines.join("\n") + "\n").unwrap();

    // The index a service is serving at `out`: the built-in corpus.
    let out = dir.path().join("idx");
    let o = build(&out, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let count = |dir: &Path| -> u64 {
        let m: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("index.json")).unwrap())
                .unwrap();
        m["count"].as_u64().unwrap()
    };

    // Killed during encoding: the old index is still there, whole, and the service starts on it.
    let kept = build_and_kill(&corpus, &out, 100);
    assert!((100..400).contains(&kept), "{kept}");
    assert_eq!(count(&out), 200);
    let o = run_capot(&["index", "show", out.to_str().unwrap()], b"");
    assert!(o.status.success());
    let mut server = Server::start(&[
        "--index",
        out.to_str().unwrap(),
        "--encoder",
        minilm_bundle().to_str().unwrap(),
    ]);
    server.terminate();

    // The same command again continues after the last checkpoint.
    let o = build_corpus(&corpus, &out, &["--chunk-size", "50", "--force"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("resuming the interrupted build")
            && err.contains(&format!("{kept} documents kept")),
        "{err}"
    );
    assert!(err.contains(":361: malformed JSON"), "{err}");
    assert!(
        err.contains(":402: duplicate id") && err.contains("already indexed as document 5"),
        "{err}"
    );
    assert_eq!(count(&out), 400);
    assert!(!dir.path().join("idx.partial").exists());

    // It equals a build that was never interrupted: kill one, then --restart it from scratch.
    let fresh = dir.path().join("fresh");
    build_and_kill(&corpus, &fresh, 50);
    let o = build_corpus(&corpus, &fresh, &["--restart"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("discarded the interrupted build"), "{err}");
    assert!(!err.contains("resuming"), "{err}");
    let d = max_abs_diff(&read_vectors(&out), &read_vectors(&fresh));
    assert!(d < 1e-5, "resumed and uninterrupted builds differ by {d}");
    assert_eq!(
        std::fs::read(out.join("docs.bin")).unwrap(),
        std::fs::read(fresh.join("docs.bin")).unwrap()
    );
}

#[test]
fn a_full_disk_fails_the_build_clearly_and_running_it_again_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("idx");
    let o = build(&out, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let served = std::fs::read(out.join("index.json")).unwrap();
    let corpus = root().join("data/default-corpus");
    let owned = build_args(&corpus, &out, &["--chunk-size", "20", "--force"]);
    let args: Vec<&str> = owned.iter().map(String::as_str).collect();
    // Files may not grow past 64 KiB: vectors.f32 fills up in the third chunk of 20 documents.
    let o = run_capot_with_file_limit(&args, 64);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(
        err.contains("vectors.f32") && err.contains("File too large"),
        "{err}"
    );
    assert!(
        err.contains("the 40 documents written before it are kept") && err.contains("resumes"),
        "{err}"
    );
    // The served index is untouched.
    assert_eq!(std::fs::read(out.join("index.json")).unwrap(), served);
    let o = run_capot(&["index", "show", out.to_str().unwrap()], b"");
    assert!(o.status.success());
    // With space again, the same command resumes after the 40 and finishes.
    let o = run_capot(&args, b"");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("40 documents kept"), "{err}");
    let d = max_abs_diff(&read_vectors(&out), &read_vectors(default_index()));
    assert!(d < 1e-5, "resumed build differs by {d}");

    // Full before the first checkpoint: nothing is left behind at all.
    let fresh = dir.path().join("fresh");
    let owned = build_args(&corpus, &fresh, &["--chunk-size", "200"]);
    let first: Vec<&str> = owned.iter().map(String::as_str).collect();
    let o = run_capot_with_file_limit(&first, 64);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("File too large") && !err.contains("kept"),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["idx"], "left behind: {left:?}");
}

#[test]
fn a_build_killed_while_inserting_into_the_graph_resumes_the_graph() {
    let dir = tempfile::tempdir().unwrap();
    // 2,000 documents with random unit vectors from a .npy: a graph phase of a few seconds.
    let (rows, dim) = (2000usize, 384usize);
    let corpus = dir.path().join("corpus.jsonl");
    let lines: Vec<String> = (0..rows)
        .map(|i| {
            serde_json::json!({"_id": format!("d{i}"), "text": format!("passage {i}")}).to_string()
        })
        .collect();
    std::fs::write(&corpus, lines.join("\n") + "\n").unwrap();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut vectors: Vec<f32> = (0..rows * dim)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect();
    for row in vectors.chunks_exact_mut(dim) {
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        row.iter_mut().for_each(|x| *x /= norm);
    }
    let npy_path = dir.path().join("vectors.npy");
    npy::write_f32_matrix(&npy_path, rows, dim, &vectors).unwrap();
    let out = dir.path().join("idx");
    let args = build_args(
        &corpus,
        &out,
        &[
            "--vectors",
            npy_path.to_str().unwrap(),
            "--check-vectors",
            "0",
            "--graph-checkpoint-secs",
            "1",
            "--m",
            "8",
            "--ef-construction",
            "40",
            "--seed",
            "11",
        ],
    );

    // Killed (SIGKILL) once the graph's progress has been saved.
    let progress = dir.path().join("idx.partial/graph.progress");
    let mut child = capot()
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    while !progress.exists() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the build ended before its graph's progress was saved"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "no graph progress in time"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!out.exists());

    // The same command: every document kept, the graph continued, a whole index at the end.
    let o = run_capot(&args.iter().map(String::as_str).collect::<Vec<_>>(), b"");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!("{rows} documents kept")) && err.contains("resuming the graph: "),
        "{err}"
    );
    assert!(!dir.path().join("idx.partial").exists());
    assert!(!out.join("graph.progress").exists());
    let index = capot::index::Index::load(&out).unwrap();
    assert_eq!(index.len(), rows);
    assert_eq!(index.manifest().hnsw.seed, 11, "--seed is recorded");
    let found = (0..rows)
        .step_by(20)
        .filter(|&i| {
            index
                .search(&vectors[i * dim..(i + 1) * dim], 1, 64)
                .unwrap()[0]
                .index
                == i
        })
        .count();
    assert!(
        found >= 95,
        "{found} of 100 documents find themselves first"
    );
}
