//! The language model, P(meant | context): how likely a word is after the word before it.
//!
//! Two sources, mixed: general English (the lexicon's word counts and, when loaded, its word-pair
//! counts) and the corpus itself (the index's word and adjacent-word counts). The corpus's share
//! protects its names and jargon, which general English does not know, and lets its own phrases
//! count. A seen pair is scored by interpolating the pair estimate with the word's own
//! probability (Jelinek–Mercer); an unseen pair backs off to the word alone, since the general
//! pair list holds only frequent pairs and a missing pair is no evidence against.

use std::collections::HashMap;
use std::sync::Arc;

use super::lexicon::Lexicon;
use crate::index::vocab::{Vocabulary, STOPWORDS};

/// Weight of the corpus in the mixture of the two sources.
pub const CORPUS_WEIGHT: f64 = 0.5;
/// Weight of the pair estimate against the word's own probability.
pub const PAIR_WEIGHT: f64 = 0.6;

/// What the model knows of one word.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WordStats {
    /// Id in the lexicon.
    pub lexicon_id: Option<u32>,
    /// Count in general English.
    pub general: u64,
    /// Count in the corpus.
    pub corpus: u64,
    /// Its pairs in general English's list are another spelling's (`lexicon_id` is that
    /// spelling's: `colours` for `colors`): a pair the list holds speaks for it, one it lacks
    /// says nothing.
    pub borrowed_pairs: bool,
}

impl WordStats {
    /// Whether either source knows the word.
    pub fn known(&self) -> bool {
        self.general > 0 || self.corpus > 0
    }
}

/// The mixed model of one index and one lexicon.
pub struct LanguageModel {
    vocab: Arc<Vocabulary>,
    lexicon: Option<Arc<Lexicon>>,
    /// The corpus count of each lexicon word, by lexicon id: [`LanguageModel::stats`] asks
    /// the vocabulary's map only for the words the lexicon lacks.
    lexicon_corpus_counts: Vec<u64>,
    general_total: f64,
    corpus_total: f64,
    corpus_weight: f64,
    /// Probability of a word neither source knows (a name, an acronym, a typo left as is).
    unknown_word: f64,
    /// Floor of the probability of a word general English knows.
    known_floor: f64,
    /// ln of the share a known word keeps after a known word it is never seen with.
    ln_unseen_pair: f64,
    /// Occurrences added to the first word's count of a corpus pair (see
    /// [`LanguageModel::with_pair_prior`]).
    pair_prior: f64,
    /// The most a pair estimate counts for, in the decoder's scores and in general English's
    /// associations (see [`LanguageModel::with_pair_ceiling`]).
    pair_ceiling: f64,
    /// Per function word's lexicon id: the most any word is associated with it, after it and
    /// before it (see [`LanguageModel::most_associated`]).
    function_word_reach: HashMap<u32, (f64, f64)>,
}

impl LanguageModel {
    /// The model over `vocab` and, when given, `lexicon`.
    /// `unknown_word` is the probability of a word neither source knows.
    pub fn new(vocab: Arc<Vocabulary>, lexicon: Option<Arc<Lexicon>>, unknown_word: f64) -> Self {
        let general_total = lexicon.as_ref().map_or(0.0, |l| l.total() as f64);
        let corpus_total = vocab.info().tokens as f64;
        let corpus_weight = match (general_total > 0.0, corpus_total > 0.0) {
            (true, true) => CORPUS_WEIGHT,
            (true, false) => 0.0,
            _ => 1.0,
        };
        let function_word_reach = lexicon
            .as_deref()
            .map(|l| function_word_reach(l, general_total, 1.0))
            .unwrap_or_default();
        let lexicon_corpus_counts = lexicon
            .as_deref()
            .map(|l| l.words().map(|w| vocab.count(w)).collect())
            .unwrap_or_default();
        LanguageModel {
            vocab,
            lexicon,
            lexicon_corpus_counts,
            general_total,
            corpus_total,
            corpus_weight,
            unknown_word,
            known_floor: unknown_word,
            ln_unseen_pair: 0.0,
            pair_prior: 0.0,
            pair_ceiling: 1.0,
            function_word_reach,
        }
    }

