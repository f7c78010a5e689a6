//! Encoder bundles: manifest, tokenization, ONNX Runtime sessions, pooling and normalisation.
//!
//! An [`Encoder`] turns texts into vectors exactly as its bundle's manifest says; it is what the
//! CLI's `encode`, the index builder and the search service run.

pub mod import;
pub mod manifest;
pub mod pool;
pub mod pooling;
pub mod quantize;
pub mod runtime;
pub mod tokenize;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ort::session::Session;
use ort::value::TensorElementType;
use ort::value::{DynValue, Tensor, ValueType};

pub use manifest::{EncoderManifest, OnnxIo, Pooling, Provenance, Role};
pub use runtime::{Device, Provider, RuntimeOptions};
pub use tokenize::{TextTokenizer, TokenBatch};

/// Errors from loading or running an encoder.
#[derive(Debug, thiserror::Error)]
pub enum EncoderError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Bundle { path: PathBuf, message: String },
    #[error("{0}")]
    RuntimeMissing(String),
    #[error("ONNX Runtime: {0}")]
    Runtime(String),
    #[error("{0}")]
    Config(String),
    #[error("tokenizer: {0}")]
    Tokenize(String),
    #[error("model output: {0}")]
    Output(String),
    #[error(transparent)]
    Model(#[from] crate::model::ModelError),
    /// Inference panicked; the worker caught it and failed the batch.
    #[error("the inference worker panicked: {0}")]
    Panicked(String),
}

impl EncoderError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        EncoderError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// A loaded encoder bundle, ready to turn texts into vectors. Safe to share between threads;
/// inference calls are serialised on the one ONNX Runtime session.
pub struct Encoder {
    dir: PathBuf,
    manifest: EncoderManifest,
    tokenizer: TextTokenizer,
    session: Mutex<Session>,
    ids_are_i32: bool,
    provider: Provider,
    /// Last field, so it drops after the session: gives the session's memory back to the OS.
    _release: ReleaseFreedMemory,
}

/// Returns the C heap's free pages to the OS when dropped (glibc's `malloc_trim`).
///
/// ONNX Runtime allocates a session's weights and arena with the C allocator, from whichever
/// glibc arena the loading thread had; after the session is freed those pages stay in that arena.
/// An operator who loads and unloads encoders all day (hot swap) would see the process grow by
/// tens of MB per cycle; trimming after each encoder is dropped keeps it flat. A no-op elsewhere.
pub(crate) struct ReleaseFreedMemory;

impl Drop for ReleaseFreedMemory {
    fn drop(&mut self) {
        // A trim walks the whole heap: never on a runtime worker (issue 43).
        crate::blocking::off_runtime(release_freed_memory);
    }
}

/// Gives the C heap's free pages back to the OS now (glibc's `malloc_trim`; a no-op elsewhere):
/// after a large structure is freed (an encoder's session, a replaced corpus version).
pub(crate) fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("dir", &self.dir)
            .field("name", &self.manifest.name)
            .field("version", &self.manifest.version)
            .field("provider", &self.provider)
            .finish()
    }
}

impl Encoder {
    /// Loads a bundle: reads and checks its manifest, verifies the ONNX file's sha256, checks the
    /// graph's inputs and output, and runs one warm-up inference that checks the dimension.
    pub fn load(dir: &Path, options: &RuntimeOptions) -> Result<Self, EncoderError> {
        let encoder = Self::open(dir, options)?;
        encoder.encode(&["warm up"])?;
        Ok(encoder)
    }

    /// Opens a bundle without the warm-up inference.
    fn open(dir: &Path, options: &RuntimeOptions) -> Result<Self, EncoderError> {
        let manifest = EncoderManifest::read(dir)?;
        let onnx = dir.join(manifest::ONNX_FILE);
        let actual = manifest::sha256_file(&onnx)?;
        if actual != manifest.onnx_sha256 {
            return Err(EncoderError::Bundle {
                path: onnx,
                message: format!(
                    "sha256 {actual} does not match the manifest's {}; the bundle is corrupt or was edited",
                    manifest.onnx_sha256
                ),
            });
        }
        let tokenizer = TextTokenizer::from_file(
            &dir.join(manifest::TOKENIZER_FILE),
            manifest.max_length,
            manifest.prefix.clone(),
        )?;
        let (session, provider) = runtime::create_session(&onnx, options)?;
        let ids_are_i32 = check_signature(&session, &manifest.onnx, &onnx)?;
        tracing::info!(encoder = %manifest.label(), provider = %provider, "encoder loaded");
        Ok(Encoder {
            dir: dir.to_path_buf(),
            manifest,
            tokenizer,
            session: Mutex::new(session),
            ids_are_i32,
            provider,
            _release: ReleaseFreedMemory,
        })
    }

    /// The size of the graph output's last axis, found by one inference (for ONNX imports whose
    /// output dimension is symbolic).
    pub(crate) fn probe_output_dimension(
        dir: &Path,
        options: &RuntimeOptions,
    ) -> Result<usize, EncoderError> {
        let encoder = Self::open(dir, options)?;
        let batch = encoder.tokenizer.encode_batch(&["probe"])?;
        let (dims, _) = encoder.raw_output(&batch)?;
        dims.last()
            .copied()
            .filter(|d| *d > 0)
            .ok_or_else(|| EncoderError::Output(format!("output has shape {dims:?}")))
    }

