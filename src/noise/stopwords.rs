//! English stop words: common function words (articles, pronouns,
//! auxiliaries, prepositions, conjunctions, question words, quantifiers).
//! Our own list, kept sorted so lookups are a binary search.

/// The list, sorted and without duplicates (checked by a test).
#[rustfmt::skip]
pub const STOPWORDS: &[&str] = &[
    "a", "about", "above", "across", "after", "again", "against", "all", "almost", "along", "also",
    "although", "am", "among", "an", "and", "another", "any", "are", "around", "as", "at", "be",
    "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "cannot",
    "could", "did", "do", "does", "doing", "done", "down", "during", "each", "either", "else",
    "enough", "ever", "every", "few", "for", "from", "further", "had", "has", "have", "having",
    "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "however", "i", "if",
    "in", "into", "is", "it", "its", "itself", "just", "least", "less", "may", "me", "might",
    "mine", "more", "most", "much", "must", "my", "myself", "neither", "no", "nor", "not", "now",
    "of", "off", "often", "on", "once", "only", "onto", "or", "other", "others", "ought", "our",
    "ours", "ourselves", "out", "over", "own", "per", "quite", "rather", "same", "shall", "she",
    "should", "since", "so", "some", "such", "than", "that", "the", "their", "theirs", "them",
    "themselves", "then", "there", "these", "they", "this", "those", "though", "through", "thus",
    "to", "too", "toward", "towards", "under", "unless", "until", "up", "upon", "us", "very",
    "via", "was", "we", "were", "what", "whatever", "when", "where", "whether", "which", "while",
    "who", "whom", "whose", "why", "will", "with", "within", "without", "would", "yet", "you",
    "your", "yours", "yourself", "yourselves",
];

/// Whether `word` (any case) is an English stop word.
pub fn is_stopword(word: &str) -> bool {
    let lower = word.to_lowercase();
    STOPWORDS.binary_search(&lower.as_str()).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_unique_and_sized() {
        assert!(
            STOPWORDS.windows(2).all(|w| w[0] < w[1]),
            "keep STOPWORDS sorted"
        );
        assert!(
            (140..=200).contains(&STOPWORDS.len()),
            "{}",
            STOPWORDS.len()
        );
        assert!(is_stopword("The"));
        assert!(is_stopword("what"));
        assert!(!is_stopword("definition"));
        assert!(!is_stopword(""));
    }
}
