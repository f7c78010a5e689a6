//! A small reader for the WordNet 3.0 database files (as installed by
//! Debian's `wordnet-base` under `/usr/share/wordnet`), enough for
//! lemmatisation and synonyms.
//!
//! * `index.<pos>`: `lemma pos synset_cnt p_cnt [ptr...] sense_cnt
//!   tagsense_cnt offset...` — lemmas known per part of speech and their
//!   synsets, most frequent sense first.
//! * `data.<pos>`: one synset per line at the byte offset named in the index:
//!   `offset lex_filenum ss_type w_cnt(hex) word lex_id ... | gloss`.
//! * `<pos>.exc`: irregular forms, `inflected base...`.
//!
//! Malformed lines are skipped. The database is read once per process
//! (`WordNet::global`, about 30 MB in memory: index maps plus the raw data
//! files, which are looked up by byte offset).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::NoiseError;

/// Environment variable naming the WordNet database directory.
pub const WORDNET_DIR_ENV: &str = "CAPOT_WORDNET_DIR";
/// Where Debian's `wordnet-base` installs the database.
pub const DEFAULT_WORDNET_DIR: &str = "/usr/share/wordnet";

/// Senses looked at, per part of speech, when collecting synonyms.
const MAX_SENSES: usize = 3;

/// WordNet parts of speech, with their file-name suffixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pos {
    /// `noun`
    Noun,
    /// `verb`
    Verb,
    /// `adj` (adjectives and satellites)
    Adj,
    /// `adv`
    Adv,
}

impl Pos {
    /// All four, in the order used for synonyms and detachment rules.
    pub const ALL: [Pos; 4] = [Pos::Noun, Pos::Verb, Pos::Adj, Pos::Adv];

    fn file(self) -> &'static str {
        match self {
            Pos::Noun => "noun",
            Pos::Verb => "verb",
            Pos::Adj => "adj",
            Pos::Adv => "adv",
        }
    }

    fn idx(self) -> usize {
        self as usize
    }

    /// Morphy's suffix detachment rules: (suffix, replacement).
    fn rules(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Pos::Noun => &[
                ("s", ""),
                ("ses", "s"),
                ("xes", "x"),
                ("zes", "z"),
                ("ches", "ch"),
                ("shes", "sh"),
                ("men", "man"),
                ("ies", "y"),
            ],
            Pos::Verb => &[
                ("s", ""),
                ("ies", "y"),
                ("es", "e"),
                ("es", ""),
                ("ed", "e"),
                ("ed", ""),
                ("ing", "e"),
                ("ing", ""),
            ],
            Pos::Adj => &[("er", ""), ("est", ""), ("er", "e"), ("est", "e")],
            Pos::Adv => &[],
        }
    }
}

/// An in-memory WordNet database.
#[derive(Debug)]
pub struct WordNet {
    /// lemma → synset offsets, per part of speech.
    index: [BTreeMap<String, Vec<u32>>; 4],
    /// inflected form → base forms, per part of speech.
    exc: [BTreeMap<String, Vec<String>>; 4],
    /// raw `data.<pos>` files.
    data: [Vec<u8>; 4],
}

static GLOBAL: OnceLock<Result<WordNet, NoiseError>> = OnceLock::new();

/// The directory the global database is read from: `$CAPOT_WORDNET_DIR`, or
/// `/usr/share/wordnet`.
pub fn wordnet_dir() -> PathBuf {
    std::env::var_os(WORDNET_DIR_ENV)
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_WORDNET_DIR), PathBuf::from)
}

