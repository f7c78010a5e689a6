//! Query repair: spelling correction from the index's own vocabulary, in front of every encoder.
//!
//! A query word is corrected only when all of these hold (docs/repair.md gives the reasons and
//! the measurements behind each):
//!
//! 1. it is a plain word: ASCII letters only, in a token without digits, `@`, `/`, `.`, `_` and
//!    the like (URLs, e-mail addresses, product codes, numbers are left alone), not written in
//!    capitals (`NYU`) or mixed case (`iPhone`);
//! 2. it is long enough to carry a typo: one edit from [`MIN_CHARS_ONE_EDIT`] letters, two from
//!    [`MIN_CHARS_TWO_EDITS`] (the conventions of typo-tolerant search engines);
//! 3. it is unknown: neither in the corpus nor in the language prior ([`Lexicon`]);
//! 4. a corpus word of at least [`MIN_CANDIDATE_COUNT`] occurrences lies within that many edits
//!    (Damerau–Levenshtein, adjacent transpositions count one), and
//! 5. the corpus uses that word near another content word of the same query (the vocabulary's
//!    pair filter). A query with no other known content word is left alone.
//!
//! Among candidates the closest wins, then the most frequent. Corrections feed the context of
//! the other words until nothing changes, so repairing a repaired query changes nothing.

pub mod lexicon;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use levenshtein_automata::{Distance, LevenshteinAutomatonBuilder, DFA, SINK_STATE};
use serde::{Deserialize, Serialize};

use crate::index::vocab::{is_stopword, Vocabulary};
pub use lexicon::Lexicon;

/// Words of at least this many letters may be corrected by one edit.
pub const MIN_CHARS_ONE_EDIT: usize = 4;
/// Words of at least this many letters may be corrected by two edits.
pub const MIN_CHARS_TWO_EDITS: usize = 8;
/// A correction target must occur at least this often in the corpus.
pub const MIN_CANDIDATE_COUNT: u64 = 2;
/// Context words shorter than this give no context.
const MIN_CONTEXT_CHARS: usize = 3;

/// Whether a request's query is repaired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RepairMode {
    /// Never.
    Off,
    /// Always; an index without a vocabulary is an error. Without a language prior the corpus
    /// alone decides what is a word.
    On,
    /// When it is safe: the index has a vocabulary and a language prior is loaded; otherwise
    /// the query is searched as it is and the repair counted as skipped.
    #[default]
    Auto,
}

/// Which vectors a repaired query searches with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RepairFusion {
    /// The repaired text alone.
    Repaired,
    /// The raw and the repaired text; each document keeps its better score.
    #[default]
    Max,
}

macro_rules! names {
    ($t:ty, $what:literal, $($v:ident => $s:literal),+) => {
        impl $t {
            /// Every accepted name.
            pub const NAMES: &'static [&'static str] = &[$($s),+];
            /// The name used in requests, flags and metrics.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$v => $s),+ }
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($s => Ok(Self::$v),)+
                    _ => Err(format!(
                        concat!("unknown ", $what, " {:?} (one of: {})"),
                        s,
                        Self::NAMES.join(", ")
                    )),
                }
            }
        }
    };
}
names!(RepairMode, "repair mode", Off => "off", On => "on", Auto => "auto");

/// `on` was asked for, but the index has no vocabulary to repair from.
#[derive(Debug, thiserror::Error)]
#[error("the index has no vocabulary; add one with `capot index vocab <index>`")]
pub struct NoVocabulary;

impl RepairMode {
    /// The repairer a query goes through under this mode, given the index's (`None` when it has
    /// no vocabulary): `off` none; `on` the index's, an error without one; `auto` the index's
    /// only when it also has a lexicon (the safe configuration), else none.
    pub fn repairer(
        self,
        index: Option<&Arc<Repairer>>,
    ) -> Result<Option<Arc<Repairer>>, NoVocabulary> {
        match (self, index) {
            (RepairMode::Off, _) => Ok(None),
            (RepairMode::On, None) => Err(NoVocabulary),
            (RepairMode::On, Some(r)) => Ok(Some(r.clone())),
            (RepairMode::Auto, Some(r)) if r.lexicon().is_some() => Ok(Some(r.clone())),
            (RepairMode::Auto, _) => Ok(None),
        }
    }
}
names!(RepairFusion, "repair fusion", Repaired => "repaired", Max => "max");

/// One correction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Edit {
    /// The word as written.
    pub from: String,
    /// What it became.
    pub to: String,
    /// Byte offset of the word in the original text.
    pub start: usize,
    /// Edits between the two (1 or 2).
    pub distance: u8,
    /// Share of the corpus evidence (occurrences) for `to` among the equally close candidates
    /// that fit the query's context, 0..=1.
    pub confidence: f32,
}

