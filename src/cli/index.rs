//! `capot index build|show`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use capot::dataset::{self, CorpusStream, LineError, ReadMode};
use capot::encoder::pool::EncoderPool;
use capot::encoder::Role;
use capot::eval::metrics::cosine;
use capot::index::payload::{FieldSchema, FieldType};
use capot::index::{
    npy, BuildStage, HnswParams, IndexBuilder, IndexError, IndexManifest, IndexWriter,
    ManifestFields, Resume, SourcePosition, DEFAULT_LEVEL_SEED,
};

use super::{DeviceArgs, GlobalArgs};

#[derive(Debug, Subcommand)]
pub enum IndexCommand {
    /// Encode a corpus with a document encoder and build a frozen HNSW index.
    Build(Box<BuildArgs>),
    /// Print an index's manifest.
    Show {
        /// Index directory.
        dir: PathBuf,
    },
    /// Add (or rebuild) the corpus vocabulary that query repair reads, from the index's own
    /// documents, without re-encoding any: for indexes built before it existed.
    Vocab {
        /// Index directory.
        #[arg(required_unless_present = "store", conflicts_with = "store")]
        dir: Option<PathBuf>,
        /// Build the vocabulary of a PostgreSQL store's table instead (its titles and texts,
        /// read through a server-side cursor) into --data-dir, where `capot serve --store`
        /// loads it.
        #[arg(long, env = "CAPOT_STORE", value_name = "URL", hide_env_values = true)]
        store: Option<String>,
        /// File holding the store's password (first line).
        #[arg(long, value_name = "FILE")]
        store_password_file: Option<PathBuf>,
        /// The columns of a table another pipeline filled, as `capot serve --store-columns`
        /// takes them (`id=COL,embedding=COL,text=COL[,title=COL][,metadata=COL]`).
        #[arg(
            long,
            env = "CAPOT_STORE_COLUMNS",
            value_name = "SPEC",
            requires = "store"
        )]
        store_columns: Option<String>,
        /// The service's data directory (with --store) [default: .data].
        #[arg(long, env = "CAPOT_DATA_DIR", value_name = "DIR")]
        data_dir: Option<PathBuf>,
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
    #[arg(
        long,
        value_name = "DIR",
        required_unless_present = "store",
        conflicts_with = "store"
    )]
    pub out: Option<PathBuf>,
    /// Load the corpus into PostgreSQL + pgvector instead of an index directory:
    /// `postgres://USER@HOST:PORT/DB?table=NAME`. Creates the table, loads by binary COPY (a
    /// load run again skips the ids stored already) and builds the HNSW index. The password
    /// comes from the URL, `PGPASSWORD` or --store-password-file.
    #[arg(long, env = "CAPOT_STORE", value_name = "URL", hide_env_values = true)]
    pub store: Option<String>,
    /// File holding the store's password (first line).
    #[arg(long, value_name = "FILE")]
    pub store_password_file: Option<PathBuf>,
    /// HNSW connections per node and layer.
    #[arg(long, default_value_t = 16)]
    pub m: usize,
    /// HNSW candidate list size while building.
    #[arg(long, default_value_t = 200)]
    pub ef_construction: usize,
    /// Default candidate list size for searches (the service uses it when a request gives none).
    #[arg(long, default_value_t = 64)]
    pub ef_search: usize,
    /// Seed of the graph's level draw, recorded in the manifest (default: one fixed seed, so
    /// that rebuilding the same vectors gives the same levels). Another seed builds another
    /// graph of the same quality on average; benchmarks use it to measure the spread.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
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
    /// Documents read, encoded and made durable at a time: memory holds one chunk of text, and
    /// an interrupted build resumes after the last chunk written.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    pub chunk_size: usize,
    /// Discard an interrupted build of --out (`<out>.partial`) instead of resuming it.
    #[arg(long)]
    pub restart: bool,
    /// Seconds between two saves of the graph built so far, which an interrupted build
    /// continues from (0: never save; the graph is then rebuilt from its first node).
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    pub graph_checkpoint_secs: u64,
    /// Index a metadata key for filters: `KEY:TYPE` with TYPE keyword, integer, float, bool or
    /// datetime; `KEY:keyword:tenant` marks the tenant key. Repeatable. The documents' metadata
    /// (their `metadata` object and other top-level fields) is stored either way.
    #[arg(long = "payload-index", value_name = "KEY:TYPE", value_parser = parse_payload_index)]
    pub payload_index: Vec<(String, FieldSchema)>,
    #[command(flatten)]
    pub device: DeviceArgs,
}

