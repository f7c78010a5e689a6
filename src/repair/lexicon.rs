//! The language prior: a list of valid words of the language, so that a real word the corpus
//! happens not to contain is not "corrected".

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// File name of the default lexicon under the assets directory (`scripts/setup` fetches it).
pub const DEFAULT_LEXICON: &str = "lexicon/frequency_dictionary_en_82_765.txt";

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

/// A set of lower-case words, read from word lists.
#[derive(Debug, Clone, Default)]
pub struct Lexicon {
    words: HashSet<Box<str>>,
    sources: Vec<PathBuf>,
}

impl Lexicon {
    /// Reads word lists: one word per line, the first whitespace-separated field (so both a
    /// plain list such as Debian's `/usr/share/dict/words` and a `word count` frequency list
    /// work). Words are lower-cased; lines that are not valid UTF-8 are skipped.
    pub fn load(paths: &[PathBuf]) -> Result<Self, LexiconError> {
        let mut lex = Lexicon::default();
        for path in paths {
            let bytes = std::fs::read(path).map_err(|source| LexiconError::Io {
                path: path.clone(),
                source,
            })?;
            let before = lex.words.len();
            lex.extend_from(&bytes);
            if lex.words.len() == before {
                return Err(LexiconError::Empty(path.clone()));
            }
            lex.sources.push(path.clone());
        }
        Ok(lex)
    }

    /// Adds the words of a word list held in memory.
    fn extend_from(&mut self, bytes: &[u8]) {
        for line in bytes.split(|&b| b == b'\n') {
            let Ok(line) = std::str::from_utf8(line) else {
                continue;
            };
            if let Some(word) = line.split_whitespace().next() {
                self.words.insert(word.to_lowercase().into_boxed_str());
            }
        }
    }

    /// A lexicon of the given words (tests, and callers that hold a list in memory).
    pub fn from_words<'a>(words: impl IntoIterator<Item = &'a str>) -> Self {
        Lexicon {
            words: words.into_iter().map(|w| w.to_lowercase().into()).collect(),
            sources: Vec::new(),
        }
    }

    /// Whether `word` (lower case) is a word of the language.
    pub fn contains(&self, word: &str) -> bool {
        self.words.contains(word)
    }

    /// Number of words.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// True when it holds no word.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The files it was read from.
    pub fn sources(&self) -> &[PathBuf] {
        &self.sources
    }
}

/// The default lexicon path under `assets` (the `CAPOT_ASSETS` directory, `assets` by default).
pub fn default_path(assets: &Path) -> PathBuf {
    assets.join(DEFAULT_LEXICON)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_plain_and_frequency_lists() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.txt");
        let b = dir.path().join("b.txt");
        std::fs::write(&a, "the 23135851162\nOf 13151942776\n\n").unwrap();
        std::fs::write(&b, b"Zurich\nna\xefve\nword\n").unwrap();
        let lex = Lexicon::load(&[a.clone(), b]).unwrap();
        assert!(lex.contains("the") && lex.contains("of") && lex.contains("zurich"));
        assert!(lex.contains("word"));
        assert_eq!(lex.len(), 4, "the invalid UTF-8 line is skipped");
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
