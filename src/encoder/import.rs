//! Making encoder bundles: from Hugging Face-format weights (the project writes the ONNX graph),
//! or from a user's existing ONNX export (weights recovered when the graph allows it).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::manifest::{self, EncoderManifest, OnnxIo, Pooling, Provenance, Role};
use super::{Encoder, EncoderError, RuntimeOptions};
use crate::model::{onnx_reader, onnx_writer, BertConfig, BertWeights};

/// What the user asked for at import; `None` fields are read from the source or defaulted.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    pub name: Option<String>,
    pub version: Option<String>,
    pub pooling: Option<Pooling>,
    pub max_length: Option<usize>,
    /// Skip L2 normalisation (vectors are normalised by default: the index scores by cosine).
    pub no_normalize: bool,
    pub prefix: Option<String>,
    pub role: Option<Role>,
    /// A document-encoder bundle this query encoder is paired with (asymmetric towers).
    pub pair_with: Option<PathBuf>,
    /// Attention heads, for ONNX files whose graph does not reveal them.
    pub num_heads: Option<usize>,
    /// Replace an existing bundle at the destination.
    pub force: bool,
}

/// The result of an import, for the CLI to report.
#[derive(Debug)]
pub struct ImportReport {
    pub manifest: EncoderManifest,
    /// Whether the bundle carries weights (and can therefore be aligned further).
    pub trainable: bool,
    pub notes: Vec<String>,
}

#[derive(Deserialize)]
struct StPooling {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
}

#[derive(Deserialize)]
struct StConfig {
    max_seq_length: Option<usize>,
}

#[derive(Deserialize)]
struct StModule {
    #[serde(rename = "type", default)]
    kind: String,
}

/// Reads the sentence-transformers pooling config, if the directory has one.
fn st_pooling(dir: &Path) -> Result<Option<Pooling>, EncoderError> {
    let path = dir.join("1_Pooling").join("config.json");
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).map_err(|e| EncoderError::io(&path, e))?;
    let p: StPooling = serde_json::from_str(&text).map_err(|e| EncoderError::Bundle {
        path: path.clone(),
        message: e.to_string(),
    })?;
    if p.pooling_mode_max_tokens || p.pooling_mode_mean_sqrt_len_tokens {
        return Err(EncoderError::Config(format!(
            "{}: max and mean-sqrt-len pooling are not supported (mean and cls are)",
            path.display()
        )));
    }
    Ok(
        match (p.pooling_mode_mean_tokens, p.pooling_mode_cls_token) {
            (true, false) => Some(Pooling::Mean),
            (false, true) => Some(Pooling::Cls),
            (true, true) => {
                return Err(EncoderError::Config(format!(
                    "{}: concatenated mean+cls pooling is not supported",
                    path.display()
                )))
            }
            (false, false) => None,
        },
    )
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, EncoderError> {
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).map_err(|e| EncoderError::io(path, e))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| EncoderError::Bundle {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
}

/// Whether a sentence-transformers `modules.json` lists a Normalize module (`None`: no file).
fn st_normalizes(dir: &Path) -> Result<Option<bool>, EncoderError> {
    let modules: Option<Vec<StModule>> = read_json(&dir.join("modules.json"))?;
    Ok(modules.map(|m| m.iter().any(|m| m.kind.ends_with("Normalize"))))
}

