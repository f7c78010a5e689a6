//! Locations of the assets and shared data for unit tests (compiled only for tests).

use std::path::PathBuf;

/// `assets/` (or `$CAPOT_ASSETS`), populated by `scripts/setup --assets-only`.
pub fn assets() -> PathBuf {
    std::env::var_os("CAPOT_ASSETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets"))
}

/// The all-MiniLM-L6-v2 Hugging Face directory; panics with the fix when missing.
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
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared")
}

/// The golden all-MiniLM-L6-v2 reference file.
pub fn golden() -> serde_json::Value {
    let path = shared().join("golden/minilm-l6-v2.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (../shared must sit beside the project)",
            path.display()
        )
    });
    serde_json::from_str(&text).expect("golden file is JSON")
}

/// A tiny randomly initialised BERT bundle (MiniLM's tokenizer, 64 tokens) imported into
/// `dir/<name>`: for tests that need a real ONNX Runtime session but not a real model.
pub fn tiny_bundle(dir: &std::path::Path, name: &str, seed: u64) -> PathBuf {
    use crate::encoder::import::{import_hf, ImportOptions};
    use crate::model::{BertConfig, BertWeights};
    let hf = dir.join(format!("{name}-hf"));
    std::fs::create_dir_all(&hf).expect("create the Hugging Face directory");
    let config = BertConfig {
        vocab_size: 30522, // MiniLM's tokenizer
        ..BertConfig::tiny()
    };
    std::fs::write(
        hf.join("config.json"),
        serde_json::to_string(&config).expect("config JSON"),
    )
    .expect("write config.json");
    BertWeights::random(&config, seed)
        .save_safetensors(&hf.join("model.safetensors"))
        .expect("write weights");
    std::fs::copy(
        minilm_hf_dir().join("tokenizer.json"),
        hf.join("tokenizer.json"),
    )
    .expect("copy the tokenizer");
    let bundle = dir.join(name);
    import_hf(
        &hf,
        &bundle,
        &ImportOptions {
            name: Some(name.into()),
            max_length: Some(64),
            ..Default::default()
        },
        &Default::default(),
    )
    .expect("import the tiny bundle");
    bundle
}
