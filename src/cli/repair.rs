//! `capot repair`: spelling correction of queries from an index's vocabulary, on its own.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, ValueEnum};
use serde_json::json;

use capot::index::Index;
use capot::repair::Repairer;

use super::LexiconArgs;

#[derive(Debug, Args)]
pub struct RepairArgs {
    /// Index whose vocabulary names the words queries are corrected towards.
    #[arg(long, value_name = "DIR")]
    pub index: PathBuf,
    /// Queries file (TSV `qid<TAB>text` or BEIR queries.jsonl); default: stdin.
    #[arg(long, value_name = "FILE")]
    pub queries: Option<PathBuf>,
    /// Output: `json` lines with the edits and a confidence, or `tsv` (`qid<TAB>text`, ready
    /// for `capot eval --variants`).
    #[arg(long, value_enum, default_value_t = OutputFormat::Json)]
    pub format: OutputFormat,
    #[command(flatten)]
    pub lexicon: LexiconArgs,
}

/// Output formats of `capot repair`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OutputFormat {
    Json,
    Tsv,
}

pub fn run(args: RepairArgs) -> anyhow::Result<()> {
    let vocab = Index::load_vocab(&args.index)
        .with_context(|| format!("cannot read the vocabulary of {}", args.index.display()))?
        .with_context(|| {
            format!(
                "index {} has no vocabulary; add one with `capot index vocab {0}`",
                args.index.display()
            )
        })?;
    let lexicon = args.lexicon.load()?;
    let repairer = Repairer::new(Arc::new(vocab), lexicon.map(Arc::new));
    let queries = super::read_queries_arg(args.queries.as_deref())?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut changed = 0usize;
    for q in queries.queries() {
        let r = repairer.repair(&q.text);
        changed += usize::from(r.changed());
        match args.format {
            OutputFormat::Json => {
                let line = json!({
                    "id": q.id,
                    "text": q.text,
                    "repaired": r.text,
                    "changed": r.changed(),
                    "confidence": r.confidence(),
                    "edits": r.edits,
                });
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
