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
fn a_query_typed_with_caps_lock_on_is_repaired_in_capitals() {
    let r = repairer(Some(&["tablet"]));
    let out = r.repair("SYMPOTMS OF VITAMIN DEFICIENCY");
    assert_eq!(out.text, "SYMPTOMS OF VITAMIN DEFICIENCY");
    assert_eq!(out.edits[0].to, "SYMPTOMS");
    // Its output is a fixed point too.
    assert!(!r.repair(&out.text).changed());
    // Capitals without a function word are acronyms and names.
    assert!(!r.repair("SYMPOTMS VITAMIN").changed());
    // One word in capitals in a lower-case query is an acronym.
    assert!(!r.repair("SYMPOTMS of vitamin deficiency").changed());
}

#[test]
fn a_word_the_live_documents_hold_is_left_as_typed() {
    let r = repairer(Some(&["tablet"]));
    assert!(r.repair("sympotms of vitamin deficiency").changed());
    let live = |w: &str| w == "sympotms";
    let out = r.repair_knowing("sympotms of vitamin deficiency", &live);
    assert!(!out.changed(), "{:?}", out.text);
    // Only the words it knows: another typo beside it is still corrected.
    let out = r.repair_knowing("sympotms of vitamin deficeincy", &live);
    assert_eq!(out.text, "sympotms of vitamin deficiency");
}

#[test]
fn a_name_far_from_every_word_is_left_alone() {
    let r = repairer(None);
    // Unknown, but two costly edits from anything: more likely a name than a typo.
    assert!(!r.repair("zqwvy deficiency").changed());
    assert!(!r.repair("xkcdx vitamin").changed());
}

/// A model with general counts and word pairs: real-word errors, splits and joins.
fn english() -> Repairer {
    let words: &[(&str, u64)] = &[
        ("the", 23_000_000_000),
        ("of", 13_000_000_000),
        ("is", 4_700_000_000),
        ("what", 1_100_000_000),
        ("when", 650_000_000),
        ("has", 2_000_000_000),
        ("causes", 60_000_000),
        ("cause", 120_000_000),
        ("anemia", 3_000_000),
        ("acid", 40_000_000),
        ("reflux", 1_400_000),
        ("reflex", 300_000),
        ("symptoms", 70_000_000),
        ("bicycle", 8_300_000),
        ("repair", 60_000_000),
        ("cycle", 30_000_000),
        ("bi", 5_000_000),
        ("market", 1_500_000),
        ("flea", 2_800_000),
        ("flee", 300_000),
        ("near", 100_000_000),
        ("receive", 90_000_000),
        ("email", 300_000_000),
        ("hand", 200_000_000),
        ("washing", 20_000_000),
        ("united", 299_000_000),
        ("untied", 272_000),
        ("states", 100_000_000),
        ("vagina", 1_000_000),
        ("vaginal", 300_000),
        ("yeast", 1_000_000),
        ("infection", 40_000_000),
        ("while", 1_000_000_000),
        ("awhile", 100_000),
        ("ago", 100_000_000),
    ];
    let pairs: &[(&str, &str, u64)] = &[
        ("acid", "reflux", 14_000_000),
        ("while", "ago", 300_000_000),
        ("flea", "market", 18_000_000),
        ("the", "causes", 105_000_000),
        ("what", "is", 2_100_000_000),
        ("causes", "of", 30_000_000),
        ("bicycle", "repair", 7_000_000),
        ("united", "states", 75_000_000),
        ("vagina", "yeast", 900_000),
    ];
    let vocab = Vocabulary::build(DOCS.iter().map(|t| ("", *t)));
    Repairer::new(
        Arc::new(vocab),
        Some(Arc::new(Lexicon::from_counts(
            words.iter().copied(),
            pairs.iter().copied(),
        ))),
    )
}

#[test]
fn real_word_errors_are_corrected_only_with_context() {
    let r = english();
    let out = r.repair("acid reflex symptoms");
    assert_eq!(out.text, "acid reflux symptoms");
    assert_eq!(out.edits[0].kind, EditKind::RealWord);
    assert_eq!(
        (out.edits[0].from.as_str(), out.edits[0].to.as_str()),
        ("reflex", "reflux")
    );
    assert_eq!(r.repair("flee market near").text, "flea market near");
    // At the start of a query the word's own rarity speaks, as a word before it would.
    assert_eq!(r.repair("untied states").text, "united states");
    let without = Repairer::with_params(
        r.vocab().clone(),
        r.lexicon().cloned(),
        Params {
            real_word_at_start: false,
            // Two letters swapped are read at a lower prior, where `states` alone speaks.
            real_word_swap_cost: None,
            ..Params::default()
        },
    );
    assert!(!without.repair("untied states").changed());
    // Without a neighbour that goes with another word, a real word stays.
    assert!(!r.repair("reflex symptoms").changed());
    assert!(!r.repair("reflex").changed());
    // A neighbour past punctuation is in another phrase.
    assert!(!r.repair("acid (reflex) symptoms").changed());
    assert!(!r.repair("acid, reflex symptoms").changed());
    // A noun in -a and its adjective in -al are a choice of word, not a slip.
    assert!(!r.repair("vaginal yeast infection").changed());
    // Nor is a word English made of the article and another (`awhile`) a slip of that word.
    assert!(!r.repair("awhile ago").changed());
}

/// A speller over [`DOCS`] and `more` documents, with general counts for a real-word error
/// no pair list decides: `arms` for `army`.
fn salvation(more: &[&str], params: Params) -> Repairer {
    let words: &[(&str, u64)] = &[
        ("when", 650_000_000),
        ("was", 3_000_000_000),
        ("the", 23_000_000_000),
        ("salvation", 5_000_000),
        ("arms", 5_000_000),
        ("army", 100_000_000),
        ("founded", 80_000_000),
    ];
    let vocab = Vocabulary::build(DOCS.iter().chain(more).map(|t| ("", *t)));
    let lexicon = Lexicon::from_counts(words.iter().copied(), []);
    Repairer::with_params(Arc::new(vocab), Some(Arc::new(lexicon)), params)
}

#[test]
fn the_corpus_speaks_for_a_real_word_its_documents_use_near_the_query() {
    // The documents use `army` near both of the query's other content words, and `arms`
    // nowhere: the corpus speaks as the index's vote would.
    let about = "William Booth founded the Salvation Army in London in 1865.";
    let query = "when was the salvation arms founded";
    let r = salvation(&[about], Params::default());
    assert_eq!(r.repair(query).text, "when was the salvation army founded");
    assert_eq!(r.repair(query).edits[0].kind, EditKind::RealWord);
    // `--explain` shows the evidence: `arms` near none of `salvation`, `founded`; `army` near
    // both.
    let explained = r.explain(query);
    let arms = &explained.words[4];
    assert_eq!((arms.word.as_str(), arms.corpus_near), ("arms", 0));
    let army = arms.readings.iter().find(|x| x.meant == "army").unwrap();
    assert_eq!(army.corpus_near, Some([2, 2]));
    assert_eq!(arms.readings[0].corpus_near, None);
    let off = Params {
        real_word_passage_gain: None,
        ..Params::default()
    };
    assert!(!salvation(&[about], off).repair(query).changed());
    // Documents that use the typed word near the query's words speak for it.
    let arms = "Salvation by arms was what the rebels who founded it wanted.";
    assert!(!salvation(&[about, arms], Params::default())
        .repair(query)
        .changed());
    // Near one of the two only, the corpus is about something else.
    let apart = "William Booth led the Salvation Army in London in 1865.";
    let elsewhere = "The college was founded in Oxford in 1264.";
    let r = salvation(&[apart, elsewhere], Params::default());
    assert!(!r.repair(query).changed());
}

#[test]
fn the_corpus_speaks_for_a_word_between_function_words_only_where_the_vote_is_on_topic() {
    // `arms` stands between `the` and `of`: no content word beside it says what it is. With the
    // index's vote the decoder looks at it anyway, and the corpus writes `army` near both of
    // the query's other content words.
    let about = "William Booth founded the Salvation Army in London in 1865.";
    let words: &[(&str, u64)] = &[
        ("when", 650_000_000),
        ("was", 3_000_000_000),
        ("the", 23_000_000_000),
        ("of", 13_000_000_000),
        ("salvation", 5_000_000),
        ("arms", 5_000_000),
        ("army", 100_000_000),
        ("founded", 80_000_000),
    ];
    let pairs = [
        ("the", "army", 2_000_000_000),
        ("army", "of", 90_000_000),
        ("the", "arms", 1_000_000),
        ("arms", "of", 500_000),
    ];
    let vocab = Vocabulary::build(DOCS.iter().chain([&about]).map(|t| ("", *t)));
    let lexicon = Lexicon::from_counts(words.iter().copied(), pairs);
    let r = Repairer::new(Arc::new(vocab), Some(Arc::new(lexicon)));
    let docs = |texts: &[&str]| RetrievedWords::from_documents(texts.iter().map(|t| ("", *t)));
    let query = "when was the arms of salvation founded";
    // Documents about the rest of the query (they write `salvation` and `founded`, neither
    // `army` nor `arms`): the corpus speaks.
    let on_topic = docs(&[
        "Salvation was what its founders preached; it was founded on faith.",
        "The movement was founded on salvation by faith.",
    ]);
    let voted = r.repair_with(query, &|_| false, Some(&on_topic));
    assert_eq!(voted.text, "when was the army of salvation founded");
    // Documents about something else (`how to get red of ants` retrieved pages that write
    // `get` and `red`, and `anti` near both): the corpus's passages do not speak either.
    let off_topic = docs(&["Red ants at night.", "Ants and their nests."]);
    let kept = r.repair_with(query, &|_| false, Some(&off_topic));
    assert!(!kept.changed(), "{:?}", kept.text);
}

#[test]
fn two_letters_swapped_make_a_real_word_error_at_a_lower_prior() {
    // `pairs` is `paris` with two letters swapped, and `france` wants `paris`: a swap is read
    // at `real_word_swap_cost`, where another word one letter off `paris` (`parts`), with the
    // same counts and context, is not.
    let vocab = Arc::new(Vocabulary::build(DOCS[..4].iter().map(|t| ("", *t))));
    let words = [
        ("the", 40_000_000_000),
        ("of", 13_000_000_000),
        ("paris", 50_000_000),
        ("pairs", 10_000_000),
        ("parts", 10_000_000),
        ("france", 100_000_000),
        ("hotels", 50_000_000),
    ];
    let pairs = [("paris", "france", 12_000_000)];
    let r = Repairer::new(vocab, Some(Arc::new(Lexicon::from_counts(words, pairs))));
    let out = r.repair("hotels pairs france");
    assert_eq!(out.text, "hotels paris france");
    assert_eq!(out.edits[0].kind, EditKind::RealWord);
    assert!(!r.repair("hotels parts france").changed());
    let off = with_params(
        &r,
        Params {
            real_word_swap_cost: None,
            ..Params::default()
        },
    );
    assert!(!off.repair("hotels pairs france").changed());
}

/// Repairers over a small vocabulary and `lexicon`, with homophones read and with
/// `homophone_cost: null`.
fn with_and_without_homophones(lexicon: Lexicon) -> (Repairer, Repairer) {
    let vocab = Arc::new(Vocabulary::build(DOCS[..4].iter().map(|t| ("", *t))));
    let lexicon = Arc::new(lexicon);
    let on = Repairer::new(vocab.clone(), Some(lexicon.clone()));
    let off = Repairer::with_params(
        vocab,
        Some(lexicon),
        Params {
            homophone_cost: None,
            ..Params::default()
        },
    );
    (on, off)
}

#[test]
fn a_function_word_that_sounds_as_the_one_the_next_word_wants_is_read_as_it() {
    let words = [
        ("their", 780_000_000),
        ("there", 700_000_000),
        ("is", 4_700_000_000),
        ("a", 9_000_000_000),
        ("what", 800_000_000),
        ("name", 460_000_000),
        ("get", 1_000_000_000),
        ("out", 1_000_000_000),
        ("of", 10_000_000_000),
        ("will", 1_000_000_000),
        ("be", 3_000_000_000),
    ];
    let pairs = [
        ("there", "is", 7_000_000_000),
        ("their", "is", 13_000_000),
        ("is", "there", 520_000_000),
        ("is", "their", 180_000_000),
        ("their", "name", 100_000_000),
        ("get", "out", 200_000_000),
        ("out", "of", 2_000_000_000),
        ("of", "their", 7_000_000_000),
        ("of", "there", 53_000_000),
        ("there", "will", 100_000_000),
        ("their", "will", 3_300_000),
        ("will", "be", 2_000_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, pairs).with_homophones([&["their", "there"][..]]);
    let (r, off) = with_and_without_homophones(lexicon);
    let out = r.repair("their is a name");
    assert_eq!(out.text, "there is a name");
    assert_eq!(out.edits[0].kind, EditKind::RealWord);
    // A pair written with the typed word and not the other keeps it, before the word (`is
    // there name tag`) or after it; the query's last word has no next word to say which one it
    // is; a pair written only 30 times as often is no proof.
    assert!(!r.repair("is there name").changed());
    assert!(!r.repair("what is their name").changed());
    assert!(!r.repair("get out of there").changed());
    assert!(!r.repair("their will be").changed());
    assert!(!off.repair("their is a name").changed());
}

#[test]
fn a_regular_ending_on_an_irregular_verb_is_read_as_its_own_form() {
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("who", 1_000_000_000),
        ("you", 3_000_000_000),
        ("to", 12_000_000_000),
        ("swim", 20_000_000),
        ("taught", 60_000_000),
        ("teaches", 20_000_000),
        ("touched", 30_000_000),
        ("crept", 3_000_000),
        ("creeper", 3_000_000),
        ("in", 10_000_000_000),
        ("ate", 30_000_000),
        ("eaten", 20_000_000),
        ("have", 4_000_000_000),
        ("we", 3_000_000_000),
        ("cake", 40_000_000),
    ];
    let pairs = [
        ("who", "taught", 2_000_000),
        ("who", "teaches", 1_000_000),
        ("who", "touched", 1_000_000),
        ("have", "eaten", 20_000_000),
        ("we", "ate", 5_000_000),
        ("ate", "cake", 500_000),
        ("eaten", "cake", 200_000),
    ];
    let usage = [
        ("who", 1_000_000),
        ("taught", 30_000),
        ("teaches", 10_000),
        ("touched", 20_000),
        ("teached", 65),
        ("crept", 1_500),
        ("creeped", 525),
        ("ate", 20_000),
        ("eaten", 15_000),
        ("eated", 36),
    ];
    let verbs: [(&str, &[&str], &[&str]); 4] = [
        ("teach", &["taught"], &[]),
        ("creep", &["crept"], &[]),
        ("eat", &["ate"], &["eaten"]),
        ("touch", &["touched"], &[]),
    ];
    let lexicon = Lexicon::from_counts(words, pairs)
        .with_usage(usage)
        .with_verbs(verbs);
    let r = Repairer::new(vocab.clone(), Some(Arc::new(lexicon.clone())));
    let out = r.repair("who teached you to swim");
    assert_eq!(out.text, "who taught you to swim");
    assert_eq!(out.edits[0].kind, EditKind::NonWord);
    assert_eq!(out.edits[0].distance, 5);
    // Past or participle: the neighbours say which.
    assert_eq!(r.repair("have eated cake").text, "have eaten cake");
    assert_eq!(r.repair("we eated cake").text, "we ate cake");
    // A string written about as much as the form is a word of its own (`creeped out`).
    assert_ne!(r.repair("who creeped in").text, "who crept in");
    // Off, no letter edit reaches the form.
    let off = Repairer::with_params(
        vocab,
        Some(Arc::new(lexicon)),
        Params {
            over_regularised_cost: None,
            ..Params::default()
        },
    );
    assert_ne!(
        off.repair("who teached you to swim").text,
        "who taught you to swim"
    );
}

#[test]
fn a_regular_plural_on_a_noun_with_an_old_plural_is_read_as_its_plural() {
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("famous", 100_000_000),
        ("in", 10_000_000_000),
        ("history", 200_000_000),
        ("this", 5_000_000_000),
        ("thief", 5_000_000),
        ("thieves", 4_000_000),
        ("things", 300_000_000),
        ("theirs", 5_000_000),
    ];
    let pairs = [
        ("this", "in", 5_000_000),
        ("famous", "this", 100_000),
        ("in", "history", 20_000_000),
    ];
    let usage = [
        ("this", 3_000_000),
        ("thief", 7_000),
        ("thieves", 6_700),
        ("thiefs", 49),
        ("things", 300_000),
    ];
    let nouns: [(&str, &[&str]); 2] = [("thief", &["thieves"]), ("thing", &["things"])];
    let lexicon = Lexicon::from_counts(words, pairs)
        .with_usage(usage)
        .with_nouns(nouns);
    let r = Repairer::new(vocab.clone(), Some(Arc::new(lexicon.clone())));
    // The edits reach `this` two letters away; the plural the string names wins.
    assert_eq!(
        r.repair("famous thiefs in history").text,
        "famous thieves in history"
    );
    // Unnamed, `this` would win: it is far more common.
    let unnamed = Repairer::with_params(
        vocab.clone(),
        Some(Arc::new(lexicon.clone())),
        Params {
            unnamed_reading_cost: 0.0,
            ..Params::default()
        },
    );
    assert_eq!(
        unnamed.repair("famous thiefs in history").text,
        "famous this in history"
    );
    let off = Repairer::with_params(
        vocab,
        Some(Arc::new(lexicon)),
        Params {
            over_regularised_cost: None,
            ..Params::default()
        },
    );
    assert_ne!(
        off.repair("famous thiefs in history").text,
        "famous thieves in history"
    );
}

