//! The corpus vocabulary: what query repair knows about the words of the indexed documents.
//!
//! Two files, both covered by the manifest's checksums:
//!
//! | file | content |
//! |---|---|
//! | `vocab-<tag>.fst` | an [`fst::Map`] from every lower-cased alphabetic word of the corpus to its count |
//! | `vocab-<tag>.pairs` | a Bloom filter of the unordered pairs of content words that occur within [`PAIR_WINDOW`] content words of each other in one document (little-endian `u64` words) |
//! | `vocab-<tag>.bigrams` | an [`fst::Map`] from `first second` (two adjacent words of a title or a text, one space between) to its count: the corpus side of the speller's language model |
//!
//! An index written before the bigram file existed has only the first two; it still serves, and
//! repair says what it lacks (`capot index vocab` adds it). Bigrams seen fewer than
//! `bigram_min_count` times are not stored: the count is raised from 1 until at most
//! [`MAX_STORED_BIGRAMS`] remain, so the file stays small on corpora of millions of passages.
//!
//! The counts say which words exist and how common they are; the pairs are the context signal:
//! a correction is only made towards a word that the corpus uses near another word of the query.
//! The Bloom filter is sized from a HyperLogLog estimate of the distinct pairs for a 1% false
//! positive rate, so its size grows with the corpus's distinct pairs, not its length.
//! `<tag>` is the first 12 hex digits of the word file's SHA-256, so that `capot index vocab`
//! can add or replace a vocabulary next to a live index and switch to it with one rename of the
//! manifest.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::IndexError;
use super::fileio::{HashingReader, HashingWriter};
use super::manifest::FileInfo;

/// Version of the vocabulary files' layout and hashing.
pub const VOCAB_FORMAT: u32 = 1;
/// Content words within this distance (in content words) of each other form a pair.
pub const PAIR_WINDOW: usize = 10;
/// Words longer than this are not counted (base64 blobs, run-together junk).
pub const MAX_WORD_CHARS: usize = 40;
/// Bloom filter false-positive rate the filter is sized for.
const BLOOM_FP_RATE: f64 = 0.01;
/// Hash functions of the Bloom filter (optimal for 1%: ln 2 × 9.6 bits per pair ≈ 7).
const BLOOM_HASHES: u32 = 7;
/// At most this many distinct bigrams are stored (about 10 bytes each in the FST).
pub const MAX_STORED_BIGRAMS: usize = 4_000_000;
/// While counting, the table of distinct bigrams is thinned (pairs seen once are dropped) when it
/// grows past this many entries, which bounds the build's memory (about 1.5 GB) on any corpus.
const MAX_COUNTED_BIGRAMS: usize = 60_000_000;

/// Words too common to say anything about a query's topic; they are not content words, so they
/// form no pairs and give no context.
pub const STOPWORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "because", "been", "before", "being", "between", "both", "but", "by", "can", "could", "did",
    "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has",
    "have", "having", "he", "her", "here", "hers", "him", "his", "how", "i", "if", "in", "into",
    "is", "it", "its", "just", "long", "many", "me", "more", "most", "much", "my", "no", "nor",
    "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "out", "over", "own",
    "s", "same", "she", "should", "so", "some", "such", "t", "than", "that", "the", "their",
    "them", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under",
    "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who",
    "whom", "why", "will", "with", "would", "you", "your",
];

/// Whether `word` (lower case) is a stopword. Query repair asks it of every word it weighs, many
/// times a query, so the search compares integers, not strings: every stopword fits in 8 bytes.
pub fn is_stopword(word: &str) -> bool {
    static PACKED: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
    let Some(key) = packed(word) else {
        return false;
    };
    PACKED
        .get_or_init(|| {
            let mut keys: Vec<u64> = STOPWORDS.iter().filter_map(|w| packed(w)).collect();
            keys.sort_unstable();
            keys
        })
        .binary_search(&key)
        .is_ok()
}

/// A word of at most 8 bytes, none of them 0, as one big-endian integer (zero-padded), which
/// orders as the strings do.
fn packed(word: &str) -> Option<u64> {
    let b = word.as_bytes();
    (b.len() <= 8 && !b.contains(&0)).then(|| {
        let mut key = [0u8; 8];
        key[..b.len()].copy_from_slice(b);
        u64::from_be_bytes(key)
    })
}

