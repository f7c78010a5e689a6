//! Filtered search: the planner that picks, from the exact number of documents a filter
//! admits, between answering at once, scanning exactly those documents, scanning their sign
//! codes, and walking the graph while only admitted documents count as results.
//!
//! A walk under a filter admitting a share `s` of the documents costs more the smaller `s` is
//! (it must pass more nodes to settle `ef` admitted ones), while an exact scan scores each
//! admitted document once. The planner therefore scans when the admitted count is at most the
//! walk's cost in scanned rows, modelled as `scan_factor × ef / s` (i.e. below
//! `sqrt(scan_factor × ef × n)` documents; [`DEFAULT_SCAN_FACTOR`] unless the operator sets
//! another). It scans the admitted documents' sign codes instead (one bit a dimension, in
//! memory; [`super::sign`]) and re-scores the best (more where the re-scores say the codes
//! rank this query's neighbours loosely, all of them exactly past a quarter) when that costs
//! less than the walk (`sign_row_cost × admitted` rows, [`DEFAULT_SIGN_ROW_COST`]) and the
//! filter admits more than a few thousand documents, where the codes cost a fraction of the
//! exact scan; a filter that admits tens of thousands of documents far from the query leaves
//! the walk settling `ef` candidates among near-equal scores, where the codes find the answer
//! at a fixed cost.
//! Otherwise it walks; a walk that scores more nodes than the filter admits gives up and scans
//! (Lucene's rule), which bounds the cost of a filter anti-correlated with the query; walks
//! also start from a few admitted documents, so that such a filter rarely gets there. Every
//! answer holds exactly `min(k, admitted)` hits.

use std::sync::OnceLock;

use roaring::RoaringBitmap;
use serde::Serialize;

use super::error::IndexError;
use super::exact::hit_order;
use super::graph::{FilteredWalk, Scored};
use super::{vectors, Hit, Index, RESCORE_MIN, RESCORE_PER_HIT};

/// What a filtered walk costs, in rows of the exact scan, per unit of `ef` at a share of 1 (the
/// planner's default `scan_factor`; `--filter-scan-factor` sets another per server): fitted
/// to where a forced walk and a forced scan of the same filter cost the same (100,000 MiniLM
/// vectors, M 16, 1–20% filters: 0.6–1.4 at ef 64, 2.0–3.2 at ef 128–256; the larger value
/// keeps close calls on the scan, whose recall is 1). Until 2026-11-28 it was 12, what a walk
/// that scored every node it passed cost, and 10% filters at ef 96–256 were scanned 1.3–4.5×
/// slower than the two-hop walk answers them; see docs/benchmarks.md "Filtered search".
pub const DEFAULT_SCAN_FACTOR: f64 = 3.0;

/// What one admitted document costs a scan of the sign codes ([`super::sign`]), its share of
/// re-scoring included, in rows of the exact scan (the planner's default `sign_row_cost`). The
/// planner scans the codes where the exact scan costs more than the walk and the codes' scan
/// less: at 1M int8 documents under 10% filters that is from ef ≈ 500, where the walk reaches
/// recall 0.90–0.96 at 222–280 q/s and the codes 0.98–0.99 at 260–330 (docs/benchmarks.md
/// "Filtered search").
pub const DEFAULT_SIGN_ROW_COST: f64 = 0.15;

