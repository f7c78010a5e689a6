//! Criterion benchmarks of two CPU stages of a search, each on its own: query repair
//! (`Repairer::repair` with the default lexicon, pair list and usage list over the dl19-sample
//! vocabulary, one query an iteration) and the live segment's scan (`Segment::search` over 10,000
//! random 384-d documents). What they cost inside the service, encoder and all, is
//! `bench/repair.sh` and `bench/live_corpus.py`; figures in docs/benchmarks.md.
//!
//! ```text
//! cargo bench --bench query_stages
//! ```
//!
//! Repair needs `scripts/setup`'s lexicon assets and `../shared/data`; without them it is skipped
//! with a line saying so. `cargo test --all-targets` runs each benchmark once, as a test.

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;

use capot::dataset::{read_corpus, read_queries, read_variants, ReadMode};
use capot::index::vocab::Vocabulary;
use capot::live::segment::Segment;
use capot::live::{LiveDocument, Operation};
use capot::repair::lexicon::{self, Lexicon};
use capot::repair::Repairer;
use criterion::{criterion_group, criterion_main, Criterion};

/// Clean MS MARCO dev queries repaired per sample (most are left as typed).
const CLEAN_QUERIES: usize = 2000;
/// Documents in the live segment: the issue's 10,000.
const LIVE_DOCUMENTS: usize = 10_000;
/// Dimensions of MiniLM's vectors.
const DIM: usize = 384;

/// The dl19 vocabulary with the default lexicon, and the queries to repair: clean MS MARCO dev
/// queries and the ten dl19 typo files. `None` (and why) when the assets or the data are missing.
fn repair_inputs() -> Result<(Repairer, Vec<String>, Vec<String>), String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let data = root.join("../shared/data");
    let paths = lexicon::default_paths(&root.join("assets"));
    if !data.is_dir() || paths.len() < 3 || !paths.iter().all(|p| p.is_file()) {
        return Err("needs ../shared/data and the lexicon assets (scripts/setup)".into());
    }
    let lexicon = Lexicon::load(&paths).map_err(|e| e.to_string())?;
    let dl19 = data.join("dl19-sample");
    let (corpus, _) = read_corpus(&dl19, ReadMode::Strict).map_err(|e| e.to_string())?;
    let vocab = Vocabulary::build(
        corpus
            .docs()
            .iter()
            .map(|d| (d.title.as_str(), d.text.as_str())),
    );
    let repairer = Repairer::new(Arc::new(vocab), Some(Arc::new(lexicon)));
    let (clean, _) = read_queries(
        &data.join("marco-dev-queries/queries.tsv"),
        ReadMode::Strict,
    )
    .map_err(|e| e.to_string())?;
    let clean = clean
        .queries()
        .iter()
        .take(CLEAN_QUERIES)
        .map(|q| q.text.clone())
        .collect();
    let mut typos = Vec::new();
    for i in 1..=10 {
        let (file, _) = read_variants(&dl19.join(format!("queries.typo{i}.tsv")), ReadMode::Strict)
            .map_err(|e| e.to_string())?;
        typos.extend(file.queries().iter().map(|q| q.text.clone()));
    }
    Ok((repairer, clean, typos))
}

fn repair(c: &mut Criterion) {
    let (repairer, clean, typos) = match repair_inputs() {
        Ok(inputs) => inputs,
        Err(why) => {
            eprintln!("repair benchmarks skipped: {why}");
            return;
        }
    };
    let mut group = c.benchmark_group("repair");
    for (name, queries) in [("clean_marco_dev", &clean), ("dl19_typos", &typos)] {
        // One query an iteration, the next each time: the mean is the time per query.
        let mut next = queries.iter().cycle();
        group.bench_function(name, |b| {
            b.iter(|| repairer.repair(black_box(next.next().map_or("", String::as_str))))
        });
    }
    group.finish();
}

/// `n` unit vectors of `DIM` dimensions from a fixed seed (xorshift).
fn unit_vectors(n: usize, mut seed: u64) -> Vec<Vec<f32>> {
    (0..n)
        .map(|_| {
            let v: Vec<f32> = (0..DIM)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                })
                .collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.into_iter().map(|x| x / norm).collect()
        })
        .collect()
}

