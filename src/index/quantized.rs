//! The vectors a graph walk reads: float32 (`vectors.f32` itself), or a float16 or int8 copy
//! that is 2× or 4× smaller, chosen at build time (`graph_vectors` in the manifest).
//!
//! A walk scores a few thousand vectors per query at random places in the file, so the size of
//! what it reads is what decides resident memory and cache misses. With a smaller copy the walk
//! runs on it, and the `ef` candidates it returns are re-scored exactly from `vectors.f32`
//! (memory-mapped: only those rows are read), so hits carry the same float32 scores as with a
//! float32 walk and only the candidate set can differ.
//!
//! | precision | file | layout |
//! |---|---|---|
//! | float16 | `vectors.f16` | `count × dimension` IEEE half floats, little-endian |
//! | int8 | `vectors.i8` | `count` float32 scales, then `count × dimension` int8: `x ≈ scale · q` |
//!
//! int8 is symmetric per vector: `scale = max|x| / 127` (a unit vector has no outlier
//! dimension that would need more).

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::IndexError;
use super::fileio::HashingWriter;
use super::manifest::FileInfo;
use super::mapped::Mapped;
use super::vectors::{dot, prefetch};

/// Precision of the vectors the graph walk reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GraphVectors {
    /// `vectors.f32` itself (4 bytes per dimension).
    #[default]
    Float32,
    /// A float16 copy (2 bytes per dimension), re-scored in float32.
    Float16,
    /// An int8 copy with one scale per vector (1 byte per dimension + 4 per vector),
    /// re-scored in float32.
    Int8,
}

impl GraphVectors {
    /// The file holding the copy, `None` for float32.
    pub fn file(self) -> Option<&'static str> {
        match self {
            GraphVectors::Float32 => None,
            GraphVectors::Float16 => Some("vectors.f16"),
            GraphVectors::Int8 => Some("vectors.i8"),
        }
    }

    /// Bytes of the copy for `count` vectors of dimension `dim` (0 for float32).
    pub fn bytes(self, count: usize, dim: usize) -> usize {
        match self {
            GraphVectors::Float32 => 0,
            GraphVectors::Float16 => count * dim * 2,
            GraphVectors::Int8 => count * 4 + count * dim,
        }
    }

    /// Writes the copy of `vectors` (`n × dim`, unit length) to `path` (fsynced), a block of
    /// rows at a time, and returns its size and hash; float32 has no copy and is refused.
    pub(crate) fn write(
        self,
        vectors: &[f32],
        dim: usize,
        path: &Path,
    ) -> Result<FileInfo, IndexError> {
        let rows = vectors.chunks_exact(dim.max(1));
        let mut w = HashingWriter::create(path)?;
        let mut buf = Vec::new();
        const BLOCK: usize = 4096;
        match self {
            GraphVectors::Float32 => {
                return Err(IndexError::InvalidInput(
                    "float32 graph vectors are vectors.f32 itself; there is no copy to write"
                        .into(),
                ))
            }
            GraphVectors::Float16 => {
                for block in vectors.chunks(BLOCK * dim.max(1)) {
                    buf.clear();
                    buf.extend(
                        block
                            .iter()
                            .flat_map(|&x| half::f16::from_f32(x).to_le_bytes()),
                    );
                    w.put(&buf)?;
                }
            }
            GraphVectors::Int8 => {
                // All scales first, then all codes (the layout above).
                for row in rows.clone() {
                    w.put(&int8_scale(row).to_le_bytes())?;
                }
                let mut codes: Vec<i8> = Vec::new();
                for row in rows {
                    codes.clear();
                    quantize_i8_into(row, &mut codes);
                    w.put(bytemuck::cast_slice(&codes))?;
                }
            }
        }
        w.finish()
    }
}

/// The int8 scale of one vector: `max|x| / 127`.
pub(crate) fn int8_scale(row: &[f32]) -> f32 {
    row.iter().fold(0f32, |m, x| m.max(x.abs())) / 127.0
}

/// A mapped copy, ready to score.
pub(crate) enum SmallVectors {
    Float16(Mapped<u16>),
    Int8 { map: Mapped<u8>, count: usize },
}

