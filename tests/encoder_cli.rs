//! `capot encoder import` and `capot encode`, driven as a user would: the spawned binary, real
//! files, stdin/stdout, exit codes.

mod common;

use common::*;

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "dimension");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// The golden cases the CLI accepts (it rejects empty text as bad input; the library-level
/// test covers the empty case).
fn golden_cases() -> Vec<(String, Vec<f32>)> {
    golden()["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .filter(|c| !c["text"].as_str().unwrap_or("").trim().is_empty())
        .map(|c| {
            let text = c["text"].as_str().expect("text").to_string();
            let emb = c["embedding"]
                .as_array()
                .expect("embedding")
                .iter()
                .map(|x| x.as_f64().expect("f") as f32)
                .collect();
            (text, emb)
        })
        .collect()
}

#[test]
fn minilm_embeddings_match_the_golden_reference() {
    let bundle = minilm_bundle();
    let cases = golden_cases();
    assert!(cases.len() >= 20, "golden file has {} cases", cases.len());
    let input: String = cases
        .iter()
        .map(|(t, _)| serde_json::json!({ "text": t }).to_string() + "\n")
        .collect();
    // Batch 1 and a padded batch of all cases at once must both match.
    for batch in ["1", "64"] {
        let o = run_capot(
            &[
                "encode",
                "--encoder",
                bundle.to_str().unwrap(),
                "--batch-size",
                batch,
            ],
            input.as_bytes(),
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let got = parse_embeddings(&o.stdout);
        assert_eq!(got.len(), cases.len());
        let mut worst = 0f32;
        for ((text, want), have) in cases.iter().zip(&got) {
            let d = max_abs_diff(want, have);
            assert!(d <= 1e-4, "batch {batch}: {text:?} differs by {d}");
            worst = worst.max(d);
        }
        eprintln!("batch {batch}: max abs diff vs golden {worst:e}");
    }
}

#[test]
fn manifest_describes_the_bundle() {
    let bundle = minilm_bundle();
    let o = run_capot(&["encoder", "show", bundle.to_str().unwrap()], b"");
    assert!(o.status.success());
    let m: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(m["name"], "minilm");
    assert_eq!(m["dimension"], 384);
    assert_eq!(m["pooling"], "mean");
    assert_eq!(m["normalize"], true);
    assert_eq!(m["max_length"], 256);
    assert_eq!(m["role"], "symmetric");
    assert_eq!(m["fingerprint"], m["aligned_to"]);
    let sha = m["onnx_sha256"].as_str().unwrap();
    assert_eq!(sha.len(), 64);
    assert_eq!(
        m["weights_sha256"].as_str().map(str::len),
        Some(64),
        "a bundle imported from weights carries them"
    );
    for f in [
        "model.onnx",
        "tokenizer.json",
        "model.safetensors",
        "config.json",
        "encoder.json",
    ] {
        assert!(bundle.join(f).is_file(), "{f}");
    }
}

#[test]
fn long_texts_are_truncated_at_the_bundle_max_length() {
    let bundle = minilm_bundle();
    // 600 words: far beyond 256 tokens; the first 254 word pieces decide the vector.
    let long: String = (0..600).map(|i| format!("word{} ", i % 7)).collect();
    let longer = format!("{long} completely different tail text that must not matter");
    let input = format!(
        "{}\n{}\n",
        serde_json::json!({ "text": long }),
        serde_json::json!({ "text": longer })
    );
    let o = run_capot(
        &["encode", "--encoder", bundle.to_str().unwrap()],
        input.as_bytes(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = parse_embeddings(&o.stdout);
    assert_eq!(v.len(), 2);
    assert!(
        max_abs_diff(&v[0], &v[1]) < 1e-6,
        "truncation should make both identical"
    );
}

/// Each bad line gets a message naming it and a non-zero exit, and the good lines before it
/// are still written.
#[test]
fn bad_input_lines_fail_clearly_after_flushing_good_ones() {
    let bundle = minilm_bundle();
    let good = "{\"text\": \"hello world\"}\n{\"text\": \"second\"}\n";
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("not json", b"this is not json\n".to_vec(), "line 3"),
        ("wrong field", b"{\"query\": \"x\"}\n".to_vec(), "line 3"),
        ("wrong type", b"{\"text\": 42}\n".to_vec(), "line 3"),
        (
            "empty text",
            b"{\"text\": \"   \"}\n".to_vec(),
            "empty text",
        ),
        (
            "invalid utf-8",
            b"{\"text\": \"caf\xe9\"}\n".to_vec(),
            "UTF-8",
        ),
    ];
    for (what, bad, expect) in cases {
        let mut input = good.as_bytes().to_vec();
        input.extend_from_slice(&bad);
        input.extend_from_slice(b"{\"text\": \"after the bad line\"}\n");
        let o = run_capot(
            &[
                "encode",
                "--encoder",
                bundle.to_str().unwrap(),
                "--batch-size",
                "1",
            ],
            &input,
        );
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{what}: {stderr}");
        assert!(stderr.contains(expect), "{what}: {stderr}");
        assert!(
            stderr.starts_with("error: "),
            "{what}: one-line reason: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{what}: {stderr}");
        assert_eq!(
            parse_embeddings(&o.stdout).len(),
            2,
            "{what}: good lines kept"
        );
    }
}

#[test]
fn broken_bundles_and_missing_files_are_clear_errors() {
    let bundle = minilm_bundle();
    let dir = tempfile::tempdir().unwrap();

    // A bundle whose ONNX file does not match its manifest.
    let tampered = dir.path().join("tampered");
    std::fs::create_dir(&tampered).unwrap();
    for f in ["encoder.json", "tokenizer.json"] {
        std::fs::copy(bundle.join(f), tampered.join(f)).unwrap();
    }
    std::fs::write(tampered.join("model.onnx"), b"not an onnx file").unwrap();
    let o = run_capot(
        &["encode", "--encoder", tampered.to_str().unwrap()],
        b"{\"text\":\"x\"}\n",
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr.contains("sha256"), "{stderr}");

    // A directory that is no bundle.
    let o = run_capot(&["encode", "--encoder", dir.path().to_str().unwrap()], b"");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("encoder.json"));

    // A corrupt manifest.
    let corrupt = dir.path().join("corrupt");
    std::fs::create_dir(&corrupt).unwrap();
    std::fs::write(corrupt.join("encoder.json"), b"{ nope").unwrap();
    let o = run_capot(&["encode", "--encoder", corrupt.to_str().unwrap()], b"");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("invalid manifest"));

    // Import from a directory with no weights / a corrupt safetensors file.
    let hf = dir.path().join("hf");
    std::fs::create_dir(&hf).unwrap();
    let o = run_capot(
        &[
            "encoder",
            "import",
            hf.to_str().unwrap(),
            "--out",
            dir.path().join("o1").to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("config.json"));
    let src = minilm_hf_dir();
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(src.join(f), hf.join(f)).unwrap();
    }
    std::fs::write(
        hf.join("model.safetensors"),
        b"\x08\x00\x00\x00\x00\x00\x00\x00garbage!",
    )
    .unwrap();
    let out = dir.path().join("o2");
    let o = run_capot(
        &[
            "encoder",
            "import",
            hf.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        b"",
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("model.safetensors"), "{stderr}");
    assert!(!out.exists(), "a failed import leaves nothing behind");

    // Unsupported architecture is named.
    let cfg = std::fs::read_to_string(src.join("config.json")).unwrap();
    std::fs::write(
        hf.join("config.json"),
        cfg.replace("\"bert\"", "\"roberta\""),
    )
    .unwrap();
    let o = run_capot(
        &[
            "encoder",
            "import",
            hf.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        b"",
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr.contains("unsupported architecture") && stderr.contains("roberta"),
        "{stderr}"
    );

    // An existing destination is not overwritten without --force.
    let o = run_capot(
        &[
            "encoder",
            "import",
            src.to_str().unwrap(),
            "--out",
            bundle.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"));
}

#[test]
fn missing_onnx_runtime_library_says_what_to_do() {
    let bundle = minilm_bundle();
    let o = capot()
        .env("ORT_DYLIB_PATH", "/nonexistent/libonnxruntime.so")
        .args(["encode", "--encoder", bundle.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("scripts/setup") && stderr.contains("ORT_DYLIB_PATH"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn cuda_device_without_cuda_support_is_an_error_and_auto_falls_back() {
    let bundle = minilm_bundle();
    let o = run_capot(
        &[
            "encode",
            "--encoder",
            bundle.to_str().unwrap(),
            "--device",
            "cuda",
        ],
        b"{\"text\":\"x\"}\n",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr)
        .to_lowercase()
        .contains("cuda"));
    let o = run_capot(
        &[
            "encode",
            "--encoder",
            bundle.to_str().unwrap(),
            "--device",
            "auto",
        ],
        b"{\"text\":\"x\"}\n",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(parse_embeddings(&o.stdout).len(), 1);
}

#[test]
fn quantize_refuses_bad_input_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let existing = dir.path().join("exists");
    std::fs::create_dir(&existing).unwrap();
    let missing = dir.path().join("missing");
    let bundle = minilm_bundle().to_str().unwrap().to_string();
    let never = dir.path().join("never");
    let never = never.to_str().unwrap();
    let cases: [(&[&str], &str); 3] = [
        (&[missing.to_str().unwrap(), "--out", never], "encoder.json"),
        (&[&bundle, "--out", existing.to_str().unwrap()], "--force"),
        (
            &[&bundle, "--out", never, "--name", "bad name"],
            "invalid encoder name",
        ),
    ];
    for (args, want) in cases {
        let mut all = vec!["encoder", "quantize"];
        all.extend_from_slice(args);
        let o = run_capot(&all, b"");
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    assert!(!std::path::Path::new(never).exists());
}

#[test]
fn a_full_disk_during_import_leaves_no_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("minilm");
    let hf = minilm_hf_dir();
    // The weights alone are 90 MB: files may not grow past 1 MiB.
    let o = run_capot_with_file_limit(
        &[
            "encoder",
            "import",
            hf.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        1024,
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("File too large"), "{err}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "a half-written bundle was left: {left:?}");
}
