//! Query repair: a noisy-channel speller in front of every encoder.
//!
//! The meant query is the one that maximises P(typed | meant) × P(meant): an error model of how
//! people mistype ([`error_model`]) times a language model of general English and of the corpus
//! ([`language_model`]). Candidates for each word come from the lexicon and the corpus
//! ([`candidates`]); the decoder ([`decoder`]) searches every reading of the query at once —
//! each word as typed, a non-word corrected, a real word changed for one its neighbours go with,
//! a word split in two, two words joined — and keeps the likeliest.
//!
//! What is never touched (docs/repair.md gives the measurements): a query with letters outside
//! ASCII or with a function word of another language; tokens with digits or code characters
//! (URLs, e-mail, product codes); words in capitals or mixed case (unless the whole query is in
//! capitals with a function word: caps lock), and capitalised words after a sentence's first
//! unless no list holds them and the usage list says nobody writes them (a misspelt name); words
//! shorter than [`Params::min_letters`], except a function word with a letter dropped (`whn`). A
//! known word (in the lexicon or the corpus) changes only as a real-word error, when its
//! neighbours make another word more likely by more than [`Params::real_word_cost`]. A text of
//! several sentences is repaired a sentence at a time, each read as a query. Repair is
//! idempotent: repairing its output changes nothing.

pub mod candidates;
mod decoder;
pub mod error_model;
pub mod eval;
pub mod inflection;
pub mod language_model;
pub mod lexicon;
mod query;
mod recall;
pub mod retrieved;
pub mod sounds;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::index::vocab::Vocabulary;
use candidates::CandidateIndex;
use language_model::{LanguageModel, WordStats};
pub use lexicon::Lexicon;
pub use retrieved::RetrievedWords;

/// At most this many words found only in the corpus (not in the lexicon) are candidates, the
/// most frequent first: it bounds the candidate index on corpora of millions of passages.
pub const MAX_CORPUS_CANDIDATES: usize = 300_000;

/// Whether a request's query is repaired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
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

/// The kind of a correction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EditKind {
    /// A word that is no word corrected (`recieve` → `receive`).
    NonWord,
    /// A real word replaced by the one its neighbours go with (`acid reflex` → `acid reflux`).
    RealWord,
    /// A word split in two (`thecauses` → `the causes`).
    Split,
    /// Two words joined (`face book` → `facebook`).
    Join,
}

names!(EditKind, "edit kind", NonWord => "non_word", RealWord => "real_word", Split => "split", Join => "join");

/// One correction.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Edit {
    /// What kind of error it corrects.
    pub kind: EditKind,
    /// The text as written (for a join, both words and the space between).
    pub from: String,
    /// What it became.
    pub to: String,
    /// Byte offset of `from` in the original text.
    pub start: usize,
    /// Letter edits between the two (a split or a join is one).
    pub distance: u8,
    /// How much likelier the corrected reading is than the query as typed at this place, as a
    /// probability in (0.5, 1]: 1 / (1 + P(typed reading) / P(corrected reading)).
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

    fn unchanged(text: &str) -> Self {
        Repaired {
            text: text.to_string(),
            edits: Vec::new(),
        }
    }
}

/// How the decoder saw a query ([`Repairer::explain`]).
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    pub words: Vec<ExplainedWord>,
    /// ln P of the best reading (typed | meant and meant), and of the words as typed.
    pub best_score: f64,
    pub typed_score: f64,
    /// The best path's readings in order, each with what the language model gave it where it
    /// stands: `Σ (ln_context − cost)` is `best_score`.
    pub best_path: Vec<PathStep>,
    /// The same for the words as typed (`typed_score`).
    pub typed_path: Vec<PathStep>,
    /// Why the query was not looked at, when it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

impl Explanation {
    /// This sentence's explanation and the next's, as one text's: the next's words follow,
    /// their paths' positions moved past this one's words, and the scores add up. A sentence
    /// that was not looked at adds nothing.
    fn followed_by(mut self, next: Explanation) -> Explanation {
        if next.skipped.is_some() {
            return self;
        }
        if self.skipped.is_some() {
            return next;
        }
        let offset = self.words.len();
        let moved = |steps: Vec<PathStep>| {
            steps.into_iter().map(move |mut s| {
                s.position += offset;
                s
            })
        };
        self.best_path.extend(moved(next.best_path));
        self.typed_path.extend(moved(next.typed_path));
        self.words.extend(next.words);
        self.best_score += next.best_score;
        self.typed_score += next.typed_score;
        self
    }
}

/// One word of an [`Explanation`].
#[derive(Debug, Clone, Serialize)]
pub struct ExplainedWord {
    pub word: String,
    /// Whether repair may change it at all (not a code, capitals, a name people write, ...).
    pub editable: bool,
    pub lexicon_count: u64,
    pub corpus_count: u64,
    /// How often it is written, per billion words, by the usage list.
    pub usage_per_billion: Option<u64>,
    /// With the index's vote: how many of the documents the query retrieved use it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub documents_using: Option<u32>,
    /// How many of the query's other content words the corpus holds its documents use near it
    /// (the vocabulary's pair filter; [`Params::real_word_passage_gain`] asks it of a known
    /// word).
    pub corpus_near: usize,
    /// The readings that start at this word; the first is the word as typed.
    pub readings: Vec<ExplainedReading>,
}

/// One reading on a path of an [`Explanation`]: why one path outscored another, pair by pair.
#[derive(Debug, Clone, Serialize)]
pub struct PathStep {
    /// Index of the first typed word it covers in [`Explanation::words`].
    pub position: usize,
    /// The meant word (two for a split, the joined word for a join).
    pub meant: String,
    /// The reading's cost in nats, as in [`ExplainedReading::cost`].
    pub cost: f64,
    /// ln P of the reading beside the one before it: its pair with that reading's last word
    /// (or, first in the query, its own probability with a question word's lift), the pair
    /// inside a split, and a frame word's lift at the query's end.
    pub ln_context: f64,
}

