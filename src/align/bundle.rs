//! Writing the aligned encoder bundle: ONNX graph from the trained weights, the base's tokenizer,
//! weights, config, `training.json` and a manifest whose `aligned_to` is the base's. Staged in a
//! hidden sibling and renamed into place after a smoke inference (as `capot encoder import`).

use super::train::{Prepared, StepRecord};
use super::AlignError;
use crate::encoder::import::{copy, write_config, Staged};
use crate::encoder::manifest::{self, EncoderManifest, OnnxIo, Provenance, Role};
use crate::encoder::Encoder;
use crate::model::{onnx_writer, BertWeights};

/// File name of the training curve inside an aligned bundle.
pub const TRAINING_FILE: &str = "training.json";

/// Writes the bundle for `prepared.options.out` and returns its manifest.
pub(crate) fn write(
    prepared: &Prepared,
    weights: &BertWeights,
    summary: &serde_json::Value,
    curve: &[StepRecord],
) -> Result<EncoderManifest, AlignError> {
    let o = &prepared.options;
    let base = &prepared.base_manifest;
    let onnx = onnx_writer::write_bert_onnx(&prepared.config, weights)?;
    let staged = Staged::new(&o.out, o.force)?;
    let dir = staged.path();
    std::fs::write(dir.join(manifest::ONNX_FILE), &onnx)
        .map_err(|e| AlignError::io(&dir.join(manifest::ONNX_FILE), e))?;
    copy(
        &o.base.join(manifest::TOKENIZER_FILE),
        &dir.join(manifest::TOKENIZER_FILE),
    )?;
    weights.save_safetensors(&dir.join(manifest::WEIGHTS_FILE))?;
    write_config(&prepared.config, &dir.join(manifest::CONFIG_FILE))?;
    let training = serde_json::json!({
        "summary": summary,
        "hyper_parameters": prepared.hyper_parameters(),
        "curve": curve,
    });
    let text = serde_json::to_string_pretty(&training)
        .map_err(|e| AlignError::Input(format!("training.json: {e}")))?;
    std::fs::write(dir.join(TRAINING_FILE), text + "\n")
        .map_err(|e| AlignError::io(&dir.join(TRAINING_FILE), e))?;

    let noise: Vec<String> = o
        .noise
        .iter()
        .map(|k| k.to_string())
        .chain(
            o.variants
                .iter()
                .map(|p| format!("variants:{}", p.display())),
        )
        .collect();
    let mut m = EncoderManifest {
        format: manifest::MANIFEST_FORMAT,
        name: o.name.clone().unwrap_or_else(|| aligned_name(&base.name)),
        version: o.version.clone().unwrap_or_else(|| "1".into()),
        role: Role::Query,
        pooling: base.pooling,
        normalize: base.normalize,
        max_length: base.max_length,
        dimension: base.dimension,
        prefix: base.prefix.clone(),
        onnx: OnnxIo::default(),
        onnx_sha256: manifest::sha256_file(&dir.join(manifest::ONNX_FILE))?,
        tokenizer_sha256: manifest::sha256_file(&dir.join(manifest::TOKENIZER_FILE))?,
        weights_sha256: Some(manifest::sha256_file(&dir.join(manifest::WEIGHTS_FILE))?),
        fingerprint: String::new(),
        aligned_to: base.aligned_to.clone(),
        provenance: Provenance {
            source: Some(format!("capot align of {}", o.base.display())),
            base_encoder: Some(format!("{} ({})", base.label(), base.fingerprint)),
            job: None,
            quantization: None,
            objective: Some(o.objective.to_string()),
            noise: Some(noise.join(",")),
            hyper_parameters: prepared.hyper_parameters(),
            evaluation: serde_json::Value::Null,
            training: summary.clone(),
            notes: vec![format!(
                "training curve in {TRAINING_FILE}; vectors fit the index of document encoder {}",
                base.aligned_to
            )],
            created_at: crate::clock::now_rfc3339(),
            capot_version: env!("CARGO_PKG_VERSION").into(),
        },
    };
    m.fingerprint = manifest::fingerprint(&m);
    m.write(dir)?;
    Encoder::load(dir, &o.runtime)?;
    staged.commit()?;
    Ok(m)
}

/// `<base>-aligned`, kept within the 64-character name limit.
fn aligned_name(base: &str) -> String {
    let stem: String = base.chars().take(64 - "-aligned".len()).collect();
    format!("{stem}-aligned")
}