fn live_segment(c: &mut Criterion) {
    let mut segment = Segment::new(DIM);
    let documents = unit_vectors(LIVE_DOCUMENTS, 0x2545_f491_4f6c_dd1d)
        .into_iter()
        .enumerate()
        .map(|(i, vector)| LiveDocument {
            id: format!("live-{i}"),
            title: String::new(),
            text: String::new(),
            metadata: None,
            vector,
        })
        .collect();
    segment.apply(1, &Operation::Upsert(documents), &|_| None);
    let queries = unit_vectors(64, 7);
    let mut next = queries.iter().cycle();
    c.bench_function("live_segment/search_10000_k10", |b| {
        b.iter(|| segment.search(black_box(next.next().map_or(&[][..], Vec::as_slice)), 10))
    });
}

/// A Qdrant-shaped filter of every kind of condition, bound and translated into the SQL the
/// PostgreSQL store runs: the per-search cost of the translation.
fn filter_sql(c: &mut Criterion) {
    let v = serde_json::json!({
        "must": [{"key": "tenant", "match": {"value": "t3"}},
                 {"key": "published", "range": {"gte": "2024-01-01T00:00:00Z"}}],
        "should": [{"key": "lang", "match": {"any": ["en", "de", "fr"]}}, {"has_id": ["a", "b"]}],
        "must_not": [{"is_empty": {"key": "tags"}}],
        "min_should": {"min_count": 1, "conditions": [{"key": "year", "range": {"gt": 2010}}]}
    });
    c.bench_function("store/filter_sql", |b| {
        b.iter(|| {
            let mut f = capot::query::Filter::parse(&v, "filter").expect("filter");
            f.bind(&Default::default(), true, "filter").expect("bind");
            capot::store::postgres::sql::filter_sql(&f, 3)
        })
    });
}

/// A compaction's switch cutting the write-ahead log while writes wait (`Wal::retain_after`
/// over a log of `CAPOT_BENCH_LOG_MIB` MiB, default 64, whose last 16 batches come after the
/// snapshot), beside reading and decoding the whole log once (`Wal::records(..)`), which the
/// switch did twice under the write gate before it cut from the snapshot's offset.
fn log_cut(c: &mut Criterion) {
    use capot::live::wal::Wal;
    let mib: u64 = std::env::var("CAPOT_BENCH_LOG_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let dir = tempfile::tempdir().expect("temporary directory");
    let template = dir.path().join("template.log");
    let (wal, _) = Wal::open(&template, "bench", 0).expect("log");
    let text =
        "a passage of about two hundred bytes, as a short document's text would be; ".repeat(3);
    let mut batch = 0;
    while wal.bytes() < mib << 20 {
        let docs = unit_vectors(256, 0x9e37_79b9 + batch)
            .into_iter()
            .enumerate()
            .map(|(i, vector)| LiveDocument {
                id: format!("b{batch}-{i}"),
                title: String::new(),
                text: text.clone(),
                metadata: None,
                vector,
            })
            .collect();
        wal.append(&Operation::Upsert(docs)).expect("append");
        batch += 1;
    }
    let covers = batch.saturating_sub(16);
    drop(wal);
    let work = dir.path().join("wal.log");
    c.bench_function("live/log_cut", |b| {
        b.iter_custom(|iters| {
            let mut spent = std::time::Duration::ZERO;
            for _ in 0..iters {
                std::fs::copy(&template, &work).expect("copy");
                let (wal, _) = Wal::open(&work, "bench", 0).expect("log");
                let started = std::time::Instant::now();
                black_box(wal.retain_after(covers).expect("cut"));
                spent += started.elapsed();
            }
            spent
        })
    });
    let (wal, _) = Wal::open(&template, "bench", 0).expect("log");
    c.bench_function("live/log_read_whole", |b| {
        b.iter(|| black_box(wal.records(..).expect("read")))
    });
}

criterion_group!(benches, repair, live_segment, filter_sql, log_cut);
criterion_main!(benches);
