//! `capot align`: fine-tune a copy of a query encoder for noisy queries (CAPOT and related
//! objectives) and write it as a new bundle aligned to the base's document index.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::bail;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use capot::align::{
    self, AdamWParams, AlignOptions, AlignOutcome, AlignProgress, DecayTarget, LossParams, LrDecay,
    LrSchedule, Objective, Schedule, StepRecord, TrainDevice,
};
use capot::noise;

use super::GlobalArgs;

#[derive(Debug, Args)]
pub struct AlignArgs {
    /// Base encoder bundle (must carry weights: model.safetensors + config.json).
    #[arg(long, value_name = "BUNDLE")]
    pub base: PathBuf,
    /// Clean training queries: TSV `qid<TAB>text`, BEIR queries.jsonl, or a dataset directory.
    #[arg(long, value_name = "FILE")]
    pub queries: PathBuf,
    /// Output bundle directory.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Noisy variants `qid<TAB>text` (repeat; e.g. the ten queries.typoN.tsv files).
    #[arg(long = "variants", value_name = "FILE")]
    pub variants: Vec<PathBuf>,
    /// Noise generated on the fly, a fresh variant per epoch (kinds as in `capot noise`).
    #[arg(long, value_name = "KINDS")]
    pub noise: Option<String>,
    /// Objective: capot, multipos, ranking, distill, or a weighted mix like capot=1,distill=0.5.
    #[arg(long, default_value = "capot")]
    pub objective: String,
    /// Add up to N words of the base tokenizer's vocabulary as one-word training queries (noisy
    /// positives from --noise; all of them when N exceeds their number, about 21,000 for MiniLM).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub word_queries: usize,
    /// Frozen document index (needed by the ranking objective).
    #[arg(long, value_name = "DIR")]
    pub index: Option<PathBuf>,
    /// Passes over the queries (default 1).
    #[arg(long, conflicts_with = "steps")]
    pub epochs: Option<usize>,
    /// Optimiser steps (epochs repeat as needed).
    #[arg(long)]
    pub steps: Option<usize>,
    /// Clean queries per step.
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Noisy positives per query and step.
    #[arg(long, default_value_t = 1)]
    pub positives: usize,
    /// Learning rate (AdamW).
    #[arg(long, default_value_t = 5e-5)]
    pub lr: f64,
    /// Steps of linear learning-rate warm-up from 0 to --lr.
    #[arg(long, default_value_t = 0)]
    pub warmup_steps: usize,
    /// Learning rate after the warm-up: constant, or linear decay to 0 at the last step.
    #[arg(long, default_value = "constant")]
    pub lr_schedule: LrDecay,
    /// AdamW decoupled weight decay.
    #[arg(long, default_value_t = 0.0)]
    pub weight_decay: f64,
    /// What --weight-decay pulls towards: zero (AdamW), or base (the base encoder's weights,
    /// L2-SP), which holds back drift on clean queries.
    #[arg(long, default_value = "zero")]
    pub decay_to: DecayTarget,
    /// Tokens per query while training (special tokens included).
    #[arg(long, default_value_t = 28)]
    pub max_length: usize,
    /// CAPOT τ_pos.
    #[arg(long, default_value_t = 1.0)]
    pub tau_pos: f64,
    /// CAPOT τ_neg.
    #[arg(long, default_value_t = 0.1)]
    pub tau_neg: f64,
    /// CAPOT τ_anchor.
    #[arg(long, default_value_t = 2.0)]
    pub tau_anchor: f64,
    /// CAPOT τ_rank.
    #[arg(long, default_value_t = 0.7)]
    pub tau_rank: f64,
    /// Triplet margin ε (squared distances).
    #[arg(long, default_value_t = 0.1)]
    pub margin: f64,
    /// Margin of the CAPOT ranking term.
    #[arg(long, default_value_t = 0.1)]
    pub rank_margin: f64,
    /// Softmax temperature of multipos.
    #[arg(long, default_value_t = 0.05)]
    pub nce_temperature: f64,
    /// Softmax temperature of the ranking objective.
    #[arg(long, default_value_t = 0.05)]
    pub rank_temperature: f64,
    /// Nearest documents per query in the ranking objective.
    #[arg(long, default_value_t = 20)]
    pub rank_k: usize,
    /// Freeze the word-embedding table (faster; typo'd words may then land on untrained pieces).
    #[arg(long)]
    pub freeze_embeddings: bool,
    /// Seed of the batch plan, per-step choices and generated noise.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Training device: cpu, cuda, cuda:N (CUDA needs a build with --features cuda-train).
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Compute threads (default: all cores; sets RAYON_NUM_THREADS).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Checkpoint directory (weights, optimizer moments, step, curve).
    #[arg(long, value_name = "DIR")]
    pub checkpoint_dir: Option<PathBuf>,
    /// Steps between checkpoints.
    #[arg(long, default_value_t = 50)]
    pub checkpoint_every: usize,
    /// Continue from the latest checkpoint in --checkpoint-dir.
    #[arg(long, requires = "checkpoint_dir")]
    pub resume: bool,
    /// Name of the new bundle (default: <base name>-aligned).
    #[arg(long)]
    pub name: Option<String>,
    /// Version of the new bundle.
    #[arg(long = "encoder-version", id = "encoder_version")]
    pub version: Option<String>,
    /// Replace an existing bundle at --out.
    #[arg(long)]
    pub force: bool,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// How progress is shown: `bar` (a progress bar on stderr) or `json` (one JSON event per
    /// line on stderr: anchors, start, step, note, finished; what job runners read).
    #[arg(long, value_enum, default_value_t = ProgressFormat::Bar)]
    pub progress: ProgressFormat,
}

