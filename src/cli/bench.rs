//! `capot bench encode`: encoding throughput and latency of a bundle, for comparison with
//! other runtimes on the same ONNX file (see bench/encode.sh).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, Subcommand};

use capot::dataset::{self, ReadMode};
use capot::encoder::Encoder;

use super::{DeviceArgs, GlobalArgs};

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Texts per second and per-call latency of `Encoder::encode` at given batch sizes.
    Encode(EncodeBenchArgs),
}

#[derive(Debug, Args)]
pub struct EncodeBenchArgs {
    #[arg(long, value_name = "DIR")]
    pub encoder: PathBuf,
    /// Queries to encode (TSV or queries.jsonl); cycled through.
    #[arg(long, value_name = "FILE")]
    pub queries: PathBuf,
    /// Batch sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,32")]
    pub batch_sizes: Vec<usize>,
    /// Seconds of measurement per batch size (after one second of warm-up).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    #[command(flatten)]
    pub device: DeviceArgs,
}

pub fn run(cmd: BenchCommand, global: &GlobalArgs) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Encode(args) => encode(args, global),
    }
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
    let runtime = args.device.runtime(global)?;
    let encoder = Encoder::load(&args.encoder, &runtime).context("cannot load encoder")?;
    let (queries, _) = dataset::read_queries(&args.queries, ReadMode::Strict)?;
    let texts: Vec<String> = queries.queries().iter().map(|q| q.text.clone()).collect();
    anyhow::ensure!(
        !texts.is_empty(),
        "no queries in {}",
        args.queries.display()
    );
    let mut results = Vec::new();
    for &batch in &args.batch_sizes {
        anyhow::ensure!(batch >= 1, "batch sizes must be at least 1");
        let mut at = 0usize;
        let mut next_batch = || {
            let b: Vec<&str> = (0..batch)
                .map(|i| texts[(at + i) % texts.len()].as_str())
                .collect();
            at = (at + batch) % texts.len();
            b
        };
        let warm_until = Instant::now() + Duration::from_secs(1);
        while Instant::now() < warm_until {
            encoder.encode(&next_batch())?;
        }
        let mut latencies = Vec::new();
        let started = Instant::now();
        let budget = Duration::from_secs_f64(args.seconds);
        while started.elapsed() < budget {
            let b = next_batch();
            let t = Instant::now();
            encoder.encode(&b)?;
            latencies.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let elapsed = started.elapsed().as_secs_f64();
        let calls = latencies.len();
        latencies.sort_by(f64::total_cmp);
        results.push(serde_json::json!({
            "batch_size": batch,
            "calls": calls,
            "texts_per_second": (calls * batch) as f64 / elapsed,
            "latency_ms_p50": percentile(&latencies, 50.0),
            "latency_ms_p99": percentile(&latencies, 99.0),
        }));
    }
    let out = serde_json::json!({
        "runtime": "capot",
        "encoder": encoder.manifest().label(),
        "provider": encoder.provider().to_string(),
        "threads": args.device.threads,
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
}
