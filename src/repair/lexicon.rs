//! The general-language side of the speller: a word list with counts (which words exist, how
//! common they are) and, optionally, a list of word pairs with counts (which words follow which).
//! Both come from plain text files, so a user can bring the lists of their own language.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::inflection::{es_written_as_s, over_regularised, over_regularised_plurals, Noun, Verb};
use crate::index::vocab::KeyFilter;

/// File name of the default word list under the assets directory (`scripts/setup` fetches it).
pub const DEFAULT_LEXICON: &str = "lexicon/frequency_dictionary_en_82_765.txt";
/// File name of the default word-pair list under the assets directory (same wheel, same licence).
pub const DEFAULT_BIGRAMS: &str = "lexicon/frequency_bigramdictionary_en_243_342.txt";
/// File name of the default usage list under the assets directory: wordfreq's English list
/// (data CC BY-SA 4.0), which `scripts/setup` converts to `word count` lines under
/// [`USAGE_HEADER`].
pub const DEFAULT_USAGE: &str = "lexicon/wordfreq_large_en.txt";
/// File name of the default homophone list under the assets directory: the CMU Pronouncing
/// Dictionary (BSD-style licence), which `scripts/setup` groups into lines of words that sound
/// the same under [`HOMOPHONES_HEADER`].
pub const DEFAULT_HOMOPHONES: &str = "lexicon/cmudict_homophones.txt";
/// File name of the default verb list under the assets directory: the Automatically Generated
/// Inflection Database's verbs (by way of pyinflect, MIT), which `scripts/setup` writes as
/// `lemma past participle` lines under [`VERBS_HEADER`].
pub const DEFAULT_VERBS: &str = "lexicon/agid_verbs.txt";
/// File name of the default noun list under the assets directory: the same database's nouns,
/// which `scripts/setup` writes as `singular plural` lines under [`NOUNS_HEADER`].
pub const DEFAULT_NOUNS: &str = "lexicon/agid_nouns.txt";
/// Count given to a word of a plain list (no counts): about that of a rare English word.
const PLAIN_LIST_COUNT: u64 = 100_000;

/// Why a lexicon could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LexiconError {
    #[error("cannot read lexicon {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("lexicon {0} holds no words")]
    Empty(PathBuf),
}

/// Words of the language with their counts, and word pairs with theirs.
#[derive(Debug, Clone, Default)]
pub struct Lexicon {
    /// Word → (id, count). Ids index `words`.
    ids: HashMap<Box<str>, u32, foldhash::fast::FixedState>,
    words: Vec<Box<str>>,
    counts: Vec<u64>,
    /// (id of the first word << 32 | id of the second) → count.
    bigrams: HashMap<u64, u64, foldhash::fast::FixedState>,
    /// The least count of a listed pair: a list cut at a count holds no rarer pair.
    least_bigram: u64,
    /// How many times the pair list's text outnumbers the word list's, at least
    /// ([`Lexicon::pair_scale`]).
    pair_scale: f64,
    total: u64,
    sources: Vec<PathBuf>,
    /// How often strings are written (per billion words), misspellings included: a usage list.
    usage: Option<fst::Map<Vec<u8>>>,
    /// The usage list's strings in a key filter: most typos are not in it, found so without
    /// walking the map.
    usage_keys: KeyFilter,
    /// Words of two letters or more that begin with each pair of letters `a`–`z` (26 × 26),
    /// empty until such a word is added.
    starts: Vec<u32>,
    /// Ids in the order of their words' spelling, for [`Lexicon::words_beginning_with`]: built
    /// on first use, and dropped when a word is added.
    by_spelling: std::sync::OnceLock<Vec<u32>>,
    /// Word → the other words that sound the same: a homophone list.
    homophones: HashMap<Box<str>, Vec<Box<str>>, foldhash::fast::FixedState>,
    /// A regular past ending put on an irregular verb → the verb's forms: from a verb list; a
    /// regular plural ending put on a noun with an old plural → its plurals: from a noun list.
    over_regularised: HashMap<Box<str>, Vec<Box<str>>, foldhash::fast::FixedState>,
}

/// The least count of the pairs (0 without any).
fn least_count(bigrams: &HashMap<u64, u64, foldhash::fast::FixedState>) -> u64 {
    bigrams
        .values()
        .copied()
        .filter(|&c| c > 0)
        .min()
        .unwrap_or(0)
}

