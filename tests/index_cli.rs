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

/// `capot index build` of the default corpus with MiniLM into `out`, plus `extra` flags.
fn build(out: &Path, extra: &[&str]) -> std::process::Output {
    let corpus = root().join("data/default-corpus");
    let mut all = vec![
        "index",
        "build",
        "--doc-encoder",
        minilm_bundle().to_str().unwrap(),
        "--corpus",
        corpus.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    all.extend_from_slice(extra);
    run_capot(&all, b"")
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
