//! One bit per dimension of every vector (its sign), kept in memory for scanning many admitted
//! documents cheaply: 48 bytes a 384-d vector instead of 384 (int8) or 1,536 (float32).
//!
//! A filter that admits tens of thousands of documents far from the query leaves the graph
//! walk settling `ef` admitted candidates among near-equal scores, and an exact scan reads every
//! admitted row; a scan of the sign codes reads an eighth of the int8 bytes and picks candidates
//! that the vectors then re-score (RaBitQ and binary quantisation with re-scoring rest on the
//! same estimate). The query keeps 4 bits per dimension: `q · b` for a code `b ∈ {0,1}^d` is
//! `step · Σ_p 2^p popcount(plane_p & b) + lo · popcount(b)`, which orders documents as
//! `q · sign(x)` does (`q · sign(x) = 2 q·b − Σq`).

/// Bits of the query kept per dimension.
const QUERY_BITS: usize = 4;

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use serde::Serialize;

use super::filtered::top_scored;
use super::Hit;

/// Sign codes of `count` vectors, `words` 64-bit words each (bit `j` of a row: dimension `j` is
/// positive), in an anonymous mapping the kernel may back with 2 MiB pages: a scan reads rows
/// all over it, and with 4 KiB pages most of those reads also miss the TLB.
#[derive(Debug)]
pub(crate) struct SignCodes {
    words: usize,
    map: Option<memmap2::MmapMut>,
}

/// A query laid out for scoring codes: bit plane `p` of its 4-bit values, and the affine map
/// back to the query's scale.
#[derive(Debug)]
pub(crate) struct SignQuery {
    planes: Vec<u64>,
    lo: f32,
    step: f32,
}

impl SignCodes {
    /// The codes of `rows` (each `dim` values; `positive(x)` sets the bit). Where the memory
    /// cannot be mapped the codes are empty, and the planner does not scan them.
    pub(crate) fn from_rows<'a, T: Copy + 'a>(
        rows: impl ExactSizeIterator<Item = &'a [T]>,
        dim: usize,
        positive: impl Fn(T) -> bool,
    ) -> SignCodes {
        let words = dim.div_ceil(64);
        let bytes = rows.len() * words * 8;
        let Some(mut map) = (bytes > 0)
            .then(|| memmap2::MmapMut::map_anon(bytes).ok())
            .flatten()
        else {
            return SignCodes { words, map: None };
        };
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        let codes: &mut [u64] = bytemuck::try_cast_slice_mut(&mut map[..]).unwrap_or_default();
        for (row, out) in rows.zip(codes.chunks_exact_mut(words)) {
            let row = row.get(..dim).unwrap_or(row);
            for (chunk, word) in row.chunks(64).zip(out.iter_mut()) {
                *word = chunk
                    .iter()
                    .enumerate()
                    .fold(0u64, |w, (j, &x)| w | u64::from(positive(x)) << j);
            }
        }
        SignCodes {
            words,
            map: Some(map),
        }
    }

    /// The codes, row after row.
    fn codes(&self) -> &[u64] {
        self.map
            .as_ref()
            .and_then(|m| bytemuck::try_cast_slice(&m[..]).ok())
            .unwrap_or_default()
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.map.as_ref().map_or(0, |m| m.len())
    }

    /// Number of rows.
    pub(crate) fn len(&self) -> usize {
        self.codes().len().checked_div(self.words).unwrap_or(0)
    }

    /// The query `q` quantised for scoring (4 bits per dimension, spread between its least and
    /// its largest value).
    pub(crate) fn query(&self, q: &[f32]) -> SignQuery {
        let lo = q.iter().copied().fold(f32::INFINITY, f32::min);
        let hi = q.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let levels = ((1 << QUERY_BITS) - 1) as f32;
        let step = if hi > lo { (hi - lo) / levels } else { 1.0 };
        let lo = if lo.is_finite() { lo } else { 0.0 };
        let mut planes = vec![0u64; QUERY_BITS * self.words];
        for (j, &x) in q.iter().enumerate().take(self.words * 64) {
            let v = ((x - lo) / step).round().clamp(0.0, levels) as u32;
            for (p, plane) in planes.chunks_exact_mut(self.words).enumerate() {
                if v >> p & 1 == 1 {
                    plane[j / 64] |= 1 << (j % 64);
                }
            }
        }
        SignQuery { planes, lo, step }
    }

