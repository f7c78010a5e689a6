//! Seeded query-noise generators.
//!
//! Each generator turns a clean query into one noisy variant, deterministically
//! for (seed, kind, query id, variant index): the same inputs give the same
//! bytes on every run and platform (a hand-written FNV-1a + SplitMix64
//! generator, no hash-map iteration, no floating point in decisions). Every
//! generator reports whether it changed the query ([`NoiseOutcome::applied`]);
//! a query it cannot change (no stop word to remove, no eligible word, an
//! edit that happens to give the same string) comes back unchanged with
//! `applied == false`, so callers count it instead of training on a "noisy"
//! copy that is clean.
//!
//! Kinds (names as on the command line and in the APIs):
//!
//! | name | what |
//! |---|---|
//! | `cd` | CAPOT character delete |
//! | `rcs` | CAPOT random character insert / replace |
//! | `kcs` | CAPOT keyboard-neighbour insert / replace |
//! | `typo` | TextAttack-style typo: one non-stop word of ≥ 3 characters gets one of {neighbour swap, delete, insert, substitute, QWERTY substitute} |
//! | `reorder` | swap two words |
//! | `determiner` | insert `a` / `an` / `the` before a word |
//! | `stopwords` | remove stop words |
//! | `stem` | Snowball English (Porter2) stemming of every word |
//! | `punct` | append a punctuation mark to a word |
//! | `lemma` | WordNet lemmatisation of every word |
//! | `synonym` | replace one word by a WordNet synonym |
//! | `boundary` | two adjacent words joined (a lost space) or a word of 6+ letters split (a stray one) |
//!
//! `typos` is an alias for `cd,rcs,kcs` in kind lists ([`parse_kinds`]).
//! The CAPOT typo position rule is documented in the `typo` submodule.
//! `stem`, `stopwords` and `lemma` are deterministic functions of the text:
//! every seed and variant gives the same output.
//!
//! `lemma` and `synonym` read the WordNet 3.0 database (Debian package
//! `wordnet-base`) from `$CAPOT_WORDNET_DIR` or `/usr/share/wordnet`, once
//! per process; without it they return [`NoiseError::WordNetUnavailable`].
//!
//! Model-based noise (back-translation, paraphrase) is not generated here:
//! it needs models that cannot run offline in this service, so users supply
//! such variants as files (TSV `qid<TAB>text`).
//!
//! All text handling works on whole characters and approximate grapheme
//! clusters (a letter with its combining marks, an emoji ZWJ sequence), so
//! any Unicode input is safe; no input panics.

pub mod human;
mod keyboard;
mod rng;
mod stopwords;
mod text;
mod typo;
mod word;
pub mod wordnet;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use keyboard::keyboard_neighbours;
pub use stopwords::{is_stopword, STOPWORDS};
pub use wordnet::WordNet;

pub use rng::NoiseRng;
use typo::CapotTypo;

/// Errors of the noise module.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoiseError {
    /// A kind name that is not one of [`NoiseKind::ALL`] (or `typos`).
    #[error("unknown noise kind `{name}`; valid kinds: {}", valid_kind_names())]
    UnknownKind {
        /// The name as given.
        name: String,
    },
    /// A kind list with no kind in it.
    #[error("empty noise kind list; valid kinds: {}", valid_kind_names())]
    EmptyKindList,
    /// `lemma` / `synonym` need the WordNet database, which could not be read.
    #[error(
        "WordNet database not usable in {} ({reason}); install it with \
         `apt-get install wordnet-base` or point CAPOT_WORDNET_DIR at a WordNet 3.0 dict directory",
        dir.display()
    )]
    WordNetUnavailable {
        /// Directory that was tried.
        dir: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// `misspell` draws from a list of real misspellings, and none was given.
    #[error(
        "noise kind `misspell` needs a list of real misspellings (`right: wrong1 wrong2 ...` \
         lines): pass --misspellings FILE"
    )]
    NoMisspellings,
    /// `realword` draws from a lexicon, and none was loaded.
    #[error(
        "noise kind `realword` needs a lexicon: scripts/setup fetches the default one, or pass \
         --lexicon FILE"
    )]
    NoLexicon,
}