/// One reading the decoder weighed.
#[derive(Debug, Clone, Serialize)]
pub struct ExplainedReading {
    /// The meant word (two for a split).
    pub meant: String,
    /// Typed words it covers (2 for a join).
    pub span: usize,
    /// `None` for the word as typed.
    pub kind: Option<EditKind>,
    /// −ln P(typed | meant) plus the priors of changing a word, in nats.
    pub cost: f64,
    /// ln P(meant) out of context.
    pub ln_unigram: f64,
    /// With the index's vote: how many of the documents the query retrieved use the meant
    /// word (each word of a split counted apart, the fewest kept).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub documents_using: Option<u32>,
    /// For a reading of one word other than the typed one: how many of the query's other
    /// content words the corpus uses near it, of how many that chance would not bring near it
    /// ([`Params::real_word_passage_gain`] wants all of them, two at least).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corpus_near: Option<[usize; 2]>,
    /// On the best path.
    pub chosen: bool,
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

/// The speller's settings. The defaults are the measured ones (docs/repair.md); `capot repair
/// eval --params` takes others, to measure them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    /// Words shorter than this are never changed.
    pub min_letters: usize,
    /// Words of at least this many letters may be corrected by two edits, shorter ones by one.
    pub two_edits_from: usize,
    /// Shorter words may also be two doubled letters short of a word (`adres` for `address`):
    /// people often miss which letters are doubled.
    pub two_doubled_letters: bool,
    /// Unknown words of at least this many letters may be split.
    pub min_split_letters: usize,
    /// Two words are joined only into a word of at least this many letters.
    pub min_join_letters: usize,
    /// A corpus word must occur this often to be a candidate (lexicon words always are).
    pub min_corpus_count: u64,
    /// Words the usage list holds written at least this often per billion words, and neither
    /// the lexicon nor the corpus holds, are candidates too: the names, brands, drugs and
    /// American spellings the lexicon lacks (`bitcoin`, `spotify`, `doxycycline`, `leukemia`),
    /// at the usage list's frequency; no list of pairs holds them, so a pair with one is no
    /// evidence either way. Where another of a word's candidates as few edits away is more
    /// frequent, such a word is dropped (the usage list holds many a word's typos and variants:
    /// `seperate`, `pokemons`). 0 turns this off.
    pub usage_candidate_per_billion: u64,
    /// Such a word that is the American spelling of a word the word list holds (`colors`,
    /// `theater`, `anemia`: the SymSpell list leans British) has the British spelling's pairs,
    /// which otherwise no list of pairs holds for it.
    pub borrow_british_pairs: bool,
    /// Candidates kept per word, the likeliest out of context first.
    pub max_candidates: usize,
    /// Prior cost, in nats, of changing a word that is known: the threshold a real-word
    /// correction's context gain must pass (two letters swapped pass at
    /// [`Params::real_word_swap_cost`]); joining two known words pays it too.
    pub real_word_cost: f64,
    /// The same prior for a known word read as another with two adjacent letters after the
    /// first swapped (`pairs` for `paris`, `cots` for `cost`, `casual` for `causal`): one slip
    /// of the hand, where the other real-word errors the prior guards against are mostly a
    /// word's own neighbours in meaning or sound (`otters`/`others`, `itch`/`inch`), which no
    /// swap makes. `None`: `real_word_cost` (the sixty-third round).
    pub real_word_swap_cost: Option<f64>,
    /// Weigh a real-word candidate at the start of a query with its own probability against the
    /// typed word's, as the word before it would be weighed elsewhere.
    pub real_word_at_start: bool,
    /// With a homophone list: cost, in nats, of reading a known word as another that sounds the
    /// same (`rote` for `wrote`, `pane` for `pain`), in place of the error model's, on top of
    /// [`Params::real_word_cost`]; the words beside it count as context, function words too
    /// (`who wrote`). A function word read for one that sounds the same (`their is` →
    /// `there is`) pays this alone, where its pair with the next word is written far more.
    /// `null` turns homophones off.
    pub homophone_cost: Option<f64>,
    /// With a verb list: cost, in nats, of reading a regular past ending put on an irregular verb
    /// as the verb's own form (`teached` → `taught`, `runned` → `ran`), in place of the error
    /// model's, which no letter edit reaches. Only for a string the word list lacks and the usage
    /// list holds far less than the form (by [`Params::typo_usage_margin`] after this cost):
    /// `creeped` is written as well as `crept`. `null` turns it off.
    pub over_regularised_cost: Option<f64>,
    /// Cost, in nats, of a space left out (`thecauses`); below zero it is a bonus, which makes up
    /// for the extra word a split adds to the language model's product.
    pub split_cost: f64,
    /// Extra cost, in nats, of a split into two content words, which is as often a compound
    /// missing from the lists (`handwashing`, `hotspot`) as two words run together.
    pub compound_split_cost: f64,
    /// Nats [`Params::compound_split_cost`] is lowered by where nobody writes the string (the
    /// usage list lacks it), both content words are written and have
    /// [`Params::unwritten_compound_letters`] letters or more, the first is no prefix English
    /// builds words with (`hypo`, `micro`) and no unknown word stands beside it: such a string
    /// is two words run together (`machinecycle`), where a compound or a name the lists lack is
    /// mostly built of a short piece (`groupone`, `treeno`) or stands among other names
    /// (`groupone healthsource`).
    pub unwritten_compound_bonus: f64,
    /// The fewest letters of each content word of a split that
    /// [`Params::unwritten_compound_bonus`] lowers the price of.
    pub unwritten_compound_letters: usize,
    /// The fewest letters of each content word of a split into two that
    /// [`Params::unwritten_compound_bonus`] lowers the price of where no word of the lists is
    /// one edit from the string (`netgain`, `thirdlaw`; `richadd` is `richard`'s typo); 0: as
    /// [`Params::unwritten_compound_letters`].
    pub unwritten_compound_short_letters: usize,
    /// Extra cost, in nats, of a split into two function words, which the language model finds
    /// likely anywhere (`befor` → `be for` rather than `before`): at 2.5 it takes back the split's
    /// bonus ([`Params::split_cost`]), which makes up for the extra word of the product, a
    /// small factor when both are function words.
    pub function_split_cost: f64,
    /// Prior cost, in nats, of reading a short known word as the function word it is one slip
    /// of the hand from (`how long dose it take` → `does`): the gain its neighbours' pairs give
    /// must pass it and the slip's own cost.
    pub function_word_cost: f64,
    /// The same prior for a three-letter word no list holds, read by any slip of the hand, the
    /// first letter's too (`what is rhe best` → `the`): lower, as a string nobody knows is no
    /// choice of word, but not nothing, as most are acronyms (at 5, `what is npt standard` →
    /// `not`).
    pub unknown_function_word_cost: f64,
    /// The same prior for a two-letter string the word list lacks read as the function word
    /// with its two letters swapped (`how ot cook rice` → `how to`, `what si a stent` → `what
    /// is`), where the general pair list holds the function word with both neighbours and the
    /// string with neither: two letters are mostly acronyms (`ma`, `ti`, `os`), which is why
    /// both neighbours must speak, one of them a content word (or see
    /// [`Params::swapped_question_association`]), and only a swap, the commonest slip on a short
    /// word, is read.
    /// `null` turns it off.
    pub swapped_function_word_cost: Option<f64>,
    /// Where both neighbours of such a string are function words, the first must be a question
    /// word that starts the query and makes a set phrase with the function word: the function
    /// word this much more likely after it than on its own, in nats (`what is`, `how to`,
    /// `where is`; not `what so`, so `what os is best` stays).
    pub swapped_question_association: f64,
    /// [`Params::function_word_cost`] for the first word of a query, whose one neighbour is all
    /// the context there is (`hoe to make bread` → `how`): lower, as the word's own frequency
    /// speaks for the function word in place of the word before. A word only the corpus knows
    /// pays [`Params::corpus_word_cost`] on top of either (`aol email` stays).
    pub function_word_start_cost: f64,
    /// [`Params::function_word_start_cost`] where another word of the query is one no list
    /// knows, nor the usage list from [`Params::usage_candidate_per_billion`] on: such a query
    /// may be in another language, whose own words read as English slips (`wat is cappuccino
    /// koffie`, Dutch, stays), or hold a name, which says nothing either way (the start's prior
    /// before the twenty-fourth round). 8.5 since the eighty-third round, whose
    /// [`Params::pair_ceiling`] lifts `what is` (8 before).
    pub function_word_start_foreign_cost: f64,
    /// Lift, in nats, of a question word (`what`, `how`, `when`, `where`, `why`, `who`, `which`)
    /// as a query's first word, over its share of running English: queries begin with one far
    /// more often than sentences do, and running English's counts read `ahat is` as `that is`.
    pub question_start_lift: f64,
    /// Lift, in nats, of a word that asks about the word before it (`meaning`, `definition`,
    /// `define`, `synonym`, `synonyms`) as a query's last word, and of one that asks about the
    /// words after it (`define`, `definition`, `meaning`) as its first, over its share of
    /// running English: queries end `X meaning` and begin `define X` far more often than
    /// sentences do, and kept as typed an unknown string pays for no pair, where the word it
    /// stands for pays for one the lists cannot hold (`trod meaing`, `deqine anomaly`). 0 turns
    /// it off.
    pub frame_word_lift: f64,
    /// Extra prior cost, in nats, on [`Params::function_word_cost`] of reading a known content
    /// word of four letters or more as the function word it is one letter from, a letter for
    /// another after the first (`how mann calories` → `many`, `how lond should i boil` →
    /// `long`), under the same pair tests as a slip of the hand: such a letter is no slip, and a
    /// word one letter from a function word is more often a name (`amarillo tx and mora new
    /// mexico` stays). `null` turns this off.
    pub function_word_letter_cost: Option<f64>,
    /// Association, in nats (ln P(b | a) − ln P(b) in general English's lists), of the function
    /// word with a neighbour at or above which a letter for another pays nothing more than a
    /// slip ([`Params::function_word_letter_cost`]): the two make a set phrase (`how long` 6.6,
    /// `how many` 6.9), which speaks for the function word where the letter alone does not;
    /// pairs any words make stay under it (`and more` 4.4, `the most` 5.5). `null` turns this
    /// off.
    pub function_word_phrase_association: Option<f64>,
    /// `than` is read as no other function word where a word before it in the sentence goes
    /// with it this many nats over chance or more in general English's pair list (ln c(a than)
    /// N / (c(a) c(than))): a comparative it answers however far away (`better to live in a
    /// small town than in a big city`, where `town that` is written and `town than` never;
    /// `rather` 10.4, `taller` 9.6, `better` 8.9, `more` 8.6, `different` 6.8, while `things`
    /// 4.4, `it` 2.7). `null` turns this off (the eighty-first round).
    pub comparative_association: Option<f64>,
    /// Prior cost, in nats, of joining two words that are both known (`door knocker`).
    pub join_known_cost: f64,
    /// Two known words join without [`Params::join_known_cost`] where they are one word split
    /// (`heart burn`, `tooth paste`): the usage list writes the word they make e^this times more
    /// often than general English can write the two apart ([`Repairer::written_together`]).
    /// `None` turns this off.
    pub compound_written_together_margin: Option<f64>,
    /// How many times more than chance (ln) two words may go together where general English's
    /// pair list lacks them, for [`Params::compound_written_together_margin`]: the most a
    /// missing pair is believed written.
    pub compound_apart_association: f64,
    /// The least the usage list must write a word, per billion, for
    /// [`Params::compound_written_together_margin`] to join two known words into it: a rarer
    /// compound is as often written apart by choice (`snake bite`, `corn flakes`).
    pub compound_least_usage: u64,
    /// How much more an unknown word is believed as typed per letter below six, in nats: short
    /// unknown words are mostly acronyms and names (`poct`, `tanf`).
    pub unknown_per_letter: f64,
    /// How much less an unknown word is believed as typed per letter above six, in nats: a long
    /// word that no list holds is mostly a typo (`anthropologmcal`).
    pub unknown_per_extra_letter: f64,
    /// Prior cost, in nats, of changing a word that only the corpus knows (it may be one of the
    /// corpus's own typos, or its jargon).
    pub corpus_word_cost: f64,
    /// Bonus, in nats, for a candidate that the corpus uses near another content word of the
    /// query (the vocabulary's pair filter).
    pub context_bonus: f64,
    /// The same bonus for typed words of at least [`Params::long_word`] letters, which are
    /// seldom names or acronyms.
    pub context_bonus_long: f64,
    /// The context bonus counts only for a candidate and a query word that would be near each
    /// other fewer times than this by chance (their corpus counts, the pair window, the corpus's
    /// length): on a large corpus, common words are near each other everywhere.
    pub context_chance_limit: f64,
    /// Letters from which a word is long.
    pub long_word: usize,
    /// ln of the probability of a word neither the lexicon nor the corpus knows: how strongly an
    /// unknown word is believed to be meant as typed (a name, an acronym).
    pub ln_unknown_word: f64,
    /// ln of the least probability a known word gets, however rare in the counts.
    pub ln_known_floor: f64,
    /// With a usage list: extra cost, in nats, of keeping an unknown word that the list does not
    /// hold (nobody writes it: a typo far more often than a name).
    pub unlisted_cost: f64,
    /// Cost, in nats, of a known word after a known word that neither the pair list nor the
    /// corpus has seen it with.
    pub unseen_pair_cost: f64,
    /// Extra cost, in nats, of changing the word a query asks the meaning of (`what is X`, `X
    /// meaning`): a term, a name or a brand rare to the asker, and rare in the lists too.
    pub defined_word_cost: f64,
    /// Whether an unknown word of `long_word` letters or more read as a typo (the usage rule
    /// and the rules beside it) is free of `defined_word_cost` for the words one edit away:
    /// `definately meaning` is asked by someone who cannot spell `definitely`, not about a
    /// rare term.
    pub defined_typo_free: bool,
    /// Occurrences added to a word's corpus count when the corpus's pairs estimate what follows
    /// it: c(a b) / (c(a) + this). A pair seen once after a word seen three times is chance as
    /// often as a phrase; 0 takes the counts as they are.
    pub corpus_pair_prior: f64,
    /// The most a pair's estimate P(b | a) counts for, in the decoder's scores and in general
    /// English's associations ([`LanguageModel::with_pair_ceiling`]): 1.5 lets a set phrase
    /// (`what is`) count half as much again as a pair at 1, which the pair list's inflated
    /// counts make of any pair written after one in 56 of its first word's writings (`hat is a
    /// caret` → `what is a caret`, `it cake to get` → `take`; the eighty-third round). 1 clips
    /// every pair there.
    pub pair_ceiling: f64,
    /// With a usage list: extra cost per letter above five of keeping an unknown word that the
    /// list does not hold (a long string nobody writes is almost never meant).
    pub unlisted_per_letter: f64,
    /// With a usage list: how much less an unknown word costs to keep per nat of how often it is
    /// written above [`Params::ln_usage_reference`] (more where below).
    pub usage_weight: f64,
    /// ln of the written frequency at which the usage list neither adds nor takes belief.
    pub ln_usage_reference: f64,
    /// With a usage list: a word no list holds, or only the corpus (rarely), is read as another
    /// word's typo rather than believed for being written when that word is written this many
    /// nats more often than it, after the edit's own cost (`seperate`, `definately`: the usage
    /// list counts the misspelling because so many people make it).
    pub typo_usage_margin: f64,
    /// The same margin for words shorter than [`Params::long_word`], which are more often names
    /// and brands beside a common word (`humana`, `perris`): higher.
    pub short_word_typo_usage_margin: f64,
    /// The short-word margin for a string the index's corpus does not write, not capitalised
    /// and not before `'s` (5): a name or term of the documents is in the corpus, while a
    /// common misspelling people write is seldom there (`saftey`, 52 per billion, beside
    /// `safety`'s 93,325; `speach`, `carrer`, `yeild`). Where only this margin reads the string
    /// as a typo, it names no candidate: the others pay no `unnamed_reading_cost` (`stard`, one
    /// key from `start`, would name `stand`). `None`: [`Params::short_word_typo_usage_margin`]
    /// (the seventieth round).
    pub short_unindexed_typo_usage_margin: Option<f64>,
    /// With a usage list: what a correction of a written string costs more when the usage rule
    /// reads the string as the typo of other words (`meen`, 105 per billion, is `mean`'s: 338,844
    /// with the same ends; not `men`'s, `teen`'s or `seen`'s, which the words beside it may
    /// prefer); a split of it pays [`Params::named_split_cost`]. A word an end letter's slip to
    /// a key beside it away counts as named where its writings pass the margin (`doed` is
    /// `does`'s, as `deed`'s), and so does a word that spells the string's sound (`thear`,
    /// `there`). A string nobody writes counts as written once in a billion words (`articals`
    /// names `articles`, not `article`), but its splits pay nothing more: it is as often words
    /// run together.
    pub unnamed_reading_cost: f64,
    /// What a split of a written string costs more where the usage rule names candidates for it
    /// (see [`Params::unnamed_reading_cost`]): more than another word, as the pieces are often
    /// function words the language model finds likely anywhere (`how soon befor workout` is no
    /// `soon be for`, `marketin` no `market in`; 4 nats, the cost of another word, until the
    /// ninety-first round).
    pub named_split_cost: f64,
    /// With a usage list: an unknown word that is a spelling variant or an inflection of a
    /// candidate (`colour`/`color`, `symptom`/`symptoms`) is still that candidate's typo when the
    /// candidate is written this many nats more often (`controled`, `develope`).
    pub variant_usage_margin: f64,
    /// The short-word margin for a string that is a word with a slip of the hand, where that
    /// word is the likeliest one edit away: one of its doubled letters written once (`coffe`,
    /// 135 per billion, against `coffee`'s 72,444; `tatoo`, `dril`, `stelar`; the eighty-ninth
    /// round) or two of its letters after the first swapped (`mena`, `brun`, `telsa`; the
    /// ninetieth) — the commonest misspellings, and seldom what tells a name from a word. Not
    /// for a string with a name's marks (a capital, a possessive). `null`: the short-word
    /// margins alone.
    pub slip_usage_margin: Option<f64>,
    /// The same margin for a three-letter word read as a function word by any slip but a
    /// dropped letter (`teh`, `adn`); high, since most short strings are acronyms (`hsa`).
    pub short_typo_usage_margin: f64,
    /// An unknown word the usage list holds at least this often (per billion words), and does
    /// not read as another word's typo, is never read as a word two edits away: people write it
    /// for itself (`euless`, `defrag`, `scituate`), and two edits from a common word is no
    /// evidence against it. 0 turns this off.
    pub written_word_usage: u64,
    /// An unknown word the usage list holds less often than that, and that does not read as
    /// another word's typo, is read as a word two edits away only where the error model prices
    /// the two at most this (3.2, what one letter added costs: `compair` → `compare`, a vowel
    /// added and a silent `e` lost, 3.1): such strings are names as often (`placida` →
    /// `placed`, 3.6; `secura` → `secured`, 4.2; written 17 and 38 times per billion, as
    /// `compair` is 17), and two edits that cost more than one slip are no evidence against
    /// them. `None` turns this off (the sixty-seventh round).
    pub rarely_written_two_edit_cost: Option<f64>,
    /// With a usage list: an unknown word of at least this many letters that the list does not
    /// hold (nobody writes it) and that keeps the first and last letters of a word one edit away
    /// is that word's typo, as a written typo is: the word is believed no less than an unknown
    /// word, however rare (`petrifyed` for `petrified`, which sits at the model's floor). Not
    /// where the string is a prefix before a listed word (`anhydrate`). 0 turns this off.
    pub unwritten_typo_letters: usize,
    /// As [`Params::unwritten_typo_letters`], from this many letters, where the word is two
    /// letters after the first swapped (`walmrat` for `walmart`, `catroon` for `cartoon`): a slip
    /// of the hand, which names and terms the lists lack rarely are, where a letter for another
    /// or one more is as often a name (`canopius`, `doffer`). 0 turns this off.
    pub unwritten_swap_letters: usize,
    /// As [`Params::unwritten_swap_letters`], where the word spells the string's sound the
    /// error model's rules' way (`fawcet` for `faucet`, `stomak` for `stomach`): people write a
    /// word they know by its sound, and a name the lists lack rarely differs from a word by a
    /// sound spelt another way alone.
    pub unwritten_respelling: bool,
    /// As [`Params::unwritten_respelling`], where the word is the string with its doubled
    /// letter doubled elsewhere, one or two edits away (`hapenn` for `happen`, `dissmis` for
    /// `dismiss`, `begginers` for `beginners`): the writer knew the letters and not which of
    /// them English doubles. The word costs [`Params::unwritten_swap_keep_cost`] less rather
    /// than the string more: the string's other readings gain nothing (`motoo` is `motto` so,
    /// not `motor`).
    pub unwritten_doubling_moved: bool,
    /// As [`Params::unwritten_swap_letters`], where the word is the string with one of its
    /// doubled letters written once, or one of its letters written twice (`ferari` for
    /// `ferrari`, `zuchini` for `zucchini`): the commonest slip of spelling there is, and a
    /// name the lists lack rarely differs from a word by a doubling alone. Lifted to the
    /// floor's gap, as the other slips are, but not lowered: a doubling is one edit from
    /// other words too.
    pub unwritten_doubling_lost: bool,
    /// As [`Params::unwritten_doubling_moved`], where the word is the string with its first
    /// letter put back, a word of [`Params::unwritten_first_lost_letters`] or more (`ervice` for
    /// `service`, `ontains` for `contains`, `ecipe` for `recipe`): a key struck too lightly,
    /// where names add letters to a word rather than take its first away. Not after that
    /// letter alone (`a ccounts`: a word broken in two, which the join reads).
    pub unwritten_first_lost: bool,
    /// The fewest letters of a word [`Params::unwritten_first_lost`] reads with its first
    /// letter lost (6; 7 until the forty-ninth round). Shorter words lose their first letter
    /// into other words and names (`lbow`, `rain`).
    pub unwritten_first_lost_letters: usize,
    /// As [`Params::unwritten_letter_lost_letters`], from as many letters, where the word is
    /// the string with its last letter put back (`stomac` for `stomach`, `scientis` for
    /// `scientist`): a query's last word cut short, or a letter the hand left off. Not where
    /// the word after begins with that letter (a word broken or run into the next, which a
    /// join or a split reads), nor for a `g` after `in` (`overhaulin`, written so on purpose).
    /// Lowered as a letter lost inside is (the sixty-sixth round).
    pub unwritten_last_lost: bool,
    /// As [`Params::unwritten_doubling_lost`], where the word is the string with one letter put
    /// back inside it (not the first, not the last), for a string nobody writes of at least this
    /// many letters (6; `brusing` for `bruising`, `mechnic` for `mechanic`, `synoym` for
    /// `synonym`): a letter left out is the commonest slip of the hand, and a name the lists lack
    /// rarely differs from a word by one letter missing inside it. Lifted to the floor's gap,
    /// and lowered as well where [`Params::unwritten_letter_lost_lowers`] says. Five-letter
    /// strings lose letters into other words (`braks` is `brakes` and `breaks`, `flaes` `flakes`
    /// and `flames`): [`Params::short_unwritten_letter_lost_letters`] reads them under guards.
    /// 0 turns this off (the fiftieth round).
    pub unwritten_letter_lost_letters: usize,
    /// As [`Params::unwritten_letter_lost_letters`], from this many letters up to it, for a
    /// string nobody writes at all (the usage list lacks it: `adres`, `stard`, `cours` are
    /// written and the usage rule weighs them), that is no two listed words run together
    /// (`inham`) and no piece of a word broken in two (`impla nt`), where the word is the
    /// likeliest one edit away by its writings less the edit's cost (`acuse` is `cause`
    /// swapped before it is `accuse` with a letter lost): `mther` for `mother`, `wsdom` for
    /// `wisdom`, `symbl` for `symbol`. 0 turns this off (the seventy-third round).
    pub short_unwritten_letter_lost_letters: usize,
    /// Whether the word [`Params::unwritten_letter_lost_letters`] reads is also lowered by
    /// [`Params::unwritten_swap_keep_cost`], as a doubling moved is: the lift alone leaves the
    /// string kept wherever its letter's edit costs more than keeping it (`vegtable soup`,
    /// `suprise party`). Not for a capitalised word, nor beside a capitalised word no list
    /// holds: names (`Edward Dorins`, `Chelidonura varians`) differ from words so too (the
    /// fifty-first round).
    pub unwritten_letter_lost_lowers: bool,
    /// As [`Params::unwritten_letter_lost_letters`], where the word is the string with one vowel
    /// inside it written as another of `a`, `e`, `i` (or `i` and `y` for each other, the
    /// sixty-ninth round: `sistemic`), for a string nobody writes of at least this many
    /// letters (6; `seleneum` for `selenium`, `vinigar` for `vinegar`, `workar` for
    /// `worker`): the vowel English leaves unstressed is spelt any of the three. Lifted to the
    /// floor's gap, never lowered: lowered as a letter lost is, the clean queries gained a
    /// wrong change and dbpedia's names one more. `o` and `u` make names as often
    /// (`canopius` → `canopies`, `Suponin` → `Saponin`). 0 turns this off (the sixty-eighth
    /// round).
    pub unwritten_vowel_letters: usize,
    /// As [`Params::unwritten_vowel_letters`], where the word is the string with one consonant
    /// inside it, neither the first nor the last, struck as a consonant next to it on the
    /// keyboard, for a string nobody writes of at least this many letters (6; `mflaren` for
    /// `mclaren`, `inpacted` for `impacted`, `synomyms` for `synonyms`): the commonest slip of
    /// a typing hand. Lifted to the floor's gap, never lowered. A vowel struck for a key beside
    /// it is left out: a vowel is spelt wrong more often than mistyped (`reciver` is no
    /// `recover`, `engeneer` no `engender`). 0 turns this off (the seventy-first round).
    pub unwritten_key_letters: usize,
    /// As [`Params::unwritten_key_letters`], from this many letters (7), where the word is the
    /// string with one consonant inside it left out that stands beside a letter next to it on
    /// the keyboard, unlike either neighbour: a finger that struck two keys (`selpfie` for
    /// `selfie`, `potgosi` for `potosi`). An added vowel is left out, as names add vowels to
    /// words (`canopius`, `Hefferon`), and so is a letter beside no key it neighbours
    /// (`champva`). 0 turns this off (the seventy-second round).
    pub unwritten_key_added_letters: usize,
    /// A string of at least this many letters before `'s` that no list holds as a word but
    /// people write, and that the usage rule reads as no common word's typo, is a name's
    /// possessive and kept as typed (5; `peyer's patch`, `marvin hagler's`, `schmorl's`):
    /// eponyms and shop names are written so. Shorter strings are slips of short words as
    /// often (`wha's`, `worl's`, `eart's`). 0 turns this off (the fifty-second round).
    pub possessive_name_letters: usize,
    /// An unknown word of at least this many letters that nobody writes (the usage list lacks
    /// it), and that keeps the first and last letters of no word within two edits, is also
    /// looked up by its sound ([`sounds`]): the words three to [`Params::sound_edits`] edits
    /// away with its consonants and syllables and its first and last letters (`nessisary` for
    /// `necessary`, `sucesfuly` for `successfully`), which no search of two edits reaches. Such
    /// a word is the string's slip as a doubling moved is ([`Params::unwritten_doubling_moved`]):
    /// lowered by [`Params::unwritten_swap_keep_cost`], but not lifted to the floor's gap: a
    /// rare word three edits off is as often a name's look-alike (`caracciola` is no
    /// `caracalla`). A word within two edits that keeps the ends is what a slip more often
    /// means, and stops the look-up. 0 turns this off.
    pub sound_letters: usize,
    /// The most letter edits a word found by its sound may be from the typed string.
    pub sound_edits: u8,
    /// Nats that keeping such a string as typed costs more (from
    /// [`Params::unwritten_swap_letters`] letters, unknown to the corpus too): a word the lists
    /// hold with two of its letters swapped is that word's typo far more often than a name
    /// (`drnik`, `sydeny`), and so is one with a sound spelt another way
    /// ([`Params::unwritten_respelling`]: `fawcet`), where an unknown string of five letters
    /// otherwise costs under a nat to keep. 0 turns this off.
    pub unwritten_swap_keep_cost: f64,
    /// The slips of a string nobody writes ([`Params::unwritten_swap_letters`] and the rules
    /// after it: letters swapped, a sound respelt, a doubling moved or lost) asked, from as many
    /// letters, of a string people write that the usage rule reads as a typo: they say which
    /// word it is two edits away too (`cinammon`, written 15 times per billion, for `cinnamon`,
    /// its doubling moved), where the usage rule names only a word it is written far less than.
    pub written_typo_slips: bool,
    /// A short string people write (fewer than [`Params::long_word`] letters) that the usage
    /// list holds e^this times less than a word one edit away with the same ends, after the
    /// edit's cost (`oxigen`, `fitler`, `chuch`), kept as typed, pays [`Params::unseen_pair_cost`]
    /// for each known neighbour, as a typo does: as typed it is never seen beside them either.
    /// It is not named a typo (the short-word margin, [`Params::short_word_typo_usage_margin`],
    /// keeps names and brands as they are); it is only no longer spared the pairs its
    /// correction pays. `None` turns this off.
    pub short_written_pairs_margin: Option<f64>,
    /// A short string people write, one edit from a word written more that a neighbour makes a
    /// set phrase with (the pair list writes the two at least e^this times more than chance:
    /// `home depot`, 6.2), kept as typed pays [`Params::unseen_pair_cost`] for each known
    /// neighbour as [`Params::short_written_pairs_margin`]'s strings do: the context wants the
    /// word (`home depo hours`). `None` turns this off (the fifty-third round).
    pub phrase_pairs_association: Option<f64>,
    /// What a word two edits from a string nobody writes pays more, where no slip explains the
    /// two (no swap, respelling, doubling moved or lost, nor the word's sound) and the string is
    /// shorter than [`Params::unwritten_typo_letters`] (1 nat): a name or a term one edit from
    /// nothing is two unrelated edits from some word as often (`millings` is no `millions`,
    /// `protime` no `prime`, `seadoos` no `seasons`), while people's slips are one edit, or
    /// two of a kind the rules name. 0 turns this off (the fifty-fourth round).
    pub unexplained_two_edit_cost: f64,
    /// An unknown word of at least this many letters that nobody writes (the usage list lacks
    /// it) may also be read as three words run together (`bankofamerica`, `howtomake`,
    /// `whatisa`): three words of the lists, none of them across a cut a listed word
    /// (`intomusic` stays two), of two letters only where a function word, of one only where the
    /// article `a` beside a function word it is listed with (`is a`), of which general English
    /// writes at least one adjacent pair often (the pair list holds it).
    /// Such a reading pays [`Params::split_cost`] twice, and each pair what a two-word split
    /// pays. 0 turns this off.
    pub three_word_split_letters: usize,
    /// A function word run into a piece of two or three letters (`ofdna`, `thetv`) is split
    /// where nobody writes the string and people write the piece at least this often per billion
    /// words (`dna`, `tv`, `ibm`: an acronym); a rarer piece beside a function word is more
    /// often part of a name (`santo`, `inola`). Such a piece needs no other list or the corpus
    /// to know it (`tv`, `ibm`). 0 turns this off: such splits are never read.
    pub acronym_piece_usage: u64,
    /// Whether an unknown word nobody writes that splits into words (`electricbaseboard`), kept
    /// as typed, pays [`Params::unseen_pair_cost`] for each known neighbour, as a typo does: as
    /// typed it is never seen beside them, while its split pays for every unseen pair. Not
    /// beside an unknown word (a name's part), not for the word the query asks the meaning of
    /// (`who is legalshield`), not where the split begins with a piece English builds words
    /// from (`over packs`).
    pub run_together_pays_pairs: bool,
    /// What a string nobody writes at the query's start pays, kept as typed, where its
    /// likeliest split begins with a function word (`howtall is james hetfield`, `isbadminton a
    /// sport`): a question opens so, which the function word's own probability does not know.
    /// 0 turns this off (the seventy-seventh round).
    pub question_start_split_cost: f64,
    /// A short string the lists do not know as a word that is a function word and the article
    /// run together (`what isa priority`, `in place ofa coffee filter`, `what isan atm
    /// mutation`) is read as the two where the word before, in the same phrase, goes with the
    /// function word e^this times more than chance in general English's pair list (`what is`,
    /// `of` after `place`), the function word with the article as much (`is a`, `of a`), and
    /// the word after takes the article. Such strings are mostly acronyms and names (`ISA`,
    /// `OFA`): at a query's start or end, or after a word that does not want the function
    /// word (`what is isa`), they stay. `None` turns this off (the seventy-eighth round).
    pub function_word_article_association: Option<f64>,
    /// An unknown word of at least this many letters that nobody writes (the usage list lacks
    /// it) and the corpus lacks, one edit from a word, kept as typed pays
    /// [`Params::unseen_pair_cost`] for each known content word beside it, as a typo does: as
    /// typed it is never seen beside them, while its correction pays for every pair it is not
    /// seen in (`salvation army foundev`). Not for a function word beside it (the pair list
    /// holds few of a rare word's pairs with one), not for a capitalised string or beside a
    /// capitalised or unknown word (a name's part), not for the word the query asks the
    /// meaning of. 0 turns this off (the sixtieth round).
    pub unwritten_pays_pairs_letters: usize,
    /// An unknown word that is the article `a` run into a word of three letters or more that
    /// starts with a consonant (`alot`, `agenre`, `abanana`) may be split so where the word
    /// before it, in the same phrase, goes with the article e^this times more than chance in
    /// general English's pair list (`have a`, `is a`, `of a`: 4.7–6; `will a` 0.1, `my a` −1):
    /// elsewhere such a string is a term or a name (`aplastic anemia`, `anet`). `None` turns
    /// this off: a single letter is then never split off (the sixty-first round).
    pub article_split_association: Option<f64>,
    /// Such a string people write is split so only where general English writes the article
    /// and the word apart e^this times more often than the string (`alot`, 8,511 per billion:
    /// e^7.2); a string nobody writes needs no margin.
    pub article_written_apart_margin: f64,
    /// Whether a string people write that starts a query or a phrase is read as the article
    /// run into the word after it (`Alot of` → `A lot of`), where no word before can want the
    /// article: only where the pair list writes the two words
    /// e^[`Params::article_written_apart_margin`] times more than the string is written, and
    /// the word after goes with the word split off as the word before must with the article
    /// ([`Params::article_split_association`]: `lot of`; `aplastic anemia` stays).
    pub article_split_at_start: bool,
    /// The same after a word in the phrase that does not want the article
    /// ([`Params::article_split_association`]): the word after speaks where the word before
    /// does not (`Nowadays alot of people` → `a lot of`, `nowadays a` being no pair general
    /// English writes; the eighty-fourth round).
    pub article_split_by_next_word: bool,
    /// Whether a string nobody writes that ends in the article `a` is read as a word with the
    /// article run into its end (`what doesa psychotherapist do` → `does a`, `makesa person`):
    /// where the word goes with the article e^[`Params::article_split_association`] times more
    /// than chance and the next word, in the same phrase, is a content word starting with a
    /// consonant (`an` goes before a vowel). Without it such a string loses the article as a
    /// letter added (`does psychotherapist`). `false` turns this off (the seventy-fourth round).
    pub article_split_at_end: bool,
    /// A string nobody writes that is a word people write but no word list holds (a name, an
    /// acronym, a term: `tristesse`, `floxin`, `cmc`) run into a common word of at least
    /// [`Params::name_run_into_word_letters`] letters (`tristessedefinition`, `floxinotic`,
    /// `cmcprogram`) is read as the two, where people write the word at least this often per
    /// billion words; not where the first piece is a prefix English makes words with or begins
    /// more than [`Params::name_run_into_word_beginnings`] listed words (`simplicheck`:
    /// `simpli` is a piece of `simplify`). 0 turns this off (the seventy-fifth round).
    pub name_run_into_word_usage: u64,
    /// The least letters of the word in [`Params::name_run_into_word_usage`].
    pub name_run_into_word_letters: usize,
    /// The most listed words the name in [`Params::name_run_into_word_usage`] may begin.
    pub name_run_into_word_beginnings: usize,
    /// A string nobody writes that is a function word a name follows (a preposition, `is`,
    /// `and`, `the`) run into a name people write at least this often per billion words but no
    /// word list holds (`fromhemorrhoid`, `torestasis`, `isbetts`) is read as the two; a rarer
    /// string after the function word is as often a piece of a longer word (`intensest`). The
    /// name is read as in [`Params::name_run_into_word_usage`]. 0 turns this off (the
    /// seventy-sixth round).
    pub function_word_run_into_name_usage: u64,
    /// A string nobody writes that is a common word (as in [`Params::name_run_into_word_usage`],
    /// no prefix English makes words with) run into a name of four letters or more people write
    /// at least this often per billion words but no word list holds (`tricuspidatresia`) is read
    /// as the two. 0 turns this off (the seventy-ninth round).
    pub word_run_into_name_usage: u64,
    /// A string people write is read as two words run together, as if nobody wrote it, where
    /// general English writes the two words apart e^this times more often than the usage list
    /// says the string is written ([`Repairer::written_apart`]; `ofthe`, `whois`: 0 turns
    /// this off).
    pub written_apart_margin: f64,
    /// A string people write is split into two words only where general English writes the
    /// two apart e^this times more often than the usage list says the string is written
    /// ([`Repairer::written_apart_as`]): a string written for itself is a name or a word the
    /// lists lack (`south easton ma` is no `east on`, written 20 times less than `easton` is
    /// written), while words run together are written apart far more (`aswell`, `eachother`:
    /// e^7 and more). The article's split has its own margin
    /// ([`Params::article_written_apart_margin`]). `None` turns this off (the eighty-third
    /// round).
    pub written_split_margin: Option<f64>,
    /// Two unknown strings people write that join into a word written e^this times more than
    /// each lose, against the join, what their being written earned them
    /// (`sala ry` → `salary`); 0 turns this off.
    pub fragment_usage_margin: f64,
    /// A typed word whose first two letters begin fewer than this many words of the lexicon
    /// begins as no English word does (`wxons`, `hsarks`, `fmavir`): its first letter is as likely
    /// a slip as any other, so an edit there pays no extra cost — but for a letter typed before
    /// a whole word (`vcenter`, `xpress`), which is how names are made. 0 turns this off; so does
    /// a lexicon of fewer than [`MIN_LEXICON_FOR_STARTS`] words, too few to say how words begin.
    pub rare_start_words: u32,
    /// Whether such a word that nobody writes is read as a typo
    /// (see [`Repairer::unwritten_rare_start`]).
    pub rare_start_typo: bool,
    /// A pair of words the general list holds e^this times less than the same pair with a word
    /// one edit away counts, for a real-word error, as never seen (`side affects`); a pair with
    /// a function word, e^this times less than the two words' own counts give, and only where
    /// a content word beside it speaks for the word one edit away (`side affects of`).
    pub typo_pair_margin: f64,
    /// A function word beside a known word (where no content word is on that side) speaks for
    /// a real-word reading by how much more the reading goes with it than the typed word does,
    /// in general English: the pair's count over what the two words' counts give by chance, so
    /// that a common word gains nothing for being common beside a word that goes with
    /// everything (`how long should`, not `how lone should`; `kind of`, not `king of`). This
    /// opens the gate of [`Params::real_word_cost`]; the decoder weighs the pairs itself. A pair
    /// the list lacks with the typed word is taken as associated up to this many nats (the list
    /// keeps only frequent pairs: a rare word's are missing). `null` turns this off.
    pub function_word_context: Option<f64>,
    /// How many of the documents the query as typed retrieves vote on its words (where the
    /// caller searches before repairing: `capot repair --encoder`, `capot eval`, `/search`); 0
    /// turns the vote off.
    pub vote_documents: usize,
    /// A candidate that at least this many of the voting documents use, where none uses the
    /// typed word, has the index's vote.
    pub vote_min_documents: u32,
    /// ... and at least this many times as many as would use a word as common by chance.
    pub vote_lift: f64,
    /// The vote on a word counts only where the documents use at least this share of the
    /// query's other content words (and one).
    pub vote_on_topic: f64,
    /// ... and none of those the word lists know is one the corpus never writes: no document
    /// of it is about the whole query then, only about its other words (`chicken tortilla soup`
    /// retrieves sous-vide chicken). `false`: such words count as the documents' other misses.
    pub vote_needs_corpus_words: bool,
    /// Nats a non-word's candidate with the index's vote gains.
    pub vote_bonus: f64,
    /// Nats a real-word candidate with the index's vote gains; with it, no neighbour needs to
    /// speak for the change.
    pub real_word_vote: f64,
    /// Nats a real-word candidate with the index's vote gains instead where most of the voting
    /// documents use it: they agree on the reading.
    pub real_word_vote_most: f64,
    /// Nats a real-word candidate gains where the corpus's documents use it near every other
    /// content word of the query they hold that chance would not bring near it (the
    /// vocabulary's pair filter), at least [`Params::real_word_passage_words`], and the typed
    /// word near none of them: the corpus the index holds speaks as the index's vote does,
    /// without an encoder (`how are some sharks warm flooded` → `blooded`, `when was the
    /// salvation arms founded` → `army`; the eightieth round). `None` turns it off.
    pub real_word_passage_gain: Option<f64>,
    /// The least number of the query's other content words a real-word candidate must be near
    /// in the corpus for [`Params::real_word_passage_gain`].
    pub real_word_passage_words: usize,
    /// Nats a word one edit from a string of two or three letters (the two lengths below
    /// [`Params::min_letters`]) gains where at least half of the voting documents use the word
    /// and none the string: what the documents about the query write says which word so short
    /// a slip was (`do goldfish gow`). 0 turns this off.
    pub short_word_vote: f64,
    /// A string of three letters the word list lacks may be a content word with a letter
    /// dropped or one slip of the hand away where general English's pair list holds that word
    /// with every known word beside it, function words too, in a set phrase with one
    /// ([`Params::set_phrase_over_chance`]: `how to fnd the` → `find`, `how to get ric of` →
    /// `rid`), as well as (a letter dropped) where the corpus pairs it with a content word
    /// beside it. `false`: the corpus alone.
    pub three_letter_set_phrases: bool,
    /// How many times more than chance (ln) general English must write the word with a
    /// neighbour for [`Params::three_letter_set_phrases`]: a set phrase (`to find`, `used
    /// for`, 6.1), not a pair any word makes with a function word (`is best`, 4.9).
    pub set_phrase_over_chance: f64,
    /// Nats an unknown word gains, kept as typed, when a voting document uses it (a name the
    /// documents about the query hold).
    pub vote_keep: f64,
    /// A string only the corpus knows, written there this many times or fewer and absent from
    /// the usage list, is the corpus's own typo where [`Params::vote_lift`] times as many voting
    /// documents write a candidate as write it: the vote holds for the candidate as if none
    /// wrote the string, and the string gains no [`Params::vote_keep`]. 0: any document writing
    /// the string blocks the vote.
    pub vote_corpus_typo_count: u64,
}

