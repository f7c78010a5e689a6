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
use super::sign::SignCodes;
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

    /// The sign codes of the copy's `count` vectors of dimension `dim` (what a float32 row's
    /// signs give, but for values the copy rounds to zero).
    pub(crate) fn sign_codes(&self, count: usize, dim: usize) -> SignCodes {
        match self {
            SmallVectors::Float16(m) => {
                SignCodes::from_rows(m.as_slice().chunks_exact(dim.max(1)), dim, |h: u16| {
                    h & 0x8000 == 0 && h & 0x7fff != 0
                })
            }
            SmallVectors::Int8 { map, .. } => {
                let codes = map.as_slice().get(4 * count..).unwrap_or(&[]);
                SignCodes::from_rows(codes.chunks_exact(dim.max(1)), dim, |b: u8| (b as i8) > 0)
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

/// Dimensions a block of packed 4-bit codes holds: 16 bytes, the low nibbles its first 16
/// dimensions and the high nibbles the next 16, so that one AVX2 step unpacks 32 in order.
pub(crate) const I4_BLOCK: usize = 32;

/// `dim` rounded up to whole pairs of [`I4_BLOCK`]s (32 bytes, one AVX2 load): the length a
/// query's int8 codes are padded to (with zeros) for [`dot_u4_i8_rows`]; a packed row is half as
/// many bytes.
pub(crate) fn i4_padded(dim: usize) -> usize {
    dim.div_ceil(2 * I4_BLOCK) * 2 * I4_BLOCK
}

/// Appends `row`'s 4-bit codes to `packed` (each code in −7..=7 stored as `code + 8`, padded to
/// whole blocks with zero codes); returns its scale: `row[i] ≈ scale × code[i]`. An eighth of the
/// bytes of float32 rows, half of int8: what a scan of many rows reads first.
pub(crate) fn quantize_i4_into(row: &[f32], packed: &mut Vec<u8>) -> f32 {
    let max = row.iter().fold(0f32, |m, x| m.max(x.abs()));
    let scale = max / 7.0;
    let inv = if scale > 0.0 { 1.0 / scale } else { 0.0 };
    let code = |i: usize| -> u8 {
        row.get(i)
            .map_or(8, |&x| ((x * inv).round().clamp(-7.0, 7.0) as i8 + 8) as u8)
    };
    for block in (0..i4_padded(row.len())).step_by(I4_BLOCK) {
        packed.extend((0..16).map(|j| code(block + j) | (code(block + 16 + j) << 4)));
    }
    scale
}

/// For every packed row of 4-bit codes (rows of `q.len() / 2` bytes, from
/// [`quantize_i4_into`]), `Σ stored[i] × q[i]` into `out`, `q` being int8 codes padded to
/// [`i4_padded`] with zeros. Stored codes are `code + 8`: `row · q = out − 8 Σq`.
pub(crate) fn dot_u4_i8_rows(q: &[i8], packed: &[u8], out: &mut Vec<i32>) {
    out.clear();
    if q.is_empty() || !q.len().is_multiple_of(2 * I4_BLOCK) {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked above).
            unsafe { dot_u4_i8_rows_avx2(q, packed, out) };
            return;
        }
    }
    dot_u4_i8_rows_scalar(q, packed, out);
}

/// [`dot_u4_i8_rows`] without SIMD (any CPU; the reference for the AVX2 kernel).
fn dot_u4_i8_rows_scalar(q: &[i8], packed: &[u8], out: &mut Vec<i32>) {
    out.extend(packed.chunks_exact(q.len() / 2).map(|row| {
        row.chunks_exact(16)
            .zip(q.chunks_exact(I4_BLOCK))
            .map(|(bytes, qb)| {
                bytes
                    .iter()
                    .enumerate()
                    .map(|(j, &b)| {
                        i32::from(b & 15) * i32::from(qb[j])
                            + i32::from(b >> 4) * i32::from(qb[16 + j])
                    })
                    .sum::<i32>()
            })
            .sum::<i32>()
    }));
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_u4_i8_rows_avx2(q: &[i8], packed: &[u8], out: &mut Vec<i32>) {
    use std::arch::x86_64::*;
    // 32 packed bytes hold 64 dimensions: their low nibbles dimensions 0..16 and 32..48, their
    // high nibbles 16..32 and 48..64. The query is laid out once to match, so that a row takes
    // one load, two masks and two products per 64 dimensions.
    let mut lows = Vec::with_capacity(q.len() / 2);
    let mut highs = Vec::with_capacity(q.len() / 2);
    for chunk in q.chunks_exact(2 * I4_BLOCK) {
        lows.extend_from_slice(&chunk[..16]);
        lows.extend_from_slice(&chunk[32..48]);
        highs.extend_from_slice(&chunk[16..32]);
        highs.extend_from_slice(&chunk[48..]);
    }
    let low = _mm256_set1_epi8(0x0f);
    let ones = _mm256_set1_epi16(1);
    for row in packed.chunks_exact(q.len() / 2) {
        let mut acc = _mm256_setzero_si256();
        for c in (0..row.len()).step_by(32) {
            // SAFETY (loads): `row`, `lows` and `highs` are `q.len() / 2` bytes, c + 32 ≤ that.
            let bytes = _mm256_loadu_si256(row.as_ptr().add(c).cast());
            let lo = _mm256_and_si256(bytes, low);
            let hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low);
            // Unsigned codes (0..=15) times signed q: a pair stays within i16 (2 × 15 × 127), and
            // so does the sum of two pairs.
            let pairs = _mm256_add_epi16(
                _mm256_maddubs_epi16(lo, _mm256_loadu_si256(lows.as_ptr().add(c).cast())),
                _mm256_maddubs_epi16(hi, _mm256_loadu_si256(highs.as_ptr().add(c).cast())),
            );
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
        }
        let lanes: [i32; 8] = std::mem::transmute(acc);
        out.push(lanes.iter().sum());
    }
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
    fn int8_codes_are_the_row_within_half_a_step() {
        for dim in [1, 31, 32, 33, 384, 1000] {
            let a = unit(dim as u64, dim);
            let (ca, sa) = quantize_i8(&a);
            for (x, c) in a.iter().zip(&ca) {
                assert!((x - sa * f32::from(*c)).abs() <= sa / 2.0 + 1e-6);
            }
        }
    }

    #[test]
    fn four_bit_rows_score_as_their_codes_and_near_the_row() {
        for dim in [1, 31, 32, 48, 384] {
            let q = unit(5, dim);
            let (mut qc, qs) = quantize_i8(&q);
            let sum: i32 = qc.iter().map(|&c| i32::from(c)).sum();
            qc.resize(i4_padded(dim), 0);
            let rows: Vec<Vec<f32>> = (0..9).map(|r| unit(r + 20, dim)).collect();
            let mut packed = Vec::new();
            let scales: Vec<f32> = rows
                .iter()
                .map(|r| quantize_i4_into(r, &mut packed))
                .collect();
            assert_eq!(packed.len(), rows.len() * i4_padded(dim) / 2);
            let mut out = Vec::new();
            dot_u4_i8_rows(&qc, &packed, &mut out);
            assert_eq!(out.len(), rows.len());
            let mut scalar = Vec::new();
            dot_u4_i8_rows_scalar(&qc, &packed, &mut scalar);
            assert_eq!(out, scalar, "dim {dim}");
            for (((row, scale), got), bytes) in rows
                .iter()
                .zip(&scales)
                .zip(&out)
                .zip(packed.chunks_exact(i4_padded(dim) / 2))
            {
                // The codes, unpacked by hand, give the kernel's integer exactly.
                let code = |i: usize| {
                    let (b, j) = (i / I4_BLOCK, i % I4_BLOCK);
                    let byte = bytes[16 * b + j % 16];
                    i32::from(if j < 16 { byte & 15 } else { byte >> 4 }) - 8
                };
                let want: i32 = (0..dim).map(|i| code(i) * i32::from(qc[i])).sum();
                assert_eq!(got - 8 * sum, want, "dim {dim}");
                // Each code is its value within half a step, so the score is near the float one.
                for (i, x) in row.iter().enumerate() {
                    assert!((x - scale * code(i) as f32).abs() <= scale / 2.0 + 1e-6);
                }
                let exact: f32 = row.iter().zip(&q).map(|(a, b)| a * b).sum();
                let approx = scale * qs * (got - 8 * sum) as f32;
                assert!(
                    (exact - approx).abs() < 0.2,
                    "dim {dim}: {exact} vs {approx}"
                );
            }
        }
    }

    #[test]
    fn four_bit_products_at_the_extremes_do_not_overflow() {
        // Every code 15 (or 0) against every query code ±127, on long rows: the kernel's 16-bit
        // sums stay within range and give the scalar sum, exactly.
        for dim in [256, 512, 1024] {
            for (byte, q) in [(0xffu8, 127i8), (0xff, -127), (0x00, -127), (0xf0, 127)] {
                let qc = vec![q; dim];
                let packed = vec![byte; 3 * dim / 2];
                let (mut out, mut scalar) = (Vec::new(), Vec::new());
                dot_u4_i8_rows(&qc, &packed, &mut out);
                dot_u4_i8_rows_scalar(&qc, &packed, &mut scalar);
                let nibbles = i32::from(byte & 15) + i32::from(byte >> 4);
                assert_eq!(
                    out,
                    vec![nibbles * i32::from(q) * dim as i32 / 2; 3],
                    "dim {dim}"
                );
                assert_eq!(out, scalar);
            }
        }
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