/// Progress output of `capot align`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressFormat {
    Bar,
    Json,
}

/// Progress as JSON lines on stderr, for job runners (`docs/jobs.md`, "Progress events").
struct JsonEvents {
    started: std::time::Instant,
    /// Pairs and seconds of this session's steps, for the running pairs/s.
    totals: std::sync::Mutex<(usize, f64)>,
    /// Anchor progress is reported at most every 5% to keep logs short.
    anchors_reported: std::sync::atomic::AtomicUsize,
}

impl JsonEvents {
    fn emit(&self, value: serde_json::Value) {
        use std::io::Write;
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{value}");
        let _ = err.flush();
    }
}

impl AlignProgress for JsonEvents {
    fn anchors(&self, done: usize, total: usize) {
        use std::sync::atomic::Ordering;
        let last = self.anchors_reported.load(Ordering::Relaxed);
        if done == total || done >= last + total.div_ceil(20) {
            self.anchors_reported.store(done, Ordering::Relaxed);
            self.emit(serde_json::json!({"event": "anchors", "done": done, "total": total}));
        }
    }

    fn start(&self, first_step: usize, total_steps: usize) {
        self.emit(serde_json::json!({
            "event": "start", "first_step": first_step, "total_steps": total_steps,
        }));
    }

    fn step(&self, r: &StepRecord) {
        let (pairs, seconds) = match self.totals.lock() {
            Ok(mut t) => {
                t.0 += r.pairs;
                t.1 += r.seconds;
                *t
            }
            Err(_) => (0, 0.0),
        };
        let rate = if seconds > 0.0 {
            pairs as f64 / seconds
        } else {
            0.0
        };
        let per_step = if seconds > 0.0 && pairs > 0 {
            seconds / (pairs as f64 / r.pairs.max(1) as f64)
        } else {
            r.seconds
        };
        let eta = per_step * r.total_steps.saturating_sub(r.step) as f64;
        self.emit(serde_json::json!({
            "event": "step", "step": r.step, "total_steps": r.total_steps, "epoch": r.epoch,
            "loss": r.loss, "losses": r.parts, "pairs": r.pairs, "sequence": r.sequence,
            "seconds": r.seconds, "forward_seconds": r.forward_seconds,
            "backward_seconds": r.backward_seconds, "update_seconds": r.update_seconds,
            "lr": r.lr,
            "pairs_per_second": rate, "eta_seconds": eta,
            "elapsed_seconds": self.started.elapsed().as_secs_f64(),
        }));
    }