/// The manifest's `vocab` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VocabInfo {
    /// Layout version ([`VOCAB_FORMAT`]).
    pub format: u32,
    /// Distinct words.
    pub words: u64,
    /// Word occurrences counted.
    pub tokens: u64,
    /// Pair window, in content words.
    pub window: usize,
    /// Estimated distinct content-word pairs.
    pub pairs: u64,
    /// Bits of the Bloom filter (a multiple of 64).
    pub bloom_bits: u64,
    /// Hash functions of the Bloom filter.
    pub bloom_hashes: u32,
    /// Name of the word-count file in the index directory.
    pub words_file: String,
    /// Name of the pair filter file in the index directory.
    pub pairs_file: String,
    /// Seconds the vocabulary took to build.
    pub build_seconds: f64,
    /// Name of the bigram-count file (absent in indexes built before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bigrams_file: Option<String>,
    /// Distinct bigrams stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bigrams: Option<u64>,
    /// Bigrams seen fewer times than this were left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bigram_min_count: Option<u64>,
}

impl VocabInfo {
    /// The files the vocabulary is made of.
    pub fn files(&self) -> Vec<&str> {
        let mut f = vec![self.words_file.as_str(), self.pairs_file.as_str()];
        f.extend(self.bigrams_file.as_deref());
        f
    }
}

/// Splits text into lower-cased alphabetic words: maximal runs of alphabetic characters
/// (so `deen's` gives `deen` and `s`, `covid-19` gives `covid`).
pub fn corpus_words(text: &str) -> impl Iterator<Item = String> + '_ {
    corpus_word_spans(text).map(str::to_lowercase)
}

/// The words [`corpus_words`] gives, as written (before lower-casing): for callers that look
/// words up and would rather not allocate each.
pub fn corpus_word_spans(text: &str) -> impl Iterator<Item = &str> + '_ {
    text.split(|c: char| !c.is_alphabetic())
        .filter(|w| !w.is_empty() && w.chars().count() <= MAX_WORD_CHARS)
}

/// The vocabulary of an index, loaded.
pub struct Vocabulary {
    counts: fst::Map<Vec<u8>>,
    pairs: Bloom,
    bigrams: Option<fst::Map<Vec<u8>>>,
    /// The keys of `counts` and of `bigrams`, so that most look-ups of a string the corpus
    /// never uses (the speller asks of many) are answered without walking the maps.
    count_keys: KeyFilter,
    bigram_keys: KeyFilter,
    info: VocabInfo,
}

