//! Dynamic batching of query encoding across concurrent requests.
//!
//! Requests are tokenized on the blocking pool, then queued for their encoder's worker thread.
//! The worker takes everything queued (up to a size and a padded-token budget, optionally
//! waiting a little for more), runs one inference and answers each request with its rows. The
//! queue is bounded: when it is full a request is refused at once (HTTP 429), never parked.
//! A request whose client has gone while it waited (timeout, disconnect: its answer can no
//! longer be delivered) is dropped before inference rather than encoded for nobody.
//!
//! The queue runs batches on a [`Backend`] (the ONNX [`Encoder`] in the service, fakes in the
//! tests below). A panic in a backend fails that batch's requests with an error that says so,
//! is counted ([`BatchObserver::worker_panicked`]), and the worker goes on with the next batch;
//! [`Batcher::live_workers`] tells readiness how many workers are still running.

use std::panic::{catch_unwind, AssertUnwindSafe};
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

/// What the queue runs one batch on: an inference session.
pub trait Backend: Send + Sync + 'static {
    /// The encoder's name, for metrics and logs.
    fn name(&self) -> &str;
    /// The token that pads shorter rows when requests share a batch.
    fn pad_id(&self) -> i64;
    /// One vector per row of `batch`, in order.
    fn run(&self, batch: &TokenBatch) -> Result<Vec<Vec<f32>>, EncoderError>;
}

impl Backend for Encoder {
    fn name(&self) -> &str {
        &self.manifest().name
    }

    fn pad_id(&self) -> i64 {
        self.tokenizer().pad_id()
    }

    fn run(&self, batch: &TokenBatch) -> Result<Vec<Vec<f32>>, EncoderError> {
        Encoder::run(self, batch)
    }
}

/// Observes batches for metrics without the batcher knowing the metrics system.
pub trait BatchObserver: Send + Sync + 'static {
    fn batch_done(&self, encoder: &str, size: usize, seconds: f64);
    fn queue_depth(&self, encoder: &str, depth: usize);
    /// `requests` queued requests were dropped unencoded: their clients had gone.
    fn abandoned(&self, encoder: &str, requests: usize) {
        let _ = (encoder, requests);
    }
    /// A worker caught a panic (its batch's requests were failed; it goes on).
    fn worker_panicked(&self, encoder: &str) {
        let _ = encoder;
    }
}

/// A handle to one encoder's batching worker. Cloning shares the worker; the worker thread ends
/// when the last handle is dropped and the queue is drained.
#[derive(Clone)]
pub struct Batcher {
    queue: Queue,
    encoder: Arc<Encoder>,
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
        let backends = sessions
            .into_iter()
            .map(|s| s as Arc<dyn Backend>)
            .collect();
        Ok(Batcher {
            queue: Queue::start(backends, config, observer)?,
            encoder,
        })
    }

    /// Inference sessions serving the queue.
    pub fn workers(&self) -> usize {
        self.queue.workers
    }

    /// Workers running now: fewer than [`Batcher::workers`] only if one died, and an encoder
    /// with none is not ready.
    pub fn live_workers(&self) -> usize {
        self.queue.live.load(Ordering::Acquire)
    }

    pub fn encoder(&self) -> &Arc<Encoder> {
        &self.encoder
    }

    /// Requests waiting now.
    pub fn queue_depth(&self) -> usize {
        self.queue.depth.load(Ordering::Relaxed)
    }

    /// Queues a tokenized request; refuses at once when the queue is full.
    pub fn submit(
        &self,
        tokens: TokenBatch,
    ) -> Result<oneshot::Receiver<EncodeResult>, BatchError> {
        self.queue.submit(tokens)
    }
}

/// The bounded queue and its workers, each feeding one [`Backend`]. Cloning shares them; the
/// workers end when the last clone is dropped and the queue is drained.
#[derive(Clone)]
struct Queue {
    tx: Sender<Job>,
    depth: Arc<AtomicUsize>,
    capacity: usize,
    workers: usize,
    live: Arc<AtomicUsize>,
}