    pub fn manifest(&self) -> &EncoderManifest {
        &self.manifest
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn dimension(&self) -> usize {
        self.manifest.dimension
    }

    /// The execution provider inference runs on.
    pub fn provider(&self) -> &Provider {
        &self.provider
    }

    pub fn tokenizer(&self) -> &TextTokenizer {
        &self.tokenizer
    }

    /// Tokenizes, runs and pools a batch of texts.
    pub fn encode<S: AsRef<str>>(&self, texts: &[S]) -> Result<Vec<Vec<f32>>, EncoderError> {
        let batch = self.tokenizer.encode_batch(texts)?;
        self.run(&batch)
    }

    /// Runs the network on a tokenized batch and returns one (pooled, normalised) vector per text.
    pub fn run(&self, batch: &TokenBatch) -> Result<Vec<Vec<f32>>, EncoderError> {
        if batch.batch == 0 {
            return Ok(vec![]);
        }
        let (dims, data) = self.raw_output(batch)?;
        let io = &self.manifest.onnx;
        let data = data.as_slice();
        let dim = self.manifest.dimension;
        let mut vectors = match (self.manifest.pooling, dims.as_slice()) {
            (Pooling::Mean, [b, s, d]) if *b == batch.batch && *s == batch.sequence && *d == dim => {
                pooling::mean_pool(data, &batch.attention_mask, *b, *s, *d)
            }
            (Pooling::Cls, [b, s, d]) if *b == batch.batch && *s == batch.sequence && *d == dim => {
                pooling::cls_pool(data, *b, *s, *d)
            }
            (Pooling::Pooled, [b, d]) if *b == batch.batch && *d == dim => {
                data.chunks_exact(dim).map(<[f32]>::to_vec).collect()
            }
            (pooling, _) => {
                return Err(EncoderError::Output(format!(
                    "output {:?} has shape {:?}, which does not fit pooling {pooling} for a batch of {}×{} and dimension {dim}",
                    io.output, dims, batch.batch, batch.sequence
                )))
            }
        };
        if self.manifest.normalize {
            vectors.iter_mut().for_each(|v| pooling::l2_normalize(v));
        }
        Ok(vectors)
    }

    /// Runs the graph and returns the chosen output's shape and values.
    fn raw_output(&self, batch: &TokenBatch) -> Result<(Vec<usize>, Vec<f32>), EncoderError> {
        let shape = [batch.batch, batch.sequence];
        let io = &self.manifest.onnx;
        let mut inputs: Vec<(String, DynValue)> = vec![
            (
                io.input_ids.clone(),
                self.id_tensor(shape, &batch.input_ids)?,
            ),
            (
                io.attention_mask.clone(),
                self.id_tensor(shape, &batch.attention_mask)?,
            ),
        ];
        if let Some(name) = &io.token_type_ids {
            inputs.push((name.clone(), self.id_tensor(shape, &batch.token_type_ids)?));
        }
        let mut session = self.session.lock().map_err(|_| {
            EncoderError::Runtime("session lock poisoned by an earlier panic".into())
        })?;
        let outputs = session
            .run(inputs)
            .map_err(|e| EncoderError::Runtime(e.to_string()))?;
        let value = outputs.get(&io.output).ok_or_else(|| {
            EncoderError::Output(format!("graph produced no output {:?}", io.output))
        })?;
        let (out_shape, data) = value
            .try_extract_tensor::<f32>()
            .map_err(|e| EncoderError::Output(format!("{}: {e}", io.output)))?;
        let dims: Vec<usize> = out_shape.iter().map(|&d| d.max(0) as usize).collect();
        Ok((dims, data.to_vec()))
    }

    fn id_tensor(&self, shape: [usize; 2], values: &[i64]) -> Result<DynValue, EncoderError> {
        let err = |e: ort::Error| EncoderError::Runtime(e.to_string());
        if self.ids_are_i32 {
            let v: Vec<i32> = values.iter().map(|&x| x as i32).collect();
            Ok(Tensor::from_array((shape, v)).map_err(err)?.into_dyn())
        } else {
            Ok(Tensor::from_array((shape, values.to_vec()))
                .map_err(err)?
                .into_dyn())
        }
    }
}

/// Checks the session has the inputs and output the manifest names; returns whether the id
/// inputs are int32 (some exports) rather than int64.
fn check_signature(session: &Session, io: &OnnxIo, onnx: &Path) -> Result<bool, EncoderError> {
    let bad = |message: String| EncoderError::Bundle {
        path: onnx.to_path_buf(),
        message,
    };
    let input_type = |name: &str| -> Result<TensorElementType, EncoderError> {
        let outlet = session
            .inputs()
            .iter()
            .find(|o| o.name() == name)
            .ok_or_else(|| {
                let have: Vec<&str> = session.inputs().iter().map(|o| o.name()).collect();
                bad(format!(
                    "graph has no input {name:?} (inputs: {})",
                    have.join(", ")
                ))
            })?;
        match outlet.dtype() {
            ValueType::Tensor { ty, .. } => Ok(*ty),
            other => Err(bad(format!("input {name:?} is not a tensor ({other:?})"))),
        }
    };
    let ids = input_type(&io.input_ids)?;
    let mask = input_type(&io.attention_mask)?;
    let mut types = vec![ids, mask];
    if let Some(t) = &io.token_type_ids {
        types.push(input_type(t)?);
    }
    let all = |t: TensorElementType| types.iter().all(|x| *x == t);
    let i32_ids = if all(TensorElementType::Int64) {
        false
    } else if all(TensorElementType::Int32) {
        true
    } else {
        return Err(bad(format!(
            "token inputs must all be int64 or all int32, found {types:?}"
        )));
    };
    if !session.outputs().iter().any(|o| o.name() == io.output) {
        let have: Vec<&str> = session.outputs().iter().map(|o| o.name()).collect();
        return Err(bad(format!(
            "graph has no output {:?} (outputs: {})",
            io.output,
            have.join(", ")
        )));
    }
    Ok(i32_ids)
}