    /// The most that any word goes with the function word `s` in general English, after it
    /// (`after`) or before it: the largest pair probability over the other word's own that
    /// [`LanguageModel::ln_general_pair`] can give with it; `None` for a word that is no
    /// function word the lists know. It tells, before any candidate is looked up, whether
    /// function words alone could speak for one.
    pub fn most_associated(&self, s: &WordStats, after: bool) -> Option<f64> {
        let reach = self.function_word_reach.get(&s.lexicon_id?)?;
        Some(if after { reach.0 } else { reach.1 })
    }

    /// The same model with the corpus's pair estimate c(a b) / (c(a) + `prior`): a word the
    /// corpus uses three times, once before `b`, does not make `b` a third of what follows it
    /// (a small corpus's pairs are few and chance ones weigh as much as set phrases).
    pub fn with_pair_prior(mut self, prior: f64) -> Self {
        self.pair_prior = prior.max(0.0);
        self
    }

    /// The same model with pair estimates counting up to `ceiling` rather than 1. The general
    /// pair list counts pairs some 56 times over its words, so at 1 every pair written after
    /// one in 56 of its first word's writings reads as certain, a set phrase (`what is`, 2.7
    /// times `what`) no more than that: a little above 1 lets set phrases count more against
    /// other pairs, while the ceiling still keeps the list's inflated counts from ruling.
    /// The same ceiling holds in general English's associations, which the function-word
    /// rules weigh ([`LanguageModel::ln_general_pair`]).
    pub fn with_pair_ceiling(mut self, ceiling: f64) -> Self {
        let ceiling = ceiling.max(f64::MIN_POSITIVE);
        if ceiling != self.pair_ceiling {
            self.pair_ceiling = ceiling;
            if let Some(l) = &self.lexicon {
                self.function_word_reach = function_word_reach(l, self.general_total, ceiling);
            }
        }
        self
    }

    /// The same model with `cost` nats taken from a known word after a known word that no
    /// source has seen it with.
    pub fn with_unseen_pair_cost(mut self, cost: f64) -> Self {
        self.ln_unseen_pair = -cost;
        self
    }

    /// The same model with words of general English no less likely than `floor` (by default
    /// the unknown-word probability); the lower it is, the better rare words are told apart.
    pub fn with_known_floor(mut self, floor: f64) -> Self {
        self.known_floor = floor;
        self
    }

    /// What both sources know of `word` (lower case).
    pub fn stats(&self, word: &str) -> WordStats {
        let lexicon_id = self.lexicon.as_ref().and_then(|l| l.id(word));
        WordStats {
            lexicon_id,
            general: match (lexicon_id, &self.lexicon) {
                (Some(id), Some(l)) => l.count_of(id),
                _ => 0,
            },
            corpus: match lexicon_id {
                Some(id) => self.lexicon_corpus_counts[id as usize],
                None => self.vocab.count(word),
            },
            borrowed_pairs: false,
        }
    }

    /// P(word), from its stats: the unknown-word probability for a word neither source knows;
    /// no less than the known-word floor for a word of general English, and no less than the
    /// unknown word's for a word only the corpus knows (its own names and jargon, or its typos:
    /// never less likely than a string nobody has seen).
    pub fn unigram(&self, s: &WordStats) -> f64 {
        if s.general > 0 {
            self.raw_unigram(s).max(self.known_floor)
        } else {
            self.raw_unigram(s).max(self.unknown_word)
        }
    }

    /// P(word) without the floor: what the counts say.
    fn raw_unigram(&self, s: &WordStats) -> f64 {
        if !s.known() {
            return self.unknown_word;
        }
        let g = if self.general_total > 0.0 {
            s.general as f64 / self.general_total
        } else {
            0.0
        };
        let c = if self.corpus_total > 0.0 {
            s.corpus as f64 / self.corpus_total
        } else {
            0.0
        };
        ((1.0 - self.corpus_weight) * g + self.corpus_weight * c).max(f64::MIN_POSITIVE)
    }