/// The fewest lexicon words from which [`Params::rare_start_words`] is believed.
pub const MIN_LEXICON_FOR_STARTS: usize = 10_000;

impl Default for Params {
    fn default() -> Self {
        Params {
            min_letters: 4,
            two_edits_from: 6,
            two_doubled_letters: true,
            min_split_letters: 5,
            min_join_letters: 5,
            min_corpus_count: 2,
            usage_candidate_per_billion: 100,
            borrow_british_pairs: true,
            max_candidates: 8,
            real_word_cost: 8.0,
            real_word_swap_cost: Some(5.0),
            real_word_at_start: true,
            homophone_cost: Some(2.0),
            over_regularised_cost: Some(1.0),
            split_cost: -2.5,
            compound_split_cost: 3.0,
            unwritten_compound_bonus: 3.0,
            unwritten_compound_letters: 4,
            unwritten_compound_short_letters: 3,
            function_split_cost: 2.5,
            function_word_cost: 10.0,
            unknown_function_word_cost: 6.0,
            swapped_function_word_cost: Some(6.0),
            swapped_question_association: 3.0,
            function_word_start_cost: 7.0,
            function_word_start_foreign_cost: 8.5,
            question_start_lift: 3.0,
            frame_word_lift: 3.0,
            function_word_letter_cost: Some(4.0),
            function_word_phrase_association: Some(6.0),
            comparative_association: Some(6.5),
            join_known_cost: 12.0,
            compound_written_together_margin: Some(2.0),
            compound_apart_association: 3.0,
            compound_least_usage: 500,
            unknown_per_letter: 0.3,
            unknown_per_extra_letter: 0.3,
            corpus_word_cost: 3.0,
            context_bonus: 0.5,
            context_bonus_long: 2.0,
            context_chance_limit: 1.0,
            long_word: 7,
            ln_unknown_word: -10.0,
            ln_known_floor: -12.0,
            unlisted_cost: 1.0,
            unseen_pair_cost: 1.0,
            question_start_split_cost: 2.5,
            function_word_article_association: Some(3.0),
            corpus_pair_prior: 10.0,
            pair_ceiling: 1.5,
            defined_word_cost: 3.0,
            defined_typo_free: true,
            unlisted_per_letter: 0.3,
            usage_weight: 1.0,
            ln_usage_reference: -17.0,
            typo_usage_margin: 2.0,
            short_word_typo_usage_margin: 6.0,
            short_unindexed_typo_usage_margin: Some(5.0),
            unnamed_reading_cost: 4.0,
            named_split_cost: 6.0,
            variant_usage_margin: 4.0,
            slip_usage_margin: Some(3.0),
            short_typo_usage_margin: 8.5,
            written_word_usage: 40,
            rarely_written_two_edit_cost: Some(3.2),
            unwritten_typo_letters: 9,
            unwritten_swap_letters: 5,
            unwritten_respelling: true,
            unwritten_doubling_moved: true,
            unwritten_doubling_lost: true,
            unwritten_first_lost: true,
            unwritten_first_lost_letters: 6,
            unwritten_last_lost: true,
            unwritten_letter_lost_letters: 6,
            short_unwritten_letter_lost_letters: 5,
            unwritten_letter_lost_lowers: true,
            unwritten_vowel_letters: 6,
            unwritten_key_letters: 6,
            unwritten_key_added_letters: 7,
            possessive_name_letters: 5,
            sound_letters: 7,
            sound_edits: 4,
            unwritten_swap_keep_cost: 2.0,
            written_typo_slips: true,
            short_written_pairs_margin: Some(5.0),
            phrase_pairs_association: Some(6.0),
            unexplained_two_edit_cost: 1.0,
            three_word_split_letters: 7,
            acronym_piece_usage: 1000,
            run_together_pays_pairs: true,
            unwritten_pays_pairs_letters: 4,
            article_split_association: Some(3.0),
            article_written_apart_margin: 6.0,
            article_split_at_start: true,
            article_split_by_next_word: true,
            article_split_at_end: true,
            name_run_into_word_usage: 10_000,
            name_run_into_word_letters: 5,
            name_run_into_word_beginnings: 2,
            function_word_run_into_name_usage: 20,
            word_run_into_name_usage: 20,
            written_apart_margin: 7.5,
            written_split_margin: Some(4.0),
            fragment_usage_margin: 1.0,
            rare_start_words: 3,
            rare_start_typo: true,
            typo_pair_margin: 2.0,
            function_word_context: Some(1.0),
            vote_documents: 10,
            vote_min_documents: 2,
            vote_lift: 3.0,
            vote_on_topic: 0.75,
            vote_needs_corpus_words: true,
            vote_bonus: 4.0,
            real_word_vote: 6.0,
            real_word_vote_most: 12.0,
            real_word_passage_gain: Some(6.0),
            real_word_passage_words: 2,
            short_word_vote: 6.0,
            three_letter_set_phrases: true,
            set_phrase_over_chance: 5.5,
            vote_keep: 2.0,
            vote_corpus_typo_count: 2,
        }
    }
}

