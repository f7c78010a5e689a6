//! Irregular verbs and the regular ending people put on them (`teached` for `taught`, `runned`
//! for `ran`, `buyed` for `bought`): learners and children write the rule where the language
//! keeps an exception, and no letter edit reaches the form they meant. A verb list with its past
//! forms (AGID's, by way of `scripts/setup`) says which verbs are irregular; the rule says what
//! the regular ending would have made of them.

use std::collections::{HashMap, HashSet};

/// A verb of a verb list: its lemma and its past and participle forms (either may be empty).
#[derive(Debug, Clone, Copy)]
pub struct Verb<'a> {
    pub lemma: &'a str,
    pub past: &'a [&'a str],
    pub participle: &'a [&'a str],
}

fn vowel(c: u8) -> bool {
    b"aeiou".contains(&c)
}

/// Ends in one vowel and one consonant after a consonant (`run`, `begin`), where English doubles
/// the consonant before an ending (`running`); not `w`, `x` or `y`, which never double.
fn doubles_last(l: &[u8]) -> bool {
    matches!(l, [.., a, b, c] if !vowel(*a) && vowel(*b) && !vowel(*c) && !b"wxy".contains(c))
}

/// Whether `form` is what the regular past ending makes of `lemma` by any spelling rule
/// (`walked`, `baked`, `stopped`, `travelled`, `tried`, `picnicked`): a verb with such a past is
/// no irregular one, whatever else it has (`dreamed` beside `dreamt`).
fn regular_past(lemma: &str, form: &str) -> bool {
    let Some(rest) = form.strip_prefix(lemma) else {
        // Only `-ied` drops a letter of the lemma.
        return lemma
            .strip_suffix('y')
            .is_some_and(|stem| form.strip_suffix("ied") == Some(stem));
    };
    let last = lemma.bytes().last();
    match rest.as_bytes() {
        b"ed" | b"ked" => true,
        b"d" => lemma.ends_with('e'),
        [c, b'e', b'd'] => Some(*c) == last,
        _ => false,
    }
}

/// What a writer who knows the rule but not the exception makes of `lemma`'s past: `-d` after
/// `e` (`maked`), `-ied` after a consonant's `y` (`flied`), the last consonant doubled after
/// one short vowel (`runned`), and undoubled too where the word has more than one syllable
/// (`forgeted`, `forgetted`); `-ed` otherwise (`teached`, `buyed`). Nothing for a verb of two
/// letters: four letters are a slip from too many words (`doed` is `does` a key away).
pub fn regular_endings(lemma: &str) -> Vec<String> {
    let l = lemma.as_bytes();
    if l.len() < 3 {
        return Vec::new();
    }
    if lemma.ends_with('e') {
        return vec![format!("{lemma}d")];
    }
    if let [.., c, b'y'] = l {
        if !vowel(*c) {
            return vec![format!("{}ied", &lemma[..lemma.len() - 1])];
        }
    }
    if doubles_last(l) {
        let doubled = format!("{lemma}{}ed", char::from(l[l.len() - 1]));
        let syllables = l
            .iter()
            .zip(l.iter().skip(1))
            .filter(|(a, b)| !vowel(**a) && vowel(**b))
            .count()
            + usize::from(vowel(l[0]));
        return if syllables > 1 {
            vec![doubled, format!("{lemma}ed")]
        } else {
            vec![doubled]
        };
    }
    vec![format!("{lemma}ed")]
}

/// The over-regularised strings of a verb list's irregular verbs, each with the forms meant (its
/// verb's past and participle forms: `eated` → `ate`, `eaten`). A string that is any verb's form
/// or lemma (`singed` is `singe`'s, `flied` is `fly`'s in baseball) is no slip and left out.
pub fn over_regularised<'a>(
    verbs: impl IntoIterator<Item = Verb<'a>> + Clone,
) -> HashMap<Box<str>, Vec<Box<str>>, foldhash::fast::FixedState> {
    let mut listed: HashSet<&str, foldhash::fast::FixedState> = HashSet::default();
    for v in verbs.clone() {
        listed.insert(v.lemma);
        listed.extend(v.past.iter().copied());
        listed.extend(v.participle.iter().copied());
    }
    let mut out: HashMap<Box<str>, Vec<Box<str>>, foldhash::fast::FixedState> = HashMap::default();
    for v in verbs {
        if v.past.is_empty() || v.past.iter().any(|f| regular_past(v.lemma, f)) {
            continue;
        }
        for typed in regular_endings(v.lemma) {
            if listed.contains(typed.as_str()) {
                continue;
            }
            let meant = out.entry(typed.into_boxed_str()).or_default();
            for form in v.past.iter().chain(v.participle) {
                if !meant.iter().any(|m| **m == **form) {
                    meant.push((*form).into());
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verbs(
        lines: &[(
            &'static str,
            &'static [&'static str],
            &'static [&'static str],
        )],
    ) -> Vec<Verb<'static>> {
        lines
            .iter()
            .map(|&(lemma, past, participle)| Verb {
                lemma,
                past,
                participle,
            })
            .collect()
    }

    #[test]
    fn the_regular_ending_follows_english_spelling() {
        assert_eq!(regular_endings("teach"), ["teached"]);
        assert_eq!(regular_endings("make"), ["maked"]);
        assert_eq!(regular_endings("buy"), ["buyed"]);
        assert_eq!(regular_endings("fly"), ["flied"]);
        assert_eq!(regular_endings("run"), ["runned"]);
        assert_eq!(regular_endings("forget"), ["forgetted", "forgeted"]);
        assert_eq!(regular_endings("know"), ["knowed"]);
        assert!(regular_endings("go").is_empty());
    }

    #[test]
    fn a_past_by_any_spelling_rule_is_regular() {
        for (lemma, past) in [
            ("walk", "walked"),
            ("bake", "baked"),
            ("stop", "stopped"),
            ("travel", "travelled"),
            ("try", "tried"),
            ("picnic", "picnicked"),
        ] {
            assert!(regular_past(lemma, past), "{lemma} {past}");
        }
        for (lemma, past) in [
            ("teach", "taught"),
            ("lay", "laid"),
            ("go", "went"),
            ("run", "ran"),
        ] {
            assert!(!regular_past(lemma, past), "{lemma} {past}");
        }
    }

    #[test]
    fn only_irregular_verbs_give_slips_and_no_listed_form_is_one() {
        let list = verbs(&[
            ("teach", &["taught"], &[]),
            ("eat", &["ate"], &["eaten"]),
            ("dream", &["dreamed", "dreamt"], &[]),
            ("walk", &["walked"], &[]),
            ("sing", &["sang"], &["sung"]),
            ("singe", &["singed"], &[]),
            ("fly", &["flew", "flied"], &["flown"]),
            ("trial", &["trialled"], &[]),
        ]);
        let slips = over_regularised(list.iter().copied());
        let meant = |s: &str| -> Vec<&str> {
            slips
                .get(s)
                .map(|v| v.iter().map(|m| &**m).collect())
                .unwrap_or_default()
        };
        assert_eq!(meant("teached"), ["taught"]);
        assert_eq!(meant("eated"), ["ate", "eaten"]);
        // A verb with a regular past, a listed form and a doubling rule are no slips.
        assert!(meant("dreamed").is_empty());
        assert!(meant("singed").is_empty());
        assert!(meant("flied").is_empty());
        assert!(meant("trialed").is_empty());
        assert_eq!(slips.len(), 2, "{slips:?}");
    }
}
