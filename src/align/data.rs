//! Training data: clean queries, their noisy positives (variant files and on-the-fly noise), the
//! length-bucketed batch plan, and the per-step choices (positives, negatives). Everything random
//! is a pure function of (seed, epoch) or (seed, step), so a resumed run replays the same batches
//! without saving any RNG state.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::AlignError;
use crate::dataset::{self, ReadMode};
use crate::encoder::{TextTokenizer, TokenBatch};
use crate::noise::{self, NoiseKind};

/// SplitMix64 seeded with FNV-1a over (seed, tag, n): deterministic on every platform.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64, tag: &str, n: u64) -> Self {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in seed
            .to_le_bytes()
            .iter()
            .chain(tag.as_bytes())
            .chain(n.to_le_bytes().iter())
        {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        Rng(h)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub(crate) fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

/// What the training data consisted of (recorded in the bundle's provenance).
#[derive(Debug, Clone, Default, Serialize)]
pub struct DataSummary {
    /// The clean queries file.
    pub queries_file: String,
    /// Clean queries read.
    pub queries: usize,
    /// Variant files read.
    pub variant_files: Vec<String>,
    /// Variant texts kept (different from their clean query).
    pub variant_texts: usize,
    /// Variant texts equal to their clean query, not used as positives.
    pub variants_identical_skipped: usize,
    /// Queries with at least one variant-file positive.
    pub queries_with_variants: usize,
    /// Noise kinds generated on the fly (a fresh variant per epoch).
    pub noise: Vec<String>,
    /// One-word queries added from the base tokenizer's vocabulary (`--word-queries`).
    pub word_queries: usize,
}

/// Prefix of the ids of one-word queries taken from the vocabulary.
pub const WORD_QUERY_PREFIX: &str = "word:";

/// The whole words of a tokenizer's vocabulary, sorted: entries of at least 3 lower-case ASCII
/// letters (no `##` continuation pieces, special tokens, digits or punctuation). Typo noise on
/// them teaches the encoder the vocabulary's typos beyond the words its training queries use.
pub fn vocabulary_words(tokenizer: &TextTokenizer) -> Vec<String> {
    let mut words: Vec<String> = tokenizer
        .inner()
        .get_vocab(false)
        .into_keys()
        .filter(|w| w.len() >= 3 && w.bytes().all(|b| b.is_ascii_lowercase()))
        .collect();
    words.sort_unstable();
    words
}

/// Clean queries, their tokens and their noisy positives.
pub struct QueryData {
    /// Query ids, in file order.
    pub ids: Vec<String>,
    /// Clean texts.
    pub texts: Vec<String>,
    /// Clean token ids (special tokens included, truncated at the training max length).
    pub tokens: Vec<Vec<u32>>,
    /// Positives from variant files, per query.
    pub file_variants: Vec<Vec<String>>,
    /// Noise generated on the fly.
    pub noise: Vec<NoiseKind>,
    /// Noise seed.
    pub seed: u64,
    /// Summary for the provenance.
    pub summary: DataSummary,
}

/// Rows of token ids without padding (`mask == 1` positions).
pub(crate) fn unpad(batch: &TokenBatch) -> Vec<Vec<u32>> {
    (0..batch.batch)
        .map(|r| {
            let row = r * batch.sequence..(r + 1) * batch.sequence;
            batch.input_ids[row.clone()]
                .iter()
                .zip(&batch.attention_mask[row])
                .filter(|(_, m)| **m != 0)
                .map(|(id, _)| *id as u32)
                .collect()
        })
        .collect()
}

/// Tokenizes texts into unpadded rows.
pub(crate) fn tokenize(tok: &TextTokenizer, texts: &[String]) -> Result<Vec<Vec<u32>>, AlignError> {
    let mut out = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(1024) {
        out.extend(unpad(&tok.encode_batch(chunk)?));
    }
    Ok(out)
}

fn label(p: &Path) -> String {
    p.display().to_string()
}

impl QueryData {
    /// Reads the clean queries and the variant files; checks that the file is not empty and
    /// that every variant belongs to a known query.
    pub fn load(
        queries: &Path,
        variants: &[PathBuf],
        noise: &[NoiseKind],
        seed: u64,
        tokenizer: &TextTokenizer,
    ) -> Result<Self, AlignError> {
        let (q, report) = dataset::read_queries(queries, ReadMode::Strict)?;
        if q.is_empty() {
            return Err(AlignError::Input(format!(
                "no queries in {}",
                report.path.display()
            )));
        }
        let ids: Vec<String> = q.queries().iter().map(|x| x.id.clone()).collect();
        let texts: Vec<String> = q.queries().iter().map(|x| x.text.clone()).collect();
        let mut summary = DataSummary {
            queries_file: label(&report.path),
            queries: ids.len(),
            noise: noise.iter().map(|k| k.to_string()).collect(),
            ..Default::default()
        };
        let mut file_variants = vec![Vec::new(); ids.len()];
        for path in variants {
            let (v, _) = dataset::read_variants(path, ReadMode::Strict)?;
            let unknown = v.unknown_ids(&q);
            if let Some(first) = unknown.first() {
                return Err(AlignError::Input(format!(
                    "{}: {} variant(s) for query ids not in {} (first: {first})",
                    path.display(),
                    unknown.len(),
                    report.path.display()
                )));
            }
            for (i, id) in ids.iter().enumerate() {
                if let Some(var) = v.get(id) {
                    if var.text.trim() == texts[i].trim() {
                        summary.variants_identical_skipped += 1;
                    } else if !file_variants[i].contains(&var.text) {
                        file_variants[i].push(var.text.clone());
                        summary.variant_texts += 1;
                    }
                }
            }
            summary.variant_files.push(label(path));
        }
        summary.queries_with_variants = file_variants.iter().filter(|v| !v.is_empty()).count();
        let tokens = tokenize(tokenizer, &texts)?;
        Ok(QueryData {
            ids,
            texts,
            tokens,
            file_variants,
            noise: noise.to_vec(),
            seed,
            summary,
        })
    }

    /// Adds up to `n` words of the tokenizer's vocabulary (all when `n` is at least their number;
    /// otherwise a seeded sample) as clean queries with id `word:<word>`. They have no variant
    /// files: their positives come from the on-the-fly noise only.
    pub fn add_word_queries(
        &mut self,
        n: usize,
        tokenizer: &TextTokenizer,
    ) -> Result<(), AlignError> {
        if n == 0 {
            return Ok(());
        }
        let mut words = vocabulary_words(tokenizer);
        if n < words.len() {
            Rng::new(self.seed, "words", 0).shuffle(&mut words);
            words.truncate(n);
            words.sort_unstable();
        }
        let known: std::collections::HashSet<&str> = self.ids.iter().map(String::as_str).collect();
        let (ids, words): (Vec<String>, Vec<String>) = words
            .into_iter()
            .map(|w| (format!("{WORD_QUERY_PREFIX}{w}"), w))
            .filter(|(id, _)| !known.contains(id.as_str()))
            .unzip();
        self.tokens.extend(tokenize(tokenizer, &words)?);
        self.ids.extend(ids);
        self.file_variants
            .extend(std::iter::repeat_with(Vec::new).take(words.len()));
        self.summary.word_queries = words.len();
        self.texts.extend(words);
        Ok(())
    }

    /// Number of clean queries.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True when there are no queries (never, after [`QueryData::load`]).
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The positives of query `i` in `epoch`: its variant-file texts, then one fresh variant per
    /// noise kind (seeded by the epoch) where the generator changed the query.
    pub fn positives(&self, i: usize, epoch: usize) -> Result<Vec<String>, AlignError> {
        let mut out = self.file_variants[i].clone();
        for kind in &self.noise {
            let o = noise::apply(*kind, self.seed, &self.ids[i], epoch as u32, &self.texts[i])?;
            if o.applied && !out.contains(&o.text) {
                out.push(o.text);
            }
        }
        Ok(out)
    }

    /// The batches of one epoch: queries with at least one positive, shuffled, sorted by clean
    /// token length (so a batch pads to little more than its own lengths), cut into batches of
    /// `batch_size`, batch order shuffled. Batches of fewer than 2 queries are dropped (the
    /// negatives are other queries of the batch).
    pub fn plan_epoch(
        &self,
        epoch: usize,
        batch_size: usize,
    ) -> Result<Vec<Vec<usize>>, AlignError> {
        let mut eligible = Vec::with_capacity(self.len());
        for i in 0..self.len() {
            if self.noise.is_empty() {
                if !self.file_variants[i].is_empty() {
                    eligible.push(i);
                }
            } else if !self.positives(i, epoch)?.is_empty() {
                eligible.push(i);
            }
        }
        let mut rng = Rng::new(self.seed, "plan", epoch as u64);
        rng.shuffle(&mut eligible);
        eligible.sort_by_key(|&i| self.tokens[i].len());
        let mut batches: Vec<Vec<usize>> = eligible
            .chunks(batch_size)
            .filter(|c| c.len() >= 2)
            .map(<[usize]>::to_vec)
            .collect();
        rng.shuffle(&mut batches);
        Ok(batches)
    }
}

/// The batches of a whole run, epoch by epoch.
pub struct Plan {
    /// (epoch, query indices) per step.
    pub steps: Vec<(usize, Vec<usize>)>,
    /// Batches per epoch (of the first epoch).
    pub batches_per_epoch: usize,
}

/// How long to train.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    /// Whole passes over the queries.
    Epochs(usize),
    /// A fixed number of optimiser steps (epochs repeat as needed).
    Steps(usize),
}

