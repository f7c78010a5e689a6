//! `encoder.json`: the self-description of an encoder bundle.

use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::EncoderError;

/// File names inside an encoder bundle directory.
pub const MANIFEST_FILE: &str = "encoder.json";
pub const ONNX_FILE: &str = "model.onnx";
pub const TOKENIZER_FILE: &str = "tokenizer.json";
pub const WEIGHTS_FILE: &str = "model.safetensors";
pub const CONFIG_FILE: &str = "config.json";

/// The manifest format this build writes and reads.
pub const MANIFEST_FORMAT: u32 = 1;

/// Which side of a bi-encoder a bundle encodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Encodes queries only (e.g. a DPR question encoder, or a CAPOT-aligned query encoder).
    Query,
    /// Encodes documents only (e.g. a DPR context encoder).
    Document,
    /// One network for both sides (e.g. all-MiniLM-L6-v2).
    Symmetric,
}

/// How token vectors become one text vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Pooling {
    /// Mean of the token vectors under the attention mask (sentence-transformers' default).
    Mean,
    /// The first token's vector (`[CLS]`), as DPR does.
    Cls,
    /// The graph already outputs one vector per text.
    Pooled,
}

impl std::fmt::Display for Pooling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Pooling::Mean => "mean",
            Pooling::Cls => "cls",
            Pooling::Pooled => "pooled",
        })
    }
}

/// Names of the ONNX graph's inputs and the output the encoder reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OnnxIo {
    pub input_ids: String,
    pub attention_mask: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_type_ids: Option<String>,
    pub output: String,
}

impl Default for OnnxIo {
    fn default() -> Self {
        OnnxIo {
            input_ids: "input_ids".into(),
            attention_mask: "attention_mask".into(),
            token_type_ids: Some("token_type_ids".into()),
            output: "last_hidden_state".into(),
        }
    }
}

/// Where a bundle came from and how it was made.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// What it was made from: a Hugging Face directory, an ONNX file, or a base encoder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Name and version of the encoder it was aligned from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_encoder: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objective: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<String>,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub hyper_parameters: serde_json::Value,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub evaluation: serde_json::Value,
    /// For aligned encoders: data, steps, final losses, speed and wall time of the training run
    /// (the full curve is in the bundle's `training.json`).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub training: serde_json::Value,
    /// For quantised bundles (`capot encoder quantize`): precision, method, source and how close
    /// its vectors stay to the source's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantization: Option<super::quantize::Quantization>,
    /// Free-form notes, e.g. why weights could not be recovered from an imported ONNX.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    pub created_at: String,
    pub capot_version: String,
}

/// The manifest (`encoder.json`) of an encoder bundle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EncoderManifest {
    pub format: u32,
    pub name: String,
    pub version: String,
    pub role: Role,
    pub pooling: Pooling,
    pub normalize: bool,
    /// Maximum tokens per text, special tokens included; longer texts are truncated.
    pub max_length: usize,
    pub dimension: usize,
    /// Text prepended to every input (e.g. `"query: "` for E5-style models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    pub onnx: OnnxIo,
    /// sha256 of `model.onnx`, checked at load.
    pub onnx_sha256: String,
    /// sha256 of `tokenizer.json`.
    pub tokenizer_sha256: String,
    /// sha256 of `model.safetensors` when the bundle carries trainable weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights_sha256: Option<String>,
    /// Identity of the vector space this encoder produces (see [`fingerprint`]).
    pub fingerprint: String,
    /// Fingerprint of the document encoder whose index this encoder's vectors fit.
    pub aligned_to: String,
    pub provenance: Provenance,
}

impl EncoderManifest {
    /// Reads `encoder.json` from a bundle directory.
    pub fn read(bundle: &Path) -> Result<Self, EncoderError> {
        let path = bundle.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| EncoderError::io(&path, e))?;
        let m: EncoderManifest = serde_json::from_str(&text).map_err(|e| EncoderError::Bundle {
            path: path.clone(),
            message: format!("invalid manifest: {e}"),
        })?;
        if m.format != MANIFEST_FORMAT {
            return Err(EncoderError::Bundle {
                path,
                message: format!(
                    "manifest format {} is not supported (this build reads {MANIFEST_FORMAT})",
                    m.format
                ),
            });
        }
        Ok(m)
    }

    /// Writes `encoder.json` into a bundle directory, atomically and durably.
    pub fn write(&self, bundle: &Path) -> Result<(), EncoderError> {
        let path = bundle.join(MANIFEST_FILE);
        let text = serde_json::to_string_pretty(self).map_err(|e| EncoderError::Bundle {
            path: path.clone(),
            message: e.to_string(),
        })?;
        crate::atomic_file::write(&path, (text + "\n").as_bytes())
            .map_err(|e| EncoderError::io(&path, e))
    }

    /// `name@version`, how logs and responses identify the encoder.
    pub fn label(&self) -> String {
        format!("{}@{}", self.name, self.version)
    }
}

/// sha256 of a file, hex-encoded.
pub fn sha256_file(path: &Path) -> Result<String, EncoderError> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| EncoderError::io(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| EncoderError::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// The identity of the vector space an encoder produces: everything that changes the vector of
/// a text (network, tokenizer, pooling, normalisation, length limit, prefix). Two bundles with
/// the same fingerprint produce the same vectors; an index records its document encoder's.
pub fn fingerprint(m: &EncoderManifest) -> String {
    let mut h = Sha256::new();
    for part in [
        m.onnx_sha256.as_str(),
        m.tokenizer_sha256.as_str(),
        &m.pooling.to_string(),
        if m.normalize { "l2" } else { "raw" },
        &m.max_length.to_string(),
        m.prefix.as_deref().unwrap_or(""),
    ] {
        h.update(part.as_bytes());
        h.update([0u8]);
    }
    format!("sha256:{}", hex::encode(h.finalize()))
}