fn valid_kind_names() -> String {
    let mut s: Vec<&str> = NoiseKind::ALL.iter().map(|k| k.as_str()).collect();
    s.push("typos (= cd,rcs,kcs)");
    s.join(", ")
}

/// A query-noise generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NoiseKind {
    /// `cd`: CAPOT character delete.
    Cd,
    /// `rcs`: CAPOT random character insert / replace.
    Rcs,
    /// `kcs`: CAPOT keyboard-neighbour insert / replace.
    Kcs,
    /// `typo`: TextAttack-style typo in one non-stop word of ≥ 3 characters.
    Typo,
    /// `reorder`: swap two words.
    Reorder,
    /// `determiner`: insert an article before a word.
    Determiner,
    /// `stopwords`: remove stop words.
    Stopwords,
    /// `stem`: Porter2 stemming of every word.
    Stem,
    /// `punct`: extra punctuation.
    Punct,
    /// `lemma`: WordNet lemmatisation of every word.
    Lemma,
    /// `synonym`: one word replaced by a WordNet synonym.
    Synonym,
    /// `boundary`: two words joined or one split.
    Boundary,
    /// `misspell`: one word replaced by a real misspelling of it from a list (`--misspellings`).
    Misspell,
    /// `realword`: one word replaced by a real word one slip away (`reflux` → `reflex`), from
    /// the lexicon.
    Realword,
}

impl NoiseKind {
    /// Every kind, in a fixed order.
    pub const ALL: [NoiseKind; 14] = [
        NoiseKind::Cd,
        NoiseKind::Rcs,
        NoiseKind::Kcs,
        NoiseKind::Typo,
        NoiseKind::Reorder,
        NoiseKind::Determiner,
        NoiseKind::Stopwords,
        NoiseKind::Stem,
        NoiseKind::Punct,
        NoiseKind::Lemma,
        NoiseKind::Synonym,
        NoiseKind::Boundary,
        NoiseKind::Misspell,
        NoiseKind::Realword,
    ];

    /// What the `typos` alias expands to.
    pub const TYPOS: [NoiseKind; 3] = [NoiseKind::Cd, NoiseKind::Rcs, NoiseKind::Kcs];

    /// The name used on the command line, in APIs and in the RNG seed.
    pub fn as_str(self) -> &'static str {
        match self {
            NoiseKind::Cd => "cd",
            NoiseKind::Rcs => "rcs",
            NoiseKind::Kcs => "kcs",
            NoiseKind::Typo => "typo",
            NoiseKind::Reorder => "reorder",
            NoiseKind::Determiner => "determiner",
            NoiseKind::Stopwords => "stopwords",
            NoiseKind::Stem => "stem",
            NoiseKind::Punct => "punct",
            NoiseKind::Lemma => "lemma",
            NoiseKind::Synonym => "synonym",
            NoiseKind::Boundary => "boundary",
            NoiseKind::Misspell => "misspell",
            NoiseKind::Realword => "realword",
        }
    }

    /// Whether the kind draws from a list of real misspellings (`--misspellings`).
    pub fn needs_misspellings(self) -> bool {
        self == NoiseKind::Misspell
    }

    /// Whether the kind draws from the lexicon.
    pub fn needs_lexicon(self) -> bool {
        self == NoiseKind::Realword
    }

    /// Why the kind cannot make training pairs, if it cannot: `misspell` and `realword` measure
    /// repair on errors people make, and training on them would teach the test.
    pub fn not_for_training(self) -> Option<String> {
        (self.needs_misspellings() || self.needs_lexicon()).then(|| {
            format!(
                "noise kind `{self}` is for measuring (capot eval, capot noise), not for training: \
                 its errors come from the lists repair is judged on"
            )
        })
    }

    /// Whether the kind needs the WordNet database.
    pub fn needs_wordnet(self) -> bool {
        matches!(self, NoiseKind::Lemma | NoiseKind::Synonym)
    }

    /// Whether the output depends on the seed and variant (false for the
    /// deterministic text transforms `stopwords`, `stem`, `lemma`).
    pub fn is_random(self) -> bool {
        !matches!(
            self,
            NoiseKind::Stopwords | NoiseKind::Stem | NoiseKind::Lemma
        )
    }
}

