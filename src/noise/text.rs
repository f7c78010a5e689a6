//! Unicode-safe text helpers: approximate grapheme clusters and
//! whitespace-delimited tokens with their "core" (the word without
//! surrounding punctuation).
//!
//! Edits are made on whole clusters so that a base letter and its combining
//! accents, or an emoji ZWJ sequence, are deleted or replaced together and a
//! UTF-8 character is never split.

use std::ops::Range;

/// True for characters that extend the preceding cluster: combining marks,
/// variation selectors, emoji skin-tone modifiers, tag characters and the
/// zero-width joiner itself.
fn is_extend(c: char) -> bool {
    matches!(u32::from(c),
        0x0300..=0x036F      // combining diacritical marks
        | 0x0483..=0x0489    // Cyrillic combining marks
        | 0x0591..=0x05BD    // Hebrew points
        | 0x0610..=0x061A
        | 0x064B..=0x065F    // Arabic harakat
        | 0x0900..=0x0903    // Devanagari signs
        | 0x093A..=0x094F
        | 0x1AB0..=0x1AFF
        | 0x1DC0..=0x1DFF
        | 0x200C..=0x200D    // ZWNJ, ZWJ
        | 0x20D0..=0x20FF    // combining marks for symbols (keycap)
        | 0x3099..=0x309A    // kana voiced marks
        | 0xFE00..=0xFE0F    // variation selectors
        | 0xFE20..=0xFE2F
        | 0x1F3FB..=0x1F3FF  // emoji modifiers
        | 0xE0020..=0xE007F  // tags
        | 0xE0100..=0xE01EF) // variation selectors supplement
}

/// Byte ranges of the text's clusters (a base character plus the extending
/// characters after it; a ZWJ also pulls in the non-ASCII, non-space
/// character after it, as in emoji ZWJ sequences).
pub(crate) fn clusters(text: &str) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    let mut prev_zwj = false;
    for (i, c) in text.char_indices() {
        let end = i + c.len_utf8();
        match out.last_mut() {
            Some(last) if is_extend(c) || (prev_zwj && !c.is_ascii() && !c.is_whitespace()) => {
                last.end = end
            }
            _ => out.push(i..end),
        }
        prev_zwj = c == '\u{200D}';
    }
    out
}

/// First character of a cluster ('\0' for an empty range, which never occurs).
pub(crate) fn base_char(text: &str, r: &Range<usize>) -> char {
    text.get(r.clone())
        .and_then(|s| s.chars().next())
        .unwrap_or('\0')
}

/// A cluster that belongs to a word: its base character is a letter or digit.
pub(crate) fn is_wordish(text: &str, r: &Range<usize>) -> bool {
    base_char(text, r).is_alphanumeric()
}

/// A whitespace-delimited token; `core` is the span from its first to its last
/// letter/digit cluster (empty, at `start`, for pure punctuation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Token {
    pub(crate) span: Range<usize>,
    pub(crate) core: Range<usize>,
}

impl Token {
    /// The core text, e.g. `definition` in `"definition?"`.
    pub(crate) fn core<'a>(&self, text: &'a str) -> &'a str {
        text.get(self.core.clone()).unwrap_or("")
    }

    /// Whether the token has any letter or digit.
    pub(crate) fn has_core(&self) -> bool {
        !self.core.is_empty()
    }
}

/// Whitespace-delimited tokens of the text.
pub(crate) fn tokens(text: &str) -> Vec<Token> {
    let cl = clusters(text);
    let mut out = Vec::new();
    let mut i = 0;
    while i < cl.len() {
        if base_char(text, &cl[i]).is_whitespace() {
            i += 1;
            continue;
        }
        let first = i;
        let mut core_first: Option<usize> = None;
        let mut core_last = first;
        while i < cl.len() && !base_char(text, &cl[i]).is_whitespace() {
            if is_wordish(text, &cl[i]) {
                core_first.get_or_insert(i);
                core_last = i;
            }
            i += 1;
        }
        let span = cl[first].start..cl[i - 1].end;
        let core = match core_first {
            Some(cf) => cl[cf].start..cl[core_last].end,
            None => span.start..span.start,
        };
        out.push(Token { span, core });
    }
    out
}

/// Replace non-overlapping byte ranges (in any order) by new strings.
/// Ranges must lie on char boundaries, which holds for every range produced
/// by [`clusters`] and [`tokens`].
pub(crate) fn splice(text: &str, edits: &mut [(Range<usize>, String)]) -> String {
    edits.sort_by_key(|(r, _)| (r.start, r.end));
    let mut out = String::with_capacity(text.len() + 16);
    let mut pos = 0;
    for (r, new) in edits.iter() {
        if r.start < pos || r.end < r.start {
            continue; // overlapping edit: ignore rather than corrupt the text
        }
        out.push_str(text.get(pos..r.start).unwrap_or(""));
        out.push_str(new);
        pos = r.end;
    }
    out.push_str(text.get(pos..).unwrap_or(""));
    out
}

/// Give `word` the case pattern of `like`: all-caps stays all-caps, a
/// capitalised word gets a capital first letter, anything else is kept.
pub(crate) fn match_case(word: &str, like: &str) -> String {
    let letters: Vec<char> = like.chars().filter(|c| c.is_alphabetic()).collect();
    let all_upper = letters.len() > 1 && letters.iter().all(|c| c.is_uppercase());
    if all_upper {
        return word.to_uppercase();
    }
    if like.chars().next().is_some_and(char::is_uppercase) {
        let mut cs = word.chars();
        return match cs.next() {
            Some(f) => f.to_uppercase().chain(cs).collect(),
            None => String::new(),
        };
    }
    word.to_owned()
}

/// `c` with the case of `like` (only when the case mapping is one char).
pub(crate) fn case_like(c: char, like: char) -> char {
    if like.is_uppercase() {
        let mut up = c.to_uppercase();
        match (up.next(), up.next()) {
            (Some(u), None) => u,
            _ => c,
        }
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cl_strs(t: &str) -> Vec<&str> {
        clusters(t).into_iter().map(|r| &t[r]).collect()
    }

    #[test]
    fn clusters_keep_marks_and_zwj_sequences() {
        assert_eq!(cl_strs("e\u{301}a"), vec!["e\u{301}", "a"]);
        let family = "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}";
        assert_eq!(cl_strs(&format!("a{family}b")), vec!["a", family, "b"]);
        assert_eq!(cl_strs("\u{301}x"), vec!["\u{301}", "x"]);
        assert!(clusters("").is_empty());
    }

    #[test]
    fn tokens_and_cores() {
        let t = "  what is (rsa)?  ok";
        let toks = tokens(t);
        let spans: Vec<&str> = toks.iter().map(|k| &t[k.span.clone()]).collect();
        let cores: Vec<&str> = toks.iter().map(|k| k.core(t)).collect();
        assert_eq!(spans, vec!["what", "is", "(rsa)?", "ok"]);
        assert_eq!(cores, vec!["what", "is", "rsa", "ok"]);
        let p = tokens("?? !");
        assert!(p.iter().all(|k| !k.has_core()));
    }

    #[test]
    fn splice_and_case() {
        let mut e = vec![(4..6, "X".to_owned()), (0..1, String::new())];
        assert_eq!(splice("abcdefg", &mut e), "bcdXg");
        assert_eq!(match_case("run", "Running"), "Run");
        assert_eq!(match_case("run", "RUNNING"), "RUN");
        assert_eq!(match_case("run", "running"), "run");
        assert_eq!(case_like('k', 'J'), 'K');
    }
}
