//! Brute-force search over the raw vectors: the ground truth for recall
//! measurement, and good enough on its own for small corpora.

use std::cmp::Ordering;

use super::vectors::dot;
use super::Hit;

/// Order of hits: score descending, then index ascending (deterministic ties;
/// `total_cmp` keeps it a total order even with NaN).
pub(crate) fn hit_order(a: &Hit, b: &Hit) -> Ordering {
    b.score
        .total_cmp(&a.score)
        .then_with(|| a.index.cmp(&b.index))
}

/// The `k` best documents for a normalised query; `vectors` is `n × dim`.
pub(crate) fn top_k(vectors: &[f32], dim: usize, query: &[f32], k: usize) -> Vec<Hit> {
    let mut hits: Vec<Hit> = vectors
        .chunks_exact(dim)
        .enumerate()
        .map(|(index, v)| Hit {
            index,
            score: dot(query, v),
        })
        .collect();
    let k = k.min(hits.len());
    if k == 0 {
        return Vec::new();
    }
    if k < hits.len() {
        hits.select_nth_unstable_by(k - 1, hit_order);
        hits.truncate(k);
    }
    hits.sort_unstable_by(hit_order);
    hits
}