#[test]
fn a_function_word_a_letter_from_the_one_a_neighbour_wants_is_read_as_it() {
    let words = [
        ("who", 1_000_000_000),
        ("were", 570_000_000),
        ("where", 360_000_000),
        ("the", 20_000_000_000),
        ("is", 4_700_000_000),
        ("song", 100_000_000),
        ("knows", 100_000_000),
    ];
    let pairs = [
        ("who", "were", 5_000_000_000),
        ("where", "the", 2_800_000_000),
        ("were", "the", 830_000_000),
        ("where", "is", 1_300_000_000),
        ("knows", "where", 50_000_000),
        ("were", "song", 1_300_000),
        ("where", "song", 10_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, pairs);
    let (r, off) = with_and_without_homophones(lexicon);
    // `where the` is written 3.4 times `were the`: not enough to keep `where` after `who`.
    let out = r.repair("who where the song");
    assert_eq!(out.text, "who were the song");
    assert_eq!(out.edits[0].kind, EditKind::RealWord);
    assert_eq!(r.repair("were is the song").text, "where is the song");
    // A neighbour written with the typed word far more keeps it.
    assert!(!r.repair("knows where the song").changed());
    assert!(!r.repair("who where song").changed());
    assert!(!off.repair("who where the song").changed());
}

#[test]
fn a_function_word_one_letter_for_another_from_the_one_a_neighbour_wants_is_read_as_it() {
    let words = [
        ("taller", 10_000_000),
        ("than", 1_000_000_000),
        ("then", 1_500_000_000),
        ("and", 13_000_000_000),
        ("me", 1_000_000_000),
        ("went", 300_000_000),
    ];
    let pairs = [
        ("taller", "than", 21_000_000),
        ("and", "then", 900_000_000),
        ("and", "than", 2_000_000),
        ("then", "went", 5_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, pairs);
    let (r, off) = with_and_without_homophones(lexicon);
    // `taller than` is written, `taller then` never: a vowel for a vowel between two function
    // words a writer mixes up.
    let out = r.repair("taller then me");
    assert_eq!(out.text, "taller than me");
    assert_eq!(out.edits[0].kind, EditKind::RealWord);
    assert!(!off.repair("taller then me").changed());
    // A neighbour written with the typed word far more keeps it, and one neighbour alone is no
    // context for a letter for another: the typed word may end the phrase.
    assert!(!r.repair("and then went").changed());
    assert!(!r.repair("me taller then").changed());
}

#[test]
fn than_after_a_comparative_stays_whatever_its_neighbours_want() {
    let words = [
        ("better", 800_000_000),
        ("than", 1_000_000_000),
        ("that", 3_400_000_000),
        ("live", 300_000_000),
        ("in", 8_500_000_000),
        ("small", 300_000_000),
        ("town", 80_000_000),
        ("city", 200_000_000),
        ("big", 300_000_000),
        ("a", 9_000_000_000),
        ("to", 12_000_000_000),
        ("is", 4_700_000_000),
        ("it", 2_800_000_000),
        // The rest of general English's words, as in the real list (N = 542G).
        ("the", 520_000_000_000),
    ];
    let pairs = [
        ("better", "than", 1_026_000_000),
        ("town", "that", 24_000_000),
        ("that", "in", 1_384_000_000),
        ("than", "in", 523_000_000),
        ("it", "is", 2_000_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, pairs);
    let (r, _) = with_and_without_homophones(lexicon.clone());
    // Without the comparative, `town that` is written and `town than` never: `that`.
    assert_eq!(
        r.repair("live in a small town than in a big city").text,
        "live in a small town that in a big city"
    );
    // `better` asks for `than`, four words before it.
    let sentence = "it is better to live in a small town than in a big city";
    assert_eq!(r.repair(sentence).text, sentence);
    let off = Repairer::with_params(
        r.vocab().clone(),
        Some(Arc::new(lexicon)),
        Params {
            comparative_association: None,
            ..Params::default()
        },
    );
    assert_eq!(
        off.repair(sentence).text,
        "it is better to live in a small town that in a big city"
    );
}

#[test]
fn then_right_after_a_comparative_is_its_than() {
    let words = [
        ("better", 800_000_000),
        ("than", 1_000_000_000),
        ("then", 1_500_000_000),
        ("nothing", 150_000_000),
        ("rest", 100_000_000),
        // The rest of general English's words, as in the real list (N = 542G).
        ("the", 540_000_000_000),
    ];
    let pairs = [
        ("better", "than", 1_026_000_000),
        ("better", "then", 34_000_000),
        ("then", "nothing", 8_350_000),
        ("than", "nothing", 14_100_000),
    ];
    let (r, _) = with_and_without_homophones(Lexicon::from_counts(words, pairs));
    // `better then` is written 30 times less than `better than`: short of the margin that
    // reads a letter for another from the pairs alone, but `better` asks for `than`.
    let out = r.repair("better then nothing");
    assert_eq!(out.text, "better than nothing");
    assert_eq!(out.edits[0].kind, EditKind::RealWord);
    // At the end of a phrase too; not across a pause.
    assert_eq!(r.repair("better then").text, "better than");
    assert!(!r.repair("better, then rest").changed());
    let off = with_params(
        &r,
        Params {
            comparative_association: None,
            ..Params::default()
        },
    );
    assert!(!off.repair("better then nothing").changed());
}

#[test]
fn a_function_word_that_sounds_as_the_content_word_a_neighbour_wants_is_read_as_it() {
    let words = [
        ("how", 570_000_000),
        ("to", 12_000_000_000),
        ("no", 1_400_000_000),
        ("know", 300_000_000),
        ("if", 2_000_000_000),
        ("longer", 200_000_000),
        ("i", 3_000_000_000),
        ("t", 40_000_000),
        ("tea", 27_000_000),
        ("shirt", 50_000_000),
        ("you", 5_000_000_000),
        ("more", 1_000_000_000),
    ];
    let pairs = [
        ("how", "to", 5_500_000_000),
        ("you", "know", 4_000_000_000),
        ("no", "more", 800_000_000),
        ("know", "more", 100_000_000),
        ("to", "know", 2_500_000_000),
        ("to", "no", 170_000_000),
        ("know", "if", 650_000_000),
        ("i", "know", 216_000_000),
        ("i", "no", 8_400_000),
        ("no", "longer", 1_660_000_000),
        ("tea", "shirt", 10_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, pairs)
        .with_homophones([&["know", "no"][..], &["t", "tea"][..]]);
    let (r, off) = with_and_without_homophones(lexicon);
    // `know if` is written, `no if` never; `to know` 15 times `to no`.
    let out = r.repair("how to no if");
    assert_eq!(out.text, "how to know if");
    assert_eq!(out.edits[0].kind, EditKind::RealWord);
    // `no longer` is written, `know longer` never: the typed word stays, whatever `i know` says.
    assert!(!r.repair("i no longer").changed());
    // Nor where the other neighbour is written with it far more (`no more` 8 times `know
    // more`), however loudly the first speaks for the content word (`you know`, never `you no`).
    assert!(!r.repair("you no more").changed());
    // A single letter is an initial or a unit, not a word misheard.
    assert!(!r.repair("t shirt").changed());
    assert!(!off.repair("how to no if").changed());
}

#[test]
fn a_word_that_sounds_as_the_one_its_neighbours_want_is_read_as_it() {
    let words = [
        ("who", 1_000_000_000),
        ("wrote", 100_000_000),
        ("rote", 1_000_000),
        ("the", 20_000_000_000),
        ("song", 100_000_000),
        ("at", 10_000_000_000),
        ("low", 100_000_000),
        ("lowe", 10_000),
        ("plywood", 1_000_000),
        ("did", 1_000_000_000),
        ("you", 5_000_000_000),
        ("hugh", 1_000_000),
        ("glass", 10_000_000),
    ];
    let pairs = [
        ("who", "wrote", 80_000_000),
        ("wrote", "the", 100_000_000),
        ("at", "low", 50_000_000),
        ("did", "you", 1_000_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, pairs).with_homophones([
        &["rote", "wrote"][..],
        &["low", "lowe"][..],
        &["hugh", "you"][..],
    ]);
    let (r, off) = with_and_without_homophones(lexicon);
    // `rote` is one edit from `wrote`, but only the function word beside it asks for `wrote`.
    let out = r.repair("who rote the song");
    assert_eq!(out.text, "who wrote the song");
    assert_eq!(out.edits[0].kind, EditKind::RealWord);
    assert_eq!(r.repair("plywood at lowe").text, "plywood at low");
    // A word before `'s` is a name's; a function word is never read for a word.
    assert!(!r.repair("plywood at lowe's").changed());
    assert!(!r.repair("did hugh glass").changed());
    assert!(!off.repair("who rote the song").changed());
    assert!(!off.repair("plywood at lowe").changed());
}

/// A repairer over documents that write none of the query words, so that the general lists
/// (`words`, `pairs`) decide.
fn general_english(words: &[(&str, u64)], pairs: &[(&str, &str, u64)]) -> Repairer {
    let vocab = Vocabulary::build(DOCS[..4].iter().map(|t| ("", *t)));
    Repairer::new(
        Arc::new(vocab),
        Some(Arc::new(Lexicon::from_counts(
            words.iter().copied(),
            pairs.iter().copied(),
        ))),
    )
}

/// `r`'s vocabulary and lexicon with other settings.
fn with_params(r: &Repairer, params: Params) -> Repairer {
    Repairer::with_params(r.vocab().clone(), r.lexicon().cloned(), params)
}

#[test]
fn a_word_one_slip_from_the_function_word_its_neighbours_want_is_read_as_it() {
    let words: &[(&str, u64)] = &[
        ("how", 570_000_000),
        ("long", 250_000_000),
        ("does", 314_000_000),
        ("dose", 16_000_000),
        ("it", 4_000_000_000),
        ("take", 200_000_000),
        ("cheap", 30_000_000),
        ("flights", 20_000_000),
        ("from", 2_000_000_000),
        ("fro", 1_000_000),
        ("dallas", 10_000_000),
        ("which", 1_200_000_000),
        ("car", 60_000_000),
        ("can", 1_240_000_000),
        ("make", 400_000_000),
        ("of", 13_000_000_000),
        ("vitamin", 20_000_000),
        ("what", 812_000_000),
        ("is", 4_700_000_000),
        ("the", 23_000_000_000),
        ("best", 350_000_000),
        ("hoe", 1_477_000),
        ("to", 12_000_000_000),
        ("bread", 13_500_000),
        // The rest of general English: SymSpell's list counts 5.4e11 words in all, and a
        // word's probability is its share of them.
        ("etcetera", 530_000_000_000),
    ];
    let pairs: &[(&str, &str, u64)] = &[
        ("long", "does", 41_000_000),
        ("does", "it", 650_000_000),
        ("flights", "from", 53_000_000),
        ("which", "can", 1_000_000_000),
        ("can", "make", 800_000_000),
        ("dose", "of", 40_000_000),
        ("what", "is", 2_100_000_000),
        ("is", "the", 1_800_000_000),
        ("the", "best", 700_000_000),
        ("how", "to", 5_500_000_000),
        ("to", "make", 1_900_000_000),
    ];
    let r = general_english(words, pairs);
    // Two letters swapped, a letter left out: slips of the hand on words the writer knows.
    let out = r.repair("how long dose it take");
    assert_eq!(out.text, "how long does it take");
    assert_eq!(out.edits[0].kind, EditKind::RealWord);
    assert_eq!(
        r.repair("cheap flights fro dallas").text,
        "cheap flights from dallas"
    );
    // A pair the list holds with the word as typed speaks for it.
    assert!(!r.repair("dose of vitamin").changed());
    // `car` is no slip of the hand for `can` (`r` and `n` are far apart): however much the
    // neighbours want `can`, a word the writer chose stays.
    assert!(!r.repair("which car make").changed());
    // At the start of a query the word's own frequency speaks as the word before would.
    assert_eq!(r.repair("hoe to make bread").text, "how to make bread");
    // A three-letter string no list holds, slipped at its first letter (`r` is next to `t`).
    assert_eq!(r.repair("what is rhe best").text, "what is the best");
    let off = with_params(
        &r,
        Params {
            function_word_cost: 1e6,
            function_word_start_cost: 1e6,
            unknown_function_word_cost: 1e6,
            ..Params::default()
        },
    );
    assert!(!off.repair("how long dose it take").changed());
    assert!(!off.repair("what is rhe best").changed());
    assert!(!off.repair("hoe to make bread").changed());
    // The start's lower prior is what reads `hoe`: at the prior elsewhere, and with no lift for
    // a question word there, it stays.
    let as_elsewhere = with_params(
        &r,
        Params {
            function_word_start_cost: Params::default().function_word_cost,
            question_start_lift: 0.0,
            ..Params::default()
        },
    );
    assert!(!as_elsewhere.repair("hoe to make bread").changed());
}

#[test]
fn two_letters_swapped_are_the_function_word_where_the_neighbours_want_it() {
    let words: &[(&str, u64)] = &[
        ("how", 570_000_000),
        ("to", 12_000_000_000),
        ("cook", 24_000_000),
        ("rice", 21_000_000),
        ("what", 812_000_000),
        ("is", 4_700_000_000),
        ("it", 4_000_000_000),
        ("a", 9_000_000_000),
        ("stent", 600_000),
        ("where", 100_000_000),
        ("etcetera", 530_000_000_000),
    ];
    let pairs: &[(&str, &str, u64)] = &[
        ("how", "to", 5_500_000_000),
        ("where", "to", 40_000_000),
        ("to", "a", 3_000_000_000),
        ("to", "cook", 95_000_000),
        ("what", "is", 2_100_000_000),
        ("is", "a", 1_500_000_000),
        ("is", "it", 1_200_000_000),
        ("it", "a", 60_000_000),
    ];
    let r = general_english(words, pairs);
    let out = r.repair("how ot cook rice");
    assert_eq!(out.text, "how to cook rice");
    assert_eq!(out.edits[0].kind, EditKind::NonWord);
    // After a question word that starts the query, the question is the context.
    assert_eq!(r.repair("what si a stent").text, "what is a stent");
    // Between two function words, however well each goes with `it`, an acronym may stand.
    assert!(!r.repair("what is ti a stent").changed());
    // So it may after a question word that makes no set phrase with the function word: `where
    // to` is written, but not much more than `where` and `to` meet by chance.
    assert!(!r.repair("where ot a stent").changed());
    let any_question = with_params(
        &r,
        Params {
            swapped_question_association: f64::NEG_INFINITY,
            ..Params::default()
        },
    );
    assert_eq!(
        any_question.repair("where ot a stent").text,
        "where to a stent"
    );
    // Every neighbour must want the function word: `to rice` is written nowhere.
    assert!(!r.repair("cook ot rice").changed());
    // Other two-letter strings are acronyms: `tp` is a key off `to`, no swap.
    assert!(!r.repair("how tp cook rice").changed());
    let off = with_params(
        &r,
        Params {
            swapped_function_word_cost: None,
            ..Params::default()
        },
    );
    assert!(!off.repair("how ot cook rice").changed());
    assert!(!off.repair("what si a stent").changed());
}

#[test]
fn a_slip_whose_pairs_are_its_typos_is_read_as_the_function_word() {
    let words: &[(&str, u64)] = &[
        ("so", 1_000_000_000),
        ("what", 812_000_000),
        ("wat", 2_900_000),
        ("is", 4_000_000_000),
        ("the", 23_000_000_000),
        ("capital", 60_000_000),
        ("etcetera", 530_000_000_000),
    ];
    let pairs: &[(&str, &str, u64)] = &[
        ("so", "what", 50_000_000),
        ("what", "is", 260_000_000),
        ("is", "the", 2_000_000_000),
        ("the", "capital", 40_000_000),
        // People write `wat is`, but 160 times less than `what is`: its typos.
        ("wat", "is", 13_700_000),
    ];
    let r = general_english(words, pairs);
    assert_eq!(
        r.repair("so wat is the capital").text,
        "so what is the capital"
    );
    // A pair written with the typed word nearly as often as with the function word speaks for
    // the typed word.
    let as_often = general_english(
        words,
        &pairs
            .iter()
            .map(|&(a, b, c)| (a, b, if a == "wat" { 1_000_000_000 } else { c }))
            .collect::<Vec<_>>(),
    );
    assert!(!as_often.repair("so wat is the capital").changed());
}

#[test]
fn a_slip_starting_a_query_is_read_unless_another_word_is_one_no_list_knows() {
    let words: &[(&str, u64)] = &[
        ("what", 812_000_000),
        ("wat", 2_900_000),
        ("is", 4_000_000_000),
        ("cappuccino", 1_000_000),
        ("etcetera", 530_000_000_000),
    ];
    let pairs: &[(&str, &str, u64)] = &[("what", "is", 2_175_000_000), ("wat", "is", 13_700_000)];
    let r = general_english(words, pairs);
    assert_eq!(r.repair("wat is cappuccino").text, "what is cappuccino");
    // Dutch: `koffie` is in no list, and the query may be in a language where `wat` is a word.
    assert!(!r.repair("wat is cappuccino koffie").changed());
    // At the start's former prior, which such a query still pays, and with no lift for a
    // question word there (nor does such a query get one), the English one stays too.
    let before = with_params(
        &r,
        Params {
            function_word_start_cost: Params::default().function_word_start_foreign_cost,
            question_start_lift: 0.0,
            ..Params::default()
        },
    );
    assert!(!before.repair("wat is cappuccino").changed());
}

#[test]
fn a_function_words_pair_written_as_typos_speaks_where_a_content_word_does() {
    let words: &[(&str, u64)] = &[
        ("side", 141_000_000),
        ("effects", 82_400_000),
        ("affects", 8_430_000),
        ("of", 13_150_000_000),
        ("aspirin", 2_000_000),
        ("a", 9_000_000_000),
        ("good", 366_000_000),
        ("hood", 11_000_000),
        ("system", 110_000_000),
        ("etcetera", 530_000_000_000),
    ];
    let pairs: &[(&str, &str, u64)] = &[
        // `side affects` is written 12 times less than `side effects`: its typos.
        ("side", "effects", 60_000_000),
        ("side", "affects", 5_000_000),
        // `affects of` 80 times less than `effects of`, where `effects` is 10 times as common.
        ("effects", "of", 1_249_000_000),
        ("affects", "of", 15_300_000),
        // `a hood` 480 times less than `a good`, where `good` is 33 times as common.
        ("a", "good", 4_115_000_000),
        ("a", "hood", 8_500_000),
    ];
    let r = general_english(words, pairs);
    let out = r.repair("side affects of aspirin");
    assert_eq!(out.text, "side effects of aspirin");
    assert_eq!(out.edits[0].kind, EditKind::RealWord);
    // The content pair alone does not pass the real-word cost: the function word's pair is
    // what reads it.
    assert!(!r.repair("side affects aspirin").changed());
    // Written with `of` as often as the words' own counts give, the pair speaks for neither.
    let as_often = general_english(
        words,
        &pairs
            .iter()
            .map(|&(a, b, c)| (a, b, if a == "affects" { 150_000_000 } else { c }))
            .collect::<Vec<_>>(),
    );
    assert!(!as_often.repair("side affects of aspirin").changed());
    // A function word's pair alone is no evidence: `a` goes with `good` whatever the query.
    assert!(!r.repair("a hood system").changed());
}

#[test]
fn a_word_a_letter_short_of_a_function_word_is_no_form_of_it() {
    let words: &[(&str, u64)] = &[
        ("how", 570_000_000),
        ("many", 300_000_000),
        ("man", 180_000_000),
        ("calories", 20_000_000),
        ("long", 250_000_000),
        ("does", 314_000_000),
        ("doe", 4_000_000),
        ("it", 4_000_000_000),
        ("take", 200_000_000),
        ("her", 100_000_000),
        ("hers", 400_000_000),
        ("is", 4_000_000_000),
        ("truly", 60_000_000),
        ("etcetera", 530_000_000_000),
    ];
    let pairs: &[(&str, &str, u64)] = &[
        ("how", "many", 150_000_000),
        ("many", "calories", 9_000_000),
        ("how", "long", 120_000_000),
        ("long", "does", 41_000_000),
        ("does", "it", 650_000_000),
        ("it", "take", 90_000_000),
        ("is", "hers", 300_000_000),
        ("hers", "truly", 100_000_000),
    ];
    let r = general_english(words, pairs);
    // `many` looks like `man` with an ending and `does` like `doe`'s plural, but neither is a
    // form of a word that is no function word: each is a letter left out.
    let out = r.repair("how man calories");
    assert_eq!(out.text, "how many calories");
    assert_eq!(out.edits[0].kind, EditKind::RealWord);
    assert_eq!(
        r.repair("how long doe it take").text,
        "how long does it take"
    );
    // A function word's own forms are choices, not slips, whatever the pairs say.
    assert!(!r.repair("it is her truly").changed());
}

#[test]
fn a_content_word_a_letter_from_the_function_word_its_neighbours_want_is_read_as_it() {
    let words: &[(&str, u64)] = &[
        ("how", 570_000_000),
        ("many", 300_000_000),
        ("mann", 3_000_000),
        ("calories", 20_000_000),
        ("long", 250_000_000),
        ("lung", 30_000_000),
        ("cancer", 60_000_000),
        ("spreads", 5_000_000),
        ("does", 314_000_000),
        ("it", 4_000_000_000),
        ("take", 200_000_000),
        ("etcetera", 530_000_000_000),
    ];
    let pairs: &[(&str, &str, u64)] = &[
        ("how", "many", 150_000_000),
        ("many", "calories", 9_000_000),
        ("how", "long", 120_000_000),
        ("long", "does", 41_000_000),
        ("does", "it", 650_000_000),
        ("it", "take", 90_000_000),
        ("lung", "cancer", 12_000_000),
    ];
    let r = general_english(words, pairs);
    // `n` for `y` is no slip of the hand (the keys are apart), but `how mann` is never
    // written and `how many` is, on both sides.
    let out = r.repair("how mann calories");
    assert_eq!(out.text, "how many calories");
    assert_eq!(out.edits[0].kind, EditKind::RealWord);
    assert_eq!(
        r.repair("how lung does it take").text,
        "how long does it take"
    );
    // A pair the list holds with the word as typed speaks for it.
    assert!(!r.repair("how lung cancer spreads").changed());
    let off = with_params(
        &r,
        Params {
            function_word_letter_cost: None,
            ..Params::default()
        },
    );
    assert!(!off.repair("how mann calories").changed());
    assert!(!off.repair("how lung does it take").changed());
}

#[test]
fn a_letter_for_another_is_read_as_a_slip_where_the_function_word_makes_a_set_phrase() {
    // General English's own counts for these words and pairs, and the rest of its words.
    let words: &[(&str, u64)] = &[
        ("how", 571_848_080),
        ("long", 252_519_588),
        ("lang", 9_483_612),
        ("should", 402_028_056),
        ("and", 12_997_637_966),
        ("more", 1_544_771_673),
        ("mora", 827_473),
        ("new", 1_551_258_643),
        ("mexico", 62_544_255),
        ("etcetera", 487_700_000_000),
    ];
    let pairs: &[(&str, &str, u64)] = &[
        ("how", "long", 315_849_920),
        ("long", "should", 7_884_864),
        ("and", "more", 5_129_344_896),
        ("more", "new", 34_648_960),
        ("new", "mexico", 40_941_184),
    ];
    let r = general_english(words, pairs);
    assert_eq!(r.repair("how lang should").text, "how long should");
    // `how long` is written 2.5% as often as `how` is, ~700 times what chance gives (6.6 nats):
    // a set phrase, which waives what a letter for another costs beyond a slip, however dear.
    let dear = Params {
        function_word_letter_cost: Some(50.0),
        ..Params::default()
    };
    let waived = with_params(&r, dear.clone());
    assert_eq!(waived.repair("how lang should").text, "how long should");
    let letter_alone = with_params(
        &r,
        Params {
            function_word_phrase_association: None,
            ..dear
        },
    );
    assert!(!letter_alone.repair("how lang should").changed());
    // `and more` is written more often still, but `and` goes before anything (4.4 nats): no
    // set phrase, so a word a letter from `more` beside it pays the letter, where the pair
    // tests alone would let it through.
    assert!(!waived.repair("and mora new mexico").changed());
    let any_pair = with_params(
        &r,
        Params {
            function_word_letter_cost: Some(0.0),
            function_word_phrase_association: None,
            ..Params::default()
        },
    );
    assert_eq!(
        any_pair.repair("and mora new mexico").text,
        "and more new mexico"
    );
}

#[test]
fn run_together_words_are_split_and_broken_words_joined() {
    let r = english();
    let out = r.repair("thecauses of anemia");
    assert_eq!(out.text, "the causes of anemia");
    assert_eq!(out.edits[0].kind, EditKind::Split);
    assert_eq!(r.repair("whatis anemia").text, "what is anemia");
    let out = r.repair("bi cycle repair");
    assert_eq!(out.text, "bicycle repair");
    assert_eq!(out.edits[0].kind, EditKind::Join);
    assert_eq!(out.edits[0].from, "bi cycle");
    // Two real words are not joined into a compound on a hunch.
    assert!(!r.repair("hand washing").changed());
}

#[test]
fn a_word_with_an_s_after_it_is_not_split_into_a_function_word_and_a_plural() {
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let lexicon = |today: bool| {
        let mut words = vec![
            ("the", 500_000_000_000),
            ("to", 12_000_000_000),
            ("in", 8_500_000_000),
            ("days", 300_000_000),
            ("world", 400_000_000),
            ("its", 1_000_000_000),
            ("infancy", 2_000_000),
        ];
        if today {
            words.push(("today", 500_000_000));
        }
        let pairs = [
            ("in", "its", 100_000_000),
            ("its", "infancy", 5_000_000),
            ("in", "to", 2_800_000_000),
            ("to", "days", 60_000_000),
        ];
        Arc::new(Lexicon::from_counts(words, pairs))
    };
    // `todays` is `today` and an `s` (`today's` without its apostrophe), not `to days`.
    let r = Repairer::new(vocab.clone(), Some(lexicon(true)));
    assert!(!r.repair("in todays world").changed());
    // Where `today` is no word, the string is two words run together.
    let without = Repairer::new(vocab, Some(lexicon(false)));
    assert_eq!(without.repair("in todays world").text, "in to days world");
    // Two function words run together stay a split (`inits` is `in its`, whatever `init` is).
    assert_eq!(r.repair("inits infancy").text, "in its infancy");
}

#[test]
fn a_contraction_typed_without_its_apostrophe_stays_as_typed() {
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let lexicon = |contraction: bool| {
        let mut words = vec![
            ("the", 500_000_000_000),
            ("we", 2_000_000_000),
            ("don", 50_000_000),
            ("really", 300_000_000),
            ("need", 500_000_000),
            ("act", 100_000_000),
            ("active", 100_000_000),
            ("transport", 50_000_000),
        ];
        if contraction {
            words.extend([("don't", 300_000), ("i've", 300_000)]);
        }
        let pairs = [
            ("we", "don", 20_000_000),
            ("active", "transport", 5_000_000),
        ];
        Arc::new(Lexicon::from_counts(words, pairs))
    };
    let without = Repairer::new(vocab.clone(), Some(lexicon(false)));
    assert_eq!(
        without.repair("we dont really need").text,
        "we don really need"
    );
    // `dont` is `don't` with its apostrophe left out: what the writer meant.
    let r = Repairer::new(vocab, Some(lexicon(true)));
    assert!(!r.repair("we dont really need").changed());
    assert!(r.lm.apostrophe_left_out("dont"));
    assert!(!r.lm.apostrophe_left_out("don"));
    assert!(!r.lm.apostrophe_left_out("dnot"));
    // Such a string may still be a word's broken-off end (`ive` is `i've` too).
    assert!(r.lm.apostrophe_left_out("ive"));
    assert_eq!(r.repair("act ive transport").text, "active transport");
}

#[test]
fn a_rarely_written_string_is_read_two_edits_away_only_at_one_slip_s_price() {
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("the", 500_000_000_000),
        ("what", 1_100_000_000),
        ("is", 4_700_000_000),
        ("county", 60_000_000),
        ("placed", 60_000_000),
        ("cost", 100_000_000),
        ("compare", 40_000_000),
    ];
    let pairs = [
        ("what", "county", 5_000_000),
        ("county", "is", 9_000_000),
        ("is", "placed", 50_000_000),
        ("compare", "cost", 2_000_000),
    ];
    let usage = [
        ("placida", 17),
        ("compair", 17),
        ("placed", 60_000),
        ("compare", 40_000),
    ];
    let lexicon = Arc::new(Lexicon::from_counts(words, pairs).with_usage(usage));
    let r = Repairer::new(vocab.clone(), Some(lexicon.clone()));
    // A town's name, written 17 times per billion words: `placed` is two edits away (3.6).
    assert!(!r.repair("what county is placida").changed());
    let off = Params {
        rarely_written_two_edit_cost: None,
        ..Params::default()
    };
    assert_eq!(
        with_params(&r, off).repair("what county is placida").text,
        "what county is placed"
    );
    // Two edits at one slip's price (a vowel added, a silent `e` lost: 3.1) still read.
    assert_eq!(r.repair("compair cost").text, "compare cost");
}

#[test]
fn a_short_misspelling_people_write_and_the_documents_do_not_is_read_at_the_lower_margin() {
    let words = [
        ("the", 500_000_000_000),
        ("pool", 30_000_000),
        ("safety", 90_000_000),
        ("covers", 20_000_000),
    ];
    let pairs: [(&str, &str, u64); 0] = [];
    // As wordfreq writes them: `saftey` 52 times per billion words, `safety` 93,325.
    let usage = [
        ("saftey", 52),
        ("safety", 93_325),
        ("pool", 46_774),
        ("covers", 32_359),
    ];
    let lexicon = Arc::new(Lexicon::from_counts(words, pairs).with_usage(usage));
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let r = Repairer::new(vocab, Some(lexicon.clone()));
    assert_eq!(r.repair("pool saftey covers").text, "pool safety covers");
    // Off, and with it the lower margin of a slip of the hand (`saftey` swaps two letters).
    let off = Params {
        short_unindexed_typo_usage_margin: None,
        slip_usage_margin: None,
        ..Params::default()
    };
    assert!(!with_params(&r, off).repair("pool saftey covers").changed());
    // The documents write it: a brand of theirs, kept at the short-word margin.
    let docs = DOCS.iter().copied().chain(["Saftey makes pool covers."]);
    let indexed = Repairer::new(
        Arc::new(Vocabulary::build(docs.map(|t| ("", t)))),
        Some(lexicon),
    );
    assert!(!indexed.repair("pool saftey covers").changed());
}

#[test]
fn a_short_string_that_writes_a_doubled_letter_once_is_the_likeliest_word_typo() {
    let words = [
        ("the", 500_000_000_000),
        ("types", 40_000_000),
        ("of", 13_000_000_000),
        ("coffee", 75_000_000),
        ("drinks", 20_000_000),
    ];
    // General English writes `of coffee`, which the string kept as typed is spared.
    let pairs = [("of", "coffee", 3_000_000)];
    // As wordfreq writes them: `coffe` 135 times per billion words, `coffee` 72,444 (e^6.3:
    // under the short-word margins once the edit is paid).
    let usage = [
        ("coffe", 135),
        ("coffee", 72_444),
        ("types", 60_000),
        ("drinks", 30_000),
    ];
    let lexicon = Arc::new(Lexicon::from_counts(words, pairs).with_usage(usage));
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let r = Repairer::new(vocab, Some(lexicon));
    assert_eq!(
        r.repair("types of coffe drinks").text,
        "types of coffee drinks"
    );
    let off = Params {
        slip_usage_margin: None,
        ..Params::default()
    };
    assert!(!with_params(&r, off)
        .repair("types of coffe drinks")
        .changed());
}

#[test]
fn a_written_typo_the_usage_rule_names_is_no_pair_of_function_words_run_together() {
    // As SymSpell's lists and wordfreq write them: `befor` 170 times per billion words,
    // `before` 851,138 — the usage rule names `before` — while general English writes `soon be`
    // and `be for` and never `soon before` or `before workout`.
    let words = [
        ("how", 571_848_080),
        ("soon", 77_038_135),
        ("be", 2_398_724_162),
        ("for", 5_933_321_709),
        ("before", 277_546_019),
        ("workout", 5_497_220),
    ];
    let pairs = [
        ("how", "soon", 12_698_560),
        ("soon", "be", 136_522_176),
        ("be", "for", 274_104_384),
    ];
    let usage = [
        ("befor", 170),
        ("before", 851_138),
        ("soon", 208_930),
        ("workout", 10_471),
    ];
    let lexicon = Arc::new(Lexicon::from_counts(words, pairs).with_usage(usage));
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let r = Repairer::new(vocab, Some(lexicon));
    let query = "how soon befor workout";
    assert_eq!(r.repair(query).text, "how soon before workout");
    // At the cost of another word the split's two likely pieces win.
    let as_another_word = Params {
        named_split_cost: Params::default().unnamed_reading_cost,
        ..Params::default()
    };
    assert_eq!(
        with_params(&r, as_another_word).repair(query).text,
        "how soon be for workout"
    );
}

#[test]
fn two_known_words_that_are_one_word_written_apart_are_joined() {
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("the", 500_000_000_000),
        ("for", 8_000_000_000),
        ("is", 4_700_000_000),
        ("what", 1_100_000_000),
        ("baking", 20_000_000),
        ("soda", 20_000_000),
        ("heart", 90_000_000),
        ("burn", 13_600_000),
        ("heartburn", 1_150_000),
        ("snake", 10_000_000),
        ("bite", 10_000_000),
        ("snakebite", 100_000),
        ("hand", 200_000_000),
        ("washing", 20_000_000),
        ("handwashing", 500_000),
        ("sued", 1_000_000),
        ("issued", 50_000_000),
    ];
    let pairs = [
        ("baking", "soda", 6_000_000),
        ("hand", "washing", 4_000_000),
        ("what", "is", 2_100_000_000),
    ];
    let usage = [
        ("heartburn", 2_000),
        ("snakebite", 166),
        ("handwashing", 800),
        ("issued", 53_703),
    ];
    let lexicon = Arc::new(Lexicon::from_counts(words, pairs).with_usage(usage));
    let r = Repairer::new(vocab.clone(), Some(lexicon.clone()));
    // `heartburn` is written far more often than `heart burn` can be (the pair list lacks it:
    // rarer than its least pair, and no more than e^3 over chance).
    let out = r.repair("baking soda for heart burn");
    assert_eq!(out.text, "baking soda for heartburn");
    assert_eq!(out.edits[0].kind, EditKind::Join);
    let off = Params {
        compound_written_together_margin: None,
        ..Params::default()
    };
    assert!(!with_params(&r, off)
        .repair("baking soda for heart burn")
        .changed());
    // A pair the list holds is written apart by choice (`hand washing`).
    assert!(!r.repair("hand washing").changed());
    // A rare compound is as often written apart (`snake bite`).
    assert!(!r.repair("snake bite").changed());
    let any_usage = Params {
        compound_least_usage: 0,
        ..Params::default()
    };
    assert_eq!(
        with_params(&r, any_usage).repair("snake bite").text,
        "snakebite"
    );
    // A function word goes with any word more than chance: `is sued` is no split `issued`.
    assert!(!r.repair("what is sued").changed());
}

#[test]
fn an_s_standing_alone_joins_the_word_before_where_no_content_word_follows() {
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("s", 500_000_000),
        ("in", 8_000_000_000),
        ("my", 1_000_000_000),
        ("why", 190_000_000),
        ("are", 2_400_000_000),
        ("nose", 10_000_000),
        ("nerve", 6_500_000),
        ("nerves", 5_000_000),
        ("associate", 20_000_000),
        ("associates", 10_000_000),
        ("degree", 60_000_000),
        ("an", 1_500_000_000),
    ];
    let lexicon = Arc::new(Lexicon::from_counts(words, []));
    let r = Repairer::new(vocab, Some(lexicon));
    // A plural's ending broken off: nothing after it in its phrase, or a function word.
    let out = r.repair("why are the nerve s in my nose");
    assert_eq!(out.text, "why are the nerves in my nose");
    assert_eq!(out.edits[0].kind, EditKind::Join);
    assert_eq!(r.repair("the nerve s").text, "the nerves");
    // Before a content word it is as often a possessive whose apostrophe went.
    assert!(!r.repair("an associate s degree").changed());
}

#[test]
fn a_word_broken_before_letters_that_make_a_function_word_is_joined() {
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("the", 500_000_000_000),
        ("is", 4_700_000_000),
        ("on", 4_000_000_000),
        ("what", 1_100_000_000),
        ("a", 9_000_000_000),
        ("kind", 100_000_000),
        ("colorectal", 500_000),
        ("surge", 5_000_000),
        ("surgeon", 7_000_000),
        ("sued", 1_000_000),
        ("issued", 50_000_000),
    ];
    // The pairs after `what` add up to 56 times its count (the pair list's scale, as in
    // SymSpell's lists), and the least listed pair is written 6.4M times.
    let pairs = [("what", "is", 61_593_600_000), ("what", "kind", 6_400_000)];
    let usage = [("surgeon", 13_490), ("issued", 53_703)];
    let lexicon = Arc::new(Lexicon::from_counts(words, pairs).with_usage(usage));
    assert_eq!(lexicon.pair_scale(), 56.0);
    let r = Repairer::new(vocab, Some(lexicon));
    // `surge on` is not listed: written less than the least pair, some 210 times per billion
    // words in the word list's scale, where `surgeon` is written 13,490 times.
    let out = r.repair("what kind of specialist is a colorectal surge on");
    assert_eq!(out.text, "what kind of specialist is a colorectal surgeon");
    assert_eq!(out.edits[0].kind, EditKind::Join);
    // A function word first goes with almost any word: `is sued` stays.
    assert!(!r.repair("what is sued").changed());
}

#[test]
fn two_written_words_run_together_into_a_string_nobody_writes_are_split() {
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("what", 1_100_000_000),
        ("is", 4_700_000_000),
        ("electric", 48_000_000),
        ("baseboard", 250_000),
        ("heating", 17_000_000),
        ("hypo", 3_000_000),
        ("function", 60_000_000),
        ("cost", 150_000_000),
    ];
    let usage = [
        ("what", 2_398_833),
        ("is", 11_748_976),
        ("electric", 52_481),
        ("baseboard", 145),
        ("heating", 15_136),
        ("hypo", 600),
        ("function", 40_000),
        ("cost", 173_780),
    ];
    let lexicon = Lexicon::from_counts(words, []).with_usage(usage);
    let r = Repairer::new(vocab.clone(), Some(Arc::new(lexicon.clone())));
    // With these counts; the real lists leave this one as typed (docs/repair.md, Limits).
    let out = r.repair("what is electricbaseboard heating");
    assert_eq!(out.text, "what is electric baseboard heating");
    assert_eq!(out.edits[0].kind, EditKind::Split);
    // Without the bonus (nor the neighbours' pairs to pay for) the string is kept: two content
    // words may be a compound.
    let plain = Repairer::with_params(
        vocab.clone(),
        Some(Arc::new(lexicon.clone())),
        Params {
            unwritten_compound_bonus: 0.0,
            run_together_pays_pairs: false,
            ..Params::default()
        },
    );
    assert!(!plain.repair("what is electricbaseboard heating").changed());
    // A word built on a prefix, and a string beside another unknown one (a name), are kept.
    assert!(!r.repair("what is hypofunction").changed());
    assert!(!r.repair("what is electricbaseboard zqxwv").changed());
    // A string people write is a word of its own.
    let written = lexicon.with_usage(usage.into_iter().chain([("electricbaseboard", 40)]));
    let r = Repairer::new(vocab, Some(Arc::new(written)));
    assert!(!r.repair("what is electricbaseboard heating").changed());
}

