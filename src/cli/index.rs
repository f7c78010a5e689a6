//! `capot index build|show`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use capot::dataset::{self, document_text, ReadMode};
use capot::encoder::pool::EncoderPool;
use capot::encoder::Role;
use capot::eval::metrics::cosine;
use capot::index::{
    npy, BuildStage, Document, HnswParams, IndexBuilder, IndexManifest, ManifestFields,
};

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
    /// Convert an index of an older format (1: hnsw_rs dump) to the current one in place, from
    /// its stored vectors: no re-encoding; the directory is replaced atomically.
    Upgrade {
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
    /// Inference sessions encoding at once, each with --threads threads: a number, or `auto`
    /// (one single-threaded session per core) [default: 1].
    #[arg(long, value_name = "N|auto")]
    pub encoder_workers: Option<String>,
    /// Precomputed document vectors: a float32 `.npy` matrix with one row per corpus document, in
    /// corpus order, made by --doc-encoder. Nothing is encoded but the --check-vectors sample.
    #[arg(long, value_name = "FILE.npy")]
    pub vectors: Option<PathBuf>,
    /// Documents re-encoded to check that --vectors came from --doc-encoder in corpus order
    /// (cosine ≥ 0.99 each); 0 skips the check (vectors derived from real ones, benchmarks).
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub check_vectors: usize,
    /// Precision of the vectors the graph walk reads: float32, or a float16 / int8 copy that is
    /// 2× / ~4× smaller (hits are re-scored from the float32 vectors).
    #[arg(long, value_enum, default_value_t = GraphVectorsArg::Float32)]
    pub graph_vectors: GraphVectorsArg,
    /// Fail at the first bad corpus line instead of skipping it.
    #[arg(long)]
    pub strict: bool,
    /// Replace an existing index at --out.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub device: DeviceArgs,
}

/// `--graph-vectors` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GraphVectorsArg {
    Float32,
    Float16,
    Int8,
}

impl From<GraphVectorsArg> for capot::index::GraphVectors {
    fn from(a: GraphVectorsArg) -> Self {
        match a {
            GraphVectorsArg::Float32 => Self::Float32,
            GraphVectorsArg::Float16 => Self::Float16,
            GraphVectorsArg::Int8 => Self::Int8,
        }
    }
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
        IndexCommand::Upgrade { dir } => upgrade(&dir),
        IndexCommand::Show { dir } => {
            let m = IndexManifest::read(&dir)?;
            println!("{}", serde_json::to_string_pretty(&m)?);
            Ok(())
        }
    }
}

fn upgrade(dir: &std::path::Path) -> anyhow::Result<()> {
    let pb = bar(0, "upgrading [{bar:30}] {pos}/{len} · {msg} · {elapsed}");
    let mut progress = |p: &capot::index::BuildProgress| {
        show_build_progress(&pb, p);
        Ok(())
    };
    let outcome = capot::index::upgrade(dir, &mut progress)
        .with_context(|| format!("cannot upgrade {}", dir.display()))?;
    pb.finish_and_clear();
    match outcome {
        capot::index::Upgrade::Current => eprintln!(
            "{} is already at index format {}; nothing to do",
            dir.display(),
            capot::index::FORMAT_VERSION
        ),
        capot::index::Upgrade::Upgraded { from, index } => eprintln!(
            "upgraded {} from format {from} to {} ({} documents, graph {:.1}s)",
            dir.display(),
            capot::index::FORMAT_VERSION,
            index.len(),
            index.manifest().build_seconds
        ),
    }
    Ok(())
}

/// Shows an index build's stage and position on a progress bar.
fn show_build_progress(pb: &indicatif::ProgressBar, p: &capot::index::BuildProgress) {
    pb.set_length(p.total as u64);
    pb.set_position(p.done as u64);
    pb.set_message(match p.stage {
        BuildStage::Validated => "validated",
        BuildStage::Inserting => "inserting into the graph",
        BuildStage::Writing => "writing files",
        BuildStage::Committing => "committing",
    });
}

