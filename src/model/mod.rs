//! The BERT-family network: configuration, weights (safetensors), the ONNX graph writer and
//! reader, and the same network in candle for training.

pub mod bert;
pub mod config;
pub mod onnx_proto;
pub mod onnx_reader;
pub mod onnx_writer;
pub mod weights;

use std::path::{Path, PathBuf};

pub use bert::BertModel;
pub use config::BertConfig;
pub use weights::{BertWeights, WeightTensor};

/// Errors from reading, validating or writing a model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: malformed file: {message}")]
    Format { path: PathBuf, message: String },
    #[error("unsupported architecture: {0}")]
    Unsupported(String),
    #[error("missing tensor {0}")]
    MissingTensor(String),
    #[error("shape mismatch: {0}")]
    Shape(String),
    #[error("{0}")]
    Graph(String),
    #[error("candle: {0}")]
    Candle(String),
    /// The bytes are not a usable ONNX model.
    #[error("not a valid ONNX model: {0}")]
    OnnxDecode(String),
    /// An ONNX graph is not a BERT export whose weights can be rebuilt (it may still be served).
    #[error("cannot recover BERT weights from the ONNX graph: {0}")]
    Recovery(String),
}

impl ModelError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        ModelError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
