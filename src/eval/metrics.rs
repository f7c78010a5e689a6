//! Retrieval metrics with the conventions of trec_eval / pytrec_eval (which
//! BEIR calls), and embedding-robustness measures.
//!
//! # Conventions
//!
//! - **Ranking.** A run is a list of (document id, score) in any order. It is
//!   ranked by score descending; equal scores are ordered by document id
//!   *descending*, comparing the ids byte-wise (trec_eval's `comp_sim_docno`:
//!   `strcmp(p2->docno, p1->docno)`). Ids compare as strings, not numbers:
//!   among equal scores `"9"` ranks before `"10"` because byte-wise
//!   `"9" > "10"`. The input order is ignored, as in trec_eval (and
//!   pytrec_eval, which runs trec_eval's code). NaN scores rank last. A
//!   document listed twice keeps its best-ranked entry (trec_eval refuses
//!   such runs).
//! - **Relevance.** Gains come from the qrels; a document absent from the
//!   qrels (unjudged) has gain 0. Binary metrics count gain ≥ 1 as relevant
//!   (trec_eval's default `-l 1`). Negative gains count as 0.
//! - **nDCG@k** (trec_eval `ndcg_cut.k`): linear gain `rel` (not `2^rel−1`),
//!   discount `log2(rank + 1)` with 1-based rank; the ideal DCG is built from
//!   *all* judged documents of the query with gain > 0 (retrieved or not),
//!   sorted by gain, cut at k. No relevant document → 0.
//! - **MRR@k**: 1/rank of the first document with gain ≥ 1 within the top k,
//!   else 0 (the MS MARCO MRR@10).
//! - **Recall@k** (trec_eval `recall.k`): relevant documents in the top k /
//!   all relevant judged documents of the query. k larger than the run uses
//!   the whole run.
//! - **MAP** (trec_eval `map`, no cutoff): sum of precision at the rank of
//!   each relevant retrieved document, divided by the number of relevant
//!   judged documents (relevant documents never retrieved add 0).
//! - **Queries without qrels** (no judgement line at all) are excluded from
//!   the mean and listed in [`Evaluation::excluded_no_qrels`]. trec_eval
//!   evaluates only queries present in both run and qrels, and
//!   pytrec_eval's `evaluate` returns no entry for them; BEIR divides by the
//!   number of entries pytrec_eval returns, so they do not count either.
//! - **Queries with qrels but no relevant document** (all gains 0) *are*
//!   evaluated and score 0 on every metric, and count in the mean. In
//!   trec_eval such a query is in the qrels, so it is evaluated; `num_rel`
//!   is 0, so recall and MAP keep their initial value 0 and nDCG keeps the
//!   DCG, which is 0 because no retrieved document has gain > 0 (the ideal
//!   DCG 0 is never divided by). pytrec_eval returns the query with 0, and
//!   BEIR averages over everything it returns, so it counts as 0 there too.
//! - **Queries with qrels but absent from the runs** are not evaluated
//!   (trec_eval without `-c`) and are listed in
//!   [`Evaluation::missing_runs`]. A query present in the runs with an
//!   *empty* ranking is evaluated and scores 0.
//! - Cross-checked: on random runs with heavy score ties, unjudged
//!   documents, an all-zero query and queries without qrels over the
//!   dl19/dbpedia sample qrels, every per-query value equals pytrec_eval's
//!   (`pytrec-eval-terrier` 0.5.11: `ndcg_cut.10`, `recall.10`,
//!   `recall.100`, `map`; `recip_rank` on the top 10).
//! - BEIR's `ignore_identical_ids` (dropping a retrieved document whose id
//!   equals the query id) is not applied; filter the run first if needed.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::EvalError;
use crate::dataset::Qrels;

/// The metrics reported for a run; serde names are the report's keys.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricSet {
    /// nDCG@10, linear gains.
    #[serde(rename = "ndcg@10")]
    pub ndcg_at_10: f64,
    /// MRR@10, relevance ≥ 1.
    #[serde(rename = "mrr@10")]
    pub mrr_at_10: f64,
    /// Recall@10.
    #[serde(rename = "recall@10")]
    pub recall_at_10: f64,
    /// Recall@100.
    #[serde(rename = "recall@100")]
    pub recall_at_100: f64,
    /// Mean average precision over the full run.
    #[serde(rename = "map")]
    pub map: f64,
}