/// How many of its most common words the pair list's scale is read from ([`pair_scale`]).
const SCALE_WORDS: usize = 100;

/// The most the pairs listed after one of the [`SCALE_WORDS`] commonest words add up to, over
/// that word's own count, and at least 1: the pairs are counted in a larger text than the
/// words (SymSpell's English lists: 55.7, after `will`), and a list that keeps only frequent
/// pairs holds less than all of a word's pairs, so this is a lower bound of the scale.
fn pair_scale(bigrams: &HashMap<u64, u64, foldhash::fast::FixedState>, counts: &[u64]) -> f64 {
    let mut commonest: Vec<u32> = (0..counts.len() as u32)
        .filter(|&i| counts[i as usize] > 0)
        .collect();
    commonest.sort_unstable_by_key(|&i| std::cmp::Reverse(counts[i as usize]));
    commonest.truncate(SCALE_WORDS);
    let mut after: HashMap<u32, u64, foldhash::fast::FixedState> =
        commonest.iter().map(|&i| (i, 0)).collect();
    for (&key, &c) in bigrams {
        if let Some(sum) = after.get_mut(&((key >> 32) as u32)) {
            *sum += c;
        }
    }
    after
        .iter()
        .map(|(&i, &sum)| sum as f64 / counts[i as usize] as f64)
        .fold(1.0, f64::max)
}

/// The slot of a word's first two letters in [`Lexicon::starts`], when both are `a`–`z`.
fn start_index(word: &[u8]) -> Option<usize> {
    match word {
        [a @ b'a'..=b'z', b @ b'a'..=b'z', ..] => {
            Some(usize::from(a - b'a') * 26 + usize::from(b - b'a'))
        }
        _ => None,
    }
}

/// First line of a usage list: how often strings are written, misspellings included (see
/// [`Lexicon::usage`]).
pub const USAGE_HEADER: &str = "#usage";

/// First line of a homophone list: then one line per sound, the words that are spelt for it
/// (`rote wrote`, `pain pane`; see [`Lexicon::homophones`]).
pub const HOMOPHONES_HEADER: &str = "#homophones";

/// First line of a verb list: then one line per verb, `lemma past participle`, alternatives
/// split by `/` and `-` for none (`eat ate eaten`, `teach taught -`; see
/// [`Lexicon::over_regularised`]).
pub const VERBS_HEADER: &str = "#verbs";

/// First line of a noun list: then one line per noun, `singular plural`, alternatives split by
/// `/` (`tooth teeth`, `leaf leaves/leafs`; see [`Lexicon::over_regularised`]).
pub const NOUNS_HEADER: &str = "#nouns";

impl Lexicon {
    /// Reads word lists and pair lists, one entry per line, told apart by their fields:
    /// `word` (a plain list such as Debian's `/usr/share/dict/words`), `word count` (a frequency
    /// list such as SymSpell's) or `word word count` (a pair list such as SymSpell's bigrams);
    /// a file whose first line is [`USAGE_HEADER`] is a usage list of `word count` lines (see
    /// [`Lexicon::usage`]), one whose first line is [`HOMOPHONES_HEADER`] a homophone list (see
    /// [`Lexicon::homophones`]), one whose first line is [`VERBS_HEADER`] a verb list and one whose
    /// first line is [`NOUNS_HEADER`] a noun list (see [`Lexicon::over_regularised`]).
    /// Words are lower-cased; lines that are not valid UTF-8 are skipped. A pair whose words are
    /// in no word list is kept out.
    pub fn load(paths: &[PathBuf]) -> Result<Self, LexiconError> {
        let mut lex = Lexicon::default();
        let mut pairs: Vec<(String, String, u64)> = Vec::new();
        let mut usage: Vec<(String, u64)> = Vec::new();
        for path in paths {
            let bytes = std::fs::read(path).map_err(|source| LexiconError::Io {
                path: path.clone(),
                source,
            })?;
            let before = (
                lex.words.len(),
                pairs.len(),
                usage.len(),
                lex.homophones.len(),
                lex.over_regularised.len(),
            );
            if let Some(rest) = bytes.strip_prefix(USAGE_HEADER.as_bytes()) {
                read_usage(rest, &mut usage);
            } else if let Some(rest) = bytes.strip_prefix(HOMOPHONES_HEADER.as_bytes()) {
                lex.read_homophones(rest);
            } else if let Some(rest) = bytes.strip_prefix(VERBS_HEADER.as_bytes()) {
                lex.read_verbs(rest);
            } else if let Some(rest) = bytes.strip_prefix(NOUNS_HEADER.as_bytes()) {
                lex.read_nouns(rest);
            } else {
                lex.extend_from(&bytes, &mut pairs);
            }
            let after = (
                lex.words.len(),
                pairs.len(),
                usage.len(),
                lex.homophones.len(),
                lex.over_regularised.len(),
            );
            if after == before {
                return Err(LexiconError::Empty(path.clone()));
            }
            lex.sources.push(path.clone());
        }
        if !usage.is_empty() {
            lex.set_usage(usage);
        }
        for (a, b, c) in pairs {
            if let (Some(a), Some(b)) = (lex.id(&a), lex.id(&b)) {
                *lex.bigrams.entry(pair_key(a, b)).or_default() += c;
            }
        }
        lex.least_bigram = least_count(&lex.bigrams);
        lex.pair_scale = pair_scale(&lex.bigrams, &lex.counts);
        lex.add_es_slips();
        Ok(lex)
    }

