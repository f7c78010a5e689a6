//! Irregular verbs and the regular ending people put on them (`teached` for `taught`, `runned`
//! for `ran`, `buyed` for `bought`): learners and children write the rule where the language
//! keeps an exception, and no letter edit reaches the form they meant. A verb list with its past
//! forms (AGID's, by way of `scripts/setup`) says which verbs are irregular; the rule says what
//! the regular ending would have made of them. The same holds for nouns whose plural changes a
//! vowel or ends in `-ves` (`tooths` for `teeth`, `thiefs` for `thieves`).

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

/// A noun of a noun list: its singular and its plural forms.
#[derive(Debug, Clone, Copy)]
pub struct Noun<'a> {
    pub singular: &'a str,
    pub plural: &'a [&'a str],
}

/// Whether `form` is what the regular plural ending makes of `singular` (`cats`, `boxes`,
/// `cities`, `heroes`).
fn regular_plural(singular: &str, form: &str) -> bool {
    match form.strip_prefix(singular) {
        Some("s" | "es") => true,
        Some(_) => false,
        None => singular
            .strip_suffix('y')
            .is_some_and(|stem| form.strip_suffix("ies") == Some(stem)),
    }
}

/// Whether `plural` is one of the plurals English makes by its own old rules, which people
/// regularise: a vowel changed (`tooth` → `teeth`, `mouse` → `mice`) or `-fe` or `-f` as `-ves`
/// (`life` → `lives`, `thief` → `thieves`). Not `-man` → `-men` nor `-ren`: such strings are
/// surnames and possessives without the apostrophe (`chapmans`, `fishermans wharf`, `childs
/// pose`);
/// not the Latin and Greek plurals (`costae`, `criteria`), whose singulars are names as often;
/// not a plural that is its singular (`sheep`: AGID lists `young`, `selling` so).
fn old_english_plural(singular: &str, plural: &str) -> bool {
    let vowel_changed = [("oo", "ee"), ("ouse", "ice")].iter().any(|(from, to)| {
        singular.rfind(from).is_some_and(|at| {
            plural.len() + from.len() == singular.len() + to.len()
                && plural.starts_with(&singular[..at])
                && plural[at..].starts_with(to)
                && plural.ends_with(&singular[at + from.len()..])
        })
    });
    // `-f` turns to `-ves` after `l`, `r` or two vowels (`wolf`, `scarf`, `thief`, `loaf`), not
    // after one (AGID's `gif` → `gives`: `gifs` are images).
    let ves = plural.strip_suffix("ves").is_some_and(|stem| {
        singular.strip_suffix("fe") == Some(stem)
            || (singular.strip_suffix('f') == Some(stem)
                && match stem.as_bytes() {
                    [.., b'l' | b'r'] => true,
                    [.., a, b] => vowel(*a) && vowel(*b),
                    _ => false,
                })
    });
    vowel_changed || ves
}

/// What a writer who knows the rule but not the exception makes of `singular`'s plural: `-es`
/// after `s`, `x`, `z`, `ch`, `sh`, `-ies` after a consonant's `y`, `-s` otherwise (`tooths`,
/// `thiefs`, `lifes`). Nothing for a noun of two letters.
pub fn regular_plural_ending(singular: &str) -> Option<String> {
    let l = singular.as_bytes();
    if l.len() < 3 {
        return None;
    }
    if ["s", "x", "z", "ch", "sh"]
        .iter()
        .any(|e| singular.ends_with(e))
    {
        return Some(format!("{singular}es"));
    }
    if let [.., c, b'y'] = l {
        if !vowel(*c) {
            return Some(format!("{}ies", &singular[..singular.len() - 1]));
        }
    }
    Some(format!("{singular}s"))
}

/// The over-regularised plurals of a noun list's nouns with old English plurals (see
/// [`old_english_plural`]), each with the plurals meant (`tooths` → `teeth`). A string that is
/// any noun's singular or plural is no slip and left out.
pub fn over_regularised_plurals<'a>(
    nouns: impl IntoIterator<Item = Noun<'a>> + Clone,
) -> HashMap<Box<str>, Vec<Box<str>>, foldhash::fast::FixedState> {
    let mut listed: HashSet<&str, foldhash::fast::FixedState> = HashSet::default();
    for n in nouns.clone() {
        listed.insert(n.singular);
        listed.extend(n.plural.iter().copied());
    }
    let mut out: HashMap<Box<str>, Vec<Box<str>>, foldhash::fast::FixedState> = HashMap::default();
    for n in nouns {
        if n.plural.is_empty()
            || n.plural.iter().any(|f| regular_plural(n.singular, f))
            || !n.plural.iter().all(|f| old_english_plural(n.singular, f))
        {
            continue;
        }
        let Some(typed) = regular_plural_ending(n.singular) else {
            continue;
        };
        if listed.contains(typed.as_str()) {
            continue;
        }
        let meant = out.entry(typed.into_boxed_str()).or_default();
        for form in n.plural {
            if !meant.iter().any(|m| **m == **form) {
                meant.push((*form).into());
            }
        }
    }
    out
}

