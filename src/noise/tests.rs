//! Tests of the public noise API.

use super::rng::NoiseRng;
use super::text::clusters;
use super::typo::{pick_side, Side};
use super::*;

const Q: &str = "What is the definition of anthropological environment?";

/// Installs the test's misspelling list and real-word neighbours, once per process.
fn human_lists() {
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| {
        human::install_misspellings(human::Misspellings::from_entries([
            ("definition", &["defenition", "definitoin"][..]),
            ("quick", &["quik"][..]),
            ("population", &["populaton"][..]),
        ]));
        // Stand-in neighbours: the plural, for any word of four letters or more.
        human::install_real_words(Box::new(|w: &str| {
            if w.len() >= 4 && !w.ends_with('s') {
                vec![format!("{w}s")]
            } else {
                Vec::new()
            }
        }));
    });
}

fn run(kind: NoiseKind, seed: u64, qid: &str, variant: u32, text: &str) -> NoiseOutcome {
    human_lists();
    match apply(kind, seed, qid, variant, text) {
        Ok(o) => o,
        Err(e) => panic!("{kind}: {e}"),
    }
}

/// The shared WordNet database; the test fails (not skips) without it.
fn wordnet() -> &'static WordNet {
    WordNet::global().unwrap_or_else(|e| {
        panic!("WordNet tests need the database: `apt-get install wordnet-base` ({e})")
    })
}

// ---------------------------------------------------------------- kinds

#[test]
fn kind_names_round_trip() {
    for k in NoiseKind::ALL {
        assert_eq!(k.as_str().parse::<NoiseKind>(), Ok(k));
        assert_eq!(k.to_string(), k.as_str());
        assert_eq!(
            format!(" {} ", k.as_str().to_uppercase()).parse::<NoiseKind>(),
            Ok(k)
        );
    }
    assert!("typos".parse::<NoiseKind>().is_err());
}

#[test]
fn parse_kind_lists() {
    use NoiseKind::*;
    assert_eq!(parse_kinds("typos"), Ok(vec![Cd, Rcs, Kcs]));
    assert_eq!(
        parse_kinds("reorder, typos,cd ,,synonym"),
        Ok(vec![Reorder, Cd, Rcs, Kcs, Synonym])
    );
    assert_eq!(parse_kinds("typo"), Ok(vec![Typo]));
    assert_eq!(parse_kinds(" , "), Err(NoiseError::EmptyKindList));
    let err = parse_kinds("cd,typoz").unwrap_err();
    assert_eq!(
        err,
        NoiseError::UnknownKind {
            name: "typoz".into()
        }
    );
    let msg = err.to_string();
    assert!(msg.contains("`typoz`"), "{msg}");
    for k in NoiseKind::ALL {
        assert!(msg.contains(k.as_str()), "{msg}");
    }
    assert!(msg.contains("typos (= cd,rcs,kcs)"), "{msg}");
}

#[test]
fn serde_names_match_cli_names() {
    for k in NoiseKind::ALL {
        let json = serde_json::to_string(&k).unwrap();
        assert_eq!(json, format!("\"{}\"", k.as_str()));
        assert_eq!(serde_json::from_str::<NoiseKind>(&json).unwrap(), k);
    }
}

// ------------------------------------------------ what each kind does

#[test]
fn misspell_and_realword_draw_from_what_is_installed() {
    let q = "what is the definition of population growth";
    let mut seen = std::collections::BTreeSet::new();
    for v in 0..40 {
        let o = run(NoiseKind::Misspell, 3, "q", v, q);
        assert!(o.applied, "{:?}", o.text);
        let changed: Vec<&str> = o
            .text
            .split(' ')
            .filter(|w| !q.split(' ').any(|x| x == *w))
            .collect();
        assert_eq!(changed.len(), 1, "{:?}", o.text);
        assert!(
            ["defenition", "definitoin", "populaton"].contains(&changed[0]),
            "{:?}",
            o.text
        );
        seen.insert(changed[0].to_string());
    }
    assert_eq!(seen.len(), 3, "every listed misspelling is drawn: {seen:?}");
    assert!(!run(NoiseKind::Misspell, 3, "q", 0, "nothing listed here").applied);
    let o = run(NoiseKind::Realword, 3, "q", 0, "causes of anemia");
    // `causes` has no stand-in neighbour (it ends in `s`), `of` is a stopword.
    assert_eq!(o.text, "causes of anemias");
    assert_eq!(run(NoiseKind::Realword, 3, "q", 0, "of the").text, "of the");
    assert!(NoiseKind::Misspell.not_for_training().is_some());
    assert!(NoiseKind::Realword.not_for_training().is_some());
    assert!(NoiseKind::Typo.not_for_training().is_none());
}

