//! `capot bench`: performance measurements that print JSON for the scripts in `bench/`.
//!
//! - `encode`: encoding throughput and latency of a bundle, for comparison with other runtimes on
//!   the same ONNX file (bench/encode.sh).
//! - `search`: the in-process floor of a search (tokenize, encode, HNSW search, document lookup,
//!   no server), for comparison with `/search` under load (bench/serve.sh).
//! - `ann`: capot's HNSW graph alone on given query vectors: recall@k against exact
//!   search and single-threaded queries/s per `ef`, for comparison with hnswlib and faiss on the
//!   same vectors (bench/ann.py).
//! - `repair`: query repair alone: the vocabulary's build time, size and memory for a corpus, and
//!   the time `repair()` takes per query (bench/repair.sh).
//! - `filter`: filtered search on generated metadata, per selectivity and correlation with the
//!   queries: recall@k against the exact filtered answer, hits returned, queries/s and p99,
//!   beside the unfiltered search and a post-filtering baseline (bench/filter.sh).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, Subcommand};

use capot::dataset::{self, ReadMode};
use capot::encoder::pool::EncoderPool;
use capot::encoder::Encoder;
use capot::index::Index;

use super::{DeviceArgs, GlobalArgs};

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Texts per second and per-call latency of `Encoder::encode` at given batch sizes.
    Encode(EncodeBenchArgs),
    /// The in-process floor of `/search`: encode + HNSW search per call, no server.
    Search(SearchBenchArgs),
    /// capot's HNSW recall@k against exact search and single-threaded queries/s per `ef`.
    Ann(AnnBenchArgs),
    /// Query repair: vocabulary build time, size and memory for a corpus; time per query.
    Repair(RepairBenchArgs),
    /// Filtered search on generated metadata: recall, hits, queries/s and p99 per selectivity
    /// and correlation, beside unfiltered search and post-filtering.
    Filter(super::bench_filter::FilterBenchArgs),
}

#[derive(Debug, Args)]
pub struct RepairBenchArgs {
    /// BEIR dataset directory or corpus.jsonl whose vocabulary is built.
    #[arg(long, value_name = "PATH")]
    pub corpus: PathBuf,
    /// Query files (TSV or queries.jsonl) to repair, each timed on its own; repeat.
    #[arg(long = "queries", value_name = "FILE")]
    pub queries: Vec<PathBuf>,
    /// Passes over each query file (the first warms the caches and is not timed).
    #[arg(long, default_value_t = 3)]
    pub passes: usize,
    /// Speller settings other than the defaults, as JSON (as `capot repair --params`); repeat to
    /// measure several on one vocabulary, which is built once.
    #[arg(long, value_name = "JSON")]
    pub params: Vec<String>,
    #[command(flatten)]
    pub lexicon: super::LexiconArgs,
}

#[derive(Debug, Args)]
pub struct SearchBenchArgs {
    #[arg(long, value_name = "DIR")]
    pub index: PathBuf,
    /// Query encoder bundle.
    #[arg(long, value_name = "DIR")]
    pub encoder: PathBuf,
    /// Queries (TSV or queries.jsonl); cycled through in file order.
    #[arg(long, value_name = "FILE")]
    pub queries: PathBuf,
    /// Queries per call, comma-separated: 1 is one request's work; larger sizes show what
    /// batching concurrent requests can at best achieve.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub batch_sizes: Vec<usize>,
    /// Threads calling at once, comma-separated (each (batch size, concurrency) pair is one
    /// measurement). They share the encoder, whose inference calls are serialised as in the
    /// server; tokenization and search overlap.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub concurrency: Vec<usize>,
    /// Seconds of measurement per point (after one second of warm-up).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Results per query.
    #[arg(long, default_value_t = 10)]
    pub k: usize,
    /// HNSW candidate list size (default: the index's).
    #[arg(long)]
    pub ef: Option<usize>,
    #[command(flatten)]
    pub device: DeviceArgs,
}

