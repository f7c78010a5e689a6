//! Alignment tests on a tiny randomly initialised BERT (MiniLM's tokenizer, hidden size 32).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use candle_core::{Device, Tensor};

use super::*;
use crate::encoder::{Encoder, EncoderManifest, TextTokenizer};
use crate::index::{Document, HnswParams, IndexBuilder, ManifestFields};
use crate::model::bert::{l2_normalize, mean_pool, trainable_vars};
use crate::model::{BertConfig, BertModel, BertWeights};
use crate::test_assets;

const WORDS: &[&str] = &[
    "capital",
    "france",
    "treatment",
    "headache",
    "weather",
    "london",
    "history",
    "bridge",
    "recipe",
    "chocolate",
    "battery",
    "voltage",
    "guitar",
    "lesson",
    "salary",
    "nurse",
];

pub(crate) struct Fixture {
    pub dir: tempfile::TempDir,
    pub base: PathBuf,
    pub queries: PathBuf,
    pub variants: Vec<PathBuf>,
    pub index: PathBuf,
}

fn tiny_config() -> BertConfig {
    BertConfig {
        vocab_size: 30522,
        ..BertConfig::tiny()
    }
}

fn query_text(i: usize) -> String {
    let n = WORDS.len();
    let len = 2 + i % 4;
    (0..len)
        .map(|j| WORDS[(i * 7 + j * 5 + j * j) % n])
        .collect::<Vec<_>>()
        .join(" ")
}

/// A tiny base bundle, 24 queries with two typo variant files, and a 40-document index built
/// with the base encoder.
pub(crate) fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = test_assets::tiny_bundle(dir.path(), "tiny", 7);

    let queries = dir.path().join("queries.tsv");
    let lines: String = (0..24)
        .map(|i| format!("q{i}\t{}\n", query_text(i)))
        .collect();
    std::fs::write(&queries, lines).unwrap();
    let mut variants = Vec::new();
    for v in 0..2u32 {
        let path = dir.path().join(format!("queries.typo{}.tsv", v + 1));
        let lines: String = (0..24)
            .map(|i| {
                let text = query_text(i);
                let noisy = crate::noise::apply(NoiseKind::Typo, 1, &format!("q{i}"), v, &text)
                    .unwrap()
                    .text;
                format!("q{i}\t{noisy}\n")
            })
            .collect();
        std::fs::write(&path, lines).unwrap();
        variants.push(path);
    }

    let encoder = Encoder::load(&base, &RuntimeOptions::default()).unwrap();
    let docs: Vec<Document> = (0..40)
        .map(|i| Document {
            id: format!("d{i}"),
            title: String::new(),
            text: format!("{} {}", query_text(i), query_text(i + 3)),
        })
        .collect();
    let texts: Vec<String> = docs.iter().map(|d| d.text.clone()).collect();
    let vectors: Vec<f32> = encoder.encode(&texts).unwrap().concat();
    let index = dir.path().join("index");
    let m = EncoderManifest::read(&base).unwrap();
    IndexBuilder::new(
        &index,
        ManifestFields {
            encoder_fingerprint: m.aligned_to.clone(),
            encoder_name: "tiny".into(),
            dimension: m.dimension,
            capot_version: "test".into(),
        },
    )
    .params(HnswParams {
        m: 8,
        ef_construction: 40,
        ef_search: 16,
        ..HnswParams::default()
    })
    .build(docs, vectors, &mut |_| Ok(()))
    .unwrap();
    Fixture {
        dir,
        base,
        queries,
        variants,
        index,
    }
}

fn options(f: &Fixture, out: &str, objective: &str, steps: usize) -> AlignOptions {
    let mut o = AlignOptions::new(
        f.base.clone(),
        f.queries.clone(),
        f.dir.path().join(out),
        objective.parse().unwrap(),
    );
    o.variants = f.variants.clone();
    o.schedule = Schedule::Steps(steps);
    o.batch_size = 8;
    o.adamw.lr = 1e-3;
    o
}