impl fmt::Display for NoiseKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for NoiseKind {
    type Err = NoiseError;

    /// One kind name (trimmed, case-insensitive); `typos` is a list alias,
    /// accepted only by [`parse_kinds`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim().to_ascii_lowercase();
        NoiseKind::ALL
            .into_iter()
            .find(|k| k.as_str() == name)
            .ok_or_else(|| NoiseError::UnknownKind {
                name: s.trim().to_owned(),
            })
    }
}

/// Parse a comma-separated kind list such as `typos,reorder`; `typos`
/// expands to `cd,rcs,kcs`, duplicates are dropped (first occurrence kept),
/// empty items are ignored, but a list without any kind is an error.
pub fn parse_kinds(s: &str) -> Result<Vec<NoiseKind>, NoiseError> {
    let mut out: Vec<NoiseKind> = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let kinds: Vec<NoiseKind> = if item.eq_ignore_ascii_case("typos") {
            NoiseKind::TYPOS.to_vec()
        } else {
            vec![item.parse()?]
        };
        for k in kinds {
            if !out.contains(&k) {
                out.push(k);
            }
        }
    }
    if out.is_empty() {
        return Err(NoiseError::EmptyKindList);
    }
    Ok(out)
}

/// The result of one generator on one query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoiseOutcome {
    /// The noisy query (the input, unchanged, when `applied` is false).
    pub text: String,
    /// Whether the text differs from the input.
    pub applied: bool,
}

impl NoiseOutcome {
    fn new(input: &str, candidate: Option<String>) -> Self {
        match candidate {
            Some(text) if text != input => NoiseOutcome {
                text,
                applied: true,
            },
            _ => NoiseOutcome {
                text: input.to_owned(),
                applied: false,
            },
        }
    }
}

/// Check that the WordNet database loads (for early, clear failures before a
/// long job that uses `lemma` or `synonym`).
pub fn check_wordnet() -> Result<(), NoiseError> {
    WordNet::global().map(|_| ())
}

/// Apply one generator to one query: variant `variant` of query `query_id`
/// under `seed`. Deterministic in (seed, kind, query id, variant, text).
/// Errors only for `lemma` / `synonym` without a WordNet database, `misspell` without an
/// installed misspelling list and `realword` without installed real words
/// ([`human::install_misspellings`], [`human::install_real_words`]).
pub fn apply(
    kind: NoiseKind,
    seed: u64,
    query_id: &str,
    variant: u32,
    text: &str,
) -> Result<NoiseOutcome, NoiseError> {
    let mut rng = NoiseRng::for_query(seed, kind.as_str(), query_id, variant);
    let candidate = match kind {
        NoiseKind::Cd => typo::capot_typo(CapotTypo::Delete, &mut rng, text),
        NoiseKind::Rcs => typo::capot_typo(CapotTypo::Random, &mut rng, text),
        NoiseKind::Kcs => typo::capot_typo(CapotTypo::Keyboard, &mut rng, text),
        NoiseKind::Typo => typo::textattack_typo(&mut rng, text),
        NoiseKind::Reorder => word::reorder(&mut rng, text),
        NoiseKind::Determiner => word::determiner(&mut rng, text),
        NoiseKind::Stopwords => word::remove_stopwords(text),
        NoiseKind::Stem => word::stem(text),
        NoiseKind::Punct => word::punct(&mut rng, text),
        NoiseKind::Lemma => word::lemmatize(WordNet::global()?, text),
        NoiseKind::Synonym => word::synonym(&mut rng, WordNet::global()?, text),
        NoiseKind::Boundary => human::boundary(&mut rng, text).map(|i| i.text),
        NoiseKind::Misspell => {
            human::misspell(human::installed_misspellings()?, &mut rng, text).map(|i| i.text)
        }
        NoiseKind::Realword => {
            human::realword(&mut rng, text, human::installed_real_words()?).map(|i| i.text)
        }
    };
    Ok(NoiseOutcome::new(text, candidate))
}

#[cfg(test)]
mod tests;
