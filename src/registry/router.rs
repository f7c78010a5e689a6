//! The query router: when a request names no encoder, pick an alias per query from cheap
//! signals of noise.
//!
//! The signal is the share of a query's words that the default encoder's tokenizer shatters
//! into three or more word pieces (two for short words), or maps to the unknown token. Typos turn common words into
//! rare letter sequences, which WordPiece splits into many short pieces; clean queries are
//! mostly whole-word tokens. Above the threshold the query goes to the noise alias (`typo`)
//! when it exists, else to `default`.

use prometheus::IntCounterVec;
use tokenizers::Tokenizer;

use super::{Snapshot, DEFAULT_ALIAS};

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
    /// alias exists, else `default`.
    pub fn choose(&self, snapshot: &Snapshot, text: &str) -> String {
        let alias = match snapshot.resolve(DEFAULT_ALIAS) {
            Ok(default)
                if snapshot.aliases.contains_key(&self.config.alias)
                    && noise_score(default.encoder().tokenizer().inner(), text)
                        > self.config.threshold =>
            {
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
