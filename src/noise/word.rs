//! Word-level generators: reorder, determiner insertion, stop-word removal,
//! stemming and extra punctuation. Words are whitespace-delimited tokens;
//! edits touch a token's core (letters/digits) and keep the punctuation and
//! whitespace around it.

use rust_stemmers::{Algorithm, Stemmer};

use super::rng::NoiseRng;
use super::stopwords::is_stopword;
use super::text::{match_case, splice, tokens, Token};
use super::wordnet::WordNet;

/// Articles inserted by the `determiner` generator.
pub(crate) const DETERMINERS: [&str; 3] = ["a", "an", "the"];

/// Marks appended by the `punct` generator.
pub(crate) const PUNCTUATION: [&str; 8] = [",", ".", "!", "?", ";", ":", "...", "-"];

/// Tries before `reorder` falls back to a scan for a differing word.
const REORDER_TRIES: usize = 32;

fn is_determiner(word: &str) -> bool {
    DETERMINERS.iter().any(|d| d.eq_ignore_ascii_case(word))
}

/// Swap the cores of two words with different text (any two positions).
/// `None` with fewer than two distinct words.
pub(crate) fn reorder(rng: &mut NoiseRng, text: &str) -> Option<String> {
    let words: Vec<Token> = tokens(text).into_iter().filter(Token::has_core).collect();
    let first_core = words.first()?.core(text);
    if words.iter().all(|w| w.core(text) == first_core) {
        return None;
    }
    let i = rng.below(words.len());
    let wi = words[i].core(text);
    let mut j = None;
    for _ in 0..REORDER_TRIES {
        let k = rng.below(words.len());
        if words[k].core(text) != wi {
            j = Some(k);
            break;
        }
    }
    // Bounded fallback (e.g. a very long run of one word): the first word
    // after `i`, cyclically, whose text differs.
    let j = match j {
        Some(j) => j,
        None => (1..words.len())
            .map(|d| (i + d) % words.len())
            .find(|&k| words[k].core(text) != wi)?,
    };
    let mut edits = [
        (words[i].core.clone(), words[j].core(text).to_owned()),
        (words[j].core.clone(), wi.to_owned()),
    ];
    Some(splice(text, &mut edits))
}

/// Insert an article before a word that is not already preceded by one
/// (`the`, or `a`/`an` by the word's first letter). Content words are
/// preferred; stop words are used only when the query has nothing else.
pub(crate) fn determiner(rng: &mut NoiseRng, text: &str) -> Option<String> {
    let toks = tokens(text);
    let ok = |i: usize| {
        let t = &toks[i];
        t.has_core()
            && !is_determiner(t.core(text))
            && (i == 0 || !is_determiner(toks[i - 1].core(text)))
    };
    let mut eligible: Vec<usize> = (0..toks.len())
        .filter(|&i| ok(i) && !is_stopword(toks[i].core(text)))
        .collect();
    if eligible.is_empty() {
        eligible = (0..toks.len()).filter(|&i| ok(i)).collect();
    }
    let &i = rng.choose(&eligible)?;
    let core = toks[i].core(text);
    let det = if rng.below(2) == 0 {
        "the"
    } else if core
        .chars()
        .next()
        .is_some_and(|c| "aeiouAEIOU".contains(c))
    {
        "an"
    } else {
        "a"
    };
    let det = if i == 0 {
        match_case(det, &core[..first_char_len(core)])
    } else {
        det.to_owned()
    };
    let at = toks[i].span.start;
    let mut e = [(at..at, format!("{det} "))];
    Some(splice(text, &mut e))
}

fn first_char_len(s: &str) -> usize {
    s.chars().next().map_or(0, char::len_utf8)
}