/// The fewest consonant classes a sound key files a word under: shorter keys hold too many
/// words to tell a misspelling by ear from a word that sounds alike.
const SOUND_KEY_MIN: usize = 3;

/// [`Repairer`]'s `candidate_usage` of a word the usage list lacks.
const CANDIDATE_UNWRITTEN: u32 = u32::MAX;
/// [`Repairer`]'s `candidate_usage` of a count too large for it: the list is asked.
const CANDIDATE_USAGE_OVER: u32 = u32::MAX - 1;

/// ln of a usage list's count per billion words.
pub(crate) fn ln_usage(per_billion: u64) -> f64 {
    (per_billion.max(1) as f64 * 1e-9).ln()
}

/// The corrector of one index: its vocabulary, the lexicon when loaded, and the model built from
/// the two.
pub struct Repairer {
    vocab: Arc<Vocabulary>,
    lexicon: Option<Arc<Lexicon>>,
    pub(crate) lm: LanguageModel,
    pub(crate) candidates: CandidateIndex,
    /// The candidates filed by sound ([`Params::sound_letters`]), with the same ids.
    pub(crate) sounds: sounds::SoundIndex,
    pub(crate) candidate_stats: Vec<WordStats>,
    /// How often each candidate is written (see [`Repairer::candidate_usage`]), read from the
    /// usage list once: [`CANDIDATE_UNWRITTEN`] where it lacks the word.
    candidate_usage: Vec<u32>,
    /// The first candidate id of the words only the usage list holds
    /// ([`Params::usage_candidate_per_billion`]).
    usage_words_from: u32,
    pub(crate) params: Params,
}