/// Candidates a scan of the sign codes keeps per hit asked for (at least
/// [`SIGN_RESCORE_MIN`]), re-scored on the vectors the walk reads: at 1M documents under 10%
/// filters, 800 of them held 0.98-1.00 of the exact top 10, 400 0.96-0.99, 200 0.90-0.96.
const SIGN_RESCORE_PER_HIT: usize = 80;
/// The least number of candidates a scan of the sign codes keeps.
const SIGN_RESCORE_MIN: usize = 800;
/// A scan of the sign codes stops once its `k`-th best re-scored candidate beats, by this many
/// standard deviations of the re-scores around their line fitted to the codes' estimates,
/// what that line predicts for the best candidate not re-scored; otherwise it re-scores twice
/// as many. For MiniLM vectors (5% and 10% of 100,000, 200 queries, in numpy) it never went on
/// at 3 (for up to a third of the queries at 4), their codes' best 800 holding 1.000 of the
/// exact top 10; with a shared direction added to documents and queries until the mean
/// vector's norm is 0.90 or 0.95 (encoders whose vectors all point one way), the best 800 held
/// 0.92-0.96 / 0.83-0.88 and going on at 3 standard deviations 0.97-0.98 / 0.93-0.96 (in Rust,
/// 100,000 documents at norm 0.90: 0.79-0.94 -> 0.88-0.99; docs/benchmarks.md "The codes
/// check their own ranking").
const SIGN_STOP_SIGMAS: f32 = 3.0;
/// A scan of the sign codes that would re-score more than `1 / SIGN_RESCORE_OVER_EXACT` of
/// the admitted documents scans them exactly instead: re-scoring twice as many each time has by
/// then re-scored about half of them, besides scanning the codes, and the exact scan's recall
/// is 1.
const SIGN_RESCORE_OVER_EXACT: usize = 4;

/// Where both scans cost less than the walk, the exact scan is kept while the filter admits at
/// most this many times the candidates the codes' scan keeps (4,800 documents at k = 10): the
/// codes' scan has a fixed part (re-scoring what it keeps, the filter's bit array), and at 1M
/// int8 documents the two cost the same at 5,000 admitted (0.5-0.75 ms) while at 10,000 the
/// codes took 0.7-1.0 ms against 1.7-2.8 ms, and at 20,000 1.2-1.3 against 4.8-5.0, at recall
/// 0.99 (docs/benchmarks.md "Filtered search").
const SIGN_SCAN_OVER_EXACT_PER_KEPT: usize = 6;

/// Below this share of admitted documents the walk scores admitted nodes only, stepping through
/// refused ones to their neighbours (ACORN-1's two-hop expansion; Weaviate switches at 0.4):
/// above it most neighbours are admitted and walking through every node costs less.
const TWO_HOP_BELOW: f64 = 0.4;

/// Above [`TWO_HOP_BELOW`], the walk still steps through a node's refused neighbours where fewer
/// than this share of its new neighbours are admitted: a filter anti-correlated with the query
/// refuses the query's whole neighbourhood, and scoring each refused node there is what made
/// such walks slow (50% anti-correlated at 100,000: 0.12-0.16x of the unfiltered q/s, p99
/// 14-21x; with it 0.16-0.20x, p99 10-12x; independent filters unchanged; 0.3 took more from
/// them; docs/benchmarks.md "Filtered search").
const STEP_THROUGH_BELOW: f64 = 0.2;

/// Above [`TWO_HOP_BELOW`], a walk that has met admitted nodes at less than this fraction of
/// the filter's share among all the nodes it met steps through refused nodes everywhere from
/// then on: the filter refuses the query's neighbourhood (it is anti-correlated with the query).
/// 50% anti-correlated at 100,000, ef 64: 0.24x of the unfiltered q/s and p99 10x without it,
/// 0.35x and p99 3.0x with it (recall 0.946 -> 0.911); independent filters unchanged; 0.84 began
/// to switch independent walks, 0.5 left anti p99 at 5x (docs/benchmarks.md "Filtered search").
const ANTI_CORRELATED_BELOW: f64 = 0.7;

/// Admitted documents a filtered walk starts from besides the end of the greedy descent, at
/// evenly spaced ranks of the admitted set (so anywhere in the graph). Without them a filter
/// that refuses the query's neighbourhood left walks scoring their way out of it until they
/// gave up for the exact scan: at 1M documents, ef 256, 10% anti-correlated: 81 of 200 queries
/// fell back, 0.07x of the unfiltered q/s, p99 26x; with 8 seeds none, 0.46x, p99 2.2x (recall
/// 0.912 -> 0.814: the fallbacks' exact answers are gone); 32 and 128 seeds bought nothing more
/// at 100,000 and 128 cost 10-25% of the q/s (docs/benchmarks.md "Filtered search"). Taking
/// the best-scoring 8 of 64 evenly spaced ones bought nothing either (1M, int8 copy, 10%
/// anti-correlated, ef 512-1536: 0.96-1.00x the q/s at equal recall; 2026-11-28).
const ADMITTED_SEEDS: u64 = 8;