/// Names one field of a [`MetricSet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Metric {
    /// nDCG@10.
    #[serde(rename = "ndcg@10")]
    NdcgAt10,
    /// MRR@10.
    #[serde(rename = "mrr@10")]
    MrrAt10,
    /// Recall@10.
    #[serde(rename = "recall@10")]
    RecallAt10,
    /// Recall@100.
    #[serde(rename = "recall@100")]
    RecallAt100,
    /// MAP.
    #[serde(rename = "map")]
    Map,
}

impl Metric {
    /// All metrics in report order.
    pub const ALL: [Metric; 5] = [
        Metric::NdcgAt10,
        Metric::MrrAt10,
        Metric::RecallAt10,
        Metric::RecallAt100,
        Metric::Map,
    ];

    /// The JSON key (`ndcg@10`, ...).
    pub fn key(self) -> &'static str {
        match self {
            Metric::NdcgAt10 => "ndcg@10",
            Metric::MrrAt10 => "mrr@10",
            Metric::RecallAt10 => "recall@10",
            Metric::RecallAt100 => "recall@100",
            Metric::Map => "map",
        }
    }

    /// Human label (`nDCG@10`, ...).
    pub fn label(self) -> &'static str {
        match self {
            Metric::NdcgAt10 => "nDCG@10",
            Metric::MrrAt10 => "MRR@10",
            Metric::RecallAt10 => "Recall@10",
            Metric::RecallAt100 => "Recall@100",
            Metric::Map => "MAP",
        }
    }

    /// Parses a JSON key or label, case-insensitively.
    pub fn parse(s: &str) -> Option<Metric> {
        let s = s.to_ascii_lowercase();
        Metric::ALL
            .into_iter()
            .find(|m| m.key() == s || m.label().to_ascii_lowercase() == s)
    }
}

impl MetricSet {
    /// Value of one metric.
    pub fn get(&self, metric: Metric) -> f64 {
        match metric {
            Metric::NdcgAt10 => self.ndcg_at_10,
            Metric::MrrAt10 => self.mrr_at_10,
            Metric::RecallAt10 => self.recall_at_10,
            Metric::RecallAt100 => self.recall_at_100,
            Metric::Map => self.map,
        }
    }

    /// Mutable access to one metric.
    pub fn get_mut(&mut self, metric: Metric) -> &mut f64 {
        match metric {
            Metric::NdcgAt10 => &mut self.ndcg_at_10,
            Metric::MrrAt10 => &mut self.mrr_at_10,
            Metric::RecallAt10 => &mut self.recall_at_10,
            Metric::RecallAt100 => &mut self.recall_at_100,
            Metric::Map => &mut self.map,
        }
    }

    /// Applies `f` to every metric.
    pub fn map_values(&self, mut f: impl FnMut(Metric, f64) -> f64) -> MetricSet {
        let mut out = MetricSet::default();
        for m in Metric::ALL {
            *out.get_mut(m) = f(m, self.get(m));
        }
        out
    }

    /// Arithmetic mean of several sets (all zeros for none).
    pub fn mean<'a>(sets: impl IntoIterator<Item = &'a MetricSet>) -> MetricSet {
        let mut sum = MetricSet::default();
        let mut n = 0usize;
        for s in sets {
            for m in Metric::ALL {
                *sum.get_mut(m) += s.get(m);
            }
            n += 1;
        }
        if n == 0 {
            return sum;
        }
        sum.map_values(|_, v| v / n as f64)
    }

    /// Sample standard deviation per metric (zeros for fewer than two sets).
    pub fn std_dev<'a>(sets: impl IntoIterator<Item = &'a MetricSet> + Clone) -> MetricSet {
        let n = sets.clone().into_iter().count();
        if n < 2 {
            return MetricSet::default();
        }
        let mean = MetricSet::mean(sets.clone());
        let mut acc = MetricSet::default();
        for s in sets {
            for m in Metric::ALL {
                let d = s.get(m) - mean.get(m);
                *acc.get_mut(m) += d * d;
            }
        }
        acc.map_values(|_, v| (v / (n - 1) as f64).sqrt())
    }
}

/// Ranks a run by the rule in the module docs: score descending, ties by
/// document id descending (byte-wise), NaN last, duplicates dropped after
/// their best-ranked occurrence.
pub fn rank<S: AsRef<str>, F: Into<f64> + Copy>(run: &[(S, F)]) -> Vec<(&str, f64)> {
    let mut ranked: Vec<(&str, f64)> = run.iter().map(|(d, s)| (d.as_ref(), (*s).into())).collect();
    ranked.sort_by(|a, b| cmp_score_desc(a.1, b.1).then_with(|| b.0.cmp(a.0)));
    let mut seen = std::collections::HashSet::with_capacity(ranked.len());
    ranked.retain(|(d, _)| seen.insert(*d));
    ranked
}