impl Plan {
    /// Plans every step of the run.
    pub fn new(
        data: &QueryData,
        schedule: Schedule,
        batch_size: usize,
    ) -> Result<Plan, AlignError> {
        let first = data.plan_epoch(0, batch_size)?;
        if first.is_empty() {
            return Err(AlignError::Input(
                if data.file_variants.iter().all(Vec::is_empty) && data.noise.is_empty() {
                    "no noisy positives: give --variants files and/or --noise kinds".to_string()
                } else {
                    format!(
                    "no batch of at least 2 queries with noisy positives ({} queries, {} with variant-file positives)",
                    data.len(),
                    data.summary.queries_with_variants
                )
                },
            ));
        }
        let batches_per_epoch = first.len();
        let mut steps: Vec<(usize, Vec<usize>)> = first.into_iter().map(|b| (0, b)).collect();
        let (epochs, cap) = match schedule {
            Schedule::Epochs(e) => (e, usize::MAX),
            Schedule::Steps(s) => (usize::MAX, s),
        };
        let mut epoch = 1;
        while epoch < epochs && steps.len() < cap {
            let batches = data.plan_epoch(epoch, batch_size)?;
            if batches.is_empty() {
                break;
            }
            steps.extend(batches.into_iter().map(|b| (epoch, b)));
            epoch += 1;
        }
        steps.truncate(cap);
        Ok(Plan {
            steps,
            batches_per_epoch,
        })
    }
}

