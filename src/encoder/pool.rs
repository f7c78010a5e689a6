//! Several inference sessions of one bundle for batch work — index builds and benchmarks — so
//! that a model this small keeps every core busy (one session with all cores as intra-op threads
//! does not scale; docs/benchmarks.md). The service's pools are the batcher's workers
//! (`registry::batcher`); this is the same idea for work that is known up front.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::{Encoder, EncoderError, RuntimeOptions};

/// `workers` sessions of one bundle, each with `RuntimeOptions::intra_threads` threads.
pub struct EncoderPool {
    encoders: Vec<Encoder>,
}

impl EncoderPool {
    /// Loads `workers` (at least one) sessions of the bundle at `dir`.
    pub fn load(
        dir: &Path,
        options: &RuntimeOptions,
        workers: usize,
    ) -> Result<Self, EncoderError> {
        let encoders = (0..workers.max(1))
            .map(|_| Encoder::load(dir, options))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(EncoderPool { encoders })
    }

    /// The first session: the bundle's manifest, tokenizer and provider.
    pub fn encoder(&self) -> &Encoder {
        &self.encoders[0]
    }

    /// The sessions, one per worker.
    pub fn sessions(&self) -> &[Encoder] {
        &self.encoders
    }

    /// Encodes `batches`, one inference call per batch, spread over the sessions; the vectors come
    /// back in input order. `done` is called with each finished batch's length (progress bars).
    /// The first error stops all workers and is returned.
    pub fn encode_batches<S: AsRef<str> + Sync>(
        &self,
        batches: &[Vec<S>],
        done: &(dyn Fn(usize) + Sync),
    ) -> Result<Vec<Vec<Vec<f32>>>, EncoderError> {
        let next = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let first_error: Mutex<Option<EncoderError>> = Mutex::new(None);
        let mut parts: Vec<Vec<(usize, Vec<Vec<f32>>)>> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .encoders
                .iter()
                .map(|encoder| {
                    let (next, failed, first_error) = (&next, &failed, &first_error);
                    s.spawn(move || {
                        let mut out = Vec::new();
                        while !failed.load(Ordering::Relaxed) {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some(batch) = batches.get(i) else { break };
                            match encoder.encode(batch) {
                                Ok(v) => {
                                    done(batch.len());
                                    out.push((i, v));
                                }
                                Err(e) => {
                                    failed.store(true, Ordering::Relaxed);
                                    let mut slot =
                                        first_error.lock().unwrap_or_else(|p| p.into_inner());
                                    slot.get_or_insert(e);
                                }
                            }
                        }
                        out
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect()
        });
        if let Some(e) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e);
        }
        let mut ordered: Vec<Option<Vec<Vec<f32>>>> = vec![None; batches.len()];
        for (i, v) in parts.iter_mut().flat_map(std::mem::take) {
            ordered[i] = Some(v);
        }
        ordered
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                v.ok_or_else(|| EncoderError::Runtime(format!("batch {i} was not encoded")))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooled_batches_equal_one_session_in_input_order() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = crate::test_assets::tiny_bundle(dir.path(), "tiny", 5);
        let options = RuntimeOptions {
            intra_threads: Some(1),
            ..Default::default()
        };
        let pool = EncoderPool::load(&bundle, &options, 3).unwrap();
        assert_eq!(pool.sessions().len(), 3);
        let texts: Vec<String> = (0..50)
            .map(|i| format!("text number {i} of many"))
            .collect();
        let batches: Vec<Vec<&str>> = texts
            .chunks(4)
            .map(|c| c.iter().map(String::as_str).collect())
            .collect();
        let counted = AtomicUsize::new(0);
        let pooled = pool
            .encode_batches(&batches, &|n| {
                counted.fetch_add(n, Ordering::Relaxed);
            })
            .unwrap();
        assert_eq!(counted.load(Ordering::Relaxed), texts.len());
        let single = Encoder::load(&bundle, &options).unwrap();
        for (batch, vectors) in batches.iter().zip(&pooled) {
            let expected = single.encode(batch).unwrap();
            assert_eq!(vectors.len(), expected.len());
            for (a, b) in vectors.iter().zip(&expected) {
                let diff = a
                    .iter()
                    .zip(b)
                    .map(|(x, y)| (x - y).abs())
                    .fold(0f32, f32::max);
                assert!(diff < 1e-5, "{diff}");
            }
        }
    }
}