impl std::fmt::Debug for Vocabulary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vocabulary")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl Vocabulary {
    /// Counts the words and pairs of `texts` (one item per document).
    pub fn build<'a>(texts: impl Iterator<Item = (&'a str, &'a str)> + Clone) -> Self {
        let started = std::time::Instant::now();
        let mut counts: HashMap<String, u64> = HashMap::new();
        let mut hll = HyperLogLog::new();
        let mut tokens = 0u64;
        let mut content = Vec::new();
        // Pass 1: counts and the number of distinct pairs, from one split of each document.
        for (title, text) in texts.clone() {
            content.clear();
            for w in corpus_words(title).chain(corpus_words(text)) {
                tokens += 1;
                match counts.get_mut(w.as_str()) {
                    Some(c) => *c += 1,
                    None => {
                        counts.insert(w.clone(), 1);
                    }
                }
                if !is_stopword(&w) {
                    content.push(w);
                }
            }
            for_each_pair(&content, |h| hll.add(h));
        }
        let mut words: Vec<(String, u64)> = counts.into_iter().collect();
        words.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        // Word ids in sorted order, so that bigrams sorted by id pair are sorted as FST keys.
        let ids: HashMap<&str, u32> = words
            .iter()
            .enumerate()
            .map(|(i, (w, _))| (w.as_str(), i as u32))
            .collect();
        // Pass 2: the pairs into a filter sized by pass 1, and the adjacent-word counts.
        let distinct_pairs = hll.estimate();
        let mut pairs = Bloom::with_capacity(distinct_pairs);
        let mut bigrams = BigramCounter::default();
        for (title, text) in texts {
            content.clear();
            for part in [title, text] {
                let mut prev: Option<u32> = None;
                for w in corpus_words(part) {
                    let id = ids.get(w.as_str()).copied();
                    if let (Some(a), Some(b)) = (prev, id) {
                        bigrams.add(a, b);
                    }
                    prev = id;
                    if !is_stopword(&w) {
                        content.push(w);
                    }
                }
            }
            for_each_pair(&content, |h| pairs.insert(h));
        }
        let (bigrams, bigram_min_count) = bigrams.into_fst(&words);
        let mut builder = fst::MapBuilder::memory();
        for (w, c) in &words {
            // Keys are sorted and distinct, so insertion cannot fail.
            let _ = builder.insert(w.as_bytes(), *c);
        }
        let bytes = builder.into_inner().unwrap_or_default();
        let counts = fst::Map::new(bytes).unwrap_or_default();
        let info = VocabInfo {
            format: VOCAB_FORMAT,
            words: words.len() as u64,
            tokens,
            window: PAIR_WINDOW,
            pairs: distinct_pairs,
            bloom_bits: pairs.bits(),
            bloom_hashes: BLOOM_HASHES,
            words_file: String::new(),
            pairs_file: String::new(),
            build_seconds: (started.elapsed().as_secs_f64() * 1e3).round() / 1e3,
            bigrams_file: None,
            bigrams: Some(bigrams.len() as u64),
            bigram_min_count: Some(bigram_min_count),
        };
        Vocabulary {
            count_keys: KeyFilter::of(&counts),
            bigram_keys: KeyFilter::of(&bigrams),
            counts,
            pairs,
            bigrams: Some(bigrams),
            info,
        }
    }

    /// Writes the two files into `dir` and returns the manifest section and the files' entries.
    pub(crate) fn write(
        &mut self,
        dir: &Path,
    ) -> Result<(VocabInfo, Vec<(String, FileInfo)>), IndexError> {
        let fst_bytes = self.counts.as_fst().as_bytes();
        let tag = {
            use sha2::{Digest, Sha256};
            hex::encode(Sha256::digest(fst_bytes))[..12].to_string()
        };
        let words_file = format!("vocab-{tag}.fst");
        let pairs_file = format!("vocab-{tag}.pairs");
        let mut w = HashingWriter::create(&dir.join(&words_file))?;
        w.put(fst_bytes)?;
        let words_info = w.finish()?;
        let mut w = HashingWriter::create(&dir.join(&pairs_file))?;
        let mut buf = Vec::with_capacity(self.pairs.words.len() * 8);
        for word in &self.pairs.words {
            buf.extend_from_slice(&word.to_le_bytes());
        }
        w.put(&buf)?;
        let pairs_info = w.finish()?;
        let mut files = vec![
            (words_file.clone(), words_info),
            (pairs_file.clone(), pairs_info),
        ];
        if let Some(bigrams) = &self.bigrams {
            let bigrams_file = format!("vocab-{tag}.bigrams");
            let mut w = HashingWriter::create(&dir.join(&bigrams_file))?;
            w.put(bigrams.as_fst().as_bytes())?;
            files.push((bigrams_file.clone(), w.finish()?));
            self.info.bigrams_file = Some(bigrams_file);
        }
        self.info.words_file = words_file;
        self.info.pairs_file = pairs_file;
        Ok((self.info.clone(), files))
    }

    /// Reads the files `info` names from `dir`, checking sizes and (when `verify`) checksums
    /// against the manifest's `files`.
    pub(crate) fn read(
        dir: &Path,
        info: &VocabInfo,
        files: &std::collections::BTreeMap<String, FileInfo>,
        verify: bool,
    ) -> Result<Self, IndexError> {
        let entry = |name: &str| {
            files.get(name).ok_or_else(|| {
                IndexError::corrupt(dir.join(name), "the manifest lists no checksum for it")
            })
        };
        let (words, pairs) = (entry(&info.words_file)?, entry(&info.pairs_file)?);
        if info.format != VOCAB_FORMAT {
            return Err(IndexError::corrupt(
                dir.join(&info.words_file),
                format!(
                    "vocabulary format {} is not supported (this build reads {VOCAB_FORMAT})",
                    info.format
                ),
            ));
        }
        let read_all = |name: &str, file: &FileInfo| -> Result<Vec<u8>, IndexError> {
            let path = dir.join(name);
            let mut r = HashingReader::open(&path, verify)?;
            let len = usize::try_from(r.len()).map_err(|_| {
                IndexError::corrupt(&path, "file is larger than this machine can address")
            })?;
            let mut buf = vec![0u8; len];
            r.take(&mut buf)?;
            r.finish(verify.then_some(file.blake3.as_str()))?;
            Ok(buf)
        };
        let words_path = dir.join(&info.words_file);
        let counts = fst::Map::new(read_all(&info.words_file, words)?)
            .map_err(|e| IndexError::corrupt(&words_path, format!("not a word-count FST: {e}")))?;
        if counts.len() as u64 != info.words {
            return Err(IndexError::corrupt(
                &words_path,
                format!(
                    "holds {} words, the manifest says {}",
                    counts.len(),
                    info.words
                ),
            ));
        }
        let pairs_path = dir.join(&info.pairs_file);
        let raw = read_all(&info.pairs_file, pairs)?;
        if raw.len() as u64 * 8 != info.bloom_bits || raw.is_empty() || raw.len() % 8 != 0 {
            return Err(IndexError::corrupt(
                &pairs_path,
                format!(
                    "holds {} bytes, the manifest says {} bits",
                    raw.len(),
                    info.bloom_bits
                ),
            ));
        }
        if info.bloom_hashes == 0 || info.bloom_hashes > 32 {
            return Err(IndexError::corrupt(
                &pairs_path,
                format!(
                    "{} hash functions is out of range 1..=32",
                    info.bloom_hashes
                ),
            ));
        }
        let words_vec = raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect();
        let bigrams = match &info.bigrams_file {
            None => None,
            Some(name) => {
                let path = dir.join(name);
                let map = fst::Map::new(read_all(name, entry(name)?)?).map_err(|e| {
                    IndexError::corrupt(&path, format!("not a bigram-count FST: {e}"))
                })?;
                if info.bigrams.is_some_and(|n| n != map.len() as u64) {
                    return Err(IndexError::corrupt(
                        &path,
                        format!(
                            "holds {} bigrams, the manifest says {}",
                            map.len(),
                            info.bigrams.unwrap_or_default()
                        ),
                    ));
                }
                Some(map)
            }
        };
        Ok(Vocabulary {
            count_keys: KeyFilter::of(&counts),
            bigram_keys: bigrams.as_ref().map(KeyFilter::of).unwrap_or_default(),
            counts,
            pairs: Bloom {
                words: words_vec,
                hashes: info.bloom_hashes,
            },
            bigrams,
            info: info.clone(),
        })
    }

    /// What the manifest says about it.
    pub fn info(&self) -> &VocabInfo {
        &self.info
    }

    /// How often `word` (lower case) occurs in the corpus; 0 if never.
    pub fn count(&self, word: &str) -> u64 {
        if !self.count_keys.may_hold(word.as_bytes()) {
            return 0;
        }
        self.counts.get(word.as_bytes()).unwrap_or(0)
    }

    /// Whether the corpus uses `a` and `b` within [`PAIR_WINDOW`] content words of each other
    /// in one document (false positives at about 1%).
    pub fn near(&self, a: &str, b: &str) -> bool {
        a != b && self.pairs.contains(pair_hash(a, b))
    }

    /// The word-count map, for candidate searches.
    pub fn counts(&self) -> &fst::Map<Vec<u8>> {
        &self.counts
    }

    /// Whether the adjacent-word counts are there (indexes built before they existed lack them).
    pub fn has_bigrams(&self) -> bool {
        self.bigrams.is_some()
    }

    /// How often `a` is directly followed by `b` in a title or text (lower case); 0 when never,
    /// when seen fewer than `bigram_min_count` times, or when the index has no bigram counts.
    pub fn bigram(&self, a: &str, b: &str) -> u64 {
        self.bigram_recalled(a, b, |_, walk| walk())
    }

    /// [`Vocabulary::bigram`] with `recall` asked between the key filter and the walk of the
    /// map (a thousand or more instructions): given the pair's key and the walk, it may answer
    /// from what it kept of earlier walks (the speller keeps one query's answers).
    pub fn bigram_recalled(
        &self,
        a: &str,
        b: &str,
        recall: impl FnOnce(&[u8], &dyn Fn() -> u64) -> u64,
    ) -> u64 {
        let Some(map) = &self.bigrams else {
            return 0;
        };
        let mut key = [0u8; 2 * MAX_WORD_CHARS * 4 + 1];
        let len = a.len() + 1 + b.len();
        if len > key.len() {
            return 0;
        }
        key[..a.len()].copy_from_slice(a.as_bytes());
        key[a.len()] = b' ';
        key[a.len() + 1..len].copy_from_slice(b.as_bytes());
        let key = &key[..len];
        if !self.bigram_keys.may_hold(key) {
            return 0;
        }
        recall(key, &|| map.get(key).unwrap_or(0))
    }

    /// Sizes of the files it is written as: (word counts, pair filter, bigram counts), in bytes.
    pub fn file_bytes(&self) -> (u64, u64, u64) {
        (
            self.counts.as_fst().as_bytes().len() as u64,
            self.pairs.words.len() as u64 * 8,
            self.bigrams
                .as_ref()
                .map_or(0, |b| b.as_fst().as_bytes().len() as u64),
        )
    }

    /// Bytes held in memory.
    pub fn heap_bytes(&self) -> usize {
        let (w, p, b) = self.file_bytes();
        (w + p + b) as usize
    }
}

