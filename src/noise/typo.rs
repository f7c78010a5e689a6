//! Character-level typo generators.
//!
//! * CAPOT typos (`cd`, `rcs`, `kcs`): pick a letter/digit cluster anywhere in
//!   the query, then a side — left, at or right, 1/3 each — and apply the edit
//!   there. `cd` deletes the cluster before / at / after the picked one (the
//!   picked one itself when that neighbour is not part of the same word);
//!   `rcs` and `kcs` insert a character before the picked one (left), replace
//!   it (at), or insert after it (right). `rcs` uses a random letter a–z,
//!   `kcs` a QWERTY neighbour of the picked character (so only characters with
//!   keyboard neighbours can be picked).
//! * TextAttack-style typo (`typo`): pick one word whose core has at least
//!   three clusters and is not a stop word, then one of five edits inside it:
//!   swap two neighbouring characters, delete one, insert a random letter,
//!   substitute a random letter, substitute a QWERTY neighbour.
//!
//! Replacement letters are never the letter they replace, and take the case
//! of the character they replace or sit next to.

use std::ops::Range;

use super::keyboard::keyboard_neighbours;
use super::rng::NoiseRng;
use super::stopwords::is_stopword;
use super::text::{base_char, case_like, clusters, is_wordish, splice, tokens};

/// Where the CAPOT position rule applies an edit relative to the picked index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Left,
    At,
    Right,
}

/// The CAPOT position rule: left, at, right with probability 1/3 each.
pub(crate) fn pick_side(rng: &mut NoiseRng) -> Side {
    match rng.below(3) {
        0 => Side::Left,
        1 => Side::At,
        _ => Side::Right,
    }
}

/// A random lowercase ASCII letter, different from `avoid` (compared
/// case-insensitively) and with the case of `avoid`.
fn random_letter(rng: &mut NoiseRng, avoid: char) -> char {
    let lower = avoid.to_ascii_lowercase();
    let pool: Vec<char> = ('a'..='z').filter(|&c| c != lower).collect();
    let c = rng.choose(&pool).copied().unwrap_or('x');
    case_like(c, avoid)
}

/// A random letter a–z (any, for inserts) with the case of `like`.
fn any_letter(rng: &mut NoiseRng, like: char) -> char {
    let c = char::from(b'a' + rng.below(26) as u8);
    case_like(c, like)
}

/// A uniformly chosen keyboard neighbour of `c` (case preserved).
fn random_neighbour(rng: &mut NoiseRng, c: char) -> Option<char> {
    let ns = keyboard_neighbours(c);
    rng.choose(&ns).copied()
}

/// Which CAPOT typo generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CapotTypo {
    /// Character delete.
    Delete,
    /// Random character insert / replace.
    Random,
    /// Keyboard-neighbour insert / replace.
    Keyboard,
}

/// Apply one CAPOT typo; `None` when the query has no eligible character.
pub(crate) fn capot_typo(kind: CapotTypo, rng: &mut NoiseRng, text: &str) -> Option<String> {
    let cl = clusters(text);
    let eligible: Vec<usize> = (0..cl.len())
        .filter(|&i| is_wordish(text, &cl[i]))
        .filter(|&i| {
            kind != CapotTypo::Keyboard
                || single_char(text, &cl[i]).is_some_and(|c| !keyboard_neighbours(c).is_empty())
        })
        .collect();
    let &k = rng.choose(&eligible)?;
    let side = pick_side(rng);
    let picked = cl[k].clone();
    let mut edit: (Range<usize>, String) = match kind {
        CapotTypo::Delete => {
            let target = match side {
                Side::Left if k > 0 && is_wordish(text, &cl[k - 1]) => k - 1,
                Side::Right if k + 1 < cl.len() && is_wordish(text, &cl[k + 1]) => k + 1,
                _ => k,
            };
            (cl[target].clone(), String::new())
        }
        CapotTypo::Random | CapotTypo::Keyboard => {
            let base = base_char(text, &picked);
            let new = match (kind, side) {
                (CapotTypo::Random, Side::At) => random_letter(rng, base),
                (CapotTypo::Random, _) => any_letter(rng, base),
                _ => random_neighbour(rng, base)?,
            };
            match side {
                Side::Left => (picked.start..picked.start, new.to_string()),
                Side::At => (picked, new.to_string()),
                Side::Right => (picked.end..picked.end, new.to_string()),
            }
        }
    };
    Some(splice(text, std::slice::from_mut(&mut edit)))
}

