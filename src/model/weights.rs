//! BERT weights as named f32 tensors: safetensors I/O, name normalisation and random initialisation.
//!
//! Names are those of Hugging Face's `BertModel` (`embeddings.word_embeddings.weight`,
//! `encoder.layer.0.attention.self.query.weight`, ...). Linear weights keep PyTorch's
//! `[out, in]` layout.

use std::collections::BTreeMap;
use std::path::Path;

use safetensors::{Dtype, SafeTensors};

use super::{BertConfig, ModelError};

/// One named tensor in row-major order.
#[derive(Debug, Clone, PartialEq)]
pub struct WeightTensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl WeightTensor {
    pub fn new(shape: Vec<usize>, data: Vec<f32>) -> Self {
        debug_assert_eq!(shape.iter().product::<usize>(), data.len());
        WeightTensor { shape, data }
    }

    /// The transpose of a 2-D tensor (`[out, in]` → `[in, out]`).
    pub fn transposed(&self) -> Result<WeightTensor, ModelError> {
        let [rows, cols] = self.shape[..] else {
            return Err(ModelError::Shape(format!(
                "transpose needs a 2-D tensor, got shape {:?}",
                self.shape
            )));
        };
        let mut out = vec![0f32; rows * cols];
        for r in 0..rows {
            for c in 0..cols {
                out[c * rows + r] = self.data[r * cols + c];
            }
        }
        Ok(WeightTensor::new(vec![cols, rows], out))
    }
}

/// All weights of one BERT encoder, keyed by canonical name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BertWeights {
    pub tensors: BTreeMap<String, WeightTensor>,
}

/// Prefixes that wrap a `BertModel` inside other Hugging Face heads (MLM, DPR towers, ...).
const WRAPPER_PREFIXES: &[&str] = &[
    "bert.",
    "model.",
    "question_encoder.bert_model.",
    "ctx_encoder.bert_model.",
    "bert_model.",
];

/// Maps a checkpoint's tensor name to the canonical `BertModel` name, or `None` for tensors the
/// encoder does not use (heads, buffers such as `position_ids`).
pub fn canonical_name(name: &str) -> Option<String> {
    let mut n = name;
    for p in WRAPPER_PREFIXES {
        if let Some(rest) = n.strip_prefix(p) {
            n = rest;
            break;
        }
    }
    if !(n.starts_with("embeddings.") || n.starts_with("encoder.") || n.starts_with("pooler.")) {
        return None;
    }
    if n.ends_with("position_ids") {
        return None;
    }
    // Old TF-converted checkpoints name layer-norm parameters gamma/beta.
    let n = n
        .replace("LayerNorm.gamma", "LayerNorm.weight")
        .replace("LayerNorm.beta", "LayerNorm.bias");
    Some(n)
}

/// Names of every tensor the encoder needs for `config` (the pooler is optional and not listed).
pub fn required_names(config: &BertConfig) -> Vec<String> {
    let mut names = vec![
        "embeddings.word_embeddings.weight".to_string(),
        "embeddings.position_embeddings.weight".to_string(),
        "embeddings.token_type_embeddings.weight".to_string(),
        "embeddings.LayerNorm.weight".to_string(),
        "embeddings.LayerNorm.bias".to_string(),
    ];
    for l in 0..config.num_hidden_layers {
        for suffix in [
            "attention.self.query",
            "attention.self.key",
            "attention.self.value",
            "attention.output.dense",
            "attention.output.LayerNorm",
            "intermediate.dense",
            "output.dense",
            "output.LayerNorm",
        ] {
            names.push(format!("encoder.layer.{l}.{suffix}.weight"));
            names.push(format!("encoder.layer.{l}.{suffix}.bias"));
        }
    }
    names
}

/// The shape each required tensor must have under `config`.
pub fn expected_shape(config: &BertConfig, name: &str) -> Option<Vec<usize>> {
    let h = config.hidden_size;
    let i = config.intermediate_size;
    let shape = match name {
        "embeddings.word_embeddings.weight" => vec![config.vocab_size, h],
        "embeddings.position_embeddings.weight" => vec![config.max_position_embeddings, h],
        "embeddings.token_type_embeddings.weight" => vec![config.type_vocab_size, h],
        n if n.ends_with("LayerNorm.weight") || n.ends_with("LayerNorm.bias") => vec![h],
        n if n.ends_with("intermediate.dense.weight") => vec![i, h],
        n if n.ends_with("intermediate.dense.bias") => vec![i],
        n if n.ends_with("output.dense.weight") && !n.contains("attention") => vec![h, i],
        n if n.ends_with(".weight") && n.starts_with("encoder.") => vec![h, h],
        n if n.ends_with(".bias") && n.starts_with("encoder.") => vec![h],
        _ => return None,
    };
    Some(shape)
}

impl BertWeights {
    /// Reads a safetensors file, converting f16/bf16/f64 to f32 and normalising names.
    pub fn load_safetensors(path: &Path) -> Result<Self, ModelError> {
        let bytes = std::fs::read(path).map_err(|e| ModelError::io(path, e))?;
        Self::from_safetensors_bytes(&bytes).map_err(|e| match e {
            ModelError::Format { message, .. } => ModelError::Format {
                path: path.to_path_buf(),
                message,
            },
            other => other,
        })
    }