/// How many admitted rows ahead of the one being scored the exact scan asks memory for.
const SCAN_PREFETCH_ROWS: usize = 16;

/// The documents a filter admits (internal indices): the bitmap, and for the graph walk, which
/// asks about one node at a time, the same set as a plain bit array, made on the first walk and
/// kept with the set (a roaring lookup took 2-18 ns on this machine, a bit test about 1; a walk
/// under a 10% filter asks about every neighbour of every node it steps through).
#[derive(Debug, Clone, Default)]
pub struct Admitted {
    bits: RoaringBitmap,
    dense: OnceLock<Box<[u64]>>,
}

impl From<RoaringBitmap> for Admitted {
    fn from(bits: RoaringBitmap) -> Self {
        Admitted {
            bits,
            dense: OnceLock::new(),
        }
    }
}

impl std::ops::Deref for Admitted {
    type Target = RoaringBitmap;
    fn deref(&self) -> &RoaringBitmap {
        &self.bits
    }
}

impl PartialEq for Admitted {
    fn eq(&self, other: &Self) -> bool {
        self.bits == other.bits
    }
}

impl Admitted {
    /// The set less `removed` (the frozen documents the live corpus replaced or deleted). The
    /// bit array comes along when the set has one, so a set used with every query is made into
    /// one once, not per query.
    pub fn without(&self, removed: impl IntoIterator<Item = u32>) -> Admitted {
        let removed: Vec<u32> = removed.into_iter().collect();
        // Unless the set is so sparse that the array would dwarf it (and a walk is unlikely).
        if self.bits.len().saturating_mul(16) >= self.bits.max().map_or(0, u64::from) {
            self.dense();
        }
        let mut bits = self.bits.clone();
        for &i in &removed {
            bits.remove(i);
        }
        let dense = OnceLock::new();
        if let Some(d) = self.dense.get() {
            let mut d = d.clone();
            for &i in &removed {
                if let Some(w) = d.get_mut(i as usize / 64) {
                    *w &= !(1u64 << (i % 64));
                }
            }
            let _ = dense.set(d);
        }
        Admitted { bits, dense }
    }

    /// The set as a bit array (made on first use; see [`bit`]).
    fn dense(&self) -> &[u64] {
        self.dense.get_or_init(|| {
            let words = self.bits.max().map_or(0, |m| m as usize / 64 + 1);
            let mut d = vec![0u64; words].into_boxed_slice();
            for i in &self.bits {
                d[i as usize / 64] |= 1u64 << (i % 64);
            }
            d
        })
    }
}

/// The documents below `n` in the bit array `dense`, in order.
fn ones(dense: &[u64], n: u32) -> impl Iterator<Item = u32> + Clone + '_ {
    dense
        .iter()
        .enumerate()
        .flat_map(|(w, &word)| {
            let base = w as u32 * 64;
            std::iter::successors((word != 0).then_some(word), |&rest| {
                let rest = rest & (rest - 1);
                (rest != 0).then_some(rest)
            })
            .map(move |rest| base + rest.trailing_zeros())
        })
        .take_while(move |&i| i < n)
}

/// Whether document `i` is in the bit array `dense`.
fn bit(dense: &[u64], i: u32) -> bool {
    dense
        .get(i as usize / 64)
        .is_some_and(|w| w & (1u64 << (i % 64)) != 0)
}

/// How a filtered search was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// No filter: the plain graph walk.
    Unfiltered,
    /// The filter admits no document: answered at once.
    Empty,
    /// The admitted documents were scored one by one (the filter is selective).
    Exact,
    /// The admitted documents' sign codes were scanned and the best re-scored: the filter
    /// admits too many to score each, and walking the graph under it would cost more.
    SignScan,
    /// The graph was walked through every node, counting only admitted ones as results.
    Graph,
    /// The walk passed more nodes than the filter admits, so the admitted documents were
    /// scored one by one after all.
    GraphThenExact,
    /// The sign codes ranked the query's neighbours too poorly to find them among a few of the
    /// admitted documents, so the admitted documents were scored one by one after all.
    SignScanThenExact,
}