fn run(o: &AlignOptions) -> AlignReport {
    match align(o, &NoProgress, &AtomicBool::new(false)).unwrap() {
        AlignOutcome::Finished(r) => *r,
        other => panic!("not finished: {other:?}"),
    }
}

fn weights(bundle: &Path) -> BertWeights {
    BertWeights::load_safetensors(&bundle.join("model.safetensors")).unwrap()
}

/// Largest |difference| over all tensors of two weight sets.
fn weight_diff(a: &BertWeights, b: &BertWeights) -> f32 {
    a.tensors
        .iter()
        .map(|(n, t)| {
            t.data
                .iter()
                .zip(&b.tensors[n].data)
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max)
        })
        .fold(0f32, f32::max)
}

/// Candle forward + mean pool + normalise of `texts` with the bundle's weights.
fn candle_vectors(bundle: &Path, texts: &[&str]) -> Vec<Vec<f32>> {
    let config = BertConfig::from_file(&bundle.join("config.json")).unwrap();
    let (model, _) = BertModel::from_weights(&config, &weights(bundle), &Device::Cpu).unwrap();
    let tok = TextTokenizer::from_file(&bundle.join("tokenizer.json"), 64, None).unwrap();
    let b = tok.encode_batch(texts).unwrap();
    let ids = Tensor::from_vec(b.input_ids.clone(), (b.batch, b.sequence), &Device::Cpu).unwrap();
    let mask = Tensor::from_vec(
        b.attention_mask.clone(),
        (b.batch, b.sequence),
        &Device::Cpu,
    )
    .unwrap();
    let hidden = model
        .forward(&ids, &mask, &ids.zeros_like().unwrap())
        .unwrap();
    l2_normalize(&mean_pool(&hidden, &mask).unwrap())
        .unwrap()
        .to_vec2()
        .unwrap()
}

fn max_abs_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    a.iter()
        .flatten()
        .zip(b.iter().flatten())
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max)
}

fn ort_vectors(bundle: &Path, texts: &[&str]) -> Vec<Vec<f32>> {
    Encoder::load(bundle, &RuntimeOptions::default())
        .unwrap()
        .encode(texts)
        .unwrap()
}

const PROBE: &[&str] = &[
    "capital of france",
    "chocolate recipe history",
    "guitar lesson salary for a nurse",
];

#[test]
fn every_trainable_tensor_gets_a_gradient_through_the_full_loss() {
    let f = fixture();
    let mut o = options(&f, "unused", "capot=1,multipos=1,distill=1,ranking=1", 2);
    o.index = Some(f.index.clone());
    o.positives = 2;
    o.loss.rank_k = 8;
    // Margins large enough that both hinge terms are active on a random network.
    o.loss.margin = 4.0;
    o.loss.rank_margin = 4.0;
    let prepared = prepare(&o).unwrap();
    let (model, varmap, cache) = prepared.models(0, &NoProgress).unwrap();
    let (out, pairs, _) = prepared.step_loss(&model, &cache, 0).unwrap();
    assert_eq!(pairs, 16);
    let parts: Vec<&str> = out.parts.iter().map(|(n, _)| n.as_str()).collect();
    for p in [
        "capot.triplet",
        "capot.anchor",
        "capot.rank",
        "multipos",
        "distill",
        "ranking",
    ] {
        assert!(parts.contains(&p), "{p} missing from {parts:?}");
    }
    for (name, t) in &out.parts {
        let v = t.to_scalar::<f32>().unwrap();
        assert!(v.is_finite(), "{name} = {v}");
        if name.contains("triplet") || name.contains("rank") {
            assert!(
                v > 0.0,
                "{name} inactive ({v}): the test would not reach its gradient"
            );
        }
    }
    let grads = out.total.backward().unwrap();
    let named = train::named_trainable(&varmap, false);
    assert_eq!(named.len(), trainable_vars(&varmap, false).len());
    assert_eq!(
        named.len(),
        crate::model::bert::parameter_count(&tiny_config())
    );
    let mut missing = Vec::new();
    let mut zero = Vec::new();
    let mut key_bias_max = 0f32;
    for (name, var) in &named {
        match grads.get(var.as_tensor()) {
            None => missing.push(name.clone()),
            Some(g) => {
                let m: f32 = g.abs().unwrap().max_all().unwrap().to_scalar().unwrap();
                assert!(m.is_finite(), "{name}");
                // Key biases shift every score of a softmax row equally: exactly zero gradient.
                if name.ends_with("attention.self.key.bias") {
                    key_bias_max = key_bias_max.max(m);
                } else if m == 0.0 {
                    zero.push(name.clone());
                }
            }
        }
    }
    assert!(missing.is_empty(), "no gradient: {missing:?}");
    assert!(zero.is_empty(), "zero gradient: {zero:?}");
    assert!(key_bias_max < 1e-5, "key bias gradient {key_bias_max}");
}