impl Queue {
    /// Starts one worker thread per backend, all taking from one queue.
    fn start(
        backends: Vec<Arc<dyn Backend>>,
        config: BatchConfig,
        observer: Arc<dyn BatchObserver>,
    ) -> Result<Self, std::io::Error> {
        let (tx, rx) = crossbeam_channel::bounded::<Job>(config.queue_capacity.max(1));
        let depth = Arc::new(AtomicUsize::new(0));
        let capacity = config.queue_capacity.max(1);
        let workers = backends.len();
        let live = Arc::new(AtomicUsize::new(0));
        for (i, backend) in backends.into_iter().enumerate() {
            let (rx, config, depth, observer) =
                (rx.clone(), config.clone(), depth.clone(), observer.clone());
            let alive = Alive::start(&live);
            std::thread::Builder::new()
                .name(format!("encode-{}-{i}", backend.name()))
                .spawn(move || {
                    let _alive = alive;
                    worker(&*backend, &rx, &config, &depth, &*observer, workers)
                })?;
        }
        Ok(Queue {
            tx,
            depth,
            capacity,
            workers,
            live,
        })
    }

    /// Queues a tokenized request; refuses at once when the queue is full.
    fn submit(&self, tokens: TokenBatch) -> Result<oneshot::Receiver<EncodeResult>, BatchError> {
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

/// Counts a worker as running until it is dropped (its thread ends, however it ends).
struct Alive(Arc<AtomicUsize>);

impl Alive {
    fn start(count: &Arc<AtomicUsize>) -> Alive {
        count.fetch_add(1, Ordering::AcqRel);
        Alive(count.clone())
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Serves the queue until it is closed. A panic outside the backend (whose own panics fail
/// only their batch) loses the batch in hand — its requests see the worker stop answering —
/// and the worker starts over.
fn worker(
    backend: &dyn Backend,
    rx: &Receiver<Job>,
    config: &BatchConfig,
    depth: &AtomicUsize,
    observer: &dyn BatchObserver,
    workers: usize,
) {
    loop {
        let served = catch_unwind(AssertUnwindSafe(|| {
            serve(backend, rx, config, depth, observer, workers)
        }));
        match served {
            Ok(()) => return,
            Err(panic) => {
                observer.worker_panicked(backend.name());
                tracing::error!(
                    encoder = backend.name(),
                    panic = panic_message(&*panic),
                    "an inference worker panicked; it goes on with the next batch"
                );
            }
        }
    }
}

/// What a caught panic said.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

fn serve(
    backend: &dyn Backend,
    rx: &Receiver<Job>,
    config: &BatchConfig,
    depth: &AtomicUsize,
    observer: &dyn BatchObserver,
    workers: usize,
) {
    let pad_id = backend.pad_id();
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
                run_batch(backend, std::mem::take(&mut jobs), pad_id, depth, observer);
                jobs.push(job);
                texts = jobs[0].tokens.batch;
                longest = jobs[0].tokens.sequence;
                continue;
            }
            texts = new_texts;
            longest = new_longest;
            jobs.push(job);
        }
        run_batch(backend, jobs, pad_id, depth, observer);
    }
}

fn run_batch(
    backend: &dyn Backend,
    jobs: Vec<Job>,
    pad_id: i64,
    depth: &AtomicUsize,
    observer: &dyn BatchObserver,
) {
    if jobs.is_empty() {
        return;
    }
    let name = backend.name();
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
    let batch = merged.as_ref().unwrap_or(&jobs[0].tokens);
    let result = catch_unwind(AssertUnwindSafe(|| backend.run(batch))).unwrap_or_else(|panic| {
        let message = panic_message(&*panic);
        observer.worker_panicked(name);
        tracing::error!(encoder = name, panic = %message, "inference panicked; its batch failed");
        Err(EncoderError::Panicked(message))
    });
    let seconds = started.elapsed().as_secs_f64();
    let size: usize = jobs.iter().map(|j| j.tokens.batch).sum();
    observer.batch_done(name, size, seconds);
    match result {
        Ok(vectors) if vectors.len() != size => {
            let e = Arc::new(EncoderError::Output(format!(
                "{} vectors for {size} texts",
                vectors.len()
            )));
            for job in jobs {
                let _ = job.reply.send(Err(e.clone()));
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Condvar, Mutex};

    /// A backend that answers each row with `[its first token id, the batch's padded length]`,
    /// can be held (runs wait until it is released), fails rows starting with [`FAIL`] and
    /// panics on rows starting with [`PANIC`].
    struct Fake {
        held: Mutex<bool>,
        released: Condvar,
        /// Batches that entered `run`, as (texts, padded length).
        runs: Mutex<Vec<(usize, usize)>>,
    }

    const FAIL: i64 = 666;
    const PANIC: i64 = 13;

    impl Fake {
        fn new(held: bool) -> Arc<Fake> {
            Arc::new(Fake {
                held: Mutex::new(held),
                released: Condvar::new(),
                runs: Mutex::new(Vec::new()),
            })
        }

        fn release(&self) {
            *self.held.lock().unwrap() = false;
            self.released.notify_all();
        }

        fn runs(&self) -> Vec<(usize, usize)> {
            self.runs.lock().unwrap().clone()
        }

        /// Waits (bounded) until `n` batches have entered `run`.
        fn wait_for_runs(&self, n: usize) {
            let deadline = Instant::now() + Duration::from_secs(30);
            while self.runs.lock().unwrap().len() < n {
                assert!(Instant::now() < deadline, "only {:?} ran", self.runs());
                std::thread::yield_now();
            }
        }
    }

    impl Backend for Fake {
        fn name(&self) -> &str {
            "fake"
        }

        fn pad_id(&self) -> i64 {
            0
        }

        fn run(&self, batch: &TokenBatch) -> Result<Vec<Vec<f32>>, EncoderError> {
            self.runs
                .lock()
                .unwrap()
                .push((batch.batch, batch.sequence));
            let mut held = self.held.lock().unwrap();
            while *held {
                held = self.released.wait(held).unwrap();
            }
            drop(held);
            let firsts: Vec<i64> = (0..batch.batch)
                .map(|r| batch.input_ids[r * batch.sequence])
                .collect();
            if firsts.contains(&PANIC) {
                panic!("the fake backend panics on {PANIC}");
            }
            if firsts.contains(&FAIL) {
                return Err(EncoderError::Runtime(format!("the fake fails on {FAIL}")));
            }
            Ok(firsts
                .iter()
                .map(|&f| vec![f as f32, batch.sequence as f32])
                .collect())
        }
    }

    #[derive(Default)]
    struct Counts {
        abandoned: AtomicUsize,
        panics: AtomicUsize,
    }

    impl BatchObserver for Counts {
        fn batch_done(&self, _: &str, _: usize, _: f64) {}
        fn queue_depth(&self, _: &str, _: usize) {}
        fn abandoned(&self, _: &str, requests: usize) {
            self.abandoned.fetch_add(requests, Ordering::Relaxed);
        }
        fn worker_panicked(&self, _: &str) {
            self.panics.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// One request of texts whose first tokens are `firsts`, each `len` tokens long.
    fn tokens(firsts: &[i64], len: usize) -> TokenBatch {
        let mut ids = Vec::new();
        for &f in firsts {
            ids.push(f);
            ids.extend(std::iter::repeat_n(7, len - 1));
        }
        TokenBatch {
            batch: firsts.len(),
            sequence: len,
            attention_mask: vec![1; ids.len()],
            token_type_ids: vec![0; ids.len()],
            input_ids: ids,
        }
    }

    fn start(backends: Vec<Arc<Fake>>, config: BatchConfig) -> (Queue, Arc<Counts>) {
        let counts = Arc::new(Counts::default());
        let backends = backends
            .into_iter()
            .map(|b| b as Arc<dyn Backend>)
            .collect();
        let queue = Queue::start(backends, config, counts.clone()).unwrap();
        (queue, counts)
    }

    fn answer(rx: oneshot::Receiver<EncodeResult>) -> EncodeResult {
        rx.blocking_recv().expect("the worker answers")
    }

    #[test]
    fn each_request_gets_its_own_rows_in_order() {
        let fake = Fake::new(true);
        let (queue, _) = start(vec![fake.clone()], BatchConfig::default());
        // The first request holds the worker, so the others share one batch behind it.
        let first = queue.submit(tokens(&[1], 3)).unwrap();
        fake.wait_for_runs(1);
        let requests: Vec<Vec<i64>> = vec![vec![10, 11], vec![20], vec![30, 31, 32], vec![40]];
        let pending: Vec<_> = requests
            .iter()
            .enumerate()
            .map(|(i, firsts)| queue.submit(tokens(firsts, 2 + i)).unwrap())
            .collect();
        fake.release();
        assert_eq!(answer(first).unwrap().0, [vec![1.0, 3.0]]);
        for (firsts, rx) in requests.iter().zip(pending) {
            let (rows, timings) = answer(rx).unwrap();
            let got: Vec<i64> = rows.iter().map(|r| r[0] as i64).collect();
            assert_eq!(&got, firsts);
            // They shared one batch padded to its longest request (2 + 3 tokens).
            assert!(rows.iter().all(|r| r[1] == 5.0), "{rows:?}");
            assert_eq!(timings.batch_size, 7);
        }
        assert_eq!(fake.runs(), [(1, 3), (7, 5)]);
    }

    #[test]
    fn batches_keep_to_the_text_and_token_budgets() {
        let fake = Fake::new(true);
        let config = BatchConfig {
            max_batch: 4,
            max_tokens: 32,
            ..BatchConfig::default()
        };
        let (queue, _) = start(vec![fake.clone()], config);
        let first = queue.submit(tokens(&[1], 2)).unwrap();
        fake.wait_for_runs(1);
        let lens = [2, 9, 3, 16, 4, 4, 5, 2, 8, 3, 3, 2];
        let pending: Vec<_> = lens
            .iter()
            .enumerate()
            .map(|(i, &len)| queue.submit(tokens(&[100 + i as i64], len)).unwrap())
            .collect();
        fake.release();
        answer(first).unwrap();
        for (i, rx) in pending.into_iter().enumerate() {
            assert_eq!(answer(rx).unwrap().0[0][0], 100.0 + i as f32);
        }
        let runs = fake.runs();
        for &(texts, len) in &runs[1..] {
            assert!(texts <= 4 && texts * len <= 32, "{runs:?}");
        }
        // Every text ran once.
        assert_eq!(runs.iter().map(|r| r.0).sum::<usize>(), 1 + lens.len());
    }

    #[test]
    fn workers_share_the_queue() {
        let (a, b) = (Fake::new(true), Fake::new(true));
        let (queue, _) = start(vec![a.clone(), b.clone()], BatchConfig::default());
        let one = queue.submit(tokens(&[1], 2)).unwrap();
        // One worker holds the first request; the second request can only go to the other.
        let deadline = Instant::now() + Duration::from_secs(30);
        while a.runs().len() + b.runs().len() < 1 {
            assert!(Instant::now() < deadline);
            std::thread::yield_now();
        }
        let two = queue.submit(tokens(&[2], 2)).unwrap();
        while a.runs().len() + b.runs().len() < 2 {
            assert!(Instant::now() < deadline, "the idle worker never took it");
            std::thread::yield_now();
        }
        assert_eq!((a.runs().len(), b.runs().len()), (1, 1));
        a.release();
        b.release();
        assert_eq!(answer(one).unwrap().0[0][0], 1.0);
        assert_eq!(answer(two).unwrap().0[0][0], 2.0);
    }

    #[test]
    fn requests_whose_client_left_are_not_encoded() {
        let fake = Fake::new(true);
        let (queue, counts) = start(vec![fake.clone()], BatchConfig::default());
        let first = queue.submit(tokens(&[1], 2)).unwrap();
        fake.wait_for_runs(1);
        let gone = queue.submit(tokens(&[2, 3], 2)).unwrap();
        let kept = queue.submit(tokens(&[4], 2)).unwrap();
        drop(gone);
        fake.release();
        answer(first).unwrap();
        assert_eq!(answer(kept).unwrap().0[0][0], 4.0);
        assert_eq!(fake.runs(), [(1, 2), (1, 2)]);
        assert_eq!(counts.abandoned.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_full_queue_refuses_at_once_behind_a_slow_backend() {
        let fake = Fake::new(true);
        let config = BatchConfig {
            queue_capacity: 2,
            ..BatchConfig::default()
        };
        let (queue, _) = start(vec![fake.clone()], config);
        let first = queue.submit(tokens(&[1], 2)).unwrap();
        fake.wait_for_runs(1);
        let queued: Vec<_> = (2..4)
            .map(|i| queue.submit(tokens(&[i], 2)).unwrap())
            .collect();
        assert!(matches!(
            queue.submit(tokens(&[9], 2)),
            Err(BatchError::Overloaded(2))
        ));
        assert_eq!(queue.depth.load(Ordering::Relaxed), 2);
        fake.release();
        answer(first).unwrap();
        for rx in queued {
            answer(rx).unwrap();
        }
        assert_eq!(queue.depth.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_failing_backend_fails_its_batch_and_serves_the_next() {
        let fake = Fake::new(false);
        let (queue, _) = start(vec![fake], BatchConfig::default());
        let failed = answer(queue.submit(tokens(&[FAIL], 2)).unwrap()).unwrap_err();
        assert!(failed.to_string().contains("the fake fails"), "{failed}");
        assert_eq!(
            answer(queue.submit(tokens(&[5], 2)).unwrap()).unwrap().0[0][0],
            5.0
        );
    }

    #[test]
    fn a_panicking_backend_fails_its_batch_counts_it_and_keeps_serving() {
        let fake = Fake::new(true);
        let (queue, counts) = start(vec![fake.clone()], BatchConfig::default());
        let first = queue.submit(tokens(&[1], 2)).unwrap();
        fake.wait_for_runs(1);
        // Two requests share the batch that panics: both get the error.
        let a = queue.submit(tokens(&[PANIC], 2)).unwrap();
        let b = queue.submit(tokens(&[2], 2)).unwrap();
        fake.release();
        answer(first).unwrap();
        for rx in [a, b] {
            let e = answer(rx).unwrap_err();
            assert!(e.to_string().contains("panicked"), "{e}");
        }
        assert_eq!(counts.panics.load(Ordering::Relaxed), 1);
        assert_eq!(queue.live.load(Ordering::Acquire), 1);
        assert_eq!(
            answer(queue.submit(tokens(&[3], 2)).unwrap()).unwrap().0[0][0],
            3.0
        );
    }

    #[test]
    fn workers_stop_when_the_last_handle_goes() {
        let (queue, _) = start(
            vec![Fake::new(false), Fake::new(false)],
            BatchConfig::default(),
        );
        let live = queue.live.clone();
        assert_eq!(live.load(Ordering::Acquire), 2);
        drop(queue);
        let deadline = Instant::now() + Duration::from_secs(30);
        while live.load(Ordering::Acquire) > 0 {
            assert!(
                Instant::now() < deadline,
                "the workers outlived their queue"
            );
            std::thread::yield_now();
        }
    }
}