#[test]
fn cd_deletes_one_character() {
    let o = run(NoiseKind::Cd, 42, "19335", 0, Q);
    assert_eq!(
        o.text,
        "What is the definition of anthropological nvironment?"
    );
    assert!(o.applied);
}

#[test]
fn rcs_inserts_or_replaces_a_random_letter() {
    let o = run(NoiseKind::Rcs, 42, "19335", 0, Q);
    assert_eq!(
        o.text,
        "What is the detfinition of anthropological environment?"
    );
    assert!(o.applied);
}

#[test]
fn kcs_uses_a_keyboard_neighbour() {
    // t -> f: f is next to t on QWERTY.
    let o = run(NoiseKind::Kcs, 42, "19335", 0, Q);
    assert_eq!(
        o.text,
        "What is the definifion of anthropological environment?"
    );
    assert!(o.applied);
}

#[test]
fn typo_edits_one_content_word() {
    let o = run(NoiseKind::Typo, 42, "19335", 0, Q);
    assert_eq!(
        o.text,
        "What is the definition of anthropological environmlnt?"
    );
    assert!(o.applied);
}

#[test]
fn reorder_swaps_two_words_keeping_punctuation() {
    let o = run(NoiseKind::Reorder, 42, "19335", 0, Q);
    assert_eq!(
        o.text,
        "What environment the definition of anthropological is?"
    );
    assert!(o.applied);
}

#[test]
fn determiner_inserts_an_article() {
    let o = run(NoiseKind::Determiner, 42, "19335", 0, Q);
    assert_eq!(
        o.text,
        "What is the definition of the anthropological environment?"
    );
    assert!(o.applied);
    // "an" before a vowel, capitalised at the start of a capitalised query.
    let outs: Vec<String> = (0..40)
        .map(|v| run(NoiseKind::Determiner, 1, "q", v, "Apple pie").text)
        .collect();
    assert!(outs.contains(&"An Apple pie".to_owned()), "{outs:?}");
    assert!(outs.contains(&"Apple a pie".to_owned()), "{outs:?}");
    assert!(!outs
        .iter()
        .any(|o| o.contains("a Apple") || o.contains("an pie")));
}

#[test]
fn stopwords_removes_function_words() {
    let o = run(NoiseKind::Stopwords, 42, "19335", 0, Q);
    assert_eq!(o.text, "definition anthropological environment?");
    assert!(o.applied);
    // Whitespace around kept words is preserved.
    let o = run(
        NoiseKind::Stopwords,
        0,
        "q",
        0,
        "  the cat\tsat on the mat ",
    );
    assert_eq!(o.text, "  cat\tsat mat ");
}

#[test]
fn stem_applies_porter2_to_every_word() {
    let o = run(NoiseKind::Stem, 42, "19335", 0, Q);
    assert_eq!(o.text, "What is the definit of anthropolog environ?");
    assert!(o.applied);
    assert_eq!(
        run(NoiseKind::Stem, 0, "q", 0, "Running DOGS").text,
        "Run DOG"
    );
}

#[test]
fn punct_appends_a_mark() {
    let o = run(NoiseKind::Punct, 42, "19335", 0, Q);
    assert_eq!(
        o.text,
        "What. is the definition of anthropological environment?"
    );
    assert!(o.applied);
}