impl fmt::Debug for Repairer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Repairer")
            .field("vocab", &self.vocab.info())
            .field("lexicon_words", &self.lexicon.as_ref().map(|l| l.len()))
            .field("candidates", &self.candidates)
            .finish()
    }
}

/// What the model is made of and what it lacks (for `/info` and the log).
#[derive(Debug, Clone, Serialize)]
pub struct ModelInfo {
    /// Words that can be corrected towards.
    pub candidates: usize,
    /// Whether the index's adjacent-word counts are loaded (`capot index vocab` adds them).
    pub corpus_bigrams: bool,
    /// Whether a general word-pair list is loaded.
    pub general_bigrams: bool,
    /// What is missing, in words; empty when nothing is.
    pub missing: Vec<String>,
    /// Bytes of memory the model holds beyond the vocabulary and the lexicon.
    pub heap_bytes: usize,
}

impl Repairer {
    /// A corrector over `vocab`, with `lexicon` as general English when there is one.
    pub fn new(vocab: Arc<Vocabulary>, lexicon: Option<Arc<Lexicon>>) -> Self {
        Self::with_params(vocab, lexicon, Params::default())
    }

    /// The same speller (lexicon and settings) over another vocabulary: a compacted version's.
    pub fn with_vocabulary(&self, vocab: Arc<Vocabulary>) -> Self {
        Repairer::with_params(vocab, self.lexicon.clone(), self.params.clone())
    }

