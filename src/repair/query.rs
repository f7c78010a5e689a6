//! A query as the speller sees it: its words, where they are, and which of them it may touch.

use super::language_model::{LanguageModel, WordStats};
use crate::index::vocab::is_stopword;

/// Words shorter than this give no context and are not corrected as real-word errors.
pub const MIN_CONTEXT_CHARS: usize = 3;

/// Common function words of French, German, Spanish, Italian, Portuguese and Dutch that are not
/// English words: a query holding one is left as it is (the English model would "correct" it).
const FOREIGN_FUNCTION_WORDS: &[&str] = &[
    "avec", "bei", "como", "con", "dans", "das", "del", "della", "dem", "den", "der", "des", "det",
    "di", "du", "een", "ein", "eine", "einen", "el", "est", "et", "het", "ich", "ist", "las",
    "les", "los", "mit", "nach", "nicht", "och", "oder", "para", "pas", "per", "pour", "que",
    "qui", "sind", "sont", "sur", "und", "une", "van", "voor", "wie", "zu",
];

/// Those of [`FOREIGN_FUNCTION_WORDS`] that English queries use too, in names and set phrases
/// (`Las Vegas`, `Los Angeles`, `El Paso`, `Des Moines`, `Van Nuys`, `calories per gram`, `et
/// al`, `pros and con`): alone they do not make a query foreign.
const ALSO_ENGLISH: &[&str] = &[
    "con", "del", "den", "des", "di", "du", "el", "et", "las", "los", "per", "van",
];

/// Whether a query is in another language: it holds a function word of another language that
/// English does not use, or two that it may where English's pair list does not know them with
/// the word after (`el precio del pan`, but not `los angeles to las vegas`).
fn is_foreign(words: &[QueryWord], lm: &LanguageModel) -> bool {
    let mut ambiguous = 0;
    for (i, w) in words.iter().enumerate() {
        let word = w.lower.as_str();
        if FOREIGN_FUNCTION_WORDS.binary_search(&word).is_ok() {
            if ALSO_ENGLISH.binary_search(&word).is_err() {
                return true;
            }
            let english = words
                .get(i + 1)
                .is_some_and(|next| lm.general_pair_known(&w.stats, &next.stats));
            ambiguous += usize::from(!english);
        }
    }
    ambiguous >= 2
}

/// Whether a query was typed with caps lock on: every letter a capital, two words or more, and a
/// function word among them (`HOW TO LOOSE WEIGHT`). A run of acronyms has no function word
/// (`NASA ESA JAXA`), and stays as typed.
fn typed_in_capitals(text: &str) -> bool {
    let mut words = 0;
    let mut function_word = false;
    for token in text.split(|c: char| !c.is_ascii_alphabetic()) {
        if token.is_empty() {
            continue;
        }
        if token.bytes().any(|b| b.is_ascii_lowercase()) {
            return false;
        }
        words += 1;
        function_word |= token.len() >= 2 && is_stopword(&token.to_ascii_lowercase());
    }
    words >= 2 && function_word
}

/// The word a query asks the meaning or identity of, when it is one word: `what is X`, `what is
/// a X`, `who is X`, `define X`, `meaning of X`, `X meaning`, `X definition`, `what does X mean`.
/// People ask what a word is because it is rare to them — a term, a name, a brand — so such a
/// word is more likely meant as typed than one elsewhere.
pub fn defined_word(words: &[QueryWord]) -> Option<usize> {
    const FRAMES: &[&[&str]] = &[
        &["what", "is"],
        &["what", "are"],
        &["who", "is"],
        &["who", "was"],
        &["define"],
        &["definition", "of"],
        &["meaning", "of"],
    ];
    let w: Vec<&str> = words.iter().map(|q| q.lower.as_str()).collect();
    let n = w.len();
    // The frame starts the query and the word ends it, an article between them at most.
    for frame in FRAMES {
        if n > frame.len() && w[..frame.len()] == **frame {
            let between = &w[frame.len()..n - 1];
            if between.is_empty() || matches!(between, ["a" | "an" | "the"]) {
                return Some(n - 1);
            }
        }
    }
    match w.as_slice() {
        [_, "meaning" | "definition" | "define"] => Some(0),
        ["what", "does", _, "mean"] | ["what", "does", _, "stand", "for"] => Some(2),
        _ => None,
    }
}