impl Strategy {
    /// The name in responses and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Unfiltered => "unfiltered",
            Strategy::Empty => "empty",
            Strategy::Exact => "exact",
            Strategy::SignScan => "sign_scan",
            Strategy::Graph => "graph",
            Strategy::GraphThenExact => "graph_then_exact",
            Strategy::SignScanThenExact => "sign_scan_then_exact",
        }
    }
}

/// Hits of a filtered search and how they were found.
#[derive(Debug, Clone)]
pub struct FilteredSearch {
    pub hits: Vec<Hit>,
    pub strategy: Strategy,
}

impl Index {
    /// The `k` best documents among `admitted` (internal indices; ids past the index are
    /// ignored), with the same scores and order as [`Index::search`]: exactly
    /// `min(k, admitted)` hits. The planner scans (exactly, or the sign codes) while
    /// `admitted² ≤ scan_factor × ef × n` (0: always walk unless at most `k` are admitted; a
    /// huge value: always scan); see [`plan`] and the module documentation.
    pub fn search_admitted(
        &self,
        query: &[f32],
        k: usize,
        ef: usize,
        admitted: &Admitted,
        scan_factor: f64,
    ) -> Result<FilteredSearch, IndexError> {
        self.search_admitted_with(query, k, ef, admitted, scan_factor, DEFAULT_SIGN_ROW_COST)
    }

    /// [`Index::search_admitted`] with the sign codes' scan priced at `sign_row_cost` rows of
    /// the exact scan per admitted document (0 with `scan_factor` 0: always scan the codes;
    /// a huge value: never).
    pub fn search_admitted_with(
        &self,
        query: &[f32],
        k: usize,
        ef: usize,
        admitted: &Admitted,
        scan_factor: f64,
        sign_row_cost: f64,
    ) -> Result<FilteredSearch, IndexError> {
        let q = self.prepare_query(query)?;
        let n = self.len();
        let count = admitted.range_cardinality(0..n as u32) as usize;
        if count == 0 || k == 0 {
            return Ok(FilteredSearch {
                hits: Vec::new(),
                strategy: Strategy::Empty,
            });
        }
        if count == n {
            // Everything admitted: the plain walk, with no per-node check.
            return Ok(FilteredSearch {
                hits: self.search(query, k, ef)?,
                strategy: Strategy::Graph,
            });
        }
        let ef = ef.max(k).min(count);
        // What the codes' scan re-scores first: more where this index's codes have ranked poorly.
        let codes_keep =
            (self.sign.len() == n).then(|| sign_keep(k) << self.sign_margins.doublings());
        match plan(count, n, k, ef, scan_factor, sign_row_cost, codes_keep) {
            Strategy::Exact => {
                return Ok(FilteredSearch {
                    hits: self.scan(&q, k, admitted)?,
                    strategy: Strategy::Exact,
                })
            }
            Strategy::SignScan => {
                let keep = codes_keep.unwrap_or_else(|| sign_keep(k));
                return Ok(
                    match self.sign_scan(&q, k, keep, admitted.dense(), count)? {
                        Some(hits) => FilteredSearch {
                            hits,
                            strategy: Strategy::SignScan,
                        },
                        None => FilteredSearch {
                            hits: self.scan(&q, k, admitted)?,
                            strategy: Strategy::SignScanThenExact,
                        },
                    },
                );
            }
            _ => {}
        }
        let rows = self.vectors.as_slice();
        let dim = self.dimension();
        let row = |i: u32| {
            let i = i as usize;
            rows.get(i * dim..(i + 1) * dim).unwrap_or(&[])
        };
        let dense = admitted.dense();
        let admit = |i: u32| bit(dense, i);
        let share = count as f64 / n as f64;
        let walk = FilteredWalk {
            hop_below: if share < TWO_HOP_BELOW {
                1.0
            } else {
                STEP_THROUGH_BELOW
            },
            two_hop_below: ANTI_CORRELATED_BELOW * share,
            budget: count,
        };
        let seeds: Vec<u32> = (0..ADMITTED_SEEDS)
            .filter_map(|j| admitted.select((j * count as u64 / ADMITTED_SEEDS) as u32))
            .collect();
        let found = match &self.small {
            None => self.graph.search_filtered(
                ef,
                &mut |i| vectors::dot(&q, row(i)),
                &|i| vectors::prefetch(row(i)),
                &admit,
                walk,
                &seeds,
            ),
            Some(small) => self.graph.search_filtered(
                ef,
                &mut |i| small.score(&q, i),
                &|i| small.prefetch(i, dim),
                &admit,
                walk,
                &seeds,
            ),
        };
        match found {
            // A walk that settled fewer than k admitted nodes missed some: scan.
            Some(found) if found.len() >= k.min(count) => Ok(FilteredSearch {
                hits: self.exact_hits(&q, &found, k)?,
                strategy: Strategy::Graph,
            }),
            _ => Ok(FilteredSearch {
                hits: self.scan(&q, k, admitted)?,
                strategy: Strategy::GraphThenExact,
            }),
        }
    }