fn cmp_score_desc(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        // -0.0 and 0.0 are equal scores (partial_cmp), as in C.
        _ => b.partial_cmp(&a).unwrap_or(Ordering::Equal),
    }
}

fn gain_of(judged: &BTreeMap<String, i32>, doc: &str) -> i32 {
    judged.get(doc).copied().unwrap_or(0).max(0)
}

fn num_relevant(judged: &BTreeMap<String, i32>) -> usize {
    judged.values().filter(|&&g| g >= 1).count()
}

fn discount(rank: usize) -> f64 {
    ((rank + 1) as f64).log2()
}

/// nDCG@k of one ranked gain list (gains in rank order) against the ideal
/// built from `judged`.
fn ndcg_from_gains(gains: &[i32], judged: &BTreeMap<String, i32>, k: usize) -> f64 {
    let dcg: f64 = gains
        .iter()
        .take(k)
        .enumerate()
        .filter(|(_, g)| **g > 0)
        .map(|(i, &g)| g as f64 / discount(i + 1))
        .sum();
    let mut ideal: Vec<i32> = judged.values().copied().filter(|&g| g > 0).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, &g)| g as f64 / discount(i + 1))
        .sum();
    if idcg > 0.0 {
        dcg / idcg
    } else {
        0.0
    }
}

fn gains<S: AsRef<str>, F: Into<f64> + Copy>(
    run: &[(S, F)],
    judged: &BTreeMap<String, i32>,
) -> Vec<i32> {
    rank(run)
        .into_iter()
        .map(|(d, _)| gain_of(judged, d))
        .collect()
}

/// nDCG@k of one query's run (see the module docs for the convention).
pub fn ndcg_at_k<S: AsRef<str>, F: Into<f64> + Copy>(
    run: &[(S, F)],
    judged: &BTreeMap<String, i32>,
    k: usize,
) -> f64 {
    ndcg_from_gains(&gains(run, judged), judged, k)
}

fn mrr_from_gains(gains: &[i32], k: usize) -> f64 {
    gains
        .iter()
        .take(k)
        .position(|&g| g >= 1)
        .map_or(0.0, |i| 1.0 / (i + 1) as f64)
}

/// MRR@k of one query's run: 1/rank of the first relevant document in the
/// top k, else 0.
pub fn mrr_at_k<S: AsRef<str>, F: Into<f64> + Copy>(
    run: &[(S, F)],
    judged: &BTreeMap<String, i32>,
    k: usize,
) -> f64 {
    mrr_from_gains(&gains(run, judged), k)
}

fn recall_from_gains(gains: &[i32], num_rel: usize, k: usize) -> f64 {
    if num_rel == 0 {
        return 0.0;
    }
    let hits = gains.iter().take(k).filter(|&&g| g >= 1).count();
    hits as f64 / num_rel as f64
}

/// Recall@k of one query's run: relevant documents in the top k over all
/// relevant judged documents (0 when there are none).
pub fn recall_at_k<S: AsRef<str>, F: Into<f64> + Copy>(
    run: &[(S, F)],
    judged: &BTreeMap<String, i32>,
    k: usize,
) -> f64 {
    recall_from_gains(&gains(run, judged), num_relevant(judged), k)
}

fn ap_from_gains(gains: &[i32], num_rel: usize) -> f64 {
    if num_rel == 0 {
        return 0.0;
    }
    let mut hits = 0usize;
    let mut sum = 0.0;
    for (i, &g) in gains.iter().enumerate() {
        if g >= 1 {
            hits += 1;
            sum += hits as f64 / (i + 1) as f64;
        }
    }
    sum / num_rel as f64
}

/// Average precision of one query's full run (the per-query term of MAP).
pub fn average_precision<S: AsRef<str>, F: Into<f64> + Copy>(
    run: &[(S, F)],
    judged: &BTreeMap<String, i32>,
) -> f64 {
    ap_from_gains(&gains(run, judged), num_relevant(judged))
}

/// All metrics of one query's run, ranking it once.
pub fn query_metrics<S: AsRef<str>, F: Into<f64> + Copy>(
    run: &[(S, F)],
    judged: &BTreeMap<String, i32>,
) -> MetricSet {
    let g = gains(run, judged);
    let num_rel = num_relevant(judged);
    MetricSet {
        ndcg_at_10: ndcg_from_gains(&g, judged, 10),
        mrr_at_10: mrr_from_gains(&g, 10),
        recall_at_10: recall_from_gains(&g, num_rel, 10),
        recall_at_100: recall_from_gains(&g, num_rel, 100),
        map: ap_from_gains(&g, num_rel),
    }
}

