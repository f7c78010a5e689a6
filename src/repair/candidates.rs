//! Candidate words: every dictionary word within one or two edits of a typed word, found in
//! microseconds.
//!
//! The symmetric-delete method of SymSpell (Garbe 2012): every word is filed under each string
//! obtained by deleting up to two letters from its first [`PREFIX`] letters; a typed word's own
//! deletes then meet every word within two edits, and a capped Damerau–Levenshtein check keeps
//! the true ones. Only the prefix is indexed, which bounds the entries per word (at most 29) at
//! no loss: two words within two edits have prefixes within two edits. The entries are 32-bit
//! hashes of the delete strings with the word's id, sorted into hash buckets (8 bytes an entry,
//! no strings), so a lookup is a few dozen cache misses; a 4-byte `Key` per word (length and
//! letters) rules most of the words found out before their letters are read.

use super::error_model::{distance, DistancePattern};

/// Letters of a word that are indexed.
pub const PREFIX: usize = 7;
/// The most edits a candidate may be from the typed word.
pub const MAX_EDITS: u8 = 2;
/// The most strings [`for_each_delete`] visits: the prefix, less each letter, less each pair.
const MAX_DELETES: usize = 1 + PREFIX + PREFIX * (PREFIX - 1) / 2;

/// The delete index over a word list.
pub struct CandidateIndex {
    /// The words one after another: word `id` is `text[starts[id]..starts[id + 1]]`.
    text: String,
    starts: Vec<u32>,
    /// Each word's [`Key`], to rule most candidates out without reading the word.
    keys: Vec<Key>,
    /// Start of each bucket in `entries` (one more than there are buckets).
    buckets: Vec<u32>,
    /// (hash of a delete string, word id), grouped by bucket.
    entries: Vec<(u32, u32)>,
    shift: u32,
    /// Each word's words one edit away (ids, ascending): word `id`'s are
    /// `one_edit[one_edit_starts[id]..one_edit_starts[id + 1]]`. The speller looks up the
    /// neighbours of every known content word of a query (a real-word error?), and a look-up
    /// through the deletes costs some 8,000 instructions; this, a search for the word itself.
    one_edit: Vec<u32>,
    one_edit_starts: Vec<u32>,
}

impl std::fmt::Debug for CandidateIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CandidateIndex")
            .field("words", &self.len())
            .field("entries", &self.entries.len())
            .finish()
    }
}