/// Imports a Hugging Face-format BERT-family encoder directory into a bundle at `out`.
pub fn import_hf(
    hf_dir: &Path,
    out: &Path,
    options: &ImportOptions,
    runtime: &RuntimeOptions,
) -> Result<ImportReport, EncoderError> {
    let need = |file: &str| -> Result<PathBuf, EncoderError> {
        let p = hf_dir.join(file);
        if p.is_file() {
            Ok(p)
        } else {
            Err(EncoderError::Config(format!(
                "{} has no {file} (a Hugging Face encoder directory needs config.json, model.safetensors and tokenizer.json{})",
                hf_dir.display(),
                if file == manifest::WEIGHTS_FILE && hf_dir.join("pytorch_model.bin").is_file() {
                    "; this one has only pytorch_model.bin — convert it to safetensors first"
                } else {
                    ""
                }
            )))
        }
    };
    let config_path = need(manifest::CONFIG_FILE)?;
    let weights_path = need(manifest::WEIGHTS_FILE)?;
    let tokenizer_path = need(manifest::TOKENIZER_FILE)?;
    let config = BertConfig::from_file(&config_path)?;
    let weights = BertWeights::load_safetensors(&weights_path)?;
    weights.validate(&config)?;

    let pooling = match options.pooling {
        Some(p) => p,
        None => st_pooling(hf_dir)?.unwrap_or(Pooling::Mean),
    };
    if pooling == Pooling::Pooled {
        return Err(EncoderError::Config(
            "pooling \"pooled\" applies to ONNX imports whose graph pools; use mean or cls".into(),
        ));
    }
    let st: Option<StConfig> = read_json(&hf_dir.join("sentence_bert_config.json"))?;
    let max_length = options
        .max_length
        .or(st.and_then(|s| s.max_seq_length))
        .unwrap_or(config.max_position_embeddings.min(512));
    check_max_length(max_length, config.max_position_embeddings)?;
    let normalize = !options.no_normalize && st_normalizes(hf_dir)?.unwrap_or(true);

    let onnx_bytes = onnx_writer::write_bert_onnx(&config, &weights)?;
    let source = format!("huggingface directory {}", hf_dir.display());
    let staged = Staged::new(out, options.force)?;
    std::fs::write(staged.path().join(manifest::ONNX_FILE), &onnx_bytes)
        .map_err(|e| EncoderError::io(staged.path(), e))?;
    copy(
        &tokenizer_path,
        &staged.path().join(manifest::TOKENIZER_FILE),
    )?;
    weights.save_safetensors(&staged.path().join(manifest::WEIGHTS_FILE))?;
    write_config(&config, &staged.path().join(manifest::CONFIG_FILE))?;
    let notes = Vec::new();
    let m = finish(
        &staged,
        hf_dir,
        options,
        OnnxIo::default(),
        pooling,
        normalize,
        max_length,
        config.hidden_size,
        true,
        source,
        notes.clone(),
        runtime,
    )?;
    staged.commit()?;
    Ok(ImportReport {
        manifest: m,
        trainable: true,
        notes,
    })
}

