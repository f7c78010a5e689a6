//! `capot repair`: spelling correction of queries from an index's vocabulary, on its own; and
//! `capot repair eval`: how well it restores errors people make.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;

use capot::encoder::{Encoder, EncoderManifest};
use capot::index::{Index, IndexManifest};
use capot::noise::human::Misspellings;
use capot::repair::eval::{self, Injection};
use capot::repair::retrieved::retrieved_from;
use capot::repair::{Params, Repairer, RetrievedWords};

use super::{DeviceArgs, GlobalArgs, LexiconArgs};

/// The index's vote: which encoder searches the raw query, or none.
#[derive(Debug, Args)]
pub struct VoteArgs {
    /// Query encoder bundle that fits the index: each query as typed is encoded and searched
    /// first, and the words of the documents it retrieves vote on its words (the index's vote,
    /// `vote_documents` in `--params`, 10 by default; docs/repair.md). Default: the bundle
    /// under $CAPOT_ASSETS/encoders/ (`assets/encoders/`, where scripts/setup imports the
    /// default encoder) that built the index, found by its fingerprint, when there is one.
    #[arg(long, value_name = "DIR", conflicts_with = "no_vote")]
    pub encoder: Option<PathBuf>,
    /// No vote: the speller decides from its lists and the index's vocabulary alone, and no
    /// encoder is looked for or loaded.
    #[arg(long)]
    pub no_vote: bool,
    #[command(flatten)]
    pub device: DeviceArgs,
}

/// What the raw query retrieves, when the vote is on.
struct Voter {
    encoder: Encoder,
    index: Index,
    documents: usize,
    /// The bundle found among the assets, when none was named.
    found: Option<PathBuf>,
}

impl Voter {
    /// The vote `args` ask for: the encoder named, else the one that built the index among the
    /// assets' bundles (no vote where there is none, or where it cannot be loaded: a warning
    /// says why), else none.
    fn new(
        args: &VoteArgs,
        index: &std::path::Path,
        params: &Params,
        global: &GlobalArgs,
    ) -> anyhow::Result<Option<Voter>> {
        if let Some(bundle) = &args.encoder {
            anyhow::ensure!(
                params.vote_documents > 0,
                "--encoder: the index's vote is off (vote_documents 0 in --params)"
            );
            return Self::load(args, index, bundle, params, global).map(Some);
        }
        if args.no_vote || params.vote_documents == 0 {
            return Ok(None);
        }
        let Some(bundle) = index_encoder_in(&super::assets_dir().join("encoders"), index) else {
            return Ok(None);
        };
        match Self::load(args, index, &bundle, params, global) {
            Ok(voter) => Ok(Some(Voter {
                found: Some(bundle),
                ..voter
            })),
            Err(e) => {
                eprintln!("repair: no vote: {e:#}");
                Ok(None)
            }
        }
    }

    fn load(
        args: &VoteArgs,
        index: &std::path::Path,
        bundle: &std::path::Path,
        params: &Params,
        global: &GlobalArgs,
    ) -> anyhow::Result<Voter> {
        let index =
            Index::load(index).with_context(|| format!("cannot load index {}", index.display()))?;
        let encoder = Encoder::load(bundle, &args.device.runtime(global)?)
            .with_context(|| format!("cannot load encoder {}", bundle.display()))?;
        capot::server::check_compatible(
            encoder.manifest(),
            &index.manifest().encoder_fingerprint,
            index.manifest().dimension,
        )
        .map_err(|r| anyhow::anyhow!("{}: {r}", bundle.display()))?;
        Ok(Voter {
            encoder,
            index,
            documents: params.vote_documents,
            found: None,
        })
    }

    /// Says on stderr which bundle votes where it was found rather than named: the user did
    /// not ask for it.
    fn announce(&self) {
        if let Some(bundle) = &self.found {
            eprintln!(
                "repair: the index's vote, with {} ({}; --no-vote decides without it)",
                self.encoder.manifest().label(),
                bundle.display()
            );
        }
    }