    /// ln P(b | a) for two words (lower case) with their stats.
    pub fn ln_bigram(&self, a: &str, sa: &WordStats, b: &str, sb: &WordStats) -> f64 {
        let pair = self.pair_estimate(a, sa, b, sb);
        self.mix(pair, self.unigram(sb))
    }

    /// ln P(b | a) twice: from the counts alone, without the floor on known words (how two
    /// known words compare: real-word errors), and as [`Self::ln_bigram`] gives it. One look-up
    /// of the pair serves both.
    pub fn ln_bigram_raw_and_floored(
        &self,
        a: &str,
        sa: &WordStats,
        b: &str,
        sb: &WordStats,
    ) -> (f64, f64) {
        let pair = self.pair_estimate(a, sa, b, sb);
        (
            self.mix(pair, self.raw_unigram(sb)),
            self.mix(pair, self.unigram(sb)),
        )
    }

    /// The pair estimate of P(b | a) and the weight of the sources it comes from (the general
    /// list where it knows both words, the corpus where it knows `a`: a word it never uses is in
    /// none of its pairs). `None` when no source can speak of the pair.
    fn pair_estimate(
        &self,
        a: &str,
        sa: &WordStats,
        b: &str,
        sb: &WordStats,
    ) -> Option<(f64, f64)> {
        if !sa.known() || !sb.known() {
            return None;
        }
        let general = match (&self.lexicon, sa.lexicon_id, sb.lexicon_id) {
            (Some(l), Some(ia), Some(ib)) => l.bigram(ia, ib),
            _ => 0,
        };
        // A pair another spelling's writings stand for speaks only where it is written.
        let borrowed_unseen = general == 0 && (sa.borrowed_pairs || sb.borrowed_pairs);
        // A word only the usage list knows (a candidate from it) is in neither list of pairs:
        // its pairs are no evidence either way.
        if (sb.lexicon_id.is_none() || borrowed_unseen && sb.borrowed_pairs) && sb.corpus == 0 {
            return None;
        }
        let mut pair = 0.0;
        let mut weight = 0.0;
        if sa.lexicon_id.is_some() && sb.lexicon_id.is_some() && sa.general > 0 && !borrowed_unseen
        {
            let w = 1.0 - self.corpus_weight;
            pair += w * general as f64 / sa.general as f64;
            weight += w;
        }
        if sa.corpus > 0 && self.vocab.has_bigrams() {
            let w = self.corpus_weight;
            // A word the corpus never uses is in none of its pairs: no look-up.
            if sb.corpus > 0 {
                let map = Arc::as_ptr(&self.vocab) as usize;
                let count = self
                    .vocab
                    .bigram_recalled(a, b, |key, walk| super::recall::corpus_pair(map, key, walk));
                pair += w * count as f64 / (sa.corpus as f64 + self.pair_prior);
            }
            weight += w;
        }
        (weight > 0.0).then_some((pair, weight))
    }

    /// ln of the pair estimate interpolated with `pb`, the second word's own probability.
    /// An unseen pair is no evidence against: the general list keeps only frequent pairs, and a
    /// small corpus has seen few. It backs off to the word alone (less the unseen-pair cost), as
    /// after an unknown word (without it).
    fn mix(&self, pair: Option<(f64, f64)>, pb: f64) -> f64 {
        match pair {
            None => pb.ln(),
            Some((p, weight)) if p > 0.0 => {
                (PAIR_WEIGHT * (p / weight).min(self.pair_ceiling) + (1.0 - PAIR_WEIGHT) * pb).ln()
            }
            Some(_) => pb.ln() + self.ln_unseen_pair,
        }
    }