    /// Parses safetensors bytes (see [`BertWeights::load_safetensors`]).
    pub fn from_safetensors_bytes(bytes: &[u8]) -> Result<Self, ModelError> {
        let format_err = |message: String| ModelError::Format {
            path: Default::default(),
            message,
        };
        let st = SafeTensors::deserialize(bytes).map_err(|e| format_err(e.to_string()))?;
        let mut tensors = BTreeMap::new();
        for (name, view) in st.tensors() {
            let Some(canonical) = canonical_name(&name) else {
                continue;
            };
            let raw = view.data();
            let data: Vec<f32> = match view.dtype() {
                Dtype::F32 => raw
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
                Dtype::F16 => raw
                    .chunks_exact(2)
                    .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
                    .collect(),
                Dtype::BF16 => raw
                    .chunks_exact(2)
                    .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
                    .collect(),
                Dtype::F64 => raw
                    .chunks_exact(8)
                    .map(|c| {
                        f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) as f32
                    })
                    .collect(),
                other => {
                    return Err(format_err(format!(
                    "tensor {name} has dtype {other:?}; only floating-point weights are supported"
                )))
                }
            };
            tensors.insert(canonical, WeightTensor::new(view.shape().to_vec(), data));
        }
        Ok(BertWeights { tensors })
    }

    /// Writes all tensors as f32 safetensors (written to a temporary file, then renamed).
    pub fn save_safetensors(&self, path: &Path) -> Result<(), ModelError> {
        let bytes: Vec<(String, Vec<u8>, Vec<usize>)> = self
            .tensors
            .iter()
            .map(|(n, t)| {
                let b = t.data.iter().flat_map(|v| v.to_le_bytes()).collect();
                (n.clone(), b, t.shape.clone())
            })
            .collect();
        let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = bytes
            .iter()
            .map(|(n, b, s)| {
                safetensors::tensor::TensorView::new(Dtype::F32, s.clone(), b)
                    .map(|v| (n.clone(), v))
                    .map_err(|e| ModelError::Shape(format!("{n}: {e}")))
            })
            .collect::<Result<_, _>>()?;
        let bytes =
            safetensors::tensor::serialize(views, None).map_err(|e| ModelError::Format {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        crate::atomic_file::write(path, &bytes).map_err(|e| ModelError::io(path, e))
    }

    /// Looks up a tensor by canonical name.
    pub fn get(&self, name: &str) -> Result<&WeightTensor, ModelError> {
        self.tensors
            .get(name)
            .ok_or_else(|| ModelError::MissingTensor(name.to_string()))
    }

    /// Checks that every tensor `config` needs is present with the right shape.
    pub fn validate(&self, config: &BertConfig) -> Result<(), ModelError> {
        for name in required_names(config) {
            let t = self.get(&name)?;
            if let Some(expected) = expected_shape(config, &name) {
                if t.shape != expected {
                    return Err(ModelError::Shape(format!(
                        "{name} has shape {:?}, config.json implies {:?}",
                        t.shape, expected
                    )));
                }
            }
        }
        Ok(())
    }

    /// Random weights for `config` (deterministic for `seed`): small normal-ish values,
    /// layer norms at identity. For unit tests that need a model but not a trained one.
    pub fn random(config: &BertConfig, seed: u64) -> Self {
        let mut state = seed ^ 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            // splitmix64 → uniform in [-1, 1)
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (z >> 11) as f32 / (1u64 << 53) as f32 * 2.0 - 1.0
        };
        let mut tensors = BTreeMap::new();
        for name in required_names(config) {
            let shape = expected_shape(config, &name).unwrap_or_default();
            let n: usize = shape.iter().product();
            let data: Vec<f32> = if name.ends_with("LayerNorm.weight") {
                (0..n).map(|_| 1.0 + 0.1 * next()).collect()
            } else if name.ends_with("LayerNorm.bias") || name.ends_with(".bias") {
                (0..n).map(|_| 0.05 * next()).collect()
            } else {
                (0..n).map(|_| 0.08 * next()).collect()
            };
            tensors.insert(name, WeightTensor::new(shape, data));
        }
        BertWeights { tensors }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_names_strip_wrappers_and_skip_heads() {
        assert_eq!(
            canonical_name("bert.encoder.layer.0.output.dense.weight").as_deref(),
            Some("encoder.layer.0.output.dense.weight")
        );
        assert_eq!(
            canonical_name("embeddings.LayerNorm.gamma").as_deref(),
            Some("embeddings.LayerNorm.weight")
        );
        assert_eq!(canonical_name("cls.predictions.bias"), None);
        assert_eq!(canonical_name("embeddings.position_ids"), None);
    }

    #[test]
    fn safetensors_round_trip_and_validate() {
        let config = BertConfig::tiny();
        let w = BertWeights::random(&config, 7);
        w.validate(&config).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.safetensors");
        w.save_safetensors(&path).unwrap();
        let back = BertWeights::load_safetensors(&path).unwrap();
        assert_eq!(w, back);
    }

    #[test]
    fn validate_names_missing_and_misshapen_tensors() {
        let config = BertConfig::tiny();
        let mut w = BertWeights::random(&config, 1);
        w.tensors.remove("encoder.layer.1.output.dense.bias");
        assert!(w
            .validate(&config)
            .unwrap_err()
            .to_string()
            .contains("encoder.layer.1.output.dense.bias"));
        let mut w = BertWeights::random(&config, 1);
        w.tensors
            .get_mut("embeddings.word_embeddings.weight")
            .unwrap()
            .shape = vec![64, 64];
        assert!(w.validate(&config).is_err());
    }

    #[test]
    fn corrupt_safetensors_is_an_error_not_a_panic() {
        assert!(BertWeights::from_safetensors_bytes(b"not a safetensors file").is_err());
        assert!(BertWeights::from_safetensors_bytes(&[255; 8]).is_err());
    }

    #[test]
    fn transpose_is_correct() {
        let t = WeightTensor::new(vec![2, 3], vec![1., 2., 3., 4., 5., 6.]);
        let tt = t.transposed().unwrap();
        assert_eq!(tt.shape, vec![3, 2]);
        assert_eq!(tt.data, vec![1., 4., 2., 5., 3., 6.]);
    }
}