impl WordNet {
    /// The process-wide database, loaded on first use from [`wordnet_dir`].
    /// A failed load is remembered (with its error) for the process lifetime.
    pub fn global() -> Result<&'static WordNet, NoiseError> {
        GLOBAL
            .get_or_init(|| WordNet::load(&wordnet_dir()))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Load the database from `dir`. `index.*` and `data.*` of all four parts
    /// of speech are required; missing `*.exc` files count as empty.
    pub fn load(dir: &Path) -> Result<WordNet, NoiseError> {
        let missing = |reason: String| NoiseError::WordNetUnavailable {
            dir: dir.to_path_buf(),
            reason,
        };
        let read = |name: String| {
            fs::read(dir.join(&name)).map_err(|e| missing(format!("cannot read {name}: {e}")))
        };
        let mut index: [BTreeMap<String, Vec<u32>>; 4] = Default::default();
        let mut exc: [BTreeMap<String, Vec<String>>; 4] = Default::default();
        let mut data: [Vec<u8>; 4] = Default::default();
        for pos in Pos::ALL {
            let raw = read(format!("index.{}", pos.file()))?;
            index[pos.idx()] = parse_index(&String::from_utf8_lossy(&raw));
            if index[pos.idx()].is_empty() {
                return Err(missing(format!("index.{} has no entries", pos.file())));
            }
            data[pos.idx()] = read(format!("data.{}", pos.file()))?;
            if let Ok(raw) = fs::read(dir.join(format!("{}.exc", pos.file()))) {
                exc[pos.idx()] = parse_exc(&String::from_utf8_lossy(&raw));
            }
        }
        Ok(WordNet { index, exc, data })
    }

    /// Whether `lemma` (lower case, `_` for spaces) is in `index.<pos>`.
    pub fn contains(&self, pos: Pos, lemma: &str) -> bool {
        self.index[pos.idx()].contains_key(lemma)
    }

    /// Base form of `word` when it differs from the word, morphy-style,
    /// without a part-of-speech tagger:
    /// 1. an exception list entry (verb, noun, adj, adv order) whose base
    ///    differs from the word (`were` → `be`, `geese` → `goose`);
    /// 2. otherwise a word that is itself a WordNet lemma is kept (`news`,
    ///    `gas`);
    /// 3. otherwise the first detachment rule (noun, verb, adj, adv order)
    ///    whose result is a lemma of that part of speech (`dogs` → `dog`).
    pub fn lemma(&self, word: &str) -> Option<String> {
        let w = word.to_lowercase();
        if w.is_empty() {
            return None;
        }
        for pos in [Pos::Verb, Pos::Noun, Pos::Adj, Pos::Adv] {
            let bases = self.exc[pos.idx()].get(&w).map(Vec::as_slice);
            if let Some(b) = bases.unwrap_or_default().iter().find(|b| **b != w) {
                return Some(b.replace('_', " "));
            }
        }
        if Pos::ALL.iter().any(|&p| self.contains(p, &w)) {
            return None;
        }
        for pos in Pos::ALL {
            for (suffix, ending) in pos.rules() {
                if let Some(stem) = w.strip_suffix(suffix) {
                    if stem.is_empty() {
                        continue;
                    }
                    let cand = format!("{stem}{ending}");
                    if cand != w && self.contains(pos, &cand) {
                        return Some(cand);
                    }
                }
            }
        }
        None
    }

    /// Synonyms of `word` (lower case, spaces for `_`), in a fixed order:
    /// per part of speech (noun, verb, adj, adv), the lemmas of the first of
    /// its three most frequent senses that has any other usable lemma (not a
    /// stop word, not a phrase containing the word). A word that
    /// is not a lemma itself is looked up by its [`lemma`](Self::lemma).
    pub fn synonyms(&self, word: &str) -> Vec<String> {
        let mut key = word.to_lowercase().replace(' ', "_");
        if !Pos::ALL.iter().any(|&p| self.contains(p, &key)) {
            match self.lemma(&key) {
                Some(l) => key = l.replace(' ', "_"),
                None => return Vec::new(),
            }
        }
        let mut out: Vec<String> = Vec::new();
        for pos in Pos::ALL {
            let Some(offsets) = self.index[pos.idx()].get(&key) else {
                continue;
            };
            for &off in offsets.iter().take(MAX_SENSES) {
                let others: Vec<String> = self
                    .synset_words(pos, off)
                    .into_iter()
                    .map(|w| w.to_lowercase())
                    // Not the word itself, not a phrase built on it
                    // ("running" -> "running play"), not a function word
                    // ("cause" -> "do").
                    .filter(|w| *w != key && !w.split('_').any(|p| p == key))
                    .filter(|w| !super::stopwords::is_stopword(w))
                    .collect();
                if others.is_empty() {
                    continue;
                }
                for o in others {
                    let o = o.replace('_', " ");
                    if !out.contains(&o) {
                        out.push(o);
                    }
                }
                break;
            }
        }
        out
    }