/// Imports a user's ONNX export plus its tokenizer into a bundle at `out`.
pub fn import_onnx(
    onnx_path: &Path,
    tokenizer_path: &Path,
    out: &Path,
    options: &ImportOptions,
    runtime: &RuntimeOptions,
) -> Result<ImportReport, EncoderError> {
    let bytes = std::fs::read(onnx_path).map_err(|e| EncoderError::io(onnx_path, e))?;
    if !tokenizer_path.is_file() {
        return Err(EncoderError::io(
            tokenizer_path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "tokenizer file not found"),
        ));
    }
    let model = onnx_reader::decode_model(&bytes).map_err(|e| with_path(e, onnx_path))?;
    let signature = onnx_reader::inspect_signature(&model).map_err(|e| with_path(e, onnx_path))?;
    let pooled_output = signature.output_kind != onnx_reader::OutputKind::TokenEmbeddings;
    let pooling = match (options.pooling, pooled_output) {
        (Some(Pooling::Pooled), false) => {
            return Err(EncoderError::Config(format!(
                "--pooling pooled needs a graph output of one vector per text; {} outputs token vectors ({})",
                onnx_path.display(),
                signature.output
            )))
        }
        (Some(p), false) => p,
        (_, true) => Pooling::Pooled,
        (None, false) => Pooling::Mean,
    };
    let io = OnnxIo {
        input_ids: signature.input_ids.name.clone(),
        attention_mask: signature.attention_mask.name.clone(),
        token_type_ids: signature.token_type_ids.as_ref().map(|t| t.name.clone()),
        output: signature.output.clone(),
    };
    let mut notes = Vec::new();
    let recovered = match onnx_reader::recover_bert_weights(&model, options.num_heads) {
        Ok((config, weights)) => Some((config, weights)),
        Err(e) => {
            notes.push(format!(
                "weights could not be recovered from the graph ({e}); the bundle can be served but not aligned"
            ));
            None
        }
    };
    let max_position = recovered
        .as_ref()
        .map(|(c, _)| c.max_position_embeddings)
        .unwrap_or(512);
    let max_length = options.max_length.unwrap_or(max_position.min(512));
    check_max_length(max_length, max_position)?;
    let dimension = match (&recovered, signature.dimension) {
        (_, Some(d)) => d,
        (Some((c, _)), None) => c.hidden_size,
        (None, None) => 0, // learned from the smoke inference below
    };

    let staged = Staged::new(out, options.force)?;
    copy(onnx_path, &staged.path().join(manifest::ONNX_FILE))?;
    copy(
        tokenizer_path,
        &staged.path().join(manifest::TOKENIZER_FILE),
    )?;
    if let Some((config, weights)) = &recovered {
        weights.save_safetensors(&staged.path().join(manifest::WEIGHTS_FILE))?;
        write_config(config, &staged.path().join(manifest::CONFIG_FILE))?;
        notes.push(format!(
            "weights recovered from the graph: {} layers, hidden {}, {} heads",
            config.num_hidden_layers, config.hidden_size, config.num_attention_heads
        ));
    }
    let m = finish(
        &staged,
        onnx_path,
        options,
        io,
        pooling,
        !options.no_normalize,
        max_length,
        dimension,
        recovered.is_some(),
        format!("onnx file {}", onnx_path.display()),
        notes.clone(),
        runtime,
    )?;
    staged.commit()?;
    Ok(ImportReport {
        manifest: m,
        trainable: recovered.is_some(),
        notes,
    })
}