/// Characters that make a whole whitespace-separated token off limits: URLs, e-mail addresses,
/// paths, identifiers, product codes.
fn is_code_char(c: char) -> bool {
    c.is_numeric() || u32::from(c) < 128 && CODE_MARKS >> u32::from(c) & 1 == 1
}

/// The ASCII marks of [`is_code_char`], a bit each: asked of every character of every query,
/// where a search of a string of them cost a fifth of the scan's instructions or more, by
/// where the linker put the string.
const CODE_MARKS: u128 = {
    let marks = b"@/\\:._#&=+%~|<>[]{}$^*";
    let mut set = 0u128;
    let mut i = 0;
    while i < marks.len() {
        set |= 1 << marks[i];
        i += 1;
    }
    set
};

/// One alphabetic word of a query.
#[derive(Debug, Clone)]
pub struct QueryWord {
    /// Byte range in the query.
    pub start: usize,
    pub end: usize,
    /// Lower-cased text.
    pub lower: String,
    /// What the language model knows of it.
    pub stats: WordStats,
    /// May be changed: plain lower-case (or a capitalised first word) ASCII letters, in a token
    /// without digits or code characters.
    pub editable: bool,
    /// Not a stopword, and at least [`MIN_CONTEXT_CHARS`] letters.
    pub content: bool,
    /// Typed with a capital first letter (not with caps lock on): a name as often as not.
    pub capitalised: bool,
    /// Followed by a possessive `'s` that ends its token (`peyer's`, and contractions: `what's`).
    pub possessive: bool,
    /// Only whitespace separates it from the word before (a join may remove it).
    pub spaced_from_previous: bool,
    /// The whole whitespace token is this word, or this word and closing punctuation (a split
    /// may divide it).
    pub whole_token: bool,
    /// Ends a phrase: the text ends after it, or a closing mark follows it in its token
    /// (`meanin?`, `alot,`).
    pub ends_phrase: bool,
}

