//! Shared helpers for the end-to-end tests: where the assets and shared data live, and a
//! MiniLM bundle imported once per test binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// The project root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `assets/` (or `$CAPOT_ASSETS`), populated by `scripts/setup --assets-only`.
pub fn assets() -> PathBuf {
    std::env::var_os("CAPOT_ASSETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("assets"))
}

/// The all-MiniLM-L6-v2 Hugging Face directory; panics with the fix if it is missing.
pub fn minilm_hf_dir() -> PathBuf {
    let dir = assets().join("models/all-MiniLM-L6-v2");
    assert!(
        dir.join("model.safetensors").is_file(),
        "{} is missing: run `scripts/setup --assets-only` first",
        dir.display()
    );
    dir
}

/// `../shared` beside the project.
pub fn shared() -> PathBuf {
    root().join("../shared")
}

/// The golden reference file of all-MiniLM-L6-v2 embeddings.
pub fn golden() -> serde_json::Value {
    let path = shared().join("golden/minilm-l6-v2.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (../shared must sit beside the project)", path.display()));
    serde_json::from_str(&text).expect("golden file is JSON")
}

/// The capot binary under test.
pub fn capot() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_capot"));
    c.env("ORT_DYLIB_PATH", assets().join("onnxruntime/lib/libonnxruntime.so"));
    c.env_remove("CAPOT_LOG");
    c
}

/// Runs capot with `args`, feeding `stdin`, and returns its output.
pub fn run_capot(args: &[&str], stdin: &[u8]) -> Output {
    use std::io::Write;
    let mut child = capot()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn capot");
    let mut input = child.stdin.take().expect("stdin");
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().expect("wait for capot");
    let _ = writer.join();
    out
}

/// A MiniLM bundle imported once per test binary into a temporary directory.
pub fn minilm_bundle() -> &'static Path {
    static BUNDLE: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, path) = BUNDLE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("minilm");
        let hf = minilm_hf_dir();
        let o = run_capot(
            &["encoder", "import", hf.to_str().unwrap(), "--out", out.to_str().unwrap(), "--name", "minilm"],
            b"",
        );
        assert!(o.status.success(), "import failed: {}", String::from_utf8_lossy(&o.stderr));
        (dir, out)
    });
    path
}

/// Parses `{"embedding": [...]}` lines.
pub fn parse_embeddings(stdout: &[u8]) -> Vec<Vec<f32>> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("output line is JSON");
            v["embedding"]
                .as_array()
                .expect("embedding array")
                .iter()
                .map(|x| x.as_f64().expect("number") as f32)
                .collect()
        })
        .collect()
}
