//! `capot encoder import|quantize|show`.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};

use capot::encoder::import::{self, ImportOptions};
use capot::encoder::quantize::{quantize_bundle, QuantizeOptions};
use capot::encoder::{EncoderManifest, Pooling, Role};

use super::{DeviceArgs, GlobalArgs};

#[derive(Debug, Subcommand)]
pub enum EncoderCommand {
    /// Make a bundle from a Hugging Face encoder directory, or from an ONNX export (`--onnx`).
    Import(Box<ImportArgs>),
    /// Write an int8 copy of a bundle (dynamic quantisation of its linear layers) that serves
    /// the same index.
    Quantize(QuantizeArgs),
    /// Print a bundle's manifest.
    Show {
        /// Encoder bundle directory.
        bundle: PathBuf,
    },
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Hugging Face directory with config.json, model.safetensors and tokenizer.json.
    #[arg(
        value_name = "HF_DIR",
        required_unless_present = "onnx",
        conflicts_with = "onnx"
    )]
    pub hf_dir: Option<PathBuf>,
    /// An existing ONNX export to import as it is (needs --tokenizer).
    #[arg(long, value_name = "FILE", requires = "tokenizer")]
    pub onnx: Option<PathBuf>,
    /// tokenizer.json for --onnx imports.
    #[arg(long, value_name = "FILE")]
    pub tokenizer: Option<PathBuf>,
    /// Bundle directory to write.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Encoder name (default: the source's file name).
    #[arg(long)]
    pub name: Option<String>,
    /// Encoder version recorded in the manifest [default: 1].
    #[arg(long, value_name = "VERSION")]
    pub encoder_version: Option<String>,
    /// Pooling (default: the sentence-transformers config, else mean; ONNX graphs that output one
    /// vector per text are used as they are).
    #[arg(long, value_enum)]
    pub pooling: Option<Pooling>,
    /// Maximum tokens per text (default: sentence-transformers' max_seq_length, else 512).
    #[arg(long, value_name = "L")]
    pub max_length: Option<usize>,
    /// Do not L2-normalise vectors.
    #[arg(long)]
    pub no_normalize: bool,
    /// Text prepended to every input, e.g. "query: ".
    #[arg(long)]
    pub prefix: Option<String>,
    /// Role of the bundle (default: symmetric, or query with --pair-with).
    #[arg(long, value_parser = parse_role)]
    pub role: Option<Role>,
    /// Document-encoder bundle this query encoder belongs with (asymmetric towers, e.g. DPR).
    #[arg(long, value_name = "DOC_BUNDLE")]
    pub pair_with: Option<PathBuf>,
    /// Attention heads, when an ONNX graph does not reveal them (for weight recovery).
    #[arg(long, value_name = "N")]
    pub num_heads: Option<usize>,
    /// Replace an existing bundle at --out.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub device: DeviceArgs,
}

#[derive(Debug, Args)]
pub struct QuantizeArgs {
    /// Float32 encoder bundle with weights (imported from Hugging Face, or aligned).
    #[arg(value_name = "BUNDLE")]
    pub bundle: PathBuf,
    /// Bundle directory to write.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Encoder name (default: `<source name>-int8`).
    #[arg(long)]
    pub name: Option<String>,
    /// Encoder version recorded in the manifest (default: the source's).
    #[arg(long, value_name = "VERSION")]
    pub encoder_version: Option<String>,
    /// 7-bit weights, for x86 CPUs without VNNI (AVX2-only), where full-range int8 can overflow.
    #[arg(long)]
    pub reduce_range: bool,
    /// Replace an existing bundle at --out.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub device: DeviceArgs,
}

fn parse_role(s: &str) -> Result<Role, String> {
    match s {
        "query" => Ok(Role::Query),
        "document" => Ok(Role::Document),
        "symmetric" => Ok(Role::Symmetric),
        _ => Err(format!(
            "invalid role {s:?}: expected query, document or symmetric"
        )),
    }
}

pub fn run(cmd: EncoderCommand, global: &GlobalArgs) -> anyhow::Result<()> {
    match cmd {
        EncoderCommand::Import(args) => import_cmd(*args, global),
        EncoderCommand::Quantize(args) => quantize_cmd(args, global),
        EncoderCommand::Show { bundle } => {
            let m = EncoderManifest::read(&bundle)?;
            println!("{}", serde_json::to_string_pretty(&m)?);
            Ok(())
        }
    }
}

fn import_cmd(args: ImportArgs, global: &GlobalArgs) -> anyhow::Result<()> {
    let runtime = args.device.runtime(global)?;
    let options = ImportOptions {
        name: args.name,
        version: args.encoder_version,
        pooling: args.pooling,
        max_length: args.max_length,
        no_normalize: args.no_normalize,
        prefix: args.prefix,
        role: args.role,
        pair_with: args.pair_with,
        num_heads: args.num_heads,
        force: args.force,
    };
    let report = match (&args.hf_dir, &args.onnx, &args.tokenizer) {
        (Some(dir), None, _) => import::import_hf(dir, &args.out, &options, &runtime)
            .with_context(|| format!("cannot import {}", dir.display()))?,
        (None, Some(onnx), Some(tok)) => {
            import::import_onnx(onnx, tok, &args.out, &options, &runtime)
                .with_context(|| format!("cannot import {}", onnx.display()))?
        }
        _ => bail!("give either a Hugging Face directory or --onnx FILE --tokenizer FILE"),
    };
    let m = &report.manifest;
    eprintln!(
        "imported {} → {} (dimension {}, pooling {}, max length {}, {})",
        m.label(),
        args.out.display(),
        m.dimension,
        m.pooling,
        m.max_length,
        if report.trainable {
            "trainable"
        } else {
            "serve-only"
        }
    );
    for note in &report.notes {
        eprintln!("note: {note}");
    }
    println!("{}", m.fingerprint);
    Ok(())
}

fn quantize_cmd(args: QuantizeArgs, global: &GlobalArgs) -> anyhow::Result<()> {
    let runtime = args.device.runtime(global)?;
    let options = QuantizeOptions {
        name: args.name,
        version: args.encoder_version,
        reduce_range: args.reduce_range,
        force: args.force,
    };
    let m = quantize_bundle(&args.bundle, &args.out, &options, &runtime)
        .with_context(|| format!("cannot quantize {}", args.bundle.display()))?;
    if let Some(q) = &m.provenance.quantization {
        eprintln!(
            "quantized {} → {} ({}; cosine to float32 on probe texts: mean {:.4}, min {:.4})",
            m.provenance.base_encoder.as_deref().unwrap_or("?"),
            args.out.display(),
            q.precision,
            q.probe_cosine_mean,
            q.probe_cosine_min
        );
    }
    println!("{}", m.fingerprint);
    Ok(())
}