    /// The `keep` best of `ids` by the estimate of `q · b` (`b` a row's code; larger: nearer;
    /// orders rows as `q · sign(x)` does), best first (see `filtered::top_scored`).
    pub(crate) fn top(
        &self,
        q: &SignQuery,
        ids: impl Iterator<Item = u32> + Clone,
        keep: usize,
    ) -> Vec<Hit> {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("popcnt") {
                // SAFETY: the CPU has POPCNT (checked above).
                return unsafe { self.top_popcnt(q, ids, keep) };
            }
        }
        self.top_portable(q, ids, keep)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    unsafe fn top_popcnt(
        &self,
        q: &SignQuery,
        ids: impl Iterator<Item = u32> + Clone,
        keep: usize,
    ) -> Vec<Hit> {
        self.top_portable(q, ids, keep)
    }

    /// [`SignCodes::top`] as the compiler makes it for the CPU it targets; inlined into
    /// [`SignCodes::top_popcnt`] it counts bits with one instruction. The common widths (256,
    /// 384, 512, 768 and 1,024 dimensions) run with the row's length known, unrolled.
    #[inline(always)]
    fn top_portable(
        &self,
        q: &SignQuery,
        ids: impl Iterator<Item = u32> + Clone,
        keep: usize,
    ) -> Vec<Hit> {
        match self.words {
            4 => self.top_fixed::<4>(q, ids, keep),
            6 => self.top_fixed::<6>(q, ids, keep),
            8 => self.top_fixed::<8>(q, ids, keep),
            12 => self.top_fixed::<12>(q, ids, keep),
            16 => self.top_fixed::<16>(q, ids, keep),
            w => {
                let codes = self.codes();
                top_scored(
                    ids,
                    keep,
                    |i| {
                        codes
                            .get(i as usize * w..(i as usize + 1) * w)
                            .map_or(0.0, |code| score_portable(&q.planes, code, q.lo, q.step))
                    },
                    |i| self.prefetch(i),
                )
            }
        }
    }

    /// [`SignCodes::top_portable`] for rows of `W` words.
    #[inline(always)]
    fn top_fixed<const W: usize>(
        &self,
        q: &SignQuery,
        ids: impl Iterator<Item = u32> + Clone,
        keep: usize,
    ) -> Vec<Hit> {
        let mut planes = [[0u64; W]; QUERY_BITS];
        for (plane, bits) in planes.iter_mut().zip(q.planes.chunks_exact(W)) {
            plane.copy_from_slice(bits);
        }
        let (codes, _) = self.codes().as_chunks::<W>();
        top_scored(
            ids,
            keep,
            |i| {
                let Some(code) = codes.get(i as usize) else {
                    return 0.0;
                };
                let (mut acc, mut ones) = (0u32, 0u32);
                for k in 0..W {
                    ones += code[k].count_ones();
                    for (p, plane) in planes.iter().enumerate() {
                        acc += (plane[k] & code[k]).count_ones() << p;
                    }
                }
                q.step * acc as f32 + q.lo * ones as f32
            },
            |i| self.prefetch(i),
        )
    }

    /// Starts loading row `i`'s code: its first and its last cache line (a row of 48 bytes
    /// straddles two lines every other row).
    #[inline(always)]
    pub(crate) fn prefetch(&self, i: u32) {
        let w = self.words;
        if let Some(code) = self.codes().get(i as usize * w..(i as usize + 1) * w) {
            super::vectors::prefetch(&code[..1]);
            super::vectors::prefetch(&code[w - 1..]);
        }
    }
}