    /// ln P(b | a) in general English's lists alone, a pair they lack counting as written never
    /// (`ceiling` false) or as often as the least pair listed (`ceiling` true: the most the list
    /// may be hiding, for a rare word's pairs are missing for being rare, not for not going
    /// together). `None` where the word list lacks either word.
    pub fn ln_general_pair(&self, sa: &WordStats, sb: &WordStats, ceiling: bool) -> Option<f64> {
        let l = self.lexicon.as_ref()?;
        if sa.general == 0 || sb.general == 0 {
            return None;
        }
        let mut count = self.general_pair_count(sa, sb);
        if ceiling {
            count = count.max(l.least_bigram());
        }
        Some(ln_general_estimate(
            count,
            sa.general,
            sb.general as f64 / self.general_total,
            self.pair_ceiling,
        ))
    }

    /// How many times more often general English's pair list writes `a b` than the two words'
    /// own counts would by chance (ln; pointwise mutual information): a set phrase (`to find`,
    /// `used for`) reads high, a pair any word makes with a function word (`is best`) low.
    /// `None` where the word list lacks either word or the pair list the pair.
    pub fn ln_general_over_chance(&self, sa: &WordStats, sb: &WordStats) -> Option<f64> {
        let count = self.general_pair_count(sa, sb);
        (count > 0 && sa.general > 0 && sb.general > 0 && self.general_total > 0.0).then(|| {
            (count as f64).ln() + self.general_total.ln()
                - (sa.general as f64).ln()
                - (sb.general as f64).ln()
        })
    }

    /// How much more likely `b` is after `a` than on its own in general English's lists (ln
    /// P(b | a) − ln P(b), as [`LanguageModel::ln_general_pair`] counts a missing pair): a set
    /// phrase (`how long`) reads high, a pair any words make (`and more`) low. `None` where the
    /// word list lacks either word.
    pub fn ln_general_association(
        &self,
        sa: &WordStats,
        sb: &WordStats,
        ceiling: bool,
    ) -> Option<f64> {
        Some(self.ln_general_pair(sa, sb, ceiling)? - self.ln_general_unigram(sb)?)
    }

    /// ln P(word) in general English's word list alone; `None` where it lacks the word.
    pub fn ln_general_unigram(&self, s: &WordStats) -> Option<f64> {
        (s.general > 0 && self.general_total > 0.0)
            .then(|| (s.general as f64 / self.general_total).ln())
    }

    /// How often general English's pair list says `a b` is written (0 when it lacks it).
    pub fn general_pair_count(&self, sa: &WordStats, sb: &WordStats) -> u64 {
        match (&self.lexicon, sa.lexicon_id, sb.lexicon_id) {
            (Some(l), Some(ia), Some(ib)) => l.bigram(ia, ib),
            _ => 0,
        }
    }

    /// The share of general English's words that begin the pair `a b` (its count over the word
    /// list's total; 0 when the pair list lacks it).
    pub fn general_pair_share(&self, sa: &WordStats, sb: &WordStats) -> f64 {
        if self.general_total > 0.0 {
            self.general_pair_count(sa, sb) as f64 / self.general_total
        } else {
            0.0
        }
    }

    /// The most often general English may write the pair `a b`, as a share of its words: the
    /// pair list's count where it holds the pair; else the lesser of the least count it lists
    /// (a pair it lacks is rarer than any it holds) and what chance gives the two words
    /// e^`association` times over (few pairs go together much more). With no `association` (no
    /// bound from chance), the least count listed in the word list's scale
    /// ([`Lexicon::pair_scale`]): the pair list's 6.4M is some 210 writings per billion words,
    /// not 11,800 (an infinite `association` gives the 11,800). 0 without the lists.
    pub fn general_pair_share_at_most(
        &self,
        sa: &WordStats,
        sb: &WordStats,
        association: Option<f64>,
    ) -> f64 {
        let Some(l) = self.lexicon.as_ref().filter(|_| self.general_total > 0.0) else {
            return 0.0;
        };
        let listed = self.general_pair_count(sa, sb);
        if listed > 0 {
            return listed as f64 / self.general_total;
        }
        let least = l.least_bigram() as f64 / self.general_total;
        match association {
            Some(association) => {
                let chance = sa.general as f64 / self.general_total * sb.general as f64
                    / self.general_total
                    * association.exp();
                chance.min(least)
            }
            None => least / l.pair_scale(),
        }
    }

