//! `capot encoder quantize`: an int8 copy of a bundle whose vectors still fit the same index.
//!
//! The graph is rewritten by the project's ONNX writer from the bundle's own weights with
//! int8 linear layers ([`LinearPrecision::Int8`]); tokenizer, pooling, normalisation and the
//! `aligned_to` fingerprint are the source bundle's, so the index compatibility check accepts the
//! quantised bundle wherever it accepts the source. The new bundle is checked against the source
//! on a set of probe texts (cosine of their vectors) before it is renamed into place.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::import::{copy, validate_name, Staged};
use super::manifest::{self, EncoderManifest, Provenance};
use super::{Encoder, EncoderError, RuntimeOptions};
use crate::eval::metrics::cosine;
use crate::model::onnx_writer::{self, LinearPrecision};
use crate::model::{BertConfig, BertWeights};

/// Texts both encoders embed to measure how far the quantised vectors moved: queries of the
/// kinds the service sees (short, keyword, question, typo'd, long).
const PROBE_TEXTS: [&str; 16] = [
    "what is the capital of france",
    "how long does it take to boil an egg",
    "symptoms of vitamin d deficiency",
    "python list comprehension",
    "cheap flights new york london",
    "who wrote the declaration of independence",
    "definition of photosynthesis",
    "best way to learn a new language as an adult",
    "weather tomorrow",
    "what causes the northern lights and when can you see them",
    "how to reset a router",
    "recieve vs receive spelling",
    "defintion of osmosis",
    "interest rate mortgage calculator",
    "the quick brown fox jumps over the lazy dog",
    "why is the sky blue during the day but red at sunset",
];

/// What `capot encoder quantize` was asked for.
#[derive(Debug, Clone, Default)]
pub struct QuantizeOptions {
    /// Name of the new bundle (default: `<source name>-int8`).
    pub name: Option<String>,
    /// Version recorded in the manifest (default: the source's).
    pub version: Option<String>,
    /// 7-bit weights, for x86 CPUs without VNNI (see [`LinearPrecision::Int8`]).
    pub reduce_range: bool,
    /// Replace an existing bundle at the destination.
    pub force: bool,
}

/// How a bundle was quantised; recorded in its manifest's provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quantization {
    /// `int8` or `int8-7bit`.
    pub precision: String,
    /// What was quantised and how.
    pub method: String,
    /// Fingerprint of the float32 bundle the weights came from.
    pub source_fingerprint: String,
    /// Cosine between the source's and this bundle's vectors of the probe texts.
    pub probe_cosine_mean: f32,
    pub probe_cosine_min: f32,
}

/// Writes an int8 copy of the bundle at `source` to `out` and returns its manifest.
pub fn quantize_bundle(
    source: &Path,
    out: &Path,
    options: &QuantizeOptions,
    runtime: &RuntimeOptions,
) -> Result<EncoderManifest, EncoderError> {
    let base = EncoderManifest::read(source)?;
    if let Some(q) = &base.provenance.quantization {
        return Err(EncoderError::Config(format!(
            "{} is already quantised ({}); quantise its float32 source instead",
            source.display(),
            q.precision
        )));
    }
    let weights_path = source.join(manifest::WEIGHTS_FILE);
    let config_path = source.join(manifest::CONFIG_FILE);
    if base.weights_sha256.is_none() || !weights_path.is_file() || !config_path.is_file() {
        return Err(EncoderError::Config(format!(
            "{} carries no weights ({} and {}): it was imported serve-only from an ONNX graph \
             whose weights could not be recovered, so it cannot be quantised",
            source.display(),
            manifest::WEIGHTS_FILE,
            manifest::CONFIG_FILE
        )));
    }
    let name = options
        .name
        .clone()
        .unwrap_or_else(|| quantized_name(&base.name));
    validate_name(&name)?;
    let precision = LinearPrecision::Int8 {
        reduce_range: options.reduce_range,
    };
    let config = BertConfig::from_file(&config_path)?;
    let weights = BertWeights::load_safetensors(&weights_path)?;
    let onnx = onnx_writer::write_bert_onnx_with(&config, &weights, precision)?;

    let staged = Staged::new(out, options.force)?;
    let dir = staged.path();
    let onnx_path = dir.join(manifest::ONNX_FILE);
    std::fs::write(&onnx_path, &onnx).map_err(|e| EncoderError::io(&onnx_path, e))?;
    copy(
        &source.join(manifest::TOKENIZER_FILE),
        &dir.join(manifest::TOKENIZER_FILE),
    )?;
    let mut m = EncoderManifest {
        name,
        version: options.version.clone().unwrap_or(base.version.clone()),
        onnx_sha256: manifest::sha256_file(&onnx_path)?,
        tokenizer_sha256: manifest::sha256_file(&dir.join(manifest::TOKENIZER_FILE))?,
        weights_sha256: None,
        fingerprint: String::new(),
        aligned_to: base.aligned_to.clone(),
        onnx: Default::default(),
        provenance: Provenance {
            source: Some(format!("capot encoder quantize of {}", source.display())),
            base_encoder: Some(format!("{} ({})", base.label(), base.fingerprint)),
            created_at: crate::clock::now_rfc3339(),
            capot_version: env!("CARGO_PKG_VERSION").into(),
            notes: vec![format!(
                "{} linear layers; vectors fit the index of document encoder {}",
                precision.name(),
                base.aligned_to
            )],
            quantization: None,
            // The source's evaluation does not describe this bundle; objective, noise and
            // training do (they say what the weights were aligned for).
            evaluation: serde_json::Value::Null,
            ..base.provenance.clone()
        },
        ..base.clone()
    };
    m.fingerprint = manifest::fingerprint(&m);
    m.write(dir)?;

    let quantized = Encoder::load(dir, runtime)?;
    let original = Encoder::load(source, runtime)?;
    let (mean, min) = probe_agreement(&original, &quantized)?;
    m.provenance.quantization = Some(Quantization {
        precision: precision.name().into(),
        method: "dynamic: linear-layer weights symmetric int8 per output column, activations \
                 uint8 per call (DynamicQuantizeLinear + MatMulInteger); embeddings, layer norms \
                 and attention in float32"
            .into(),
        source_fingerprint: base.fingerprint.clone(),
        probe_cosine_mean: mean,
        probe_cosine_min: min,
    });
    m.write(dir)?;
    staged.commit()?;
    Ok(m)
}

