//! Raw document vectors (`vectors.f32`: little-endian f32, `count × dimension`,
//! row-major, no header — trivially readable from Python/NumPy with
//! `np.fromfile(p, "<f4").reshape(n, d)`), L2 normalisation and the dot product.

/// Dot product. The same function scores graph candidates, hits and exact search, so all
/// of them agree exactly. On x86-64 it uses AVX-512 or AVX2 + FMA when the CPU has them
/// (checked at run time); elsewhere 8 independent accumulators let the compiler vectorise.
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F (checked above).
            return unsafe { dot_avx512(a, b) };
        }
        if avx2_fma() {
            // SAFETY: the CPU supports AVX2 and FMA (checked above).
            return unsafe { dot_avx2_fma(a, b) };
        }
    }
    dot_portable(a, b)
}

/// Whether this CPU has AVX2 and FMA (cached by `is_x86_feature_detected!`).
#[cfg(target_arch = "x86_64")]
fn avx2_fma() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, ra) = a.split_at(a.len() - a.len() % 8);
    let (cb, rb) = b.split_at(ca.len().min(b.len()));
    for (x, y) in ca.chunks_exact(8).zip(cb.chunks_exact(8)) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_avx2_fma(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    // SAFETY (all loads): i + 32 ≤ n, resp. i + 8 ≤ n, bounds both slices.
    while i + 32 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            let x = _mm256_loadu_ps(pa.add(i + 8 * k));
            let y = _mm256_loadu_ps(pb.add(i + 8 * k));
            *a = _mm256_fmadd_ps(x, y, *a);
        }
        i += 32;
    }
    while i + 8 <= n {
        acc[0] = _mm256_fmadd_ps(
            _mm256_loadu_ps(pa.add(i)),
            _mm256_loadu_ps(pb.add(i)),
            acc[0],
        );
        i += 8;
    }
    let v = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let lanes: [f32; 8] = std::mem::transmute(v);
    let mut s = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5]))
        + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
    while i < n {
        s += a[i] * b[i];
        i += 1;
    }
    s
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn dot_avx512(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let mut acc = [_mm512_setzero_ps(); 4];
    let mut i = 0;
    // SAFETY (all loads): i + 64, resp. i + 16, ≤ n bounds both slices.
    while i + 64 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            let x = _mm512_loadu_ps(pa.add(i + 16 * k));
            let y = _mm512_loadu_ps(pb.add(i + 16 * k));
            *a = _mm512_fmadd_ps(x, y, *a);
        }
        i += 64;
    }
    while i + 16 <= n {
        acc[0] = _mm512_fmadd_ps(
            _mm512_loadu_ps(pa.add(i)),
            _mm512_loadu_ps(pb.add(i)),
            acc[0],
        );
        i += 16;
    }
    let v = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    let mut s = _mm512_reduce_add_ps(v);
    while i < n {
        s += a[i] * b[i];
        i += 1;
    }
    s
}

/// Hints the CPU to start loading `row` (a graph walk scores vectors in an order no hardware
/// prefetcher can guess).
#[inline]
pub(crate) fn prefetch<T>(row: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = row.as_ptr().cast::<i8>();
        for offset in (0..std::mem::size_of_val(row)).step_by(64) {
            // SAFETY: prefetch never faults, and the offset stays inside the slice.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.add(offset)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = row;
}

/// Scales `v` to unit L2 norm (computed in f64). Errors on non-finite or zero
/// vectors, which have no direction.
pub(crate) fn normalize(v: &mut [f32]) -> Result<(), String> {
    let mut sq = 0f64;
    for &x in v.iter() {
        if !x.is_finite() {
            return Err("contains a NaN or infinite component".into());
        }
        sq += f64::from(x) * f64::from(x);
    }
    if sq == 0.0 || !sq.is_finite() {
        return Err(format!("has norm {}, cannot be normalised", sq.sqrt()));
    }
    let inv = 1.0 / sq.sqrt();
    for x in v.iter_mut() {
        *x = (f64::from(*x) * inv) as f32;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_simd_path_agrees_with_the_portable_one() {
        let mut x = 7u64;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        };
        for n in (0..100).chain([383, 384, 385, 768]) {
            let a: Vec<f32> = (0..n).map(|_| next()).collect();
            let b: Vec<f32> = (0..n).map(|_| next()).collect();
            let want = dot_portable(&a, &b);
            let close = |got: f32| (got - want).abs() <= 1e-4 * (1.0 + want.abs());
            assert!(close(dot(&a, &b)), "dispatch, n = {n}");
            #[cfg(target_arch = "x86_64")]
            {
                if avx2_fma() {
                    // SAFETY: checked above.
                    assert!(close(unsafe { dot_avx2_fma(&a, &b) }), "avx2, n = {n}");
                }
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: checked above.
                    assert!(close(unsafe { dot_avx512(&a, &b) }), "avx512, n = {n}");
                }
            }
        }
    }
}