    /// Adds the entries of a list held in memory.
    fn extend_from(&mut self, bytes: &[u8], pairs: &mut Vec<(String, String, u64)>) {
        for line in bytes.split(|&b| b == b'\n') {
            let Ok(line) = std::str::from_utf8(line) else {
                continue;
            };
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                [w] => self.add(w, PLAIN_LIST_COUNT),
                [w, c] => self.add(w, c.parse().unwrap_or(PLAIN_LIST_COUNT)),
                [a, b, c] => {
                    if let Ok(c) = c.parse() {
                        pairs.push((a.to_lowercase(), b.to_lowercase(), c));
                    }
                }
                _ => {}
            }
        }
    }

    fn add(&mut self, word: &str, count: u64) {
        let word = word.to_lowercase();
        self.total = self.total.saturating_add(count);
        match self.ids.get(word.as_str()) {
            Some(&id) => self.counts[id as usize] = self.counts[id as usize].saturating_add(count),
            None => {
                let id = self.words.len() as u32;
                if let Some(i) = start_index(word.as_bytes()) {
                    self.starts.resize(26 * 26, 0);
                    self.starts[i] += 1;
                }
                self.ids.insert(word.clone().into_boxed_str(), id);
                self.words.push(word.into_boxed_str());
                self.by_spelling = std::sync::OnceLock::new();
                self.counts.push(count);
            }
        }
    }

    /// A lexicon of the given words, each with the same count (tests, and callers that hold a
    /// list in memory).
    pub fn from_words<'a>(words: impl IntoIterator<Item = &'a str>) -> Self {
        let mut lex = Lexicon::default();
        for w in words {
            lex.add(w, PLAIN_LIST_COUNT);
        }
        lex
    }

    /// A lexicon of words with counts and pairs with counts, held in memory.
    pub fn from_counts<'a>(
        words: impl IntoIterator<Item = (&'a str, u64)>,
        pairs: impl IntoIterator<Item = (&'a str, &'a str, u64)>,
    ) -> Self {
        let mut lex = Lexicon::default();
        for (w, c) in words {
            lex.add(w, c);
        }
        for (a, b, c) in pairs {
            if let (Some(a), Some(b)) = (lex.id(&a.to_lowercase()), lex.id(&b.to_lowercase())) {
                *lex.bigrams.entry(pair_key(a, b)).or_default() += c;
            }
        }
        lex.least_bigram = least_count(&lex.bigrams);
        lex.pair_scale = pair_scale(&lex.bigrams, &lex.counts);
        lex.add_es_slips();
        lex
    }

    /// The same lexicon with a usage list held in memory: (string, times written per billion
    /// words).
    pub fn with_usage<'a>(mut self, usage: impl IntoIterator<Item = (&'a str, u64)>) -> Self {
        self.set_usage(
            usage
                .into_iter()
                .map(|(w, c)| (w.to_ascii_lowercase(), c))
                .collect(),
        );
        self
    }

    /// The same lexicon with homophones held in memory: groups of words that sound the same.
    pub fn with_homophones<'a>(mut self, groups: impl IntoIterator<Item = &'a [&'a str]>) -> Self {
        for group in groups {
            self.add_homophones(group.iter().map(|w| w.to_ascii_lowercase()).collect());
        }
        self
    }

    /// The lines of a homophone list: the words of each line sound the same (ASCII letters
    /// only, lower-cased).
    fn read_homophones(&mut self, bytes: &[u8]) {
        for line in bytes.split(|&b| b == b'\n') {
            let Ok(line) = std::str::from_utf8(line) else {
                continue;
            };
            self.add_homophones(
                line.split_whitespace()
                    .filter(|w| w.bytes().all(|b| b.is_ascii_alphabetic()))
                    .map(str::to_ascii_lowercase)
                    .collect(),
            );
        }
    }

    /// The same lexicon with verbs held in memory: `(lemma, past forms, participle forms)`.
    pub fn with_verbs<'a>(
        mut self,
        verbs: impl IntoIterator<Item = (&'a str, &'a [&'a str], &'a [&'a str])>,
    ) -> Self {
        let verbs: Vec<Verb<'a>> = verbs
            .into_iter()
            .map(|(lemma, past, participle)| Verb {
                lemma,
                past,
                participle,
            })
            .collect();
        self.over_regularised
            .extend(over_regularised(verbs.iter().copied()));
        self
    }

    /// The same lexicon with nouns held in memory: `(singular, plural forms)`.
    pub fn with_nouns<'a>(
        mut self,
        nouns: impl IntoIterator<Item = (&'a str, &'a [&'a str])>,
    ) -> Self {
        let nouns: Vec<Noun<'a>> = nouns
            .into_iter()
            .map(|(singular, plural)| Noun { singular, plural })
            .collect();
        self.over_regularised
            .extend(over_regularised_plurals(nouns.iter().copied()));
        self
    }

    /// The lines of a verb list (`lemma past participle`; lower-case ASCII letters only, other
    /// lines skipped).
    fn read_verbs(&mut self, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        fn word(w: &str) -> bool {
            !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase())
        }
        fn forms(field: &str) -> Vec<&str> {
            field.split('/').filter(|w| word(w)).collect()
        }
        let lines: Vec<(&str, Vec<&str>, Vec<&str>)> = text
            .lines()
            .filter_map(
                |line| match line.split_whitespace().collect::<Vec<_>>()[..] {
                    [lemma, past, participle] if word(lemma) => {
                        Some((lemma, forms(past), forms(participle)))
                    }
                    _ => None,
                },
            )
            .collect();
        self.over_regularised
            .extend(over_regularised(lines.iter().map(
                |(lemma, past, participle)| Verb {
                    lemma,
                    past,
                    participle,
                },
            )));
    }

    /// The lines of a noun list (`singular plural`; lower-case ASCII letters only, other lines
    /// skipped).
    fn read_nouns(&mut self, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        fn word(w: &str) -> bool {
            !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase())
        }
        let lines: Vec<(&str, Vec<&str>)> = text
            .lines()
            .filter_map(
                |line| match line.split_whitespace().collect::<Vec<_>>()[..] {
                    [singular, plural] if word(singular) => {
                        Some((singular, plural.split('/').filter(|w| word(w)).collect()))
                    }
                    _ => None,
                },
            )
            .collect();
        self.over_regularised.extend(over_regularised_plurals(
            lines
                .iter()
                .map(|(singular, plural)| Noun { singular, plural }),
        ));
    }

    /// The word lists' `-es` forms written with `-s` alone (see [`es_written_as_s`]) as slips
    /// of [`Lexicon::over_regularised`].
    fn add_es_slips(&mut self) {
        let slips = es_written_as_s(self.words.iter().map(|w| &**w), |w| {
            self.ids.contains_key(w)
        });
        let slips: Vec<(String, Box<str>)> =
            slips.into_iter().map(|(t, m)| (t, m.into())).collect();
        for (typed, meant) in slips {
            let forms = self
                .over_regularised
                .entry(typed.into_boxed_str())
                .or_default();
            if !forms.contains(&meant) {
                forms.push(meant);
            }
        }
    }

    fn add_homophones(&mut self, group: Vec<String>) {
        for a in &group {
            for b in &group {
                if a == b {
                    continue;
                }
                let others = self.homophones.entry(a.as_str().into()).or_default();
                if !others.iter().any(|o| **o == **b) {
                    others.push(b.as_str().into());
                }
            }
        }
    }

    fn set_usage(&mut self, mut usage: Vec<(String, u64)>) {
        usage.sort_unstable();
        // The first of a repeated string counts (the lists hold each once).
        usage.dedup_by(|b, a| a.0 == b.0);
        // Sorted and deduplicated keys cannot fail to build.
        self.usage = fst::Map::from_iter(usage).ok();
        self.usage_keys = self.usage.as_ref().map(KeyFilter::of).unwrap_or_default();
    }

    /// How many words of the lexicon begin with the first two letters of `word` (lower-case
    /// ASCII); `None` when `word` does not begin with two such letters.
    pub fn words_starting_like(&self, word: &str) -> Option<u32> {
        let i = start_index(word.as_bytes())?;
        Some(self.starts.get(i).copied().unwrap_or(0))
    }

    /// How many words of the lexicon begin with `prefix` and are longer than it: a string that
    /// begins many (`simpli`, `intra`) is a piece of words more than a word of its own.
    pub fn words_beginning_with(&self, prefix: &str) -> usize {
        let sorted = self.by_spelling.get_or_init(|| {
            let mut ids: Vec<u32> = (0..self.words.len() as u32).collect();
            ids.sort_unstable_by(|&a, &b| self.words[a as usize].cmp(&self.words[b as usize]));
            ids
        });
        let first = sorted.partition_point(|&id| &*self.words[id as usize] < prefix);
        sorted[first..]
            .iter()
            .take_while(|&&id| self.words[id as usize].starts_with(prefix))
            .filter(|&&id| self.words[id as usize].len() > prefix.len())
            .count()
    }

    /// Whether `word` (lower case) is a word of the language.
    pub fn contains(&self, word: &str) -> bool {
        self.ids.contains_key(word)
    }

    /// Whether `word` (lower case, not itself listed) is a listed word with its apostrophe left
    /// out (`dont`, `didnt`, `youre`, `im`): a contraction the writer meant, not a typo of
    /// another word (`we dont really need` is no `we don`).
    pub fn apostrophe_left_out(&self, word: &str) -> bool {
        const LONGEST: usize = 8; // `shouldnt`
        word.len() <= LONGEST
            && word.bytes().all(|b| b.is_ascii_lowercase())
            && !self.contains(word)
            && (1..word.len()).any(|k| {
                let mut with = String::with_capacity(word.len() + 1);
                with.push_str(&word[..k]);
                with.push('\'');
                with.push_str(&word[k..]);
                self.contains(&with)
            })
    }

    /// The id of `word` (lower case).
    pub fn id(&self, word: &str) -> Option<u32> {
        self.ids.get(word).copied()
    }

    /// The word of an id.
    pub fn word(&self, id: u32) -> &str {
        &self.words[id as usize]
    }

    /// The count of a word by id.
    pub fn count_of(&self, id: u32) -> u64 {
        self.counts[id as usize]
    }

    /// The least count of a listed pair (0 without pairs): a pair not listed is written less
    /// often, or the list would hold it.
    pub fn least_bigram(&self) -> u64 {
        self.least_bigram
    }

    /// How many times over the pair list counts its pairs against the word list's counts, at
    /// least (1 without pairs): the pairs listed after a common word add up to this many times
    /// the word's own count. A pair's count over the word list's total overstates how often it
    /// is written by as much.
    pub fn pair_scale(&self) -> f64 {
        self.pair_scale.max(1.0)
    }

    /// Every listed pair: (first id, second id, count).
    pub fn bigrams(&self) -> impl Iterator<Item = (u32, u32, u64)> + '_ {
        self.bigrams
            .iter()
            .map(|(&key, &count)| ((key >> 32) as u32, key as u32, count))
    }

    /// How often `a` is followed by `b` (ids), 0 when the pair is not listed.
    pub fn bigram(&self, a: u32, b: u32) -> u64 {
        self.bigrams.get(&pair_key(a, b)).copied().unwrap_or(0)
    }

    /// How often `word` (lower case) is written, per billion words, misspellings included;
    /// `None` when no usage list is loaded or it does not hold the word. It tells a name or a
    /// brand that no dictionary holds (written often) from a typo (written seldom or never).
    pub fn usage(&self, word: &str) -> Option<u64> {
        let map = self.usage.as_ref()?;
        if !self.usage_keys.may_hold(word.as_bytes()) {
            return None;
        }
        super::recall::usage(map as *const _ as usize, word, || map.get(word))
    }

    /// The strings of the usage list written at least `least` times per billion words, with
    /// how often (empty without a usage list).
    pub fn written_at_least(&self, least: u64) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        if let Some(m) = &self.usage {
            let mut stream = m.stream();
            while let Some((key, count)) = fst::Streamer::next(&mut stream) {
                if count >= least {
                    if let Ok(w) = std::str::from_utf8(key) {
                        out.push((w.to_string(), count));
                    }
                }
            }
        }
        out
    }

    /// Whether a usage list is loaded.
    pub fn has_usage(&self) -> bool {
        self.usage.is_some()
    }

    /// The other words that sound as `word` (lower case) does, when a homophone list is loaded
    /// (`wrote` for `rote`): what people write for a word they know by its sound.
    pub fn homophones(&self, word: &str) -> &[Box<str>] {
        self.homophones.get(word).map_or(&[], |v| v.as_slice())
    }

    /// The forms an irregular verb has where `typed` (lower case) puts the regular past ending
    /// on it (`taught` for `teached`, `ate` and `eaten` for `eated`), when a verb list is
    /// loaded, and a noun's plurals where it puts the regular plural ending on a noun with an old
    /// plural (`teeth` for `tooths`), when a noun list is, and a word list's `-es` form where it
    /// has `-s` alone (`fixes` for `fixs`, `potatoes` for `potatos`); empty for any other string,
    /// and for every form a verb or noun of its list has.
    pub fn over_regularised(&self, typed: &str) -> &[Box<str>] {
        self.over_regularised
            .get(typed)
            .map_or(&[], |v| v.as_slice())
    }

    /// Sum of the word counts.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Number of words.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// True when it holds no word.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Number of word pairs.
    pub fn bigram_len(&self) -> usize {
        self.bigrams.len()
    }

    /// The words, by id.
    pub fn words(&self) -> impl Iterator<Item = &str> {
        self.words.iter().map(|w| &**w)
    }

    /// The files it was read from.
    pub fn sources(&self) -> &[PathBuf] {
        &self.sources
    }

    /// Bytes held in memory (approximate: strings, tables, hash maps and the usage list).
    pub fn heap_bytes(&self) -> usize {
        let strings: usize = self.words.iter().map(|w| w.len() * 2).sum();
        let usage = self
            .usage
            .as_ref()
            .map_or(0, |m| m.as_fst().as_bytes().len());
        let homophones: usize = self
            .homophones
            .iter()
            .map(|(k, v)| k.len() + 16 + 24 + v.iter().map(|w| w.len() + 16).sum::<usize>())
            .sum();
        let over_regularised: usize = self
            .over_regularised
            .iter()
            .map(|(k, v)| k.len() + 16 + 24 + v.iter().map(|w| w.len() + 16).sum::<usize>())
            .sum();
        strings
            + over_regularised
            + self.words.len() * (16 + 8 + 16 + 8)
            + self.bigrams.len() * 24
            + usage
            + homophones
    }
}