#[test]
fn trained_bundle_runs_in_onnx_runtime_like_candle() {
    let f = fixture();
    let o = options(&f, "aligned", "capot=1,distill=0.5", 3);
    let report = run(&o);
    assert_eq!(report.steps, 3);
    let base_m = EncoderManifest::read(&f.base).unwrap();
    let m = EncoderManifest::read(&o.out).unwrap();
    assert_eq!(m.aligned_to, base_m.aligned_to);
    assert_ne!(m.fingerprint, base_m.fingerprint);
    assert_eq!(m.max_length, base_m.max_length);
    assert_eq!(
        m.provenance.objective.as_deref(),
        Some("capot=1,distill=0.5")
    );
    assert_eq!(m.provenance.training["steps"], 3);
    let training: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(o.out.join("training.json")).unwrap())
            .unwrap();
    assert_eq!(training["curve"].as_array().unwrap().len(), 3);
    // The weights moved, and ONNX Runtime reproduces candle on them.
    assert!(weight_diff(&weights(&f.base), &weights(&o.out)) > 1e-4);
    let ort = ort_vectors(&o.out, PROBE);
    let candle = candle_vectors(&o.out, PROBE);
    let d = max_abs_diff(&ort, &candle);
    assert!(d < 1e-4, "ORT vs candle after training: {d}");
    assert!(max_abs_diff(&ort, &ort_vectors(&f.base, PROBE)) > 1e-4);
}

#[test]
fn anchor_term_alone_keeps_the_encoder_in_place() {
    let f = fixture();
    let base = ort_vectors(&f.base, PROBE);
    let mut anchored = options(&f, "anchored", "capot", 4);
    anchored.loss.tau_pos = 0.0;
    anchored.loss.tau_neg = 0.0;
    anchored.loss.tau_rank = 0.0;
    anchored.loss.margin = 0.0;
    anchored.loss.rank_margin = 0.0;
    run(&anchored);
    let still = max_abs_diff(&base, &ort_vectors(&anchored.out, PROBE));
    // Control: the same run with the paper's triplet and ranking terms on.
    let control = options(&f, "control", "capot", 4);
    run(&control);
    let moved = max_abs_diff(&base, &ort_vectors(&control.out, PROBE));
    eprintln!("anchor only: max |Δ| {still:e}; with triplet + ranking: {moved:e}");
    assert!(
        still < 1e-3,
        "anchor-only training moved the encoder by {still}"
    );
    assert!(
        moved > 10.0 * still,
        "control moved only {moved} (anchored {still})"
    );
}

#[test]
fn same_seed_gives_identical_weights() {
    let f = fixture();
    let mut a = options(&f, "a", "capot=1,multipos=0.5", 3);
    a.noise = vec![NoiseKind::Cd];
    a.positives = 2;
    let mut b = a.clone();
    b.out = f.dir.path().join("b");
    run(&a);
    run(&b);
    assert_eq!(weights(&a.out), weights(&b.out));
    let mut c = a.clone();
    c.out = f.dir.path().join("c");
    c.seed = 1;
    run(&c);
    assert_ne!(weights(&a.out), weights(&c.out));
}