/// Counts adjacent word pairs by word id, in bounded memory.
#[derive(Default)]
struct BigramCounter {
    counts: HashMap<u64, u32, foldhash::fast::FixedState>,
    /// Counts below this may be missing (the table was thinned).
    floor: u32,
}

impl BigramCounter {
    fn add(&mut self, a: u32, b: u32) {
        let c = self
            .counts
            .entry((u64::from(a) << 32) | u64::from(b))
            .or_default();
        *c = c.saturating_add(1);
        if self.counts.len() > MAX_COUNTED_BIGRAMS {
            self.floor += 1;
            let floor = self.floor;
            self.counts.retain(|_, c| *c > floor);
        }
    }

    /// The FST of the pairs kept (`first second` → count) and the least count kept.
    fn into_fst(self, words: &[(String, u64)]) -> (fst::Map<Vec<u8>>, u64) {
        let mut min = u64::from(self.floor) + 1;
        let mut by_count: Vec<u32> = self.counts.values().copied().collect();
        if by_count.len() > MAX_STORED_BIGRAMS {
            by_count.sort_unstable_by(|a, b| b.cmp(a));
            // Raise the threshold past the count at the cap, so ties are all in or all out.
            min = min.max(u64::from(by_count[MAX_STORED_BIGRAMS]) + 1);
        }
        drop(by_count);
        let mut kept: Vec<(u64, u32)> = self
            .counts
            .into_iter()
            .filter(|&(_, c)| u64::from(c) >= min)
            .collect();
        kept.sort_unstable_by_key(|&(k, _)| k);
        let mut builder = fst::MapBuilder::memory();
        let mut key = Vec::new();
        for (k, c) in kept {
            let (a, b) = ((k >> 32) as usize, (k & 0xffff_ffff) as usize);
            key.clear();
            key.extend_from_slice(words[a].0.as_bytes());
            key.push(b' ');
            key.extend_from_slice(words[b].0.as_bytes());
            // Sorted by id pair = sorted as keys (ids follow the sorted words, and the space
            // sorts below every letter); a duplicate cannot occur.
            let _ = builder.insert(&key, u64::from(c));
        }
        let bytes = builder.into_inner().unwrap_or_default();
        (fst::Map::new(bytes).unwrap_or_default(), min)
    }
}

