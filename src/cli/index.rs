//! `capot index build|show`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use capot::dataset::{self, document_text, ReadMode};
use capot::encoder::{Encoder, Role};
use capot::index::{BuildStage, Document, HnswParams, IndexBuilder, IndexManifest, ManifestFields};

use super::{DeviceArgs, GlobalArgs};

#[derive(Debug, Subcommand)]
pub enum IndexCommand {
    /// Encode a corpus with a document encoder and build a frozen HNSW index.
    Build(BuildArgs),
    /// Print an index's manifest.
    Show {
        /// Index directory.
        dir: PathBuf,
    },
    /// Add (or rebuild) the corpus vocabulary that query repair reads, from the index's own
    /// documents, without re-encoding any: for indexes built before it existed.
    Vocab {
        /// Index directory.
        dir: PathBuf,
    },
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    /// Document (or symmetric) encoder bundle.
    #[arg(long, value_name = "BUNDLE")]
    pub doc_encoder: PathBuf,
    /// BEIR dataset directory or a corpus.jsonl file.
    #[arg(long, value_name = "PATH")]
    pub corpus: PathBuf,
    /// Index directory to create.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// HNSW connections per node and layer.
    #[arg(long, default_value_t = 16)]
    pub m: usize,
    /// HNSW candidate list size while building.
    #[arg(long, default_value_t = 200)]
    pub ef_construction: usize,
    /// Default candidate list size for searches (the service uses it when a request gives none).
    #[arg(long, default_value_t = 64)]
    pub ef_search: usize,
    /// Documents per inference call.
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Fail at the first bad corpus line instead of skipping it.
    #[arg(long)]
    pub strict: bool,
    /// Replace an existing index at --out.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub device: DeviceArgs,
}

pub fn run(cmd: IndexCommand, global: &GlobalArgs) -> anyhow::Result<()> {
    match cmd {
        IndexCommand::Build(args) => build(args, global),
        IndexCommand::Vocab { dir } => {
            let info = capot::index::Index::add_vocab(&dir)
                .with_context(|| format!("cannot add a vocabulary to {}", dir.display()))?;
            println!("{}", serde_json::to_string_pretty(&info)?);
            Ok(())
        }
        IndexCommand::Show { dir } => {
            let m = IndexManifest::read(&dir)?;
            println!("{}", serde_json::to_string_pretty(&m)?);
            Ok(())
        }
    }
}

fn bar(len: u64, template: &str) -> ProgressBar {
    ProgressBar::new(len).with_style(
        ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    )
}

fn build(args: BuildArgs, global: &GlobalArgs) -> anyhow::Result<()> {
    if args.batch_size == 0 {
        bail!("--batch-size must be at least 1");
    }
    let params = HnswParams {
        m: args.m,
        ef_construction: args.ef_construction,
        ef_search: args.ef_search,
    };
    params.validate()?;
    if args.out.exists() && !args.force {
        bail!(
            "{} already exists (pass --force to replace it)",
            args.out.display()
        );
    }
    let runtime = args.device.runtime(global)?;
    let encoder = Encoder::load(&args.doc_encoder, &runtime)
        .with_context(|| format!("cannot load encoder {}", args.doc_encoder.display()))?;
    let manifest = encoder.manifest().clone();
    if manifest.role == Role::Query {
        bail!(
            "{} is a query encoder; build the index with its document encoder",
            args.doc_encoder.display()
        );
    }
    let mode = if args.strict {
        ReadMode::Strict
    } else {
        ReadMode::Lenient
    };
    let (corpus, report) = dataset::read_corpus(&args.corpus, mode)?;
    for s in &report.skipped {
        eprintln!("skipped {}:{}: {}", report.path.display(), s.line, s.reason);
    }
    if !report.skipped.is_empty() {
        eprintln!(
            "skipped {} bad line(s); --strict fails on the first instead",
            report.skipped.len()
        );
    }
    if corpus.is_empty() {
        bail!("{} has no documents", report.path.display());
    }

    // Encode in order of length so each batch pads little, then restore corpus order.
    let docs = corpus.docs();
    let texts: Vec<String> = docs
        .iter()
        .map(|d| document_text(&d.title, &d.text))
        .collect();
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| texts[i].len());
    let dim = manifest.dimension;
    let mut vectors = vec![0f32; texts.len() * dim];
    let started = Instant::now();
    let pb = bar(
        texts.len() as u64,
        "encoding [{bar:30}] {pos}/{len} docs · {per_sec} · ETA {eta}",
    );
    for chunk in order.chunks(args.batch_size) {
        let batch: Vec<&str> = chunk.iter().map(|&i| texts[i].as_str()).collect();
        let encoded = encoder.encode(&batch).context("encoding documents")?;
        for (&i, v) in chunk.iter().zip(encoded) {
            vectors[i * dim..(i + 1) * dim].copy_from_slice(&v);
        }
        pb.inc(chunk.len() as u64);
    }
    pb.finish_and_clear();
    let encode_seconds = started.elapsed().as_secs_f64();
    drop(encoder);

    let documents: Vec<Document> = docs
        .iter()
        .map(|d| Document {
            id: d.id.clone(),
            title: d.title.clone(),
            text: d.text.clone(),
        })
        .collect();
    let fields = ManifestFields {
        encoder_fingerprint: manifest.fingerprint.clone(),
        encoder_name: manifest.label(),
        dimension: dim,
        capot_version: env!("CARGO_PKG_VERSION").to_string(),
    };
    let pb = bar(
        documents.len() as u64,
        "indexing [{bar:30}] {pos}/{len} · {msg} · {elapsed}",
    );
    let mut progress = |p: &capot::index::BuildProgress| {
        pb.set_length(p.total as u64);
        pb.set_position(p.done as u64);
        pb.set_message(match p.stage {
            BuildStage::Validated => "validated",
            BuildStage::Inserting => "inserting into the graph",
            BuildStage::Writing => "writing files",
            BuildStage::Committing => "committing",
        });
        Ok(())
    };
    let index = IndexBuilder::new(&args.out, fields)
        .params(params)
        .overwrite(args.force)
        .build(documents, vectors, &mut progress)?;
    pb.finish_and_clear();
    let m = index.manifest();
    eprintln!(
        "indexed {} documents ({}-d, {}) into {} — encoding {:.1}s ({:.0} docs/s), graph {:.1}s",
        m.count,
        m.dimension,
        manifest.label(),
        args.out.display(),
        encode_seconds,
        m.count as f64 / encode_seconds,
        m.build_seconds
    );
    Ok(())
}
