//! Dynamic batching of query encoding across concurrent requests.
//!
//! Requests are tokenized on the blocking pool, then queued for their encoder's worker thread.
//! The worker takes everything queued (up to a size and a padded-token budget, optionally
//! waiting a little for more), runs one inference and answers each request with its rows. The
//! queue is bounded: when it is full a request is refused at once (HTTP 429), never parked.
//! A request whose client has gone while it waited (timeout, disconnect: its answer can no
//! longer be delivered) is dropped before inference rather than encoded for nobody.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError};
use tokio::sync::oneshot;

use crate::encoder::{Encoder, EncoderError, TokenBatch};

/// Limits of one encoder's batching queue.
#[derive(Debug, Clone)]
pub struct BatchConfig {
    /// Most texts in one inference.
    pub max_batch: usize,
    /// Most padded tokens (texts × longest length) in one inference.
    pub max_tokens: usize,
    /// How long the worker waits for more requests once it has one (zero: never waits).
    pub max_wait: Duration,
    /// Requests that may wait in the queue; beyond it requests are refused.
    pub queue_capacity: usize,
    /// Inference sessions fed by the queue, each on its own thread (a worker pool): small
    /// models on short inputs do not scale one session over many cores, several sessions do.
    pub workers: usize,
}

impl Default for BatchConfig {
    fn default() -> Self {
        BatchConfig {
            max_batch: 64,
            max_tokens: 64 * 64,
            max_wait: Duration::ZERO,
            queue_capacity: 256,
            workers: 1,
        }
    }
}

/// Where the time of one request went, in seconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct EncodeTimings {
    pub queue: f64,
    pub encode: f64,
    /// Texts in the inference this request shared.
    pub batch_size: usize,
}

/// Why a request was not encoded.
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    #[error("the encoding queue is full ({0} requests waiting)")]
    Overloaded(usize),
    #[error("the encoder is shutting down")]
    Closed,
    #[error(transparent)]
    Encoder(#[from] EncoderError),
}

/// What a queued request gets back: its vectors and timings, or the batch's error.
pub type EncodeResult = Result<(Vec<Vec<f32>>, EncodeTimings), Arc<EncoderError>>;

type Reply = oneshot::Sender<EncodeResult>;

struct Job {
    tokens: TokenBatch,
    enqueued: Instant,
    reply: Reply,
}

/// Observes batches for metrics without the batcher knowing the metrics system.
pub trait BatchObserver: Send + Sync + 'static {
    fn batch_done(&self, encoder: &str, size: usize, seconds: f64);
    fn queue_depth(&self, encoder: &str, depth: usize);
    /// `requests` queued requests were dropped unencoded: their clients had gone.
    fn abandoned(&self, encoder: &str, requests: usize) {
        let _ = (encoder, requests);
    }
}

/// A handle to one encoder's batching worker. Cloning shares the worker; the worker thread ends
/// when the last handle is dropped and the queue is drained.
#[derive(Clone)]
pub struct Batcher {
    tx: Sender<Job>,
    depth: Arc<AtomicUsize>,
    encoder: Arc<Encoder>,
    capacity: usize,
    workers: usize,
}

impl Batcher {
    /// Starts one worker thread per session in `sessions` (sessions of one bundle), all taking
    /// from the same queue.
    pub fn start(
        sessions: Vec<Arc<Encoder>>,
        config: BatchConfig,
        observer: Arc<dyn BatchObserver>,
    ) -> Result<Self, std::io::Error> {
        let encoder = sessions.first().cloned().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "no encoder session")
        })?;
        let (tx, rx) = crossbeam_channel::bounded::<Job>(config.queue_capacity.max(1));
        let depth = Arc::new(AtomicUsize::new(0));
        let capacity = config.queue_capacity.max(1);
        let workers = sessions.len();
        for (i, session) in sessions.into_iter().enumerate() {
            let (rx, config, depth, observer) =
                (rx.clone(), config.clone(), depth.clone(), observer.clone());
            std::thread::Builder::new()
                .name(format!("encode-{}-{i}", encoder.manifest().name))
                .spawn(move || worker(session, rx, config, depth, observer, workers))?;
        }
        Ok(Batcher {
            tx,
            depth,
            encoder,
            capacity,
            workers,
        })
    }

    /// Inference sessions serving the queue.
    pub fn workers(&self) -> usize {
        self.workers
    }

    pub fn encoder(&self) -> &Arc<Encoder> {
        &self.encoder
    }

    /// Requests waiting now.
    pub fn queue_depth(&self) -> usize {
        self.depth.load(Ordering::Relaxed)
    }

    /// Queues a tokenized request; refuses at once when the queue is full.
    pub fn submit(
        &self,
        tokens: TokenBatch,
    ) -> Result<oneshot::Receiver<EncodeResult>, BatchError> {
        let (reply, rx) = oneshot::channel();
        let job = Job {
            tokens,
            enqueued: Instant::now(),
            reply,
        };
        self.depth.fetch_add(1, Ordering::Relaxed);
        match self.tx.try_send(job) {
            Ok(()) => Ok(rx),
            Err(TrySendError::Full(_)) => {
                self.depth.fetch_sub(1, Ordering::Relaxed);
                Err(BatchError::Overloaded(self.capacity))
            }
            Err(TrySendError::Disconnected(_)) => {
                self.depth.fetch_sub(1, Ordering::Relaxed);
                Err(BatchError::Closed)
            }
        }
    }
}