/// Scans whose margins [`SignMargins`] keeps (the most recent).
const MARGIN_WINDOW: usize = 256;
/// Scans a [`SignMargins`] waits for before it judges the codes.
const MARGIN_MIN_SCANS: usize = 32;
/// A median margin at or above this leaves the scans' first round as it is: MiniLM's vectors
/// read 4.4-5.2 (100,000 documents, 5-20% filters, independent and anti-correlated, numpy), and
/// their codes' best 800 held 0.997-1.000 of the exact top 10.
const MARGIN_ENOUGH: f32 = 3.5;
/// Each time the median margin falls this far short of [`MARGIN_ENOUGH`], the first round
/// re-scores twice as many candidates: the same vectors with one direction added until the mean
/// vector's norm is 0.84 read 3.1-3.35 and needed twice as many for recall 0.97-1.00 (0.95-0.99
/// without), at norm 0.90 2.96-3.12 and four times (0.96-1.00; 0.90-0.98 without).
const MARGIN_PER_DOUBLING: f32 = 0.25;
/// The most doublings of the first round [`SignMargins`] asks for (eight times as many).
const MARGIN_MAX_DOUBLINGS: u32 = 3;
/// Margins past this (either way) are recorded as this: a scan whose re-scores lie exactly on
/// their line has an infinite margin.
const MARGIN_LIMIT: f32 = 1000.0;
/// How often (in scans) a [`SignMargins`] recomputes its median (a divisor of
/// [`MARGIN_MIN_SCANS`], so that it judges at once).
const MARGIN_EVERY: usize = 16;

/// What the sign codes' scans of one index have said about how well the codes rank its vectors:
/// each scan's margin (how many residual deviations its `k`-th re-score stood above what the
/// line fitted to its re-scores predicts for the best candidate not re-scored, on the first
/// round's candidates), the median of the last [`MARGIN_WINDOW`], and from it how many times to
/// double the candidates the first round re-scores. A query's own margin separates poorly the
/// queries whose top 10 the codes missed from those whose they did not; the median separates
/// well an encoder whose vectors all lean one way (whose signs say little) from one whose do
/// not. Shared by every thread searching the index, updated without locks (a race loses a
/// margin at worst).
#[derive(Debug)]
pub(crate) struct SignMargins {
    recent: [AtomicU32; MARGIN_WINDOW],
    scans: AtomicUsize,
    /// The median's bits; NaN until [`MARGIN_MIN_SCANS`].
    median: AtomicU32,
    doublings: AtomicU32,
}

/// The sign codes and what their scans have said of them, as `GET /admin/index` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SignCodesReport {
    /// Bytes the codes hold in memory (0 where they could not be made: filters then never
    /// scan them).
    pub bytes: usize,
    /// Scans of the sign codes answered since the index was loaded.
    pub scans: usize,
    /// The median margin of the most recent scans (at most 256); `None` before 32.
    pub median_margin: Option<f32>,
    /// How many times the candidates the scans re-score first are multiplied (1, 2, 4 or 8).
    pub candidates_factor: u32,
}

impl Default for SignMargins {
    fn default() -> Self {
        SignMargins {
            recent: std::array::from_fn(|_| AtomicU32::new(0)),
            scans: AtomicUsize::new(0),
            median: AtomicU32::new(f32::NAN.to_bits()),
            doublings: AtomicU32::new(0),
        }
    }
}

impl SignMargins {
    /// Records one scan's margin (a NaN is ignored; beyond ±[`MARGIN_LIMIT`], as that limit, so
    /// that the median reported is a number).
    pub(crate) fn record(&self, margin: f32) {
        if margin.is_nan() {
            return;
        }
        let margin = margin.clamp(-MARGIN_LIMIT, MARGIN_LIMIT);
        let at = self.scans.fetch_add(1, Ordering::Relaxed);
        self.recent[at % MARGIN_WINDOW].store(margin.to_bits(), Ordering::Relaxed);
        let seen = at + 1;
        if seen >= MARGIN_MIN_SCANS && seen.is_multiple_of(MARGIN_EVERY) {
            let mut margins: Vec<f32> = self.recent[..seen.min(MARGIN_WINDOW)]
                .iter()
                .map(|m| f32::from_bits(m.load(Ordering::Relaxed)))
                .collect();
            let mid = margins.len() / 2;
            let (_, &mut median, _) = margins.select_nth_unstable_by(mid, f32::total_cmp);
            self.median.store(median.to_bits(), Ordering::Relaxed);
            self.doublings
                .store(doublings_for(median), Ordering::Relaxed);
        }
    }