/// Result of [`evaluate`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// Mean over the evaluated queries (zeros when none).
    pub mean: MetricSet,
    /// Per evaluated query.
    pub per_query: BTreeMap<String, MetricSet>,
    /// Queries in the runs without any qrels: not evaluated.
    pub excluded_no_qrels: Vec<String>,
    /// Queries with qrels but no run: not evaluated (trec_eval without `-c`).
    pub missing_runs: Vec<String>,
}

impl Evaluation {
    /// Number of queries in the mean.
    pub fn num_evaluated(&self) -> usize {
        self.per_query.len()
    }

    /// Number of queries excluded for lack of qrels.
    pub fn num_excluded(&self) -> usize {
        self.excluded_no_qrels.len()
    }
}

/// Evaluates runs (query id → ranking of (doc id, score)) against qrels.
///
/// Accepts `&BTreeMap`, `&HashMap` or a `Vec` of pairs; a query id given
/// twice keeps its last ranking. See the module docs for every convention.
pub fn evaluate<I, K, R, S, F>(runs: I, qrels: &Qrels) -> Evaluation
where
    I: IntoIterator<Item = (K, R)>,
    K: AsRef<str>,
    R: AsRef<[(S, F)]>,
    S: AsRef<str>,
    F: Into<f64> + Copy,
{
    let mut per_query = BTreeMap::new();
    let mut excluded = std::collections::BTreeSet::new();
    for (qid, run) in runs {
        let qid = qid.as_ref();
        match qrels.get(qid).filter(|j| !j.is_empty()) {
            Some(judged) => {
                per_query.insert(qid.to_string(), query_metrics(run.as_ref(), judged));
            }
            None => {
                excluded.insert(qid.to_string());
            }
        }
    }
    let missing_runs = qrels
        .iter()
        .filter(|(q, j)| !j.is_empty() && !per_query.contains_key(*q))
        .map(|(q, _)| q.clone())
        .collect();
    Evaluation {
        mean: MetricSet::mean(per_query.values()),
        per_query,
        excluded_no_qrels: excluded.into_iter().collect(),
        missing_runs,
    }
}

/// Relative change of a metric under noise: `(noisy − clean) / clean`
/// (−0.104 is the −10.4% of the CAPOT tables). NaN when `clean` is 0 or
/// either value is not finite.
pub fn relative_change(clean: f64, noisy: f64) -> f64 {
    if clean == 0.0 || !clean.is_finite() || !noisy.is_finite() {
        return f64::NAN;
    }
    (noisy - clean) / clean
}

/// Paired difference `b − a` over the queries both evaluations scored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PairedDifference {
    /// Queries in both.
    pub n: usize,
    /// Mean of `b − a`.
    pub mean: f64,
    /// Standard error of that mean (0 for n < 2).
    pub std_err: f64,
}

/// Mean and standard error of the per-query difference `b − a` of one
/// metric (for judging whether a change exceeds noise).
pub fn paired_difference(a: &Evaluation, b: &Evaluation, metric: Metric) -> PairedDifference {
    let diffs: Vec<f64> = a
        .per_query
        .iter()
        .filter_map(|(q, ma)| b.per_query.get(q).map(|mb| mb.get(metric) - ma.get(metric)))
        .collect();
    let n = diffs.len();
    if n == 0 {
        return PairedDifference::default();
    }
    let mean = diffs.iter().sum::<f64>() / n as f64;
    let std_err = if n < 2 {
        0.0
    } else {
        let var = diffs.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        (var / n as f64).sqrt()
    };
    PairedDifference { n, mean, std_err }
}

// ---------------------------------------------------------------------------
// Embedding robustness
// ---------------------------------------------------------------------------

/// Default cap on the clean-clean pairs used for the anisotropy μ.
pub const DEFAULT_MAX_PAIRS: usize = 200_000;

/// Cosine of two vectors, computed in f64 (vectors need not be normalised;
/// a zero vector gives 0).
pub fn cosine(a: &[f32], b: &[f32]) -> Result<f64, EvalError> {
    if a.len() != b.len() {
        return Err(EvalError::DimensionMismatch {
            left: a.len(),
            right: b.len(),
        });
    }
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (x as f64, y as f64);
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    let denom = (na * nb).sqrt();
    Ok(if denom > 0.0 { dot / denom } else { 0.0 })
}