#[derive(Debug, Args)]
pub struct AnnBenchArgs {
    #[arg(long, value_name = "DIR")]
    pub index: PathBuf,
    /// Query vectors: little-endian f32, `n × dimension`, no header (like the index's
    /// vectors.f32; `numpy.ndarray.astype("<f4").tofile`).
    #[arg(long, value_name = "FILE")]
    pub queries_vectors: PathBuf,
    /// Candidate list sizes to sweep, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "16,32,64,128")]
    pub ef: Vec<usize>,
    /// Neighbours per query (recall@k).
    #[arg(long, default_value_t = 10)]
    pub k: usize,
    /// Timed passes over all queries per ef; the fastest counts (the machine may be shared).
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
}

#[derive(Debug, Args)]
pub struct EncodeBenchArgs {
    /// Encoder bundle; repeat to compare several (e.g. float32 and int8) in one run, measured in
    /// alternation.
    #[arg(long = "encoder", value_name = "DIR", required = true)]
    pub encoders: Vec<PathBuf>,
    /// Queries to encode (TSV or queries.jsonl); cycled through.
    #[arg(long, value_name = "FILE")]
    pub queries: PathBuf,
    /// Batch sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,32")]
    pub batch_sizes: Vec<usize>,
    /// Seconds of measurement per batch size (after one second of warm-up).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Rounds over all encoders and batch sizes; each point reports its best round (the machine
    /// may be shared).
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// Inference sessions calling at once, each with --threads threads and its own stream of
    /// batches: a number, or `auto` (one single-threaded session per core) [default: 1].
    #[arg(long, value_name = "N|auto")]
    pub encoder_workers: Option<String>,
    #[command(flatten)]
    pub device: DeviceArgs,
}

pub fn run(cmd: BenchCommand, global: &GlobalArgs) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Encode(args) => encode(args, global),
        BenchCommand::Search(args) => search(args, global),
        BenchCommand::Ann(args) => ann(args),
        BenchCommand::Repair(args) => repair(args),
        BenchCommand::Filter(args) => super::bench_filter::run(args),
    }
}