    /// Takes over what `other` has learnt (the index a compaction replaces: the same encoder's
    /// vectors, so the same codes' quality), instead of judging again from nothing.
    pub(crate) fn take_over(&self, other: &SignMargins) {
        for (mine, theirs) in self.recent.iter().zip(&other.recent) {
            mine.store(theirs.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        for (mine, theirs) in [
            (&self.median, &other.median),
            (&self.doublings, &other.doublings),
        ] {
            mine.store(theirs.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        self.scans
            .store(other.scans.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// How many times to double the candidates a scan's first round re-scores.
    pub(crate) fn doublings(&self) -> u32 {
        self.doublings.load(Ordering::Relaxed)
    }

    /// What it says, beside the codes' `bytes`.
    pub(crate) fn report(&self, bytes: usize) -> SignCodesReport {
        let median = f32::from_bits(self.median.load(Ordering::Relaxed));
        SignCodesReport {
            bytes,
            scans: self.scans.load(Ordering::Relaxed),
            median_margin: (!median.is_nan()).then_some(median),
            candidates_factor: 1 << self.doublings(),
        }
    }
}

/// Doublings of the first round for a median margin (see [`MARGIN_PER_DOUBLING`]).
fn doublings_for(median: f32) -> u32 {
    let short = ((MARGIN_ENOUGH - median) / MARGIN_PER_DOUBLING).round();
    if short.is_nan() {
        return 0;
    }
    short.clamp(0.0, MARGIN_MAX_DOUBLINGS as f32) as u32
}

#[inline(always)]
fn score_portable(planes: &[u64], code: &[u64], lo: f32, step: f32) -> f32 {
    let w = code.len();
    let (mut acc, mut ones) = (0u32, 0u32);
    for (k, &c) in code.iter().enumerate() {
        ones += c.count_ones();
        for p in 0..QUERY_BITS {
            acc += (planes[p * w + k] & c).count_ones() << p;
        }
    }
    step * acc as f32 + lo * ones as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    impl SignCodes {
        /// The estimate [`SignCodes::top`] ranks row `i` by (0 for a row out of range).
        fn score(&self, q: &SignQuery, i: u32) -> f32 {
            let w = self.words;
            self.codes()
                .get(i as usize * w..(i as usize + 1) * w)
                .map_or(0.0, |code| score_portable(&q.planes, code, q.lo, q.step))
        }
    }

    fn rows(n: usize, dim: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        (0..n * dim)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 33) as f32 / (1u64 << 31) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    /// The estimate equals `q̃ · b` computed directly, where `q̃` is the 4-bit query mapped
    /// back (within float rounding), for dimensions that do not fill the last word too.
    #[test]
    fn the_estimate_is_the_quantised_query_dotted_with_the_bits() {
        for dim in [5, 64, 100, 384] {
            let v = rows(50, dim, dim as u64);
            let codes = SignCodes::from_rows(v.chunks_exact(dim), dim, |x| x > 0.0);
            assert_eq!(codes.len(), 50);
            let q = rows(1, dim, 99);
            let sq = codes.query(&q);
            let lo = q.iter().copied().fold(f32::INFINITY, f32::min);
            let hi = q.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let step = (hi - lo) / 15.0;
            for (i, row) in v.chunks_exact(dim).enumerate() {
                let want: f32 = q
                    .iter()
                    .zip(row)
                    .filter(|(_, &x)| x > 0.0)
                    .map(|(&y, _)| lo + step * ((y - lo) / step).round())
                    .sum();
                let got = codes.score(&sq, i as u32);
                assert!(
                    (got - want).abs() < 1e-3,
                    "dim {dim} row {i}: {got} vs {want}"
                );
            }
            assert_eq!(codes.score(&sq, 50), 0.0, "a row out of range scores 0");
            // `top` (with POPCNT where the CPU has it) ranks by the same estimate.
            for h in codes.top(&sq, 0..50, 50) {
                assert_eq!(h.score, codes.score(&sq, h.index as u32));
            }
        }
    }

    /// What the filtered scan relies on: among 20,000 clustered 256-d vectors, the best 800 by
    /// the codes (4% of them) hold nearly all of the exact top 10 of queries near a cluster,
    /// and `top` keeps exactly `keep` of the ids it is given, best first.
    #[test]
    fn the_best_codes_hold_the_exact_top_ten() {
        let (n, dim, clusters) = (20_000usize, 256usize, 20usize);
        let centres = rows(clusters, dim, 5);
        let noise = rows(n, dim, 6);
        let unit = |v: Vec<f32>| {
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.into_iter().map(|x| x / norm).collect::<Vec<f32>>()
        };
        let v: Vec<f32> = (0..n)
            .flat_map(|i| {
                let c = &centres[(i % clusters) * dim..][..dim];
                let x = &noise[i * dim..][..dim];
                unit(c.iter().zip(x).map(|(c, x)| c + 0.8 * x).collect())
            })
            .collect();
        let codes = SignCodes::from_rows(v.chunks_exact(dim), dim, |x| x > 0.0);
        assert_eq!((codes.len(), codes.bytes()), (n, n * 32));
        let jitter = rows(clusters, dim, 8);
        let (mut found, mut wanted) = (0, 0);
        for c in 0..clusters {
            let q = unit(
                (0..dim)
                    .map(|j| centres[c * dim + j] + jitter[c * dim + j])
                    .collect(),
            );
            // Every other document, as a filter would admit them.
            let ids = (0..n as u32).step_by(2);
            let best = codes.top(&codes.query(&q), ids.clone(), 800);
            assert_eq!(best.len(), 800);
            assert!(best.windows(2).all(|w| w[0].score >= w[1].score));
            assert!(best.iter().all(|h| h.index % 2 == 0));
            let mut exact: Vec<(f32, u32)> = ids
                .map(|i| {
                    let row = &v[i as usize * dim..][..dim];
                    (row.iter().zip(&q).map(|(a, b)| a * b).sum(), i)
                })
                .collect();
            exact.sort_by(|a, b| b.0.total_cmp(&a.0));
            for &(_, i) in &exact[..10] {
                found += usize::from(best.iter().any(|h| h.index == i as usize));
                wanted += 1;
            }
        }
        let recall = found as f64 / wanted as f64;
        assert!(
            recall >= 0.95,
            "the codes' top 800 hold {recall} of the top 10"
        );
    }

    /// Nothing is judged before 32 scans; then the median of the last 256 sets the doublings:
    /// none from a median of 3.5 up, one per quarter below, at most three; NaN is ignored.
    #[test]
    fn the_median_margin_of_recent_scans_sets_the_first_round() {
        let margins = SignMargins::default();
        for _ in 0..31 {
            margins.record(1.0);
        }
        margins.record(f32::NAN);
        let r = margins.report(0);
        assert_eq!(
            (r.scans, r.median_margin, r.candidates_factor),
            (31, None, 1)
        );
        margins.record(1.0);
        assert_eq!(margins.report(0).median_margin, Some(1.0));
        assert_eq!(margins.report(0).candidates_factor, 8);
        // 256 newer scans replace the old ones entirely.
        for i in 0..256 {
            margins.record(if i % 2 == 0 { 5.0 } else { f32::INFINITY });
        }
        let r = margins.report(0);
        assert_eq!(
            (r.scans, r.median_margin, r.candidates_factor),
            (288, Some(1000.0), 1)
        );
        for _ in 0..256 {
            margins.record(3.0);
        }
        assert_eq!(margins.report(0).candidates_factor, 4);
        // A successor takes it all over, and goes on from there.
        let next = SignMargins::default();
        next.take_over(&margins);
        assert_eq!(next.report(0), margins.report(0));
        for _ in 0..128 {
            next.record(5.0);
        }
        assert_eq!(next.report(0).candidates_factor, 1);
        assert_eq!(margins.report(0).candidates_factor, 4);
        assert_eq!(doublings_for(3.5), 0);
        assert_eq!(doublings_for(3.3), 1);
        assert_eq!(doublings_for(3.2), 1);
        assert_eq!(doublings_for(2.9), 2);
        assert_eq!(doublings_for(f32::NEG_INFINITY), 3);
        assert_eq!(doublings_for(9.0), 0);
    }

    /// Ranked by the estimate, a vector's own code and its neighbours come first: the codes
    /// carry the direction.
    #[test]
    fn a_vector_ranks_its_own_code_first() {
        let dim = 128;
        let v = rows(500, dim, 3);
        let codes = SignCodes::from_rows(v.chunks_exact(dim), dim, |x| x > 0.0);
        for i in [0usize, 17, 499] {
            let sq = codes.query(&v[i * dim..(i + 1) * dim]);
            let best = (0..500u32)
                .max_by(|&a, &b| codes.score(&sq, a).total_cmp(&codes.score(&sq, b)))
                .unwrap();
            assert_eq!(best as usize, i);
        }
    }
}