    /// The same, with other settings.
    pub fn with_params(
        vocab: Arc<Vocabulary>,
        lexicon: Option<Arc<Lexicon>>,
        params: Params,
    ) -> Self {
        let lm = LanguageModel::new(vocab.clone(), lexicon.clone(), params.ln_unknown_word.exp())
            .with_unseen_pair_cost(params.unseen_pair_cost)
            .with_known_floor(params.ln_known_floor.exp())
            .with_pair_prior(params.corpus_pair_prior)
            .with_pair_ceiling(params.pair_ceiling);
        // The lexicon's spelling order, built here rather than in the first query that asks.
        if params.name_run_into_word_usage > 0 || params.function_word_run_into_name_usage > 0 {
            if let Some(l) = &lexicon {
                l.words_beginning_with("");
            }
        }
        // Candidates: every lexicon word, then the corpus's own words that occur often enough.
        let mut words: Vec<String> = lexicon
            .as_ref()
            .map(|l| l.words().map(str::to_string).collect())
            .unwrap_or_default();
        let mut corpus_only: Vec<(u64, String)> = Vec::new();
        let mut stream = fst::IntoStreamer::into_stream(vocab.counts().stream());
        while let Some((key, count)) = fst::Streamer::next(&mut stream) {
            if count < params.min_corpus_count || !key.iter().all(u8::is_ascii_lowercase) {
                continue;
            }
            let Ok(w) = std::str::from_utf8(key) else {
                continue;
            };
            if lexicon.as_ref().is_some_and(|l| l.contains(w)) {
                continue;
            }
            corpus_only.push((count, w.to_string()));
        }
        if corpus_only.len() > MAX_CORPUS_CANDIDATES {
            corpus_only.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
            corpus_only.truncate(MAX_CORPUS_CANDIDATES);
        }
        words.extend(corpus_only.into_iter().map(|(_, w)| w));
        let mut candidate_stats: Vec<WordStats> = words.iter().map(|w| lm.stats(w)).collect();
        // Then the words people write that neither holds, at the usage list's frequency.
        let usage_words_from = words.len() as u32;
        if let Some(l) = lexicon
            .as_ref()
            .filter(|_| params.usage_candidate_per_billion > 0)
        {
            let listed: std::collections::HashSet<&str> =
                words.iter().map(String::as_str).collect();
            let written: Vec<(String, u64)> = l
                .written_at_least(params.usage_candidate_per_billion)
                .into_iter()
                .filter(|(w, _)| {
                    w.len() >= params.min_letters
                        && w.bytes().all(|b| b.is_ascii_lowercase())
                        && !listed.contains(w.as_str())
                })
                .collect();
            for (w, per_billion) in written {
                let mut stats = lm.stats(&w);
                stats.general = (per_billion as f64 * 1e-9 * l.total() as f64)
                    .round()
                    .max(1.0) as u64;
                // An American spelling the word list lacks (`colors`, `anemia`) goes with the
                // words its British spelling goes with: it has that spelling's pairs.
                if params.borrow_british_pairs && stats.lexicon_id.is_none() {
                    stats.lexicon_id = decoder::british_spelling(&w, |b| l.id(b));
                    stats.borrowed_pairs = stats.lexicon_id.is_some();
                }
                candidate_stats.push(stats);
                words.push(w);
            }
        }
        let candidate_usage = words
            .iter()
            .map(|w| match lm.usage(w) {
                None => CANDIDATE_UNWRITTEN,
                Some(c) => u32::try_from(c)
                    .ok()
                    .filter(|&c| c < CANDIDATE_USAGE_OVER)
                    .unwrap_or(CANDIDATE_USAGE_OVER),
            })
            .collect();
        let candidates = CandidateIndex::build(words.iter().map(String::as_str));
        let sounds = sounds::SoundIndex::build(words.iter().map(String::as_str), SOUND_KEY_MIN);
        Repairer {
            vocab,
            lexicon,
            lm,
            candidates,
            sounds,
            candidate_stats,
            candidate_usage,
            usage_words_from,
            params,
        }
    }

    /// Drops from a word's candidates those only the usage list holds where another of them,
    /// as few edits away, is more frequent in general English: the usage list holds many a
    /// word's typos and variants (`seperate`, `pokemons`), and the model's floor would price
    /// them as the word.
    pub(crate) fn drop_rarer_usage_words(&self, found: &mut Vec<(u32, u8)>) {
        if !found.iter().any(|&(id, _)| id >= self.usage_words_from) {
            return;
        }
        // Counts on the lexicon's scale: a usage word's is its writings'.
        let general = |id: u32| self.candidate_stats[id as usize].general;
        let all = found.clone();
        found.retain(|&(id, d)| {
            id < self.usage_words_from || {
                let written = general(id);
                !all.iter()
                    .any(|&(other, e)| other != id && e <= d && general(other) > written)
            }
        });
    }

    /// The vocabulary it corrects towards.
    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// The lexicon, if loaded.
    pub fn lexicon(&self) -> Option<&Arc<Lexicon>> {
        self.lexicon.as_ref()
    }

    /// Its settings.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// What the model is made of and what it lacks.
    pub fn model_info(&self) -> ModelInfo {
        let mut missing = Vec::new();
        if self.lexicon.is_none() {
            missing.push("no lexicon: only the corpus decides what is a word".to_string());
        } else if !self.lm.has_general_bigrams() {
            missing.push(
                "no general word-pair list: real-word errors are corrected from the corpus's pairs alone"
                    .to_string(),
            );
        }
        if !self.lm.has_corpus_bigrams() {
            missing.push(
                "the index has no bigram counts (built before they existed): run `capot index vocab` to add them"
                    .to_string(),
            );
        }
        ModelInfo {
            candidates: self.candidates.len(),
            corpus_bigrams: self.lm.has_corpus_bigrams(),
            general_bigrams: self.lm.has_general_bigrams(),
            missing,
            heap_bytes: self.candidates.heap_bytes()
                + self.sounds.heap_bytes()
                + self.candidate_stats.len() * 32,
        }
    }

    /// Whether a word with these stats may be a split's piece: known to the lexicon, or to the
    /// corpus often enough.
    pub(crate) fn usable(&self, s: &WordStats) -> bool {
        s.general > 0 || s.corpus >= self.params.min_corpus_count
    }

    /// Whether people write `word` (the usage list holds it), other than as two words run
    /// together ([`Repairer::written_apart`]).
    pub(crate) fn written(&self, word: &str) -> bool {
        self.lm.usage(word).is_some() && !self.written_apart(word)
    }

    /// Whether a string people write (`ofthe`, `whois`, `howmuch`) is written as two words
    /// e^[`Params::written_apart_margin`] times more often (the general pair list's share of
    /// the pair against the usage list's of the string): its writings are those words run
    /// together, a typo as the usage rule reads one. Strings no shorter than
    /// [`Params::min_split_letters`], that no list or corpus knows as a word.
    pub(crate) fn written_apart(&self, word: &str) -> bool {
        let margin = self.params.written_apart_margin;
        if margin <= 0.0 || word.len() < self.params.min_split_letters || !word.is_ascii() {
            return false;
        }
        let Some(per_billion) = self.lm.usage(word) else {
            return false;
        };
        if self.lm.stats(word).known() {
            return false;
        }
        (1..word.len()).any(|k| {
            let (a, b) = word.split_at(k);
            self.written_apart_as(per_billion, a, b, margin)
        })
    }

    /// Whether general English's pair list writes `a b` e^`margin` times more often than the
    /// usage list says the string they join into is written (`per_billion`).
    pub(crate) fn written_apart_as(&self, per_billion: u64, a: &str, b: &str, margin: f64) -> bool {
        let least = per_billion as f64 * 1e-9 * margin.exp();
        let (sa, sb) = (self.lm.stats(a), self.lm.stats(b));
        sa.general > 0 && sb.general > 0 && self.lm.general_pair_share(&sa, &sb) >= least
    }

