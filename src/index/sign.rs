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
