//! Raw document vectors (`vectors.f32`: little-endian f32, `count × dimension`,
//! row-major, no header — trivially readable from Python/NumPy with
//! `np.fromfile(p, "<f4").reshape(n, d)`), L2 normalisation and the dot product.

use std::path::Path;

use super::error::IndexError;
use super::fileio::{HashingReader, HashingWriter};
use super::manifest::FileInfo;

/// Dot product (8 independent accumulators so the compiler vectorises it).
/// The same function scores HNSW hits and exact search, so both agree exactly.
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
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

/// Writes `vectors.f32` (fsynced).
pub(crate) fn write(path: &Path, vectors: &[f32]) -> Result<FileInfo, IndexError> {
    let mut w = HashingWriter::create(path)?;
    let mut buf = Vec::with_capacity(1 << 16);
    for chunk in vectors.chunks(1 << 14) {
        buf.clear();
        for x in chunk {
            buf.extend_from_slice(&x.to_le_bytes());
        }
        w.put(&buf)?;
    }
    w.finish()
}

/// Reads `vectors.f32`, which must hold exactly `count × dim` values.
pub(crate) fn read(
    path: &Path,
    count: usize,
    dim: usize,
    sha256: Option<&str>,
) -> Result<Vec<f32>, IndexError> {
    let mut r = HashingReader::open(path, sha256.is_some())?;
    let values = count * dim;
    let expected = values as u64 * 4;
    if r.len() != expected {
        return Err(IndexError::corrupt(
            path,
            format!(
                "size is {} bytes, expected {expected} ({count} vectors × {dim} dimensions × 4 bytes){}",
                r.len(),
                if r.len() < expected { ": truncated" } else { "" }
            ),
        ));
    }
    let mut out = Vec::with_capacity(values);
    let mut buf = vec![0u8; 1 << 20];
    while out.len() < values {
        let n = ((values - out.len()) * 4).min(buf.len());
        r.take(&mut buf[..n])?;
        out.extend(
            buf[..n]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        );
    }
    r.finish(sha256)?;
    Ok(out)
}
