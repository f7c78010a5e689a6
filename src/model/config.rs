//! The BERT-family hyper-parameters read from a Hugging Face `config.json`.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::ModelError;

/// Architecture hyper-parameters of a BERT-family encoder (BERT, MiniLM and relatives).
///
/// Only what the graph writer and the candle network need is kept; anything that would change
/// the computation and that we do not implement is rejected by [`BertConfig::validate`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BertConfig {
    #[serde(default = "default_model_type")]
    pub model_type: String,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    #[serde(default = "default_hidden_act")]
    pub hidden_act: String,
    #[serde(default = "default_max_positions")]
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub pad_token_id: usize,
    #[serde(default = "default_position_embedding_type")]
    pub position_embedding_type: String,
    #[serde(default)]
    pub architectures: Vec<String>,
}

fn default_model_type() -> String {
    "bert".into()
}
fn default_hidden_act() -> String {
    "gelu".into()
}
fn default_max_positions() -> usize {
    512
}
fn default_type_vocab() -> usize {
    2
}
fn default_eps() -> f64 {
    1e-12
}
fn default_position_embedding_type() -> String {
    "absolute".into()
}

/// `model_type` values whose network is exactly BERT's (post-layer-norm encoder, absolute positions).
const SUPPORTED_MODEL_TYPES: &[&str] = &["bert", "dpr"];

impl BertConfig {
    /// Reads and validates a Hugging Face `config.json`.
    pub fn from_file(path: &Path) -> Result<Self, ModelError> {
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::io(path, e))?;
        let config: BertConfig = serde_json::from_str(&text).map_err(|e| ModelError::Format {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Rejects configurations the project's writer and network do not implement, naming what is unsupported.
    pub fn validate(&self) -> Result<(), ModelError> {
        if !SUPPORTED_MODEL_TYPES.contains(&self.model_type.as_str()) {
            return Err(ModelError::Unsupported(format!(
                "model_type {:?} (supported: {})",
                self.model_type,
                SUPPORTED_MODEL_TYPES.join(", ")
            )));
        }
        if self.hidden_act != "gelu" {
            return Err(ModelError::Unsupported(format!(
                "hidden_act {:?} (supported: \"gelu\", the exact erf form)",
                self.hidden_act
            )));
        }
        if self.position_embedding_type != "absolute" {
            return Err(ModelError::Unsupported(format!(
                "position_embedding_type {:?} (supported: \"absolute\")",
                self.position_embedding_type
            )));
        }
        if self.num_attention_heads == 0
            || !self.hidden_size.is_multiple_of(self.num_attention_heads)
        {
            return Err(ModelError::Unsupported(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            )));
        }
        if self.vocab_size == 0 || self.num_hidden_layers == 0 || self.intermediate_size == 0 {
            return Err(ModelError::Unsupported(
                "vocab_size, num_hidden_layers and intermediate_size must be positive".into(),
            ));
        }
        Ok(())
    }

    /// Size of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }

    /// A tiny configuration for fast unit tests with randomly initialised weights.
    pub fn tiny() -> Self {
        BertConfig {
            model_type: "bert".into(),
            vocab_size: 128,
            hidden_size: 32,
            num_hidden_layers: 2,
            num_attention_heads: 4,
            intermediate_size: 64,
            hidden_act: "gelu".into(),
            max_position_embeddings: 64,
            type_vocab_size: 2,
            layer_norm_eps: 1e-12,
            pad_token_id: 0,
            position_embedding_type: "absolute".into(),
            architectures: vec!["BertModel".into()],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_unsupported_architecture_by_name() {
        let mut c = BertConfig::tiny();
        c.model_type = "roberta".into();
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("roberta"), "{err}");
        let mut c = BertConfig::tiny();
        c.hidden_act = "relu".into();
        assert!(c.validate().unwrap_err().to_string().contains("relu"));
        let mut c = BertConfig::tiny();
        c.num_attention_heads = 5;
        assert!(c.validate().is_err());
    }

    #[test]
    fn parses_minimal_json_with_defaults() {
        let json = r#"{"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1,
            "num_attention_heads": 2, "intermediate_size": 16}"#;
        let c: BertConfig = serde_json::from_str(json).unwrap();
        c.validate().unwrap();
        assert_eq!(c.layer_norm_eps, 1e-12);
        assert_eq!(c.head_dim(), 4);
    }
}