/// Anisotropy μ: mean cosine between *different* clean queries. Uses all
/// pairs i<j (the mean over i≠j is the same) when there are at most
/// `max_pairs` of them (`0` = no cap), else `max_pairs` pairs drawn with a
/// fixed-seed generator, so the value is deterministic.
pub fn anisotropy<V: AsRef<[f32]>>(clean: &[V], max_pairs: usize) -> Result<f64, EvalError> {
    let n = clean.len();
    if n < 2 {
        return Err(EvalError::TooFewVectors { needed: 2, got: n });
    }
    let total = n as u128 * (n as u128 - 1) / 2;
    let mut sum = 0.0;
    let mut count = 0usize;
    if max_pairs == 0 || total <= max_pairs as u128 {
        for i in 0..n {
            for j in (i + 1)..n {
                sum += cosine(clean[i].as_ref(), clean[j].as_ref())?;
                count += 1;
            }
        }
    } else {
        let mut state = 0x5EED_CA90_u64;
        for _ in 0..max_pairs {
            let i = (splitmix64(&mut state) % n as u64) as usize;
            let mut j = (splitmix64(&mut state) % (n as u64 - 1)) as usize;
            if j >= i {
                j += 1;
            }
            sum += cosine(clean[i].as_ref(), clean[j].as_ref())?;
            count += 1;
        }
    }
    Ok(sum / count as f64)
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Anisotropy-adjusted cosine `(cos − μ) / (1 − μ)`: 0 means "no closer
/// than two unrelated queries", 1 means identical. `None` when μ ≥ 1 or a
/// value is not finite.
pub fn adjusted_cosine(cos: f64, mu: f64) -> Option<f64> {
    let denom = 1.0 - mu;
    if !cos.is_finite() || !mu.is_finite() || denom <= f64::EPSILON {
        return None;
    }
    Some((cos - mu) / denom)
}

/// Clean-versus-variant similarity of one condition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CosineStats {
    /// Mean cosine between each variant and its clean query.
    pub mean_cosine: f64,
    /// `(mean_cosine − μ) / (1 − μ)`; `None` when undefined.
    pub adjusted_cosine: Option<f64>,
    /// μ used for the adjustment.
    pub anisotropy: f64,
    /// Number of (clean, variant) pairs averaged.
    pub pairs: usize,
}

/// Mean cosine of variants to their clean queries, adjusted by a given μ
/// (compute μ once with [`anisotropy`] and reuse it across variant files).
/// Each variant is `(index of its clean query, vector)`.
pub fn variant_cosine<C: AsRef<[f32]>, N: AsRef<[f32]>>(
    clean: &[C],
    variants: &[(usize, N)],
    mu: f64,
) -> Result<CosineStats, EvalError> {
    if variants.is_empty() {
        return Err(EvalError::TooFewVectors { needed: 1, got: 0 });
    }
    let mut sum = 0.0;
    for (idx, v) in variants {
        let c = clean.get(*idx).ok_or(EvalError::IndexOutOfRange {
            index: *idx,
            len: clean.len(),
        })?;
        sum += cosine(c.as_ref(), v.as_ref())?;
    }
    let mean_cosine = sum / variants.len() as f64;
    Ok(CosineStats {
        mean_cosine,
        adjusted_cosine: adjusted_cosine(mean_cosine, mu),
        anisotropy: mu,
        pairs: variants.len(),
    })
}