/// Calls `f` with the hash of every pair of a document's content words (in order) that lie
/// within [`PAIR_WINDOW`] content words of each other.
fn for_each_pair(content: &[String], mut f: impl FnMut(u64)) {
    for (i, a) in content.iter().enumerate() {
        for b in content.iter().skip(i + 1).take(PAIR_WINDOW) {
            if a != b {
                f(pair_hash(a, b));
            }
        }
    }
}

/// FNV-1a over bytes; stable across versions and platforms (it is part of the file format).
fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// splitmix64's finaliser: spreads the bits of `x`.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Hash of the unordered pair {a, b}.
fn pair_hash(a: &str, b: &str) -> u64 {
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    let h = fnv1a(0xcbf2_9ce4_8422_2325, lo.as_bytes());
    mix(fnv1a(h ^ 0xff, hi.as_bytes()))
}

/// A Bloom filter over 64-bit hashes (double hashing: bit i = h1 + i·h2 mod m).
struct Bloom {
    words: Vec<u64>,
    hashes: u32,
}

impl Bloom {
    /// Sized for `n` distinct items at [`BLOOM_FP_RATE`].
    fn with_capacity(n: u64) -> Self {
        let bits_per_item = -BLOOM_FP_RATE.ln() / (std::f64::consts::LN_2.powi(2));
        let bits = ((n.max(1) as f64) * bits_per_item).ceil() as u64;
        let words = bits.div_ceil(64).max(16) as usize;
        Bloom {
            words: vec![0; words],
            hashes: BLOOM_HASHES,
        }
    }