#[test]
fn lemma_uses_wordnet_morphology() {
    wordnet();
    let o = run(NoiseKind::Lemma, 42, "q", 0, "running dogs were eaten");
    assert_eq!(o.text, "run dog be eat");
    assert!(o.applied);
    let o = run(NoiseKind::Lemma, 42, "19335", 0, Q);
    assert_eq!(
        o.text,
        "What be the definition of anthropological environment?"
    );
    // Irregular plurals, capitalisation kept, lemmas kept as they are.
    assert_eq!(
        run(NoiseKind::Lemma, 0, "q", 0, "Geese and news").text,
        "Goose and news"
    );
}

#[test]
fn synonym_replaces_one_word_from_wordnet() {
    wordnet();
    let o = run(NoiseKind::Synonym, 42, "19335", 0, Q);
    assert_eq!(
        o.text,
        "What is the definition of anthropological surroundings?"
    );
    assert!(o.applied);
    let o = run(NoiseKind::Synonym, 42, "q2", 0, "running dogs were eaten");
    assert_eq!(o.text, "running canis familiaris were eaten");
}

#[test]
fn wordnet_reader_basics() {
    let wn = wordnet();
    assert!(wn.contains(wordnet::Pos::Noun, "dog"));
    assert_eq!(wn.lemma("geese").as_deref(), Some("goose"));
    assert_eq!(wn.lemma("churches").as_deref(), Some("church"));
    assert_eq!(wn.lemma("gas"), None);
    let syn = wn.synonyms("car");
    assert!(syn.contains(&"automobile".to_owned()), "{syn:?}");
    assert!(!syn.contains(&"car".to_owned()));
    assert!(wn.synonyms("xyzzyq").is_empty());
    // A wrong offset gives nothing rather than garbage.
    assert!(wn.synset_words(wordnet::Pos::Noun, 3).is_empty());
    assert!(wn.synset_words(wordnet::Pos::Noun, u32::MAX).is_empty());
}

#[test]
fn wordnet_missing_is_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("capot-no-wordnet-{}", std::process::id()));
    let err = WordNet::load(&dir).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("apt-get install wordnet-base"), "{msg}");
    assert!(msg.contains("CAPOT_WORDNET_DIR"), "{msg}");
    assert!(matches!(err, NoiseError::WordNetUnavailable { .. }));
}