/// `KEY:TYPE[:tenant]` of `--payload-index`.
pub fn parse_payload_index(s: &str) -> Result<(String, FieldSchema), String> {
    let (key, rest) = s
        .rsplit_once(':')
        .ok_or_else(|| format!("expected KEY:TYPE, got {s:?}"))?;
    let (key, kind, tenant) = match rest {
        "tenant" => {
            let (key, kind) = key
                .rsplit_once(':')
                .ok_or_else(|| format!("expected KEY:TYPE:tenant, got {s:?}"))?;
            (key, kind, true)
        }
        kind => (key, kind, false),
    };
    capot::index::payload::check_key(key)?;
    let kind: FieldType = kind.parse()?;
    if tenant && kind != FieldType::Keyword {
        return Err("a tenant key must be a keyword field".into());
    }
    Ok((key.to_string(), FieldSchema { kind, tenant }))
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
        IndexCommand::Build(args) if args.store.is_some() => {
            super::index_store::build(*args, global)
        }
        IndexCommand::Build(args) => build(*args, global),
        IndexCommand::Vocab {
            store: Some(url),
            store_password_file,
            store_columns,
            data_dir,
            ..
        } => super::index_store::vocab(
            &url,
            store_password_file.as_deref(),
            store_columns.as_deref(),
            &data_dir.unwrap_or_else(|| PathBuf::from(".data")),
        ),
        IndexCommand::Vocab { dir: None, .. } => bail!("give an index directory or --store"),
        IndexCommand::Vocab { dir: Some(dir), .. } => {
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

/// Encodes one chunk of documents with the pool, in order of length so each batch pads
/// little; the vectors come back in the chunk's order.
pub(super) fn encode_chunk(
    pool: &EncoderPool,
    docs: &[(usize, dataset::Document)],
    batch_size: usize,
    on_batch: &(dyn Fn(usize) + Sync),
) -> anyhow::Result<Vec<Vec<f32>>> {
    let texts: Vec<String> = docs.iter().map(|(_, d)| d.encoded_text()).collect();
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| texts[i].len());
    let chunks: Vec<&[usize]> = order.chunks(batch_size).collect();
    let batches: Vec<Vec<&str>> = chunks
        .iter()
        .map(|chunk| chunk.iter().map(|&i| texts[i].as_str()).collect())
        .collect();
    let encoded = pool
        .encode_batches(&batches, on_batch)
        .context("encoding documents")?;
    let mut vectors = vec![Vec::new(); texts.len()];
    for (chunk, batch) in chunks.iter().zip(encoded) {
        for (&i, v) in chunk.iter().zip(batch) {
            vectors[i] = v;
        }
    }
    Ok(vectors)
}

/// Re-encodes the sampled documents of a chunk and requires each given row to point the same
/// way (cosine ≥ 0.99): catches vectors of another encoder, another corpus or another order.
pub(super) fn check_rows(
    pool: &EncoderPool,
    sampled: &[(usize, &dataset::Document, &[f32])],
    path: &std::path::Path,
) -> anyhow::Result<()> {
    if sampled.is_empty() {
        return Ok(());
    }
    let texts: Vec<String> = sampled.iter().map(|(_, d, _)| d.encoded_text()).collect();
    let batches: Vec<Vec<&str>> = texts.iter().map(|t| vec![t.as_str()]).collect();
    let encoded = pool.encode_batches(&batches, &|_| ())?;
    for (&(i, doc, row), e) in sampled.iter().zip(encoded) {
        let cos = cosine(row, &e[0])?;
        if cos.is_nan() || cos < 0.99 {
            bail!(
                "{}: row {i} has cosine {cos:.3} to {}'s vector of document {:?}: the vectors are not this encoder's, or not in corpus order (--check-vectors 0 skips this check)",
                path.display(),
                pool.encoder().manifest().label(),
                doc.id
            );
        }
    }
    Ok(())
}

/// What a resumed build must have been reading: the corpus file (and the vectors file) by
/// path, size and modification time, and the encoder.
fn describe_source(
    corpus: &std::path::Path,
    vectors: Option<&std::path::Path>,
    encoder: &str,
) -> anyhow::Result<String> {
    let file = |p: &std::path::Path| -> anyhow::Result<String> {
        let meta = std::fs::metadata(p).with_context(|| format!("cannot read {}", p.display()))?;
        let modified = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        let path = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        Ok(format!(
            "{} ({} bytes, modified {modified})",
            path.display(),
            meta.len()
        ))
    };
    Ok(match vectors {
        Some(v) => format!("corpus {}, vectors {}", file(corpus)?, file(v)?),
        None => format!("corpus {}, encoded by {encoder}", file(corpus)?),
    })
}

/// What [`write_documents`] reads vectors from, and how.
struct Input<'a> {
    pool: &'a EncoderPool,
    /// `--vectors`: its path and rows.
    npy: Option<(&'a std::path::Path, &'a npy::NpyRows)>,
    chunk_size: usize,
    batch_size: usize,
    check_vectors: usize,
    /// The encoder's label, for messages.
    label: String,
}

