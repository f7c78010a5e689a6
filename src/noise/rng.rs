//! Seeded pseudo-random numbers for the noise generators.
//!
//! Hand-written on purpose: FNV-1a (64 bit) turns (seed, kind, query id,
//! variant) into a state, SplitMix64 draws from it. Both are fixed, tiny
//! algorithms, so a noisy query set is byte-identical across runs, platforms
//! and dependency upgrades (a `rand` upgrade may change its streams).

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a over several byte strings; each part is prefixed by its length so
/// that ("ab", "c") and ("a", "bc") hash differently.
pub(crate) fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h = FNV_OFFSET;
    let mut eat = |b: u8| {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    };
    for part in parts {
        for b in (part.len() as u64).to_le_bytes() {
            eat(b);
        }
        for &b in *part {
            eat(b);
        }
    }
    h
}

/// SplitMix64 generator seeded per (seed, kind, query id, variant).
#[derive(Debug, Clone)]
pub struct NoiseRng {
    state: u64,
}

impl NoiseRng {
    /// The generator for one noisy variant of one query.
    pub fn for_query(seed: u64, kind: &str, query_id: &str, variant: u32) -> Self {
        let state = fnv1a(&[
            b"capot-noise-v1",
            &seed.to_le_bytes(),
            kind.as_bytes(),
            query_id.as_bytes(),
            &variant.to_le_bytes(),
        ]);
        Self { state }
    }

    /// Next 64 random bits (SplitMix64).
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform integer in `0..n` (unbiased, Lemire's method); 0 when `n == 0`.
    pub fn below(&mut self, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        let n = n as u64;
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = u128::from(self.next_u64()) * u128::from(n);
            if (m as u64) >= threshold {
                return (m >> 64) as usize;
            }
        }
    }

    /// A uniformly chosen element, `None` for an empty slice.
    pub(crate) fn choose<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            None
        } else {
            items.get(self.below(items.len()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_known_vector() {
        // FNV-1a of the empty input is the offset basis; of "a" (no length
        // prefix) the published value 0xaf63dc4c8601ec8c.
        let mut h = FNV_OFFSET;
        h ^= u64::from(b'a');
        h = h.wrapping_mul(FNV_PRIME);
        assert_eq!(h, 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn splitmix_known_vector() {
        // Reference SplitMix64 output for state 0.
        let mut r = NoiseRng { state: 0 };
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn below_is_in_range_and_covers() {
        let mut r = NoiseRng::for_query(1, "t", "q", 0);
        let mut seen = [0usize; 7];
        for _ in 0..7000 {
            let x = r.below(7);
            assert!(x < 7);
            seen[x] += 1;
        }
        assert!(seen.iter().all(|&c| c > 800), "{seen:?}");
        assert_eq!(r.below(0), 0);
        assert_eq!(r.below(1), 0);
    }
}