    /// The words of the documents `text` retrieves; `None` (no vote) where that fails, with
    /// the reason on stderr.
    fn retrieve(&self, text: &str) -> Option<RetrievedWords> {
        let found = self
            .encoder
            .encode(&[text])
            .map_err(|e| e.to_string())
            .and_then(|v| {
                let v = v.into_iter().next().unwrap_or_default();
                let ef = self.index.default_ef().max(self.documents);
                retrieved_from(&self.index, &v, self.documents, ef).map_err(|e| e.to_string())
            });
        match found {
            Ok(words) => Some(words),
            Err(e) => {
                eprintln!("repair: no vote for {text:?}: {e}");
                None
            }
        }
    }
}

/// The bundle under `encoders` (one directory per bundle) whose vectors built the index in
/// `index`: its own document encoder, by fingerprint; the first by name where several are.
fn index_encoder_in(encoders: &std::path::Path, index: &std::path::Path) -> Option<PathBuf> {
    let built_by = IndexManifest::read(index).ok()?.encoder_fingerprint;
    let mut bundles: Vec<PathBuf> = std::fs::read_dir(encoders)
        .ok()?
        .filter_map(|e| Some(e.ok()?.path()))
        .collect();
    bundles.sort();
    bundles
        .into_iter()
        .find(|b| EncoderManifest::read(b).is_ok_and(|m| m.fingerprint == built_by))
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct RepairArgs {
    #[command(subcommand)]
    pub command: Option<RepairCommand>,
    /// Index whose vocabulary and word counts the speller uses.
    #[arg(long, value_name = "DIR", required = true)]
    pub index: Option<PathBuf>,
    /// Queries file (TSV `qid<TAB>text` or BEIR queries.jsonl); default: stdin.
    #[arg(long, value_name = "FILE")]
    pub queries: Option<PathBuf>,
    /// Output: `json` lines with the edits and a confidence, or `tsv` (`qid<TAB>text`, ready
    /// for `capot eval --variants`).
    #[arg(long, value_enum, default_value_t = OutputFormat::Json)]
    pub format: OutputFormat,
    /// Speller settings other than the defaults, as JSON (e.g. `{"real_word_cost": 6}`).
    #[arg(long, value_name = "JSON")]
    pub params: Option<String>,
    /// Add `explain` to each JSON line: every word with what the model knows of it, the readings
    /// the decoder weighed with their costs, and which it took (why a word was or was not
    /// corrected).
    #[arg(long)]
    pub explain: bool,
    #[command(flatten)]
    pub lexicon: LexiconArgs,
    #[command(flatten)]
    pub vote: VoteArgs,
}

/// Speller settings from `flag` (`--params`), the defaults for any not named.
pub(crate) fn parse_params(p: Option<&str>, flag: &str) -> anyhow::Result<Params> {
    match p {
        Some(p) => serde_json::from_str(p)
            .with_context(|| format!("{flag} is not a valid settings object")),
        None => Ok(Params::default()),
    }
}

#[derive(Debug, Subcommand)]
pub enum RepairCommand {
    /// Inject one error per clean query (a real misspelling from a list, a real-word error, or a
    /// lost or stray space), repair, and report what was restored, what else changed, and how
    /// many clean queries changed.
    Eval(RepairEvalArgs),
}

#[derive(Debug, Args)]
pub struct RepairEvalArgs {
    /// Index whose vocabulary and word counts the speller uses.
    #[arg(long, value_name = "DIR")]
    pub index: PathBuf,
    /// Clean queries (TSV `qid<TAB>text` or BEIR queries.jsonl).
    #[arg(long, value_name = "FILE")]
    pub queries: PathBuf,
    /// Misspelling lists (`right: wrong1 wrong2 ...`, one word a line); each is reported on its
    /// own. Repeatable.
    #[arg(long, value_name = "FILE")]
    pub misspellings: Vec<PathBuf>,
    /// Also inject real-word errors (a known word one letter from the meant one).
    #[arg(long)]
    pub realword: bool,
    /// Also inject word-boundary errors (two words joined, or one of 6+ letters split).
    #[arg(long)]
    pub boundary: bool,
    /// Seed of the injection.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Speller settings to measure, as JSON (e.g. `{"real_word_cost": 6}`); unnamed ones keep
    /// their defaults.
    #[arg(long, value_name = "JSON")]
    pub params: Option<String>,
    /// Write the whole report, with misses and every clean query changed, to this JSON file.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Misses and collateral changes `--out` keeps per set of errors, the first ones (the
    /// counts cover every query); a number above the queries' keeps them all.
    #[arg(long, value_name = "N", default_value_t = eval::EXAMPLES)]
    pub examples: usize,
    /// Also measure meaning with this encoder bundle (the base encoder, as TREC DL-typo does):
    /// per set of errors, the mean cosine between each clean query's encoding and the typed
    /// one's, and the repaired one's. Runs on `--device`; need not fit the index.
    #[arg(long, value_name = "DIR")]
    pub meaning: Option<PathBuf>,
    #[command(flatten)]
    pub lexicon: LexiconArgs,
    #[command(flatten)]
    pub vote: VoteArgs,
}

/// Output formats of `capot repair`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OutputFormat {
    Json,
    Tsv,
}