/// Streams the corpus into the writer a chunk at a time: reads a chunk, encodes it (or takes
/// its rows of `--vectors`, re-encoding the sampled ones to check them), pushes it and makes it
/// durable with a checkpoint. Bad lines are skipped and reported (or fail, with --strict).
fn write_documents(
    writer: &mut IndexWriter,
    corpus: &mut CorpusStream,
    input: &Input<'_>,
    resumed: usize,
) -> anyhow::Result<()> {
    let pool = input.pool;
    let dim = pool.encoder().dimension();
    // Sampled rows of --vectors that are re-encoded and compared.
    let picks: std::collections::BTreeSet<usize> = match input.npy {
        Some((_, rows)) => {
            let (n, k) = (rows.rows(), input.check_vectors.min(rows.rows()));
            (0..k).map(|j| j * n / k).collect()
        }
        None => Default::default(),
    };
    let started = Instant::now();
    let pb = bar(
        corpus.len_bytes(),
        "reading [{bar:30}] {bytes}/{total_bytes} · {msg} · ETA {eta}",
    );
    pb.set_position(corpus.position().0);
    let mut skipped = 0usize;
    let mut row = vec![0f32; dim];
    loop {
        let mut chunk = Vec::with_capacity(input.chunk_size);
        while chunk.len() < input.chunk_size {
            match corpus.next_document()? {
                Some(doc) => chunk.push(doc),
                None => break,
            }
        }
        skipped += report_skipped(corpus, &pb);
        if chunk.is_empty() {
            break;
        }
        if let (Some((path, _)), true) = (input.npy, skipped > 0) {
            bail!(
                "the corpus has bad lines, so the rows of {} cannot be matched to its documents; fix them (or use --strict to find them)",
                path.display()
            );
        }
        let vectors: Vec<Vec<f32>> = match input.npy {
            Some((path, rows)) => {
                let first = writer.len();
                let mut vectors = Vec::with_capacity(chunk.len());
                for k in 0..chunk.len() {
                    if !rows.row(first + k, &mut row) {
                        let mut total = first + chunk.len();
                        while corpus.next_document()?.is_some() {
                            total += 1;
                        }
                        bail!(
                            "{} holds {} × {} vectors; the corpus has {total} documents and {} makes {dim}-dimensional vectors",
                            path.display(),
                            rows.rows(),
                            rows.cols(),
                            input.label
                        );
                    }
                    vectors.push(row.clone());
                }
                let sampled: Vec<(usize, &dataset::Document, &[f32])> = (0..chunk.len())
                    .filter(|k| picks.contains(&(first + k)))
                    .map(|k| (first + k, &chunk[k].1, vectors[k].as_slice()))
                    .collect();
                check_rows(pool, &sampled, path)?;
                vectors
            }
            None => {
                // The bar moves by corpus bytes a chunk at a time; the count of documents
                // encoded moves with every batch.
                let before = writer.len() - resumed;
                let encoded = std::sync::atomic::AtomicUsize::new(0);
                let show = |n: usize| {
                    let done =
                        before + n + encoded.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                    pb.set_message(format!(
                        "{} docs · {:.0} docs/s",
                        resumed + done,
                        done as f64 / started.elapsed().as_secs_f64().max(1e-9)
                    ));
                };
                encode_chunk(pool, &chunk, input.batch_size, &show)?
            }
        };
        for ((line, doc), v) in chunk.iter().zip(&vectors) {
            match writer.push(&doc.id, &doc.title, &doc.text, v) {
                Ok(()) => {}
                Err(IndexError::DuplicateId { id, first }) => {
                    if let Some((path, _)) = input.npy {
                        bail!(
                            "{}:{line}: duplicate id {id:?} (already indexed as document {first}), so the rows of {} cannot be matched to the documents",
                            corpus.path().display(),
                            path.display()
                        );
                    }
                    corpus.bad_line(
                        *line,
                        LineError::DuplicateDocument {
                            id,
                            first_document: first,
                        },
                    )?;
                }
                Err(e) => {
                    return Err(anyhow::Error::new(e)
                        .context(format!("{}:{line}", corpus.path().display())))
                }
            }
        }
        let (byte, line) = corpus.position();
        writer.checkpoint(SourcePosition {
            byte,
            line: line as u64,
        })?;
        pb.set_position(byte);
        let done = writer.len() - resumed;
        pb.set_message(format!(
            "{} docs · {:.0} docs/s",
            writer.len(),
            done as f64 / started.elapsed().as_secs_f64().max(1e-9)
        ));
    }
    skipped += report_skipped(corpus, &pb);
    pb.finish_and_clear();
    if skipped > 0 {
        eprintln!("skipped {skipped} bad line(s); --strict fails on the first instead");
    }
    if writer.is_empty() {
        bail!("{} has no documents", corpus.path().display());
    }
    if let Some((path, rows)) = input.npy {
        if rows.rows() != writer.len() {
            bail!(
                "{} holds {} × {} vectors; the corpus has {} documents and {} makes {dim}-dimensional vectors",
                path.display(),
                rows.rows(),
                rows.cols(),
                writer.len(),
                input.label
            );
        }
    }
    Ok(())
}