    /// ln P(b | a) from the counts, as for a pair no source has seen (`b` alone, less the
    /// unseen-pair cost).
    pub fn ln_unseen_raw(&self, sb: &WordStats) -> f64 {
        self.raw_unigram(sb).ln() + self.ln_unseen_pair
    }

    /// Whether general English's pair list holds `a b` (`las vegas`, `per day`).
    pub fn general_pair_known(&self, sa: &WordStats, sb: &WordStats) -> bool {
        match (&self.lexicon, sa.lexicon_id, sb.lexicon_id) {
            (Some(l), Some(ia), Some(ib)) => l.bigram(ia, ib) > 0,
            _ => false,
        }
    }

    /// ln P(word) from the counts alone and as [`Self::ln_unigram`] gives it (see
    /// [`Self::ln_bigram_raw_and_floored`]).
    pub fn ln_unigram_raw_and_floored(&self, s: &WordStats) -> (f64, f64) {
        (self.raw_unigram(s).ln(), self.unigram(s).ln())
    }

    /// ln P(word) for a word at the start of a query.
    pub fn ln_unigram(&self, s: &WordStats) -> f64 {
        self.unigram(s).ln()
    }

    /// How often `word` (lower case) is written per billion words, by the usage list; `None`
    /// without one or when it does not hold the word.
    pub fn usage(&self, word: &str) -> Option<u64> {
        self.lexicon.as_ref().and_then(|l| l.usage(word))
    }

    /// Whether the word list holds `word` (lower case) with an apostrophe it was typed without
    /// (see [`Lexicon::apostrophe_left_out`]).
    pub fn apostrophe_left_out(&self, word: &str) -> bool {
        self.lexicon
            .as_ref()
            .is_some_and(|l| l.apostrophe_left_out(word))
    }

    /// Whether a usage list is loaded (see [`Lexicon::usage`]).
    pub fn has_usage(&self) -> bool {
        self.lexicon.as_ref().is_some_and(|l| l.has_usage())
    }

    /// Whether the index's adjacent-word counts are part of the model.
    pub fn has_corpus_bigrams(&self) -> bool {
        self.vocab.has_bigrams()
    }

    /// Whether general English (a lexicon) is part of the model.
    pub fn has_general(&self) -> bool {
        self.general_total > 0.0
    }

    /// Whether a general word-pair list is part of the model.
    pub fn has_general_bigrams(&self) -> bool {
        self.lexicon.as_ref().is_some_and(|l| l.bigram_len() > 0)
    }
}

/// ln P(b | a) from general English's counts: the pair's `count` over the first word's,
/// `first`, interpolated with the second word's own share, `own`.
fn ln_general_estimate(count: u64, first: u64, own: f64, ceiling: f64) -> f64 {
    let pair = (count as f64 / first as f64).min(ceiling);
    (PAIR_WEIGHT * pair + (1.0 - PAIR_WEIGHT) * own).ln()
}

