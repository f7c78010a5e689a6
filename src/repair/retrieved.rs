//! What the index says of a query's words: the words of the documents the query as typed
//! retrieves. A web speller decides between readings with evidence a word list does not have —
//! among it what each reading retrieves (Chen, Li & Zhou 2007, "Improving query spelling
//! correction using web search results"); a dense retriever finds the right documents for most
//! misspelt queries, and those documents write the meant word.

use std::collections::HashMap;

use crate::index::vocab::corpus_word_spans;
use crate::index::{Index, IndexError};

/// The words of the documents the raw query retrieved, each with the number of those documents
/// that use it (lower-cased alphabetic words, split as the index's vocabulary splits them).
#[derive(Debug, Clone, Default)]
pub struct RetrievedWords {
    documents: u32,
    words: u64,
    /// Per word: how many documents use it, and the last of them (numbered from 1).
    used_by: HashMap<String, (u32, u32)>,
}

impl RetrievedWords {
    /// The words of `documents` (each its title and text).
    pub fn from_documents<'a>(documents: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut out = RetrievedWords::default();
        let mut lowered;
        for (title, text) in documents {
            out.documents += 1;
            let document = out.documents;
            for w in corpus_word_spans(title).chain(corpus_word_spans(text)) {
                out.words += 1;
                // Most words are written in lower-case ASCII already: looked up as they are.
                let word = if w.bytes().all(|b| b.is_ascii_lowercase()) {
                    w
                } else {
                    lowered = w.to_lowercase();
                    lowered.as_str()
                };
                match out.used_by.get_mut(word) {
                    Some((using, last)) => {
                        if *last != document {
                            *using += 1;
                            *last = document;
                        }
                    }
                    None => {
                        out.used_by.insert(word.to_string(), (1, document));
                    }
                }
            }
        }
        out
    }

    /// How many of the retrieved documents use `word` (lower case).
    pub fn documents_using(&self, word: &str) -> u32 {
        self.used_by.get(word).map_or(0, |u| u.0)
    }

    /// How many documents were read.
    pub fn documents(&self) -> u32 {
        self.documents
    }

    /// How many of the documents would use a word that makes up `share` of the corpus's words
    /// if they were as long as these and the word fell at random: what a common word's presence
    /// among them is worth.
    pub fn expected_using(&self, share: f64) -> f64 {
        let n = f64::from(self.documents.max(1));
        let length = self.words as f64 / n;
        n * (1.0 - (-length * share).exp())
    }
}

/// The words of the `documents` nearest to `vector` in `index` (its graph at `ef`), for
/// [`crate::repair::Repairer::repair_with`].
pub fn retrieved_from(
    index: &Index,
    vector: &[f32],
    documents: usize,
    ef: usize,
) -> Result<RetrievedWords, IndexError> {
    let hits = index.search(vector, documents, ef)?;
    let mut texts = Vec::with_capacity(hits.len());
    for h in &hits {
        if let Some(d) = index.document(h.index)? {
            texts.push((d.title, d.text));
        }
    }
    Ok(RetrievedWords::from_documents(
        texts.iter().map(|(t, x)| (t.as_str(), x.as_str())),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_count_once_per_document() {
        let r = RetrievedWords::from_documents([
            ("Bread", "Bread without yeast: soda bread."),
            ("", "A yeast-free loaf"),
        ]);
        assert_eq!(r.documents(), 2);
        assert_eq!(r.documents_using("bread"), 1);
        assert_eq!(r.documents_using("yeast"), 2);
        assert_eq!(r.documents_using("bred"), 0);
        // 10 words over 2 documents: a word of one position in ten is in 2 × (1 - e^-0.5).
        assert!((r.expected_using(0.1) - 2.0 * (1.0 - (-0.5f64).exp())).abs() < 1e-9);
        assert!(r.expected_using(0.0) == 0.0);
    }
}