/// Prints the lines the corpus reader skipped since the last call (above the progress bar);
/// returns how many.
pub(super) fn report_skipped(corpus: &mut CorpusStream, pb: &ProgressBar) -> usize {
    let skipped = corpus.take_skipped();
    for s in &skipped {
        pb.suspend(|| {
            eprintln!(
                "skipped {}:{}: {}",
                corpus.path().display(),
                s.line,
                s.reason
            )
        });
    }
    skipped.len()
}

pub(super) fn bar(len: u64, template: &str) -> ProgressBar {
    ProgressBar::new(len).with_style(
        ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    )
}

/// `--doc-encoder` loaded with `--encoder-workers` sessions on `--device`, and its manifest;
/// refused when it is a query encoder (documents are encoded by the document encoder).
pub(super) fn document_encoder(
    args: &BuildArgs,
    global: &GlobalArgs,
) -> anyhow::Result<(EncoderPool, capot::encoder::EncoderManifest)> {
    let mut device = args.device.clone();
    let workers = super::encoder_workers(args.encoder_workers.as_deref(), &mut device)?;
    let runtime = device.runtime(global)?;
    let pool = EncoderPool::load(&args.doc_encoder, &runtime, workers)
        .with_context(|| format!("cannot load encoder {}", args.doc_encoder.display()))?;
    let manifest = pool.encoder().manifest().clone();
    if manifest.role == Role::Query {
        bail!(
            "{} is a query encoder; index the corpus with its document encoder",
            args.doc_encoder.display()
        );
    }
    Ok((pool, manifest))
}

