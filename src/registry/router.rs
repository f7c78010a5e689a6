//! The query router: when a request names no encoder, pick an alias per query from cheap
//! signals of noise.
//!
//! When the index has a vocabulary, the signal is query repair's: a query with a plain word of
//! four or more letters that is neither in the corpus nor in the language prior is noisy.
//! Without one, it is the share of a query's words that the default encoder's tokenizer
//! shatters into three or more word pieces (two for short words), or maps to the unknown token:
//! typos turn common words into rare letter sequences, which WordPiece splits into many short
//! pieces. A noisy query goes to the noise alias (`typo`) when it exists, else to `default`.

use prometheus::IntCounterVec;
use tokenizers::Tokenizer;

use super::{LoadedEncoder, Snapshot, DEFAULT_ALIAS};
use crate::repair::Repairer;

/// Router kinds `--router` accepts.
pub const ROUTER_KINDS: &[&str] = &["typo"];

/// Default share of shattered words above which a query counts as noisy.
pub const DEFAULT_THRESHOLD: f64 = 0.15;

/// Words with at least this many word pieces count as shattered.
pub const SHATTER_PIECES: usize = 3;

/// Words of at most this many characters count as shattered from two pieces on: short common
/// words are whole tokens of a WordPiece vocabulary, short misspellings (`teh`, `whta`) are not.
pub const SHORT_WORD_CHARS: usize = 7;

/// What the router does.
#[derive(Debug, Clone, PartialEq)]
pub struct RouterConfig {
    /// The alias noisy queries go to (`typo` for `--router typo`).
    pub alias: String,
    /// Share of shattered words (0..=1) above which a query is noisy.
    pub threshold: f64,
}

impl RouterConfig {
    /// The router named `kind` (see [`ROUTER_KINDS`]).
    pub fn from_kind(kind: &str, threshold: Option<f64>) -> Result<Self, String> {
        if !ROUTER_KINDS.contains(&kind) {
            return Err(format!(
                "unknown router {kind:?} (known: {})",
                ROUTER_KINDS.join(", ")
            ));
        }
        let threshold = threshold.unwrap_or(DEFAULT_THRESHOLD);
        if !(0.0..=1.0).contains(&threshold) {
            return Err(format!(
                "router threshold must be in 0..=1, got {threshold}"
            ));
        }
        Ok(RouterConfig {
            alias: kind.to_string(),
            threshold,
        })
    }
}

/// The router of a running service; counts its choices.
pub struct QueryRouter {
    /// Its settings.
    pub config: RouterConfig,
    choices: Option<IntCounterVec>,
}

impl QueryRouter {
    /// A router that counts its choices in `choices` (by alias) when given.
    pub fn new(config: RouterConfig, choices: Option<IntCounterVec>) -> Self {
        QueryRouter { config, choices }
    }

    /// The alias for `text` under `snapshot`: the noise alias when the text looks noisy and the
    /// alias exists, else `default`. `repairer` (the index's vocabulary) gives the signal when
    /// there is one; a word `also_known` knows (a live document's) is no sign of noise.
    pub fn choose(
        &self,
        snapshot: &Snapshot,
        text: &str,
        repairer: Option<&Repairer>,
        also_known: &dyn Fn(&str) -> bool,
    ) -> String {
        let noisy = |default: &LoadedEncoder| match repairer {
            Some(r) => r.has_unknown_word_knowing(text, also_known),
            None => {
                noise_score(default.encoder().tokenizer().inner(), text) > self.config.threshold
            }
        };
        let alias = match snapshot.resolve(DEFAULT_ALIAS) {
            Ok(default) if snapshot.aliases.contains_key(&self.config.alias) && noisy(&default) => {
                self.config.alias.clone()
            }
            _ => DEFAULT_ALIAS.to_string(),
        };
        if let Some(c) = &self.choices {
            c.with_label_values(&[alias.as_str()]).inc();
        }
        alias
    }
}