#[test]
fn a_written_word_of_three_letters_is_one_of_two_run_together_where_no_word_is_one_edit_away() {
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("what", 1_100_000_000),
        ("is", 4_700_000_000),
        ("the", 23_000_000_000),
        ("third", 60_000_000),
        ("law", 90_000_000),
        ("pro", 60_000_000),
        ("time", 90_000_000),
        ("rich", 60_000_000),
        ("add", 90_000_000),
        ("richard", 200_000),
    ];
    let usage = [
        ("what", 2_398_833),
        ("is", 11_748_976),
        ("the", 50_118_723),
        ("third", 58_884),
        ("law", 95_499),
        ("pro", 58_884),
        ("time", 95_499),
        ("rich", 58_884),
        ("add", 95_499),
        ("richard", 120),
    ];
    // General English writes `the third`, and the pair list lacks `third law`; `pro time` and
    // `rich add` have the same counts.
    let pairs = [
        ("the", "third", 300_000_000),
        ("the", "pro", 300_000_000),
        ("the", "rich", 300_000_000),
    ];
    let lexicon = Arc::new(Lexicon::from_counts(words, pairs).with_usage(usage));
    let r = Repairer::new(vocab.clone(), Some(lexicon.clone()));
    let out = r.repair("what is the thirdlaw");
    assert_eq!(out.text, "what is the third law");
    assert_eq!(out.edits[0].kind, EditKind::Split);
    // Off (the four letters of the longer pieces' rule), the string stays: two content words
    // may be a compound.
    let off = Repairer::with_params(
        vocab,
        Some(lexicon),
        Params {
            unwritten_compound_short_letters: 0,
            ..Params::default()
        },
    );
    assert!(!off.repair("what is the thirdlaw").changed());
    // A prefix English builds words with is no word run into another (`protime`), and a string
    // one edit from a word is as often that word's typo (`richadd`, here a rare one).
    assert!(!r.repair("what is the protime").changed());
    assert_ne!(r.repair("what is the richadd").text, "what is the rich add");
}

#[test]
fn a_string_people_write_is_split_only_where_its_words_are_written_apart_far_more() {
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("on", 3_700_000_000),
        ("as", 2_800_000_000),
        ("well", 500_000_000),
        ("south", 240_000_000),
        ("east", 150_000_000),
        ("road", 90_000_000),
        ("done", 80_000_000),
    ];
    let pairs = [
        ("south", "east", 55_000_000),
        ("east", "on", 1_200_000),
        ("on", "road", 20_000_000),
        ("as", "well", 8_600_000_000),
        ("well", "done", 30_000_000),
    ];
    let usage = [
        ("the", 53_703_180),
        ("on", 8_128_305),
        ("as", 6_000_000),
        ("well", 700_000),
        ("south", 251_189),
        ("east", 150_000),
        ("road", 120_000),
        ("done", 200_000),
        // A town people write for itself, 20 times as often as the pair list has `east on`
        // (a share of its words 40,000 per billion).
        ("easton", 1_950),
        // Two words run together, written apart thousands of times as often.
        ("aswell", 1_622),
    ];
    let lexicon = Arc::new(Lexicon::from_counts(words, pairs).with_usage(usage));
    let r = Repairer::new(vocab, Some(lexicon));
    let kept = r.repair("south easton road");
    assert!(!kept.changed(), "{:?}", kept.text);
    let out = r.repair("aswell done");
    assert_eq!(out.text, "as well done");
    assert_eq!(out.edits[0].kind, EditKind::Split);
    // Without the margin the language model splits the town (`east on` and `south east` are
    // pairs it knows).
    let off = with_params(
        &r,
        Params {
            written_split_margin: None,
            ..Params::default()
        },
    );
    assert_eq!(off.repair("south easton road").text, "south east on road");
}

#[test]
fn the_article_run_into_a_word_is_split_where_the_word_before_wants_it() {
    // `alot` is written (8,511 per billion), but general English writes `a lot` far more: the
    // article run into the next word, split where the word before goes with the article
    // (`have a`) and left where it does not (`my a`).
    let vocab = Arc::new(Vocabulary::build(DOCS[..4].iter().map(|t| ("", *t))));
    let words = [
        ("the", 40_000_000_000),
        ("a", 9_000_000_000),
        ("of", 13_000_000_000),
        ("i", 5_000_000_000),
        ("have", 2_000_000_000),
        ("my", 1_500_000_000),
        ("lot", 300_000_000),
        ("friends", 150_000_000),
    ];
    let pairs = [
        ("i", "have", 1_000_000_000),
        ("have", "a", 10_000_000_000),
        ("my", "a", 6_600_000),
        ("a", "lot", 1_100_000_000),
        ("lot", "of", 500_000_000),
        ("of", "friends", 30_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, pairs);
    let usage = [
        ("the", 53_000_000),
        ("a", 20_000_000),
        ("of", 30_000_000),
        ("i", 9_000_000),
        ("have", 3_000_000),
        ("my", 2_000_000),
        ("lot", 150_000),
        ("friends", 90_000),
        ("alot", 8_511),
    ];
    let r = Repairer::new(
        vocab.clone(),
        Some(Arc::new(lexicon.clone().with_usage(usage))),
    );
    let out = r.repair("i have alot of friends");
    assert_eq!(out.text, "i have a lot of friends");
    assert_eq!(out.edits[0].kind, EditKind::Split);
    assert!(!r.repair("my alot of friends").changed());
    let off = with_params(
        &r,
        Params {
            article_split_association: None,
            ..Params::default()
        },
    );
    assert!(!off.repair("i have alot of friends").changed());
    // A string written nearly as often as the two words apart is a word of its own.
    let written = usage.map(|(w, c)| (w, if w == "alot" { 1_000_000 } else { c }));
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(written))));
    assert!(!r.repair("i have alot of friends").changed());
}