/// [`variant_cosine`] with μ computed from `clean` (at most
/// [`DEFAULT_MAX_PAIRS`] pairs).
pub fn embedding_robustness<C: AsRef<[f32]>, N: AsRef<[f32]>>(
    clean: &[C],
    variants: &[(usize, N)],
) -> Result<CosineStats, EvalError> {
    let mu = anisotropy(clean, DEFAULT_MAX_PAIRS)?;
    variant_cosine(clean, variants, mu)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn judged(pairs: &[(&str, i32)]) -> BTreeMap<String, i32> {
        pairs.iter().map(|(d, g)| (d.to_string(), *g)).collect()
    }

    fn run(pairs: &[(&str, f64)]) -> Vec<(String, f64)> {
        pairs.iter().map(|(d, s)| (d.to_string(), *s)).collect()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn graded_gains_by_hand() {
        // Ranked gains 3, 2, 0, 1 (d1..d4), judged exactly those four.
        // DCG  = 3/log2(2) + 2/log2(3) + 0/log2(4) + 1/log2(5)
        //      = 3 + 1.2618595 + 0 + 0.4306766 = 4.6925361
        // IDCG = gains sorted 3, 2, 1: 3 + 2/log2(3) + 1/log2(4)
        //      = 3 + 1.2618595 + 0.5 = 4.7618595
        // nDCG@10 = 4.6925361 / 4.7618595 = 0.9854419
        let r = run(&[("d1", 0.9), ("d2", 0.8), ("d3", 0.7), ("d4", 0.6)]);
        let j = judged(&[("d1", 3), ("d2", 2), ("d3", 0), ("d4", 1)]);
        let dcg = 3.0 + 2.0 / 3f64.log2() + 1.0 / 5f64.log2();
        let idcg = 3.0 + 2.0 / 3f64.log2() + 0.5;
        assert!(close(ndcg_at_k(&r, &j, 10), dcg / idcg));
        assert!((ndcg_at_k(&r, &j, 10) - 0.9854419388).abs() < 1e-9);
        // Relevant (≥1) at ranks 1, 2, 4: AP = (1/1 + 2/2 + 3/4) / 3.
        assert!(close(average_precision(&r, &j), 2.75 / 3.0));
        assert!(close(mrr_at_k(&r, &j, 10), 1.0));
        assert!(close(recall_at_k(&r, &j, 10), 1.0));
        // nDCG@2: DCG = 3 + 2/log2(3), IDCG@2 the same → 1.
        assert!(close(ndcg_at_k(&r, &j, 2), 1.0));

        // A relevant document (gain 2) never retrieved enters the ideal:
        // IDCG = 3 + 2/log2(3) + 2/log2(4) + 1/log2(5) = 5.6925361,
        // nDCG = 4.6925361 / 5.6925361 = 0.8243314.
        let j2 = judged(&[("d1", 3), ("d2", 2), ("d3", 0), ("d4", 1), ("d5", 2)]);
        assert!((ndcg_at_k(&r, &j2, 10) - 0.8243313721).abs() < 1e-9);
        assert!(close(recall_at_k(&r, &j2, 10), 0.75));
        assert!(close(average_precision(&r, &j2), 2.75 / 4.0));
    }

    #[test]
    fn ties_break_by_doc_id_descending() {
        // a and b tie; trec_eval puts b (larger id) first.
        let r = run(&[("a", 1.0), ("b", 1.0), ("c", 0.5)]);
        let ranked: Vec<&str> = rank(&r).into_iter().map(|(d, _)| d).collect();
        assert_eq!(ranked, ["b", "a", "c"]);
        assert!(close(mrr_at_k(&r, &judged(&[("b", 1)]), 10), 1.0));
        assert!(close(mrr_at_k(&r, &judged(&[("a", 1)]), 10), 0.5));
        // Ids compare as strings: "9" > "10" byte-wise, so "9" ranks first.
        let r = run(&[("10", 0.3), ("9", 0.3)]);
        assert_eq!(rank(&r)[0].0, "9");
        // Input order is irrelevant.
        let r = run(&[("c", 0.1), ("a", 0.9), ("b", 0.5)]);
        let ranked: Vec<&str> = rank(&r).into_iter().map(|(d, _)| d).collect();
        assert_eq!(ranked, ["a", "b", "c"]);
    }

    #[test]
    fn nan_scores_and_duplicates() {
        let r = run(&[
            ("a", f64::NAN),
            ("b", 0.1),
            ("b", 0.05),
            ("c", f64::NEG_INFINITY),
        ]);
        let ranked: Vec<&str> = rank(&r).into_iter().map(|(d, _)| d).collect();
        assert_eq!(ranked, ["b", "c", "a"]);
        // b counted once: recall 1/1, MRR 1.
        let m = query_metrics(&r, &judged(&[("b", 1)]));
        assert!(close(m.recall_at_10, 1.0) && close(m.mrr_at_10, 1.0));
        assert!(close(m.map, 1.0));
    }

    #[test]
    fn no_relevant_document_scores_zero_and_counts() {
        let mut qrels = Qrels::new();
        qrels.insert("q1".into(), judged(&[("d1", 0), ("d2", 0)]));
        qrels.insert("q2".into(), judged(&[("d1", 1)]));
        let mut runs = BTreeMap::new();
        runs.insert("q1".to_string(), run(&[("d1", 0.9), ("d2", 0.8)]));
        runs.insert("q2".to_string(), run(&[("d1", 0.9)]));
        let e = evaluate(&runs, &qrels);
        assert_eq!(e.per_query["q1"], MetricSet::default());
        assert_eq!(e.num_evaluated(), 2);
        assert!(close(e.mean.ndcg_at_10, 0.5));
        assert!(close(e.mean.mrr_at_10, 0.5));
        assert!(close(e.mean.recall_at_100, 0.5));
        assert!(close(e.mean.map, 0.5));
    }

    #[test]
    fn queries_without_qrels_are_excluded() {
        let mut qrels = Qrels::new();
        qrels.insert("q1".into(), judged(&[("d1", 2)]));
        qrels.insert("q3".into(), judged(&[("d1", 1)]));
        qrels.insert("q4".into(), BTreeMap::new()); // no lines: same as absent
        let runs: Vec<(&str, Vec<(String, f64)>)> = vec![
            ("q1", run(&[("d1", 1.0)])),
            ("q2", run(&[("d9", 1.0)])),
            ("q4", run(&[("d1", 1.0)])),
        ];
        let e = evaluate(runs, &qrels);
        assert_eq!(e.num_evaluated(), 1);
        assert_eq!(e.excluded_no_qrels, ["q2", "q4"]);
        assert_eq!(e.missing_runs, ["q3"]);
        assert!(close(e.mean.ndcg_at_10, 1.0));
    }

    #[test]
    fn empty_inputs_do_not_panic() {
        let e = evaluate(Vec::<(String, Vec<(String, f64)>)>::new(), &Qrels::new());
        assert_eq!(e.mean, MetricSet::default());
        assert_eq!(e.num_evaluated(), 0);
        let mut qrels = Qrels::new();
        qrels.insert("q".into(), judged(&[("d", 1)]));
        let e = evaluate(vec![("q", Vec::<(String, f64)>::new())], &qrels);
        assert_eq!(e.per_query["q"], MetricSet::default());
        assert!(close(
            ndcg_at_k(&run(&[("d", 1.0)]), &judged(&[("d", 1)]), 0),
            0.0
        ));
    }

    #[test]
    fn k_larger_than_run() {
        // Run of 2, three relevant docs of gain 1.
        // DCG@10 = 1 (d1 at rank 1); IDCG@10 = 1 + 1/log2(3) + 1/log2(4)
        // = 2.1309298 → nDCG 0.4692787.
        let r = run(&[("d1", 0.9), ("x", 0.8)]);
        let j = judged(&[("d1", 1), ("d2", 1), ("d3", 1)]);
        assert!((ndcg_at_k(&r, &j, 10) - 0.4692787260).abs() < 1e-9);
        assert!(close(recall_at_k(&r, &j, 100), 1.0 / 3.0));
        assert!(close(mrr_at_k(&r, &j, 1000), 1.0));
    }

    #[test]
    fn unjudged_documents_have_gain_zero() {
        // u1 unjudged at rank 1, d1 (gain 1) at rank 2.
        // nDCG = (1/log2(3)) / 1 = 0.6309298; MRR 1/2; AP = (1/2)/1.
        let r = run(&[("u1", 0.9), ("d1", 0.8)]);
        let j = judged(&[("d1", 1), ("n1", 0)]);
        let m = query_metrics(&r, &j);
        assert!((m.ndcg_at_10 - 0.6309297536).abs() < 1e-9);
        assert!(close(m.mrr_at_10, 0.5));
        assert!(close(m.map, 0.5));
        assert!(close(m.recall_at_10, 1.0));
    }

    #[test]
    fn mrr_and_recall_cut_at_k_but_map_does_not() {
        // Relevant doc at rank 150.
        let mut r: Vec<(String, f64)> = (0..200)
            .map(|i| (format!("x{i:03}"), 1000.0 - i as f64))
            .collect();
        r[149].0 = "rel".to_string();
        let j = judged(&[("rel", 1)]);
        let m = query_metrics(&r, &j);
        assert_eq!(m.mrr_at_10, 0.0);
        assert_eq!(m.recall_at_100, 0.0);
        assert_eq!(m.ndcg_at_10, 0.0);
        assert!(close(m.map, 1.0 / 150.0));
    }

    #[test]
    fn accepts_hashmap_and_f32_scores() {
        let mut runs: HashMap<String, Vec<(&str, f32)>> = HashMap::new();
        runs.insert("q".into(), vec![("d2", 0.5f32), ("d1", 0.7f32)]);
        let mut qrels = Qrels::new();
        qrels.insert("q".into(), judged(&[("d2", 1)]));
        let e = evaluate(&runs, &qrels);
        assert!(close(e.mean.mrr_at_10, 0.5));
    }

    #[test]
    fn relative_change_matches_capot_tables() {
        // MS MARCO MRR@10 32.39 → 16.95 under typos: −47.7%.
        assert!((relative_change(32.39, 16.95) - (-0.476690)).abs() < 1e-5);
        assert!(close(relative_change(0.5, 0.448), -0.104));
        assert!(relative_change(0.0, 0.1).is_nan());
        assert!(close(relative_change(0.4, 0.4), 0.0));
    }

    #[test]
    fn metric_set_serde_names() {
        let m = MetricSet {
            ndcg_at_10: 0.1,
            mrr_at_10: 0.2,
            recall_at_10: 0.3,
            recall_at_100: 0.4,
            map: 0.5,
        };
        let v = serde_json::to_value(m).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 5);
        for k in ["ndcg@10", "mrr@10", "recall@10", "recall@100", "map"] {
            assert!(v.get(k).is_some(), "{k}");
            assert_eq!(Metric::parse(k).unwrap().key(), k);
        }
        assert_eq!(v["recall@100"], 0.4);
        let back: MetricSet = serde_json::from_value(v).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn paired_difference_stats() {
        let mut a = Evaluation::default();
        let mut b = Evaluation::default();
        for (q, x, y) in [("1", 0.5, 0.6), ("2", 0.5, 0.4), ("3", 0.2, 0.5)] {
            a.per_query.insert(
                q.into(),
                MetricSet {
                    ndcg_at_10: x,
                    ..Default::default()
                },
            );
            b.per_query.insert(
                q.into(),
                MetricSet {
                    ndcg_at_10: y,
                    ..Default::default()
                },
            );
        }
        let d = paired_difference(&a, &b, Metric::NdcgAt10);
        assert_eq!(d.n, 3);
        // diffs 0.1, −0.1, 0.3: mean 0.1, sd 0.2, se 0.2/√3.
        assert!((d.mean - 0.1).abs() < 1e-12);
        assert!((d.std_err - 0.2 / 3f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn cosine_and_anisotropy_by_hand() {
        let clean: Vec<Vec<f32>> = vec![vec![1.0, 0.0], vec![0.0, 1.0], vec![0.6, 0.8]];
        // Pairs: (e1,e2) 0, (e1,e3) 0.6, (e2,e3) 0.8 → μ = 1.4/3.
        let mu = anisotropy(&clean, 0).unwrap();
        assert!((mu - 1.4 / 3.0).abs() < 1e-7);
        // Variants: of e1 → (0.8, 0.6): cos 0.8; of e2 → (0, 1): cos 1.
        let variants = vec![(0usize, vec![0.8f32, 0.6]), (1, vec![0.0, 1.0])];
        let s = variant_cosine(&clean, &variants, mu).unwrap();
        assert!((s.mean_cosine - 0.9).abs() < 1e-7);
        // (0.9 − 0.46667) / (1 − 0.46667) = 0.8125.
        assert!((s.adjusted_cosine.unwrap() - 0.8125).abs() < 1e-6);
        assert_eq!(s.pairs, 2);
        let s2 = embedding_robustness(&clean, &variants).unwrap();
        assert_eq!(s, s2);
        // Unnormalised input gives the same cosine; zero vector gives 0.
        assert!((cosine(&[2.0, 0.0], &[3.0, 3.0]).unwrap() - 0.5f64.sqrt()).abs() < 1e-7);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]).unwrap(), 0.0);
    }

    #[test]
    fn cosine_errors_and_edge_cases() {
        let clean = vec![vec![1.0f32, 0.0]];
        assert!(matches!(
            anisotropy(&clean, 0),
            Err(EvalError::TooFewVectors { needed: 2, got: 1 })
        ));
        assert!(matches!(
            cosine(&[1.0], &[1.0, 0.0]),
            Err(EvalError::DimensionMismatch { left: 1, right: 2 })
        ));
        assert!(matches!(
            variant_cosine(&clean, &[(3usize, vec![1.0f32, 0.0])], 0.0),
            Err(EvalError::IndexOutOfRange { index: 3, len: 1 })
        ));
        assert!(variant_cosine(&clean, &Vec::<(usize, Vec<f32>)>::new(), 0.0).is_err());
        assert_eq!(adjusted_cosine(0.9, 1.0), None);
        assert_eq!(adjusted_cosine(f64::NAN, 0.2), None);
    }

    #[test]
    fn anisotropy_sample_is_deterministic() {
        let vecs: Vec<Vec<f32>> = (0..60)
            .map(|i| {
                let a = i as f32 * 0.37;
                vec![a.cos(), a.sin(), 0.5]
            })
            .collect();
        let full = anisotropy(&vecs, 0).unwrap();
        let s1 = anisotropy(&vecs, 500).unwrap();
        let s2 = anisotropy(&vecs, 500).unwrap();
        assert_eq!(s1, s2);
        assert!((-1.0..=1.0).contains(&s1));
        // 500 of 1770 pairs: the sample mean lands near the full mean.
        assert!((s1 - full).abs() < 0.1, "{s1} vs {full}");
        // Cap above the pair count → exact.
        assert_eq!(anisotropy(&vecs, 10_000).unwrap(), full);
    }
}