impl SmallVectors {
    /// Maps the copy of `precision` in `dir` (`None` for float32), checking its size.
    pub(crate) fn open(
        dir: &Path,
        precision: GraphVectors,
        count: usize,
        dim: usize,
    ) -> Result<Option<SmallVectors>, IndexError> {
        let path = dir.join(precision.file().unwrap_or_default());
        Ok(match precision {
            GraphVectors::Float32 => None,
            GraphVectors::Float16 => Some(SmallVectors::Float16(Mapped::open(
                &path,
                Some(count * dim),
            )?)),
            GraphVectors::Int8 => Some(SmallVectors::Int8 {
                map: Mapped::open(&path, Some(precision.bytes(count, dim)))?,
                count,
            }),
        })
    }

    /// Bytes mapped.
    pub(crate) fn bytes(&self) -> usize {
        match self {
            SmallVectors::Float16(m) => m.bytes(),
            SmallVectors::Int8 { map, .. } => map.bytes(),
        }
    }

    /// Advice for vectors a graph walk scores (see [`Mapped::advise_walk`]).
    pub(crate) fn advise_walk(&self) {
        match self {
            SmallVectors::Float16(m) => m.advise_walk(),
            SmallVectors::Int8 { map, .. } => map.advise_walk(),
        }
    }

    /// Approximate dot product of `q` with vector `i` (0 for an id out of range).
    pub(crate) fn score(&self, q: &[f32], i: u32) -> f32 {
        let (i, dim) = (i as usize, q.len());
        match self {
            SmallVectors::Float16(m) => m
                .as_slice()
                .get(i * dim..(i + 1) * dim)
                .map_or(0.0, |row| dot_f16(q, row)),
            SmallVectors::Int8 { map, count } => {
                let bytes = map.as_slice();
                let scale = bytes
                    .get(4 * i..4 * i + 4)
                    .map_or(0.0, |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                let start = 4 * count + i * dim;
                bytes
                    .get(start..start + dim)
                    .map_or(0.0, |row| scale * dot_i8(q, bytemuck::cast_slice(row)))
            }
        }
    }

    /// Starts loading vector `i`'s bytes (see [`prefetch`]).
    pub(crate) fn prefetch(&self, i: u32, dim: usize) {
        let i = i as usize;
        match self {
            SmallVectors::Float16(m) => {
                if let Some(row) = m.as_slice().get(i * dim..(i + 1) * dim) {
                    prefetch(row);
                }
            }
            SmallVectors::Int8 { map, count } => {
                let start = 4 * count + i * dim;
                if let Some(row) = map.as_slice().get(start..start + dim) {
                    prefetch(row);
                }
            }
        }
    }
}

/// `q · row` for a float16 row (F16C + FMA when the CPU has them).
fn dot_f16(q: &[f32], row: &[u16]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("f16c")
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has F16C, AVX2 and FMA (checked above).
            return unsafe { dot_f16_f16c(q, row) };
        }
    }
    dot_f16_portable(q, row)
}

/// `q · row` for a float16 row without F16C: widened 64 values at a time into a buffer on the
/// stack (no allocation per call: on CPUs without F16C this is the walk's hot path).
fn dot_f16_portable(q: &[f32], row: &[u16]) -> f32 {
    let mut widened = [0f32; 64];
    q.chunks(64)
        .zip(row.chunks(64))
        .map(|(qc, rc)| {
            for (w, &h) in widened.iter_mut().zip(rc) {
                *w = half::f16::from_bits(h).to_f32();
            }
            dot(qc, &widened[..rc.len()])
        })
        .sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "f16c,avx2,fma")]
unsafe fn dot_f16_f16c(q: &[f32], row: &[u16]) -> f32 {
    use std::arch::x86_64::*;
    let n = q.len().min(row.len());
    let mut acc = [_mm256_setzero_ps(); 2];
    let mut i = 0;
    // SAFETY (all loads): i + 16, resp. i + 8, ≤ n bounds both slices.
    while i + 16 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            let h = _mm_loadu_si128(row.as_ptr().add(i + 8 * k).cast());
            *a = _mm256_fmadd_ps(
                _mm256_loadu_ps(q.as_ptr().add(i + 8 * k)),
                _mm256_cvtph_ps(h),
                *a,
            );
        }
        i += 16;
    }
    while i + 8 <= n {
        let h = _mm_loadu_si128(row.as_ptr().add(i).cast());
        acc[0] = _mm256_fmadd_ps(
            _mm256_loadu_ps(q.as_ptr().add(i)),
            _mm256_cvtph_ps(h),
            acc[0],
        );
        i += 8;
    }
    let lanes: [f32; 8] = std::mem::transmute(_mm256_add_ps(acc[0], acc[1]));
    let mut s = lanes.iter().sum::<f32>();
    while i < n {
        s += q[i] * half::f16::from_bits(row[i]).to_f32();
        i += 1;
    }
    s
}

