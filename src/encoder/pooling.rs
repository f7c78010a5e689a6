//! Pooling token vectors into one vector per text, and L2 normalisation.

/// Mean of the token vectors where the mask is 1. `hidden` is `[batch, seq, dim]` row-major.
pub fn mean_pool(
    hidden: &[f32],
    mask: &[i64],
    batch: usize,
    seq: usize,
    dim: usize,
) -> Vec<Vec<f32>> {
    (0..batch)
        .map(|b| {
            let mut acc = vec![0f32; dim];
            let mut count = 0f32;
            for s in 0..seq {
                if mask[b * seq + s] == 0 {
                    continue;
                }
                count += 1.0;
                let row = &hidden[(b * seq + s) * dim..(b * seq + s + 1) * dim];
                for (a, v) in acc.iter_mut().zip(row) {
                    *a += v;
                }
            }
            // sentence-transformers clamps the count at 1e-9.
            let denom = count.max(1e-9);
            acc.iter_mut().for_each(|a| *a /= denom);
            acc
        })
        .collect()
}

/// The first token's vector of each text.
pub fn cls_pool(hidden: &[f32], batch: usize, seq: usize, dim: usize) -> Vec<Vec<f32>> {
    (0..batch)
        .map(|b| hidden[b * seq * dim..b * seq * dim + dim].to_vec())
        .collect()
}

/// Scales a vector to unit L2 norm (a zero vector stays zero), as `torch.nn.functional.normalize`.
pub fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= norm);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_pool_ignores_padding() {
        // batch 2, seq 3, dim 2; second text has one padded position.
        let hidden = [1., 2., 3., 4., 5., 6., 10., 20., 30., 40., 99., 99.];
        let mask = [1, 1, 1, 1, 1, 0];
        let out = mean_pool(&hidden, &mask, 2, 3, 2);
        assert_eq!(out[0], vec![3., 4.]);
        assert_eq!(out[1], vec![20., 30.]);
    }

    #[test]
    fn cls_and_normalize() {
        let hidden = [3., 4., 0., 0.];
        let mut v = cls_pool(&hidden, 1, 2, 2).remove(0);
        l2_normalize(&mut v);
        assert_eq!(v, vec![0.6, 0.8]);
        let mut z = vec![0.0, 0.0];
        l2_normalize(&mut z);
        assert_eq!(z, vec![0.0, 0.0]);
    }
}
