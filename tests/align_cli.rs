//! `capot align` driven as a user would: bad input is refused before training with exit code 1
//! and one line; a tiny run writes a bundle; SIGINT stops at a step boundary with a checkpoint.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use capot::index::{Document, HnswParams, IndexBuilder, ManifestFields};
use common::*;

struct Setup {
    dir: tempfile::TempDir,
    base: PathBuf,
    queries: PathBuf,
    variants: PathBuf,
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// A tiny random BERT with MiniLM's tokenizer, imported with the binary; 12 queries, 1 variant file.
fn setup() -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = import_tiny(dir.path(), "tiny", 3);
    let words = [
        "river", "bank", "loan", "rate", "city", "map", "song", "lyrics",
    ];
    let mut q = String::new();
    let mut v = String::new();
    for i in 0..12 {
        let text = format!(
            "{} {} {}",
            words[i % 8],
            words[(i + 3) % 8],
            words[(i * 5 + 1) % 8]
        );
        q += &format!("q{i}\t{text}\n");
        v += &format!("q{i}\t{}x\n", text);
    }
    let queries = dir.path().join("queries.tsv");
    let variants = dir.path().join("queries.typo1.tsv");
    std::fs::write(&queries, q).unwrap();
    std::fs::write(&variants, v).unwrap();
    Setup {
        dir,
        base,
        queries,
        variants,
    }
}

fn align_args<'a>(s: &'a Setup, out: &'a Path) -> Vec<&'a str> {
    vec![
        "align",
        "--base",
        p(&s.base),
        "--queries",
        p(&s.queries),
        "--variants",
        p(&s.variants),
        "--out",
        p(out),
        "--batch-size",
        "4",
        "--quiet",
    ]
}

/// Runs and expects exit code 1 with exactly one stderr line containing `needle`.
fn expect_error(args: &[&str], needle: &str) {
    let o = run_capot(args, b"");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line expected: {stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    assert!(lines[0].contains(needle), "{needle:?} not in {stderr}");
}

#[test]
fn bad_input_is_refused_before_training() {
    let s = setup();
    let out = s.dir.path().join("out");

    let empty = s.dir.path().join("empty.tsv");
    std::fs::write(&empty, "").unwrap();
    let mut a = align_args(&s, &out);
    a[4] = p(&empty);
    expect_error(&a, "no queries in");

    let unknown = s.dir.path().join("unknown.tsv");
    std::fs::write(&unknown, "q1\triver bnak\nnope\tsomething\n").unwrap();
    let mut a = align_args(&s, &out);
    a[6] = p(&unknown);
    expect_error(&a, "query ids not in");

    let mut a = align_args(&s, &out);
    a.extend(["--objective", "triplet"]);
    expect_error(&a, "unknown objective `triplet`");

    let mut a = align_args(&s, &out);
    a.extend(["--objective", "ranking"]);
    expect_error(&a, "needs --index");

    // A serve-only base: no weights in the bundle or its manifest.
    let serve_only = s.dir.path().join("serve-only");
    std::fs::create_dir(&serve_only).unwrap();
    for f in ["model.onnx", "tokenizer.json"] {
        std::fs::copy(s.base.join(f), serve_only.join(f)).unwrap();
    }
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(s.base.join("encoder.json")).unwrap())
            .unwrap();
    m.as_object_mut().unwrap().remove("weights_sha256");
    std::fs::write(serve_only.join("encoder.json"), m.to_string()).unwrap();
    let mut a = align_args(&s, &out);
    a[2] = p(&serve_only);
    expect_error(&a, "has no weights");

    // A flipped byte in the base's weights: refused with the file named, nothing trained.
    let flipped = s.dir.path().join("flipped");
    std::fs::create_dir(&flipped).unwrap();
    for entry in std::fs::read_dir(&s.base).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), flipped.join(entry.file_name())).unwrap();
        }
    }
    let weights = flipped.join("model.safetensors");
    let mut bytes = std::fs::read(&weights).unwrap();
    let at = bytes.len() - 7;
    bytes[at] ^= 0x40;
    std::fs::write(&weights, bytes).unwrap();
    let mut a = align_args(&s, &out);
    a[2] = p(&flipped);
    expect_error(&a, "model.safetensors: sha256 does not match the manifest");

    // An index of another dimension.
    let index = s.dir.path().join("index8");
    let docs: Vec<Document> = (0..5)
        .map(|i| Document {
            id: format!("d{i}"),
            title: String::new(),
            text: format!("doc {i}"),
        })
        .collect();
    let vectors: Vec<f32> = (0..40).map(|i| 1.0 + (i % 7) as f32).collect();
    IndexBuilder::new(
        &index,
        ManifestFields {
            encoder_fingerprint: m["aligned_to"].as_str().unwrap().to_string(),
            encoder_name: "other".into(),
            dimension: 8,
            capot_version: "test".into(),
        },
    )
    .params(HnswParams {
        m: 4,
        ef_construction: 10,
        ef_search: 10,
        ..HnswParams::default()
    })
    .build(docs, vectors, &mut |_| Ok(()))
    .unwrap();
    let mut a = align_args(&s, &out);
    a.extend([
        "--objective",
        "ranking",
        "--index",
        p(&index),
        "--rank-k",
        "2",
    ]);
    expect_error(&a, "has dimension 8, the encoder produces 32");

    let mut a = align_args(&s, &out);
    a.extend(["--device", "tpu"]);
    expect_error(&a, "unknown device");

    let mut a = align_args(&s, &out);
    a.extend(["--word-queries", "100"]);
    expect_error(&a, "--word-queries needs --noise");

    assert!(!out.exists(), "nothing written on bad input");
}