    fn bits(&self) -> u64 {
        self.words.len() as u64 * 64
    }

    fn positions(&self, h: u64) -> impl Iterator<Item = usize> {
        let m = self.bits();
        let h1 = h;
        let h2 = mix(h ^ 0x9e37_79b9_7f4a_7c15) | 1;
        (0..u64::from(self.hashes)).map(move |i| (h1.wrapping_add(i.wrapping_mul(h2)) % m) as usize)
    }

    fn insert(&mut self, h: u64) {
        for p in self.positions(h).collect::<Vec<_>>() {
            self.words[p / 64] |= 1 << (p % 64);
        }
    }

    fn contains(&self, h: u64) -> bool {
        self.positions(h)
            .all(|p| self.words[p / 64] & (1 << (p % 64)) != 0)
    }
}

/// The keys of an FST map in a Bloom filter of one 64-bit word per key (4 bits of it, about
/// 16 bits a key: under 1% false positives), built when the map is: a key it lacks is not in
/// the map, found in a few instructions where the map's walk takes hundreds. Not written to
/// disk.
#[derive(Clone, Default)]
pub(crate) struct KeyFilter {
    /// A power of two in length, or empty (then it lets every key through).
    blocks: Vec<u64>,
}

impl KeyFilter {
    /// The filter of `map`'s keys.
    pub(crate) fn of(map: &fst::Map<Vec<u8>>) -> Self {
        let len = (map.len() / 4).max(1).next_power_of_two();
        let mut blocks = vec![0u64; len];
        let mut keys = map.keys();
        while let Some(key) = fst::Streamer::next(&mut keys) {
            let (i, bits) = Self::place(key, len);
            blocks[i] |= bits;
        }
        KeyFilter { blocks }
    }

    /// The block of `key` and the bits it sets there.
    fn place(key: &[u8], len: usize) -> (usize, u64) {
        let h = mix(fnv1a(0xcbf2_9ce4_8422_2325, key));
        let bits = (0..4).fold(0u64, |b, k| b | 1 << ((h >> (40 + 6 * k)) & 63));
        ((h as usize) & (len - 1), bits)
    }

    /// False only for a key the map does not hold.
    pub(crate) fn may_hold(&self, key: &[u8]) -> bool {
        if self.blocks.is_empty() {
            return true;
        }
        let (i, bits) = Self::place(key, self.blocks.len());
        self.blocks[i] & bits == bits
    }
}

impl std::fmt::Debug for KeyFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyFilter")
            .field("blocks", &self.blocks.len())
            .finish()
    }
}