/// Remove every stop word (keeping punctuation attached to it). `None` when
/// there is none, or when only stop words are present (an empty query is no
/// query).
pub(crate) fn remove_stopwords(text: &str) -> Option<String> {
    let toks = tokens(text);
    let is_stop = |t: &Token| t.has_core() && is_stopword(t.core(text));
    if !toks.iter().any(is_stop) || toks.iter().filter(|t| t.has_core()).all(is_stop) {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    out.push_str(&text[..toks[0].span.start]);
    let mut first = true;
    for (i, t) in toks.iter().enumerate() {
        let piece = if is_stop(t) {
            // Keep punctuation around a removed stop word, e.g. "(the" -> "(".
            format!(
                "{}{}",
                &text[t.span.start..t.core.start],
                &text[t.core.end..t.span.end]
            )
        } else {
            text[t.span.clone()].to_owned()
        };
        if piece.is_empty() {
            continue;
        }
        if !first {
            out.push_str(&text[toks[i - 1].span.end..t.span.start]);
        }
        out.push_str(&piece);
        first = false;
    }
    let last = toks.last().map_or(0, |t| t.span.end);
    out.push_str(&text[last..]);
    Some(out)
}

/// Stem every ASCII word with the Snowball English (Porter2) stemmer; the
/// stem is lower case except that a capitalised word stays capitalised.
pub(crate) fn stem(text: &str) -> Option<String> {
    let stemmer = Stemmer::create(Algorithm::English);
    let mut edits = Vec::new();
    for t in tokens(text) {
        let core = t.core(text);
        if core.is_empty() || !core.chars().all(|c| c.is_ascii_alphabetic()) {
            continue;
        }
        let lower = core.to_ascii_lowercase();
        let s = stemmer.stem(&lower);
        if s != lower {
            edits.push((t.core.clone(), match_case(&s, core)));
        }
    }
    if edits.is_empty() {
        return None;
    }
    Some(splice(text, &mut edits))
}

/// Append one punctuation mark to a randomly chosen token.
pub(crate) fn punct(rng: &mut NoiseRng, text: &str) -> Option<String> {
    let toks = tokens(text);
    let t = rng.choose(&toks)?;
    let mark = rng.choose(&PUNCTUATION)?;
    let at = t.span.end;
    let mut e = [(at..at, (*mark).to_owned())];
    Some(splice(text, &mut e))
}

/// Whether a word core can be looked up in WordNet (ASCII letters, inner
/// hyphens or apostrophes) and is worth replacing (not a stop word).
fn wordnet_candidate(core: &str) -> bool {
    core.chars().any(|c| c.is_ascii_alphabetic())
        && core
            .chars()
            .all(|c| c.is_ascii_alphabetic() || c == '-' || c == '\'')
        && !is_stopword(core)
}

/// Replace every word by its WordNet base form ([`WordNet::lemma`]).
pub(crate) fn lemmatize(wn: &WordNet, text: &str) -> Option<String> {
    let mut edits = Vec::new();
    for t in tokens(text) {
        let core = t.core(text);
        // Stop words are lemmatised too ("were" -> "be"), unlike synonyms.
        if !core
            .chars()
            .all(|c| c.is_ascii_alphabetic() || c == '-' || c == '\'')
            || core.is_empty()
        {
            continue;
        }
        if let Some(l) = wn.lemma(core) {
            edits.push((t.core.clone(), match_case(&l, core)));
        }
    }
    if edits.is_empty() {
        return None;
    }
    Some(splice(text, &mut edits))
}

/// Replace one randomly chosen content word that has WordNet synonyms by one
/// of them, chosen at random.
pub(crate) fn synonym(rng: &mut NoiseRng, wn: &WordNet, text: &str) -> Option<String> {
    let mut cands: Vec<(Token, Vec<String>)> = Vec::new();
    for t in tokens(text) {
        let core = t.core(text);
        if !wordnet_candidate(core) {
            continue;
        }
        let syns = wn.synonyms(core);
        if !syns.is_empty() {
            cands.push((t, syns));
        }
    }
    let (t, syns) = rng.choose(&cands)?;
    let s = rng.choose(syns)?;
    let mut e = [(t.core.clone(), match_case(s, t.core(text)))];
    Some(splice(text, &mut e))
}