    /// Exact top-`k` among the admitted documents (a normalised query). With a smaller copy of
    /// the vectors, it is scanned (a quarter or half of the bytes to read) and its best
    /// `max(4k, 32)` re-scored in float32, as the graph walk's candidates are.
    fn scan(&self, q: &[f32], k: usize, admitted: &RoaringBitmap) -> Result<Vec<Hit>, IndexError> {
        let n = self.len() as u32;
        let admitted = || admitted.iter().take_while(move |&i| i < n);
        match &self.small {
            None => {
                let rows = self.vectors.as_slice();
                let dim = self.dimension();
                let row = |i: u32| {
                    let i = i as usize;
                    rows.get(i * dim..(i + 1) * dim).unwrap_or(&[])
                };
                let mut hits = top_scored(
                    admitted(),
                    k,
                    |i| vectors::dot(q, row(i)),
                    |i| vectors::prefetch(row(i)),
                );
                hits.truncate(k);
                Ok(hits)
            }
            Some(small) => {
                let dim = self.dimension();
                let keep = (RESCORE_PER_HIT * k).max(RESCORE_MIN);
                let found: Vec<Scored> = top_scored(
                    admitted(),
                    keep,
                    |i| small.score(q, i),
                    |i| small.prefetch(i, dim),
                )
                .into_iter()
                .map(|h| Scored(h.score, h.index as u32))
                .collect();
                self.exact_hits(q, &found, k)
            }
        }
    }
}

/// The plan for `count` admitted documents of `n` (`0 < count < n`), `k` hits and a walk of
/// `ef` ([`Strategy::Exact`], [`Strategy::SignScan`] or [`Strategy::Graph`]), priced in rows of
/// the exact scan: the walk at `scan_factor × ef × n / count`, the exact scan at `count`, the
/// codes' scan at `sign_row_cost × count` (`codes_keep`: the index has codes, and their scan
/// re-scores that many candidates first). The cheaper scan under the walk's price wins, except
/// that the exact scan is kept up to [`SIGN_SCAN_OVER_EXACT_PER_KEPT`] × the candidates the
/// codes keep, where the two cost about the same and the exact scan's recall is 1. At most `k`
/// admitted are always scanned exactly.
pub(crate) fn plan(
    count: usize,
    n: usize,
    k: usize,
    ef: usize,
    scan_factor: f64,
    sign_row_cost: f64,
    codes_keep: Option<usize>,
) -> Strategy {
    if count <= k {
        return Strategy::Exact;
    }
    let walk_cost = scan_factor * ef as f64 * n as f64 / count as f64;
    let exact = count as f64 <= walk_cost;
    let sign = codes_keep.is_some() && sign_row_cost * count as f64 <= walk_cost;
    let exact_first = codes_keep.is_none_or(|keep| count <= SIGN_SCAN_OVER_EXACT_PER_KEPT * keep);
    match (exact, sign) {
        (true, _) if exact_first || !sign => Strategy::Exact,
        (_, true) => Strategy::SignScan,
        _ => Strategy::Graph,
    }
}

