//! `capot bench filter`: filtered search on generated metadata, as issue 41 measures it.
//!
//! The index given is never changed: its files are hard-linked into a work directory (copied
//! where links fail) and the generated metadata is written there. Every document gets
//! - `cat`: a keyword of 1,000 values, Zipfian (s = 1);
//! - `year`: an integer, 1990..=2024, uniform;
//! - `tenant`: a keyword of 10,000 values, uniform (the tenant key);
//! - `r`: an integer in 0..1,000,000, uniform: a range on it admits a share of the documents
//!   independent of the query;
//! - `near`: the document's rank along the queries' mean direction, scaled to 0..1,000,000: a
//!   range on its top admits documents near the queries (correlated), on its bottom documents
//!   far from them (anti-correlated).
//!
//! Per (correlation, selectivity): the filter is parsed, bound and evaluated for every query (as
//! the service does per request), the planner searches, and the answer is compared with the
//! exact filtered top-k (every admitted document scored). Beside it: the unfiltered search, and
//! post-filtering (the unfiltered walk's `ef` candidates with the filter applied afterwards),
//! and an unfiltered search timed between each cell's filtered ones (`paired_unfiltered`).
//! Single thread; prints JSON (and Markdown tables on stderr).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use roaring::RoaringBitmap;
use serde_json::{json, Value};

use capot::index::payload::{FieldSchema, FieldType};
use capot::index::{Admitted, Index, MANIFEST_FILE};
use capot::query::Filter;

use super::bench::{percentile, read_f32_matrix, recall, rss_bytes};

#[derive(Debug, Args)]
pub struct FilterBenchArgs {
    /// Index directory (read only: its files are linked into --work).
    #[arg(long, value_name = "DIR")]
    pub index: PathBuf,
    /// Query vectors: a headerless little-endian float32 matrix (as `capot bench ann` reads).
    #[arg(long, value_name = "FILE")]
    pub queries_vectors: PathBuf,
    /// Queries used (the first N of the file).
    #[arg(long, default_value_t = 300)]
    pub queries: usize,
    #[arg(long, default_value_t = 10)]
    pub k: usize,
    /// The walk's candidate list (the service's default is the index's ef_search).
    #[arg(long)]
    pub ef: Option<usize>,
    /// The planner's scan/walk crossover, as `capot serve --filter-scan-factor` (0: always walk,
    /// 1e12: always scan, exactly or the sign codes; with `--sign-row-cost 1e12` exactly).
    #[arg(long, value_name = "F", default_value_t = capot::index::DEFAULT_SCAN_FACTOR)]
    pub filter_scan_factor: f64,
    /// What the planner prices a scan of the sign codes at, in rows of the exact scan per
    /// admitted document (0 with `--filter-scan-factor 0`: always scan the codes; 1e12: never).
    #[arg(long, value_name = "C", default_value_t = capot::index::DEFAULT_SIGN_ROW_COST)]
    pub sign_row_cost: f64,
    /// Shares of the documents the filters admit, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0.001,0.01,0.1,0.5,1")]
    pub selectivities: Vec<f64>,
    /// Work directory for the index with metadata (default: a temporary one, removed after).
    #[arg(long, value_name = "DIR")]
    pub work: Option<PathBuf>,
    /// Writes, per cell, the admitted ids (`<cell>.ids`, little-endian u32) and the exact
    /// filtered top-k (`<cell>.truth.json`) here, for bench/filter_peers.py.
    #[arg(long, value_name = "DIR")]
    pub export: Option<PathBuf>,
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
}

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

const SCALE: f64 = 1_000_000.0;
const TENANTS: u64 = 10_000;
const CATEGORIES: usize = 1_000;