/// Sets the stop flag after a given step, as a signal handler would.
struct StopAfter<'a> {
    step: usize,
    flag: &'a AtomicBool,
}

impl AlignProgress for StopAfter<'_> {
    fn step(&self, r: &StepRecord) {
        if r.step == self.step {
            self.flag.store(true, Ordering::SeqCst);
        }
    }
}

#[test]
fn interrupted_then_resumed_equals_uninterrupted() {
    let f = fixture();
    let straight = options(&f, "straight", "capot", 5);
    run(&straight);

    let mut o = options(&f, "resumed", "capot", 5);
    o.checkpoint_dir = Some(f.dir.path().join("ckpt"));
    o.checkpoint_every = 2;
    let flag = AtomicBool::new(false);
    let outcome = align(
        &o,
        &StopAfter {
            step: 3,
            flag: &flag,
        },
        &flag,
    )
    .unwrap();
    match outcome {
        AlignOutcome::Interrupted {
            step, checkpoint, ..
        } => {
            assert_eq!(step, 3);
            assert_eq!(checkpoint, f.dir.path().join("ckpt"));
        }
        other => panic!("expected an interruption, got {other:?}"),
    }
    assert!(!o.out.exists(), "no bundle from an interrupted run");
    o.resume = true;
    let report = run(&o);
    assert_eq!(report.steps, 5);
    assert_eq!(report.session_steps, 2);
    assert_eq!(weights(&straight.out), weights(&o.out));

    // A checkpoint of another run is refused before training.
    let mut other = o.clone();
    other.out = f.dir.path().join("other");
    other.seed = 9;
    let e = prepare(&other).unwrap_err().to_string();
    assert!(e.contains("different run"), "{e}");
}

#[test]
fn word_queries_come_from_the_vocabulary_and_get_noise_positives() {
    let tok = TextTokenizer::from_file(
        &test_assets::minilm_hf_dir().join("tokenizer.json"),
        28,
        None,
    )
    .unwrap();
    let words = data::vocabulary_words(&tok);
    assert!(words.len() > 10_000, "{}", words.len());
    assert!(words.contains(&"capital".to_string()));
    assert!(words
        .iter()
        .all(|w| w.len() >= 3 && w.bytes().all(|b| b.is_ascii_lowercase())));
    assert!(
        words.windows(2).all(|p| p[0] < p[1]),
        "sorted, no duplicates"
    );

    let f = fixture();
    let load = |seed: u64| {
        data::QueryData::load(&f.queries, &f.variants, &[NoiseKind::Typo], seed, &tok).unwrap()
    };
    let mut d = load(3);
    let before = d.len();
    d.add_word_queries(50, &tok).unwrap();
    assert_eq!(d.len(), before + 50);
    assert_eq!(d.summary.word_queries, 50);
    let added: Vec<&String> = d.texts[before..].iter().collect();
    assert!(added.iter().all(|w| words.contains(w)));
    assert!(d.ids[before..]
        .iter()
        .zip(&added)
        .all(|(id, w)| *id == format!("{}{w}", data::WORD_QUERY_PREFIX)));
    assert_eq!(d.tokens.len(), d.len());
    assert_eq!(d.file_variants.len(), d.len());
    // The sample is a function of the seed.
    let mut again = load(3);
    again.add_word_queries(50, &tok).unwrap();
    assert_eq!(again.texts, d.texts);
    let mut other = load(4);
    other.add_word_queries(50, &tok).unwrap();
    assert_ne!(other.texts, d.texts);
    // Their positives are typos of the word, and they are planned into batches.
    let with_positive = (before..d.len())
        .filter(|&i| {
            let p = d.positives(i, 0).unwrap();
            p.iter().all(|t| t != &d.texts[i]) && !p.is_empty()
        })
        .count();
    assert!(
        with_positive >= 40,
        "{with_positive} of 50 words got a typo"
    );
    let planned: usize = d
        .plan_epoch(0, 8)
        .unwrap()
        .iter()
        .flatten()
        .filter(|&&i| i >= before)
        .count();
    assert_eq!(planned, with_positive);
}