#[test]
fn wordnet_malformed_files_are_skipped() {
    let dir = std::env::temp_dir().join(format!("capot-bad-wordnet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let data = "00000000 00 n 02 hound 0 dog 0 000 | a dog\ngarbage line\n";
    let offset_of_bad = data.find("garbage").unwrap();
    for pos in ["noun", "verb", "adj", "adv"] {
        let index = format!(
            "  1 license line\nhound n 1 0 1 0 00000000\nbroken n x\ndog n 2 0 2 0 00000000 {offset_of_bad:08}\n\u{FFFF}\n"
        );
        std::fs::write(dir.join(format!("index.{pos}")), index).unwrap();
        std::fs::write(dir.join(format!("data.{pos}")), data).unwrap();
        std::fs::write(
            dir.join(format!("{pos}.exc")),
            "hounds\nhounds hound extra\n\n",
        )
        .unwrap();
    }
    let wn = WordNet::load(&dir).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert!(wn.contains(wordnet::Pos::Noun, "hound"));
    assert!(!wn.contains(wordnet::Pos::Noun, "broken"));
    assert_eq!(wn.synonyms("dog"), vec!["hound".to_owned()]);
    assert_eq!(wn.lemma("hounds").as_deref(), Some("hound"));
    assert_eq!(wn.lemma("dogs").as_deref(), Some("dog"));
}

// ------------------------------------------------------- applied flag

#[test]
fn unchanged_queries_are_reported_not_applied() {
    wordnet();
    let cases: &[(NoiseKind, &str)] = &[
        (NoiseKind::Stopwords, "anthropological environment"),
        (NoiseKind::Stopwords, "what is the"), // only stop words: kept
        (NoiseKind::Typo, "what is it to be or not"), // no eligible word
        (NoiseKind::Typo, "ab cd ef"),
        (NoiseKind::Cd, "?! -- ..."),
        (NoiseKind::Kcs, "日本語 éé"),
        (NoiseKind::Reorder, "dog dog dog"),
        (NoiseKind::Reorder, "single"),
        (NoiseKind::Determiner, "the"),
        (NoiseKind::Stem, "run dog"),
        (NoiseKind::Lemma, "dog and cat"),
        (NoiseKind::Synonym, "xyzzyq plughq"),
        (NoiseKind::Punct, "   "),
    ];
    for &(kind, text) in cases {
        for v in 0..20 {
            let o = run(kind, 5, "q", v, text);
            assert!(!o.applied, "{kind} {text:?} -> {:?}", o.text);
            assert_eq!(o.text, text, "{kind}");
        }
    }
    for kind in NoiseKind::ALL {
        for text in ["", " ", "\n\t "] {
            let o = run(kind, 1, "q", 0, text);
            assert!(!o.applied && o.text == text, "{kind} on {text:?}");
        }
    }
}

#[test]
fn identical_output_is_not_applied() {
    assert!(!NoiseOutcome::new("abc", Some("abc".into())).applied);
    assert!(!NoiseOutcome::new("abc", None).applied);
    let o = NoiseOutcome::new("abc", Some("abd".into()));
    assert!(o.applied && o.text == "abd");
}

#[test]
fn applied_iff_text_changed_for_every_kind() {
    wordnet();
    let texts = [
        "aaa bbb",
        "ll",
        "a",
        "Hello world",
        "ooo ooo",
        "the the",
        "x",
    ];
    for kind in NoiseKind::ALL {
        for text in texts {
            for v in 0..50 {
                let o = run(kind, 9, "q", v, text);
                assert_eq!(o.applied, o.text != text, "{kind} {text:?} -> {:?}", o.text);
            }
        }
    }
    // A word whose only edit of the drawn kind would be a no-op still gets a
    // typo (swapping in "aaa" is impossible, another edit is used).
    assert!((0..20).all(|v| run(NoiseKind::Typo, 3, "q", v, "aaa").applied));
}

// --------------------------------------------------------- determinism

fn sample_queries() -> Vec<(String, String)> {
    const WORDS: [&str; 24] = [
        "causes",
        "definition",
        "ventricular",
        "hypertrophy",
        "salvation",
        "army",
        "bluetooth",
        "wireless",
        "jamaica",
        "population",
        "prescribed",
        "medicine",
        "contour",
        "plowing",
        "durable",
        "goods",
        "mechanical",
        "ventilation",
        "switzerland",
        "food",
        "cheeseburger",
        "calories",
        "military",
        "history",
    ];
    const STARTS: [&str; 5] = ["what is", "how do", "why are the", "where is a", "who made"];
    (0..50)
        .map(|i| {
            let w = |k: usize| WORDS[(i * 7 + k * 5) % WORDS.len()];
            let text = format!("{} {} of {} {}", STARTS[i % STARTS.len()], w(0), w(1), w(2));
            (format!("q{i}"), text)
        })
        .collect()
}

#[test]
fn deterministic_for_same_inputs() {
    wordnet();
    for kind in NoiseKind::ALL {
        for (qid, text) in sample_queries() {
            let a = run(kind, 123, &qid, 4, &text);
            let b = run(kind, 123, &qid, 4, &text);
            assert_eq!(a, b, "{kind}");
        }
    }
}

#[test]
fn variants_and_seeds_differ() {
    wordnet();
    let qs = sample_queries();
    // The list-driven kinds apply only where a listed word is (tested below).
    let generators = NoiseKind::ALL
        .into_iter()
        .filter(|k| k.is_random() && !k.needs_misspellings() && !k.needs_lexicon());
    for kind in generators {
        let (mut applied, mut by_variant, mut by_seed) = (0, 0, 0);
        for (qid, text) in &qs {
            let base = run(kind, 1, qid, 0, text);
            if kind == NoiseKind::Synonym && !base.applied {
                continue; // some sample queries have no word with a synonym
            }
            assert!(base.applied, "{kind} {text:?}");
            applied += 1;
            by_variant += usize::from(run(kind, 1, qid, 1, text).text != base.text);
            by_seed += usize::from(run(kind, 2, qid, 0, text).text != base.text);
        }
        // Synonyms have few possible outcomes (often one word, two or three
        // synonyms); the other kinds have many.
        let need = if kind == NoiseKind::Synonym {
            applied / 2
        } else {
            applied * 7 / 10
        };
        assert!(applied >= 40, "{kind}: applied to only {applied}/50");
        assert!(
            by_variant >= need,
            "{kind}: only {by_variant}/{applied} variants differ"
        );
        assert!(
            by_seed >= need,
            "{kind}: only {by_seed}/{applied} seeds differ"
        );
    }
    // The deterministic transforms give the same text for every seed.
    for kind in NoiseKind::ALL.into_iter().filter(|k| !k.is_random()) {
        for (qid, text) in &qs {
            assert_eq!(
                run(kind, 1, qid, 0, text),
                run(kind, 2, qid, 7, text),
                "{kind}"
            );
        }
    }
}

#[test]
fn golden_rng_stream_is_stable() {
    // Guards against accidental changes to seeding: these values must never
    // change, or every stored noisy query set silently changes.
    let mut r = NoiseRng::for_query(42, "cd", "19335", 0);
    let got: Vec<usize> = (0..6).map(|_| r.below(1000)).collect();
    let again: Vec<usize> = {
        let mut r = NoiseRng::for_query(42, "cd", "19335", 0);
        (0..6).map(|_| r.below(1000)).collect()
    };
    assert_eq!(got, again);
    assert_eq!(got, GOLDEN_STREAM.to_vec());
}

const GOLDEN_STREAM: [usize; 6] = [768, 665, 466, 213, 622, 475];

// ------------------------------------------------------ position rule

#[test]
fn capot_position_rule_is_uniform_over_left_at_right() {
    let mut counts = [0usize; 3];
    let n = 30_000;
    for seed in 0..n {
        let mut rng = NoiseRng::for_query(seed, "rcs", "q", 0);
        let _index = rng.below(10);
        let side = pick_side(&mut rng);
        counts[match side {
            Side::Left => 0,
            Side::At => 1,
            Side::Right => 2,
        }] += 1;
    }
    for c in counts {
        let share = c as f64 / n as f64;
        assert!((0.31..0.357).contains(&share), "{counts:?}");
    }
}

#[test]
fn capot_insert_replace_split_follows_position_rule() {
    // rcs/kcs: left and right insert (text grows), at replaces: 2/3 vs 1/3.
    for kind in [NoiseKind::Rcs, NoiseKind::Kcs] {
        let n = 3000;
        let mut inserts = 0;
        for seed in 0..n {
            let o = run(kind, seed, "q", 0, "qwertyuiop asdfghjkl");
            assert!(o.applied);
            if o.text.len() == 21 {
                inserts += 1;
            } else {
                assert_eq!(o.text.len(), 20);
            }
        }
        let share = inserts as f64 / n as f64;
        assert!((0.62..0.71).contains(&share), "{kind}: {share}");
    }
    // cd always deletes exactly one character inside a word.
    for seed in 0..500 {
        let o = run(NoiseKind::Cd, seed, "q", 0, "abc defg");
        assert_eq!(o.text.chars().count(), 7);
        assert_eq!(o.text.matches(' ').count(), 1);
    }
}

#[test]
fn keyboard_replacements_keep_case() {
    for seed in 0..300 {
        let o = run(NoiseKind::Kcs, seed, "q", 0, "QWERTY");
        assert!(o.applied);
        assert!(
            o.text
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()),
            "{}",
            o.text
        );
    }
}

// ---------------------------------------------------- TextAttack typo

/// The single edit that turns `a` into `b`, if there is one.
fn edit_kind(a: &str, b: &str) -> Option<&'static str> {
    let x: Vec<char> = a.chars().collect();
    let y: Vec<char> = b.chars().collect();
    if x.len() == y.len() {
        let d: Vec<usize> = (0..x.len()).filter(|&i| x[i] != y[i]).collect();
        return match d.as_slice() {
            [_] => Some("substitute"),
            [i, j] if *j == i + 1 && x[*i] == y[*j] && x[*j] == y[*i] => Some("swap"),
            _ => None,
        };
    }
    let (long, short, name) = if x.len() > y.len() {
        (&x, &y, "delete")
    } else {
        (&y, &x, "insert")
    };
    if long.len() != short.len() + 1 {
        return None;
    }
    (0..long.len())
        .any(|i| {
            let mut z = long.clone();
            z.remove(i);
            z == *short
        })
        .then_some(name)
}