fn with_path(e: crate::model::ModelError, path: &Path) -> EncoderError {
    EncoderError::Bundle {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

fn check_max_length(max_length: usize, max_positions: usize) -> Result<(), EncoderError> {
    if max_length < 2 || max_length > max_positions {
        return Err(EncoderError::Config(format!(
            "max length {max_length} is outside 2..={max_positions} (the model's position embeddings)"
        )));
    }
    Ok(())
}

fn copy(from: &Path, to: &Path) -> Result<(), EncoderError> {
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| EncoderError::io(from, e))
}

fn write_config(config: &BertConfig, path: &Path) -> Result<(), EncoderError> {
    let text =
        serde_json::to_string_pretty(config).map_err(|e| EncoderError::Config(e.to_string()))?;
    std::fs::write(path, text + "\n").map_err(|e| EncoderError::io(path, e))
}

/// Writes the manifest into the staged bundle, then loads it for a smoke inference (which also
/// fixes the dimension when the graph left it symbolic).
#[allow(clippy::too_many_arguments)]
fn finish(
    staged: &Staged,
    source_path: &Path,
    options: &ImportOptions,
    onnx: OnnxIo,
    pooling: Pooling,
    normalize: bool,
    max_length: usize,
    dimension: usize,
    trainable: bool,
    source: String,
    notes: Vec<String>,
    runtime: &RuntimeOptions,
) -> Result<EncoderManifest, EncoderError> {
    let dir = staged.path();
    let name = match &options.name {
        Some(n) => n.clone(),
        None => default_name(source_path),
    };
    validate_name(&name)?;
    let onnx_sha256 = manifest::sha256_file(&dir.join(manifest::ONNX_FILE))?;
    let tokenizer_sha256 = manifest::sha256_file(&dir.join(manifest::TOKENIZER_FILE))?;
    let weights_sha256 = if trainable {
        Some(manifest::sha256_file(&dir.join(manifest::WEIGHTS_FILE))?)
    } else {
        None
    };
    let (role, paired) = match &options.pair_with {
        Some(doc) => {
            let doc_manifest = EncoderManifest::read(doc)?;
            if doc_manifest.role == Role::Query {
                return Err(EncoderError::Config(format!(
                    "--pair-with {}: that bundle is a query encoder, not a document encoder",
                    doc.display()
                )));
            }
            (
                options.role.unwrap_or(Role::Query),
                Some(doc_manifest.fingerprint),
            )
        }
        None => (options.role.unwrap_or(Role::Symmetric), None),
    };
    let mut m = EncoderManifest {
        format: manifest::MANIFEST_FORMAT,
        name,
        version: options.version.clone().unwrap_or_else(|| "1".into()),
        role,
        pooling,
        normalize,
        max_length,
        dimension,
        prefix: options.prefix.clone(),
        onnx,
        onnx_sha256,
        tokenizer_sha256,
        weights_sha256,
        fingerprint: String::new(),
        aligned_to: String::new(),
        provenance: Provenance {
            source: Some(source),
            notes,
            created_at: crate::clock::now_rfc3339(),
            capot_version: env!("CARGO_PKG_VERSION").into(),
            ..Default::default()
        },
    };
    m.fingerprint = manifest::fingerprint(&m);
    m.aligned_to = paired.unwrap_or_else(|| m.fingerprint.clone());
    if m.dimension == 0 {
        // The graph's output dimension is symbolic: learn it from one inference.
        m.dimension = 1;
        m.write(dir)?;
        m.dimension = Encoder::probe_output_dimension(dir, runtime)?;
    }
    m.write(dir)?;
    Encoder::load(dir, runtime)?;
    Ok(m)
}

/// A bundle's name must be usable in URLs, metrics labels and file names.
pub fn validate_name(name: &str) -> Result<(), EncoderError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(EncoderError::Config(format!(
            "invalid encoder name {name:?}: use 1-64 of A-Z a-z 0-9 - _ . (not starting with .)"
        )))
    }
}

fn default_name(source: &Path) -> String {
    let stem = source
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("encoder");
    let cleaned: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    cleaned.trim_start_matches('.').to_string()
}

/// A bundle directory being written: a temporary sibling renamed into place on success and
/// removed otherwise, so an interrupted import never leaves a half-made bundle.
struct Staged {
    tmp: PathBuf,
    out: PathBuf,
    force: bool,
    committed: bool,
}

impl Staged {
    fn new(out: &Path, force: bool) -> Result<Self, EncoderError> {
        if out.exists() && !force {
            return Err(EncoderError::Config(format!(
                "{} already exists (pass --force to replace it)",
                out.display()
            )));
        }
        let parent = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(|e| EncoderError::io(&parent, e))?;
        let file_name = out.file_name().ok_or_else(|| {
            EncoderError::Config(format!("{} is not a directory name", out.display()))
        })?;
        let tmp = parent.join(format!(
            ".{}.tmp-{}",
            file_name.to_string_lossy(),
            std::process::id()
        ));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(|e| EncoderError::io(&tmp, e))?;
        }
        std::fs::create_dir(&tmp).map_err(|e| EncoderError::io(&tmp, e))?;
        Ok(Staged {
            tmp,
            out: out.to_path_buf(),
            force,
            committed: false,
        })
    }

    fn path(&self) -> &Path {
        &self.tmp
    }

    fn commit(mut self) -> Result<(), EncoderError> {
        if self.out.exists() && self.force {
            std::fs::remove_dir_all(&self.out).map_err(|e| EncoderError::io(&self.out, e))?;
        }
        std::fs::rename(&self.tmp, &self.out).map_err(|e| EncoderError::io(&self.out, e))?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}