/// Candidates a scan of the sign codes keeps for `k` hits.
fn sign_keep(k: usize) -> usize {
    (SIGN_RESCORE_PER_HIT * k).max(SIGN_RESCORE_MIN)
}

impl Index {
    /// The top-`k` among the `count` admitted documents (a normalised query) from their sign
    /// codes: the best `keep` by the codes' estimate (`max(80k, 800)`, more where this index's
    /// codes have ranked poorly, [`super::sign::SignMargins`], up to a quarter of the admitted
    /// documents, and none but the exact scan where a quarter is less than half as many) are
    /// re-scored on the vectors the walk reads, and their best `max(4k, 32)` exactly, as the
    /// graph walk's candidates are. Where the re-scored candidates say that the codes rank this
    /// query's neighbours too loosely for the `k`-th hit to be safe from the candidates not
    /// re-scored (vectors that share a large common direction leave the signs little to tell
    /// them apart; [`SIGN_STOP_SIGMAS`]), twice as many are re-scored. `None` where that would
    /// re-score so many that the exact scan costs less ([`SIGN_RESCORE_OVER_EXACT`]).
    fn sign_scan(
        &self,
        q: &[f32],
        k: usize,
        mut keep: usize,
        admitted: &[u64],
        count: usize,
    ) -> Result<Option<Vec<Hit>>, IndexError> {
        // A raised start re-scores at most a quarter of the admitted documents (the rule may
        // stop there, where the exact scan reads them all), and none where a quarter is less
        // than half of it: those codes need more than the quarter to be trusted.
        let base = sign_keep(k);
        let quarter = count / SIGN_RESCORE_OVER_EXACT;
        if keep > base && quarter < keep / 2 {
            return Ok(None);
        }
        keep = keep.min(quarter).max(base);
        let query = self.sign.query(q);
        let best = (RESCORE_PER_HIT * k).max(RESCORE_MIN);
        // Twice what is re-scored and one more (the best of the rest): a first extension
        // needs no second pass over the codes.
        let select = |keep: usize| {
            self.sign
                .top(&query, ones(admitted, self.len() as u32), 2 * keep + 1)
        };
        let mut candidates = select(keep);
        let mut first_round = true;
        loop {
            let considered = &candidates[..keep.min(candidates.len())];
            let rescores = self.rescore_codes(q, considered);
            // The margin of the first `base` candidates, whatever this index starts with, so
            // that what it records does not move with what it starts with; where it starts with
            // `base`, also the margin this round stops on.
            let mut base_margin = None;
            if std::mem::take(&mut first_round) {
                let (considered, rescores) = (
                    &considered[..base.min(considered.len())],
                    &rescores[..base.min(rescores.len())],
                );
                if let (Some(next), Some(k_th)) = (candidates.get(base), kth_largest(rescores, k)) {
                    let m = margin(considered, rescores, k_th, next.score);
                    self.sign_margins.record(m);
                    base_margin = (keep == base).then_some(m);
                }
            }
            let mut found: Vec<Scored> = considered
                .iter()
                .zip(&rescores)
                .map(|(c, &s)| Scored(s, c.index as u32))
                .collect();
            if best < found.len() {
                found.select_nth_unstable_by(best - 1, |a, b| b.cmp(a));
                found.truncate(best);
            }
            found.sort_unstable_by(|a, b| b.cmp(a));
            let settled = match (candidates.get(keep), found.get(k.saturating_sub(1))) {
                (Some(next), Some(k_th)) => {
                    base_margin.unwrap_or_else(|| margin(considered, &rescores, k_th.0, next.score))
                        > SIGN_STOP_SIGMAS
                }
                _ => true,
            };
            if settled {
                return self.exact_hits(q, &found, k).map(Some);
            }
            keep *= 2;
            if SIGN_RESCORE_OVER_EXACT * keep > count {
                return Ok(None);
            }
            if candidates.len() <= keep {
                candidates = select(keep);
            }
        }
    }