#[test]
fn the_article_run_into_the_end_of_a_word_that_wants_it_is_split() {
    // `makesa` is written by nobody: the article run into the end of `makes`, which general
    // English writes before the article far more than chance, where the next word takes it.
    // Without the rule the article is read as a letter added (`makes person`) or kept.
    let vocab = Arc::new(Vocabulary::build(DOCS[..4].iter().map(|t| ("", *t))));
    let words = [
        ("the", 40_000_000_000),
        ("a", 9_000_000_000),
        ("what", 800_000_000),
        ("makes", 200_000_000),
        ("kinect", 2_000_000),
        ("person", 150_000_000),
        ("apple", 30_000_000),
        ("sick", 20_000_000),
    ];
    let pairs = [
        ("what", "makes", 60_000_000),
        ("makes", "a", 1_500_000_000),
        ("a", "person", 900_000_000),
        ("person", "sick", 3_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, pairs);
    let usage = [
        ("the", 53_000_000),
        ("a", 20_000_000),
        ("what", 2_400_000),
        ("makes", 290_000),
        ("kinect", 3_000),
        ("person", 350_000),
        ("apple", 60_000),
        ("sick", 75_000),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    let out = r.repair("what makesa person sick");
    assert_eq!(out.text, "what makes a person sick");
    assert_eq!(out.edits[0].kind, EditKind::Split);
    // Not before a vowel (`an` goes there), at the query's end, or after a word general
    // English does not write before the article (`kinect`).
    for kept in [
        "what makesa apple sick",
        "what makesa",
        "what kinecta person",
    ] {
        assert!(r.repair(kept).text.split(' ').all(|w| w != "a"), "{kept}");
    }
    let off = with_params(
        &r,
        Params {
            article_split_at_end: false,
            ..Params::default()
        },
    );
    assert_ne!(
        off.repair("what makesa person sick").text,
        "what makes a person sick"
    );
}

#[test]
fn a_name_people_write_run_into_a_common_word_is_split_off_it() {
    // `tristesse` is written (31 per billion) but in no word list: run into `definition`, a
    // word people write often, the string nobody writes is the two. A piece of listed words
    // (`simpli`), a prefix (`intra`), a rare word after (`otic`) or a string people write keep
    // it.
    let vocab = Arc::new(Vocabulary::build(DOCS[..4].iter().map(|t| ("", *t))));
    let words = [
        ("the", 40_000_000_000),
        ("what", 800_000_000),
        ("is", 4_700_000_000),
        ("definition", 46_000_000),
        ("national", 90_000_000),
        ("check", 80_000_000),
        ("simplify", 5_000_000),
        ("simplicity", 6_000_000),
        ("simplified", 5_000_000),
        ("otic", 50_000),
    ];
    let lexicon = Lexicon::from_counts(words, [("what", "is", 300_000_000)]);
    let usage = [
        ("the", 53_000_000),
        ("what", 2_400_000),
        ("is", 11_700_000),
        ("definition", 38_000),
        ("national", 100_000),
        ("check", 90_000),
        ("otic", 300),
        ("tristesse", 31),
        ("simpli", 17),
        ("intra", 2_089),
        ("floxin", 10),
        ("tristessecheck", 5),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    let out = r.repair("what is tristessedefinition");
    assert_eq!(out.text, "what is tristesse definition");
    assert_eq!(out.edits[0].kind, EditKind::Split);
    for kept in [
        "what is simplicheck",
        "what is intranational",
        "what is floxinotic",
        "what is tristessecheck",
    ] {
        assert!(!r.repair(kept).changed(), "{kept}");
    }
    let off = with_params(
        &r,
        Params {
            name_run_into_word_usage: 0,
            ..Params::default()
        },
    );
    assert!(!off.repair("what is tristessedefinition").changed());
}

#[test]
fn a_common_word_run_into_a_name_people_write_is_split_off_it() {
    // `arthrogryposis` is written (40 per billion) but in no word list: `definearthrogryposis`
    // is `define` run into it. Not after a prefix English makes words with (`interstim`), nor a
    // name of three letters or fewer.
    let vocab = Arc::new(Vocabulary::build(DOCS[..4].iter().map(|t| ("", *t))));
    let words = [
        ("the", 40_000_000_000),
        ("define", 30_000_000),
        ("inter", 2_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, std::iter::empty::<(&str, &str, u64)>());
    let usage = [
        ("the", 53_000_000),
        ("define", 20_000),
        ("inter", 20_000),
        ("arthrogryposis", 40),
        ("stim", 300),
        ("xyl", 300),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    let out = r.repair("definearthrogryposis");
    assert_eq!(out.text, "define arthrogryposis");
    assert_eq!(out.edits[0].kind, EditKind::Split);
    assert!(!r.repair("interstim").changed());
    assert!(!r.repair("definexyl").changed());
    let off = with_params(
        &r,
        Params {
            word_run_into_name_usage: 0,
            ..Params::default()
        },
    );
    assert!(!off.repair("definearthrogryposis").changed());
}

#[test]
fn a_function_word_run_into_a_name_people_write_is_split_off_it() {
    // `restasis` is written (120 per billion) but in no word list: `torestasis` is `to` run
    // into it. A name written more rarely is as often a piece of a longer word (`intensest`),
    // and a string one edit from a word is its typo (`toight` is `tonight`, not `to ight`).
    let vocab = Arc::new(Vocabulary::build(DOCS[..4].iter().map(|t| ("", *t))));
    let words = [
        ("the", 40_000_000_000),
        ("to", 17_000_000_000),
        ("in", 20_000_000_000),
        ("cost", 60_000_000),
        ("alternative", 30_000_000),
        ("tonight", 20_000),
        ("sing", 15_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, [("cost", "alternative", 1_000_000)]);
    let usage = [
        ("the", 53_000_000),
        ("to", 26_000_000),
        ("in", 18_000_000),
        ("cost", 90_000),
        ("alternative", 40_000),
        ("tonight", 50),
        ("sing", 30_000),
        ("restasis", 120),
        ("tensest", 16),
        ("ight", 400),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    let out = r.repair("cost alternative torestasis");
    assert_eq!(out.text, "cost alternative to restasis");
    assert_eq!(out.edits[0].kind, EditKind::Split);
    assert!(!r.repair("cost alternative intensest").changed());
    assert_ne!(r.repair("sing toight").text, "sing to ight");
    let off = with_params(
        &r,
        Params {
            function_word_run_into_name_usage: 0,
            ..Params::default()
        },
    );
    assert!(!off.repair("cost alternative torestasis").changed());
}

#[test]
fn a_question_run_together_at_the_query_start_is_split() {
    // `howtall` is written by nobody: at the query's start, where questions open with their
    // function word, it is `how tall`; kept as typed it pays for that opening. Not elsewhere
    // in the query.
    let vocab = Arc::new(Vocabulary::build(DOCS[..4].iter().map(|t| ("", *t))));
    let words = [
        ("the", 40_000_000_000),
        ("how", 570_000_000),
        ("tall", 300_000),
        ("is", 4_700_000_000),
        ("mount", 20_000_000),
        ("kenya", 5_000_000),
    ];
    let pairs = [("mount", "kenya", 600_000)];
    let lexicon = Lexicon::from_counts(words, pairs);
    let usage = [
        ("the", 53_000_000),
        ("how", 1_500_000),
        ("tall", 40_000),
        ("is", 11_700_000),
        ("mount", 30_000),
        ("kenya", 20_000),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    let off = with_params(
        &r,
        Params {
            question_start_split_cost: 0.0,
            ..Params::default()
        },
    );
    assert_eq!(
        r.repair("howtall is mount kenya").text,
        "how tall is mount kenya"
    );
    assert!(!off.repair("howtall is mount kenya").changed());
    assert!(!r.repair("kenya howtall is mount").changed());
}

#[test]
fn a_function_word_and_the_article_run_together_are_split_where_the_words_around_want_them() {
    // `isa` is written (an acronym, 3,890 per billion): after `what`, which goes with `is`,
    // and before a word that takes the article, it is `is a`; `isan` before a vowel `is an`.
    // At the query's start or end, after a word that does not want `is`, or before a word
    // that takes `an`, it stays.
    let vocab = Arc::new(Vocabulary::build(DOCS[..4].iter().map(|t| ("", *t))));
    let words = [
        ("the", 40_000_000_000),
        ("a", 9_000_000_000),
        ("an", 1_500_000_000),
        ("is", 4_700_000_000),
        ("what", 800_000_000),
        ("priority", 20_000_000),
        ("atm", 5_000_000),
        ("apple", 30_000_000),
    ];
    let pairs = [
        ("what", "is", 3_000_000_000),
        ("is", "a", 16_000_000_000),
        ("is", "an", 4_000_000_000),
        ("a", "priority", 3_000_000),
        ("an", "atm", 300_000),
    ];
    let lexicon = Lexicon::from_counts(words, pairs);
    let usage = [
        ("the", 53_000_000),
        ("a", 20_000_000),
        ("an", 3_000_000),
        ("is", 11_700_000),
        ("what", 2_400_000),
        ("priority", 40_000),
        ("atm", 20_000),
        ("apple", 60_000),
        ("isa", 3_890),
        ("isan", 110),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    assert_eq!(r.repair("what isa priority").text, "what is a priority");
    assert_eq!(r.repair("what isan atm").text, "what is an atm");
    for kept in [
        "isa priority",
        "what isa",
        "what is isa priority",
        "what isa apple",
    ] {
        assert!(
            r.repair(kept)
                .text
                .split(' ')
                .all(|w| w != "a" && w != "an"),
            "{kept}"
        );
    }
    let off = with_params(
        &r,
        Params {
            function_word_article_association: None,
            ..Params::default()
        },
    );
    assert!(!off.repair("what isa priority").changed());
}

#[test]
fn the_article_run_into_a_word_at_a_phrase_start_is_split_where_the_word_after_wants_its_word() {
    // At a sentence's start no word before can want the article: `Alot of` is split where the
    // word after goes with `lot`, and `aplastic anemia`, a term written apart as `a plastic`
    // even more, stays, since `plastic anemia` is no pair.
    let vocab = Arc::new(Vocabulary::build(DOCS[..4].iter().map(|t| ("", *t))));
    let words = [
        ("the", 40_000_000_000),
        ("a", 9_000_000_000),
        ("of", 13_000_000_000),
        ("lot", 300_000_000),
        ("friends", 150_000_000),
        ("plastic", 20_000_000),
        ("anemia", 2_000_000),
        ("bag", 20_000_000),
        ("came", 200_000_000),
        ("them", 1_000_000_000),
        ("stayed", 50_000_000),
        ("nowadays", 2_500_000),
    ];
    let pairs = [
        ("a", "lot", 1_100_000_000),
        ("lot", "of", 2_000_000_000),
        ("of", "friends", 30_000_000),
        ("a", "plastic", 20_000_000),
        ("plastic", "bag", 5_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, pairs);
    let usage = [
        ("the", 53_000_000),
        ("a", 20_000_000),
        ("of", 30_000_000),
        ("lot", 150_000),
        ("friends", 90_000),
        ("plastic", 30_000),
        ("anemia", 1_500),
        ("alot", 8_511),
        ("aplastic", 100),
        ("came", 150_000),
        ("them", 1_000_000),
        ("stayed", 40_000),
        ("nowadays", 12_900),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    let out = r.repair("Alot of friends came. Alot of them stayed");
    assert_eq!(out.text, "A lot of friends came. A lot of them stayed");
    assert!(out.edits.iter().all(|e| e.kind == EditKind::Split));
    assert!(!r.repair("aplastic anemia").changed());
    let off = with_params(
        &r,
        Params {
            article_split_at_start: false,
            ..Params::default()
        },
    );
    assert!(!off.repair("alot of friends").changed());
    // After a word that does not want the article (`nowadays a` is no pair), the word after
    // speaks as at a phrase's start.
    assert_eq!(
        r.repair("nowadays alot of friends came").text,
        "nowadays a lot of friends came"
    );
    assert!(!r.repair("nowadays aplastic anemia").changed());
    let off = with_params(
        &r,
        Params {
            article_split_by_next_word: false,
            ..Params::default()
        },
    );
    assert!(!off.repair("nowadays alot of friends came").changed());
}

#[test]
fn a_function_word_run_into_an_acronym_people_write_is_split() {
    let docs = [
        "The structure of DNA is a double helix.",
        "DNA replication copies the genome before a cell divides.",
        "Ola is a town; the sea at Ola.",
        "Ola and the sea.",
    ];
    let vocab = Arc::new(Vocabulary::build(docs.iter().map(|t| ("", *t))));
    let words = [
        ("what", 1_100_000_000),
        ("is", 4_700_000_000),
        ("the", 23_000_000_000),
        ("of", 13_000_000_000),
        ("in", 10_000_000_000),
        ("on", 3_000_000_000),
        ("structure", 40_000_000),
        ("town", 60_000_000),
    ];
    let usage = [
        ("what", 2_398_833),
        ("is", 11_748_976),
        ("the", 53_703_180),
        ("of", 26_915_348),
        ("in", 19_000_000),
        ("structure", 60_000),
        ("town", 80_000),
        ("dna", 30_903),
        ("tv", 158_489),
        ("on", 6_000_000),
        ("ola", 977),
    ];
    let lexicon = Lexicon::from_counts(words, []).with_usage(usage);
    let r = Repairer::new(vocab.clone(), Some(Arc::new(lexicon.clone())));
    let out = r.repair("what is the structure ofdna");
    assert_eq!(out.text, "what is the structure of dna");
    assert_eq!(out.edits[0].kind, EditKind::Split);
    // Neither the lexicon nor the corpus holds `tv`; the usage list does.
    assert_eq!(r.repair("what is on thetv").text, "what is on the tv");
    // A short piece people write less often beside a function word is a name's part.
    assert!(!r.repair("what town is inola").changed());
    // Turned off, the acronym stays inside the string.
    let off = Repairer::with_params(
        vocab.clone(),
        Some(Arc::new(lexicon.clone())),
        Params {
            acronym_piece_usage: 0,
            ..Params::default()
        },
    );
    assert!(!off.repair("what is the structure ofdna").changed());
    // A string people write is a word of its own.
    let written = lexicon.with_usage(usage.into_iter().chain([("ofdna", 40)]));
    let r = Repairer::new(vocab, Some(Arc::new(written)));
    assert!(!r.repair("what is the structure ofdna").changed());
}

#[test]
fn three_words_run_together_into_a_string_nobody_writes_are_split() {
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("bank", 150_000_000),
        ("of", 13_000_000_000),
        ("america", 300_000_000),
        ("online", 500_000_000),
        ("in", 9_000_000_000),
        ("to", 12_000_000_000),
        ("into", 1_000_000_000),
        ("music", 400_000_000),
        ("history", 300_000_000),
        ("poll", 30_000_000),
        ("at", 3_000_000_000),
        ("or", 2_000_000_000),
        ("pollinator", 300_000),
        ("what", 1_100_000_000),
        ("is", 4_700_000_000),
        ("a", 9_000_000_000),
    ];
    let pairs = [
        ("bank", "of", 30_000_000),
        ("of", "america", 40_000_000),
        ("poll", "in", 10_000_000),
        ("in", "at", 900_000_000),
        ("at", "or", 300_000_000),
        ("what", "is", 900_000_000),
        ("is", "a", 700_000_000),
    ];
    let usage = [
        ("bank", 100_000),
        ("of", 29_000_000),
        ("america", 150_000),
        ("online", 200_000),
        ("in", 19_000_000),
        ("to", 26_000_000),
        ("into", 1_300_000),
        ("music", 190_000),
        ("history", 150_000),
        ("poll", 20_000),
        ("at", 4_000_000),
        ("or", 3_800_000),
        ("pollinator", 300),
        ("what", 2_398_833),
        ("is", 11_748_976),
        ("a", 21_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, pairs).with_usage(usage);
    let r = Repairer::new(vocab.clone(), Some(Arc::new(lexicon.clone())));
    let out = r.repair("bankofamerica online");
    assert_eq!(out.text, "bank of america online");
    assert_eq!(out.edits[0].kind, EditKind::Split);
    assert_eq!(out.edits[0].from, "bankofamerica");
    assert_eq!(out.edits[0].distance, 2);
    // Idempotent: the words come back as they are.
    assert!(!r.repair(&out.text).changed());
    // A listed word across a cut stays one piece: two words, not `in to music`.
    assert_eq!(r.repair("history intomusic").text, "history into music");
    // The article is a piece beside the function word it goes with.
    assert_eq!(r.repair("whatisa bank").text, "what is a bank");
    // A word broken in two is no three words run together: its pieces join.
    assert_eq!(r.repair("history pollinat or").text, "history pollinator");
    // Off, the string is kept.
    let off = Repairer::with_params(
        vocab.clone(),
        Some(Arc::new(lexicon.clone())),
        Params {
            three_word_split_letters: 0,
            ..Params::default()
        },
    );
    assert!(!off.repair("bankofamerica online").changed());
    // Nor is a string split where general English writes none of its pairs, or where people
    // write it (a brand, an address).
    let unpaired = Lexicon::from_counts(words, []).with_usage(usage);
    let r = Repairer::new(vocab.clone(), Some(Arc::new(unpaired)));
    assert!(!r.repair("bankofamerica online").changed());
    let written = lexicon.with_usage(usage.into_iter().chain([("bankofamerica", 300)]));
    let r = Repairer::new(vocab, Some(Arc::new(written)));
    assert!(!r.repair("bankofamerica online").changed());
}

#[test]
fn words_run_together_pay_for_their_neighbours_as_a_typo_does() {
    let docs = ["A room is warm in the winter.", "The winter is cold."];
    let vocab = Arc::new(Vocabulary::build(docs.iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("of", 13_000_000_000),
        ("and", 13_000_000_000),
        ("is", 4_700_000_000),
        ("over", 1_000_000_000),
        ("who", 600_000_000),
        ("cheap", 60_000_000),
        ("electric", 48_000_000),
        ("heater", 6_000_000),
        ("heaters", 2_000_000),
        ("baseboard", 1_500_000),
    ];
    let usage = [
        ("is", 11_748_976),
        ("who", 2_000_000),
        ("over", 1_000_000),
        ("cheap", 60_000),
        ("electric", 52_000),
        ("heater", 6_000),
        ("heaters", 2_000),
        ("baseboard", 145),
    ];
    let lexicon = Arc::new(Lexicon::from_counts(words, []).with_usage(usage));
    let r = Repairer::new(vocab.clone(), Some(lexicon.clone()));
    let off = Repairer::with_params(
        vocab,
        Some(lexicon),
        Params {
            run_together_pays_pairs: false,
            ..Params::default()
        },
    );
    // Kept, the string pays for its two known neighbours as its split does for its pairs.
    let out = r.repair("cheap electricbaseboard heater");
    assert_eq!(out.text, "cheap electric baseboard heater");
    assert_eq!(out.edits[0].kind, EditKind::Split);
    assert!(!off.repair("cheap electricbaseboard heater").changed());
    // What the query asks about is believed as typed (a brand: `who is legalshield`).
    assert!(!r.repair("who is electricbaseboard").changed());
    // A split that begins with a piece English builds words from is as likely one word.
    assert!(!r.repair("cheap overheaters heater").changed());
}

#[test]
fn a_string_written_far_less_than_its_two_words_apart_is_split() {
    let docs = ["A room is warm in the winter.", "The winter is cold."];
    let vocab = Arc::new(Vocabulary::build(docs.iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("of", 13_000_000_000),
        ("and", 13_000_000_000),
        ("price", 100_000_000),
        ("house", 250_000_000),
        ("over", 1_000_000_000),
    ];
    let pairs = [("of", "the", 4_000_000_000), ("and", "over", 48_000_000)];
    let usage = [
        ("the", 53_703_180),
        ("of", 25_118_864),
        ("price", 100_000),
        ("house", 250_000),
        ("ofthe", 40_000),
        ("andover", 871),
    ];
    let lexicon = Arc::new(Lexicon::from_counts(words, pairs).with_usage(usage));
    let r = Repairer::new(vocab.clone(), Some(lexicon.clone()));
    let off = Repairer::with_params(
        vocab.clone(),
        Some(lexicon.clone()),
        Params {
            written_apart_margin: 0.0,
            ..Params::default()
        },
    );
    // General English writes `of the` e^7.5 times more than anyone writes `ofthe`: its writings
    // are the two words run together.
    let out = r.repair("price ofthe house");
    assert_eq!(out.text, "price of the house");
    assert_eq!(out.edits[0].kind, EditKind::Split);
    assert!(!off.repair("price ofthe house").changed());
    // A town people write, whose two words apart are written only e^7 times more, stays.
    assert!(!r.repair("price andover").changed());
    let lower = Repairer::with_params(
        vocab,
        Some(lexicon),
        Params {
            written_apart_margin: 6.0,
            ..Params::default()
        },
    );
    assert_eq!(lower.repair("price andover").text, "price and over");
}

#[test]
fn a_phrase_ending_in_a_typo_is_not_split_into_a_trailing_function_word() {
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("in", 8_000_000_000),
        ("fact", 50_000_000),
        ("mean", 100_000_000),
        ("meaning", 60_000_000),
        ("cabin", 5_000_000),
        ("fever", 10_000_000),
    ];
    let pairs = [
        ("mean", "in", 20_000_000),
        ("in", "fact", 40_000_000),
        ("fever", "mean", 50_000),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(Lexicon::from_counts(words, pairs))));
    // One edit from a word, at the query's end or before a mark: that word's typo.
    for (typed, meant) in [
        ("cabin fever meanin", "cabin fever meaning"),
        ("cabin fever meanin?", "cabin fever meaning?"),
    ] {
        assert_eq!(r.repair(typed).text, meant, "{typed:?}");
    }
    // Elsewhere the split stands, and a mark after a word leaves it whole to split.
    assert_eq!(r.repair("infact cabin fever").text, "in fact cabin fever");
    assert_eq!(r.repair("infact, cabin fever").text, "in fact, cabin fever");
}

#[test]
fn fragments_people_write_are_joined_into_the_word_they_come_from() {
    let docs = ["A room is warm in the winter.", "The winter is cold."];
    let vocab = Arc::new(Vocabulary::build(docs.iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("of", 13_000_000_000),
        ("and", 13_000_000_000),
        ("engineering", 86_000_000),
        ("clinic", 30_000_000),
    ];
    let usage = |clinic: u64| {
        let lists = [
            ("the", 53_703_180),
            ("engineering", 63_096),
            ("clinic", clinic),
            ("cli", 692),
            ("nic", 2_512),
        ];
        Arc::new(Lexicon::from_counts(words, []).with_usage(lists))
    };
    let with = |lexicon: Arc<Lexicon>, margin: f64| {
        Repairer::with_params(
            vocab.clone(),
            Some(lexicon),
            Params {
                fragment_usage_margin: margin,
                ..Params::default()
            },
        )
    };
    let defaults = Params::default().fragment_usage_margin;
    // `cli` is written e^1.5 times less than `clinic`: its writings are no evidence against it.
    let out = with(usage(3_000), defaults).repair("engineering cli nic");
    assert_eq!(out.text, "engineering clinic");
    assert_eq!(out.edits[0].kind, EditKind::Join);
    assert!(!with(usage(3_000), 0.0)
        .repair("engineering cli nic")
        .changed());
    // Pieces written about as often as the word they would join into are words of their own.
    assert!(!with(usage(1_000), defaults)
        .repair("engineering cli nic")
        .changed());
}

#[test]
fn a_short_unknown_word_is_read_as_a_function_word_slip_or_left() {
    let r = english();
    assert_eq!(r.repair("wht is anemia").text, "what is anemia");
    assert_eq!(
        r.repair("causes of anemia whn").text,
        "causes of anemia when"
    );
    // Short unknown words are otherwise acronyms: `irs` is no `is` with a stray letter, `hsa`
    // no `has` with two letters swapped.
    assert!(!r.repair("irs causes of anemia").changed());
    assert!(!r.repair("hsa causes of anemia").changed());
    assert!(!r.repair("tsa causes").changed());
}

#[test]
fn a_three_letter_string_is_a_content_word_slipped_where_general_english_writes_a_set_phrase() {
    // Counts in the proportions of SymSpell's lists: `to find` is written 6.1 nats over
    // chance, `is best` 4.9, `for used` is not listed.
    let words = [
        ("how", 570_000_000),
        ("to", 12_000_000_000),
        ("the", 23_000_000_000),
        ("find", 500_000_000),
        ("what", 800_000_000),
        ("is", 4_700_000_000),
        ("in", 8_500_000_000),
        ("best", 400_000_000),
        ("for", 5_900_000_000),
        ("used", 400_000_000),
        ("requirement", 20_000_000),
        ("area", 200_000_000),
        ("get", 1_000_000_000),
        ("rid", 50_000_000),
        ("of", 13_000_000_000),
        // The rest of the list's words, so that its total is SymSpell's (5.4e11).
        ("others", 470_000_000_000),
    ];
    let pairs = [
        ("how", "to", 5_500_000_000),
        ("to", "find", 5_000_000_000),
        ("find", "the", 2_000_000_000),
        ("what", "is", 2_100_000_000),
        ("is", "best", 430_000_000),
        ("best", "in", 370_000_000),
        ("used", "for", 2_000_000_000),
        ("the", "area", 400_000_000),
        ("to", "get", 1_500_000_000),
        ("get", "rid", 60_000_000),
        ("rid", "of", 45_000_000),
    ];
    let repairer = |p: Params| {
        Repairer::with_params(
            Arc::new(Vocabulary::build(
                [("", "The area of a trapezoid.")].into_iter(),
            )),
            Some(Arc::new(Lexicon::from_counts(words, pairs))),
            p,
        )
    };
    let r = repairer(Params::default());
    assert_eq!(r.repair("how to fnd the area").text, "how to find the area");
    // A key next to the right one: `get rid` is written 6.5 nats over chance.
    assert_eq!(r.repair("how to get ric of").text, "how to get rid of");
    // Pairs any word makes with a function word say nothing of a short string: an acronym.
    assert!(!r.repair("what is bst in").changed());
    assert!(!r.repair("requirement for usd").changed());
    let any_pair = repairer(Params {
        set_phrase_over_chance: 4.0,
        ..Params::default()
    });
    assert_eq!(any_pair.repair("what is bst in").text, "what is best in");
    // The corpus alone, as before.
    let corpus_only = repairer(Params {
        three_letter_set_phrases: false,
        ..Params::default()
    });
    assert!(!corpus_only.repair("how to fnd the area").changed());
}

#[test]
fn a_short_unknown_word_is_a_dropped_letter_when_the_corpus_writes_the_pair() {
    let lexicon = || {
        Some(Arc::new(Lexicon::from_counts(
            [
                ("who", 300_000_000),
                ("is", 4_700_000_000),
                ("robert", 60_000_000),
                ("gray", 30_000_000),
                ("captain", 20_000_000),
                ("definition", 40_000_000),
                ("rosa", 3_000_000),
            ],
            [],
        )))
    };
    let with_pair = Repairer::new(
        Arc::new(Vocabulary::build(
            [
                ("Robert Gray", "Robert Gray was a sea captain."),
                ("Captain Gray", "Robert Gray sailed up the Columbia."),
            ]
            .into_iter(),
        )),
        lexicon(),
    );
    assert_eq!(
        with_pair.repair("who is robert gra").text,
        "who is robert gray"
    );
    // Without the pair in the corpus the string may be anything: an acronym, a name.
    let without = Repairer::new(
        Arc::new(Vocabulary::build(
            [("Gray", "Gray is a colour. Robert sailed up the Columbia.")].into_iter(),
        )),
        lexicon(),
    );
    assert!(!without.repair("who is robert gra").changed());
    // An acronym the corpus never writes as the longer word beside its neighbour stays.
    assert!(!with_pair.repair("rsa definition").changed());
}

#[test]
fn a_capitalised_word_nobody_writes_is_a_misspelt_name() {
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("prime", 90_000_000),
        ("minister", 60_000_000),
        ("canada", 80_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, []);
    let usage = [("prime", 90_000), ("canada", 80_000), ("canaan", 900)];
    let with_usage = Repairer::new(
        vocab.clone(),
        Some(Arc::new(lexicon.clone().with_usage(usage))),
    );
    let out = with_usage.repair("Prime minister Canaa");
    assert_eq!(out.text, "Prime minister Canada");
    assert_eq!(out.edits[0].kind, EditKind::NonWord);
    // A name people write is theirs to spell, and without a usage list no name is touched.
    assert!(!with_usage.repair("Prime minister Canaan").changed());
    let without = Repairer::new(vocab, Some(Arc::new(lexicon)));
    assert!(!without.repair("Prime minister Canaa").changed());
}

#[test]
fn a_misspelling_people_write_is_still_read_as_the_word_they_mean() {
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("separate", 60_000_000),
        ("bank", 90_000_000),
        ("accounts", 40_000_000),
        ("the", 23_000_000_000),
        ("and", 10_000_000_000),
        ("has", 2_000_000_000),
        ("capital", 60_000_000),
        ("limits", 30_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, []);
    // The usage list counts the misspellings too, because so many people make them; an acronym
    // is written for itself, far more than a typo of the word it resembles.
    let usage = [
        ("separate", 67_608),
        ("seperate", 661),
        ("the", 53_703_180),
        ("teh", 1_096),
        ("has", 2_344_229),
        ("hsa", 437),
        ("separator", 2_000),
        ("separater", 600),
    ];
    let r = Repairer::new(vocab.clone(), Some(Arc::new(lexicon.with_usage(usage))));
    assert_eq!(
        r.repair("seperate bank accounts").text,
        "separate bank accounts"
    );
    assert_eq!(r.repair("teh capital").text, "the capital");
    assert!(!r.repair("hsa limits").changed());
    // Written nearly as often as the word it resembles: a word of its own.
    assert!(!r.repair("separater bank").changed());
    // A typed stem whose ending was lost is completed; a form the lists lack is not trimmed.
    let r = english();
    assert_eq!(r.repair("symptom of anemia").text, "symptom of anemia");
    assert_eq!(r.repair("bicycl repair").text, "bicycle repair");
    assert!(!r.repair("bicycles repair").changed());
}

#[test]
fn a_string_people_write_is_no_typo_of_a_word_two_edits_away() {
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("is", 4_700_000_000),
        ("it", 3_000_000_000),
        ("okay", 30_000_000),
        ("to", 12_000_000_000),
        ("defeat", 300_000_000),
        ("a", 9_000_000_000),
        ("raid", 8_000_000),
        ("definitely", 50_000_000),
    ];
    let pairs = [
        ("to", "defeat", 1_500_000_000),
        ("defeat", "a", 100_000_000),
    ];
    let usage = [
        ("defrag", 60),
        ("defeat", 19_055),
        ("raid", 12_000),
        ("definitely", 52_000),
        ("definately", 900),
    ];
    let lexicon = Arc::new(Lexicon::from_counts(words, pairs).with_usage(usage));
    let with = Repairer::new(vocab.clone(), Some(lexicon.clone()));
    let without = Repairer::with_params(
        vocab,
        Some(lexicon),
        Params {
            written_word_usage: 0,
            rarely_written_two_edit_cost: None,
            ..Params::default()
        },
    );
    let query = "is it okay to defrag a raid";
    assert_eq!(without.repair(query).text, "is it okay to defeat a raid");
    assert!(!with.repair(query).changed());
    // A written string the usage rule reads as a typo is still corrected.
    assert_eq!(
        with.repair("it is definately okay").text,
        "it is definitely okay"
    );
}

#[test]
fn a_word_asked_the_meaning_of_is_corrected_where_the_usage_list_reads_it_as_a_typo() {
    // People look up the words they cannot spell: the protection of a word whose meaning is
    // asked (a rare term, a name) gives way where the string is a common word's typo.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("what", 800_000_000),
        ("does", 300_000_000),
        ("mean", 80_000_000),
        ("meaning", 28_000_000),
        ("definitely", 50_000_000),
        ("defiantly", 1_000_000),
        ("hired", 20_000_000),
    ];
    let usage = [
        ("definitely", 52_000),
        ("definately", 900),
        ("hirad", 30),
        ("hired", 2_000_000),
    ];
    let lexicon = Arc::new(Lexicon::from_counts(words, []).with_usage(usage));
    // However much more changing such a word costs, a typo is free of it.
    let dear = Params {
        defined_word_cost: 20.0,
        ..Params::default()
    };
    let free = Repairer::with_params(vocab.clone(), Some(lexicon.clone()), dear.clone());
    let held = Repairer::with_params(
        vocab,
        Some(lexicon),
        Params {
            defined_typo_free: false,
            ..dear
        },
    );
    for (typed, meant) in [
        ("definately meaning", "definitely meaning"),
        ("what does definately mean", "what does definitely mean"),
    ] {
        assert_eq!(free.repair(typed).text, meant);
        assert!(!held.repair(typed).changed(), "{typed}");
    }
    // A short one is a name or an acronym as often.
    assert!(!free.repair("what does hirad mean").changed());
}

#[test]
fn two_keys_rolled_at_either_end_are_a_typo_though_an_end_letter_changed() {
    // Words of four to six letters whose first or last letter differs from a common word's are
    // mostly names and brands (`vcenter`, `usaid`), but a swap of the last or first two letters
    // puts no letter out of the word: as often a typo as a swap inside it.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("why", 300_000_000),
        ("do", 2_000_000_000),
        ("we", 1_500_000_000),
        ("push", 20_000_000),
        ("others", 90_000_000),
        ("away", 2_000_000),
        ("teams", 30_000_000),
        ("nba", 5_000_000),
        ("today", 200_000_000),
        ("have", 12_000_000),
    ];
    let usage = [
        ("why", 600_000),
        ("push", 40_000),
        ("others", 200_000),
        ("away", 300_000),
        ("teams", 50_000),
        ("today", 400_000),
        ("todya", 40_000),
        ("have", 3_000_000),
    ];
    let pairs = [
        ("why", "do", 20_000_000),
        ("do", "we", 60_000_000),
        ("we", "push", 1_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, pairs).with_usage(usage);
    let r = Repairer::new(vocab, Some(Arc::new(lexicon)));
    assert_eq!(
        r.repair("why do we push others awya").text,
        "why do we push others away"
    );
    // So does a swap of the first two.
    assert_eq!(
        r.repair("why do we push others ahve").text,
        "why do we push others have"
    );
    // Written for itself, a tenth as often as the word: the usage margin keeps it.
    assert!(!r.repair("nba teams todya").changed());
}

#[test]
fn a_misspelling_of_a_rare_word_is_read_as_that_word_though_the_model_floors_it() {
    // `migraine` is a word of general English the corpus never writes: rare enough that the
    // language model gives it its floor, below the prior of an unknown word kept as typed.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("with", 5_000_000_000),
        ("treatment", 60_000_000),
        ("aura", 2_000_000),
        ("migraine", 200_000),
        ("muscle", 30_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, []);
    let usage = [
        ("with", 5_000_000),
        ("treatment", 60_000),
        ("migraine", 2_138),
        ("migrane", 11),
        ("migrene", 1_500),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    assert_eq!(
        r.repair("migrane with aura treatment").text,
        "migraine with aura treatment"
    );
    // Written nearly as often as the word it resembles: a word of its own.
    assert!(!r.repair("migrene with aura treatment").changed());
    // A string nobody writes gets no lift: as often a name as a typo.
    assert!(!r.repair("migraune with aura treatment").changed());
}

#[test]
fn a_string_nobody_writes_with_two_letters_of_a_rare_word_swapped_is_its_typo() {
    // `walmart` is a word general English counts rarely: the model's floor, below an unknown
    // word kept as typed. Nobody writes `walmrat`, a short string, as often a name as a typo,
    // but two letters swapped are a slip of the hand.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("jobs", 180_000_000),
        ("near", 200_000_000),
        ("walmart", 100_000),
        ("walnut", 150_000),
        ("drink", 1_100_000),
    ];
    let lexicon = Lexicon::from_counts(words, []);
    let usage = [
        ("the", 53_000_000),
        ("jobs", 95_000),
        ("near", 100_000),
        ("walmart", 8_913),
        ("walnut", 2_000),
        ("drink", 79_433),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    assert_eq!(r.repair("walmrat jobs near").text, "walmart jobs near");
    let without = with_params(
        &r,
        Params {
            unwritten_swap_letters: 0,
            ..Params::default()
        },
    );
    assert!(!without.repair("walmrat jobs near").changed());
    // A letter for another, or one more, is no slip so plain: as often a name (`walnat`).
    assert!(!r.repair("walnat jobs near").changed());
    assert!(!r.repair("walmarat jobs near").changed());
    // The first two letters swapped pay the first letter's share as before.
    assert!(!r.repair("awlmart jobs near").changed());
    // A common word swapped needs no lift, but a string nobody writes costs under a nat to
    // keep: kept, a swap pays for being a slip.
    assert_eq!(r.repair("drnik near").text, "drink near");
    let free_to_keep = with_params(
        &r,
        Params {
            unwritten_swap_keep_cost: 0.0,
            ..Params::default()
        },
    );
    assert!(!free_to_keep.repair("drnik near").changed());
}

#[test]
fn a_plural_or_past_that_kept_its_y_is_the_word_s_form_though_people_write_it() {
    // Learners and children write `-ys` and `-yed` for every word in `-y` after a consonant,
    // so often that the usage list holds the strings (`storys` 87 per billion, `tryed` 110):
    // each is the word's form spelt wrong, held to the variant margin, not the short-word one
    // names need, and one error, not two edits.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("bedtime", 2_000_000),
        ("stories", 115_000_000),
        ("stores", 40_000_000),
        ("story", 138_000_000),
        ("for", 3_000_000_000),
        ("kids", 60_000_000),
        ("she", 1_000_000_000),
        ("tried", 100_000_000),
        ("to", 12_000_000_000),
        ("help", 300_000_000),
        ("fries", 10_000_000),
        ("electronics", 20_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, []);
    let usage = [
        ("bedtime", 2_000),
        ("stories", 89_125),
        ("storys", 87),
        ("stores", 40_000),
        ("story", 138_000),
        ("for", 3_000_000),
        ("kids", 60_000),
        ("she", 1_000_000),
        ("tried", 144_544),
        ("tryed", 110),
        ("to", 12_000_000),
        ("help", 300_000),
        ("fries", 6_457),
        ("frys", 66),
        ("electronics", 20_000),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    let out = r.repair("bedtime storys for kids");
    assert_eq!(out.text, "bedtime stories for kids");
    assert_eq!(out.edits[0].distance, 1);
    assert_eq!(r.repair("she tryed to help").text, "she tried to help");
    // A name's possessive written without its apostrophe is written more for itself
    // (`frys electronics`: `fries` is only a hundred times as common).
    assert!(!r.repair("frys electronics").changed());
    // Held to the short-word margin, as a name beside a word is, both stay (and where the
    // string is not spared its pairs as typed, the variant margin alone decides).
    let strict = with_params(
        &r,
        Params {
            variant_usage_margin: 6.0,
            short_written_pairs_margin: None,
            short_unindexed_typo_usage_margin: None,
            ..Params::default()
        },
    );
    assert!(!strict.repair("she tryed to help").changed());
}

#[test]
fn a_string_nobody_writes_that_spells_a_rare_word_s_sound_is_its_typo() {
    // `faucet` and `mechanic` sit at the model's floor, below an unknown word kept as typed.
    // Nobody writes `fawcet` or `mekanic`: the words' sounds spelt the rules' way (`aw` for
    // `au`, `k` for the `ch` of Greek words), how a word the writer knows by ear goes wrong.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("leaky", 650_000),
        ("faucet", 100_000),
        ("facet", 900_000),
        ("mechanic", 100_000),
        ("salary", 20_000_000),
        ("cities", 60_000_000),
        ("best", 300_000_000),
        ("coherent", 100_000),
        ("argument", 40_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, []);
    let usage = [
        ("the", 53_000_000),
        ("leaky", 1_148),
        ("faucet", 1_175),
        ("facet", 2_000),
        ("mechanic", 3_000),
        ("salary", 30_000),
        ("cities", 60_000),
        ("best", 300_000),
        ("coherent", 1_000),
        ("argument", 20_000),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    assert_eq!(r.repair("the leaky fawcet").text, "the leaky faucet");
    // An ending's unstressed vowel spelt the other way English spells it.
    assert_eq!(
        r.repair("the coherant argument").text,
        "the coherent argument"
    );
    // Two edits apart for the alignment, one sound for the writer.
    assert_eq!(r.repair("mekanic salary").text, "mechanic salary");
    // A plural that kept its `y`.
    assert_eq!(r.repair("best citys").text, "best cities");
    let without = with_params(
        &r,
        Params {
            unwritten_respelling: false,
            unwritten_vowel_letters: 0,
            ..Params::default()
        },
    );
    assert!(!without.repair("the leaky fawcet").changed());
    assert!(!without.repair("mekanic salary").changed());
    assert!(!without.repair("the coherant argument").changed());
    // Two edits that spell no sound the rules know are as often a name.
    assert!(!r.repair("mevanic salary").changed());
}

#[test]
fn a_string_nobody_writes_with_a_doubling_moved_is_its_word_s_typo() {
    // `dismiss` sits at the model's floor, below an unknown word kept as typed. Nobody writes
    // `dissmis`: its letters are the word's, with another of them doubled, how a writer who
    // knows the word but not which letter English doubles spells it.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("claim", 60_000_000),
        ("dismiss", 100_000),
        ("motto", 100_000),
        ("motor", 50_000_000),
        ("club", 60_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, []);
    let usage = [
        ("the", 53_000_000),
        ("claim", 60_000),
        ("dismiss", 2_000),
        ("motto", 2_000),
        ("motor", 50_000),
        ("club", 60_000),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    assert_eq!(r.repair("dissmis the claim").text, "dismiss the claim");
    let without = with_params(
        &r,
        Params {
            unwritten_doubling_moved: false,
            ..Params::default()
        },
    );
    assert!(!without.repair("dissmis the claim").changed());
    // The doubling lifts the word it spells, not the string's other readings: `motoo` is
    // `motto` so, and no likelier `motor` for it. (Kept as typed, a string nobody writes pays
    // for its pair with `club`, which alone may make it `motor`: that rule is off here.)
    let unpaired = with_params(
        &r,
        Params {
            unwritten_pays_pairs_letters: 0,
            ..Params::default()
        },
    );
    assert_ne!(unpaired.repair("motoo club").text, "motor club");
}

#[test]
fn a_string_nobody_writes_with_a_doubling_lost_is_its_word_s_typo() {
    // `ferrari` and `zucchini` sit at the model's floor, below an unknown word kept as typed.
    // Nobody writes `ferari` or `zuchini`: the words with a doubled letter written once, the
    // commonest slip of spelling, which a name the lists lack rarely is.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("used", 300_000_000),
        ("ferrari", 100_000),
        ("ferry", 2_000_000),
        ("zucchini", 100_000),
        ("bread", 30_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, []);
    let usage = [
        ("the", 53_000_000),
        ("used", 300_000),
        ("ferrari", 7_586),
        ("ferry", 5_000),
        ("zucchini", 912),
        ("bread", 30_000),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    assert_eq!(r.repair("used ferari").text, "used ferrari");
    assert_eq!(r.repair("zuchini bread").text, "zucchini bread");
    let without = with_params(
        &r,
        Params {
            unwritten_doubling_lost: false,
            unwritten_letter_lost_letters: 0,
            ..Params::default()
        },
    );
    assert!(!without.repair("used ferari").changed());
    assert!(!without.repair("zuchini bread").changed());
    // A vowel for a vowel is no doubling lost (it is read as an unstressed vowel's spelling,
    // `unwritten_vowel_letters`, of its own).
    let doubling_only = with_params(
        &r,
        Params {
            unwritten_vowel_letters: 0,
            ..Params::default()
        },
    );
    assert!(!doubling_only.repair("zuccheni bread").changed());
    assert_eq!(r.repair("zuccheni bread").text, "zucchini bread");
}

#[test]
fn a_string_nobody_writes_with_a_letter_lost_inside_is_its_word_s_typo() {
    // `bruising` and `mechanic` sit at the model's floor, below an unknown word kept as typed.
    // Nobody writes `brusing` or `mechnic`: the words with a letter left out inside them, the
    // commonest slip of the hand.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("causes", 60_000_000),
        ("bruising", 500_000),
        ("heavy", 40_000_000),
        ("mechanic", 900_000),
        ("salary", 9_000_000),
        ("synonym", 900_000),
    ];
    let lexicon = Lexicon::from_counts(words, []);
    let usage = [
        ("the", 53_000_000),
        ("causes", 60_000),
        ("bruising", 1_514),
        ("heavy", 60_000),
        ("mechanic", 5_000),
        ("salary", 20_000),
        ("synonym", 2_000),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    assert_eq!(r.repair("causes brusing").text, "causes bruising");
    assert_eq!(
        r.repair("heavy mechnic salary").text,
        "heavy mechanic salary"
    );
    let without = with_params(
        &r,
        Params {
            unwritten_letter_lost_letters: 0,
            short_unindexed_typo_usage_margin: None,
            ..Params::default()
        },
    );
    assert!(!without.repair("causes brusing").changed());
    assert!(!without.repair("heavy mechnic salary").changed());
    // From six letters (`synoym`); five only under the likelier word's guard
    // (`short_unwritten_letter_lost_letters`, off here).
    assert_eq!(r.repair("the synoym").text, "the synonym");
    let seven = with_params(
        &r,
        Params {
            unwritten_letter_lost_letters: 7,
            short_unwritten_letter_lost_letters: 0,
            short_unindexed_typo_usage_margin: None,
            ..Params::default()
        },
    );
    assert!(!seven.repair("the synoym").changed());
    assert_eq!(seven.repair("causes brusing").text, "causes bruising");
}

#[test]
fn a_string_nobody_writes_with_its_last_letter_lost_is_its_word_s_typo() {
    // `stomach` sits at the model's floor; nobody writes `stomac`: the word cut short.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("pain", 60_000_000),
        ("stomach", 500_000),
        ("shop", 90_000_000),
        ("overhauling", 500_000),
        ("work", 200_000_000),
        ("pathologic", 500_000),
        ("pathologists", 30_000),
    ];
    let lexicon = Lexicon::from_counts(words, []);
    let usage = [
        ("the", 53_000_000),
        ("pain", 60_000),
        ("stomach", 1_514),
        ("shop", 20_000),
        ("overhauling", 1_000),
        ("work", 300_000),
        ("pathologic", 1_000),
        ("pathologists", 800),
        ("sts", 20_000),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    assert_eq!(r.repair("stomac pain").text, "stomach pain");
    let without = with_params(
        &r,
        Params {
            unwritten_last_lost: false,
            ..Params::default()
        },
    );
    assert!(!without.repair("stomac pain").changed());
    // The `-in'` of speech is written so on purpose.
    assert!(!r.repair("overhaulin shop").changed());
    // A piece of a word broken in two joins its other piece.
    assert_eq!(r.repair("pathologi sts work").text, "pathologists work");
}

#[test]
fn a_string_nobody_writes_with_an_unstressed_vowel_spelt_another_way_is_its_word_s_typo() {
    // `selenium` sits at the model's floor; nobody writes `seleneum`: its `i` spelt `e`.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("reacted", 300_000),
        ("selenium", 300_000),
        ("canopies", 300_000),
        ("systemic", 300_000),
    ];
    let lexicon = Lexicon::from_counts(words, []);
    let usage = [
        ("the", 53_000_000),
        ("reacted", 1_000),
        ("selenium", 1_000),
        ("canopies", 1_000),
        ("systemic", 1_000),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    assert_eq!(r.repair("reacted seleneum").text, "reacted selenium");
    assert_eq!(r.repair("reacted selinium").text, "reacted selenium");
    // `i` and `y` spell one sound.
    assert_eq!(r.repair("reacted sistemic").text, "reacted systemic");
    let without = with_params(
        &r,
        Params {
            unwritten_vowel_letters: 0,
            ..Params::default()
        },
    );
    assert!(!without.repair("reacted seleneum").changed());
    assert!(!without.repair("reacted sistemic").changed());
    // `o` and `u` for another vowel make names as often (`canopius`), and the last letter or
    // a shorter string is no such slip.
    assert!(!r.repair("reacted seleniom").changed());
    assert!(!r.repair("the canopius").changed());
}

#[test]
fn a_string_nobody_writes_with_a_consonant_struck_for_the_key_beside_it_is_its_word_s_typo() {
    // `bequests` and `receiver` sit at the model's floor, below the unknown word's prior;
    // nobody writes `bequexts`: its `s` struck as the `x` beside it.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("bequests", 30_000),
        ("receiver", 30_000),
    ];
    let lexicon = Lexicon::from_counts(words, []);
    let usage = [
        ("the", 53_000_000),
        ("bequests", 1_000),
        ("receiver", 1_000),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    assert_eq!(r.repair("bequexts").text, "bequests");
    let without = with_params(
        &r,
        Params {
            unwritten_key_letters: 0,
            ..Params::default()
        },
    );
    assert!(!without.repair("bequexts").changed());
    // A vowel for the key beside it is as often a vowel spelt wrong, and the first and the
    // last letter are a name's as often.
    assert!(!r.repair("receuver").changed());
    assert!(!r.repair("vequests").changed());
    assert!(!r.repair("bequestd").changed());
}

#[test]
fn a_string_nobody_writes_with_a_consonant_struck_beside_its_neighbour_s_key_is_its_word_s_typo() {
    // `kitchen` sits at the model's floor; nobody writes `kitcvhen`: the `v` beside the `c`
    // struck with it.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("kitchen", 30_000),
        ("canopus", 30_000),
    ];
    let lexicon = Lexicon::from_counts(words, []);
    let usage = [("the", 53_000_000), ("kitchen", 1_000), ("canopus", 1_000)];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    assert_eq!(r.repair("kitcvhen").text, "kitchen");
    let without = with_params(
        &r,
        Params {
            unwritten_key_added_letters: 0,
            ..Params::default()
        },
    );
    assert!(!without.repair("kitcvhen").changed());
    // Names add vowels to words, and a letter next to neither neighbour's key is no such slip.
    assert!(!r.repair("canopius").changed());
    assert!(!r.repair("kitcphen").changed());
}

#[test]
fn a_five_letter_string_nobody_writes_with_a_letter_lost_is_the_likeliest_word_s_typo() {
    // `wisdom` sits at the model's floor; nobody writes `wsdom`: its `i` left out.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("wisdom", 30_000),
        ("accuse", 30_000),
        ("cause", 30_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, []);
    let usage = [
        ("the", 53_000_000),
        ("wisdom", 1_000),
        ("accuse", 1_000),
        ("cause", 100_000),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    assert_eq!(r.repair("wsdom").text, "wisdom");
    let without = with_params(
        &r,
        Params {
            short_unwritten_letter_lost_letters: 0,
            ..Params::default()
        },
    );
    assert!(!without.repair("wsdom").changed());
    // `acuse` is `cause` two letters swapped, likelier than `accuse` with a letter lost.
    assert_ne!(r.repair("acuse").text, "accuse");
}

#[test]
fn a_letter_lost_inside_lowers_its_word_unless_a_name_may_be_meant() {
    // Lifted to the floor's gap alone, `vegetable` still loses to `vegtable` kept as typed: the
    // lost `e` costs more than keeping a string nobody writes. Lowered as a doubling moved is,
    // it wins, but not where the word is capitalised or beside a capitalised word no list
    // holds: names differ from words so too.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("vegetable", 400_000),
        ("soup", 5_000_000),
        ("edward", 20_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, []);
    let usage = [
        ("the", 53_000_000),
        ("vegetable", 8_710),
        ("soup", 10_000),
        ("edward", 30_000),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    let lifted_only = with_params(
        &r,
        Params {
            unwritten_letter_lost_lowers: false,
            ..Params::default()
        },
    );
    // The corrected reading gains what keeping a slip pays, and the string kept as typed
    // nothing.
    let gain = |q: &str| {
        let (lowered, lifted) = (r.explain(q), lifted_only.explain(q));
        assert_eq!(lowered.typed_score, lifted.typed_score, "{q}");
        lowered.best_score - lifted.best_score
    };
    let lowered = Params::default().unwritten_swap_keep_cost;
    assert!((gain("vegtable soup") - lowered).abs() < 1e-9);
    assert!((gain("Edward vegtable") - lowered).abs() < 1e-9);
    assert_eq!(r.repair("vegtable soup").text, "vegetable soup");
    // Capitalised, or beside a capitalised word no list holds: lifted only.
    assert_eq!(gain("Vegtable soup"), 0.0);
    assert_eq!(gain("Zorvath vegtable"), 0.0);
    assert_eq!(gain("vegtable Zorvath"), 0.0);
}

#[test]
fn a_written_string_before_a_possessive_is_a_name_and_kept() {
    // `peyer` is written (Peyer's patches) though no word list holds it, and it is no common
    // word's typo; before `'s` it is a name's possessive and stays, where unguarded the common
    // `peter`, a key away, wins. Short strings are slips of short words as often (`worl's`),
    // and a string nobody writes before `'s` is still a typo (`peteer's`).
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("peter", 900_000_000),
        ("patch", 20_000_000),
        ("world", 300_000_000),
        ("population", 40_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, [("world", "population", 900_000)]);
    let usage = [
        ("the", 53_000_000),
        ("peter", 60_000),
        ("peyer", 33),
        ("patch", 20_000),
        ("world", 400_000),
        ("worl", 40),
        ("population", 60_000),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    let unguarded = with_params(
        &r,
        Params {
            possessive_name_letters: 0,
            ..Params::default()
        },
    );
    assert_eq!(unguarded.repair("peyer's patch").text, "peter's patch");
    assert!(!r.repair("peyer's patch").changed());
    assert!(!r.repair("the peyer\u{2019}s patch").changed());
    // Not before a possessive: read as without the guard.
    assert_eq!(
        r.repair("peyer patch").text,
        unguarded.repair("peyer patch").text
    );
    // Four letters: a slip as often.
    assert_eq!(
        r.repair("the worl's population").text,
        "the world's population"
    );
    assert_eq!(r.repair("peteer's patch").text, "peter's patch");
}

#[test]
fn a_written_typo_s_slips_name_its_word_two_edits_away() {
    // People write `cinammon` (15 per billion), far less than `cinnamon`, so the usage rule
    // reads it as a typo; but `cinnamon` is two edits away, its doubling moved, which the rule
    // does not name, and the word sits at the model's floor. The slip says which word it is.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("cinnamon", 100_000),
        ("rolls", 9_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, []);
    let usage = [
        ("the", 53_000_000),
        ("cinnamon", 5_012),
        ("cinammon", 15),
        ("rolls", 16_982),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    assert_eq!(r.repair("cinammon rolls").text, "cinnamon rolls");
    let without = with_params(
        &r,
        Params {
            written_typo_slips: false,
            ..Params::default()
        },
    );
    assert!(!without.repair("cinammon rolls").changed());
}

#[test]
fn a_short_string_written_far_less_than_a_word_one_slip_away_pays_for_its_pairs() {
    // People write `oxigen` (15 per billion), far less than `oxygen` (17,783), but short
    // strings beside a common word are names as often, so the short-word margin does not name
    // it a typo; kept as typed, it is no longer spared the unseen pairs its correction pays.
    let vocab = Arc::new(Vocabulary::build(DOCS[..4].iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("average", 60_000_000),
        ("oxygen", 8_000_000),
        ("level", 90_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, []);
    let usage = [
        ("the", 53_000_000),
        ("average", 80_000),
        ("oxygen", 17_783),
        ("oxigen", 15),
        ("level", 110_000),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    assert_eq!(
        r.repair("average oxigen level").text,
        "average oxygen level"
    );
    let off = with_params(
        &r,
        Params {
            short_written_pairs_margin: None,
            short_unindexed_typo_usage_margin: None,
            ..Params::default()
        },
    );
    assert!(!off.repair("average oxigen level").changed());
    // Written 1,186 times less (e^7.1) is not e^9 times less after the edit's cost.
    let far = with_params(
        &r,
        Params {
            short_written_pairs_margin: Some(9.0),
            short_unindexed_typo_usage_margin: None,
            ..Params::default()
        },
    );
    assert!(!far.repair("average oxigen level").changed());
}

#[test]
fn a_short_string_one_edit_from_a_word_its_neighbour_makes_a_phrase_with_pays_for_its_pairs() {
    // People write `depo` (251 per billion), 35 times less than `depot`: not far enough to pay
    // for its pairs on that alone. But `home depot` is a set phrase (the pair list writes it far
    // more than chance): the context wants the word, and as typed `depo` pays for its known
    // neighbours. Not where the neighbour is a function word, nor without the phrase.
    let vocab = Arc::new(Vocabulary::build(DOCS[..4].iter().map(|t| ("", *t))));
    let words = [
        ("the", 430_000_000_000),
        ("home", 1_277_000_000),
        ("depot", 9_700_000),
        ("hours", 198_000_000),
        ("old", 300_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, [("home", "depot", 13_700_000)]);
    let usage = [
        ("the", 53_000_000),
        ("home", 645_654),
        ("depot", 8_913),
        ("depo", 251),
        ("hours", 251_189),
        ("old", 400_000),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    let off = with_params(
        &r,
        Params {
            phrase_pairs_association: None,
            ..Params::default()
        },
    );
    let paid = |q: &str| off.explain(q).typed_score - r.explain(q).typed_score;
    let per_pair = Params::default().unseen_pair_cost;
    assert!((paid("home depo hours") - 2.0 * per_pair).abs() < 1e-9);
    assert_eq!(r.repair("home depo hours").text, "home depot hours");
    assert!(!off.repair("home depo hours").changed());
    // No phrase with the neighbour, or one too weak to count.
    assert_eq!(paid("old depo hours"), 0.0);
    let strict = with_params(
        &r,
        Params {
            phrase_pairs_association: Some(12.0),
            ..Params::default()
        },
    );
    assert_eq!(
        strict.explain("home depo hours").typed_score,
        off.explain("home depo hours").typed_score
    );
}

#[test]
fn a_string_nobody_writes_one_edit_from_a_word_pays_for_its_content_neighbours() {
    // Nobody writes `foundev` and the corpus lacks it: kept as typed it is never seen beside
    // `army`, as `founded` is not either, and pays for that pair as its correction does. A
    // function word beside it says little (the pair list holds few of a rare word's pairs with
    // one), and a capitalised word, an unknown neighbour or the word asked about may be a name.
    let vocab = Arc::new(Vocabulary::build(DOCS[..4].iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("was", 9_000_000_000),
        ("when", 2_000_000_000),
        ("army", 90_000_000),
        ("founded", 40_000_000),
        ("meaning", 60_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, []);
    let usage = [
        ("the", 53_000_000),
        ("was", 9_000_000),
        ("when", 2_000_000),
        ("army", 110_000),
        ("founded", 45_000),
        ("meaning", 70_000),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    let off = with_params(
        &r,
        Params {
            unwritten_pays_pairs_letters: 0,
            ..Params::default()
        },
    );
    let paid = |q: &str| off.explain(q).typed_score - r.explain(q).typed_score;
    let per_pair = Params::default().unseen_pair_cost;
    assert!(per_pair > 0.0);
    assert!((paid("when was the army foundev") - per_pair).abs() < 1e-9);
    assert!((paid("army foundev army") - 2.0 * per_pair).abs() < 1e-9);
    assert_eq!(
        r.repair("when was the army foundev").text,
        "when was the army founded"
    );
    assert!(!off.repair("when was the army foundev").changed());
    for kept in [
        "when was the foundev",
        "when was the Army Foundev",
        "when was the xqzvrt foundev",
        "foundev meaning",
    ] {
        assert_eq!(paid(kept), 0.0, "{kept}");
    }
    // Two edits from every word: no word it is one slip of.
    assert_eq!(paid("the army fuondevx"), 0.0);
}

#[test]
fn two_edits_no_slip_explains_cost_more() {
    // `millings` is written by nobody, and `millions` is two unrelated edits away: a term's
    // distance from a word as often as a typo's. `milloins`, two letters swapped, is a slip and
    // pays nothing more; one edit away (`milions`) nothing either.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [("the", 23_000_000_000), ("millions", 90_000_000)];
    let lexicon = Lexicon::from_counts(words, []);
    let usage = [("the", 53_000_000), ("millions", 60_000)];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    let off = with_params(
        &r,
        Params {
            unexplained_two_edit_cost: 0.0,
            ..Params::default()
        },
    );
    let cost_of = |r: &Repairer, q: &str| {
        let e = r.explain(q);
        e.words[1]
            .readings
            .iter()
            .find(|x| x.meant == "millions")
            .map(|x| x.cost)
            .expect("millions is read")
    };
    let more = Params::default().unexplained_two_edit_cost;
    assert!(more > 0.0);
    assert!((cost_of(&r, "the millings") - cost_of(&off, "the millings") - more).abs() < 1e-9);
    assert_eq!(cost_of(&r, "the milloins"), cost_of(&off, "the milloins"));
    assert_eq!(cost_of(&r, "the milions"), cost_of(&off, "the milions"));
}

#[test]
fn a_string_nobody_writes_that_is_a_long_word_less_its_first_letter_is_its_typo() {
    // A key struck too lightly: nobody writes `ervice`, and names add letters to a word rather
    // than take its first away.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("service", 40_000_000),
        ("club", 60_000_000),
        ("recipe", 40_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, []);
    let usage = [
        ("the", 53_000_000),
        ("service", 2_000),
        ("club", 60_000),
        ("recipe", 30_000),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    assert_eq!(r.repair("ervice club").text, "service club");
    // Six letters, since the forty-ninth round: `ecipe` is `recipe`.
    assert_eq!(r.repair("ecipe club").text, "recipe club");
    let without = with_params(
        &r,
        Params {
            unwritten_first_lost: false,
            ..Params::default()
        },
    );
    assert!(!without.repair("ervice club").changed());
    let seven = with_params(
        &r,
        Params {
            unwritten_first_lost_letters: 7,
            ..Params::default()
        },
    );
    assert_eq!(seven.repair("ervice club").text, "service club");
    assert!(!seven.repair("ecipe club").changed());
}

#[test]
fn a_long_string_nobody_writes_that_sounds_as_a_word_is_its_typo() {
    // Written by ear: `nessisary` is three edits from `necessary`, beyond the delete index's
    // two, but its consonants sound as the word's do. Nobody writes it, and a name rarely
    // spells a common word's sound.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("is", 4_700_000_000),
        ("it", 2_800_000_000),
        ("necessary", 40_000_000),
        ("nursery", 5_000_000),
        ("to", 12_000_000_000),
        ("eat", 29_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, []);
    let usage = [
        ("is", 11_000_000),
        ("it", 8_900_000),
        ("necessary", 60_000),
        ("nursery", 9_000),
        ("to", 26_000_000),
        ("eat", 130_000),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    assert_eq!(
        r.repair("is it nessisary to eat").text,
        "is it necessary to eat"
    );
    let without = with_params(
        &r,
        Params {
            sound_letters: 0,
            ..Params::default()
        },
    );
    assert!(!without.repair("is it nessisary to eat").changed());
    // A string people write is a word of its own (a name, a term): not looked up by sound.
    let written = Lexicon::from_counts(words, []).with_usage(
        usage
            .iter()
            .copied()
            .chain([("nessisary", 50)])
            .collect::<Vec<_>>(),
    );
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let r = Repairer::new(vocab, Some(Arc::new(written)));
    assert!(!r.repair("is it nessisary to eat").changed());
}

#[test]
fn a_long_word_with_its_first_letter_lost_keeps_its_ends() {
    // `efinition` is no name: names put letters before a word, they do not take its first
    // away. Read as keeping the word's ends, the string nobody writes is the word's typo, and
    // the corpus's own copies of it (a drop capital lost in scraping) are typos too.
    let scraped = [
        "D efinition of laws: efinition and definition.",
        "efinition",
    ];
    let vocab = Arc::new(Vocabulary::build(
        DOCS.iter().chain(&scraped).map(|t| ("", *t)),
    ));
    let words = [
        ("the", 23_000_000_000),
        ("laws", 45_000_000),
        ("definition", 60_000_000),
        ("travel", 50_000_000),
        ("elbow", 50_000_000),
        ("plans", 40_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, []);
    let usage = [
        ("the", 53_000_000),
        ("laws", 77_000),
        ("definition", 30_000),
        ("travel", 20_000),
        ("ravel", 800),
        ("elbow", 20_000),
        ("plans", 10_000),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    assert_eq!(r.repair("laws efinition").text, "laws definition");
    // A shorter word so shortened is as often a word or a name of its own: one people write
    // stays (`ravel`), and one of five letters or fewer is never read so (`lbow`).
    assert!(!r.repair("ravel plans").changed());
    assert!(!r.repair("lbow plans").changed());
}

#[test]
fn a_short_or_inflected_misspelling_people_write_is_read_as_the_word_they_mean() {
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("what", 1_100_000_000),
        ("does", 310_000_000),
        ("mean", 80_000_000),
        ("men", 170_000_000),
        ("quarrel", 600_000),
        ("controlled", 23_000_000),
        ("substances", 9_000_000),
        ("travelled", 6_000_000),
        ("abroad", 20_000_000),
        ("human", 100_000_000),
        ("insurance", 90_000_000),
    ];
    let lexicon = Lexicon::from_counts(words, []);
    let usage = [
        ("mean", 338_844),
        ("men", 323_594),
        ("meen", 105),
        ("controlled", 38_905),
        ("controled", 79),
        ("travelled", 6_000),
        ("traveled", 5_000),
        ("human", 100_000),
        ("humana", 5_000),
    ];
    let r = Repairer::new(vocab, Some(Arc::new(lexicon.with_usage(usage))));
    // `meen` is written, but 3,000 times less than `mean`, which it sounds like; a doubled vowel
    // (`men`) is a rarer slip than a vowel spelt the other way.
    assert_eq!(
        r.repair("what does quarrel meen").text,
        "what does quarrel mean"
    );
    // An ending people write far less than the word they mean is a typo of it, not a form.
    assert_eq!(
        r.repair("controled substances").text,
        "controlled substances"
    );
    // A spelling written nearly as often is a variant; a name written for itself is a name.
    assert!(!r.repair("traveled abroad").changed());
    assert!(!r.repair("humana insurance").changed());
}

#[test]
fn a_spelling_nobody_writes_is_a_slip_not_a_variant() {
    // `-re` for `-er` is how `theatre` is spelt, but every accepted spelling of a word people
    // write is written too: `numbre`, which nobody writes, is `number` mistyped.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("routing", 5_000_000),
        ("number", 500_000_000),
        ("theater", 20_000_000),
        ("tickets", 30_000_000),
    ];
    let pairs = [
        ("routing", "number", 400_000),
        ("theater", "tickets", 900_000),
    ];
    let usage = [
        ("routing", 9_000),
        ("number", 400_000),
        ("theater", 20_000),
        ("theatre", 15_000),
        ("tickets", 40_000),
    ];
    let r = Repairer::new(
        vocab,
        Some(Arc::new(
            Lexicon::from_counts(words, pairs).with_usage(usage),
        )),
    );
    assert_eq!(r.repair("routing numbre").text, "routing number");
    // A spelling people write is a choice, whatever the pair list holds.
    assert!(!r.repair("theatre tickets").changed());
}

#[test]
fn a_written_typo_is_read_as_the_word_the_usage_list_names_whatever_the_pairs_prefer() {
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("where", 600_000_000),
        ("can", 1_200_000_000),
        ("i", 3_000_000_000),
        ("find", 200_000_000),
        ("the", 20_000_000_000),
        ("mean", 80_000_000),
        ("men", 170_000_000),
        ("on", 4_000_000_000),
        ("excel", 10_000_000),
    ];
    let pairs = [
        ("where", "can", 85_000_000),
        ("can", "i", 600_000_000),
        ("i", "find", 100_000_000),
        ("find", "the", 300_000_000),
        ("the", "men", 363_000_000),
        ("the", "mean", 242_000_000),
        ("men", "on", 37_000_000),
    ];
    let usage = [("mean", 338_844), ("men", 323_594), ("meen", 105)];
    let lexicon = Arc::new(Lexicon::from_counts(words, pairs).with_usage(usage));
    let r = Repairer::new(vocab.clone(), Some(lexicon.clone()));
    // `meen` is written 3,000 times less than `mean`, with the same ends and a vowel spelt the
    // other way: the usage rule names `mean`. `men` is written as often, but a doubled letter
    // dropped costs what leaves it short of the margin, so the pairs' liking for `the men on`
    // does not decide.
    let q = "where can i find the meen on excel";
    assert_eq!(r.repair(q).text, "where can i find the mean on excel");
    let unnamed_free = Repairer::with_params(
        vocab,
        Some(lexicon),
        Params {
            unnamed_reading_cost: 0.0,
            ..Params::default()
        },
    );
    assert_eq!(
        unnamed_free.repair(q).text,
        "where can i find the men on excel"
    );
}

#[test]
fn a_letter_struck_two_keys_away_is_found_in_a_short_word() {
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("how", 600_000_000),
        ("to", 12_000_000_000),
        ("make", 400_000_000),
        ("have", 1_500_000_000),
        ("a", 9_000_000_000),
        ("cake", 20_000_000),
        ("do", 2_000_000_000),
        ("you", 3_000_000_000),
        ("any", 300_000_000),
        ("ideas", 40_000_000),
    ];
    let pairs = [
        ("how", "to", 900_000_000),
        ("to", "make", 200_000_000),
        ("make", "a", 100_000_000),
        ("a", "cake", 9_000_000),
        ("do", "you", 500_000_000),
        ("you", "have", 300_000_000),
        ("have", "any", 60_000_000),
    ];
    let lexicon = Arc::new(Lexicon::from_counts(words, pairs));
    let r = Repairer::new(vocab, Some(lexicon));
    // Two edits from `make` (the `a` struck two keys late) and from `have` (both pairs of keys
    // swapped): a search of one edit, all a four-letter word gets, finds neither.
    assert_eq!(r.repair("how to mkea a cake").text, "how to make a cake");
    assert_eq!(
        r.repair("do you ahev any ideas").text,
        "do you have any ideas"
    );
}

#[test]
fn an_explanation_shows_the_readings_weighed_and_the_one_taken() {
    let r = english();
    let e = r.explain("recieve email");
    assert_eq!(e.words.len(), 2);
    let first = &e.words[0];
    assert_eq!((first.word.as_str(), first.editable), ("recieve", true));
    assert_eq!(
        first.readings[0].meant, "recieve",
        "the word as typed comes first"
    );
    assert!(first.readings[0].kind.is_none() && !first.readings[0].chosen);
    let taken: Vec<_> = first.readings.iter().filter(|x| x.chosen).collect();
    assert_eq!(taken.len(), 1);
    assert_eq!(
        (taken[0].meant.as_str(), taken[0].kind),
        ("receive", Some(EditKind::NonWord))
    );
    assert!(e.best_score > e.typed_score);
    // Nothing to change: the typed reading is taken and scores the best.
    let e = r.explain("receive email");
    assert!(e.words.iter().all(|w| w.readings[0].chosen));
    assert_eq!(e.best_score, e.typed_score);
    assert!(r.explain("où est la gare").skipped.is_some());
}

#[test]
fn an_explanation_adds_up_each_path_reading_by_reading() {
    let r = english();
    // A non-word, a split (its inside pair counts) and a join, each with a question word first.
    for text in [
        "what causes recieve email",
        "what is thecauses of anemia",
        "when is bi cycle repair",
    ] {
        let e = r.explain(text);
        let sum = |path: &[PathStep]| path.iter().map(|s| s.ln_context - s.cost).sum::<f64>();
        assert!((sum(&e.best_path) - e.best_score).abs() < 1e-9, "{text}");
        assert!((sum(&e.typed_path) - e.typed_score).abs() < 1e-9, "{text}");
        assert!(e.best_score > e.typed_score, "{text}");
        // The best path is the readings marked chosen, in order; the typed path the words.
        let chosen: Vec<(usize, &str)> = e
            .words
            .iter()
            .enumerate()
            .flat_map(|(i, w)| {
                w.readings
                    .iter()
                    .filter(|x| x.chosen)
                    .map(move |x| (i, x.meant.as_str()))
            })
            .collect();
        let best: Vec<(usize, &str)> = e
            .best_path
            .iter()
            .map(|s| (s.position, s.meant.as_str()))
            .collect();
        assert_eq!(best, chosen, "{text}");
        let typed: Vec<&str> = e.typed_path.iter().map(|s| s.meant.as_str()).collect();
        assert_eq!(typed, text.split(' ').collect::<Vec<_>>(), "{text}");
    }
}

#[test]
fn edits_serialise_with_their_kind() {
    let r = english();
    let out = r.repair("recieve email");
    assert_eq!(out.text, "receive email");
    let v = serde_json::to_value(&out.edits[0]).unwrap();
    assert_eq!(v["kind"], "non_word");
    assert_eq!(v["from"], "recieve");
    assert_eq!(v["to"], "receive");
}

/// The real model (the default lexicon and pair list, each shared corpus's vocabulary): what a
/// user sees, queries of other languages, and every clean dl19 and dbpedia query unchanged.
/// Queries of the shared sets that are misspelt as written, with their correction.
const MISSPELT_SHARED_QUERIES: &[(&str, &str, &str)] = &[(
    "dl19-sample",
    "why did the us volunterilay enter ww1",
    "why did the us voluntarily enter ww1",
)];

#[test]
fn the_real_model_fixes_what_people_type_and_leaves_clean_and_foreign_queries_alone() {
    let assets = crate::test_assets::assets();
    let data = crate::test_assets::shared().join("data");
    let lists = lexicon::default_paths(&assets);
    assert!(
        data.is_dir() && lists.len() >= 2 && lists.iter().all(|p| p.is_file()),
        "needs ../shared/data and the lexicon assets (scripts/setup --assets-only)"
    );
    let lex = Arc::new(Lexicon::load(&lists).unwrap());
    let read =
        |path: std::path::PathBuf, f: &dyn Fn(&serde_json::Value) -> String| -> Vec<String> {
            std::fs::read_to_string(path)
                .unwrap()
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .map(|v| f(&v))
                .collect()
        };
    let text = |k: &'static str| {
        move |v: &serde_json::Value| v[k].as_str().unwrap_or_default().to_string()
    };
    for set in ["dl19-sample", "dbpedia-sample"] {
        let dir = data.join(set);
        let titles = read(dir.join("corpus.jsonl"), &text("title"));
        let texts = read(dir.join("corpus.jsonl"), &text("text"));
        let vocab = Vocabulary::build(
            titles
                .iter()
                .zip(&texts)
                .map(|(a, b)| (a.as_str(), b.as_str())),
        );
        let r = Repairer::new(Arc::new(vocab), Some(lex.clone()));
        // The shared query files hold a few misspelt queries themselves.
        let changed: Vec<(String, String)> = read(dir.join("queries.jsonl"), &text("text"))
            .into_iter()
            .filter_map(|q| {
                let out = r.repair(&q);
                out.changed().then_some((q, out.text))
            })
            .collect();
        let expected: Vec<(String, String)> = MISSPELT_SHARED_QUERIES
            .iter()
            .filter(|(s, _, _)| *s == set)
            .map(|(_, q, fixed)| (q.to_string(), fixed.to_string()))
            .collect();
        // Those may be corrected (to what was meant) or left; every other query is unchanged.
        let wrong: Vec<_> = changed.iter().filter(|c| !expected.contains(c)).collect();
        assert!(wrong.is_empty(), "{set}: clean queries changed: {wrong:?}");
        if set != "dl19-sample" {
            continue;
        }
        for (typed, meant) in [
            ("causes of militray suicide", "causes of military suicide"),
            // Two letters swapped after a question, before a word no list knows.
            ("what si hyperlipidemia", "what is hyperlipidemia"),
            // ... but only as the function word general English writes after the question
            // most: `what it` is written too, and `ti` is an acronym.
            ("what ti nspire", "what ti nspire"),
            // A short string written far less than a word one slip away pays for its pairs,
            // as typed (`oxigen`, 15 per billion, `oxygen` 17,783) ...
            ("what can displace oxigen", "what can displace oxygen"),
            // A six-letter word with its first letter lost, which nobody writes.
            (
                "what is the ecipe for bread",
                "what is the recipe for bread",
            ),
            // ... but not one written as a name's spelling is (`dula`, 34; `dual`, 19,055).
            ("when is dula birthday", "when is dula birthday"),
            // Three letters: a content word with a letter dropped, or a key off, in a set
            // phrase.
            (
                "how to fnd the area of a circle",
                "how to find the area of a circle",
            ),
            ("how to get ric of ants", "how to get rid of ants"),
            (
                "whatis the daily dose of vitamin d",
                "what is the daily dose of vitamin d",
            ),
            ("flee market near me", "flea market near me"),
            // An American spelling the word list lacks goes with what its British one does.
            (
                "which greek deity was hoonred with a towering statue",
                "which greek deity was honored with a towering statue",
            ),
            ("bi cycle repair", "bicycle repair"),
            ("thecauses of anemia", "the causes of anemia"),
            ("recieve email", "receive email"),
            ("seperate bank accounts", "separate bank accounts"),
            (
                "what is teh capital of france",
                "what is the capital of france",
            ),
            ("daily life of thai peopl", "daily life of thai people"),
            // A short string the corpus writes a letter longer beside its neighbour.
            (
                "how long is lfe cycle of flea",
                "how long is life cycle of flea",
            ),
            ("who is robert gra", "who is robert gray"),
            ("what does quarrel meen", "what does quarrel mean"),
            // A vowel doubled into another sound is rarer than the sound spelt another way,
            // though `men in` is a common pair; a vowel struck a third time is a stutter.
            (
                "what does sanguine meen in french",
                "what does sanguine mean in french",
            ),
            ("average typing speeed", "average typing speed"),
            // A sound spelt as in another word, two letters from the meant one; a spelling
            // people write for itself too.
            ("best time to fish at nite", "best time to fish at night"),
            (
                "is thear a cure for shingles",
                "is there a cure for shingles",
            ),
            ("is testosterone controled", "is testosterone controlled"),
            ("how mony calories per gram", "how many calories per gram"),
            ("cheap hotells in las vegas", "cheap hotels in las vegas"),
            ("untied states population", "united states population"),
            // Two doubled letters dropped from a short word.
            ("what is my ip adres", "what is my ip address"),
            // Three unknown words of four, but one of them is a typo people are known to make:
            // no sign of another language.
            ("benifits of vitex agnus", "benefits of vitex agnus"),
            ("cover latter example", "cover letter example"),
            // `loose weight` is written (8.3M in the pair list), but `lose weight` 15 times more.
            ("how to loose weight fast", "how to lose weight fast"),
            // A letter added at the end is a slip, not an ending the lists lack.
            ("how doese it work", "how does it work"),
            ("is shipping freee", "is shipping free"),
            // A start no English word has: the first letter is the slip.
            ("wxons definition biology", "exons definition biology"),
            (
                "znthropological definition of environment",
                "anthropological definition of environment",
            ),
            (
                "what is fmavir prescribed for",
                "what is famvir prescribed for",
            ),
            // ... but a letter before a whole word is how names are made, and names are written.
            ("how to configure vcenter", "how to configure vcenter"),
            (
                "xfinity customer service number",
                "xfinity customer service number",
            ),
            // A silent `e` added to a word that ends in a consonant: written, but far less than
            // the word, it is the word's typo (`stomache` is written 39 times a billion words).
            (
                "pain in stomache after eating",
                "pain in stomach after eating",
            ),
            // ... while a name spelt so stays, written often beside the name without it.
            ("arthur c clarke books", "arthur c clarke books"),
            ("greene county court records", "greene county court records"),
            // A long string nobody writes, one edit from a word as rare as `petrified` (at the
            // model's floor, below an unknown word), is that word's typo ...
            ("is petrifyed wood valuable", "is petrified wood valuable"),
            // ... and so is a shorter one with two letters swapped, a slip of the hand.
            ("hotmial login page", "hotmail login page"),
            ("soccer games tonihgt", "soccer games tonight"),
            // Three words run together into a string nobody writes.
            (
                "bankofamerica online banking",
                "bank of america online banking",
            ),
            ("howtomake bread", "how to make bread"),
            // ... but never into an acronym and two words (`rest or il`).
            ("what is restoril medication", "what is restoril medication"),
            // A last letter struck beside the right one is no ending (`worls` is no `world`).
            (
                "tallest building in the worls",
                "tallest building in the world",
            ),
            // ... but a prefix before a listed word is a word the lists lack, and two listed
            // words run together are no typo of one (not `latitudes`, `coppertone`).
            (
                "what is an anhydrate in chemistry",
                "what is an anhydrate in chemistry",
            ),
            ("what latitudeis rome italy", "what latitudeis rome italy"),
            // A word written for another that sounds the same, where the words beside it, a
            // function word too, ask for the other (`who wrote` is a common pair) ...
            (
                "who rote the theme song for friends",
                "who wrote the theme song for friends",
            ),
            ("back pane when sitting", "back pain when sitting"),
            // ... but never a function word for a name (`you` sounds as `hugh`).
            (
                "when did hugh grant get married",
                "when did hugh grant get married",
            ),
            // (`is copperone of the metals` now reads `coppertone`, a letter lost inside and
            // lowered since the fifty-first round: a miss either way, the meant `copper one`
            // being a split that loses to keeping the string.)
            // A function word for one that sounds the same, where the next word asks for it ...
            (
                "their is a mouse in my kitchen",
                "there is a mouse in my kitchen",
            ),
            (
                "is their a cure for diabetes",
                "is there a cure for diabetes",
            ),
            ("how too cook rice", "how to cook rice"),
            // ... or a letter from it (`who were` is written, `who where` not) ...
            ("who where the beatles", "who were the beatles"),
            (
                "were is the nearest hospital",
                "where is the nearest hospital",
            ),
            ("where were you born", "where were you born"),
            ("where the wild things are", "where the wild things are"),
            // ... or a content word that sounds as it does, where a neighbour asks for it ...
            (
                "how to no if you have diabetes",
                "how to know if you have diabetes",
            ),
            ("for wheel drive cars", "four wheel drive cars"),
            // ... and where a content word beside it says nothing, it joins that word
            // (`kilometers`, which no list pairs, is no `two miles`).
            ("kilometers to miles", "kilometers to miles"),
            ("kilometrs to miles", "kilometres to miles"),
            ("can you here me", "can you hear me"),
            (
                "what is the do date for taxes",
                "what is the due date for taxes",
            ),
            ("i no longer love you", "i no longer love you"),
            ("books by stephen king", "books by stephen king"),
            ("do it yourself", "do it yourself"),
            ("here we go", "here we go"),
            (
                "what does a t with a dot over it mean on a prescription",
                "what does a t with a dot over it mean on a prescription",
            ),
            // ... but not where a pair is written as typed, or nothing follows.
            ("what is their name", "what is their name"),
            ("get out of there", "get out of there"),
            ("i want to go too", "i want to go too"),
            (
                "what level is blood pressure too low",
                "what level is blood pressure too low",
            ),
            // A written typo is the word the usage list names (or one an end key's slip from
            // it), whatever the pairs prefer (`the men`, `job teen`, `deed`).
            (
                "how to find the meen on a calculator",
                "how to find the mean on a calculator",
            ),
            ("what does a good job meen", "what does a good job mean"),
            (
                "how many moons doed jupiter have",
                "how many moons does jupiter have",
            ),
            ("what cars doed toyota make", "what cars does toyota make"),
            // A regular past ending on an irregular verb is the verb's own form, which no
            // letter edit reaches; a string written about as often as the form is a word.
            ("who teached jesus to read", "who taught jesus to read"),
            ("i sleeped for twelve hours", "i slept for twelve hours"),
            ("who shooted abraham lincoln", "who shot abraham lincoln"),
            ("creeped out meaning", "creeped out meaning"),
            // The `-s` ending written where English spells `-es`; a spelling people write about
            // as often as the form is one of its own (`mosquitos`, `dominos`).
            (
                "she teachs english in japan",
                "she teaches english in japan",
            ),
            ("my dog catchs mice", "my dog catches mice"),
            (
                "famous heros of the civil war",
                "famous heroes of the civil war",
            ),
            (
                "why are mosquitos attracted to me",
                "why are mosquitos attracted to me",
            ),
            ("dominos pizza near me", "dominos pizza near me"),
            // `then` right after a comparative is `than`; after a pause it is `then`.
            ("more then 10 years ago", "more than 10 years ago"),
            ("first we eat, then we sleep", "first we eat, then we sleep"),
            // An article ends no phrase: a short slip at the end is no `the`.
            ("ciprofloxacin how to tke", "ciprofloxacin how to take"),
            ("how to get rid of thme", "how to get rid of them"),
            // `what does X mean` ends with `mean` far more often than English ends a phrase so.
            ("what does creek maen", "what does creek mean"),
            ("what does starling meqn", "what does starling mean"),
            // A string nobody writes too: the words that keep its ends are what it names.
            (
                "the articals of the constitution",
                "the articles of the constitution",
            ),
            // ... and a word that keeps its ends fewer edits away than the word it names:
            // `sptuce` names `space`, written far more, but `spruce` is one key off.
            (
                "what is the physical description of sptuce",
                "what is the physical description of spruce",
            ),
            // ... or one its final `e` lost, rather than two function words (`be for`).
            ("what to eat befor a run", "what to eat before a run"),
            // A letter struck two keys late or early is one slip, found and priced as one.
            (
                "how to mkea a paper airplane",
                "how to make a paper airplane",
            ),
            (
                "what does it mean to lveo someone",
                "what does it mean to love someone",
            ),
            ("is it jstu a cold", "is it just a cold"),
            ("what yrea did the war end", "what year did the war end"),
            ("why do soilders salute", "why do soldiers salute"),
            // The first two letters swapped: the first letter is there, struck a key late.
            ("how does a heat pump owrk", "how does a heat pump work"),
            // ... in a function word too, where nobody writes the string (`ohw`, `oyu`).
            ("ohw to cook rice", "how to cook rice"),
            ("oyu are my sunshine", "you are my sunshine"),
            // A real word beside function words that go with another word far more than with it
            // (`time zone` alone is not enough for `tire zone`; `what time` is).
            ("what tire zone is denver in", "what time zone is denver in"),
            (
                "when is the fest time to plant tomatoes",
                "when is the best time to plant tomatoes",
            ),
            (
                "what is the prone number for amazon",
                "what is the phone number for amazon",
            ),
            ("salt is knows as what", "salt is known as what"),
            // ... but not where the typed word goes with them as well (`the king of`, `the
            // lone ranger`).
            ("who is the king of england", "who is the king of england"),
            ("the lone ranger cast", "the lone ranger cast"),
            ("the king and i musical", "the king and i musical"),
        ] {
            assert_eq!(r.repair(typed).text, meant, "{typed}");
        }
        let without_function_words = Repairer::with_params(
            r.vocab().clone(),
            Some(lex.clone()),
            Params {
                function_word_context: None,
                ..Params::default()
            },
        );
        for q in ["what tire zone is denver in", "salt is knows as what"] {
            assert!(!without_function_words.repair(q).changed(), "{q}");
        }
        for q in [
            "où est la gare la plus proche",
            "recherche emploi dans la santé",
            "wie funktioniert ein kühlschrank",
            "hotel zimmer buchen mit frühstück",
            "como hacer una tortilla de patatas",
            "le prix des maisons sur la côte",
            "der beste weg nach berlin",
            "prix des maisons sur la cote",
            "el precio del pan",
            "Paula Deen recipes",
            "NYU admissions",
            "iPhone 15 battery",
            "covid-19 vaccine",
            "mail me at vitamn@example.org",
            "🙂 vitamin",
            // What a query asks the meaning of is a term, a name, a brand.
            "what is hirad",
            "poct meaning",
            "what is a cirt",
            // Nobody writes `actifed`, and `active` does not keep its ends.
            "what is actifed used for",
            // One passage with `terrestrial plants` is no evidence against `planets`.
            "which feature do gas giants have that terrestrial planets do not",
        ] {
            let out = r.repair(q);
            assert!(!out.changed(), "{q:?} became {:?}", out.text);
        }
    }
}

#[test]
fn each_sentence_of_a_text_starts_as_a_query_does() {
    // A capital at a sentence's start says no more of a name than a query's first word's.
    let r = repairer(Some(&["deen"]));
    let out = r.repair("Paula deen. Vitamn deficiency? Vitamn deficiency");
    assert_eq!(
        out.text,
        "Paula deen. Vitamin deficiency? Vitamin deficiency"
    );
    let starts: Vec<usize> = out.edits.iter().map(|e| e.start).collect();
    assert_eq!(starts, [12, 31]);
    // Explained the same way: the sentences' words follow one another.
    let e = r.explain("Paula deen. Vitamn deficiency");
    assert_eq!(e.words.len(), 4);
    assert!(e
        .best_path
        .iter()
        .any(|s| s.position == 2 && s.meant == "vitamin"));
    // After a title's abbreviation or an initial, or inside a sentence, it is a name's.
    for q in [
        "Paula deen, Vitamn deficiency",
        "Paula deen Dr. Vitamn",
        "Paula deen J. Vitamn",
    ] {
        assert!(!r.repair(q).changed(), "{q:?}");
    }
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
fn the_context_bonus_needs_a_meeting_chance_would_not_explain() {
    // "vitamin" and "deficiency" are near each other in the corpus; in a corpus of a few dozen
    // words they would also meet by chance, so the bonus needs a limit above that chance.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = query::scan(
        "vitamin deficiency",
        &language_model::LanguageModel::new(vocab.clone(), None, 1e-10),
        &|_| false,
    )
    .unwrap();
    let with = |limit: f64| {
        Repairer::with_params(
            vocab.clone(),
            None,
            Params {
                context_chance_limit: limit,
                ..Params::default()
            },
        )
    };
    let count = vocab.count("deficiency");
    let chance = count as f64 * vocab.count("vitamin") as f64 * 20.0 / vocab.info().tokens as f64;
    assert!(chance > 0.5, "{chance}");
    let (above, below) = (with(chance * 2.0), with(chance / 2.0));
    assert_eq!(
        above.context_bonus("deficiency", count, 10, &words[..1]),
        above.params().context_bonus_long
    );
    assert_eq!(
        below.context_bonus("deficiency", count, 10, &words[..1]),
        0.0
    );
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
    // A word a live document holds is no sign of noise.
    assert!(!r.has_unknown_word_knowing("sympotms of vitamin deficiency", &|w| w == "sympotms"));
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
            prop_assert!(!e.to.trim().is_empty());
            prop_assert!(e.confidence > 0.0 && e.confidence <= 1.0);
        }
        let twice = r.repair(&once.text);
        prop_assert_eq!(&twice.text, &once.text);
        prop_assert!(twice.edits.is_empty());
    }
}

#[test]
fn the_index_vote_follows_what_the_retrieved_documents_write() {
    let docs = |texts: &[&str]| RetrievedWords::from_documents(texts.iter().map(|t| ("", *t)));
    let r = english();
    // Documents about the query that use the word as typed keep it: the vote never argues
    // with them (without it, the pair list makes `reflex` `reflux` here).
    let using_reflex = docs(&[
        "Acid reflex symptoms, a rare spelling.",
        "Symptoms of the acid reflex.",
    ]);
    assert_eq!(
        r.repair("acid reflex symptoms").text,
        "acid reflux symptoms"
    );
    let kept = r.repair_with("acid reflex symptoms", &|_| false, Some(&using_reflex));
    assert!(!kept.changed(), "{:?}", kept.text);
    // Documents about the rest of the query that write another word one slip away, and never
    // the typed one, speak for it (here with a vote strong enough to pass the real-word cost
    // alone: nothing beside `reflex` goes with `reflux` in this model's pair list).
    let r = Repairer::with_params(
        r.vocab().clone(),
        r.lexicon().cloned(),
        Params {
            real_word_vote: 9.0,
            ..Params::default()
        },
    );
    let about_reflux = docs(&[
        "Acid reflux symptoms include heartburn.",
        "Reflux symptoms: a sour taste, heartburn.",
        "Symptoms of reflux at night.",
    ]);
    assert!(!r.repair("reflex symptoms").changed());
    let voted = r.repair_with("reflex symptoms", &|_| false, Some(&about_reflux));
    assert_eq!(voted.text, "reflux symptoms");
    assert_eq!(voted.edits[0].kind, EditKind::RealWord);
    // ... and its output, with the same documents, is a fixed point.
    assert!(!r
        .repair_with(&voted.text, &|_| false, Some(&about_reflux))
        .changed());
    // Documents that are not about the rest of the query say nothing by lacking a word, and
    // one document is not enough.
    let off_topic = docs(&["Reflux at night.", "Reflux and heartburn.", "Reflux."]);
    assert!(!r
        .repair_with("reflex symptoms", &|_| false, Some(&off_topic))
        .changed());
    let once = docs(&["Reflux symptoms.", "Symptoms of a cold."]);
    assert!(!r
        .repair_with("reflex symptoms", &|_| false, Some(&once))
        .changed());
    // No documents: no vote.
    let none = RetrievedWords::default();
    assert!(!r
        .repair_with("reflex symptoms", &|_| false, Some(&none))
        .changed());
    // The explanation says what the documents wrote, word by word and reading by reading.
    let e = r.explain_with("reflex symptoms", Some(&about_reflux));
    assert_eq!(e.words[0].documents_using, Some(0));
    assert_eq!(e.words[1].documents_using, Some(3));
    let reflux = e.words[0]
        .readings
        .iter()
        .find(|x| x.meant == "reflux")
        .expect("reflux weighed");
    assert_eq!(reflux.documents_using, Some(3));
    assert!(reflux.chosen);
    assert_eq!(r.explain("reflex symptoms").words[0].documents_using, None);
}

#[test]
fn the_corpus_own_rare_typo_is_outvoted_by_the_documents() {
    // A passage on pelvic pain writes `elvic` once (MS MARCO's passages hold such slips: a
    // first letter lost, `leasant`, `emperature`), so the query's same slip is a word the
    // corpus knows and one retrieved document writes. Three times as many of the documents
    // write `pelvic`: the string is the corpus's typo, not a name they hold.
    let words: &[(&str, u64)] = &[
        ("right", 270_000_000),
        ("pelvic", 3_000_000),
        ("pain", 42_000_000),
        ("causes", 23_000_000),
    ];
    let pelvic = [
        "Pelvic pain causes: infection, cysts or inflammation.",
        "Right pelvic pain can have causes outside the pelvis.",
        "Causes of pelvic pain in women, right side or left.",
    ];
    let typo = "Right elvic pain has causes in the bowel or bladder.";
    let corpus = |slips: usize| {
        let texts = DOCS.iter().chain(&pelvic).copied();
        let texts = texts.chain(std::iter::repeat_n(typo, slips));
        Arc::new(Vocabulary::build(texts.map(|t| ("", t))))
    };
    let lexicon = Arc::new(Lexicon::from_counts(words.iter().copied(), []));
    let docs = RetrievedWords::from_documents(pelvic.iter().chain([&typo]).map(|t| ("", *t)));
    let query = "right elvic pain causes";
    let r = Repairer::new(corpus(1), Some(lexicon.clone()));
    let voted = r.repair_with(query, &|_| false, Some(&docs));
    assert_eq!(voted.text, "right pelvic pain causes");
    // Off, one document writing the string keeps it, as a name they hold.
    let off = with_params(
        &r,
        Params {
            vote_corpus_typo_count: 0,
            ..Params::default()
        },
    );
    assert!(!off.repair_with(query, &|_| false, Some(&docs)).changed());
    // A string the corpus writes more often is its word (a name, a term), whatever the vote.
    let r = Repairer::new(corpus(3), Some(lexicon));
    assert!(!r.repair_with(query, &|_| false, Some(&docs)).changed());
    // Fewer documents writing the candidate than the lift asks leave it as typed too.
    let two = RetrievedWords::from_documents(pelvic[..2].iter().chain([&typo]).map(|t| ("", *t)));
    let r = Repairer::new(corpus(1), r.lexicon().cloned());
    assert!(!r.repair_with(query, &|_| false, Some(&two)).changed());
}

#[test]
fn most_voting_documents_writing_a_word_outweigh_the_real_word_cost() {
    let docs = |texts: &[&str]| RetrievedWords::from_documents(texts.iter().map(|t| ("", *t)));
    let r = english();
    assert!(r.params.real_word_vote <= r.params.real_word_cost);
    // Three documents of seven write `reflux`, none `reflex`: a vote, but topics share words
    // by chance, and nothing beside `reflex` speaks for `reflux`.
    let some = docs(&[
        "Acid reflux symptoms include heartburn.",
        "Reflux symptoms: a sour taste, heartburn.",
        "Symptoms of reflux at night.",
        "Symptoms of a cold.",
        "Symptoms of the flu.",
        "Symptoms and signs.",
        "Common symptoms.",
    ]);
    assert!(!r
        .repair_with("reflex symptoms", &|_| false, Some(&some))
        .changed());
    // Where most of them write it, the documents about the query agree on the reading.
    let most = docs(&[
        "Acid reflux symptoms include heartburn.",
        "Reflux symptoms: a sour taste, heartburn.",
        "Symptoms of reflux at night.",
        "Reflux in infants, and its symptoms.",
        "Symptoms of a cold.",
        "Symptoms of the flu.",
    ]);
    let voted = r.repair_with("reflex symptoms", &|_| false, Some(&most));
    assert_eq!(voted.text, "reflux symptoms");
    assert_eq!(voted.edits[0].kind, EditKind::RealWord);
    // Turned down to the plain vote, the same documents are not enough.
    let plain = Repairer::with_params(
        r.vocab().clone(),
        r.lexicon().cloned(),
        Params {
            real_word_vote_most: r.params.real_word_vote,
            ..Params::default()
        },
    );
    assert!(!plain
        .repair_with("reflex symptoms", &|_| false, Some(&most))
        .changed());
    // A word of the query that the lists know and the corpus never writes (`washing`): no
    // document of the corpus is about the whole query, whatever share of its words the
    // voting ones use (here half, as a looser topic test asks).
    let half = |needs_corpus_words| {
        Repairer::with_params(
            r.vocab().clone(),
            r.lexicon().cloned(),
            Params {
                vote_on_topic: 0.5,
                vote_needs_corpus_words: needs_corpus_words,
                ..Params::default()
            },
        )
    };
    assert_eq!(r.vocab().count("washing"), 0);
    let query = "reflex symptoms washing";
    assert!(!half(true)
        .repair_with(query, &|_| false, Some(&most))
        .changed());
    assert_eq!(
        half(false).repair_with(query, &|_| false, Some(&most)).text,
        "reflux symptoms washing"
    );
}

#[test]
fn a_short_string_reads_as_the_word_most_voting_documents_write() {
    let docs = |texts: &[&str]| RetrievedWords::from_documents(texts.iter().map(|t| ("", *t)));
    let r = english();
    let about_fleas = docs(&[
        "Flea bites: symptoms and itching.",
        "Symptoms of a flea allergy in dogs.",
        "Flea symptoms in cats.",
        "Symptoms of mites.",
    ]);
    // Too short for the lists to tell a slip from an acronym: alone, kept.
    assert!(!r.repair("fle symptoms").changed());
    // Three of the four documents about the rest of the query write `flea`, none `fle`.
    let voted = r.repair_with("fle symptoms", &|_| false, Some(&about_fleas));
    assert_eq!(voted.text, "flea symptoms");
    assert_eq!(voted.edits[0].kind, EditKind::NonWord);
    // Documents that write the string as typed keep it (an acronym they use).
    let using_fle = docs(&[
        "FLE symptoms, a rare syndrome.",
        "Flea symptoms in cats.",
        "Flea bites: symptoms.",
    ]);
    assert!(!r
        .repair_with("fle symptoms", &|_| false, Some(&using_fle))
        .changed());
    // Fewer than half of them writing the word is no vote on so short a string.
    let few = docs(&[
        "Flea bites: symptoms and itching.",
        "Flea symptoms in cats.",
        "Symptoms of mites.",
        "Symptoms of lice.",
        "Symptoms of scabies.",
    ]);
    assert!(!r
        .repair_with("fle symptoms", &|_| false, Some(&few))
        .changed());
    // Turned off, the documents say nothing of it.
    let off = Repairer::with_params(
        r.vocab().clone(),
        r.lexicon().cloned(),
        Params {
            short_word_vote: 0.0,
            ..Params::default()
        },
    );
    assert!(!off
        .repair_with("fle symptoms", &|_| false, Some(&about_fleas))
        .changed());
}

#[test]
fn a_word_only_the_usage_list_holds_is_a_candidate() {
    // Neither the lexicon nor the corpus holds `bitcoin`; the usage list says people write it
    // (as often as `price` here: a small lexicon's rare words sit at the model's floor).
    let docs = ["The price of a house rose today.", "Prices today."];
    let vocab = Arc::new(Vocabulary::build(docs.iter().map(|t| ("", *t))));
    let words = [
        ("the", 23_000_000_000),
        ("of", 13_000_000_000),
        ("price", 100_000_000),
        ("today", 150_000_000),
        ("billion", 90_000_000),
        ("fiction", 30_000_000),
    ];
    let usage = [
        ("the", 53_703_180),
        ("of", 25_118_864),
        ("price", 169_824),
        ("today", 380_189),
        ("billion", 120_226),
        ("fiction", 30_903),
        ("bitcoin", 173_780),
        // Another word people write, one edit further from `bitcion` and far rarer.
        ("bitcoins", 2_399),
    ];
    let lexicon = Arc::new(Lexicon::from_counts(words, []).with_usage(usage));
    let r = Repairer::new(vocab.clone(), Some(lexicon.clone()));
    let out = r.repair("bitcion price today");
    assert_eq!(out.text, "bitcoin price today");
    assert_eq!(out.edits[0].kind, EditKind::NonWord);
    // Typed as people write it, it stays.
    assert!(!r.repair("bitcoin price today").changed());
    // Off, or above its frequency, the word is out of reach.
    for least in [0, 200_000] {
        let off = Repairer::with_params(
            vocab.clone(),
            Some(lexicon.clone()),
            Params {
                usage_candidate_per_billion: least,
                ..Params::default()
            },
        );
        assert_eq!(
            off.repair("bitcion price today").text,
            "bitcion price today"
        );
    }
}

#[test]
fn a_question_word_is_the_likelier_first_word_of_a_query() {
    // Running English writes `that` several times as often as `what`, so its counts read a slip
    // at a query's start as `that`; queries begin with a question word far more often.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("that", 12_000_000_000),
        ("what", 1_300_000_000),
        ("hat", 20_000_000),
        ("is", 9_000_000_000),
        ("a", 20_000_000_000),
        ("bond", 30_000_000),
    ];
    let pairs = [
        ("what", "is", 260_000_000),
        ("that", "is", 2_500_000_000),
        ("hat", "is", 13_000_000),
        ("is", "a", 3_000_000_000),
    ];
    let lexicon = Arc::new(Lexicon::from_counts(words, pairs));
    let lifted = Repairer::new(vocab.clone(), Some(lexicon.clone()));
    let flat = Repairer::with_params(
        vocab,
        Some(lexicon),
        Params {
            question_start_lift: 0.0,
            ..Params::default()
        },
    );
    assert_eq!(flat.repair("ahat is a bond").text, "that is a bond");
    assert_eq!(lifted.repair("ahat is a bond").text, "what is a bond");
    // A word written as it stands is no slip, and a question word only lifts a query's start.
    assert!(!lifted.repair("that is a bond").changed());
    assert_eq!(
        lifted.repair("a bond ahat is").text,
        flat.repair("a bond ahat is").text
    );
    // Nor where another word is one no list knows: the query may be in another language.
    assert_eq!(
        lifted.repair("ahat is a bond qxzv").text,
        flat.repair("ahat is a bond qxzv").text
    );
    assert_eq!(
        flat.repair("ahat is a bond qxzv").text,
        "that is a bond qxzv"
    );
}

#[test]
fn a_word_english_writes_is_no_sign_of_another_language() {
    // A word no list of words knows may be another language's, and then so may the query's
    // first word (`wat is cappuccino koffie`, Dutch); one English writes as often as the usage
    // list's candidates (`bitcoin`) is no such sign, one it writes as rarely as `koffie` is.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("that", 12_000_000_000),
        ("what", 1_300_000_000),
        ("is", 9_000_000_000),
    ];
    let pairs = [("what", "is", 260_000_000), ("that", "is", 2_500_000_000)];
    let usage = [
        ("that", 5_000_000),
        ("what", 1_000_000),
        ("is", 9_000_000),
        ("bitcoin", 170_000),
        ("koffie", 19),
    ];
    let r = Repairer::new(
        vocab,
        Some(Arc::new(
            Lexicon::from_counts(words, pairs).with_usage(usage),
        )),
    );
    assert_eq!(r.repair("ahat is bitcoin").text, "what is bitcoin");
    assert_eq!(r.repair("ahat is koffie").text, "that is koffie");
}

#[test]
fn a_word_that_asks_about_the_others_is_the_likelier_first_or_last_word_of_a_query() {
    // Kept as typed, an unknown string pays for no pair; `meaning` pays for one no list can
    // hold (`trod meaning`). Queries end `X meaning` and begin `define X` far more often than
    // sentences do.
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [
        ("trod", 180_000),
        ("meaning", 60_000_000),
        ("meeting", 65_000_000),
        ("define", 40_000_000),
        ("of", 13_000_000_000),
        // The rest of English: the words are as rare as in a full list.
        ("the", 400_000_000_000),
    ];
    let usage = [
        ("trod", 350),
        ("meaning", 90_000),
        ("meeting", 95_000),
        ("define", 30_000),
        // A first name people write.
        ("defne", 21),
    ];
    let lexicon =
        Arc::new(Lexicon::from_counts(words, [("meaning", "of", 20_000_000)]).with_usage(usage));
    // `meaing` is `meaning` with a letter lost inside, which lowers `meaning` too: off in
    // both, so that the frame word's lift is all that differs.
    let lost_not_lowered = Params {
        unwritten_letter_lost_lowers: false,
        ..Params::default()
    };
    let lifted = Repairer::with_params(
        vocab.clone(),
        Some(lexicon.clone()),
        lost_not_lowered.clone(),
    );
    let flat = Repairer::with_params(
        vocab,
        Some(lexicon),
        Params {
            frame_word_lift: 0.0,
            ..lost_not_lowered
        },
    );
    assert!(!flat.repair("trod meaing").changed());
    assert_eq!(lifted.repair("trod meaing").text, "trod meaning");
    assert!(!flat.repair("deqine trod").changed());
    assert_eq!(lifted.repair("deqine trod").text, "define trod");
    // Only a query's first or last word, beside a word it asks about; first, not in place of a
    // string people write (a first name before a surname).
    for query in ["trod meaing trod", "meaing", "defne trod"] {
        assert_eq!(
            lifted.repair(query).text,
            flat.repair(query).text,
            "{query}"
        );
    }
    assert!(!lifted.repair("trod meeting").changed());
}

#[test]
fn a_word_that_sounds_as_the_one_the_usage_rule_names_is_named_with_it() {
    // `ther` is written a two-thousandth as often as `there`, which the usage rule names (one
    // letter, a silent `e`), and not quite that much less than `their` after its dearer edit:
    // without the homophone `their` pays for being unnamed, though its pair says it is meant.
    let words = [
        ("there", 700_000_000),
        ("their", 780_000_000),
        ("get", 1_000_000_000),
        ("first", 600_000_000),
        ("shots", 20_000_000),
    ];
    let pairs = [
        ("get", "their", 190_000_000),
        ("get", "there", 175_000_000),
        ("their", "first", 323_000_000),
        ("there", "first", 14_000_000),
        ("first", "shots", 2_000_000),
    ];
    let usage = [
        ("there", 2_500_000),
        ("their", 2_000_000),
        ("ther", 1_259),
        ("get", 1_000_000),
        ("first", 600_000),
        ("shots", 20_000),
    ];
    let vocab = Arc::new(Vocabulary::build(DOCS[..4].iter().map(|t| ("", *t))));
    let plain = Lexicon::from_counts(words, pairs).with_usage(usage);
    let sounds = Lexicon::from_counts(words, pairs)
        .with_usage(usage)
        .with_homophones([&["their", "there"][..]]);
    let without = Repairer::new(vocab.clone(), Some(Arc::new(plain)));
    let with = Repairer::new(vocab, Some(Arc::new(sounds)));
    assert_eq!(
        without.repair("get ther first shots").text,
        "get there first shots"
    );
    assert_eq!(
        with.repair("get ther first shots").text,
        "get their first shots"
    );
}

#[test]
fn each_candidates_usage_is_what_the_usage_list_says() {
    let vocab = Arc::new(Vocabulary::build(DOCS.iter().map(|t| ("", *t))));
    let words = [("heating", 500), ("baseboard", 40), ("symptoms", 900)];
    // One count past what four bytes hold: read from the list itself.
    let usage = [
        ("heating", 15_136),
        ("symptoms", 5_000_000_000),
        ("baseboard", 0),
        ("sympotms", 3),
    ];
    let lexicon = Lexicon::from_counts(words, []).with_usage(usage);
    let r = Repairer::new(vocab, Some(Arc::new(lexicon)));
    assert!(
        r.candidates.len() > words.len(),
        "corpus words are candidates too"
    );
    for id in 0..r.candidates.len() as u32 {
        let word = r.candidates.word(id);
        assert_eq!(r.candidate_usage(id), r.lm.usage(word), "{word}");
    }
    let id = |w: &str| r.candidates.find(w).expect("a candidate");
    assert_eq!(r.candidate_usage(id("symptoms")), Some(5_000_000_000));
    assert_eq!(r.candidate_usage(id("baseboard")), Some(0));
    assert_eq!(r.candidate_usage(id("heating")), Some(15_136));
}