/// The words of `text`, or `None` when the query is not one to touch at all (another script or
/// language). A word no list knows but `also_known` does (a live document's) is left as typed.
pub fn scan(
    text: &str,
    lm: &LanguageModel,
    also_known: &dyn Fn(&str) -> bool,
) -> Option<Vec<QueryWord>> {
    if text
        .chars()
        .any(|c| c.is_alphabetic() && !c.is_ascii_alphabetic())
    {
        return None;
    }
    let mut tokens = Vec::with_capacity(16);
    let mut token_start = None;
    for (i, c) in text.char_indices() {
        match (c.is_whitespace(), token_start) {
            (true, Some(s)) => {
                tokens.push((s, i));
                token_start = None;
            }
            (false, None) => token_start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = token_start {
        tokens.push((s, text.len()));
    }
    let caps_lock = typed_in_capitals(text);
    let mut words: Vec<QueryWord> = Vec::with_capacity(tokens.len());
    let mut prev_token_end: Option<usize> = None;
    // A token's runs of letters: one buffer for all of them.
    let mut runs = Vec::new();
    for (ts, te) in tokens {
        let token = &text[ts..te];
        let core = token.trim_matches(|c: char| !c.is_alphanumeric());
        let code = core.chars().any(is_code_char);
        runs.clear();
        let mut run_start = None;
        for (i, c) in token.char_indices() {
            match (c.is_ascii_alphabetic(), run_start) {
                (true, None) => run_start = Some(ts + i),
                (false, Some(s)) => {
                    runs.push((s, ts + i));
                    run_start = None;
                }
                _ => {}
            }
        }
        if let Some(s) = run_start {
            runs.push((s, te));
        }
        let n_runs = runs.len();
        for (k, &(s, e)) in runs.iter().enumerate() {
            let raw = &text[s..e];
            let lower = raw.to_ascii_lowercase();
            let letters = raw.len();
            // With caps lock on, capitals say nothing about a word: it is read as lower case.
            let capitals =
                !caps_lock && letters >= 2 && raw.bytes().all(|b| b.is_ascii_uppercase());
            let mixed = !caps_lock && raw.bytes().skip(1).any(|b| b.is_ascii_uppercase());
            let capitalised = !caps_lock && raw.as_bytes()[0].is_ascii_uppercase();
            let first = words.is_empty();
            // Clause or sentence punctuation after it leaves a word whole (`alot,`, `aswell.`):
            // a split or a join keeps the mark after it.
            let whole_token =
                n_runs == 1 && s == ts && text[e..te].chars().all(|c| CLOSING_MARKS.contains(c));
            // The space before: the previous word ended its own token, and this one starts one.
            let spaced_from_previous = k == 0
                && s == ts
                && prev_token_end.is_some_and(|p| words.last().is_some_and(|w| w.end == p));
            let stats = lm.stats(&lower);
            // A capitalised word that no list holds and nobody writes is a misspelt name
            // (`Amercan`, `Canaa`); one that people write is left alone.
            let misspelt_name = capitalised
                && !first
                && !stats.known()
                && lm.has_usage()
                && lm.usage(&lower).is_none();
            let live_word = !stats.known() && also_known(&lower);
            words.push(QueryWord {
                start: s,
                end: e,
                stats,
                editable: !code
                    && !capitals
                    && !mixed
                    && !live_word
                    && (!capitalised || first || misspelt_name),
                content: !is_stopword(&lower) && letters >= MIN_CONTEXT_CHARS,
                capitalised,
                possessive: possessive(&text[e..]),
                spaced_from_previous,
                whole_token,
                ends_phrase: whole_token && (e < te || text[te..].trim().is_empty()),
                lower,
            });
        }
        prev_token_end = Some(te);
    }
    if is_foreign(&words, lm) {
        return None;
    }
    Some(words)
}

/// The sentences of `text`, as byte ranges that cover it: a sentence ends with a token that
/// [`ends_sentence`] or at a line break, where the next token starts with a capital, and takes
/// the whitespace after it. Each is read as a query of its own: a text of several (an essay, a
/// question and its detail) starts each with a capital that says nothing of a name, and with the
/// words a query starts with. Text typed in lower case is read whole (`lunar phases? quizlet`:
/// the words around the mark are each other's context).
pub fn sentences(text: &str) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    // Whether the text since the last token ended a sentence (punctuation or a line break).
    let mut ended = false;
    let mut token_start = None;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            if let Some(s) = token_start.take() {
                ended = ends_sentence(&text[s..i]);
            }
            ended |= c == '\n';
        } else if token_start.is_none() {
            let capital = text[i..]
                .chars()
                .take_while(|c| !c.is_whitespace())
                .find(|c| c.is_alphanumeric())
                .is_some_and(char::is_uppercase);
            if ended && capital && i > start {
                out.push(start..i);
                start = i;
            }
            ended = false;
            token_start = Some(i);
        }
    }
    out.push(start..text.len());
    out
}

/// Marks that may follow a word in its token and leave it whole ([`QueryWord::whole_token`]).
const CLOSING_MARKS: &str = ".,;:!?)]\"'\u{201d}\u{2019}";

/// Abbreviations written with a full stop before a name (`Dr. Jonson`, `St. Louis`, `vs. Texas`):
/// the capital after them is the name's, not a sentence's.
const NAME_ABBREVIATIONS: &[&str] = &[
    "capt", "co", "col", "corp", "dr", "ft", "gen", "gov", "inc", "jr", "lt", "ltd", "messrs",
    "mr", "mrs", "ms", "mt", "no", "prof", "rep", "rev", "sen", "sgt", "sr", "st", "vs",
];