    fn note(&self, message: &str) {
        self.emit(serde_json::json!({"event": "note", "message": message}));
    }
}

struct Bar {
    bar: ProgressBar,
    quiet: bool,
    /// Pairs and seconds of this session's steps, for the running pairs/s.
    totals: std::sync::Mutex<(usize, f64)>,
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

impl AlignProgress for Bar {
    fn anchors(&self, done: usize, total: usize) {
        if self.bar.length() != Some(total as u64) {
            self.bar.set_style(style(
                "anchors {bar:30} {pos}/{len} queries [{elapsed_precise}]",
            ));
            self.bar.set_length(total as u64);
        }
        self.bar.set_position(done as u64);
    }

    fn start(&self, first_step: usize, total_steps: usize) {
        self.bar.set_style(style(
            "{bar:30} {pos}/{len} steps {msg} [{elapsed_precise} < {eta_precise}]",
        ));
        self.bar.set_length(total_steps as u64);
        self.bar.set_position(first_step as u64);
        self.bar.reset_eta();
    }

    fn step(&self, r: &StepRecord) {
        let rate = match self.totals.lock() {
            Ok(mut t) => {
                t.0 += r.pairs;
                t.1 += r.seconds;
                if t.1 > 0.0 {
                    t.0 as f64 / t.1
                } else {
                    0.0
                }
            }
            Err(_) => 0.0,
        };
        self.bar
            .set_message(format!("loss {:.4} | {rate:.1} pairs/s", r.loss));
        self.bar.set_position(r.step as u64);
    }

    fn note(&self, message: &str) {
        if !self.quiet {
            self.bar.println(message);
        }
    }
}

/// Keeps freed tensor memory in the process for the next step instead of returning it to the
/// system: a training step allocates and frees the same large temporaries every time, and with
/// glibc's defaults each one is a fresh `mmap` whose pages fault in again (≈ 20% of a MiniLM
/// step on 2 cores). The price is a resident size that stays at its peak.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tunables; called before training allocates.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_TOP_PAD, 256 << 20);
    }
}