/// [`LanguageModel::most_associated`] of every function word in `lexicon` (of `total` words):
/// the largest association of a listed pair, and no less than none (a pair the list lacks, or a
/// word it does not count).
fn function_word_reach(lexicon: &Lexicon, total: f64, ceiling: f64) -> HashMap<u32, (f64, f64)> {
    let mut reach: HashMap<u32, (f64, f64)> = STOPWORDS
        .iter()
        .filter_map(|w| lexicon.id(w))
        .map(|id| (id, (0.0, 0.0)))
        .collect();
    if reach.is_empty() || total <= 0.0 {
        return reach;
    }
    let association = |a: u32, b: u32, count: u64| {
        let (first, second) = (lexicon.count_of(a), lexicon.count_of(b));
        if first == 0 || second == 0 {
            return 0.0;
        }
        let own = second as f64 / total;
        ln_general_estimate(count, first, own, ceiling) - own.ln()
    };
    for (a, b, count) in lexicon.bigrams() {
        if let Some(r) = reach.get_mut(&a) {
            r.0 = r.0.max(association(a, b, count));
        }
        if let Some(r) = reach.get_mut(&b) {
            r.1 = r.1.max(association(a, b, count));
        }
    }
    reach
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unseen_pair_of_known_words_costs_what_it_is_told() {
        let vocab = Arc::new(Vocabulary::build(
            [("", "acid reflux acid test")].into_iter(),
        ));
        let lex = Arc::new(Lexicon::from_counts(
            [("acid", 100), ("reflux", 10), ("reflex", 10)],
            [("acid", "reflux", 5)],
        ));
        let lm = LanguageModel::new(vocab, Some(lex), 1e-9).with_unseen_pair_cost(1.0);
        let (acid, reflux, reflex) = (lm.stats("acid"), lm.stats("reflux"), lm.stats("reflex"));
        let unseen = lm.ln_bigram("acid", &acid, "reflex", &reflex);
        assert!(
            (unseen - (lm.ln_unigram(&reflex) - 1.0)).abs() < 1e-9,
            "{unseen}"
        );
        assert!(lm.ln_bigram("acid", &acid, "reflux", &reflux) > lm.ln_unigram(&reflux));
        // After an unknown word nothing is known: the word's own probability, no cost.
        let unknown = lm.stats("zzq");
        let after = lm.ln_bigram("zzq", &unknown, "reflex", &reflex);
        assert!((after - lm.ln_unigram(&reflex)).abs() < 1e-9);
    }

    #[test]
    fn a_set_phrase_counts_up_to_the_pair_ceiling() {
        // The pair list writes `what is` 2.7 times as often as its word list writes `what` (its
        // pairs run some 56 times over its words), `hat is` about half as often as `hat`.
        let vocab = Arc::new(Vocabulary::build([("", "a caret")].into_iter()));
        let lex = Arc::new(Lexicon::from_counts(
            [("what", 1_000), ("hat", 100), ("is", 5_000)],
            [("what", "is", 2_700), ("hat", "is", 54)],
        ));
        let clipped = LanguageModel::new(vocab.clone(), Some(lex.clone()), 1e-9);
        let lifted = LanguageModel::new(vocab, Some(lex), 1e-9).with_pair_ceiling(1.5);
        let gap = |lm: &LanguageModel| {
            let is = lm.stats("is");
            lm.ln_bigram("what", &lm.stats("what"), "is", &is)
                - lm.ln_bigram("hat", &lm.stats("hat"), "is", &is)
        };
        // At 1 the set phrase reads as certain and no more; at 1.5 it counts half as much again
        // against the pair below the ceiling, which reads as before.
        let own = clipped.ln_unigram(&clipped.stats("is")).exp();
        let mix = |pair: f64| (PAIR_WEIGHT * pair + (1.0 - PAIR_WEIGHT) * own).ln();
        assert!(
            (gap(&clipped) - (mix(1.0) - mix(0.54))).abs() < 1e-9,
            "{}",
            gap(&clipped)
        );
        assert!(
            (gap(&lifted) - (mix(1.5) - mix(0.54))).abs() < 1e-9,
            "{}",
            gap(&lifted)
        );
        let (what, hat, is) = (
            lifted.stats("what"),
            lifted.stats("hat"),
            lifted.stats("is"),
        );
        assert_eq!(
            lifted.ln_bigram("hat", &hat, "is", &is),
            clipped.ln_bigram("hat", &hat, "is", &is)
        );
        // The same in general English's associations, which the function-word rules weigh.
        let general = |lm: &LanguageModel, a: &WordStats| lm.ln_general_pair(a, &is, false);
        let share = 5_000.0 / 6_100.0;
        let estimate = |pair: f64| Some((PAIR_WEIGHT * pair + (1.0 - PAIR_WEIGHT) * share).ln());
        assert_eq!(general(&clipped, &what), estimate(1.0));
        assert_eq!(general(&lifted, &what), estimate(1.5));
        assert_eq!(general(&lifted, &hat), general(&clipped, &hat));
        // ... and in how far a function word's pairs can reach, which gates their look-ups.
        for (lm, ceiling) in [(&clipped, 1.0), (&lifted, 1.5)] {
            let reach = lm.most_associated(&what, true).unwrap();
            let expected = estimate(ceiling).unwrap() - share.ln();
            assert!((reach - expected).abs() < 1e-9, "{reach} {expected}");
        }
    }

    #[test]
    fn a_pair_the_list_lacks_is_bounded_by_its_least_pair() {
        let vocab = Arc::new(Vocabulary::build([("", "how long")].into_iter()));
        let lex = Arc::new(Lexicon::from_counts(
            [("how", 1_000), ("long", 100), ("lone", 10), ("the", 10_000)],
            [("how", "long", 300), ("the", "long", 20)],
        ));
        assert_eq!(lex.least_bigram(), 20);
        let lm = LanguageModel::new(vocab, Some(lex), 1e-9);
        let (how, long, lone) = (lm.stats("how"), lm.stats("long"), lm.stats("lone"));
        let total = 11_110.0;
        let mix = |pair: f64, own: f64| (PAIR_WEIGHT * pair + (1.0 - PAIR_WEIGHT) * own).ln();
        let listed = lm.ln_general_pair(&how, &long, false).unwrap();
        assert!((listed - mix(0.3, 100.0 / total)).abs() < 1e-9, "{listed}");
        // The ceiling changes nothing for a listed pair.
        assert_eq!(lm.ln_general_pair(&how, &long, true), Some(listed));
        // A pair the list lacks: never written, or as often as the least pair it lists.
        let never = lm.ln_general_pair(&how, &lone, false).unwrap();
        assert!((never - mix(0.0, 10.0 / total)).abs() < 1e-9, "{never}");
        let most = lm.ln_general_pair(&how, &lone, true).unwrap();
        assert!((most - mix(0.02, 10.0 / total)).abs() < 1e-9, "{most}");
        assert_eq!(lm.ln_general_pair(&how, &lm.stats("zzq"), true), None);
        assert!((lm.ln_general_unigram(&lone).unwrap() - (10.0 / total).ln()).abs() < 1e-9);
    }

    #[test]
    fn a_function_word_reaches_as_far_as_its_most_associated_pair() {
        let vocab = Arc::new(Vocabulary::build([("", "how long")].into_iter()));
        let lex = Arc::new(Lexicon::from_counts(
            [
                ("how", 1_000),
                ("long", 100),
                ("the", 10_000),
                ("zebra", 1_000_000),
            ],
            [("how", "long", 300), ("how", "the", 50), ("the", "how", 20)],
        ));
        let lm = LanguageModel::new(vocab, Some(lex), 1e-9);
        let (how, long, the) = (lm.stats("how"), lm.stats("long"), lm.stats("the"));
        let pmi = |a: &WordStats, b: &WordStats| {
            lm.ln_general_pair(a, b, false).unwrap() - lm.ln_general_unigram(b).unwrap()
        };
        let after = lm.most_associated(&how, true).unwrap();
        assert!((after - pmi(&how, &long)).abs() < 1e-9, "{after}");
        assert!(after > pmi(&how, &the));
        let before = lm.most_associated(&how, false).unwrap();
        assert!(
            before > 0.0 && (before - pmi(&the, &how)).abs() < 1e-9,
            "{before}"
        );
        let the_after = lm.most_associated(&the, true).unwrap();
        assert!((the_after - pmi(&the, &how)).abs() < 1e-9, "{the_after}");
        // No word with a pair listed reaches below none: what an unlisted pair has.
        assert!(pmi(&how, &the) > 0.0);
        assert_eq!(lm.most_associated(&the, false), Some(pmi(&how, &the)));
        let zebra = Arc::new(Lexicon::from_counts([("the", 10), ("zebra", 10)], []));
        let bare = LanguageModel::new(lm.vocab.clone(), Some(zebra.clone()), 1e-9);
        assert_eq!(bare.most_associated(&bare.stats("the"), true), Some(0.0));
        // A word that is no function word reaches nowhere.
        assert_eq!(lm.most_associated(&lm.stats("zebra"), true), None);
    }
}
