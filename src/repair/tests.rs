use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::index::vocab::Vocabulary;

const DOCS: &[&str] = &[
    "Symptoms of vitamin deficiency include fatigue and weak bones.",
    "Vitamin deficiency symptoms: fatigue, bone pain, muscle weakness.",
    "The capital of France is Paris, a city on the Seine.",
    "Paris is the capital and largest city of France.",
    "Amoxicillin is an antibiotic that treats bacterial infections.",
    "How long amoxicillin takes to work against infections depends on the dose.",
    "Hypertrophy of the left ventricle: the heart muscle thickens.",
    "Left ventricular hypertrophy makes the heart muscle of the ventricle thicker.",
];

fn repairer(lexicon: Option<&[&str]>) -> Repairer {
    let vocab = Vocabulary::build(DOCS.iter().map(|t| ("", *t)));
    Repairer::new(
        Arc::new(vocab),
        lexicon.map(|w| Arc::new(Lexicon::from_words(w.iter().copied()))),
    )
}

#[test]
fn a_typo_of_a_corpus_word_in_context_is_corrected() {
    let r = repairer(Some(&["tablet"]));
    let out = r.repair("sympotms of vitamin deficiency");
    assert_eq!(out.text, "symptoms of vitamin deficiency");
    assert_eq!(out.edits.len(), 1);
    let e = &out.edits[0];
    assert_eq!(
        (e.from.as_str(), e.to.as_str(), e.start, e.distance),
        ("sympotms", "symptoms", 0, 1)
    );
    assert!(e.confidence > 0.0 && e.confidence <= 1.0);
    // Two edits from eight letters on; case and punctuation are kept.
    let out = r.repair("Amoxcilin, how long to work?");
    assert_eq!(out.text, "Amoxicillin, how long to work?");
    assert_eq!(out.edits[0].distance, 2);
}

#[test]
fn corrections_need_context_from_the_same_query() {
    let r = repairer(None);
    // A lone word has no context: left alone.
    assert!(!r.repair("sympotms").changed());
    // Context from another topic of the corpus does not support it.
    assert!(!r.repair("sympotms paris").changed());
    assert!(r.repair("sympotms fatigue").changed());
}

#[test]
fn known_short_coded_and_capitalised_words_are_left_alone() {
    let r = repairer(Some(&["deen"]));
    for q in [
        "paula deen vitamin deficiency", // in the lexicon
        "vitamin deficiency nyu",        // three letters
        "VITAMN deficiency",             // capitals: an acronym as typed
        "vitamn2 deficiency",            // digits: a code
        "https://vitamn.example/deficiency",
        "vitamn@example.org deficiency",
        "eVitamn deficiency", // mixed case: a brand
        "витамин deficiency", // another script
        "vitamin deficiency 🙂",
        "",
        "   ",
    ] {
        let out = r.repair(q);
        assert_eq!(out.text, q, "{q:?} changed: {:?}", out.edits);
        assert!(!out.changed());
    }
}

#[test]
fn a_rare_corpus_word_is_no_target() {
    // "seine" occurs once: below MIN_CANDIDATE_COUNT.
    let r = repairer(None);
    assert!(!r.repair("sein paris capital").changed());
}

#[test]
fn several_words_are_corrected_and_a_second_pass_changes_nothing() {
    let r = repairer(None);
    let out = r.repair("hypertrohpy ventricel heart");
    assert_eq!(out.text, "hypertrophy ventricle heart");
    assert_eq!(
        r.repair(&out.text),
        Repaired {
            text: out.text.clone(),
            edits: vec![]
        }
    );
}

#[test]
fn the_unknown_word_signal_marks_noisy_queries() {
    let r = repairer(Some(&["of"]));
    assert!(r.has_unknown_word("sympotms of vitamin deficiency"));
    assert!(!r.has_unknown_word("symptoms of vitamin deficiency"));
    assert!(!r.has_unknown_word("NYU 2024"));
}

#[test]
fn each_mode_picks_its_repairer() {
    let with = Arc::new(repairer(Some(&["the"])));
    let without = Arc::new(repairer(None));
    assert!(RepairMode::Off.repairer(Some(&with)).unwrap().is_none());
    assert!(RepairMode::On.repairer(Some(&without)).unwrap().is_some());
    assert!(RepairMode::On.repairer(None).is_err());
    assert!(RepairMode::Auto.repairer(Some(&with)).unwrap().is_some());
    assert!(RepairMode::Auto.repairer(Some(&without)).unwrap().is_none());
    assert!(RepairMode::Auto.repairer(None).unwrap().is_none());
}

#[test]
fn modes_and_fusions_parse_and_name_themselves() {
    for n in RepairMode::NAMES {
        assert_eq!(n.parse::<RepairMode>().unwrap().as_str(), *n);
    }
    for n in RepairFusion::NAMES {
        assert_eq!(n.parse::<RepairFusion>().unwrap().as_str(), *n);
    }
    let err = "sometimes".parse::<RepairMode>().unwrap_err();
    assert!(err.contains("off, on, auto"), "{err}");
    assert_eq!(RepairMode::default(), RepairMode::Auto);
    assert_eq!(RepairFusion::default(), RepairFusion::Max);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, .. ProptestConfig::default() })]

    /// Any text, including other scripts, emoji, control characters and code-like tokens:
    /// repair does not panic, never empties a query, only replaces words, and is idempotent.
    #[test]
    fn repair_is_total_non_empty_and_idempotent(
        text in prop_oneof![
            "\\PC{0,60}",
            "[a-zA-Z0-9 .,'@/:_-]{0,60}",
            proptest::collection::vec(
                prop_oneof![
                    Just("sympotms".to_string()), Just("vitamin".to_string()),
                    Just("deficency".to_string()), Just("amoxcilin".to_string()),
                    Just("infections".to_string()), Just("hypertrohpy".to_string()),
                    Just("ventricel".to_string()), Just("heart".to_string()),
                    "[a-z]{1,12}", "[A-Z][a-z]{2,9}", "[0-9]{1,4}", "\\PC{1,3}",
                ],
                0..8,
            ).prop_map(|w| w.join(" ")),
        ]
    ) {
        let r = repairer(Some(&["the", "of"]));
        let once = r.repair(&text);
        if !text.trim().is_empty() {
            prop_assert!(!once.text.trim().is_empty());
        }
        prop_assert_eq!(once.changed(), once.text != text);
        for e in &once.edits {
            prop_assert_eq!(&text[e.start..e.start + e.from.len()], e.from.as_str());
            prop_assert!(e.distance == 1 || e.distance == 2);
            prop_assert!(e.confidence > 0.0 && e.confidence <= 1.0);
        }
        let twice = r.repair(&once.text);
        prop_assert_eq!(&twice.text, &once.text);
        prop_assert!(twice.edits.is_empty());
    }
}