fn worker(
    encoder: Arc<Encoder>,
    rx: Receiver<Job>,
    config: BatchConfig,
    depth: Arc<AtomicUsize>,
    observer: Arc<dyn BatchObserver>,
    workers: usize,
) {
    let name = encoder.manifest().name.clone();
    let pad_id = encoder.tokenizer().pad_id();
    while let Ok(first) = rx.recv() {
        // Take this worker's share of what is queued, so that the pool's other sessions get the
        // rest instead of idling while one session runs everything as one padded batch.
        let share = (rx.len() + 1).div_ceil(workers.max(1));
        let mut jobs = vec![first];
        let mut texts = jobs[0].tokens.batch;
        let mut longest = jobs[0].tokens.sequence;
        let deadline = Instant::now() + config.max_wait;
        // With a wait window the worker gathers until the deadline instead (share ignored).
        while jobs.len() < share || !config.max_wait.is_zero() {
            let next = if config.max_wait.is_zero() {
                rx.try_recv().ok()
            } else {
                rx.recv_deadline(deadline).ok()
            };
            let Some(job) = next else { break };
            let new_longest = longest.max(job.tokens.sequence);
            let new_texts = texts + job.tokens.batch;
            if new_texts > config.max_batch || new_texts * new_longest > config.max_tokens {
                // Does not fit: run what we have, then this one first in the next round.
                run_batch(
                    &encoder,
                    &name,
                    std::mem::take(&mut jobs),
                    pad_id,
                    &depth,
                    &*observer,
                );
                jobs.push(job);
                texts = jobs[0].tokens.batch;
                longest = jobs[0].tokens.sequence;
                continue;
            }
            texts = new_texts;
            longest = new_longest;
            jobs.push(job);
        }
        run_batch(&encoder, &name, jobs, pad_id, &depth, &*observer);
    }
}

fn run_batch(
    encoder: &Encoder,
    name: &str,
    jobs: Vec<Job>,
    pad_id: i64,
    depth: &AtomicUsize,
    observer: &dyn BatchObserver,
) {
    if jobs.is_empty() {
        return;
    }
    let remaining = depth
        .fetch_sub(jobs.len(), Ordering::Relaxed)
        .saturating_sub(jobs.len());
    observer.queue_depth(name, remaining);
    let (jobs, gone): (Vec<Job>, Vec<Job>) = jobs.into_iter().partition(|j| !j.reply.is_closed());
    if !gone.is_empty() {
        observer.abandoned(name, gone.len());
    }
    if jobs.is_empty() {
        return;
    }
    let started = Instant::now();
    let parts: Vec<&TokenBatch> = jobs.iter().map(|j| &j.tokens).collect();
    let merged = if parts.len() == 1 {
        None
    } else {
        Some(TokenBatch::concat(&parts, pad_id))
    };
    let result = encoder.run(merged.as_ref().unwrap_or(&jobs[0].tokens));
    let seconds = started.elapsed().as_secs_f64();
    let size: usize = jobs.iter().map(|j| j.tokens.batch).sum();
    observer.batch_done(name, size, seconds);
    match result {
        Ok(mut vectors) => {
            // Hand each request its rows, last job first so `split_off` stays cheap.
            let mut ends = Vec::with_capacity(jobs.len());
            let mut at = 0;
            for j in &jobs {
                at += j.tokens.batch;
                ends.push(at);
            }
            for (job, end) in jobs.into_iter().zip(ends).rev() {
                let start = end - job.tokens.batch;
                let rows = vectors.split_off(start);
                let timings = EncodeTimings {
                    queue: (started - job.enqueued).as_secs_f64(),
                    encode: seconds,
                    batch_size: size,
                };
                let _ = job.reply.send(Ok((rows, timings)));
            }
        }
        Err(e) => {
            let e = Arc::new(e);
            for job in jobs {
                let _ = job.reply.send(Err(e.clone()));
            }
        }
    }
}