    /// `candidates` re-scored on the vectors the walk reads, in their order.
    fn rescore_codes(&self, q: &[f32], candidates: &[Hit]) -> Vec<f32> {
        let dim = self.dimension();
        let ids = candidates.iter().map(|c| c.index as u32);
        match &self.small {
            None => {
                let rows = self.vectors.as_slice();
                let row = |i: u32| {
                    let i = i as usize;
                    rows.get(i * dim..(i + 1) * dim).unwrap_or(&[])
                };
                prefetched(ids, |i| vectors::prefetch(row(i)))
                    .map(|i| vectors::dot(q, row(i)))
                    .collect()
            }
            Some(small) => prefetched(ids, |i| small.prefetch(i, dim))
                .map(|i| small.score(q, i))
                .collect(),
        }
    }
}

/// By how many residual deviations `k_th`, the `k`-th best re-score of the `considered`
/// candidates (whose `score` is the codes' estimate; `rescores` in their order), beats what the
/// line through (estimate, re-score) predicts for an estimate of `next` (± infinity where the
/// re-scores lie on the line).
fn margin(considered: &[Hit], rescores: &[f32], k_th: f32, next: f32) -> f32 {
    let n = rescores.len() as f64;
    let pairs = || {
        considered
            .iter()
            .zip(rescores)
            .map(|(c, &s)| (f64::from(c.score), f64::from(s)))
    };
    let (mean_e, mean_s) = pairs().fold((0.0, 0.0), |(e, s), (x, y)| (e + x / n, s + y / n));
    let (var_e, cov) = pairs().fold((0.0, 0.0), |(v, c), (x, y)| {
        (v + (x - mean_e).powi(2), c + (x - mean_e) * (y - mean_s))
    });
    let slope = if var_e > 0.0 { cov / var_e } else { 0.0 };
    let residual = pairs()
        .map(|(x, y)| (y - mean_s - slope * (x - mean_e)).powi(2))
        .sum::<f64>()
        / n;
    let predicted = mean_s + slope * (f64::from(next) - mean_e);
    ((f64::from(k_th) - predicted) / residual.sqrt()) as f32
}

/// The `k`-th largest of `scores` (`None` where there are fewer).
fn kth_largest(scores: &[f32], k: usize) -> Option<f32> {
    let mut scores = scores.to_vec();
    let at = k.checked_sub(1).filter(|&at| at < scores.len())?;
    let (_, &mut k_th, _) = scores.select_nth_unstable_by(at, |a, b| b.total_cmp(a));
    Some(k_th)
}

/// The `keep` best of `ids` by `score`, in [`hit_order`], each row asked of memory ahead of its
/// turn ([`prefetched`]).
#[inline(always)]
pub(super) fn top_scored<I>(
    ids: I,
    keep: usize,
    mut score: impl FnMut(u32) -> f32,
    prefetch: impl Fn(u32),
) -> Vec<Hit>
where
    I: Iterator<Item = u32> + Clone,
{
    let keep = keep.max(1);
    // The best `keep` so far, with room for as many again: a row below the worst of those kept
    // can never be among them, and most rows stop at that comparison.
    let mut hits: Vec<Hit> = Vec::with_capacity(2 * keep);
    let mut floor = f32::NEG_INFINITY;
    for i in prefetched(ids, prefetch) {
        let score = score(i);
        if score >= floor {
            hits.push(Hit {
                index: i as usize,
                score,
            });
            if hits.len() == 2 * keep {
                hits.select_nth_unstable_by(keep - 1, hit_order);
                hits.truncate(keep);
                floor = hits.iter().map(|h| h.score).fold(f32::INFINITY, f32::min);
            }
        }
    }
    hits.sort_unstable_by(hit_order);
    hits.truncate(keep);
    hits
}

