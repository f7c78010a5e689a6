//! The `capot` command line: argument definitions and dispatch. Each subcommand lives in its
//! own module and returns `anyhow::Result`; `main` prints one line and sets the exit code.

mod align;
mod bench;
mod bench_filter;
mod documents;
mod encode;
mod encoder_cmd;
mod eval;
mod index;
mod index_store;
mod noise;
mod repair;
mod serve;
mod serve_admin;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use capot::encoder::{Device, RuntimeOptions};

/// capot — noise-robust dense retrieval.
#[derive(Debug, Parser)]
#[command(name = "capot", version, about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every subcommand accepts.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Path to libonnxruntime.so (default: $ORT_DYLIB_PATH, then onnxruntime/lib/ in
    /// $CAPOT_ASSETS, then in assets/).
    #[arg(long, global = true, env = "CAPOT_ORT_LIBRARY", value_name = "FILE")]
    pub ort_library: Option<PathBuf>,
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "CAPOT_LOG_FORMAT")]
    pub log_format: LogFormat,
    /// Log filter (tracing's EnvFilter syntax, e.g. `info` or `capot=debug`).
    #[arg(long, global = true, default_value = "warn", env = "CAPOT_LOG")]
    pub log: String,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Queries from `--queries FILE`, or from standard input without one (TSV `qid<TAB>text` or
/// JSON lines); an empty set is an error.
pub fn read_queries_arg(path: Option<&std::path::Path>) -> anyhow::Result<capot::dataset::Queries> {
    use capot::dataset::{self, QueryFormat, ReadMode};
    let (queries, report) = match path {
        Some(p) => dataset::read_queries(p, ReadMode::Strict)?,
        None => dataset::read_queries_from(
            std::io::stdin().lock(),
            std::path::Path::new("<stdin>"),
            QueryFormat::Auto,
            ReadMode::Strict,
        )?,
    };
    if queries.is_empty() {
        anyhow::bail!("no queries in {}", report.path.display());
    }
    Ok(queries)
}

/// The assets directory `scripts/setup` fills (ONNX Runtime, the lexicon, the default encoder
/// bundle): `$CAPOT_ASSETS`, else `assets` in the working directory.
pub fn assets_dir() -> PathBuf {
    std::env::var_os("CAPOT_ASSETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("assets"))
}

/// The language prior of query repair, shared by `serve`, `repair` and `eval`.
#[derive(Debug, Args, Clone, Default)]
pub struct LexiconArgs {
    /// General-language lists of query repair's language model, told apart by their fields:
    /// `word`, `word count` (word lists) or `word word count` (word-pair lists), or by a first
    /// line `#usage` (how often strings are written, misspellings included), `#homophones`
    /// (words that sound the same, a line each), `#verbs` (`lemma past participle`, a verb a
    /// line) or `#nouns` (`singular plural`, a noun a line); repeat for several [default:
    /// SymSpell's English word and word-pair lists, wordfreq's usage list, the CMU Pronouncing
    /// Dictionary's homophones and AGID's verbs and nouns under
    /// $CAPOT_ASSETS/lexicon/, fetched by scripts/setup, when they exist].
    #[arg(
        long = "lexicon",
        env = "CAPOT_LEXICON",
        value_delimiter = ',',
        value_name = "FILE"
    )]
    pub lexicons: Vec<PathBuf>,
    /// Use no language prior: only the corpus decides what is a word (`auto` repair then skips).
    #[arg(long, conflicts_with = "lexicons")]
    pub no_lexicon: bool,
}

impl LexiconArgs {
    /// The word lists to load: the ones named, else the default when it exists (a warning
    /// when it does not), else none.
    pub fn files(&self) -> Vec<PathBuf> {
        if self.no_lexicon {
            return Vec::new();
        }
        if !self.lexicons.is_empty() {
            return self.lexicons.clone();
        }
        let assets = assets_dir();
        let default = capot::repair::lexicon::default_path(&assets);
        if default.is_file() {
            capot::repair::lexicon::default_paths(&assets)
        } else {
            tracing::warn!(
                "no lexicon at {} (scripts/setup fetches it): query repair runs without a \
                 language prior, and `auto` repair is skipped",
                default.display()
            );
            Vec::new()
        }
    }

    /// Loads the word lists; `None` when there are none.
    pub fn load(&self) -> anyhow::Result<Option<capot::repair::Lexicon>> {
        let files = self.files();
        if files.is_empty() {
            return Ok(None);
        }
        Ok(Some(capot::repair::Lexicon::load(&files)?))
    }
}

