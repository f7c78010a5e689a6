//! Errors people make, injected into clean queries: a real misspelling from a list (`misspell`),
//! a real word for another (`realword`), and a lost or stray space (`boundary`).
//!
//! Each returns the noisy text and the index of the affected whitespace token, deterministic
//! for the generator's state, like the other generators.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::rng::NoiseRng;
use super::text::{splice, tokens};

/// Words of at least this many letters are given misspellings and real-word errors.
pub const MIN_LETTERS: usize = 4;
/// Words of at least this many letters may be split by `boundary`.
pub const MIN_SPLIT_LETTERS: usize = 6;

/// Why a misspelling list could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MisspellingsError {
    #[error("cannot read misspellings {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: expected `right: wrong1 wrong2 ...`")]
    Format { path: PathBuf, line: usize },
    #[error("misspellings {0} hold no entry")]
    Empty(PathBuf),
}

/// Real misspellings: each correct word with the ways people wrote it.
#[derive(Debug, Clone, Default)]
pub struct Misspellings {
    entries: BTreeMap<String, Vec<String>>,
}

impl Misspellings {
    /// Reads lists in the `right: wrong1 wrong2 ...` format (Norvig's and Birkbeck's), lower
    /// case; a misspelling equal to its word is dropped.
    pub fn load(path: &Path) -> Result<Self, MisspellingsError> {
        let text = std::fs::read_to_string(path).map_err(|source| MisspellingsError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut m = Misspellings::default();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let Some((right, wrongs)) = line.split_once(':') else {
                return Err(MisspellingsError::Format {
                    path: path.to_path_buf(),
                    line: i + 1,
                });
            };
            let right = right.trim().to_lowercase();
            let wrongs: Vec<String> = wrongs
                .split_whitespace()
                .map(str::to_lowercase)
                .filter(|w| *w != right)
                .collect();
            if right.is_empty() || wrongs.is_empty() {
                continue;
            }
            m.entries.entry(right).or_default().extend(wrongs);
        }
        if m.entries.is_empty() {
            return Err(MisspellingsError::Empty(path.to_path_buf()));
        }
        Ok(m)
    }

    /// Number of correct words with misspellings.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when it holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The misspellings of `word` (lower case).
    pub fn of(&self, word: &str) -> Option<&[String]> {
        self.entries.get(word).map(Vec::as_slice)
    }

    /// Adds the entries of another list (a word in both keeps the misspellings of both).
    pub fn extend(&mut self, other: Misspellings) {
        for (right, wrongs) in other.entries {
            let e = self.entries.entry(right).or_default();
            for w in wrongs {
                if !e.contains(&w) {
                    e.push(w);
                }
            }
        }
    }

    /// A list held in memory: (correct word, its misspellings).
    pub fn from_entries<'a>(entries: impl IntoIterator<Item = (&'a str, &'a [&'a str])>) -> Self {
        let mut m = Misspellings::default();
        for (right, wrongs) in entries {
            m.entries.insert(
                right.to_lowercase(),
                wrongs.iter().map(|w| w.to_lowercase()).collect(),
            );
        }
        m
    }
}

/// Real words one slip away from a word (`reflux` → `reflex`): what `realword` draws from.
pub type RealWordNeighbours = dyn Fn(&str) -> Vec<String> + Send + Sync;

static MISSPELLINGS: OnceLock<Misspellings> = OnceLock::new();
static REAL_WORDS: OnceLock<Box<RealWordNeighbours>> = OnceLock::new();

/// Makes `list` the process's source of the `misspell` noise kind (a command does this once, from
/// `--misspellings`). False when one was installed before (the first stays).
pub fn install_misspellings(list: Misspellings) -> bool {
    MISSPELLINGS.set(list).is_ok()
}

/// Makes `neighbours` the process's source of the `realword` noise kind (a command does this
/// once, from its lexicon). False when one was installed before (the first stays).
pub fn install_real_words(neighbours: Box<RealWordNeighbours>) -> bool {
    REAL_WORDS.set(neighbours).is_ok()
}

/// The installed misspelling list.
pub(crate) fn installed_misspellings() -> Result<&'static Misspellings, super::NoiseError> {
    MISSPELLINGS.get().ok_or(super::NoiseError::NoMisspellings)
}

/// The installed real-word neighbours.
pub(crate) fn installed_real_words() -> Result<&'static RealWordNeighbours, super::NoiseError> {
    REAL_WORDS
        .get()
        .map(|b| &**b)
        .ok_or(super::NoiseError::NoLexicon)
}

/// A query with one error put in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Injected {
    /// The noisy text.
    pub text: String,
    /// Index of the changed word among the query's whitespace tokens (for a join, the first).
    pub token: usize,
}

/// Whitespace tokens that are one plain word (letters only, any case) of at least `min` letters.
fn plain_words(text: &str, min: usize) -> Vec<(usize, std::ops::Range<usize>)> {
    tokens(text)
        .into_iter()
        .enumerate()
        .filter(|(_, t)| {
            let w = &text[t.span.clone()];
            w.len() >= min && w.bytes().all(|b| b.is_ascii_alphabetic())
        })
        .map(|(i, t)| (i, t.span))
        .collect()
}