    /// Whether two known words are one word split (`heart burn` → `heartburn`): the usage
    /// list writes the word they join into e^[`Params::compound_written_together_margin`]
    /// times more often than general English can write the pair
    /// ([`LanguageModel::general_pair_share_at_most`]), and the corpus writes the pair no more
    /// often than the word (`snake bite`, where its documents write it so, stays).
    pub(crate) fn written_together(&self, joined: &str, a: &str, b: &str) -> bool {
        let Some(margin) = self.params.compound_written_together_margin else {
            return false;
        };
        let Some(per_billion) = self
            .lm
            .usage(joined)
            .filter(|&n| n >= self.params.compound_least_usage)
        else {
            return false;
        };
        let (sa, sb, sj) = (self.lm.stats(a), self.lm.stats(b), self.lm.stats(joined));
        if sa.general == 0 || sb.general == 0 || sj.general == 0 {
            return false;
        }
        // A function word goes with almost any word more than chance (`is sued`, `how ling`,
        // `a steroid`): its missing pairs count as written as often as the least listed. After
        // a content word, letters that make a function word are as often the end of a word
        // broken in two (`surge on`, `florid a`, `christi an`): such a missing pair counts as
        // the least listed in the word list's scale (some 210 writings per billion words;
        // `surgeon` is written 13,490 times).
        use crate::index::vocab::is_stopword;
        let association = match (is_stopword(a), is_stopword(b)) {
            (true, _) => Some(f64::INFINITY),
            (false, true) => None,
            (false, false) => Some(self.params.compound_apart_association),
        };
        let apart = self.lm.general_pair_share_at_most(&sa, &sb, association);
        apart > 0.0
            && per_billion as f64 * 1e-9 >= apart * margin.exp()
            && self.vocab.bigram(a, b) <= sj.corpus
    }

    /// What the usage list adds to the cost of keeping an unknown word as typed: more when
    /// nobody writes it, less the more it is written. 0 without a usage list.
    pub(crate) fn usage_cost(&self, word: &str) -> f64 {
        let Some(lex) = self.lexicon.as_ref().filter(|l| l.has_usage()) else {
            return 0.0;
        };
        match lex.usage(word) {
            None => self.unlisted_cost(word),
            Some(_) if self.written_apart(word) => self.unlisted_cost(word),
            Some(per_billion) => {
                -self.params.usage_weight * (ln_usage(per_billion) - self.params.ln_usage_reference)
            }
        }
    }

    /// The extra cost of a slip at the first letter of `typed`: none when it begins as no
    /// English word does ([`Params::rare_start_words`]), else [`error_model::FIRST_LETTER`].
    pub(crate) fn first_letter_cost(&self, typed: &str) -> f32 {
        if self.rare_start(typed) {
            0.0
        } else {
            error_model::FIRST_LETTER
        }
    }

    /// Whether `typed` begins as no English word does ([`Params::rare_start_words`]).
    fn rare_start(&self, typed: &str) -> bool {
        self.lexicon
            .as_ref()
            .filter(|l| l.len() >= MIN_LEXICON_FOR_STARTS)
            .and_then(|l| l.words_starting_like(typed))
            .is_some_and(|n| n < self.params.rare_start_words)
    }

    /// Whether `typed` begins as no English word does and nobody writes it (the usage list
    /// lacks it): a slip, not a name (`hsarks`, `wjfi`; `xfinity` and `vcenter` are written).
    pub(crate) fn unwritten_rare_start(&self, typed: &str) -> bool {
        self.params.rare_start_typo
            && self.has_usage()
            && self.rare_start(typed)
            && self.ln_usage(typed).is_none()
    }

    /// Whether `typed` is a string nobody writes, long enough to be looked up by its sound
    /// ([`Params::sound_letters`]).
    pub(crate) fn looks_up_sounds(&self, typed: &str) -> bool {
        let letters = self.params.sound_letters;
        letters > 0 && typed.len() >= letters && self.has_usage() && self.ln_usage(typed).is_none()
    }

    /// Whether a usage list is loaded.
    pub(crate) fn has_usage(&self) -> bool {
        self.lexicon.as_ref().is_some_and(|l| l.has_usage())
    }

    /// The other words that sound as `word` does, when a homophone list is loaded.
    pub(crate) fn homophones(&self, word: &str) -> &[Box<str>] {
        self.lexicon.as_ref().map_or(&[], |l| l.homophones(word))
    }

    /// The forms of an irregular verb that `word` puts the regular past ending on, when a verb
    /// list is loaded (`taught` for `teached`).
    pub(crate) fn over_regularised(&self, word: &str) -> &[Box<str>] {
        self.lexicon
            .as_ref()
            .map_or(&[], |l| l.over_regularised(word))
    }

    /// The cost of keeping a word that nobody writes (see [`Params::unlisted_cost`]).
    pub(crate) fn unlisted_cost(&self, word: &str) -> f64 {
        self.params.unlisted_cost
            + self.params.unlisted_per_letter * word.len().saturating_sub(5) as f64
    }

    /// How often candidate `id` is written, per billion words ([`LanguageModel::usage`] of its
    /// word).
    pub(crate) fn candidate_usage(&self, id: u32) -> Option<u64> {
        match self.candidate_usage[id as usize] {
            CANDIDATE_UNWRITTEN => None,
            CANDIDATE_USAGE_OVER => self.lm.usage(self.candidates.word(id)),
            c => Some(u64::from(c)),
        }
    }

    /// ln of how often `word` is written (a share of all words), when a usage list holds it.
    pub(crate) fn ln_usage(&self, word: &str) -> Option<f64> {
        let lex = self.lexicon.as_ref()?;
        lex.usage(word).map(ln_usage)
    }

    /// [`Params::context_bonus`] when the corpus uses `candidate` (seen `candidate_count` times in
    /// it) near a content word of the query, and the two are not so common that they would meet
    /// by chance ([`Params::context_chance_limit`]), else 0.
    pub(crate) fn context_bonus(
        &self,
        candidate: &str,
        candidate_count: u64,
        typed_letters: usize,
        words: &[query::QueryWord],
    ) -> f64 {
        let near = words.iter().any(|w| {
            w.content
                && w.stats.known()
                && w.lower != candidate
                && self.meetings_by_chance(candidate_count, w.stats.corpus)
                    < self.params.context_chance_limit
                && self.vocab.near(candidate, &w.lower)
        });
        if near && typed_letters >= self.params.long_word {
            self.params.context_bonus_long
        } else if near {
            self.params.context_bonus
        } else {
            0.0
        }
    }

    /// Times two words the corpus holds `a` and `b` times would fall within the pair window
    /// of each other if its words were scattered at random: on a large corpus common words meet
    /// everywhere, and meeting says nothing.
    fn meetings_by_chance(&self, a: u64, b: u64) -> f64 {
        let tokens = self.vocab.info().tokens.max(1) as f64;
        a as f64 * b as f64 * (2 * crate::index::vocab::PAIR_WINDOW) as f64 / tokens
    }

    /// How many of the content words of `words` the corpus holds (but the one at `except`, and
    /// `word` itself) it uses near `word`, seen `count` times in it (the vocabulary's pair
    /// filter), and how many were asked. With `beyond_chance`, only words chance would not
    /// bring near it ([`Params::context_chance_limit`]) are asked.
    pub(crate) fn near_in_corpus(
        &self,
        word: &str,
        count: u64,
        words: &[query::QueryWord],
        except: Option<usize>,
        beyond_chance: bool,
    ) -> (usize, usize) {
        words
            .iter()
            .enumerate()
            .filter(|&(i, w)| {
                Some(i) != except
                    && w.content
                    && w.stats.corpus > 0
                    && w.lower != word
                    && (!beyond_chance
                        || self.meetings_by_chance(count, w.stats.corpus)
                            < self.params.context_chance_limit)
            })
            .fold((0, 0), |(near, asked), (_, w)| {
                (
                    near + usize::from(self.vocab.near(word, &w.lower)),
                    asked + 1,
                )
            })
    }

    /// One pass of the decoder over `text`, a sentence at a time ([`query::sentences`]).
    fn repair_once(
        &self,
        text: &str,
        also_known: &dyn Fn(&str) -> bool,
        retrieved: Option<&RetrievedWords>,
        lookups: &mut decoder::Lookups,
    ) -> Repaired {
        let mut edits = Vec::new();
        for span in query::sentences(text) {
            let sentence = &text[span.clone()];
            for mut e in self.sentence_edits(sentence, also_known, retrieved, lookups) {
                e.start += span.start;
                edits.push(e);
            }
        }
        if edits.is_empty() {
            return Repaired::unchanged(text);
        }
        apply(text, edits)
    }

    /// The edits of one pass over one sentence, read as a query of its own.
    fn sentence_edits(
        &self,
        text: &str,
        also_known: &dyn Fn(&str) -> bool,
        retrieved: Option<&RetrievedWords>,
        lookups: &mut decoder::Lookups,
    ) -> Vec<Edit> {
        let Some(words) = query::scan(text, &self.lm, also_known) else {
            return Vec::new();
        };
        let readings = decoder::readings(self, &words, retrieved, lookups);
        if readings.iter().all(|r| r.len() == 1) {
            return Vec::new();
        }
        let lift = decoder::question_start_lift(self, &words);
        let mut memo = decoder::Transitions::default();
        let (path, best) = decoder::best_path(self, &readings, &[], lift, &mut memo);
        let mut edits = Vec::new();
        for &(pos, ri) in &path {
            let rd = &readings[pos][ri];
            let Some(kind) = rd.kind else { continue };
            let first = &words[pos];
            let last = &words[pos + rd.span - 1];
            let from = &text[first.start..last.end];
            let meant: Vec<&str> = rd.words.iter().map(|w| w.0.as_str()).collect();
            let to = match_case(from, &meant.join(" "));
            // How much likelier than reading these words as typed.
            let forced: Vec<usize> = (pos..pos + rd.span).collect();
            let (_, alt) = decoder::best_path(self, &readings, &forced, lift, &mut memo);
            let margin = (best - alt).max(0.0);
            edits.push(Edit {
                kind,
                from: from.to_string(),
                to,
                start: first.start,
                distance: rd.distance,
                confidence: (1.0 / (1.0 + (-margin).exp())) as f32,
            });
        }
        edits.retain(|e| e.from != e.to);
        edits
    }

    /// Repairs `text`. Never fails: a query it cannot or should not correct comes back as it is.
    /// Idempotent: the result, repaired again, comes back unchanged.
    pub fn repair(&self, text: &str) -> Repaired {
        self.repair_knowing(text, &|_| false)
    }

    /// [`Repairer::repair`], with the words `also_known` says the corpus holds besides the
    /// vocabulary's (the live segment's: documents written since the index was built) left as
    /// typed when no list knows them — a new product name is no typo.
    pub fn repair_knowing(&self, text: &str, also_known: &dyn Fn(&str) -> bool) -> Repaired {
        self.repair_with(text, also_known, None)
    }

    /// [`Repairer::repair_knowing`], with the index's vote: the words of the documents the
    /// query as typed retrieved ([`Params::vote_documents`] of them) speak for the candidates
    /// they use and for the typed words they use (see docs/repair.md, "The index's vote").
    pub fn repair_with(
        &self,
        text: &str,
        also_known: &dyn Fn(&str) -> bool,
        retrieved: Option<&RetrievedWords>,
    ) -> Repaired {
        recall::remembering(|| self.repair_to_fixed_point(text, also_known, retrieved))
    }