/// The `word count` lines of a usage list, lower-cased, plain ASCII letters only.
fn read_usage(bytes: &[u8], out: &mut Vec<(String, u64)>) {
    for line in bytes.split(|&b| b == b'\n') {
        let Ok(line) = std::str::from_utf8(line) else {
            continue;
        };
        if let [w, c] = line.split_whitespace().collect::<Vec<_>>().as_slice() {
            if let (true, Ok(c)) = (w.bytes().all(|b| b.is_ascii_alphabetic()), c.parse()) {
                out.push((w.to_ascii_lowercase(), c));
            }
        }
    }
}

fn pair_key(a: u32, b: u32) -> u64 {
    (u64::from(a) << 32) | u64::from(b)
}

/// The default lists under `assets` (the `CAPOT_ASSETS` directory, `assets` by default): the
/// word list and, when they are there, the pair list, the usage list, the homophone list and the
/// verb and noun lists.
pub fn default_paths(assets: &Path) -> Vec<PathBuf> {
    let mut paths = vec![assets.join(DEFAULT_LEXICON)];
    for optional in [
        DEFAULT_BIGRAMS,
        DEFAULT_USAGE,
        DEFAULT_HOMOPHONES,
        DEFAULT_VERBS,
        DEFAULT_NOUNS,
    ] {
        let path = assets.join(optional);
        if path.is_file() {
            paths.push(path);
        }
    }
    paths
}