/// HyperLogLog with 2^14 registers (standard error ≈ 0.8%): the number of distinct pairs, to
/// size the Bloom filter without holding the pairs.
struct HyperLogLog {
    registers: Vec<u8>,
}

impl HyperLogLog {
    const P: u32 = 14;

    fn new() -> Self {
        HyperLogLog {
            registers: vec![0; 1 << Self::P],
        }
    }

    fn add(&mut self, h: u64) {
        let h = mix(h);
        let idx = (h >> (64 - Self::P)) as usize;
        let rest = h << Self::P;
        let rank = (rest.leading_zeros() + 1).min(64 - Self::P + 1) as u8;
        if rank > self.registers[idx] {
            self.registers[idx] = rank;
        }
    }

    fn estimate(&self) -> u64 {
        let m = self.registers.len() as f64;
        let alpha = 0.7213 / (1.0 + 1.079 / m);
        let sum: f64 = self
            .registers
            .iter()
            .map(|&r| 2f64.powi(-i32::from(r)))
            .sum();
        let raw = alpha * m * m / sum;
        let zeros = self.registers.iter().filter(|&&r| r == 0).count();
        let est = if raw <= 2.5 * m && zeros > 0 {
            m * (m / zeros as f64).ln()
        } else {
            raw
        };
        est.round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopwords_are_sorted_for_binary_search() {
        let mut sorted = STOPWORDS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, STOPWORDS);
        assert!(is_stopword("the") && !is_stopword("vitamin"));
    }

    #[test]
    fn the_packed_search_agrees_with_the_list() {
        for w in STOPWORDS {
            assert!(is_stopword(w), "{w}");
            for longer in [format!("{w}s"), format!("x{w}"), format!("{w}\0")] {
                assert_eq!(
                    is_stopword(&longer),
                    STOPWORDS.contains(&longer.as_str()),
                    "{longer}"
                );
            }
            assert!(!is_stopword(&w.to_uppercase()));
        }
        for w in ["", "th", "thes", "betweens", "throughout", "a\0", "\0"] {
            assert_eq!(is_stopword(w), STOPWORDS.contains(&w), "{w:?}");
        }
        assert!(STOPWORDS.iter().all(|w| w.len() <= 8));
    }

    #[test]
    fn corpus_words_are_lowercase_alphabetic_runs() {
        let w: Vec<String> = corpus_words("Paula Deen's COVID-19 café, 42 x_y").collect();
        assert_eq!(w, ["paula", "deen", "s", "covid", "café", "x", "y"]);
    }

    #[test]
    fn counts_and_pairs_come_from_the_documents() {
        let docs = [
            ("Vitamin D", "Vitamin D deficiency causes weak bones."),
            ("", "The capital of France is Paris."),
        ];
        let v = Vocabulary::build(docs.iter().copied());
        assert_eq!(v.count("vitamin"), 2);
        assert_eq!(v.count("paris"), 1);
        assert_eq!(v.count("london"), 0);
        assert!(v.near("deficiency", "vitamin") && v.near("vitamin", "deficiency"));
        assert!(v.near("capital", "paris"));
        // Different documents, and stopwords, make no pairs.
        assert!(!v.near("vitamin", "paris"));
        assert!(!v.near("the", "capital"));
        assert_eq!(v.info().words, 12);
        assert_eq!(v.info().tokens, 14);
        // Adjacent words within a title or a text, not across them.
        assert_eq!(v.bigram("vitamin", "d"), 2);
        assert_eq!(v.bigram("d", "deficiency"), 1);
        assert_eq!(v.bigram("d", "vitamin"), 0);
        assert_eq!(v.info().bigram_min_count, Some(1));
    }