/// `row` as int8 codes with its scale ([`int8_scale`]): `row[i] ≈ scale × codes[i]`.
pub(crate) fn quantize_i8(row: &[f32]) -> (Vec<i8>, f32) {
    let mut codes = Vec::with_capacity(row.len());
    let scale = quantize_i8_into(row, &mut codes);
    (codes, scale)
}

/// Appends `row`'s int8 codes to `codes`; returns its scale (see [`quantize_i8`]).
pub(crate) fn quantize_i8_into(row: &[f32], codes: &mut Vec<i8>) -> f32 {
    let scale = int8_scale(row);
    let inv = if scale > 0.0 { 1.0 / scale } else { 0.0 };
    codes.extend(
        row.iter()
            .map(|&x| (x * inv).round().clamp(-127.0, 127.0) as i8),
    );
    scale
}

/// `a · b` for two int8 rows of codes in −127..=127, unscaled, exact (AVX2 when the CPU has it:
/// 32 products a step, against 16 for [`dot_i8`], which widens to float32 first).
pub(crate) fn dot_i8_i8(a: &[i8], b: &[i8]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked above).
            return unsafe { dot_i8_i8_avx2(a, b) };
        }
    }
    a.iter()
        .zip(b)
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .sum()
}

/// `q · row` for every row of `codes` (rows of `q.len()` codes, one after another) into `out`,
/// as [`dot_i8_i8`] gives each: one dispatch for the whole scan, so the kernel inlines.
pub(crate) fn dot_i8_i8_rows(q: &[i8], codes: &[i8], out: &mut Vec<i32>) {
    out.clear();
    if q.is_empty() {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked above).
            unsafe { dot_i8_i8_rows_avx2(q, codes, out) };
            return;
        }
    }
    out.extend(codes.chunks_exact(q.len()).map(|row| dot_i8_i8(q, row)));
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_i8_i8_rows_avx2(q: &[i8], codes: &[i8], out: &mut Vec<i32>) {
    out.extend(
        codes
            .chunks_exact(q.len())
            .map(|row| dot_i8_i8_avx2(q, row)),
    );
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn dot_i8_i8_avx2(a: &[i8], b: &[i8]) -> i32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let ones = _mm256_set1_epi16(1);
    let mut acc = _mm256_setzero_si256();
    let mut i = 0;
    // SAFETY (loads): i + 32 ≤ n bounds both slices.
    while i + 32 <= n {
        let va = _mm256_loadu_si256(a.as_ptr().add(i).cast());
        let vb = _mm256_loadu_si256(b.as_ptr().add(i).cast());
        // |a| (unsigned) times b with a's sign: the products of a and b. With codes in
        // −127..=127 a pair of products stays within i16 (2 × 127² < 2¹⁵), so nothing saturates.
        let pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(va, va), _mm256_sign_epi8(vb, va));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
        i += 32;
    }
    let lanes: [i32; 8] = std::mem::transmute(acc);
    let mut s = lanes.iter().sum::<i32>();
    while i < n {
        s += i32::from(a[i]) * i32::from(b[i]);
        i += 1;
    }
    s
}