pub fn run(args: AlignArgs, global: &GlobalArgs) -> anyhow::Result<()> {
    keep_freed_memory();
    let objective: Objective = args.objective.parse()?;
    let device: TrainDevice = args.device.parse()?;
    let noise = match &args.noise {
        Some(k) => noise::parse_kinds(k)?,
        None => vec![],
    };
    if let Some(why) = noise.iter().find_map(|k| k.not_for_training()) {
        bail!(why);
    }
    if args.variants.is_empty() && noise.is_empty() {
        bail!("no noisy positives: give --variants FILE (repeatable) and/or --noise KINDS");
    }
    if let Some(n) = args.threads {
        if n == 0 {
            bail!("--threads must be at least 1");
        }
        // candle's CPU kernels read it when they start their thread pool (not started yet).
        std::env::set_var("RAYON_NUM_THREADS", n.to_string());
    }
    let schedule = match (args.epochs, args.steps) {
        (_, Some(s)) => Schedule::Steps(s),
        (Some(e), None) => Schedule::Epochs(e),
        (None, None) => Schedule::Epochs(1),
    };
    let runtime = super::DeviceArgs {
        device: "cpu".into(),
        threads: args.threads,
    }
    .runtime(global)?;
    let mut options = AlignOptions::new(args.base, args.queries, args.out, objective);
    options.variants = args.variants;
    options.noise = noise;
    options.word_queries = args.word_queries;
    options.index = args.index;
    options.schedule = schedule;
    options.batch_size = args.batch_size;
    options.positives = args.positives;
    options.adamw = AdamWParams {
        lr: args.lr,
        weight_decay: args.weight_decay,
        decay_to: args.decay_to,
        ..AdamWParams::default()
    };
    options.lr_schedule = LrSchedule {
        warmup_steps: args.warmup_steps,
        decay: args.lr_schedule,
    };
    options.max_length = args.max_length;
    options.loss = LossParams {
        tau_pos: args.tau_pos,
        tau_neg: args.tau_neg,
        tau_anchor: args.tau_anchor,
        tau_rank: args.tau_rank,
        margin: args.margin,
        rank_margin: args.rank_margin,
        nce_temperature: args.nce_temperature,
        rank_temperature: args.rank_temperature,
        rank_k: args.rank_k,
    };
    options.freeze_embeddings = args.freeze_embeddings;
    options.seed = args.seed;
    options.device = device;
    options.checkpoint_dir = args.checkpoint_dir;
    options.checkpoint_every = args.checkpoint_every;
    options.resume = args.resume;
    options.force = args.force;
    options.name = args.name;
    options.version = args.version;
    options.runtime = runtime;

    // Validate everything before installing handlers or training.
    let prepared = align::prepare(&options)?;
    let s = prepared.data_summary();
    let words = match s.word_queries {
        0 => String::new(),
        n => format!(" + {n} word queries"),
    };
    eprintln!(
        "capot align: {} queries ({} with variant-file positives, {} variant texts){words}, {} steps ({} batches per epoch), objective {}",
        s.queries,
        s.queries_with_variants,
        s.variant_texts,
        prepared.total_steps(),
        prepared.batches_per_epoch(),
        options.objective
    );

    // First SIGINT/SIGTERM: stop at the next step boundary with a checkpoint. Second: exit now.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&stop))?;
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }

    let bar = Bar {
        bar: if args.quiet || args.progress == ProgressFormat::Json {
            ProgressBar::hidden()
        } else {
            ProgressBar::new(0)
        },
        quiet: args.quiet,
        totals: std::sync::Mutex::new((0, 0.0)),
    };
    let events = JsonEvents {
        started: std::time::Instant::now(),
        totals: std::sync::Mutex::new((0, 0.0)),
        anchors_reported: std::sync::atomic::AtomicUsize::new(0),
    };
    let progress: &dyn AlignProgress = match args.progress {
        ProgressFormat::Bar => &bar,
        ProgressFormat::Json => &events,
    };
    let outcome = prepared.train(progress, &stop)?;
    bar.bar.finish_and_clear();
    match outcome {
        AlignOutcome::Finished(report) => {
            if args.progress == ProgressFormat::Json {
                events.emit(serde_json::json!({
                    "event": "finished", "steps": report.steps,
                    "pairs_per_second": report.pairs_per_second,
                    "final_losses": report.final_losses, "anchor_seconds": report.anchor_seconds,
                    "train_seconds": report.train_seconds, "wall_seconds": report.wall_seconds,
                    "out": options.out, "name": report.manifest.name,
                }));
            }
            let losses: Vec<String> = report
                .final_losses
                .iter()
                .map(|(k, v)| format!("{k} {v:.4}"))
                .collect();
            println!(
                "aligned {} → {} ({} steps, {:.1} pairs/s, anchors {:.1} s, training {:.1} s, wall {:.1} s; final losses: {})",
                options.base.display(),
                options.out.display(),
                report.steps,
                report.pairs_per_second,
                report.anchor_seconds,
                report.train_seconds,
                report.wall_seconds,
                losses.join(", ")
            );
            Ok(())
        }
        AlignOutcome::Interrupted {
            step,
            total_steps,
            checkpoint,
        } => {
            eprintln!(
                "error: interrupted after step {step}/{total_steps}; checkpoint in {} (rerun with --checkpoint-dir {} --resume)",
                checkpoint.display(),
                checkpoint.display()
            );
            std::process::exit(130);
        }
    }
}