/// `ids`, each row asked of memory [`SCAN_PREFETCH_ROWS`] ahead of its turn (`prefetch`): the
/// ids are scattered over the rows, and fetching each only when it is scored waits out a memory
/// round trip per row, where a cursor running ahead keeps that many fetches in flight.
#[inline(always)]
fn prefetched<I>(ids: I, prefetch: impl Fn(u32)) -> impl Iterator<Item = u32>
where
    I: Iterator<Item = u32> + Clone,
{
    let mut ahead = ids.clone();
    for i in ahead.by_ref().take(SCAN_PREFETCH_ROWS) {
        prefetch(i);
    }
    ids.inspect(move |_| {
        if let Some(next) = ahead.next() {
            prefetch(next);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At 1M documents, k 10 and ef 64 (the measured cases of docs/benchmarks.md): 0.1% and
    /// 0.45% are scanned exactly, 1-2% by their codes (cheaper than the exact scan), 5%
    /// walked; 10% by its codes from ef 500 and walked below; without codes the exact scan
    /// keeps 1%; the operator's factor and the codes' price force each plan.
    #[test]
    fn the_planner_prefers_the_cheaper_scan_under_the_walk() {
        let n = 1_000_000;
        let p = |count, ef, f, c, codes: bool| plan(count, n, 10, ef, f, c, codes.then_some(800));
        let (f, c) = (DEFAULT_SCAN_FACTOR, DEFAULT_SIGN_ROW_COST);
        assert_eq!(p(1_000, 64, f, c, true), Strategy::Exact);
        assert_eq!(p(4_500, 64, f, c, true), Strategy::Exact);
        assert_eq!(p(10_000, 64, f, c, true), Strategy::SignScan);
        assert_eq!(p(10_000, 64, f, c, false), Strategy::Exact);
        assert_eq!(p(20_000, 64, f, c, true), Strategy::SignScan);
        assert_eq!(p(20_000, 64, f, c, false), Strategy::Graph);
        assert_eq!(p(50_000, 64, f, c, true), Strategy::Graph);
        assert_eq!(p(100_000, 448, f, c, true), Strategy::Graph);
        assert_eq!(p(100_000, 512, f, c, true), Strategy::SignScan);
        assert_eq!(p(500_000, 1024, f, c, true), Strategy::Graph);
        // k raises what the codes keep, and with it where they replace the exact scan.
        assert_eq!(
            plan(10_000, n, 200, 200, f, c, Some(16_000)),
            Strategy::Exact
        );
        // So do codes that rank this index's vectors poorly (the scans start with more).
        assert_eq!(plan(10_000, n, 10, 64, f, c, Some(3_200)), Strategy::Exact);
        // Forced: always walk; always scan exactly; always scan the codes.
        assert_eq!(p(10_000, 64, 0.0, c, true), Strategy::Graph);
        assert_eq!(p(900_000, 64, 1e12, 1e12, true), Strategy::Exact);
        assert_eq!(p(5_000, 64, 0.0, 0.0, true), Strategy::SignScan);
        // At most k admitted: scanned exactly whatever the factors.
        assert_eq!(p(10, 64, 0.0, 0.0, true), Strategy::Exact);
    }

    /// The bit array and the bitmap hold the same documents.
    fn agree(a: &Admitted, n: u32) {
        let dense = a.dense();
        for i in 0..n {
            assert_eq!(bit(dense, i), a.contains(i), "document {i}");
        }
    }

    #[test]
    fn a_set_less_removed_documents_admits_the_same_in_both_forms() {
        let n = 5000;
        let half: RoaringBitmap = (0..n).filter(|i| i % 3 != 0).collect();
        let sparse: RoaringBitmap = [7, 4000, 4999].into_iter().collect();
        let removed = [1u32, 2, 64, 65, 4000, 4999, 6000];
        for bits in [half, sparse] {
            // Taken away before the bit array exists, and after.
            let fresh = Admitted::from(bits.clone());
            let less = fresh.without(removed);
            agree(&less, n);
            let used = Admitted::from(bits.clone());
            agree(&used, n);
            let less_used = used.without(removed);
            assert!(removed.iter().all(|&i| !less_used.contains(i)));
            agree(&less_used, n);
            assert_eq!(less, less_used);
            // The set it was taken from is unchanged.
            assert_eq!(*used, bits);
            agree(&used, n);
        }
    }
}