/// Mean and minimum cosine between two encoders' vectors of [`PROBE_TEXTS`], each text encoded
/// alone (as a lone query is served).
fn probe_agreement(a: &Encoder, b: &Encoder) -> Result<(f32, f32), EncoderError> {
    let mut sum = 0.0;
    let mut min = f32::INFINITY;
    for text in PROBE_TEXTS {
        let va = a.encode(&[text])?;
        let vb = b.encode(&[text])?;
        let c = cosine(&va[0], &vb[0]).map_err(|e| EncoderError::Output(e.to_string()))? as f32;
        sum += c;
        min = min.min(c);
    }
    Ok((sum / PROBE_TEXTS.len() as f32, min))
}

/// `<source>-int8`, kept within the 64-character name limit.
fn quantized_name(source: &str) -> String {
    let stem: String = source.chars().take(64 - "-int8".len()).collect();
    format!("{stem}-int8")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny_bundle(dir: &Path) -> std::path::PathBuf {
        crate::test_assets::tiny_bundle(dir, "tiny", 11)
    }

    #[test]
    fn quantized_bundle_stays_close_and_fits_the_same_index() {
        let dir = tempfile::tempdir().unwrap();
        let base = tiny_bundle(dir.path());
        let out = dir.path().join("q");
        let runtime = RuntimeOptions::default();
        let m = quantize_bundle(&base, &out, &QuantizeOptions::default(), &runtime).unwrap();
        let source = EncoderManifest::read(&base).unwrap();
        assert_eq!(m.name, "tiny-int8");
        assert_eq!(m.aligned_to, source.aligned_to);
        assert_ne!(m.fingerprint, source.fingerprint);
        assert_eq!(EncoderManifest::read(&out).unwrap(), m);
        let q = m.provenance.quantization.as_ref().unwrap();
        assert_eq!(q.precision, "int8");
        assert_eq!(q.source_fingerprint, source.fingerprint);
        assert!(q.probe_cosine_min > 0.95, "{q:?}");
        assert!(q.probe_cosine_min <= q.probe_cosine_mean && q.probe_cosine_mean <= 1.0001);
        // The graph really is int8: every linear layer multiplies int8 weights, none float32.
        let bytes = std::fs::read(out.join(manifest::ONNX_FILE)).unwrap();
        let graph = crate::model::onnx_reader::decode_model(&bytes)
            .unwrap()
            .graph
            .unwrap();
        let ops = |op: &str| graph.node.iter().filter(|n| n.op_type == op).count();
        let layers = BertConfig::tiny().num_hidden_layers;
        assert_eq!(ops("MatMulInteger"), 6 * layers);
        assert_eq!(ops("MatMul"), 2 * layers); // attention scores and context only
        assert!(graph
            .initializer
            .iter()
            .all(|t| !t.name.ends_with(".weight.T")));

        // Quantising twice, or over an existing bundle, is refused with the reason.
        let err = quantize_bundle(&out, &dir.path().join("qq"), &Default::default(), &runtime)
            .unwrap_err()
            .to_string();
        assert!(err.contains("already quantised"), "{err}");
        let err = quantize_bundle(&base, &out, &Default::default(), &runtime)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--force"), "{err}");
    }

    #[test]
    fn reduced_range_is_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let base = tiny_bundle(dir.path());
        let options = QuantizeOptions {
            name: Some("tiny-7bit".into()),
            reduce_range: true,
            ..Default::default()
        };
        let m = quantize_bundle(
            &base,
            &dir.path().join("q7"),
            &options,
            &RuntimeOptions::default(),
        )
        .unwrap();
        let q = m.provenance.quantization.unwrap();
        assert_eq!(q.precision, "int8-7bit");
        assert!(q.probe_cosine_min > 0.9, "{q:?}");
    }

    #[test]
    fn serve_only_bundles_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let base = tiny_bundle(dir.path());
        std::fs::remove_file(base.join(manifest::WEIGHTS_FILE)).unwrap();
        let err = quantize_bundle(
            &base,
            &dir.path().join("q"),
            &Default::default(),
            &RuntimeOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("carries no weights"), "{err}");
        assert!(!dir.path().join("q").exists());
    }
}