/// Share (0..=1) of the words of `text` that `tokenizer` splits into [`SHATTER_PIECES`] or more
/// pieces (two or more for words of up to [`SHORT_WORD_CHARS`] characters) or maps to its
/// unknown token. Words are whitespace-separated, trimmed of
/// punctuation; a text without words scores 0.
pub fn noise_score(tokenizer: &Tokenizer, text: &str) -> f64 {
    let unk = tokenizer.token_to_id("[UNK]");
    let mut words = 0usize;
    let mut shattered = 0usize;
    for raw in text.split_whitespace() {
        let word = raw.trim_matches(|c: char| !c.is_alphanumeric());
        if word.is_empty() {
            continue;
        }
        words += 1;
        let Ok(enc) = tokenizer.encode(word, false) else {
            shattered += 1;
            continue;
        };
        let pieces = enc.get_attention_mask().iter().filter(|&&m| m == 1).count();
        let has_unk = unk.is_some_and(|u| enc.get_ids().contains(&u));
        let short = word.chars().count() <= SHORT_WORD_CHARS;
        if pieces >= SHATTER_PIECES || (short && pieces >= 2) || has_unk {
            shattered += 1;
        }
    }
    if words == 0 {
        0.0
    } else {
        shattered as f64 / words as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn router_kinds_and_thresholds_are_checked() {
        assert!(RouterConfig::from_kind("typo", None).is_ok());
        assert!(RouterConfig::from_kind("keyword", None).is_err());
        assert!(RouterConfig::from_kind("typo", Some(1.5)).is_err());
        assert_eq!(
            RouterConfig::from_kind("typo", Some(0.3))
                .unwrap()
                .threshold,
            0.3
        );
    }

    fn tsv_texts(path: &std::path::Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once('\t').map(|(_, t)| t.to_string()))
            .collect()
    }

    fn jsonl_texts(path: &std::path::Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v["text"].as_str().map(str::to_string))
            .collect()
    }

    /// The vocabulary signal (an unknown plain word, as query repair sees it) against the
    /// shattered-word signal at the default threshold, on dl19's clean queries and each of its
    /// typo files: prints both routing rates (docs/repair.md quotes them) and checks that the
    /// vocabulary signal sends fewer clean queries to `typo` and at least as many typo'd ones.
    #[test]
    fn vocabulary_signal_routes_fewer_clean_queries_than_the_tokenizer_signal() {
        use crate::index::vocab::Vocabulary;
        use crate::repair::{Lexicon, Repairer};
        use std::sync::Arc;
        let dl19 = crate::test_assets::shared().join("data/dl19-sample");
        let lexicon_path = crate::repair::lexicon::default_path(&crate::test_assets::assets());
        assert!(
            dl19.is_dir() && lexicon_path.is_file(),
            "needs ../shared/data/dl19-sample and the lexicon asset (scripts/setup --assets-only)"
        );
        let tok = Tokenizer::from_file(crate::test_assets::minilm_hf_dir().join("tokenizer.json"))
            .unwrap();
        let corpus: Vec<(String, String)> = std::fs::read_to_string(dl19.join("corpus.jsonl"))
            .unwrap()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .map(|v| {
                let f = |k: &str| v[k].as_str().unwrap_or_default().to_string();
                (f("title"), f("text"))
            })
            .collect();
        let vocab = Vocabulary::build(corpus.iter().map(|(a, b)| (a.as_str(), b.as_str())));
        let lexicon = Lexicon::load(&[lexicon_path]).unwrap();
        let r = Repairer::new(Arc::new(vocab), Some(Arc::new(lexicon)));
        let rate = |texts: &[String], noisy: &dyn Fn(&str) -> bool| {
            texts.iter().filter(|t| noisy(t)).count() as f64 / texts.len() as f64
        };
        let before = |t: &str| noise_score(&tok, t) > DEFAULT_THRESHOLD;
        let after = |t: &str| r.has_unknown_word(t);
        let clean = jsonl_texts(&dl19.join("queries.jsonl"));
        let (cb, ca) = (rate(&clean, &before), rate(&clean, &after));
        println!(
            "dl19 clean ({} queries): tokenizer signal {:.0}%, vocabulary signal {:.0}%",
            clean.len(),
            100.0 * cb,
            100.0 * ca
        );
        assert!(ca < cb, "clean: vocabulary {ca} >= tokenizer {cb}");
        let (mut tb, mut ta) = (0.0, 0.0);
        for i in 1..=10 {
            let typo = tsv_texts(&dl19.join(format!("queries.typo{i}.tsv")));
            let (b, a) = (rate(&typo, &before), rate(&typo, &after));
            println!(
                "dl19 typo{i} ({} queries): tokenizer signal {:.0}%, vocabulary signal {:.0}%",
                typo.len(),
                100.0 * b,
                100.0 * a
            );
            tb += b / 10.0;
            ta += a / 10.0;
        }
        println!(
            "dl19 typo files, mean: tokenizer signal {:.0}%, vocabulary signal {:.0}%",
            100.0 * tb,
            100.0 * ta
        );
        assert!(ta >= tb - 0.05, "typo: vocabulary {ta} < tokenizer {tb}");
    }

    /// The shattered-word signal separates typo'd from clean queries with MiniLM's tokenizer:
    /// prints the share routed to `typo` at several thresholds (docs/admin-api.md quotes it).
    #[test]
    fn noise_score_separates_typo_queries_from_clean_ones() {
        let tok = Tokenizer::from_file(crate::test_assets::minilm_hf_dir().join("tokenizer.json"))
            .unwrap();
        assert_eq!(noise_score(&tok, ""), 0.0);
        assert_eq!(noise_score(&tok, "what is the capital of france"), 0.0);
        assert!(noise_score(&tok, "whta is teh captial of frnace") > DEFAULT_THRESHOLD);
        let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let dl19 = crate::test_assets::shared().join("data/dl19-sample");
        let mut sets = vec![(
            "default corpus",
            jsonl_texts(&root.join("data/default-corpus/queries.jsonl")),
            tsv_texts(&root.join("data/default-corpus/queries.typo.tsv")),
        )];
        if dl19.is_dir() {
            let typo: Vec<String> = (1..=10)
                .flat_map(|i| tsv_texts(&dl19.join(format!("queries.typo{i}.tsv"))))
                .collect();
            sets.push((
                "dl19 sample",
                jsonl_texts(&dl19.join("queries.jsonl")),
                typo,
            ));
        }
        for (name, clean, typo) in &sets {
            let score = |v: &[String]| v.iter().map(|t| noise_score(&tok, t)).collect::<Vec<_>>();
            let (c, t) = (score(clean), score(typo));
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
            assert!(
                mean(&t) > mean(&c),
                "{name}: typo {} <= clean {}",
                mean(&t),
                mean(&c)
            );
            for th in [0.1, 0.15, 0.2, 0.25, 0.3] {
                let share =
                    |v: &[f64]| v.iter().filter(|s| **s > th).count() as f64 / v.len() as f64;
                println!(
                    "{name}: threshold {th}: {:.0}% of {} typo queries and {:.0}% of {} clean ones go to `typo`",
                    100.0 * share(&t),
                    t.len(),
                    100.0 * share(&c),
                    c.len()
                );
            }
        }
    }
}