    #[test]
    fn the_key_filters_keep_every_key_and_turn_most_others_away() {
        // Numbers spelt in letters: the corpus's words are runs of letters.
        let spelt = |mut i: usize| {
            let mut w = String::from("w");
            loop {
                w.push(char::from(b'a' + (i % 26) as u8));
                i /= 26;
                if i == 0 {
                    return w;
                }
            }
        };
        let texts: Vec<String> = (0..3000)
            .map(|i| format!("{} next{} other", spelt(i), spelt(i % 97)))
            .collect();
        let v = Vocabulary::build(texts.iter().map(|t| ("", t.as_str())));
        // Every word and adjacent pair the documents hold is counted: the filters hide none.
        for i in 0..3000 {
            assert!(v.count(&spelt(i)) >= 1, "{}", spelt(i));
            let next = format!("next{}", spelt(i % 97));
            assert!(v.bigram(&spelt(i), &next) >= 1, "{} {next}", spelt(i));
        }
        // Strings the corpus never uses: few get past the filters (about 1 in 100 would).
        let past = |key: &dyn Fn(usize) -> String, filter: &KeyFilter| {
            (0..10_000)
                .filter(|&i| filter.may_hold(key(i).as_bytes()))
                .count()
        };
        let words = past(&|i| format!("absent{}", spelt(i)), &v.count_keys);
        let pairs = past(&|i| format!("{} absent", spelt(i)), &v.bigram_keys);
        assert!(words < 300 && pairs < 300, "{words} {pairs}");
        assert_eq!(v.count("absent"), 0);
        assert_eq!(v.bigram("wa", "absent"), 0);
    }

    #[test]
    fn pairs_stay_within_the_window() {
        let far: String = (0..PAIR_WINDOW + 1)
            .map(|i| format!("filler{} ", "x".repeat(i + 1)))
            .collect();
        let text = format!("alpha {far} omega");
        let v = Vocabulary::build(std::iter::once(("", text.as_str())));
        assert!(v.near("alpha", "fillerx"));
        assert!(!v.near("alpha", "omega"));
    }

    #[test]
    fn hyperloglog_estimates_within_a_few_percent() {
        for n in [100u64, 10_000, 200_000] {
            let mut h = HyperLogLog::new();
            for i in 0..n {
                h.add(i);
                h.add(i); // duplicates do not count
            }
            let e = h.estimate() as f64;
            assert!((e - n as f64).abs() / (n as f64) < 0.05, "n={n} est={e}");
        }
    }

    #[test]
    fn bloom_false_positives_are_near_the_design_rate() {
        let n = 20_000u64;
        let mut b = Bloom::with_capacity(n);
        for i in 0..n {
            b.insert(mix(i));
        }
        assert!((0..n).all(|i| b.contains(mix(i))));
        let fp = (n..n + 20_000).filter(|&i| b.contains(mix(i))).count();
        assert!(fp < 600, "{fp} false positives of 20000 (design 1%)");
    }

    #[test]
    fn written_files_read_back_and_corruption_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let docs = [("", "heart attack symptoms in women"), ("", "chest pain")];
        let mut v = Vocabulary::build(docs.iter().copied());
        let (info, files) = v.write(dir.path()).unwrap();
        let files: std::collections::BTreeMap<String, FileInfo> = files.into_iter().collect();
        let back = Vocabulary::read(dir.path(), &info, &files, true).unwrap();
        assert_eq!(back.count("symptoms"), 1);
        assert!(back.near("heart", "symptoms"));
        assert_eq!(back.bigram("heart", "attack"), 1);
        assert_eq!(back.bigram("chest", "pain"), 1);
        assert_eq!(back.bigram("attack", "heart"), 0);
        assert_eq!(
            back.bigram("women", "chest"),
            0,
            "no bigram across documents"
        );
        // A flipped byte in the bigram file is refused too.
        let b = dir.path().join(info.bigrams_file.as_deref().unwrap());
        let good = std::fs::read(&b).unwrap();
        let mut bytes = good.clone();
        bytes[good.len() / 2] ^= 0x01;
        std::fs::write(&b, bytes).unwrap();
        assert!(Vocabulary::read(dir.path(), &info, &files, true).is_err());
        std::fs::write(&b, good).unwrap();
        // A flipped byte in the pair filter is a checksum error naming the file.
        let p = dir.path().join(&info.pairs_file);
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[3] ^= 0x40;
        std::fs::write(&p, bytes).unwrap();
        let err = Vocabulary::read(dir.path(), &info, &files, true)
            .unwrap_err()
            .to_string();
        assert!(err.contains(&info.pairs_file), "{err}");
    }
}