/// The cluster's character when the cluster is a single character.
fn single_char(text: &str, r: &Range<usize>) -> Option<char> {
    let s = text.get(r.clone())?;
    let mut cs = s.chars();
    match (cs.next(), cs.next()) {
        (Some(c), None) => Some(c),
        _ => None,
    }
}

/// The five TextAttack-style edits, in a fixed order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TypoOp {
    /// Swap two neighbouring characters.
    Swap,
    /// Delete one character.
    Delete,
    /// Insert a random letter.
    Insert,
    /// Substitute a random letter.
    Substitute,
    /// Substitute a QWERTY neighbour.
    Qwerty,
}

const OPS: [TypoOp; 5] = [
    TypoOp::Swap,
    TypoOp::Delete,
    TypoOp::Insert,
    TypoOp::Substitute,
    TypoOp::Qwerty,
];

/// Minimum number of clusters of a word eligible for the `typo` generator.
pub(crate) const TYPO_MIN_WORD_LEN: usize = 3;

/// Apply one TextAttack-style typo; `None` when no word is eligible.
pub(crate) fn textattack_typo(rng: &mut NoiseRng, text: &str) -> Option<String> {
    let toks = tokens(text);
    let eligible: Vec<Range<usize>> = toks
        .iter()
        .filter(|t| t.has_core() && !is_stopword(t.core(text)))
        .map(|t| t.core.clone())
        .filter(|core| clusters(&text[core.clone()]).len() >= TYPO_MIN_WORD_LEN)
        .collect();
    let core = rng.choose(&eligible)?.clone();
    let word = &text[core.clone()];
    let first = rng.below(OPS.len());
    // The drawn edit, or the next one in the fixed order when the drawn one
    // cannot change this word (e.g. swapping in "aaa", QWERTY on "日本語").
    for step in 0..OPS.len() {
        let op = OPS[(first + step) % OPS.len()];
        if let Some(new_word) = edit_word(op, rng, word) {
            let mut e = [(core.clone(), new_word)];
            return Some(splice(text, &mut e));
        }
    }
    None
}

/// One edit of a word (as clusters); `None` when the edit cannot change it.
pub(crate) fn edit_word(op: TypoOp, rng: &mut NoiseRng, word: &str) -> Option<String> {
    let cl = clusters(word);
    let n = cl.len();
    let piece = |i: usize| &word[cl[i].clone()];
    let mut edit: (Range<usize>, String) = match op {
        TypoOp::Swap => {
            let pos: Vec<usize> = (0..n.saturating_sub(1))
                .filter(|&i| piece(i) != piece(i + 1))
                .collect();
            let &i = rng.choose(&pos)?;
            (
                cl[i].start..cl[i + 1].end,
                format!("{}{}", piece(i + 1), piece(i)),
            )
        }
        TypoOp::Delete => {
            if n == 0 {
                return None;
            }
            (cl[rng.below(n)].clone(), String::new())
        }
        TypoOp::Insert => {
            if n == 0 {
                return None;
            }
            let i = rng.below(n + 1);
            let at = if i == n { word.len() } else { cl[i].start };
            let like = base_char(word, &cl[i.min(n - 1)]);
            (at..at, any_letter(rng, like).to_string())
        }
        TypoOp::Substitute => {
            if n == 0 {
                return None;
            }
            let i = rng.below(n);
            let c = random_letter(rng, base_char(word, &cl[i]));
            (cl[i].clone(), c.to_string())
        }
        TypoOp::Qwerty => {
            let pos: Vec<usize> = (0..n)
                .filter(|&i| {
                    single_char(word, &cl[i]).is_some_and(|c| !keyboard_neighbours(c).is_empty())
                })
                .collect();
            let &i = rng.choose(&pos)?;
            let c = random_neighbour(rng, base_char(word, &cl[i]))?;
            (cl[i].clone(), c.to_string())
        }
    };
    let out = splice(word, std::slice::from_mut(&mut edit));
    (out != word).then_some(out)
}