/// Resident and peak resident memory of this process, in bytes (Linux; 0 elsewhere).
pub fn rss_bytes() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn repair(args: RepairBenchArgs) -> anyhow::Result<()> {
    use capot::index::vocab::Vocabulary;
    use capot::repair::Repairer;
    use std::sync::Arc;
    // Settings are checked before any work.
    let settings: Vec<(Option<&str>, capot::repair::Params)> = if args.params.is_empty() {
        vec![(None, capot::repair::Params::default())]
    } else {
        args.params
            .iter()
            .map(|p| {
                Ok((
                    Some(p.as_str()),
                    super::repair::parse_params(Some(p), "--params")?,
                ))
            })
            .collect::<anyhow::Result<_>>()?
    };
    let read_started = Instant::now();
    let (corpus, _) = dataset::read_corpus(&args.corpus, ReadMode::Lenient)?;
    let read_seconds = read_started.elapsed().as_secs_f64();
    let (rss_before, _) = rss_bytes();
    let started = Instant::now();
    let documents = corpus.docs().len();
    let vocab = Vocabulary::build(
        corpus
            .docs()
            .iter()
            .map(|d| (d.title.as_str(), d.text.as_str())),
    );
    let build_seconds = started.elapsed().as_secs_f64();
    let (rss_after, peak) = rss_bytes();
    let (words_bytes, pairs_bytes, bigrams_bytes) = vocab.file_bytes();
    let info = vocab.info().clone();
    let heap = vocab.heap_bytes();
    drop(corpus);
    let (rss_before_model, _) = rss_bytes();
    let model_started = Instant::now();
    let lexicon = args.lexicon.load()?.map(Arc::new);
    let lexicon_bytes = lexicon.as_ref().map_or(0, |l| l.heap_bytes());
    let vocab = Arc::new(vocab);
    let mut model_load_seconds = 0.0;
    let mut rss_model = 0;
    let mut model = None;
    let mut timings = Vec::new();
    for (setting, params) in settings {
        let repairer = Repairer::with_params(vocab.clone(), lexicon.clone(), params);
        // Model load: the lexicon and the first setting's speller.
        if model.is_none() {
            model_load_seconds = model_started.elapsed().as_secs_f64();
            rss_model = rss_bytes().0.saturating_sub(rss_before_model);
            model = Some(repairer.model_info());
        }
        for path in &args.queries {
            let (queries, _) = dataset::read_queries(path, ReadMode::Strict)?;
            let texts: Vec<&str> = queries.queries().iter().map(|q| q.text.as_str()).collect();
            let mut samples = Vec::with_capacity(texts.len() * args.passes);
            // Every query the speller changed, as (typed, repaired), for reading what it did.
            let mut changes: Vec<(&str, String)> = Vec::new();
            for pass in 0..args.passes.max(2) {
                for t in &texts {
                    let s = Instant::now();
                    let r = repairer.repair(t);
                    let us = s.elapsed().as_secs_f64() * 1e6;
                    if pass > 0 {
                        samples.push(us);
                    } else if r.changed() {
                        changes.push((t, r.text));
                    }
                }
            }
            samples.sort_by(f64::total_cmp);
            timings.push(serde_json::json!({
                "queries": path,
                "params": setting.map(serde_json::from_str::<serde_json::Value>).transpose()?,
                "count": texts.len(),
                "changed": changes.len(),
                "p50_us": percentile(&samples, 50.0),
                "p99_us": percentile(&samples, 99.0),
                "mean_us": samples.iter().sum::<f64>() / samples.len().max(1) as f64,
                "changes": changes,
            }));
        }
    }
    let model = model.ok_or_else(|| anyhow::anyhow!("no speller setting was measured"))?;
    let out = serde_json::json!({
        "corpus": args.corpus,
        "documents": documents,
        "read_seconds": read_seconds,
        "vocab": info,
        "build_seconds": build_seconds,
        "file_bytes": { "words": words_bytes, "pairs": pairs_bytes, "bigrams": bigrams_bytes },
        "heap_bytes": heap,
        "model": {
            "load_seconds": model_load_seconds,
            "lexicon_heap_bytes": lexicon_bytes,
            "candidate_heap_bytes": model.heap_bytes,
            "candidates": model.candidates,
            "rss_growth_bytes": rss_model,
            "missing": model.missing,
        },
        "rss_growth_bytes": rss_after.saturating_sub(rss_before),
        "peak_rss_bytes": peak,
        "repair": timings,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// Percentile of sorted samples (nearest rank).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn encode(args: EncodeBenchArgs, global: &GlobalArgs) -> anyhow::Result<()> {
    let mut device = args.device.clone();
    let workers = super::encoder_workers(args.encoder_workers.as_deref(), &mut device)?;
    let runtime = device.runtime(global)?;
    let (queries, _) = dataset::read_queries(&args.queries, ReadMode::Strict)?;
    let texts: Vec<String> = queries.queries().iter().map(|q| q.text.clone()).collect();
    anyhow::ensure!(
        !texts.is_empty(),
        "no queries in {}",
        args.queries.display()
    );
    anyhow::ensure!(
        args.batch_sizes.iter().all(|&b| b >= 1),
        "batch sizes must be at least 1"
    );
    anyhow::ensure!(args.rounds >= 1, "--rounds must be at least 1");
    let pools = args
        .encoders
        .iter()
        .map(|dir| {
            EncoderPool::load(dir, &runtime, workers)
                .with_context(|| format!("cannot load encoder {}", dir.display()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    // One session's stream of calls: warm up for a second, then calls until the deadline;
    // per-call latencies in ms.
    let session = |encoder: &Encoder, batch: usize, first: usize, deadline: Instant| {
        let mut next_batch = cycle(&texts, batch, first);
        let warm_until = Instant::now() + Duration::from_secs(1);
        while Instant::now() < warm_until {
            encoder.encode(&next_batch())?;
        }
        let mut latencies = Vec::new();
        while Instant::now() < deadline {
            let b = next_batch();
            let t = Instant::now();
            encoder.encode(&b)?;
            latencies.push(t.elapsed().as_secs_f64() * 1e3);
        }
        anyhow::Ok(latencies)
    };
    // Best round per (encoder, batch size).
    let mut best: Vec<Vec<Option<serde_json::Value>>> =
        vec![vec![None; args.batch_sizes.len()]; pools.len()];
    for _ in 0..args.rounds {
        for (e, pool) in pools.iter().enumerate() {
            for (b, &batch) in args.batch_sizes.iter().enumerate() {
                let measure = Duration::from_secs_f64(args.seconds);
                let deadline = Instant::now() + Duration::from_secs(1) + measure;
                let mut latencies = std::thread::scope(|s| {
                    let handles: Vec<_> = pool
                        .sessions()
                        .iter()
                        .enumerate()
                        .map(|(w, enc)| s.spawn(move || session(enc, batch, w * 997, deadline)))
                        .collect();
                    join_all(handles)
                })?
                .concat();
                let calls = latencies.len();
                latencies.sort_by(f64::total_cmp);
                let tps = (calls * batch) as f64 / measure.as_secs_f64();
                let manifest = pool.encoder().manifest();
                let point = serde_json::json!({
                    "encoder": manifest.label(),
                    "precision": manifest.provenance.quantization.as_ref()
                        .map_or("float32", |q| q.precision.as_str()),
                    "batch_size": batch,
                    "calls": calls,
                    "texts_per_second": tps,
                    "latency_ms_p50": percentile(&latencies, 50.0),
                    "latency_ms_p99": percentile(&latencies, 99.0),
                });
                let slot = &mut best[e][b];
                let better = slot
                    .as_ref()
                    .is_none_or(|old| old["texts_per_second"].as_f64().unwrap_or(0.0) < tps);
                if better {
                    *slot = Some(point);
                }
            }
        }
    }
    let out = serde_json::json!({
        "runtime": "capot",
        "provider": pools[0].encoder().provider().to_string(),
        "threads": device.threads,
        "workers": workers,
        "rounds": args.rounds,
        "results": best.into_iter().flatten().flatten().collect::<Vec<_>>(),
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// Batches of `batch` texts taken in order from `first` on, wrapping around at the end.
fn cycle<'a>(texts: &'a [String], batch: usize, first: usize) -> impl FnMut() -> Vec<&'a str> {
    let mut at = first % texts.len().max(1);
    move || {
        let b = (0..batch)
            .map(|i| texts[(at + i) % texts.len()].as_str())
            .collect();
        at = (at + batch) % texts.len();
        b
    }
}

/// Joins benchmark threads in order; a panicked thread is an error.
fn join_all<T>(
    handles: Vec<std::thread::ScopedJoinHandle<'_, anyhow::Result<T>>>,
) -> anyhow::Result<Vec<T>> {
    handles
        .into_iter()
        .map(|h| {
            h.join()
                .map_err(|_| anyhow::anyhow!("a benchmark thread panicked"))?
        })
        .collect()
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Share of `exact` found in `approx` (recall@k with k = `exact.len()`); 1 when `exact` is empty.
pub fn recall(approx: &[usize], exact: &[usize]) -> f64 {
    if exact.is_empty() {
        return 1.0;
    }
    let want: HashSet<usize> = exact.iter().copied().collect();
    let found: HashSet<usize> = approx
        .iter()
        .copied()
        .filter(|i| want.contains(i))
        .collect();
    found.len() as f64 / exact.len() as f64
}

/// Reads a headerless little-endian f32 matrix with `dim` columns.
pub fn read_f32_matrix(path: &Path, dim: usize) -> anyhow::Result<Vec<Vec<f32>>> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let row = dim * 4;
    anyhow::ensure!(
        dim > 0 && bytes.len() % row == 0,
        "{}: {} bytes is not a whole number of {dim}-dimensional f32 vectors",
        path.display(),
        bytes.len()
    );
    Ok(bytes
        .chunks_exact(row)
        .map(|r| {
            r.chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        })
        .collect())
}

fn search(args: SearchBenchArgs, global: &GlobalArgs) -> anyhow::Result<()> {
    let runtime = args.device.runtime(global)?;
    let encoder = Encoder::load(&args.encoder, &runtime).context("cannot load encoder")?;
    let index = Index::load(&args.index)
        .with_context(|| format!("cannot load index {}", args.index.display()))?;
    anyhow::ensure!(
        encoder.dimension() == index.dimension(),
        "encoder dimension {} differs from the index's {}",
        encoder.dimension(),
        index.dimension()
    );
    let (queries, _) = dataset::read_queries(&args.queries, ReadMode::Strict)?;
    let texts: Vec<String> = queries.queries().iter().map(|q| q.text.clone()).collect();
    anyhow::ensure!(
        !texts.is_empty(),
        "no queries in {}",
        args.queries.display()
    );
    anyhow::ensure!(args.k >= 1, "k must be at least 1");
    let ef = args.ef.unwrap_or_else(|| index.default_ef()).max(args.k);
    // One call: what a /search request does apart from HTTP, JSON and queueing.
    let call = |batch: &[&str], stages: &mut [f64; 3]| -> anyhow::Result<usize> {
        let t = Instant::now();
        let tokens = encoder.tokenizer().encode_batch(batch)?;
        let t_tok = t.elapsed().as_secs_f64();
        let vectors = encoder.run(&tokens)?;
        let t_enc = t.elapsed().as_secs_f64();
        let mut found = 0;
        for v in &vectors {
            for hit in index.search(v, args.k, ef)? {
                found += usize::from(index.document(hit.index)?.is_some());
            }
        }
        let t_all = t.elapsed().as_secs_f64();
        stages[0] += t_tok * 1e3;
        stages[1] += (t_enc - t_tok) * 1e3;
        stages[2] += (t_all - t_enc) * 1e3;
        Ok(found)
    };
    // One worker: warm up for a second, then calls until the deadline; per-call latencies (ms)
    // and summed stage times.
    let worker =
        |batch: usize, first: usize, deadline: Instant| -> anyhow::Result<(Vec<f64>, [f64; 3])> {
            let mut next_batch = cycle(&texts, batch, first);
            let mut stages = [0f64; 3];
            let warm_until = Instant::now() + Duration::from_secs(1);
            while Instant::now() < warm_until {
                call(&next_batch(), &mut stages)?;
            }
            stages = [0f64; 3];
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let b = next_batch();
                let t = Instant::now();
                call(&b, &mut stages)?;
                latencies.push(t.elapsed().as_secs_f64() * 1e3);
            }
            Ok((latencies, stages))
        };
    let mut results = Vec::new();
    for &batch in &args.batch_sizes {
        anyhow::ensure!(batch >= 1, "batch sizes must be at least 1");
        for &concurrency in &args.concurrency {
            anyhow::ensure!(concurrency >= 1, "concurrency must be at least 1");
            let measure = Duration::from_secs_f64(args.seconds);
            let deadline = Instant::now() + Duration::from_secs(1) + measure;
            let parts = std::thread::scope(|s| {
                let handles: Vec<_> = (0..concurrency)
                    .map(|w| s.spawn(move || worker(batch, w * 997, deadline)))
                    .collect();
                join_all(handles)
            })?;
            let mut latencies = Vec::new();
            let mut stages = [0f64; 3];
            for (l, st) in parts {
                latencies.extend(l);
                stages.iter_mut().zip(st).for_each(|(a, b)| *a += b);
            }
            let elapsed = measure.as_secs_f64();
            let calls = latencies.len();
            let avg = mean(&latencies);
            latencies.sort_by(f64::total_cmp);
            let per_call = |x: f64| x / calls.max(1) as f64;
            results.push(serde_json::json!({
                "batch_size": batch,
                "concurrency": concurrency,
                "calls": calls,
                "queries_per_second": (calls * batch) as f64 / elapsed,
                "latency_ms_p50": percentile(&latencies, 50.0),
                "latency_ms_p99": percentile(&latencies, 99.0),
                "latency_ms_mean": avg,
                "stage_ms_mean": {
                    "tokenize": per_call(stages[0]),
                    "encode": per_call(stages[1]),
                    "search": per_call(stages[2]),
                },
            }));
        }
    }
    let out = serde_json::json!({
        "runtime": "capot in-process",
        "encoder": encoder.manifest().label(),
        "provider": encoder.provider().to_string(),
        "threads": args.device.threads,
        "index_documents": index.len(),
        "k": args.k,
        "ef": ef,
        "results": results,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

fn ann(args: AnnBenchArgs) -> anyhow::Result<()> {
    let index = Index::load(&args.index)
        .with_context(|| format!("cannot load index {}", args.index.display()))?;
    let queries = read_f32_matrix(&args.queries_vectors, index.dimension())?;
    anyhow::ensure!(
        !queries.is_empty(),
        "no query vectors in {}",
        args.queries_vectors.display()
    );
    anyhow::ensure!(
        args.k >= 1 && args.rounds >= 1,
        "k and rounds must be at least 1"
    );
    let exact: Vec<Vec<usize>> = queries
        .iter()
        .map(|q| {
            Ok(index
                .search_exact(q, args.k)?
                .iter()
                .map(|h| h.index)
                .collect())
        })
        .collect::<anyhow::Result<_>>()?;
    let mut results = Vec::new();
    for &ef in &args.ef {
        anyhow::ensure!(ef >= 1, "ef must be at least 1");
        // Warm-up pass, which also gives the recall (results do not change between passes).
        let mut total_recall = 0.0;
        for (q, want) in queries.iter().zip(&exact) {
            let got: Vec<usize> = index
                .search(q, args.k, ef)?
                .iter()
                .map(|h| h.index)
                .collect();
            total_recall += recall(&got, want);
        }
        let mut best = f64::INFINITY;
        for _ in 0..args.rounds {
            let t = Instant::now();
            for q in &queries {
                std::hint::black_box(index.search(std::hint::black_box(q), args.k, ef)?);
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        results.push(serde_json::json!({
            "ef": ef,
            "recall": total_recall / queries.len() as f64,
            "queries_per_second": queries.len() as f64 / best,
            "latency_ms_mean": best * 1e3 / queries.len() as f64,
        }));
    }
    let m = index.manifest();
    let out = serde_json::json!({
        "library": "capot hnsw (via Index::search)",
        "documents": index.len(),
        "queries": queries.len(),
        "k": args.k,
        "m": m.hnsw.m,
        "ef_construction": m.hnsw.ef_construction,
        "threads": 1,
        "results": results,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn percentile_nearest_rank() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(super::percentile(&v, 50.0), 2.0);
        assert_eq!(super::percentile(&v, 99.0), 4.0);
        assert_eq!(super::percentile(&v, 0.0), 1.0);
    }

    #[test]
    fn recall_is_the_share_of_exact_neighbours_found() {
        assert_eq!(super::recall(&[1, 2, 3, 4], &[4, 3, 2, 1]), 1.0);
        assert_eq!(super::recall(&[1, 2, 9, 8], &[1, 2, 3, 4]), 0.5);
        assert_eq!(super::recall(&[1, 1, 1, 1], &[1, 2, 3, 4]), 0.25);
        assert_eq!(super::recall(&[], &[1]), 0.0);
        assert_eq!(super::recall(&[1], &[]), 1.0);
    }

    #[test]
    fn f32_matrix_round_trip_and_size_check() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.f32");
        let data: Vec<u8> = [1.0f32, -2.5, 3.0, 0.25, 5.0, 6.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        std::fs::write(&path, &data).unwrap();
        let m = super::read_f32_matrix(&path, 3).unwrap();
        assert_eq!(m, vec![vec![1.0, -2.5, 3.0], vec![0.25, 5.0, 6.0]]);
        let err = super::read_f32_matrix(&path, 4).unwrap_err().to_string();
        assert!(err.contains("not a whole number"), "{err}");
    }
}