fn build(args: BuildArgs, global: &GlobalArgs) -> anyhow::Result<()> {
    let out = args.out.clone().context("--out is required")?;
    if args.batch_size == 0 {
        bail!("--batch-size must be at least 1");
    }
    if args.chunk_size == 0 {
        bail!("--chunk-size must be at least 1");
    }
    let params = HnswParams {
        m: args.m,
        ef_construction: args.ef_construction,
        ef_search: args.ef_search,
        seed: args.seed.unwrap_or(DEFAULT_LEVEL_SEED),
    };
    params.validate()?;
    if out.exists() && !args.force {
        bail!(
            "{} already exists (pass --force to replace it)",
            out.display()
        );
    }
    let (pool, manifest) = document_encoder(&args, global)?;
    let dim = manifest.dimension;
    let mode = if args.strict {
        ReadMode::Strict
    } else {
        ReadMode::Lenient
    };
    let mut corpus = CorpusStream::open(&args.corpus, mode)?;
    let npy = match &args.vectors {
        Some(path) => {
            let rows = npy::NpyRows::open(path)?;
            if rows.cols() != dim {
                bail!(
                    "{} holds {}-dimensional vectors; {} makes {dim}-dimensional vectors",
                    path.display(),
                    rows.cols(),
                    manifest.label()
                );
            }
            Some((path.as_path(), rows))
        }
        None => None,
    };
    let source = describe_source(
        corpus.path(),
        args.vectors.as_deref(),
        &manifest.fingerprint,
    )?;
    let fields = ManifestFields {
        encoder_fingerprint: manifest.fingerprint.clone(),
        encoder_name: manifest.label(),
        dimension: dim,
        capot_version: env!("CARGO_PKG_VERSION").to_string(),
    };
    let builder = IndexBuilder::new(&out, fields)
        .params(params)
        .overwrite(args.force)
        .graph_vectors(args.graph_vectors.into())
        .graph_checkpoint_every(
            (args.graph_checkpoint_secs > 0)
                .then(|| Duration::from_secs(args.graph_checkpoint_secs)),
        );
    if args.restart && builder.discard_partial()? {
        eprintln!("discarded the interrupted build of {}", out.display());
    }
    let (mut writer, resume) = builder.resumable_writer(&source)?;
    let resumed = match resume {
        Resume::Continue {
            documents,
            position,
        } => {
            eprintln!(
                "resuming the interrupted build in {}: {documents} documents kept, continuing at line {} of {}",
                writer.work_dir().display(),
                position.line + 1,
                corpus.path().display()
            );
            corpus.seek(position.byte, position.line as usize)?;
            documents
        }
        Resume::Discarded { reason } => {
            eprintln!(
                "starting over: the interrupted build in {} cannot be continued ({reason})",
                writer.work_dir().display()
            );
            0
        }
        Resume::Fresh => 0,
    };

    let started = Instant::now();
    let input = Input {
        pool: &pool,
        npy: npy.as_ref().map(|(p, r)| (*p, r)),
        chunk_size: args.chunk_size,
        batch_size: args.batch_size,
        check_vectors: args.check_vectors,
        label: manifest.label(),
    };
    if let Err(e) = write_documents(&mut writer, &mut corpus, &input, resumed) {
        let kept = writer.checkpointed();
        let work = writer.work_dir().to_path_buf();
        if kept > 0 {
            return Err(e.context(format!(
                "the {kept} documents written before it are kept in {}; running the same command again resumes after them",
                work.display()
            )));
        }
        writer.discard()?;
        return Err(e);
    }
    let read_seconds = started.elapsed().as_secs_f64();
    let new_docs = writer.len() - resumed;
    drop(pool);

    let pb = bar(
        writer.len() as u64,
        "indexing [{bar:30}] {pos}/{len} · {msg} · {elapsed}",
    );
    let mut progress = |p: &capot::index::BuildProgress| {
        show_build_progress(&pb, p);
        Ok(())
    };
    let work = writer.work_dir().to_path_buf();
    if let Some(inserted) = writer.saved_graph_progress() {
        pb.suspend(|| {
            eprintln!(
                "resuming the graph: {inserted} of {} nodes were inserted before the interruption",
                writer.len()
            )
        });
    }
    let index = writer.finish(&mut progress).map_err(|e| {
        anyhow::Error::new(e).context(format!(
            "the documents and vectors written so far are kept in {}; run the same command again to resume",
            work.display()
        ))
    })?;
    pb.finish_and_clear();
    let with_metadata = store_payload(&index, &args.corpus, &args.payload_index)?;
    let m = index.manifest();
    let source = if args.vectors.is_some() {
        format!("vectors read and checked {read_seconds:.1}s")
    } else {
        format!(
            "encoding {read_seconds:.1}s ({:.0} docs/s)",
            new_docs as f64 / read_seconds.max(1e-9)
        )
    };
    eprintln!(
        "indexed {} documents ({}-d, {}) into {} — {source}, graph {:.1}s{}",
        m.count,
        m.dimension,
        manifest.label(),
        out.display(),
        m.build_seconds,
        if with_metadata > 0 || !args.payload_index.is_empty() {
            format!(
                "; {with_metadata} with metadata, payload indexes: {}",
                if args.payload_index.is_empty() {
                    "none".to_string()
                } else {
                    args.payload_index
                        .iter()
                        .map(|(k, s)| format!("{k}:{}", s.kind.as_str()))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )
        } else {
            String::new()
        }
    );
    Ok(())
}

/// Stores the corpus's metadata in the built index and declares its payload indexes (nothing
/// to do when there is neither). Returns how many documents had metadata.
fn store_payload(
    index: &capot::index::Index,
    corpus: &std::path::Path,
    fields: &[(String, FieldSchema)],
) -> anyhow::Result<usize> {
    let mut docs: Vec<(usize, serde_json::Value)> = Vec::new();
    let mut lookup_error = None;
    let with =
        capot::dataset::for_each_metadata(corpus, |id, metadata| match index.index_of(&id) {
            Ok(Some(i)) => docs.push((i, metadata)),
            Ok(None) => {}
            Err(e) => lookup_error = Some(e),
        })?;
    if let Some(e) = lookup_error {
        return Err(e.into());
    }
    if with == 0 && fields.is_empty() {
        return Ok(0);
    }
    let mut declared = std::collections::BTreeMap::new();
    for (k, s) in fields {
        if declared.insert(k.clone(), *s).is_some() {
            bail!("--payload-index names {k} twice");
        }
    }
    capot::index::Index::set_payload(index.dir(), docs.into_iter(), declared)
        .context("cannot store the documents' metadata")?;
    Ok(with)
}
