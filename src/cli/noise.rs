//! `capot noise`: seeded noisy variants of queries.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use capot::noise::{self, NoiseKind};

#[derive(Debug, Args)]
pub struct NoiseArgs {
    /// Noise kinds, comma-separated: cd, rcs, kcs, typo, reorder, determiner, stopwords, stem,
    /// lemma, synonym, punct, boundary, misspell (with --misspellings), realword (from the
    /// lexicon); `typos` = cd,rcs,kcs.
    #[arg(long = "kind", value_name = "KINDS")]
    pub kinds: String,
    /// Seed; the same seed gives byte-identical output.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Variants per query and kind.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub variants: u32,
    /// Queries file (TSV `qid<TAB>text` or BEIR queries.jsonl); default: stdin.
    #[arg(long, value_name = "FILE")]
    pub queries: Option<PathBuf>,
    /// Also write one plain `qid<TAB>text` file per kind and variant here
    /// (`<kind>-<variant>.tsv`), ready for `capot eval --variants` and `capot align --variants`.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Lists of real misspellings (`right: wrong1 wrong2 ...` lines) that the `misspell` kind
    /// draws from; repeat for several.
    #[arg(long, value_name = "FILE")]
    pub misspellings: Vec<PathBuf>,
    #[command(flatten)]
    pub lexicon: super::LexiconArgs,
}

/// Header of the TSV written on stdout.
pub const HEADER: &str = "query-id\tkind\tvariant\tapplied\ttext";

pub fn run(args: NoiseArgs) -> anyhow::Result<()> {
    let kinds = noise::parse_kinds(&args.kinds)?;
    if kinds.iter().any(|k| k.needs_wordnet()) {
        noise::check_wordnet()?;
    }
    super::install_human_noise(&kinds, &args.misspellings, &args.lexicon)?;
    let queries = super::read_queries_arg(args.queries.as_deref())?;
    let stdout = std::io::stdout().lock();
    let mut out = BufWriter::new(stdout);
    writeln!(out, "{HEADER}")?;
    let mut files = Vec::new();
    if let Some(dir) = &args.out_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        for kind in &kinds {
            for v in 0..args.variants {
                let path = dir.join(format!("{kind}-{v}.tsv"));
                let f = std::fs::File::create(&path)
                    .with_context(|| format!("cannot create {}", path.display()))?;
                files.push(((*kind, v), BufWriter::new(f)));
            }
        }
    }
    let mut applied = vec![0usize; kinds.len()];
    for q in queries.queries() {
        for (ki, kind) in kinds.iter().enumerate() {
            for v in 0..args.variants {
                let outcome = noise::apply(*kind, args.seed, &q.id, v, &q.text)?;
                let text = outcome.text.replace(['\t', '\n', '\r'], " ");
                applied[ki] += usize::from(outcome.applied);
                writeln!(out, "{}\t{kind}\t{v}\t{}\t{text}", q.id, outcome.applied)?;
                if let Some((_, f)) = files.iter_mut().find(|((k, n), _)| k == kind && *n == v) {
                    writeln!(f, "{}\t{text}", q.id)?;
                }
            }
        }
    }
    out.flush()?;
    for (_, mut f) in files {
        f.flush()?;
    }
    let total = queries.len() * args.variants as usize;
    for (kind, n) in kinds.iter().zip(applied) {
        eprintln!(
            "{kind}: changed {n} of {total} variants{}",
            unchanged_note(*kind, total - n)
        );
    }
    Ok(())
}

fn unchanged_note(kind: NoiseKind, unchanged: usize) -> String {
    if unchanged == 0 {
        String::new()
    } else {
        format!(" ({unchanged} left unchanged: {kind} did not apply to them)")
    }
}