/// The endings after which English writes a word's `-s` as `-es` (`fixes`, `teaches`, `wishes`,
/// `buzzes`, `potatoes`). Not after one `s` or `z`, whose `-s` strings are words and names of
/// their own as often (`buss`, `gass`).
const ES_AFTER: [&str; 5] = ["x", "ch", "sh", "zz", "o"];

/// The `-s` ending written where English spells it `-es` (`fixs`, `teachs`, `boxs`, `potatos`):
/// for each word of `words` that is another of its words, of three letters or more, with `-es`
/// after one of [`ES_AFTER`], the string with `-s` alone and the word meant — where `is_word`
/// does not hold that string (`stomachs`, `pianos` and `echos` are spelt so). Learners and
/// children write the rule's letter without its spelling, as they do the past of an
/// irregular verb.
pub fn es_written_as_s<'a>(
    words: impl IntoIterator<Item = &'a str>,
    is_word: impl Fn(&str) -> bool,
) -> Vec<(String, &'a str)> {
    words
        .into_iter()
        .filter_map(|meant| {
            let stem = meant.strip_suffix("es")?;
            (stem.len() >= 3 && ES_AFTER.iter().any(|e| stem.ends_with(e)) && is_word(stem))
                .then(|| format!("{stem}s"))
                .filter(|typed| !is_word(typed))
                .map(|typed| (typed, meant))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The forms a slip map gives for `typed` (none when it holds no such slip).
    fn forms_meant<'a>(
        slips: &'a HashMap<Box<str>, Vec<Box<str>>, foldhash::fast::FixedState>,
        typed: &str,
    ) -> Vec<&'a str> {
        slips
            .get(typed)
            .map(|v| v.iter().map(|m| &**m).collect())
            .unwrap_or_default()
    }

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
        let meant = |s: &str| forms_meant(&slips, s);
        assert_eq!(meant("teached"), ["taught"]);
        assert_eq!(meant("eated"), ["ate", "eaten"]);
        // A verb with a regular past, a listed form and a doubling rule are no slips.
        assert!(meant("dreamed").is_empty());
        assert!(meant("singed").is_empty());
        assert!(meant("flied").is_empty());
        assert!(meant("trialed").is_empty());
        assert_eq!(slips.len(), 2, "{slips:?}");
    }

    #[test]
    fn only_old_english_plurals_give_slips() {
        let list: Vec<Noun<'static>> = [
            ("tooth", &["teeth"][..]),
            ("mouse", &["mice"][..]),
            ("child", &["children"][..]),
            ("thief", &["thieves"][..]),
            ("life", &["lives"][..]),
            ("leaf", &["leaves", "leafs"][..]),
            ("fisherman", &["fishermen"][..]),
            ("costa", &["costae"][..]),
            ("sheep", &["sheep"][..]),
            ("cat", &["cats"][..]),
            ("box", &["boxes"][..]),
            ("city", &["cities"][..]),
            ("ox", &["oxen"][..]),
            ("goose", &["geese"][..]),
            ("gif", &["gives"][..]),
            ("gooses", &["goosess"][..]),
        ]
        .into_iter()
        .map(|(singular, plural)| Noun { singular, plural })
        .collect();
        let slips = over_regularised_plurals(list.iter().copied());
        let meant = |s: &str| forms_meant(&slips, s);
        assert_eq!(meant("tooths"), ["teeth"]);
        assert_eq!(meant("mouses"), ["mice"]);
        assert_eq!(meant("thiefs"), ["thieves"]);
        assert_eq!(meant("lifes"), ["lives"]);
        // A regular plural beside the old one, `-men`, `-ren`, Latin, zero plurals, two
        // letters, one vowel before `f`, a listed string: no slips.
        assert_eq!(slips.len(), 4, "{slips:?}");
        assert_eq!(regular_plural_ending("box").as_deref(), Some("boxes"));
        assert_eq!(regular_plural_ending("city").as_deref(), Some("cities"));
        assert_eq!(regular_plural_ending("ox"), None);
    }

    #[test]
    fn an_es_ending_written_as_s_is_a_slip_where_the_string_is_no_word() {
        let words = [
            "fix",
            "fixes",
            "teach",
            "teaches",
            "wish",
            "wishes",
            "buzz",
            "buzzes",
            "potato",
            "potatoes",
            "stomach",
            "stomachs",
            "stomaches",
            "piano",
            "pianos",
            "bus",
            "buses",
            "quiz",
            "quizes",
            "do",
            "does",
            "shoe",
            "shoes",
            "echo",
            "echoes",
            "echos",
        ];
        let is_word = |w: &str| words.contains(&w);
        let mut slips = es_written_as_s(words, is_word);
        slips.sort();
        let slips: Vec<(&str, &str)> = slips.iter().map(|(t, m)| (t.as_str(), *m)).collect();
        assert_eq!(
            slips,
            [
                ("buzzs", "buzzes"),
                ("fixs", "fixes"),
                ("potatos", "potatoes"),
                ("teachs", "teaches"),
                ("wishs", "wishes"),
            ]
        );
    }
}