/// One word that has an entry in `list` replaced by one of its misspellings.
pub fn misspell(list: &Misspellings, rng: &mut NoiseRng, text: &str) -> Option<Injected> {
    let eligible: Vec<_> = plain_words(text, MIN_LETTERS)
        .into_iter()
        .filter(|(_, span)| list.of(&text[span.clone()].to_lowercase()).is_some())
        .collect();
    if eligible.is_empty() {
        return None;
    }
    let (token, span) = eligible[rng.below(eligible.len())].clone();
    let wrongs = list.of(&text[span.clone()].to_lowercase())?;
    let wrong = wrongs[rng.below(wrongs.len())].clone();
    Some(Injected {
        text: splice(text, &mut [(span, wrong)]),
        token,
    })
}

/// One word replaced by a real word that `neighbours` says is one slip away (`reflux` →
/// `reflex`).
pub fn realword(
    rng: &mut NoiseRng,
    text: &str,
    neighbours: &dyn Fn(&str) -> Vec<String>,
) -> Option<Injected> {
    let eligible: Vec<_> = plain_words(text, MIN_LETTERS)
        .into_iter()
        .filter(|(_, span)| !super::is_stopword(&text[span.clone()].to_lowercase()))
        .map(|(i, span)| {
            let n = neighbours(&text[span.clone()].to_lowercase());
            (i, span, n)
        })
        .filter(|(_, _, n)| !n.is_empty())
        .collect();
    if eligible.is_empty() {
        return None;
    }
    let (token, span, n) = &eligible[rng.below(eligible.len())];
    let wrong = n[rng.below(n.len())].clone();
    Some(Injected {
        text: splice(text, &mut [(span.clone(), wrong)]),
        token: *token,
    })
}

/// Two adjacent words joined (the space between them lost) or, by a coin toss, one word of
/// [`MIN_SPLIT_LETTERS`]+ letters split in two (a stray space); the other when one is not
/// possible.
pub fn boundary(rng: &mut NoiseRng, text: &str) -> Option<Injected> {
    let words = plain_words(text, 1);
    // Adjacent plain words with only whitespace between.
    let joins: Vec<(usize, std::ops::Range<usize>)> = words
        .windows(2)
        .filter(|w| w[1].0 == w[0].0 + 1)
        .map(|w| (w[0].0, w[0].1.end..w[1].1.start))
        .collect();
    let splits: Vec<_> = words
        .iter()
        .filter(|(_, s)| s.len() >= MIN_SPLIT_LETTERS)
        .cloned()
        .collect();
    let join_first = rng.below(2) == 0;
    let do_join = (join_first && !joins.is_empty()) || splits.is_empty();
    if do_join {
        if joins.is_empty() {
            return None;
        }
        let (token, gap) = joins[rng.below(joins.len())].clone();
        return Some(Injected {
            text: splice(text, &mut [(gap, String::new())]),
            token,
        });
    }
    let (token, span) = splits[rng.below(splits.len())].clone();
    let at = span.start + 1 + rng.below(span.len() - 1);
    Some(Injected {
        text: splice(text, &mut [(at..at, " ".to_string())]),
        token,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misspellings_load_and_inject_one_listed_word() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.txt");
        std::fs::write(&p, "receive: recieve recive\nseparate: seperate\n\n").unwrap();
        let list = Misspellings::load(&p).unwrap();
        assert_eq!(list.len(), 2);
        for v in 0..20 {
            let mut rng = NoiseRng::for_query(0, "misspell", "q", v);
            let out = misspell(&list, &mut rng, "how to receive a separate bill").unwrap();
            assert!(
                [
                    "how to recieve a separate bill",
                    "how to recive a separate bill",
                    "how to receive a seperate bill"
                ]
                .contains(&out.text.as_str()),
                "{}",
                out.text
            );
            assert!(out.token == 2 || out.token == 4);
        }
        let mut rng = NoiseRng::for_query(0, "misspell", "q", 0);
        assert!(misspell(&list, &mut rng, "nothing listed here").is_none());
        std::fs::write(&p, "no colon here\n").unwrap();
        assert!(matches!(
            Misspellings::load(&p),
            Err(MisspellingsError::Format { line: 1, .. })
        ));
    }

    #[test]
    fn boundary_joins_or_splits_and_keeps_the_letters() {
        for v in 0..40 {
            let mut rng = NoiseRng::for_query(1, "boundary", "q", v);
            let q = "causes of vitamin deficiency";
            let out = boundary(&mut rng, q).unwrap();
            assert_ne!(out.text, q);
            assert_eq!(out.text.replace(' ', ""), q.replace(' ', ""));
            let diff = out.text.split(' ').count() as isize - q.split(' ').count() as isize;
            assert!(diff == 1 || diff == -1, "{}", out.text);
        }
        let mut rng = NoiseRng::for_query(1, "boundary", "q", 0);
        assert!(boundary(&mut rng, "a").is_none());
    }

    #[test]
    fn realword_swaps_in_a_neighbour() {
        let mut rng = NoiseRng::for_query(0, "realword", "q", 0);
        let n = |w: &str| {
            if w == "reflux" {
                vec!["reflex".to_string()]
            } else {
                vec![]
            }
        };
        let out = realword(&mut rng, "acid reflux symptoms", &n).unwrap();
        assert_eq!(out.text, "acid reflex symptoms");
        assert_eq!(out.token, 1);
    }
}