/// The choices of one step: K positives per query and the in-batch negative of each query.
pub struct StepSample {
    /// `B·K` noisy texts, query i's at `i·K..(i+1)·K`.
    pub noisy: Vec<String>,
    /// Negative of query i: query `(i + shift) mod B` of the batch, `shift` in `1..B`.
    pub negatives: Vec<u32>,
}

/// Draws the positives and negatives of step `step` (deterministic in (seed, step)).
pub fn sample_step(
    data: &QueryData,
    step: usize,
    epoch: usize,
    batch: &[usize],
    k: usize,
) -> Result<StepSample, AlignError> {
    let mut rng = Rng::new(data.seed, "step", step as u64);
    let b = batch.len();
    let shift = 1 + rng.below(b.saturating_sub(1).max(1));
    let negatives = (0..b).map(|i| ((i + shift) % b) as u32).collect();
    let mut noisy = Vec::with_capacity(b * k);
    for &qi in batch {
        let mut pool = data.positives(qi, epoch)?;
        if pool.is_empty() {
            return Err(AlignError::Input(format!(
                "query {} has no noisy positive",
                data.ids[qi]
            )));
        }
        rng.shuffle(&mut pool);
        for j in 0..k {
            noisy.push(pool[j % pool.len()].clone());
        }
    }
    Ok(StepSample { noisy, negatives })
}

/// Right-pads rows to the longest: `(ids, mask, seq)` in row-major `[rows, seq]`.
pub(crate) fn pad(rows: &[&[u32]], pad_id: u32) -> (Vec<u32>, Vec<u32>, usize) {
    let seq = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let mut ids = Vec::with_capacity(rows.len() * seq);
    let mut mask = Vec::with_capacity(rows.len() * seq);
    for r in rows {
        ids.extend_from_slice(r);
        ids.extend(std::iter::repeat_n(pad_id, seq - r.len()));
        mask.extend(std::iter::repeat_n(1u32, r.len()));
        mask.extend(std::iter::repeat_n(0u32, seq - r.len()));
    }
    (ids, mask, seq)
}