fn hash(bytes: &[u8]) -> u32 {
    // FNV-1a, then a finaliser so the top bits (the bucket) are well mixed.
    let mut h: u32 = 0x811c_9dc5;
    for &b in bytes {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h ^= h >> 16;
    h = h.wrapping_mul(0x7feb_352d);
    h ^= h >> 15;
    h = h.wrapping_mul(0x846c_a68b);
    h ^ (h >> 16)
}

/// A word's length and the letters it holds, in 32 bits: enough to rule out most words that
/// share a delete string with a typed word but are not within its edits, without reading them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Key(u32);

impl Key {
    /// Bits 0–25 for the letters `a`–`z` the word holds, 26–31 for its length (capped at 63).
    fn of(word: &[u8]) -> Key {
        let letters = word.iter().fold(0u32, |m, &c| {
            if c.is_ascii_lowercase() {
                m | 1 << (c - b'a')
            } else {
                m
            }
        });
        let len = word.len().min(63) as u32;
        Key(letters | len << 26)
    }

    /// False only when the two words cannot be within `edits` of each other: their lengths
    /// differ by more, or one holds more than `edits` letters the other lacks (a substitution
    /// or an insertion brings at most one new letter, a swap none).
    fn may_be_within(self, other: Key, edits: u8) -> bool {
        const LETTERS: u32 = (1 << 26) - 1;
        let (a, b) = (self.0 & LETTERS, other.0 & LETTERS);
        let edits = u32::from(edits);
        (self.0 >> 26).abs_diff(other.0 >> 26) <= edits
            && at_most_bits(a & !b, edits)
            && at_most_bits(b & !a, edits)
    }
}

/// Whether `x` has at most `n` bits set. Clearing the lowest bit `n` times is cheaper than
/// counting them for the few edits asked, as the portable x86-64 build has no instruction that
/// counts bits: `count_ones` was some 20 instructions, on every entry a look-up reads.
fn at_most_bits(mut x: u32, n: u32) -> bool {
    for _ in 0..n {
        x &= x.wrapping_sub(1);
    }
    x == 0
}

/// Marks an entry whose delete string is two letters shorter than the word's prefix: a look-up
/// within one edit never needs it (two words one edit apart meet at one delete each).
const TWO_DELETES: u32 = 1 << 31;

/// Calls `f` with the hash of `word` (at most [`PREFIX`] bytes) and of every string made by
/// deleting up to `edits` of its letters (duplicates possible), each with how many letters were
/// deleted. No allocation: it runs for every content word of every query.
fn for_each_delete(word: &[u8], edits: u8, f: &mut impl FnMut(u32, u8)) {
    deletes(&word[..word.len().min(PREFIX)], edits, 0, 0, f);
}

/// Deletes letters at positions `from` on, in increasing order, so that each set of positions
/// is visited once (deleting `i` then `j` is deleting `j` then `i`).
fn deletes(word: &[u8], edits: u8, deleted: u8, from: usize, f: &mut impl FnMut(u32, u8)) {
    f(hash(word), deleted);
    if edits == 0 || word.is_empty() {
        return;
    }
    let mut shorter = [0u8; PREFIX];
    let n = word.len() - 1;
    for i in from..word.len() {
        // Deleting from a run of one letter at any position gives the same string: skip repeats.
        if i > from && word[i] == word[i - 1] {
            continue;
        }
        shorter[..i].copy_from_slice(&word[..i]);
        shorter[i..n].copy_from_slice(&word[i + 1..]);
        deletes(&shorter[..n], edits - 1, deleted + 1, i, f);
    }
}

impl CandidateIndex {
    /// Indexes `words` (lower-case ASCII letters; others are kept out of the index but keep
    /// their ids, so ids are positions in the input).
    pub fn build<'a>(words: impl IntoIterator<Item = &'a str>) -> Self {
        let mut text = String::new();
        let mut starts = vec![0u32];
        for w in words {
            text.push_str(w);
            starts.push(u32::try_from(text.len()).expect("candidate words under 4 GiB"));
        }
        let count = starts.len() - 1;
        // Ids share their word with the mark bit (at most 300,000 corpus words join the lexicon).
        assert!(count < TWO_DELETES as usize, "too many candidate words");
        let word = |id: usize| &text.as_bytes()[starts[id] as usize..starts[id + 1] as usize];
        let mut entries: Vec<(u32, u32)> = Vec::with_capacity(count * 24);
        let mut hashes = Vec::with_capacity(64);
        for id in 0..count {
            let b = word(id);
            if b.is_empty() || !b.iter().all(u8::is_ascii_lowercase) {
                continue;
            }
            hashes.clear();
            for_each_delete(b, MAX_EDITS, &mut |h, deleted| hashes.push((h, deleted)));
            // One entry per string, marked when it is only ever two letters short.
            hashes.sort_unstable();
            hashes.dedup_by_key(|&mut (h, _)| h);
            entries.extend(hashes.iter().map(|&(h, deleted)| {
                let mark = if deleted >= 2 { TWO_DELETES } else { 0 };
                (h, id as u32 | mark)
            }));
        }
        let bits = (entries.len() / 2)
            .max(2)
            .next_power_of_two()
            .trailing_zeros();
        let shift = 32 - bits;
        entries.sort_unstable_by_key(|&(h, id)| (h, id));
        let mut buckets = vec![0u32; (1usize << bits) + 1];
        for &(h, _) in &entries {
            buckets[(h >> shift) as usize + 1] += 1;
        }
        for i in 1..buckets.len() {
            buckets[i] += buckets[i - 1];
        }
        let keys = (0..count).map(|id| Key::of(word(id))).collect();
        let mut index = CandidateIndex {
            text,
            starts,
            keys,
            buckets,
            entries,
            shift,
            one_edit: Vec::new(),
            one_edit_starts: Vec::new(),
        };
        index.file_one_edit_neighbours();
        index
    }

    /// Fills [`CandidateIndex::one_edit`] by looking every word up (under a second for the
    /// default lexicon's 108,000 words).
    fn file_one_edit_neighbours(&mut self) {
        let count = self.len();
        let mut one_edit = Vec::new();
        let mut starts = Vec::with_capacity(count + 1);
        starts.push(0u32);
        let mut found = Vec::new();
        for id in 0..count {
            found.clear();
            self.look_up_by_deletes(self.word(id as u32), 1, &mut found);
            one_edit.extend(found.iter().map(|&(n, _)| n));
            starts.push(u32::try_from(one_edit.len()).expect("neighbours under 4G"));
        }
        one_edit.shrink_to_fit();
        self.one_edit = one_edit;
        self.one_edit_starts = starts;
    }

    /// The id of `word` itself, if it is one of the words.
    pub fn find(&self, word: &str) -> Option<u32> {
        let w = word.as_bytes();
        if w.is_empty() || self.entries.is_empty() {
            return None;
        }
        let h = hash(&w[..w.len().min(PREFIX)]);
        let b = (h >> self.shift) as usize;
        let (lo, hi) = (self.buckets[b] as usize, self.buckets[b + 1] as usize);
        self.entries[lo..hi]
            .iter()
            .filter(|&&(eh, id)| eh == h && id & TWO_DELETES == 0)
            .map(|&(_, id)| id)
            .find(|&id| self.word(id) == word)
    }

    /// The word of an id.
    pub fn word(&self, id: u32) -> &str {
        let id = id as usize;
        &self.text[self.starts[id] as usize..self.starts[id + 1] as usize]
    }

    /// Number of words.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when it holds no word.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Bytes held in memory.
    pub fn heap_bytes(&self) -> usize {
        self.entries.len() * 8
            + self.buckets.len() * 4
            + self.keys.len() * 4
            + self.starts.len() * 4
            + self.text.len()
            + (self.one_edit.len() + self.one_edit_starts.len()) * 4
    }

    /// Appends to `out` every word within `max_edits` (at most [`MAX_EDITS`]) of `typed`
    /// (lower-case ASCII), other than `typed` itself, with its distance, in the order of their
    /// ids.
    pub fn lookup(&self, typed: &str, max_edits: u8, out: &mut Vec<(u32, u8)>) {
        if max_edits == 1 && !self.one_edit_starts.is_empty() {
            if let Some(id) = self.find(typed) {
                let (lo, hi) = (
                    self.one_edit_starts[id as usize] as usize,
                    self.one_edit_starts[id as usize + 1] as usize,
                );
                out.extend(self.one_edit[lo..hi].iter().map(|&n| (n, 1)));
                return;
            }
        }
        self.look_up_by_deletes(typed, max_edits, out);
    }

    /// [`CandidateIndex::lookup`] through the delete strings.
    fn look_up_by_deletes(&self, typed: &str, max_edits: u8, out: &mut Vec<(u32, u8)>) {
        let t = typed.as_bytes();
        let max_edits = max_edits.min(MAX_EDITS);
        if t.is_empty() || !t.iter().all(u8::is_ascii_lowercase) || self.entries.is_empty() {
            return;
        }
        // A look-up is mostly cache misses: the delete strings' hashes come first, then all
        // their buckets' bounds, then the entries, so that each step's loads wait on none of
        // one another and are fetched together.
        let mut hashes = [0u32; MAX_DELETES];
        let mut n = 0;
        for_each_delete(t, max_edits, &mut |h, _| {
            if let Some(slot) = hashes.get_mut(n) {
                *slot = h;
                n += 1;
            }
        });
        let hashes = &hashes[..n];
        let mut bounds = [(0u32, 0u32); MAX_DELETES];
        for (bound, &h) in bounds.iter_mut().zip(hashes) {
            let b = (h >> self.shift) as usize;
            *bound = (self.buckets[b], self.buckets[b + 1]);
        }
        // Most ids share a delete of the prefix only: their keys rule them out before they are
        // sorted, and the words left are all read (their first letters) before any is
        // compared, for the same reason.
        let typed_key = Key::of(t);
        let mut ids: Vec<u32> = Vec::with_capacity(256);
        // Within one edit, entries two letters short cannot be needed.
        let skip = if max_edits <= 1 { TWO_DELETES } else { 0 };
        for (&h, &(lo, hi)) in hashes.iter().zip(&bounds) {
            for &(eh, entry) in &self.entries[lo as usize..hi as usize] {
                let id = entry & !TWO_DELETES;
                if eh == h
                    && entry & skip == 0
                    && typed_key.may_be_within(self.keys[id as usize], max_edits)
                {
                    ids.push(id);
                }
            }
        }
        ids.sort_unstable();
        ids.dedup();
        let words: Vec<&[u8]> = ids.iter().map(|&id| self.word(id).as_bytes()).collect();
        let first_letters = words
            .iter()
            .fold(0u8, |x, w| x ^ w.first().copied().unwrap_or(0));
        std::hint::black_box(first_letters);
        // Prepared once for all the ids (past 64 letters, compared a word at a time).
        let pattern = DistancePattern::new(t);
        for (id, word) in ids.into_iter().zip(words) {
            let d = match &pattern {
                Some(pattern) => pattern.distance(word, max_edits),
                None => distance(t, word, max_edits),
            };
            if d > 0 && d <= max_edits {
                out.push((id, d));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_bits_agrees_with_counting_them() {
        for x in [0u32, 1, 2, 3, 0b1011, 1 << 31, u32::MAX, 0x0300_0001] {
            for n in 0..=3 {
                assert_eq!(at_most_bits(x, n), x.count_ones() <= n, "{x:#b} {n}");
            }
        }
    }

    #[test]
    fn find_gives_a_words_own_id_and_nothing_else() {
        let words = ["address", "addresses", "adres", "a", "Caps", "spelling"];
        let index = CandidateIndex::build(words.iter().copied());
        for (id, w) in words.iter().enumerate() {
            let want = (id != 4).then_some(id as u32);
            assert_eq!(index.find(w), want, "{w}");
        }
        // Same first seven letters, or a delete of another word: not a word of the index.
        assert_eq!(index.find("addressed"), None);
        assert_eq!(index.find("adress"), None);
        assert_eq!(index.find("spellin"), None);
        assert_eq!(index.find(""), None);
    }

    #[test]
    fn deletes_visit_every_string_up_to_two_letters_short_once_per_set_of_positions() {
        for word in [
            "address",
            "banana",
            "aabbcc",
            "mississippi",
            "abab",
            "a",
            "abcdefg",
        ] {
            let prefix = &word.as_bytes()[..word.len().min(PREFIX)];
            let mut want = std::collections::BTreeSet::new();
            let n = prefix.len();
            for i in 0..=n {
                for j in i..=n {
                    // Positions i and j deleted (n means none), as a set.
                    let s: Vec<u8> = (0..n)
                        .filter(|&k| k != i && k != j)
                        .map(|k| prefix[k])
                        .collect();
                    want.insert((hash(&s), (n - s.len()) as u8));
                }
            }
            let mut got = Vec::new();
            for_each_delete(word.as_bytes(), 2, &mut |h, d| got.push((h, d)));
            let visited = got.len();
            got.sort_unstable();
            got.dedup();
            assert_eq!(
                got.into_iter().collect::<std::collections::BTreeSet<_>>(),
                want,
                "{word}"
            );
            // Each pair of positions once: at most 1 + n + n(n-1)/2 visits.
            assert!(
                visited <= 1 + n + n * n.saturating_sub(1) / 2,
                "{word}: {visited}"
            );
        }
    }

    fn naive(words: &[&str], typed: &str, max: u8) -> Vec<String> {
        let mut v: Vec<String> = words
            .iter()
            .filter(|w| **w != typed && distance(typed.as_bytes(), w.as_bytes(), max) <= max)
            .map(|w| w.to_string())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_words_filed_neighbours_are_what_its_deletes_find() {
        let words = [
            "the", "they", "then", "them", "a", "ab", "b", "heart", "hearth", "earth", "heard",
            "Caps", "café", "the",
        ];
        let idx = CandidateIndex::build(words.iter().copied());
        for w in words {
            let (mut filed, mut walked) = (Vec::new(), Vec::new());
            idx.lookup(w, 1, &mut filed);
            idx.look_up_by_deletes(w, 1, &mut walked);
            assert_eq!(filed, walked, "{w}");
        }
        let mut out = Vec::new();
        idx.lookup("the", 1, &mut out);
        let got: Vec<&str> = out.iter().map(|&(id, _)| idx.word(id)).collect();
        assert_eq!(got, ["they", "then", "them"]);
    }

    #[test]
    fn finds_exactly_the_words_within_the_distance() {
        let words = [
            "receive",
            "deceive",
            "relieve",
            "recipe",
            "the",
            "they",
            "then",
            "accommodate",
            "accommodation",
            "definitely",
            "definite",
            "separate",
            "desperate",
            "heart",
            "hearth",
            "earth",
            "reflux",
            "reflex",
            "café",
            "a",
            "ab",
        ];
        let idx = CandidateIndex::build(words.iter().copied());
        for typed in [
            "recieve",
            "teh",
            "accomodate",
            "definately",
            "seperate",
            "haert",
            "reflex",
            "b",
            "accommodatoin",
            "hearthh",
            "xyzzy",
        ] {
            for max in [1, 2] {
                let mut out = Vec::new();
                idx.lookup(typed, max, &mut out);
                let mut got: Vec<String> = out
                    .iter()
                    .map(|&(id, _)| idx.word(id).to_string())
                    .collect();
                got.sort();
                assert_eq!(got, naive(&words, typed, max), "{typed} within {max}");
                for &(id, d) in &out {
                    assert_eq!(d, distance(typed.as_bytes(), idx.word(id).as_bytes(), max));
                }
            }
        }
        let mut out = Vec::new();
        idx.lookup("CAFE", 2, &mut out);
        assert!(out.is_empty(), "only lower-case ASCII is looked up");
    }

    #[test]
    fn keys_never_rule_out_a_word_within_the_edits() {
        use proptest::prelude::*;
        // Few letters, so that words share deletes, letters and lengths.
        let word = proptest::collection::vec(prop::sample::select(b"abcde".to_vec()), 1..10)
            .prop_map(|w| String::from_utf8(w).expect("ASCII"));
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        runner
            .run(
                &(proptest::collection::vec(word.clone(), 1..40), word),
                |(words, typed)| {
                    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
                    for a in &refs {
                        let d = distance(a.as_bytes(), typed.as_bytes(), MAX_EDITS);
                        for edits in 0..=MAX_EDITS {
                            if d <= edits {
                                let (ka, kt) = (Key::of(a.as_bytes()), Key::of(typed.as_bytes()));
                                prop_assert!(kt.may_be_within(ka, edits), "{a} {typed}");
                            }
                        }
                    }
                    let idx = CandidateIndex::build(refs.iter().copied());
                    for max in [1, 2] {
                        let mut out = Vec::new();
                        idx.lookup(&typed, max, &mut out);
                        let mut got: Vec<String> = out
                            .iter()
                            .map(|&(id, _)| idx.word(id).to_string())
                            .collect();
                        got.sort();
                        got.dedup();
                        let mut want = naive(&refs, &typed, max);
                        want.dedup();
                        prop_assert_eq!(got, want, "{} within {}", typed, max);
                    }
                    Ok(())
                },
            )
            .expect("the look-up finds exactly the words within the edits");
    }

    #[test]
    fn a_key_rules_out_more_new_letters_or_length_than_the_edits_allow() {
        let key = |w: &str| Key::of(w.as_bytes());
        assert!(key("receive").may_be_within(key("recieve"), 1));
        assert!(key("heart").may_be_within(key("hearth"), 1));
        assert!(!key("heart").may_be_within(key("hearths"), 1));
        // Two letters `heart` lacks: not within one edit, maybe within two.
        assert!(!key("heart").may_be_within(key("herbs"), 1));
        assert!(key("heart").may_be_within(key("hexrz"), 2));
        assert!(!key("abc").may_be_within(key("xyz"), 2));
    }
}