#[test]
fn tiny_run_writes_an_aligned_bundle() {
    let s = setup();
    let out = s.dir.path().join("aligned");
    let mut a = align_args(&s, &out);
    a.extend([
        "--steps",
        "4",
        "--objective",
        "capot=1,distill=0.5,anchor=1",
        "--lr",
        "1e-3",
        "--warmup-steps",
        "2",
        "--lr-schedule",
        "linear",
    ]);
    let o = run_capot(&a, b"");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("4 steps"));
    let base: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(s.base.join("encoder.json")).unwrap())
            .unwrap();
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("encoder.json")).unwrap()).unwrap();
    assert_eq!(m["aligned_to"], base["aligned_to"]);
    assert_eq!(m["name"], "tiny-aligned");
    assert_eq!(m["role"], "query");
    assert_eq!(m["provenance"]["objective"], "capot=1,distill=0.5,anchor=1");
    assert_eq!(m["provenance"]["training"]["steps"], 4);
    // Warm-up over 2 steps, then linear decay: the rate of each step is on the curve.
    let training: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("training.json")).unwrap()).unwrap();
    let lrs: Vec<f64> = training["curve"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["lr"].as_f64().unwrap())
        .collect();
    let want = [5e-4, 1e-3, 1e-3, 5e-4];
    assert_eq!(lrs.len(), 4);
    for (got, want) in lrs.iter().zip(want) {
        assert!((got - want).abs() < 1e-12, "{lrs:?}");
    }
    assert!(training["curve"][0]["parts"]["anchor"].is_number());
    // The bundle serves: encode through the binary.
    let o = run_capot(
        &["encode", "--encoder", p(&out)],
        b"{\"text\": \"river bank\"}\n",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(parse_embeddings(&o.stdout)[0].len(), 32);
    // An existing output is not replaced without --force.
    expect_error(&a, "already exists");
}

#[test]
fn sigint_stops_at_a_step_boundary_and_resume_finishes() {
    let s = setup();
    let out = s.dir.path().join("aligned");
    let ckpt = s.dir.path().join("ckpt");
    let mut a = align_args(&s, &out);
    a.extend([
        "--steps",
        "1000000",
        "--checkpoint-dir",
        p(&ckpt),
        "--checkpoint-every",
        "3",
    ]);
    let child = capot()
        .args(&a)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ckpt.join("latest.json").is_file() {
        assert!(Instant::now() < deadline, "no checkpoint within 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let o = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted after step"), "{stderr}");
    assert!(!out.exists());
    let latest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ckpt.join("latest.json")).unwrap()).unwrap();
    let step_dir = ckpt.join(latest["dir"].as_str().unwrap());
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(step_dir.join("state.json")).unwrap())
            .unwrap();
    let done = state["step"].as_u64().unwrap();
    assert!(done >= 3);
    assert_eq!(state["curve"].as_array().unwrap().len() as u64, done);
    for f in ["weights.safetensors", "optimizer.safetensors"] {
        assert!(step_dir.join(f).is_file(), "{f}");
    }
    // Resume for two more steps.
    let total = (done + 2).to_string();
    let mut a = align_args(&s, &out);
    a.extend(["--steps", &total, "--checkpoint-dir", p(&ckpt), "--resume"]);
    let o = run_capot(&a, b"");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("encoder.json")).unwrap()).unwrap();
    assert_eq!(
        m["provenance"]["training"]["steps"].as_u64(),
        Some(done + 2)
    );
    assert_eq!(
        m["provenance"]["training"]["session_steps"].as_u64(),
        Some(2)
    );
}
