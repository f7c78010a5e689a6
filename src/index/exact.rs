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

/// Merges hit lists of one query (e.g. the raw and the repaired text's): each document keeps its
/// best score; at most `k`, in [`hit_order`].
pub fn merge_best(lists: Vec<Vec<Hit>>, k: usize) -> Vec<Hit> {
    let mut lists = lists.into_iter();
    let mut merged = lists.next().unwrap_or_default();
    for list in lists {
        for h in list {
            match merged.iter_mut().find(|m| m.index == h.index) {
                Some(m) => m.score = m.score.max(h.score),
                None => merged.push(h),
            }
        }
    }
    merged.sort_unstable_by(hit_order);
    merged.truncate(k);
    merged
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

#[cfg(test)]
mod merge_tests {
    use super::*;

    #[test]
    fn merge_best_keeps_each_documents_better_score() {
        let h = |index, score| Hit { index, score };
        let merged = merge_best(
            vec![vec![h(1, 0.9), h(2, 0.5)], vec![h(2, 0.8), h(3, 0.7)]],
            2,
        );
        assert_eq!(merged, vec![h(1, 0.9), h(2, 0.8)]);
        assert_eq!(merge_best(vec![vec![h(4, 0.1)]], 5), vec![h(4, 0.1)]);
        assert!(merge_best(Vec::new(), 3).is_empty());
    }
}