/// Links (or copies) the index's files into `work`, without any payload it had.
fn work_copy(index: &Path, work: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(work)?;
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(index.join(MANIFEST_FILE))?)?;
    for name in manifest["files"]
        .as_object()
        .context("manifest files")?
        .keys()
    {
        if name == capot::index::payload::PAYLOAD_FILE {
            continue;
        }
        let (from, to) = (index.join(name), work.join(name));
        let _ = std::fs::remove_file(&to);
        if std::fs::hard_link(&from, &to).is_err() {
            std::fs::copy(&from, &to).with_context(|| format!("copy {}", from.display()))?;
        }
    }
    let mut manifest = manifest;
    if let Some(files) = manifest["files"].as_object_mut() {
        files.remove(capot::index::payload::PAYLOAD_FILE);
    }
    if let Some(o) = manifest.as_object_mut() {
        o.remove("payload");
    }
    std::fs::write(
        work.join(MANIFEST_FILE),
        serde_json::to_vec_pretty(&manifest)?,
    )?;
    Ok(())
}

fn unit_mean(queries: &[Vec<f32>]) -> Vec<f32> {
    let dim = queries[0].len();
    let mut u = vec![0f32; dim];
    for q in queries {
        u.iter_mut().zip(q).for_each(|(a, b)| *a += b);
    }
    let n = u.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    u.iter_mut().for_each(|x| *x /= n);
    u
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Generated metadata of every document (see the module documentation).
fn metadata(index: &Index, queries: &[Vec<f32>], seed: u64) -> Vec<Value> {
    let n = index.len();
    let u = unit_mean(queries);
    let mut order: Vec<(f32, usize)> = (0..n)
        .map(|i| (index.vector(i).map_or(0.0, |v| dot(v, &u)), i))
        .collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut near = vec![0u64; n];
    for (rank, &(_, i)) in order.iter().enumerate() {
        near[i] = (rank as f64 * SCALE / n as f64) as u64;
    }
    // Zipf over CATEGORIES values: the inverse of the harmonic CDF.
    let weights: Vec<f64> = (1..=CATEGORIES).map(|r| 1.0 / r as f64).collect();
    let total: f64 = weights.iter().sum();
    let mut cdf = Vec::with_capacity(CATEGORIES);
    let mut acc = 0.0;
    for w in &weights {
        acc += w / total;
        cdf.push(acc);
    }
    let mut rng = Rng(seed);
    (0..n)
        .map(|i| {
            let u = rng.uniform();
            let c = cdf.partition_point(|&x| x < u).min(CATEGORIES - 1);
            json!({
                "cat": format!("c{c}"),
                "year": 1990 + rng.next() % 35,
                "tenant": format!("t{}", rng.next() % TENANTS),
                "r": (rng.uniform() * SCALE) as u64,
                "near": near[i],
            })
        })
        .collect()
}

fn bound(index: &Index, v: &Value) -> anyhow::Result<Filter> {
    let mut f = Filter::parse(v, "filter")?;
    f.bind(&index.payload_fields(), false, "filter")?;
    Ok(f)
}

/// Exact filtered top-k: every admitted document scored.
fn truth(index: &Index, q: &[f32], k: usize, admitted: &RoaringBitmap) -> Vec<usize> {
    let mut scored: Vec<(f32, usize)> = admitted
        .iter()
        .filter_map(|i| index.vector(i as usize).map(|v| (dot(v, q), i as usize)))
        .collect();
    let k = k.min(scored.len());
    if k == 0 {
        return Vec::new();
    }
    scored.select_nth_unstable_by(k - 1, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.truncate(k);
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().map(|s| s.1).collect()
}

/// Seconds one unfiltered search of `q` takes.
fn time_unfiltered(index: &Index, q: &[f32], k: usize, ef: usize) -> anyhow::Result<f64> {
    let t = Instant::now();
    index.search(q, k, ef)?;
    Ok(t.elapsed().as_secs_f64())
}

fn latency_stats(lat: &mut [f64]) -> Value {
    lat.sort_by(f64::total_cmp);
    let total: f64 = lat.iter().sum();
    json!({
        "queries_per_second": lat.len() as f64 / total.max(1e-12),
        "p50_ms": percentile(lat, 50.0) * 1e3,
        "p99_ms": percentile(lat, 99.0) * 1e3,
    })
}

pub fn run(args: FilterBenchArgs) -> anyhow::Result<()> {
    let original = Index::load(&args.index)
        .with_context(|| format!("cannot load index {}", args.index.display()))?;
    let mut queries = read_f32_matrix(&args.queries_vectors, original.dimension())?;
    queries.truncate(args.queries);
    anyhow::ensure!(!queries.is_empty(), "no query vectors");
    let n = original.len();
    let k = args.k;
    let ef = args.ef.unwrap_or_else(|| original.default_ef());
    let scan_factor = super::filter_scan_factor(args.filter_scan_factor)?;
    let sign_row_cost = args.sign_row_cost;
    anyhow::ensure!(
        sign_row_cost >= 0.0 && !sign_row_cost.is_nan(),
        "--sign-row-cost must be 0 or more"
    );
    let work = args.work.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("capot-bench-filter-{}", std::process::id()))
    });
    work_copy(&args.index, &work)?;

    eprintln!("generating metadata for {n} documents");
    let meta = metadata(&original, &queries, args.seed);
    let started = Instant::now();
    let load_plain = {
        let t = Instant::now();
        drop(Index::load(&work)?);
        t.elapsed().as_secs_f64()
    };
    let fields: BTreeMap<String, FieldSchema> = [
        ("cat", FieldType::Keyword, false),
        ("year", FieldType::Integer, false),
        ("tenant", FieldType::Keyword, true),
        ("r", FieldType::Integer, false),
        ("near", FieldType::Integer, false),
    ]
    .into_iter()
    .map(|(k, kind, tenant)| (k.to_string(), FieldSchema { kind, tenant }))
    .collect();
    let t = Instant::now();
    Index::set_payload(&work, meta.iter().cloned().enumerate(), fields)?;
    let write_seconds = t.elapsed().as_secs_f64();
    drop(meta);
    let (rss_before, _) = rss_bytes();
    let t = Instant::now();
    let index = Index::load(&work)?;
    let load_with = t.elapsed().as_secs_f64();
    let (rss_after, _) = rss_bytes();
    let payload = index.payload_indexes();
    let payload_report = json!({
        "documents": n,
        "payload_bin_bytes": std::fs::metadata(work.join(capot::index::payload::PAYLOAD_FILE))?.len(),
        "write_seconds": write_seconds,
        "load_seconds_without_payload": load_plain,
        "load_seconds_with_payload_indexes": load_with,
        "payload_index_heap_bytes": payload.heap_bytes(),
        "payload_index_bytes_per_document": payload.heap_bytes() as f64 / n as f64,
        "rss_growth_bytes_at_load": rss_after.saturating_sub(rss_before),
        "fields": payload.report(),
    });
    eprintln!("{}", serde_json::to_string(&payload_report)?);
    drop(original);

    // Unfiltered: the baseline every cell is compared with.
    let exact_unfiltered: Vec<Vec<usize>> = queries
        .iter()
        .map(|q| Ok(index.search_exact(q, k)?.iter().map(|h| h.index).collect()))
        .collect::<anyhow::Result<_>>()?;
    let mut lat = Vec::with_capacity(queries.len());
    let mut rec = 0.0;
    for _ in 0..2 {
        lat.clear();
        rec = 0.0;
        for (q, want) in queries.iter().zip(&exact_unfiltered) {
            let t = Instant::now();
            let got = index.search(q, k, ef)?;
            lat.push(t.elapsed().as_secs_f64());
            rec += recall(&got.iter().map(|h| h.index).collect::<Vec<_>>(), want);
        }
    }
    let mut unfiltered = latency_stats(&mut lat);
    unfiltered["recall"] = json!(rec / queries.len() as f64);
    let unfiltered_qps = unfiltered["queries_per_second"].as_f64().unwrap_or(0.0);
    let unfiltered_p99 = unfiltered["p99_ms"].as_f64().unwrap_or(0.0);
    eprintln!("unfiltered: {unfiltered}");

    let mut cells = Vec::new();
    let mut cell = |name: String,
                    correlation: &str,
                    share: f64,
                    filters: &dyn Fn(usize) -> Value|
     -> anyhow::Result<()> {
        let mut lat = Vec::with_capacity(queries.len());
        let mut filter_ms = Vec::with_capacity(queries.len());
        let (mut rec, mut post_rec, mut post_hits, mut exact_hits) = (0.0, 0.0, 0usize, 0usize);
        let mut admitted_total = 0u64;
        let mut strategies: BTreeMap<&'static str, usize> = BTreeMap::new();
        let mut truths = Vec::new();
        let mut in_top = 0usize;
        // First pass, untimed: each query's admitted set (the first query of a cell builds it
        // into the index's cache of recent filters, as the service does; `filter_ms_first`
        // reports that cost), its exact answer and post-filtering. The exact answer scores
        // every admitted document, which would evict the graph from the caches before each
        // timed search if it ran between them.
        let mut filter_ms_first = 0.0;
        let mut wants = Vec::with_capacity(queries.len());
        for (qi, q) in queries.iter().enumerate() {
            let fv = filters(qi);
            let t = Instant::now();
            let admitted = bound(&index, &fv)?.admitted_cached(&index)?;
            if qi == 0 {
                filter_ms_first = t.elapsed().as_secs_f64() * 1e3;
            }
            let want = truth(&index, q, k, &admitted);
            admitted_total += admitted.len();
            in_top += exact_unfiltered[qi]
                .iter()
                .filter(|&&i| admitted.contains(i as u32))
                .count();
            // Post-filtering: the unfiltered walk's ef candidates, then the filter.
            let post: Vec<usize> = index
                .search(q, ef, ef)?
                .iter()
                .map(|h| h.index)
                .filter(|&i| admitted.contains(i as u32))
                .take(k)
                .collect();
            post_hits += post.len();
            post_rec += recall(&post, &want);
            if let Some(dir) = &args.export {
                if qi == 0 {
                    std::fs::create_dir_all(dir)?;
                    let ids: Vec<u8> = admitted.iter().flat_map(|i| i.to_le_bytes()).collect();
                    std::fs::write(dir.join(format!("{name}.ids")), ids)?;
                }
                truths.push(want.clone());
            }
            wants.push((want, admitted.len()));
        }
        // Timed, back to back as the unfiltered baseline is (twice; the second round counts):
        // parse and bind the filter, take its admitted set, search. Each filtered search is
        // paired with an unfiltered one of another query (half the list away, so that neither
        // warms the caches for the other), first or second in turn: the two share the
        // machine's drift, which moves a run's speed by more than the differences measured
        // here, and `qps_vs_paired_unfiltered` is read against the unfiltered walk of the
        // same seconds rather than of the run's start.
        let mut found_all = Vec::with_capacity(queries.len());
        let mut paired = Vec::with_capacity(queries.len());
        let half = queries.len() / 2;
        for _ in 0..2 {
            lat.clear();
            filter_ms.clear();
            found_all.clear();
            paired.clear();
            for (qi, q) in queries.iter().enumerate() {
                let other = &queries[(qi + half) % queries.len()];
                let unfiltered_first = qi % 2 == 1;
                if unfiltered_first {
                    paired.push(time_unfiltered(&index, other, k, ef)?);
                }
                let fv = filters(qi);
                let t = Instant::now();
                let admitted = bound(&index, &fv)?.admitted_cached(&index)?;
                let filtered_at = t.elapsed().as_secs_f64();
                let found =
                    index.search_admitted_with(q, k, ef, &admitted, scan_factor, sign_row_cost)?;
                lat.push(t.elapsed().as_secs_f64());
                filter_ms.push(filtered_at * 1e3);
                found_all.push(found);
                if !unfiltered_first {
                    paired.push(time_unfiltered(&index, other, k, ef)?);
                }
            }
        }
        for (found, (want, admitted)) in found_all.iter().zip(&wants) {
            *strategies.entry(found.strategy.as_str()).or_default() += 1;
            let got: Vec<usize> = found.hits.iter().map(|h| h.index).collect();
            anyhow::ensure!(
                got.len() == want.len(),
                "{name}: {} hits where the filter admits {admitted} (k {k})",
                got.len(),
            );
            exact_hits += usize::from(got.len() == k.min(*admitted as usize));
            rec += recall(&got, want);
        }
        if let Some(dir) = &args.export {
            std::fs::write(
                dir.join(format!("{name}.truth.json")),
                serde_json::to_vec(&json!({"filter": filters(0), "truth": truths}))?,
            )?;
        }
        let nq = queries.len() as f64;
        let mut stats = latency_stats(&mut lat);
        let qps = stats["queries_per_second"].as_f64().unwrap_or(0.0);
        let p99 = stats["p99_ms"].as_f64().unwrap_or(0.0);
        filter_ms.sort_by(f64::total_cmp);
        stats["name"] = json!(name);
        stats["correlation"] = json!(correlation);
        stats["selectivity"] = json!(share);
        stats["admitted_mean"] = json!(admitted_total as f64 / nq);
        stats["recall"] = json!(rec / nq);
        stats["exactly_min_k_admitted"] = json!(exact_hits as f64 / nq);
        stats["filter_ms_p50"] = json!(percentile(&filter_ms, 50.0));
        stats["filter_ms_first"] = json!(filter_ms_first);
        stats["qps_vs_unfiltered"] = json!(qps / unfiltered_qps.max(1e-12));
        stats["p99_vs_unfiltered"] = json!(p99 / unfiltered_p99.max(1e-12));
        let paired = latency_stats(&mut paired);
        let paired_qps = paired["queries_per_second"].as_f64().unwrap_or(0.0);
        let paired_p99 = paired["p99_ms"].as_f64().unwrap_or(0.0);
        stats["qps_vs_paired_unfiltered"] = json!(qps / paired_qps.max(1e-12));
        stats["p99_vs_paired_unfiltered"] = json!(p99 / paired_p99.max(1e-12));
        stats["paired_unfiltered"] = paired;
        stats["strategies"] = json!(strategies);
        stats["post_filter_recall"] = json!(post_rec / nq);
        stats["post_filter_hits_mean"] = json!(post_hits as f64 / nq);
        // How correlated the filter is with the queries: the share of the unfiltered exact
        // top-k it admits (about `selectivity` when independent).
        stats["admitted_share_of_unfiltered_top_k"] = json!(in_top as f64 / (nq * k as f64));
        eprintln!("{stats}");
        cells.push(stats);
        Ok(())
    };
    for &s in &args.selectivities {
        anyhow::ensure!(s > 0.0 && s <= 1.0, "selectivities lie in (0, 1]");
        let cut = (s * SCALE).round();
        cell(
            format!("independent-{s}"),
            "independent",
            s,
            &|_| json!({"must": [{"key": "r", "range": {"lt": cut}}]}),
        )?;
        if s < 1.0 {
            cell(
                format!("correlated-{s}"),
                "correlated",
                s,
                &|_| json!({"must": [{"key": "near", "range": {"gte": SCALE - cut}}]}),
            )?;
            cell(
                format!("anti-{s}"),
                "anti-correlated",
                s,
                &|_| json!({"must": [{"key": "near", "range": {"lt": cut}}]}),
            )?;
        }
    }
    // One tenant of 10,000 per query.
    let mut rng = Rng(args.seed ^ 0x7e4a);
    let tenants: Vec<String> = (0..queries.len())
        .map(|_| format!("t{}", rng.next() % TENANTS))
        .collect();
    cell(
        "tenant".to_string(),
        "one tenant",
        1.0 / TENANTS as f64,
        &|qi| json!({"must": [{"key": "tenant", "match": {"value": tenants[qi]}}]}),
    )?;
    // A frequent category (the Zipf head: ~13% of documents).
    cell(
        "category-head".to_string(),
        "independent",
        0.13,
        &|_| json!({"must": [{"key": "cat", "match": {"value": "c0"}}]}),
    )?;

    // Equivalent filters: a range and the `any` of its values give the same hits.
    let a = bound(
        &index,
        &json!({"must": [{"key": "year", "range": {"gte": 2000, "lte": 2002}}]}),
    )?;
    let b = bound(
        &index,
        &json!({"must": [{"key": "year", "match": {"any": [2000, 2001, 2002]}}]}),
    )?;
    let (aa, bb) = (
        Admitted::from(a.admitted_in(&index)?),
        Admitted::from(b.admitted_in(&index)?),
    );
    let mut equivalent = aa == bb;
    for q in &queries {
        let x: Vec<usize> = index
            .search_admitted_with(q, k, ef, &aa, scan_factor, sign_row_cost)?
            .hits
            .iter()
            .map(|h| h.index)
            .collect();
        let y: Vec<usize> = index
            .search_admitted_with(q, k, ef, &bb, scan_factor, sign_row_cost)?
            .hits
            .iter()
            .map(|h| h.index)
            .collect();
        equivalent &= x == y;
    }

    let m = index.manifest();
    let out = json!({
        "documents": n,
        "dimension": index.dimension(),
        "queries": queries.len(),
        "k": k,
        "ef": ef,
        "filter_scan_factor": scan_factor,
        "sign_row_cost": sign_row_cost,
        "m": m.hnsw.m,
        "threads": 1,
        "seconds": started.elapsed().as_secs_f64(),
        "payload": payload_report,
        "unfiltered": unfiltered,
        "equivalent_filters_same_hits": equivalent,
        "sign_codes": index.sign_codes(),
        "cells": cells,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    print_markdown(&out);
    if args.work.is_none() {
        let _ = std::fs::remove_dir_all(&work);
    }
    Ok(())
}

fn print_markdown(out: &Value) {
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    eprintln!(
        "\n| filter | admitted | recall@{k} | min(k, admitted) hits | q/s | × unfiltered | × paired unfiltered | p99 ms | × unfiltered | × paired | strategies | post-filter recall / hits |",
        k = out["k"]
    );
    eprintln!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for c in out["cells"].as_array().into_iter().flatten() {
        eprintln!(
            "| {} | {:.0} | {:.3} | {:.0}% | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {:.3} / {:.1} |",
            c["name"].as_str().unwrap_or(""),
            f(&c["admitted_mean"]),
            f(&c["recall"]),
            100.0 * f(&c["exactly_min_k_admitted"]),
            f(&c["queries_per_second"]),
            f(&c["qps_vs_unfiltered"]),
            f(&c["qps_vs_paired_unfiltered"]),
            f(&c["p99_ms"]),
            f(&c["p99_vs_unfiltered"]),
            f(&c["p99_vs_paired_unfiltered"]),
            c["strategies"],
            f(&c["post_filter_recall"]),
            f(&c["post_filter_hits_mean"]),
        );
    }
    let u = &out["unfiltered"];
    eprintln!(
        "\nunfiltered: {:.0} q/s, p99 {:.2} ms, recall {:.3}; equivalent filters same hits: {}",
        f(&u["queries_per_second"]),
        f(&u["p99_ms"]),
        f(&u["recall"]),
        out["equivalent_filters_same_hits"]
    );
}