#[test]
fn typo_changes_one_eligible_word_by_one_edit() {
    let mut kinds = std::collections::BTreeMap::new();
    for (qid, text) in sample_queries() {
        for v in 0..40 {
            let o = run(NoiseKind::Typo, 11, &qid, v, &text);
            let a: Vec<&str> = text.split_whitespace().collect();
            let b: Vec<&str> = o.text.split_whitespace().collect();
            assert_eq!(a.len(), b.len());
            let changed: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
            assert_eq!(changed.len(), 1, "{text:?} -> {:?}", o.text);
            let (w, n) = (a[changed[0]], b[changed[0]]);
            assert!(w.chars().count() >= 3 && !is_stopword(w), "{w}");
            let k = edit_kind(w, n).unwrap_or_else(|| panic!("{w} -> {n}"));
            *kinds.entry(k).or_insert(0usize) += 1;
        }
    }
    // All four edit shapes occur, substitutions (random + QWERTY) most.
    assert_eq!(kinds.len(), 4, "{kinds:?}");
    assert!(kinds["substitute"] > kinds["swap"], "{kinds:?}");
}

// ----------------------------------------------------- Unicode safety

#[test]
fn unicode_inputs_never_break_characters() {
    wordnet();
    let family = "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}";
    let texts = [
        "café crème brûlée".to_owned(),
        "Straße größer Fuß".to_owned(),
        "日本語 の テキスト 検索".to_owned(),
        format!("family {family} photo 👍🏽 ok"),
        "cafe\u{301} re\u{301}sume\u{301} nai\u{308}ve".to_owned(),
        "Ελληνικά κείμενα και ρήματα".to_owned(),
        "mixed 日本 running dogs é ß 🇯🇵".to_owned(),
        "\u{301}\u{200D} leading marks".to_owned(),
        "ééé ßßß 語語語".to_owned(),
    ];
    for kind in NoiseKind::ALL {
        for text in &texts {
            let input: Vec<&str> = clusters(text).into_iter().map(|r| &text[r]).collect();
            for seed in 0..60 {
                let o = run(kind, seed, "u", seed as u32 % 3, text);
                assert_eq!(o.applied, o.text != *text);
                assert!(!o.text.contains('\u{FFFD}'), "{kind}: {:?}", o.text);
                // Generators only add ASCII, so every non-ASCII cluster of the
                // output must be a whole cluster of the input.
                for r in clusters(&o.text) {
                    // An inserted ASCII char may take an orphan combining
                    // mark of the input as its own: compare without it.
                    let c = o.text[r].trim_start_matches(|ch: char| ch.is_ascii_whitespace());
                    assert!(
                        c.is_ascii() || input.contains(&c),
                        "{kind} seed {seed}: fragment {c:?} in {:?}",
                        o.text
                    );
                }
            }
        }
    }
}

#[test]
fn very_long_input_is_fine() {
    wordnet();
    let long = "the quick brown fox jumps over the lazy dog é 日本 ".repeat(5_000);
    for kind in NoiseKind::ALL {
        let o = run(kind, 1, "long", 0, &long);
        assert!(o.applied, "{kind}");
        assert!(o.text.len() > long.len() / 2);
    }
    let one_word = "a".repeat(100_000);
    for kind in NoiseKind::ALL {
        let o = run(kind, 1, "long", 0, &one_word);
        assert_eq!(o.applied, o.text != one_word);
    }
}