    /// [`Repairer::repair_with`], within one span of [`recall::remembering`].
    fn repair_to_fixed_point(
        &self,
        text: &str,
        also_known: &dyn Fn(&str) -> bool,
        retrieved: Option<&RetrievedWords>,
    ) -> Repaired {
        let retrieved = retrieved.filter(|r| r.documents() > 0);
        let mut lookups = decoder::Lookups::default();
        let mut current = self.repair_once(text, also_known, retrieved, &mut lookups);
        for _ in 0..3 {
            if !current.changed() {
                return current;
            }
            let again = self.repair_once(&current.text, also_known, retrieved, &mut lookups);
            if !again.changed() {
                return current;
            }
            match compose(text, &current, &again) {
                Some(c) => current = c,
                None => break,
            }
        }
        // No fixed point: leave the query as it is (that, repaired again, gives the same).
        Repaired::unchanged(text)
    }

    /// How the decoder saw `text`: each word with what the model knows of it, every reading it
    /// weighed (the meant words, the kind of edit, its cost in nats before the language model)
    /// and which one it took; the log-probability of the best reading and of the text as typed.
    /// For tuning ([`Params`]) and for answering "why was this (not) corrected?".
    pub fn explain(&self, text: &str) -> Explanation {
        self.explain_with(text, None)
    }

    /// [`Repairer::explain`] of [`Repairer::repair_with`]: with the index's vote, and how many
    /// of the retrieved documents use each word and each reading.
    /// A text of several sentences is explained a sentence at a time, as it is repaired: their
    /// words follow one another and their scores add up; a sentence not looked at (another
    /// language) is left out.
    pub fn explain_with(&self, text: &str, retrieved: Option<&RetrievedWords>) -> Explanation {
        let retrieved = retrieved.filter(|r| r.documents() > 0);
        let mut all: Option<Explanation> = None;
        for span in query::sentences(text) {
            let next = self.explain_sentence(&text[span], retrieved);
            all = Some(match all {
                None => next,
                Some(sofar) => sofar.followed_by(next),
            });
        }
        all.unwrap_or_else(|| self.explain_sentence(text, retrieved))
    }

    /// [`Repairer::explain_with`] of one sentence.
    fn explain_sentence(&self, text: &str, retrieved: Option<&RetrievedWords>) -> Explanation {
        let Some(words) = query::scan(text, &self.lm, &|_| false) else {
            return Explanation {
                words: Vec::new(),
                best_score: 0.0,
                typed_score: 0.0,
                best_path: Vec::new(),
                typed_path: Vec::new(),
                skipped: Some("a letter outside ASCII or a word of another language".into()),
            };
        };
        let readings = decoder::readings(self, &words, retrieved, &mut decoder::Lookups::default());
        let lift = decoder::question_start_lift(self, &words);
        let mut memo = decoder::Transitions::default();
        let (path, best_score) = decoder::best_path(self, &readings, &[], lift, &mut memo);
        let all: Vec<usize> = (0..words.len()).collect();
        let (typed, typed_score) = decoder::best_path(self, &readings, &all, lift, &mut memo);
        let steps = |path: &[(usize, usize)]| -> Vec<PathStep> {
            decoder::path_terms(self, &readings, path, lift)
                .into_iter()
                .zip(path)
                .map(|(ln_context, &(position, ri))| {
                    let rd = &readings[position][ri];
                    PathStep {
                        position,
                        meant: reading_text(rd),
                        cost: rd.cost,
                        ln_context,
                    }
                })
                .collect()
        };
        let (best_path, typed_path) = (steps(&path), steps(&typed));
        let explained = words
            .iter()
            .zip(&readings)
            .enumerate()
            .map(|(pos, (w, rs))| ExplainedWord {
                word: w.lower.clone(),
                editable: w.editable,
                lexicon_count: w.stats.general,
                corpus_count: w.stats.corpus,
                usage_per_billion: self.lm.usage(&w.lower),
                documents_using: retrieved.map(|d| d.documents_using(&w.lower)),
                corpus_near: self
                    .near_in_corpus(&w.lower, w.stats.corpus, &words, Some(pos), false)
                    .0,
                readings: rs
                    .iter()
                    .enumerate()
                    .map(|(ri, r)| ExplainedReading {
                        meant: reading_text(r),
                        span: r.span,
                        kind: r.kind,
                        cost: r.cost,
                        ln_unigram: self.lm.ln_unigram(&r.words[0].1),
                        documents_using: retrieved.map(|d| {
                            r.words
                                .iter()
                                .map(|(word, _)| d.documents_using(word))
                                .min()
                                .unwrap_or(0)
                        }),
                        corpus_near: match r.words.as_slice() {
                            [(word, stats)] if ri > 0 => {
                                let (near, asked) = self.near_in_corpus(
                                    word,
                                    stats.corpus,
                                    &words,
                                    Some(pos),
                                    true,
                                );
                                Some([near, asked])
                            }
                            _ => None,
                        },
                        chosen: path.contains(&(pos, ri)),
                    })
                    .collect(),
            })
            .collect();
        Explanation {
            words: explained,
            best_score,
            typed_score,
            best_path,
            typed_path,
            skipped: None,
        }
    }

    /// Known words one letter edit from `word` that a typist could hit instead (for injecting
    /// real-word errors): see [`RealWords`].
    pub fn real_word_neighbours(&self, word: &str) -> Vec<String> {
        real_word_slips(&self.candidates, word, self.lm.stats(word).general, |id| {
            self.candidate_stats[id as usize].general
        })
    }

    /// Whether the query looks noisy: it has a word repair could correct (an unknown plain
    /// word). The query router's signal when the index has a vocabulary.
    pub fn has_unknown_word(&self, text: &str) -> bool {
        self.has_unknown_word_knowing(text, &|_| false)
    }

    /// [`Repairer::has_unknown_word`], with the words `also_known` says the corpus holds besides
    /// the vocabulary's (the live segment's) counted as known.
    pub fn has_unknown_word_knowing(&self, text: &str, also_known: &dyn Fn(&str) -> bool) -> bool {
        query::scan(text, &self.lm, also_known).is_some_and(|words| {
            words
                .iter()
                .any(|w| w.editable && !w.stats.known() && w.lower.len() >= self.params.min_letters)
        })
    }
}

/// Known words one slip from a word, from a lexicon alone: what the `realword` noise kind
/// injects (`capot eval --noise realword`), the same words as [`Repairer::real_word_neighbours`].
pub struct RealWords {
    lexicon: Arc<Lexicon>,
    /// Over the lexicon's words, in id order.
    candidates: CandidateIndex,
}

impl RealWords {
    /// The index over `lexicon`'s words (0.2 s for SymSpell's 83k).
    pub fn new(lexicon: Arc<Lexicon>) -> Self {
        let candidates = CandidateIndex::build(lexicon.words());
        RealWords {
            lexicon,
            candidates,
        }
    }

    /// Lexicon words of 4+ letters, not stopwords, one letter edit from `word` (lower case) and
    /// at least a hundredth as common; none when `word` is not in the lexicon.
    pub fn of(&self, word: &str) -> Vec<String> {
        let count = self
            .lexicon
            .id(word)
            .map_or(0, |id| self.lexicon.count_of(id));
        real_word_slips(&self.candidates, word, count, |id| {
            self.lexicon.count_of(id)
        })
    }
}

/// The words of `candidates` one edit from `word` (seen `count` times in general English) that
/// a typist could hit instead: 4+ letters, not stopwords, at least a hundredth as common.
fn real_word_slips(
    candidates: &CandidateIndex,
    word: &str,
    count: u64,
    count_of: impl Fn(u32) -> u64,
) -> Vec<String> {
    if count == 0 {
        return Vec::new();
    }
    let mut found = Vec::new();
    candidates.lookup(word, 1, &mut found);
    found
        .into_iter()
        .filter_map(|(id, _)| {
            let w = candidates.word(id);
            (w.len() >= 4
                && !crate::index::vocab::is_stopword(w)
                && count_of(id).saturating_mul(100) >= count)
                .then(|| w.to_string())
        })
        .collect()
}

/// A reading's meant words as a query writes them (a split's two with a space between).
fn reading_text(rd: &decoder::Reading) -> String {
    rd.words
        .iter()
        .map(|x| x.0.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `text` with `edits` (in text order, not overlapping) applied.
fn apply(text: &str, mut edits: Vec<Edit>) -> Repaired {
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

/// The edits of `second` (made on `first.text`) carried back onto `original`, merged with
/// `first`'s; `None` when they cannot be lined up.
fn compose(original: &str, first: &Repaired, second: &Repaired) -> Option<Repaired> {
    // Where each of first's edits sits in first.text.
    let mut spans = Vec::new(); // (out start, out end, orig start, orig end)
    let mut shift: isize = 0;
    for e in &first.edits {
        let out_start = (e.start as isize + shift) as usize;
        spans.push((
            out_start,
            out_start + e.to.len(),
            e.start,
            e.start + e.from.len(),
        ));
        shift += e.to.len() as isize - e.from.len() as isize;
    }
    // An offset in first.text, widened to whole edits of `first`, mapped to the original.
    let to_orig = |p: usize, is_end: bool| -> (usize, usize) {
        let mut shift: isize = 0;
        for &(os, oe, s, e) in &spans {
            if (!is_end && p >= os && p < oe) || (is_end && p > os && p <= oe) {
                return if is_end { (oe, e) } else { (os, s) };
            }
            if p < os || (is_end && p == os) {
                break;
            }
            shift += (oe - os) as isize - (e - s) as isize;
        }
        (p, (p as isize - shift) as usize)
    };
    let mut merged: Vec<Edit> = Vec::new();
    let mut covered: Vec<(usize, usize)> = Vec::new();
    for e in &second.edits {
        let (out_s, orig_s) = to_orig(e.start, false);
        let (out_e, orig_e) = to_orig(e.start + e.from.len(), true);
        let to = format!(
            "{}{}{}",
            first.text.get(out_s..e.start)?,
            e.to,
            first.text.get(e.start + e.from.len()..out_e)?
        );
        covered.push((orig_s, orig_e));
        merged.push(Edit {
            from: original.get(orig_s..orig_e)?.to_string(),
            to,
            start: orig_s,
            ..e.clone()
        });
    }
    for e in &first.edits {
        let (s, end) = (e.start, e.start + e.from.len());
        if !covered.iter().any(|&(cs, ce)| s < ce && cs < end) {
            merged.push(e.clone());
        }
    }
    merged.sort_by_key(|e| e.start);
    if merged
        .windows(2)
        .any(|w| w[0].start + w[0].from.len() > w[1].start)
    {
        return None;
    }
    merged.retain(|e| e.from != e.to);
    Some(apply(original, merged))
}

/// `to` written like `from`: in capitals when `from` is (a query typed with caps lock on),
/// capitalised when `from` starts with a capital.
fn match_case(from: &str, to: &str) -> String {
    let letters = from.chars().filter(|c| c.is_alphabetic()).count();
    if letters >= 2 && from.chars().all(|c| !c.is_alphabetic() || c.is_uppercase()) {
        return to.to_uppercase();
    }
    if from.chars().next().is_some_and(char::is_uppercase) {
        let mut c = to.chars();
        c.next()
            .map(|f| f.to_uppercase().chain(c).collect())
            .unwrap_or_default()
    } else {
        to.to_string()
    }
}

#[cfg(test)]
mod tests;