/// Installs what the human-error noise kinds draw from, when `kinds` use them: the misspelling
/// lists (`misspell`) and the lexicon's real words one slip apart (`realword`).
pub fn install_human_noise(
    kinds: &[capot::noise::NoiseKind],
    misspellings: &[PathBuf],
    lexicon: &LexiconArgs,
) -> anyhow::Result<()> {
    use capot::noise::{human, NoiseError};
    if kinds.iter().any(|k| k.needs_misspellings()) {
        anyhow::ensure!(!misspellings.is_empty(), NoiseError::NoMisspellings);
        let mut list = human::Misspellings::default();
        for path in misspellings {
            list.extend(human::Misspellings::load(path)?);
        }
        human::install_misspellings(list);
    }
    if kinds.iter().any(|k| k.needs_lexicon()) {
        let lexicon = lexicon.load()?.ok_or(NoiseError::NoLexicon)?;
        let real_words = capot::repair::RealWords::new(std::sync::Arc::new(lexicon));
        human::install_real_words(Box::new(move |w| real_words.of(w)));
    }
    Ok(())
}

/// Inference settings shared by commands that run an encoder.
#[derive(Debug, Args, Clone)]
pub struct DeviceArgs {
    /// Execution device: cpu, cuda, cuda:N, or auto (CUDA if usable, else CPU with a warning).
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// ONNX Runtime threads per inference (default: all cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
}

impl DeviceArgs {
    pub fn runtime(&self, global: &GlobalArgs) -> anyhow::Result<RuntimeOptions> {
        let device: Device = self.device.parse()?;
        Ok(RuntimeOptions {
            library: global.ort_library.clone(),
            device,
            intra_threads: self.threads,
        })
    }
}

/// Resolves `--encoder-workers N|auto` (absent: 1). `auto` is one session per core (at most
/// 16) and, unless `--threads` was given, one thread each; it logs what it picked.
pub fn encoder_workers(spec: Option<&str>, device: &mut DeviceArgs) -> anyhow::Result<usize> {
    match spec {
        None => Ok(1),
        Some("auto") => {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let workers = cores.clamp(1, 16);
            if device.threads.is_none() {
                device.threads = Some((cores / workers).max(1));
            }
            tracing::info!(
                cores,
                workers,
                threads = device.threads,
                "--encoder-workers auto: one session per core"
            );
            Ok(workers)
        }
        Some(n) => match n.parse::<usize>() {
            Ok(w) if (1..=64).contains(&w) => Ok(w),
            _ => anyhow::bail!("--encoder-workers must be `auto` or a number in 1..=64, got {n:?}"),
        },
    }
}

/// Checks `--filter-scan-factor`: the filter planner's scan/walk crossover, a finite number ≥ 0.
pub fn filter_scan_factor(v: f64) -> anyhow::Result<f64> {
    if !(v.is_finite() && v >= 0.0) {
        anyhow::bail!("--filter-scan-factor must be a finite number >= 0, got {v}");
    }
    Ok(v)
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Make and inspect encoder bundles.
    #[command(subcommand)]
    Encoder(encoder_cmd::EncoderCommand),
    /// Encode JSON lines `{"text": ...}` from stdin into `{"embedding": [...]}` lines on stdout.
    Encode(encode::EncodeArgs),
    /// Build and inspect frozen document indexes.
    #[command(subcommand)]
    Index(index::IndexCommand),
    /// Run the search service.
    Serve(Box<serve::ServeArgs>),
    /// Add, replace or delete documents of a running server's live corpus (JSON lines).
    #[command(subcommand)]
    Documents(documents::DocumentsCommand),
    /// Retrieval quality per encoder and noise condition (locally or against a live service).
    Eval(eval::EvalArgs),
    /// Write seeded noisy variants of queries (TSV on stdout).
    Noise(noise::NoiseArgs),
    /// Correct misspelt query words from an index's vocabulary (JSON lines or TSV on stdout).
    Repair(repair::RepairArgs),
    /// Fine-tune a query encoder for noisy queries (CAPOT), anchored to the frozen index.
    Align(Box<align::AlignArgs>),
    /// Measure performance (see docs/benchmarks.md).
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Encoder(cmd) => encoder_cmd::run(cmd, &cli.global),
        Command::Encode(args) => encode::run(args, &cli.global),
        Command::Noise(args) => noise::run(args),
        Command::Repair(args) => repair::run(args, &cli.global),
        Command::Align(args) => align::run(*args, &cli.global),
        Command::Index(cmd) => index::run(cmd, &cli.global),
        Command::Serve(args) => serve::run(*args, &cli.global),
        Command::Documents(cmd) => documents::run(cmd),
        Command::Eval(args) => eval::run(args, &cli.global),
        Command::Bench(cmd) => bench::run(cmd, &cli.global),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn command_line_definition_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