/// Whether a whitespace token ends a sentence: a full stop, `!` or `?` at its end, closing
/// quotes and brackets after it allowed, but not an initial (`J.`), a dotted abbreviation
/// (`U.S.`, `e.g.`) or one of [`NAME_ABBREVIATIONS`].
fn ends_sentence(token: &str) -> bool {
    let token = token.trim_end_matches(['"', '\'', ')', ']', '\u{2019}', '\u{201d}']);
    if token.ends_with(['!', '?']) {
        return true;
    }
    let Some(body) = token.strip_suffix('.') else {
        return false;
    };
    let body = body.trim_end_matches('.');
    let word = body
        .rsplit(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or_default();
    let dotted = body.len() > word.len() && body[..body.len() - word.len()].ends_with('.');
    !dotted
        && (word.is_empty() || word.len() >= 2)
        && !NAME_ABBREVIATIONS.contains(&word.to_ascii_lowercase().as_str())
}

/// Whether `rest`, what follows a word, begins with a possessive `'s` (or `’s`) that ends the
/// token.
fn possessive(rest: &str) -> bool {
    let after = rest
        .strip_prefix('\'')
        .or_else(|| rest.strip_prefix('\u{2019}'))
        .and_then(|r| r.strip_prefix(['s', 'S']));
    after.is_some_and(|r| !r.starts_with(|c: char| c.is_alphanumeric()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_mark_is_exactly_one_of_its_list() {
        let marks = "@/\\:._#&=+%~|<>[]{}$^*";
        for c in (0..0x3000).filter_map(char::from_u32) {
            assert_eq!(
                is_code_char(c),
                c.is_numeric() || marks.contains(c),
                "{c:?}"
            );
        }
    }

    #[test]
    fn a_function_word_english_uses_too_does_not_make_a_query_foreign() {
        let vocab = std::sync::Arc::new(crate::index::vocab::Vocabulary::build(
            [("", "calories per gram in las vegas")].into_iter(),
        ));
        let lm = LanguageModel::new(vocab, None, 1e-10);
        assert!(scan("how many calories per gram", &lm, &|_| false).is_some());
        assert!(scan("las vegas hotels", &lm, &|_| false).is_some());
        assert!(scan("como hacer una tortilla", &lm, &|_| false).is_none());
        assert!(scan("prix des maisons sur la cote", &lm, &|_| false).is_none());
        // Two that English may use, together, are another language, unless English's pair
        // list knows them with the word after.
        assert!(scan("el precio del pan", &lm, &|_| false).is_none());
        let lex = std::sync::Arc::new(crate::repair::Lexicon::from_counts(
            [
                ("los", 60),
                ("angeles", 50),
                ("las", 50),
                ("vegas", 50),
                ("to", 900),
            ],
            [("los", "angeles", 40), ("las", "vegas", 40)],
        ));
        let vocab = std::sync::Arc::new(crate::index::vocab::Vocabulary::build(
            [("", "los angeles to las vegas")].into_iter(),
        ));
        let lm = LanguageModel::new(vocab, Some(lex), 1e-10);
        assert!(scan("los angeles to las vegas", &lm, &|_| false).is_some());
        assert!(scan("el precio del pan", &lm, &|_| false).is_none());
    }

    #[test]
    fn the_word_a_query_asks_the_meaning_of_is_found() {
        let vocab = std::sync::Arc::new(crate::index::vocab::Vocabulary::build(
            [("", "what is")].into_iter(),
        ));
        let lm = LanguageModel::new(vocab, None, 1e-10);
        let defined = |q: &str| {
            let words = scan(q, &lm, &|_| false).expect("English");
            defined_word(&words).map(|i| words[i].lower.clone())
        };
        for (q, word) in [
            ("what is hirad", "hirad"),
            ("What is a cirt?", "cirt"),
            ("definition of an empath", "empath"),
            ("who was luter", "luter"),
            ("define gyne", "gyne"),
            ("poct meaning", "poct"),
            ("what does thhn mean", "thhn"),
            ("what does cdl stand for", "cdl"),
        ] {
            assert_eq!(defined(q).as_deref(), Some(word), "{q}");
        }
        for q in [
            "what is the capital of france",
            "so what is hirad",
            "what is a good diet",
            "causes of anemia",
            "meaning",
        ] {
            assert_eq!(defined(q), None, "{q}");
        }
    }

    #[test]
    fn a_possessive_s_ending_the_token_is_found() {
        for rest in ["'s", "'s?", "\u{2019}s", "'S", "'s,"] {
            assert!(possessive(rest), "{rest:?}");
        }
        for rest in ["", "'", "'st", "'sake", "s", " 's", "'ll", "-s"] {
            assert!(!possessive(rest), "{rest:?}");
        }
        let vocab = std::sync::Arc::new(crate::index::vocab::Vocabulary::build(
            [("", "peyer patch")].into_iter(),
        ));
        let lm = LanguageModel::new(vocab, None, 1e-10);
        let words = scan("peyer's patch", &lm, &|_| false).expect("English");
        assert_eq!(
            words.iter().map(|w| w.possessive).collect::<Vec<_>>(),
            [true, false, false]
        );
    }

    #[test]
    fn a_text_is_split_into_sentences_where_they_end() {
        for token in [
            "help.",
            "help!",
            "why?",
            "1990.",
            "said.\"",
            "(sic.)",
            "waited...",
            "etc.",
        ] {
            assert!(ends_sentence(token), "{token:?}");
        }
        for token in [
            "help", "help,", "J.", "U.S.", "e.g.", "Ph.D.", "Dr.", "st.", "vs.", "a:",
        ] {
            assert!(!ends_sentence(token), "{token:?}");
        }
        let split = |t: &'static str| -> Vec<&'static str> {
            sentences(t).into_iter().map(|r| &t[r]).collect()
        };
        assert_eq!(split("went home. Paul went"), ["went home. ", "Paul went"]);
        assert_eq!(
            split("why?  Because!\nNext"),
            ["why?  ", "Because!\n", "Next"]
        );
        assert_eq!(split("went home\n\"Paul"), ["went home\n", "\"Paul"]);
        for one in [
            "went to St. Paul",
            "went home, Paul",
            "the U.S. Army",
            "lunar phases? quizlet",
            "went home.\n2 times",
            "",
            " done. ",
        ] {
            assert_eq!(split(one), [one]);
        }
    }

    #[test]
    fn a_closing_mark_leaves_a_word_whole_and_ends_its_phrase() {
        let vocab = std::sync::Arc::new(crate::index::vocab::Vocabulary::build(
            [("", "in fact it is")].into_iter(),
        ));
        let lm = LanguageModel::new(vocab, None, 1e-10);
        let read = |q: &str| -> Vec<(bool, bool)> {
            let words = scan(q, &lm, &|_| false).expect("English");
            words
                .iter()
                .map(|w| (w.whole_token, w.ends_phrase))
                .collect()
        };
        assert_eq!(
            read("infact, it is"),
            [(true, true), (true, false), (true, true)]
        );
        assert_eq!(
            read("it is? (infact)"),
            [(true, false), (true, true), (false, false)]
        );
        assert_eq!(
            read("e-mail it 2"),
            [(false, false), (false, false), (true, false)]
        );
    }

    #[test]
    fn foreign_function_words_are_sorted() {
        let mut s = FOREIGN_FUNCTION_WORDS.to_vec();
        s.sort_unstable();
        s.dedup();
        assert_eq!(s, FOREIGN_FUNCTION_WORDS);
        let mut a = ALSO_ENGLISH.to_vec();
        a.sort_unstable();
        assert_eq!(a, ALSO_ENGLISH);
        assert!(a.iter().all(|w| FOREIGN_FUNCTION_WORDS.contains(w)));
    }
}