/// Encodes every document with the pool, in order of length so each batch pads little; the
/// vectors come back in corpus order, row-major.
fn encode_corpus(
    pool: &EncoderPool,
    docs: &[dataset::Document],
    batch_size: usize,
) -> anyhow::Result<Vec<f32>> {
    let texts: Vec<String> = docs
        .iter()
        .map(|d| document_text(&d.title, &d.text))
        .collect();
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| texts[i].len());
    let dim = pool.encoder().dimension();
    let mut vectors = vec![0f32; texts.len() * dim];
    let pb = bar(
        texts.len() as u64,
        "encoding [{bar:30}] {pos}/{len} docs · {per_sec} · ETA {eta}",
    );
    let chunks: Vec<&[usize]> = order.chunks(batch_size).collect();
    let batches: Vec<Vec<&str>> = chunks
        .iter()
        .map(|chunk| chunk.iter().map(|&i| texts[i].as_str()).collect())
        .collect();
    let encoded = pool
        .encode_batches(&batches, &|n| pb.inc(n as u64))
        .context("encoding documents")?;
    for (chunk, batch) in chunks.iter().zip(encoded) {
        for (&i, v) in chunk.iter().zip(batch) {
            vectors[i * dim..(i + 1) * dim].copy_from_slice(&v);
        }
    }
    pb.finish_and_clear();
    Ok(vectors)
}

/// Re-encodes `sample` documents spread over the corpus and requires each given row to point the
/// same way (cosine ≥ 0.99): catches vectors of another encoder, another corpus or another order.
fn check_vectors(
    pool: &EncoderPool,
    docs: &[dataset::Document],
    vectors: &[f32],
    dim: usize,
    sample: usize,
    path: &std::path::Path,
) -> anyhow::Result<()> {
    let n = docs.len();
    let picks: Vec<usize> = (0..sample.min(n)).map(|k| k * n / sample.min(n)).collect();
    let texts: Vec<String> = picks
        .iter()
        .map(|&i| document_text(&docs[i].title, &docs[i].text))
        .collect();
    let batches: Vec<Vec<&str>> = texts.iter().map(|t| vec![t.as_str()]).collect();
    let encoded = pool.encode_batches(&batches, &|_| ())?;
    for (&i, e) in picks.iter().zip(encoded) {
        let cos = cosine(&vectors[i * dim..(i + 1) * dim], &e[0])?;
        if cos.is_nan() || cos < 0.99 {
            bail!(
                "{}: row {i} has cosine {cos:.3} to {}'s vector of document {:?}: the vectors are not this encoder's, or not in corpus order (--check-vectors 0 skips this check)",
                path.display(),
                pool.encoder().manifest().label(),
                docs[i].id
            );
        }
    }
    Ok(())
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
    let mut device = args.device.clone();
    let workers = super::encoder_workers(args.encoder_workers.as_deref(), &mut device)?;
    let runtime = device.runtime(global)?;
    let pool = EncoderPool::load(&args.doc_encoder, &runtime, workers)
        .with_context(|| format!("cannot load encoder {}", args.doc_encoder.display()))?;
    let manifest = pool.encoder().manifest().clone();
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

    let docs = corpus.docs();
    let dim = manifest.dimension;
    let started = Instant::now();
    let vectors = match &args.vectors {
        Some(path) => {
            if !report.skipped.is_empty() {
                bail!(
                    "the corpus has bad lines, so the rows of {} cannot be matched to its documents; fix them (or use --strict to find them)",
                    path.display()
                );
            }
            let m = npy::read_f32_matrix(path)?;
            if m.rows != docs.len() || m.cols != dim {
                bail!(
                    "{} holds {} × {} vectors; the corpus has {} documents and {} makes {dim}-dimensional vectors",
                    path.display(),
                    m.rows,
                    m.cols,
                    docs.len(),
                    manifest.label()
                );
            }
            check_vectors(&pool, docs, &m.data, dim, args.check_vectors, path)?;
            m.data
        }
        None => encode_corpus(&pool, docs, args.batch_size)?,
    };
    let encode_seconds = started.elapsed().as_secs_f64();
    drop(pool);

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
        show_build_progress(&pb, p);
        Ok(())
    };
    let index = IndexBuilder::new(&args.out, fields)
        .params(params)
        .overwrite(args.force)
        .graph_vectors(args.graph_vectors.into())
        .build(documents, vectors, &mut progress)?;
    pb.finish_and_clear();
    let m = index.manifest();
    let source = if args.vectors.is_some() {
        format!("vectors read and checked {encode_seconds:.1}s")
    } else {
        format!(
            "encoding {encode_seconds:.1}s ({:.0} docs/s)",
            m.count as f64 / encode_seconds
        )
    };
    eprintln!(
        "indexed {} documents ({}-d, {}) into {} — {source}, graph {:.1}s",
        m.count,
        m.dimension,
        manifest.label(),
        args.out.display(),
        m.build_seconds
    );
    Ok(())
}