    /// The words of the synset at byte `offset` of `data.<pos>` (adjective
    /// markers such as `(a)` removed); empty when the line is malformed.
    pub fn synset_words(&self, pos: Pos, offset: u32) -> Vec<String> {
        let data = &self.data[pos.idx()];
        let start = offset as usize;
        let Some(rest) = data.get(start..) else {
            return Vec::new();
        };
        let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        let line = String::from_utf8_lossy(&rest[..end]);
        let mut f = line.split(' ');
        // The line must start with its own offset.
        if f.next().and_then(|s| s.parse::<u32>().ok()) != Some(offset) {
            return Vec::new();
        }
        let (_lex, _ty) = (f.next(), f.next());
        let Some(count) = f.next().and_then(|s| usize::from_str_radix(s, 16).ok()) else {
            return Vec::new();
        };
        let mut words = Vec::with_capacity(count);
        for _ in 0..count {
            let (Some(w), Some(_lex_id)) = (f.next(), f.next()) else {
                return Vec::new();
            };
            let w = match w.find('(') {
                Some(p) if w.ends_with(')') && p > 0 => &w[..p],
                _ => w,
            };
            if !w.is_empty() {
                words.push(w.to_owned());
            }
        }
        words
    }
}

/// Parse an `index.<pos>` file; license lines (leading spaces) and malformed
/// lines are skipped.
fn parse_index(text: &str) -> BTreeMap<String, Vec<u32>> {
    let mut map = BTreeMap::new();
    for line in text.lines() {
        if line.starts_with(' ') {
            continue;
        }
        if let Some((lemma, offsets)) = parse_index_line(line) {
            map.insert(lemma, offsets);
        }
    }
    map
}

fn parse_index_line(line: &str) -> Option<(String, Vec<u32>)> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let lemma = *f.first()?;
    let synset_cnt: usize = f.get(2)?.parse().ok()?;
    let p_cnt: usize = f.get(3)?.parse().ok()?;
    let first = 4usize.checked_add(p_cnt)?.checked_add(2)?;
    let offs = f.get(first..first.checked_add(synset_cnt)?)?;
    let offsets: Option<Vec<u32>> = offs.iter().map(|s| s.parse().ok()).collect();
    let offsets = offsets?;
    if offsets.is_empty() {
        return None;
    }
    Some((lemma.to_owned(), offsets))
}

/// Parse a `<pos>.exc` file: `inflected base [base...]` per line.
fn parse_exc(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(form), Some(base)) = (f.next(), f.next()) else {
            continue;
        };
        let entry = map.entry(form.to_owned()).or_default();
        entry.push(base.to_owned());
        entry.extend(f.map(str::to_owned));
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_lines() {
        let (l, o) = parse_index_line("dog n 3 2 @ ~ 3 1 02084071 10114209 10023039  ").unwrap();
        assert_eq!(l, "dog");
        assert_eq!(o, vec![2084071, 10114209, 10023039]);
        for bad in [
            "",
            "dog",
            "dog n x 2",
            "dog n 3 2 @ ~ 3 1 02084071",
            "dog n 1 0 1 1 abc",
        ] {
            assert!(parse_index_line(bad).is_none(), "{bad:?}");
        }
        // Huge counts must not overflow or panic.
        assert!(parse_index_line("x n 18446744073709551615 18446744073709551615").is_none());
    }

    #[test]
    fn exc_lines() {
        let m = parse_exc("were be\nbroken\n\naxes ax axis\n");
        assert_eq!(m["were"], vec!["be"]);
        assert_eq!(m["axes"], vec!["ax", "axis"]);
        assert!(!m.contains_key("broken"));
    }
}