fn load_repairer(
    index: &std::path::Path,
    lexicon: &LexiconArgs,
    params: Params,
) -> anyhow::Result<Repairer> {
    let vocab = Index::load_vocab(index)
        .with_context(|| format!("cannot read the vocabulary of {}", index.display()))?
        .with_context(|| {
            format!(
                "index {} has no vocabulary; add one with `capot index vocab {0}`",
                index.display()
            )
        })?;
    let lexicon = lexicon.load()?;
    let repairer = Repairer::with_params(Arc::new(vocab), lexicon.map(Arc::new), params);
    for m in repairer.model_info().missing {
        eprintln!("repair: {m}");
    }
    Ok(repairer)
}

pub fn run(args: RepairArgs, global: &GlobalArgs) -> anyhow::Result<()> {
    if let Some(RepairCommand::Eval(e)) = args.command {
        return run_eval(e, global);
    }
    let index = args.index.context("--index is required")?;
    anyhow::ensure!(
        !(args.explain && matches!(args.format, OutputFormat::Tsv)),
        "--explain adds to the JSON lines: use it with --format json"
    );
    let repairer = load_repairer(
        &index,
        &args.lexicon,
        parse_params(args.params.as_deref(), "--params")?,
    )?;
    let voter = Voter::new(&args.vote, &index, repairer.params(), global)?;
    let queries = super::read_queries_arg(args.queries.as_deref())?;
    voter.iter().for_each(Voter::announce);
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut changed = 0usize;
    for q in queries.queries() {
        let retrieved = voter.as_ref().and_then(|v| v.retrieve(&q.text));
        let r = repairer.repair_with(&q.text, &|_| false, retrieved.as_ref());
        changed += usize::from(r.changed());
        match args.format {
            OutputFormat::Json => {
                let mut line = json!({
                    "id": q.id,
                    "text": q.text,
                    "repaired": r.text,
                    "changed": r.changed(),
                    "confidence": r.confidence(),
                    "edits": r.edits,
                });
                if args.explain {
                    line["explain"] =
                        serde_json::to_value(repairer.explain_with(&q.text, retrieved.as_ref()))?;
                }
                writeln!(out, "{line}")?;
            }
            OutputFormat::Tsv => {
                writeln!(out, "{}\t{}", q.id, r.text.replace(['\t', '\n', '\r'], " "))?;
            }
        }
    }
    out.flush()?;
    eprintln!(
        "repair: changed {changed} of {} queries{}",
        queries.len(),
        if repairer.lexicon().is_none() {
            " (no lexicon: the corpus alone decided what is a word)"
        } else {
            ""
        }
    );
    Ok(())
}