/// `q · row` for an int8 row, unscaled (AVX2 + FMA when the CPU has them).
pub(crate) fn dot_i8(q: &[f32], row: &[i8]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has AVX2 and FMA (checked above).
            return unsafe { dot_i8_avx2(q, row) };
        }
    }
    q.iter().zip(row).map(|(&a, &b)| a * f32::from(b)).sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_i8_avx2(q: &[f32], row: &[i8]) -> f32 {
    use std::arch::x86_64::*;
    let n = q.len().min(row.len());
    let mut acc = [_mm256_setzero_ps(); 2];
    let mut i = 0;
    // SAFETY (all loads): i + 16, resp. i + 8, ≤ n bounds both slices.
    while i + 16 <= n {
        let b = _mm_loadu_si128(row.as_ptr().add(i).cast());
        let lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
        let hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(b)));
        acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(q.as_ptr().add(i)), lo, acc[0]);
        acc[1] = _mm256_fmadd_ps(_mm256_loadu_ps(q.as_ptr().add(i + 8)), hi, acc[1]);
        i += 16;
    }
    let lanes: [f32; 8] = std::mem::transmute(_mm256_add_ps(acc[0], acc[1]));
    let mut s = lanes.iter().sum::<f32>();
    while i < n {
        s += q[i] * f32::from(row[i]);
        i += 1;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(seed: u64, dim: usize) -> Vec<f32> {
        let mut x = seed;
        let mut v: Vec<f32> = (0..dim)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((x >> 33) as f32 / (1u64 << 31) as f32) - 0.5
            })
            .collect();
        let n = v.iter().map(|a| a * a).sum::<f32>().sqrt();
        v.iter_mut().for_each(|a| *a /= n);
        v
    }

    #[test]
    fn copies_score_close_to_float32_and_simd_matches_scalar() {
        // Odd dimensions exercise the SIMD tails.
        for dim in [384, 37, 8, 3] {
            let vectors: Vec<f32> = (0..50).flat_map(|i| unit(i, dim)).collect();
            let q = unit(999, dim);
            let tmp = tempfile::tempdir().unwrap();
            for (precision, tolerance) in
                [(GraphVectors::Float16, 2e-3), (GraphVectors::Int8, 2e-2)]
            {
                let path = tmp.path().join(precision.file().unwrap());
                let info = precision.write(&vectors, dim, &path).unwrap();
                assert_eq!(info.bytes as usize, precision.bytes(50, dim));
                let copy = SmallVectors::open(tmp.path(), precision, 50, dim)
                    .unwrap()
                    .unwrap();
                for i in 0..50u32 {
                    let exact = dot(&q, &vectors[i as usize * dim..(i as usize + 1) * dim]);
                    let approx = copy.score(&q, i);
                    assert!(
                        (exact - approx).abs() < tolerance,
                        "{precision:?} {dim}: {exact} vs {approx}"
                    );
                }
                assert_eq!(copy.score(&q, 50), 0.0, "out of range");
            }
            let row: Vec<i8> = (0..dim).map(|j| (j as i32 % 255 - 127) as i8).collect();
            let scalar: f32 = q.iter().zip(&row).map(|(&a, &b)| a * f32::from(b)).sum();
            assert!((dot_i8(&q, &row) - scalar).abs() < 1e-3 * scalar.abs().max(1.0));
            let halves: Vec<u16> = q
                .iter()
                .map(|&x| half::f16::from_f32(x).to_bits())
                .collect();
            let widened: Vec<f32> = halves
                .iter()
                .map(|&h| half::f16::from_bits(h).to_f32())
                .collect();
            assert!((dot_f16(&q, &halves) - dot(&q, &widened)).abs() < 1e-5);
            assert!((dot_f16_portable(&q, &halves) - dot(&q, &widened)).abs() < 1e-5);
        }
    }

    #[test]
    fn the_int8_by_int8_dot_product_is_exact() {
        for dim in [1, 31, 32, 33, 384, 1000] {
            let a = unit(dim as u64, dim);
            let b = unit(dim as u64 + 7, dim);
            let (ca, sa) = quantize_i8(&a);
            let (cb, _) = quantize_i8(&b);
            let scalar: i32 = ca
                .iter()
                .zip(&cb)
                .map(|(&x, &y)| i32::from(x) * i32::from(y))
                .sum();
            assert_eq!(dot_i8_i8(&ca, &cb), scalar, "dim {dim}");
            // The codes are the row within half a step.
            for (x, c) in a.iter().zip(&ca) {
                assert!((x - sa * f32::from(*c)).abs() <= sa / 2.0 + 1e-6);
            }
        }
        // The extremes: ±127 everywhere does not saturate.
        let hi = vec![127i8; 64];
        let lo = vec![-127i8; 64];
        assert_eq!(dot_i8_i8(&hi, &lo), -127 * 127 * 64);
        assert_eq!(dot_i8_i8(&lo, &lo), 127 * 127 * 64);
        // Row by row, as one scan.
        let q = quantize_i8(&unit(3, 100)).0;
        let codes: Vec<i8> = (0..7)
            .flat_map(|r| quantize_i8(&unit(r + 10, 100)).0)
            .collect();
        let mut out = Vec::new();
        dot_i8_i8_rows(&q, &codes, &mut out);
        let each: Vec<i32> = codes.chunks(100).map(|row| dot_i8_i8(&q, row)).collect();
        assert_eq!(out, each);
    }

    #[test]
    fn wrong_size_copies_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("vectors.i8"), vec![0u8; 10]).unwrap();
        let Err(e) = SmallVectors::open(tmp.path(), GraphVectors::Int8, 2, 8) else {
            panic!("a short copy was mapped")
        };
        assert!(e.to_string().contains("vectors.i8"), "{e}");
    }
}