/// A query after repair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Repaired {
    /// The repaired text (the original when nothing changed).
    pub text: String,
    /// The corrections, in text order.
    pub edits: Vec<Edit>,
}

impl Repaired {
    /// Whether the text changed.
    pub fn changed(&self) -> bool {
        !self.edits.is_empty()
    }

    /// Lowest confidence of its edits (1 when unchanged).
    pub fn confidence(&self) -> f32 {
        self.edits.iter().map(|e| e.confidence).fold(1.0, f32::min)
    }
}

/// What repair did to a query (the `outcome` label of `capot_repair_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Repair ran and changed nothing.
    Unchanged,
    /// Repair changed the text.
    Changed,
    /// Repair was asked for (`auto`) but could not run safely: no vocabulary or no lexicon.
    Skipped,
}

impl Outcome {
    /// Metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Unchanged => "unchanged",
            Outcome::Changed => "changed",
            Outcome::Skipped => "skipped",
        }
    }
}

/// The corrector of one index: its vocabulary and, when loaded, the language prior.
pub struct Repairer {
    vocab: Arc<Vocabulary>,
    lexicon: Option<Arc<Lexicon>>,
    one_edit: LevenshteinAutomatonBuilder,
    two_edits: LevenshteinAutomatonBuilder,
}

impl fmt::Debug for Repairer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Repairer")
            .field("vocab", &self.vocab.info())
            .field("lexicon_words", &self.lexicon.as_ref().map(|l| l.len()))
            .finish()
    }
}

/// A word of a query, as the corrector sees it.
#[derive(Debug)]
struct QueryWord {
    start: usize,
    end: usize,
    /// Lower-cased text (the correction once corrected).
    lower: String,
    /// Neither known nor excluded by the rules above: a correction may be looked for.
    correctable: bool,
    /// In the corpus or the lexicon (or corrected to a corpus word).
    known: bool,
    content: bool,
}

/// Characters that make a whole whitespace-separated token off limits: URLs, e-mail addresses,
/// paths, identifiers, product codes.
fn is_code_char(c: char) -> bool {
    c.is_numeric() || "@/\\:._#&=+%~|<>[]{}$^*".contains(c)
}

impl Repairer {
    /// A corrector over `vocab`, with `lexicon` as the language prior when there is one.
    pub fn new(vocab: Arc<Vocabulary>, lexicon: Option<Arc<Lexicon>>) -> Self {
        Repairer {
            vocab,
            lexicon,
            one_edit: LevenshteinAutomatonBuilder::new(1, true),
            two_edits: LevenshteinAutomatonBuilder::new(2, true),
        }
    }

    /// The vocabulary it corrects towards.
    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// The language prior, if loaded.
    pub fn lexicon(&self) -> Option<&Arc<Lexicon>> {
        self.lexicon.as_ref()
    }

    fn is_known(&self, lower: &str) -> bool {
        self.vocab.count(lower) > 0 || self.lexicon.as_ref().is_some_and(|l| l.contains(lower))
    }

    fn scan(&self, text: &str) -> Vec<QueryWord> {
        let mut words = Vec::new();
        let mut token_start = None;
        let bytes_end = text.len();
        let mut tokens = Vec::new();
        for (i, c) in text.char_indices() {
            match (c.is_whitespace(), token_start) {
                (true, Some(s)) => {
                    tokens.push((s, i));
                    token_start = None;
                }
                (false, None) => token_start = Some(i),
                _ => {}
            }
        }
        if let Some(s) = token_start {
            tokens.push((s, bytes_end));
        }
        for (ts, te) in tokens {
            let token = &text[ts..te];
            let core = token.trim_matches(|c: char| !c.is_alphanumeric());
            let code = core.chars().any(is_code_char);
            let mut run_start = None;
            let mut push = |s: usize, e: usize| {
                let raw = &text[s..e];
                let lower = raw.to_lowercase();
                let letters = raw.chars().count();
                let plain = raw.chars().all(|c| c.is_ascii_alphabetic());
                let capitals = raw.chars().all(|c| c.is_uppercase()) && letters >= 2;
                let mixed = raw.chars().skip(1).any(char::is_uppercase);
                let known = self.is_known(&lower);
                words.push(QueryWord {
                    start: s,
                    end: e,
                    correctable: !known
                        && !code
                        && plain
                        && !capitals
                        && !mixed
                        && letters >= MIN_CHARS_ONE_EDIT,
                    known,
                    content: !is_stopword(&lower) && letters >= MIN_CONTEXT_CHARS,
                    lower,
                });
            };
            for (i, c) in token.char_indices() {
                match (c.is_alphabetic(), run_start) {
                    (true, None) => run_start = Some(ts + i),
                    (false, Some(s)) => {
                        push(s, ts + i);
                        run_start = None;
                    }
                    _ => {}
                }
            }
            if let Some(s) = run_start {
                push(s, te);
            }
        }
        words
    }