fn run_eval(args: RepairEvalArgs, global: &GlobalArgs) -> anyhow::Result<()> {
    let params = parse_params(args.params.as_deref(), "--params")?;
    anyhow::ensure!(
        !args.misspellings.is_empty() || args.realword || args.boundary,
        "nothing to inject: give --misspellings FILE, --realword or --boundary"
    );
    let lists = args
        .misspellings
        .iter()
        .map(|p| Misspellings::load(p).map(|m| (p.clone(), m)))
        .collect::<Result<Vec<_>, _>>()?;
    let repairer = load_repairer(&args.index, &args.lexicon, params)?;
    let voter = Voter::new(&args.vote, &args.index, repairer.params(), global)?;
    let retrieve = |text: &str| voter.as_ref().and_then(|v| v.retrieve(text));
    let meaning = args
        .meaning
        .as_ref()
        .map(|bundle| {
            Encoder::load(bundle, &args.vote.device.runtime(global)?)
                .with_context(|| format!("--meaning: cannot load encoder {}", bundle.display()))
        })
        .transpose()?;
    let queries = super::read_queries_arg(Some(&args.queries))?;
    voter.iter().for_each(Voter::announce);
    let queries: Vec<(String, String)> = queries
        .queries()
        .iter()
        .map(|q| (q.id.clone(), q.text.clone()))
        .collect();
    let bar = indicatif::ProgressBar::new(
        (lists.len() + 1 + usize::from(args.realword) + usize::from(args.boundary)) as u64,
    )
    .with_style(indicatif::ProgressStyle::with_template(
        "repair eval {bar:30} {pos}/{len} {msg}",
    )?);
    let mut injected = Vec::new();
    for (path, list) in &lists {
        bar.set_message(format!("misspellings {}", path.display()));
        let r = eval::injected(
            &repairer,
            &queries,
            Injection::Misspell,
            Some(list),
            args.seed,
            &retrieve,
            args.examples,
        );
        injected.push((format!("misspell {}", path.display()), r));
        bar.inc(1);
    }
    let others = [
        (args.realword, Injection::RealWord, "real-word errors"),
        (args.boundary, Injection::Boundary, "word boundaries"),
    ];
    for (_, injection, what) in others.into_iter().filter(|o| o.0) {
        bar.set_message(what);
        let r = eval::injected(
            &repairer,
            &queries,
            injection,
            None,
            args.seed,
            &retrieve,
            args.examples,
        );
        injected.push((injection.as_str().to_string(), r));
        bar.inc(1);
    }
    bar.set_message("clean queries");
    let clean = eval::clean(&repairer, &queries, &retrieve);
    if let Some(encoder) = &meaning {
        bar.set_message("meaning");
        let embed = |texts: &[&str]| encoder.encode(texts).map_err(anyhow::Error::from);
        for (_, r) in &mut injected {
            r.meaning = Some(eval::meaning(&r.all, &embed)?);
        }
    }
    bar.finish_and_clear();
    let measured = meaning.is_some();
    let (head, rule) = if measured {
        (" meaning (cosine to clean): typed → repaired |", "---|")
    } else {
        ("", "")
    };
    println!("| errors | queries | restored | other words changed |{head}");
    println!("|---|---|---|---|{rule}");
    for (name, r) in &injected {
        let cosine = r
            .meaning
            .map(|m| format!(" {:.3} → {:.3} |", m.typed, m.repaired))
            .unwrap_or_default();
        println!(
            "| {name} | {} | {:.1}% ({}) | {:.2}% ({} of {}) |{cosine}",
            r.queries,
            100.0 * r.restored_rate,
            r.restored,
            100.0 * r.other_changed_rate,
            r.other_changed,
            r.other_words
        );
    }
    println!(
        "| none (clean) | {} | — | {:.2}% of queries changed ({}) |{}",
        clean.queries,
        100.0 * clean.changed_rate,
        clean.changed,
        if measured { " — |" } else { "" }
    );
    if let Some(out) = &args.out {
        let report = json!({
            "index": args.index,
            "queries": args.queries,
            "seed": args.seed,
            "params": repairer.params(),
            "vote_encoder": voter.as_ref().map(|v| v.encoder.manifest().label()),
            "injected": injected.iter().map(|(n, r)| json!({"name": n, "report": r})).collect::<Vec<_>>(),
            "clean": clean,
        });
        std::fs::write(out, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("cannot write {}", out.display()))?;
    }
    Ok(())
}