/// The default word list path under `assets`.
pub fn default_path(assets: &Path) -> PathBuf {
    assets.join(DEFAULT_LEXICON)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_beginning_with_counts_longer_words_only_and_sees_words_added_later() {
        let mut lex = Lexicon::from_words(["simplify", "simplicity", "simple", "sim", "zebra"]);
        assert_eq!(lex.words_beginning_with("simpli"), 2);
        assert_eq!(lex.words_beginning_with("sim"), 3);
        assert_eq!(lex.words_beginning_with("zebra"), 0);
        assert_eq!(lex.words_beginning_with("q"), 0);
        lex.add("simplified", 1);
        assert_eq!(lex.words_beginning_with("simpli"), 3);
    }

    #[test]
    fn it_counts_the_words_that_begin_with_each_two_letters() {
        let lex = Lexicon::from_words(["shark", "sharp", "shore", "exon", "Xylophone", "a", "é"]);
        assert_eq!(lex.words_starting_like("shxyz"), Some(3));
        assert_eq!(lex.words_starting_like("xy"), Some(1));
        assert_eq!(lex.words_starting_like("wxons"), Some(0));
        // Fewer than two letters a–z: no answer.
        assert_eq!(lex.words_starting_like("a"), None);
        assert_eq!(lex.words_starting_like("é1"), None);
        assert_eq!(Lexicon::default().words_starting_like("sh"), Some(0));
    }

    #[test]
    fn the_pair_scale_is_the_most_a_common_words_listed_pairs_outnumber_it() {
        let words = [("will", 1_000), ("be", 2_000), ("able", 10)];
        // The pairs after `will` add up to 5 times its count, those after `be` to once.
        let lex = Lexicon::from_counts(
            words,
            [
                ("will", "be", 4_000),
                ("will", "able", 1_000),
                ("be", "able", 2_000),
            ],
        );
        assert_eq!(lex.pair_scale(), 5.0);
        // Fewer pairs than words: never below 1.
        let lex = Lexicon::from_counts(words, [("will", "be", 10)]);
        assert_eq!(lex.pair_scale(), 1.0);
        assert_eq!(Lexicon::default().pair_scale(), 1.0);
    }

    #[test]
    fn reads_plain_frequency_and_pair_lists() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.txt");
        let b = dir.path().join("b.txt");
        let p = dir.path().join("p.txt");
        std::fs::write(&a, "the 23135851162\nOf 13151942776\n\n").unwrap();
        std::fs::write(&b, b"Zurich\nna\xefve\nword\n").unwrap();
        std::fs::write(&p, "of the 1000\nthe zurich 7\nthe nowhere 5\n").unwrap();
        let lex = Lexicon::load(&[a.clone(), b, p]).unwrap();
        assert!(lex.contains("the") && lex.contains("of") && lex.contains("zurich"));
        assert!(lex.contains("word"));
        assert_eq!(lex.len(), 4, "the invalid UTF-8 line is skipped");
        let (of, the, zurich) = (
            lex.id("of").unwrap(),
            lex.id("the").unwrap(),
            lex.id("zurich").unwrap(),
        );
        assert_eq!(lex.count_of(the), 23135851162);
        assert_eq!(lex.bigram(of, the), 1000);
        assert_eq!(lex.bigram(the, zurich), 7);
        assert_eq!(lex.bigram(the, of), 0);
        assert_eq!(lex.bigram_len(), 2, "a pair of an unknown word is kept out");
        // A usage list: told by its header, ASCII letters only, not words of the language.
        let u = dir.path().join("u.txt");
        std::fs::write(&u, "#usage\nthe 53703180\nRecieve 562\ncafé 9\nx1 5\n").unwrap();
        let lex = Lexicon::load(&[a.clone(), u]).unwrap();
        assert!(lex.has_usage());
        assert_eq!(lex.usage("recieve"), Some(562));
        assert_eq!(lex.usage("the"), Some(53703180));
        assert_eq!(
            (lex.usage("café"), lex.usage("x1"), lex.usage("of")),
            (None, None, None)
        );
        assert!(
            !lex.contains("recieve"),
            "a usage list adds no words to the language"
        );
        assert_eq!(lex.len(), 2);
        // A homophone list: told by its header, each line a sound; no words of the language.
        let h = dir.path().join("h.txt");
        std::fs::write(
            &h,
            "#homophones\nrote Wrote roat\npain pane\nlo low lowe\nx1 y2\n",
        )
        .unwrap();
        let lex = Lexicon::load(&[a.clone(), h]).unwrap();
        let sounds = |w: &str| -> Vec<&str> { lex.homophones(w).iter().map(|s| &**s).collect() };
        assert_eq!(sounds("rote"), ["wrote", "roat"]);
        assert_eq!(sounds("wrote"), ["rote", "roat"]);
        assert_eq!(sounds("pane"), ["pain"]);
        assert!(sounds("the").is_empty() && sounds("x1").is_empty());
        assert!(!lex.contains("wrote"), "a homophone list adds no words");
        let empty_sounds = dir.path().join("eh.txt");
        std::fs::write(&empty_sounds, "#homophones\nalone\n").unwrap();
        assert!(matches!(
            Lexicon::load(&[a.clone(), empty_sounds]),
            Err(LexiconError::Empty(_))
        ));
        // A verb list: told by its header, `lemma past participle` lines; a malformed line,
        // upper case and `-` are skipped. It adds no words either.
        let v = dir.path().join("v.txt");
        std::fs::write(
            &v,
            "#verbs\nteach taught -\neat ate eaten\nwalk walked -\nRun Ran Run\nbroken\n",
        )
        .unwrap();
        let lex = Lexicon::load(&[a.clone(), v]).unwrap();
        let forms =
            |w: &str| -> Vec<&str> { lex.over_regularised(w).iter().map(|s| &**s).collect() };
        assert_eq!(forms("teached"), ["taught"]);
        assert_eq!(forms("eated"), ["ate", "eaten"]);
        assert!(forms("walked").is_empty() && forms("runned").is_empty());
        assert!(!lex.contains("taught"), "a verb list adds no words");
        let regular_verbs = dir.path().join("ev.txt");
        std::fs::write(&regular_verbs, "#verbs\nwalk walked -\n").unwrap();
        assert!(matches!(
            Lexicon::load(&[a.clone(), regular_verbs]),
            Err(LexiconError::Empty(_))
        ));
        // A noun list: `singular plural` lines; only old plurals give slips.
        let n = dir.path().join("n.txt");
        std::fs::write(&n, "#nouns\ntooth teeth\ncat cats\nThief Thieves\nchild\n").unwrap();
        let lex = Lexicon::load(&[a.clone(), n]).unwrap();
        assert_eq!(lex.over_regularised("tooths").len(), 1);
        assert!(lex.over_regularised("cats").is_empty() && !lex.contains("teeth"));
        let regular_nouns = dir.path().join("en.txt");
        std::fs::write(&regular_nouns, "#nouns\ncat cats\n").unwrap();
        assert!(matches!(
            Lexicon::load(&[a.clone(), regular_nouns]),
            Err(LexiconError::Empty(_))
        ));
        let empty_usage = dir.path().join("eu.txt");
        std::fs::write(&empty_usage, "#usage\n\n").unwrap();
        assert!(matches!(
            Lexicon::load(&[a.clone(), empty_usage]),
            Err(LexiconError::Empty(_))
        ));
        let empty = dir.path().join("empty.txt");
        std::fs::write(&empty, "\n\n").unwrap();
        assert!(matches!(
            Lexicon::load(&[empty]),
            Err(LexiconError::Empty(_))
        ));
        let err = Lexicon::load(&[dir.path().join("missing.txt")]).unwrap_err();
        assert!(err.to_string().contains("missing.txt"), "{err}");
    }
}