    /// The best correction of `word` given the context words, with its distance and confidence.
    fn correct(&self, word: &str, context: &[&str]) -> Option<(String, u8, f32)> {
        let letters = word.len();
        let builder = if letters >= MIN_CHARS_TWO_EDITS {
            &self.two_edits
        } else {
            &self.one_edit
        };
        let dfa = builder.build_dfa(word);
        let mut stream = fst::IntoStreamer::into_stream(self.vocab.counts().search(Dfa(&dfa)));
        let mut found: Vec<(u8, u64, String)> = Vec::new();
        while let Some((key, count)) = fst::Streamer::next(&mut stream) {
            if count < MIN_CANDIDATE_COUNT || !key.is_ascii() {
                continue;
            }
            let Ok(candidate) = std::str::from_utf8(key) else {
                continue;
            };
            let Distance::Exact(d) = dfa.eval(key) else {
                continue;
            };
            if d == 0 || !context.iter().any(|o| self.vocab.near(candidate, o)) {
                continue;
            }
            found.push((d, count, candidate.to_string()));
        }
        let best_distance = found.iter().map(|f| f.0).min()?;
        found.retain(|f| f.0 == best_distance);
        let total: u64 = found.iter().map(|f| f.1).sum();
        found.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.2.cmp(&b.2)));
        let (d, count, best) = found.into_iter().next()?;
        Some((best, d, (count as f64 / total.max(1) as f64) as f32))
    }

    /// Repairs `text`. Never fails: a query it cannot or should not correct comes back as it is.
    pub fn repair(&self, text: &str) -> Repaired {
        let mut words = self.scan(text);
        let mut edits: Vec<Edit> = Vec::new();
        loop {
            let context: Vec<String> = words
                .iter()
                .filter(|w| w.known && w.content)
                .map(|w| w.lower.clone())
                .collect();
            let mut changed = false;
            for w in words.iter_mut().filter(|w| w.correctable && !w.known) {
                let ctx: Vec<&str> = context
                    .iter()
                    .map(String::as_str)
                    .filter(|c| *c != w.lower)
                    .collect();
                if let Some((to, distance, confidence)) = self.correct(&w.lower, &ctx) {
                    let raw = &text[w.start..w.end];
                    edits.push(Edit {
                        from: raw.to_string(),
                        to: match_case(raw, &to),
                        start: w.start,
                        distance,
                        confidence,
                    });
                    w.lower = to;
                    w.known = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        edits.sort_by_key(|e| e.start);
        let mut out = String::with_capacity(text.len() + 8);
        let mut at = 0;
        for e in &edits {
            out.push_str(&text[at..e.start]);
            out.push_str(&e.to);
            at = e.start + e.from.len();
        }
        out.push_str(&text[at..]);
        Repaired { text: out, edits }
    }

    /// Whether the query looks noisy: it has a word repair would try to correct (an unknown
    /// plain word). The query router's signal when the index has a vocabulary.
    pub fn has_unknown_word(&self, text: &str) -> bool {
        self.scan(text).iter().any(|w| w.correctable)
    }
}

/// `to` written like `from`: capitalised when `from` starts with a capital.
fn match_case(from: &str, to: &str) -> String {
    if from.chars().next().is_some_and(char::is_uppercase) {
        let mut c = to.chars();
        c.next()
            .map(|f| f.to_uppercase().chain(c).collect())
            .unwrap_or_default()
    } else {
        to.to_string()
    }
}

/// A Levenshtein DFA as an `fst` automaton, so the word map is searched without a scan.
struct Dfa<'a>(&'a DFA);

impl fst::Automaton for Dfa<'_> {
    type State = u32;

    fn start(&self) -> u32 {
        self.0.initial_state()
    }

    fn is_match(&self, state: &u32) -> bool {
        matches!(self.0.distance(*state), Distance::Exact(_))
    }

    fn can_match(&self, state: &u32) -> bool {
        *state != SINK_STATE
    }

    fn accept(&self, state: &u32, byte: u8) -> u32 {
        self.0.transition(*state, byte)
    }
}

#[cfg(test)]
mod tests;
