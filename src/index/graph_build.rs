//! Building the HNSW graph: parallel insertion, then freezing into the flat layout of
//! `graph.bin` (see `graph.rs`).
//!
//! Insertion follows hnswlib: each node gets a level drawn with `P(level ≥ l) = m^−l`,
//! descends greedily to its level, and on each of its levels links to the `m` neighbours
//! that the heuristic of the HNSW paper keeps among `ef_construction` candidates; a
//! neighbour whose list is full re-selects with the same heuristic (at most `2m` on layer 0,
//! `m` above). Threads insert different nodes at once; each node's lists sit behind their
//! own lock, held only to copy or change them; a node becomes reachable only once all its
//! own lists are set. Levels come from a hash of the node id and the build's seed
//! (`HnswParams::seed`), so they do not depend on the insertion order; with one thread the
//! whole graph is deterministic.
//!
//! A long build can save its progress ([`GraphCheckpoint`], `checkpoint.rs`): the workers
//! pause between two nodes, the lists so far are written, and a later build over the same
//! vectors continues from there instead of from the first node.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use super::error::{panic_message, IndexError};
use super::graph::{greedy, search_layer, Header, Scored, Visited, MAX_LEVEL};
use super::manifest::HnswParams;
use super::vectors::dot;

mod checkpoint;

pub(crate) use checkpoint::saved_progress;

/// Node lists during the build: `lists[l]` for levels `0..=level`.
type Lists = Vec<Vec<u32>>;

struct Building<'a> {
    vectors: &'a [f32],
    dim: usize,
    m: usize,
    m0: usize,
    ef_construction: usize,
    levels: Vec<u8>,
    links: Vec<Mutex<Lists>>,
    /// Entry point and top level.
    top: RwLock<(u32, usize)>,
}

/// How often a build reports its progress and looks whether a save is due.
const TICK: Duration = Duration::from_millis(200);

/// Saving a long build's progress, so that a crash or a stop loses at most `every` of work.
pub(crate) struct GraphCheckpoint<'p> {
    /// The file of saved progress (replaced atomically at each save).
    pub path: &'p Path,
    /// Time between two saves.
    pub every: Duration,
}

/// How a build with a [`GraphCheckpoint`] began.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GraphStart {
    /// From the first node.
    Fresh,
    /// From saved progress: `inserted` nodes were already in the graph.
    Resumed { inserted: usize },
    /// Saved progress was there but unusable (`reason`); built from the first node.
    Discarded { reason: String },
}

/// Builds the graph over `vectors` (`n × dim`, unit length) with `threads` threads and
/// returns the words of `graph.bin`. `progress(done, total)` is called from this thread
/// about every 200 ms (or every checkpoint's `every`, when shorter); an error from it stops
/// the build and is returned. With `checkpoint`, saved progress at its path is continued and
/// progress is saved there as the build goes.
pub(crate) fn build(
    vectors: &[f32],
    dim: usize,
    params: &HnswParams,
    threads: usize,
    checkpoint: Option<&GraphCheckpoint<'_>>,
    progress: &mut dyn FnMut(usize, usize) -> Result<(), IndexError>,
) -> Result<(Vec<u32>, GraphStart), IndexError> {
    let n = vectors.len() / dim.max(1);
    if n == 0 || u32::try_from(n).is_err() {
        return Err(IndexError::InvalidInput(format!(
            "{n} vectors: a graph holds 1 to {} nodes",
            u32::MAX
        )));
    }
    let m = params.m;
    let level_scale = 1.0 / (m as f64).ln();
    let levels: Vec<u8> = (0..n as u64)
        .map(|i| draw_level(i, params.seed, level_scale))
        .collect();
    let ef_construction = params.ef_construction.max(m);
    let (saved, start) = match checkpoint {
        None => (None, GraphStart::Fresh),
        Some(c) => match checkpoint::load(c.path, &levels, m, ef_construction) {
            Ok(None) => (None, GraphStart::Fresh),
            Ok(Some(saved)) => {
                let inserted = saved.inserted;
                (Some(saved), GraphStart::Resumed { inserted })
            }
            Err(reason) => (None, GraphStart::Discarded { reason }),
        },
    };
    let (links, top, first) = match saved {
        Some(s) => (
            s.links,
            (s.entry, usize::from(levels[s.entry as usize])),
            s.inserted,
        ),
        None => (
            levels
                .iter()
                .map(|&l| vec![Vec::new(); usize::from(l) + 1])
                .collect(),
            (0, usize::from(levels[0])),
            1,
        ),
    };
    let b = Building {
        vectors,
        dim,
        m,
        m0: 2 * m,
        ef_construction,
        links: links.into_iter().map(Mutex::new).collect(),
        top: RwLock::new(top),
        levels,
    };
    let next = AtomicUsize::new(first);
    let done = AtomicUsize::new(first);
    let stop = AtomicBool::new(false);
    let pause = Pause::default();
    let threads = threads.clamp(1, n);
    let mut last_save = Instant::now();
    let outcome = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let _exit = pause.on_exit();
                    let mut visited = Visited::new();
                    while !stop.load(Ordering::Relaxed) {
                        if pause.requested.load(Ordering::Acquire) {
                            pause.park();
                            continue;
                        }
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            break;
                        }
                        b.insert(i as u32, &mut visited);
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        let mut result = Ok(());
        while workers.iter().any(|w| !w.is_finished()) {
            // A checkpoint due sooner than the usual tick is not put off by it: a build that
            // saves every moment saves before it ends, however fast the machine.
            std::thread::sleep(checkpoint.map_or(TICK, |c| c.every.min(TICK)));
            if result.is_ok() {
                result = progress(done.load(Ordering::Relaxed).min(n), n);
                if result.is_err() {
                    stop.store(true, Ordering::Relaxed);
                }
            }
            if let Some(c) = checkpoint {
                if result.is_ok() && last_save.elapsed() >= c.every {
                    // Between two nodes every claimed node is inserted: a consistent graph.
                    pause.hold(threads, || {
                        let inserted = next.load(Ordering::Relaxed).min(n);
                        if inserted < n {
                            if let Err(e) = checkpoint::save(c.path, &b, inserted) {
                                tracing::warn!(
                                    "could not save the graph's progress ({e}); the build goes on"
                                );
                            }
                        }
                    });
                    last_save = Instant::now();
                }
            }
        }
        for w in workers {
            if let Err(p) = w.join() {
                result = Err(IndexError::Hnsw(format!(
                    "graph insertion failed: {}",
                    panic_message(&*p)
                )));
            }
        }
        result
    });
    outcome?;
    progress(n, n)?;
    Ok((b.freeze(), start))
}

/// Workers parking between two nodes while the coordinator saves the graph.
#[derive(Default)]
struct Pause {
    requested: AtomicBool,
    /// (parked, exited) workers.
    state: Mutex<(usize, usize)>,
    changed: Condvar,
}

impl Pause {
    fn state(&self) -> std::sync::MutexGuard<'_, (usize, usize)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Called by a worker that saw the request: waits until it is lifted.
    fn park(&self) {
        let mut st = self.state();
        st.0 += 1;
        self.changed.notify_all();
        while self.requested.load(Ordering::Acquire) {
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.0 -= 1;
    }

    /// Held by a worker for its life: counts it out when it ends, by return or by panic.
    fn on_exit(&self) -> impl Drop + '_ {
        struct Exit<'a>(&'a Pause);
        impl Drop for Exit<'_> {
            fn drop(&mut self) {
                self.0.state().1 += 1;
                self.0.changed.notify_all();
            }
        }
        Exit(self)
    }

    /// Stops all `threads` workers between two nodes, runs `f`, and lets them go on.
    fn hold(&self, threads: usize, f: impl FnOnce()) {
        let mut st = self.state();
        self.requested.store(true, Ordering::Release);
        while st.0 + st.1 < threads {
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        f();
        self.requested.store(false, Ordering::Release);
        drop(st);
        self.changed.notify_all();
    }
}

/// Level of node `i`: `floor(−ln(u) · scale)` for `u` uniform in (0, 1] from a hash of `i`
/// and `seed`.
fn draw_level(i: u64, seed: u64, scale: f64) -> u8 {
    let mut z = i.wrapping_add(seed).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    let u = ((z >> 11) + 1) as f64 / (1u64 << 53) as f64;
    (-u.ln() * scale).floor().min(MAX_LEVEL as f64) as u8
}

impl Building<'_> {
    fn row(&self, i: u32) -> &[f32] {
        let i = i as usize;
        &self.vectors[i * self.dim..(i + 1) * self.dim]
    }

    fn lists(&self, i: u32) -> std::sync::MutexGuard<'_, Lists> {
        self.links[i as usize]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn insert(&self, i: u32, visited: &mut Visited) {
        let level = usize::from(self.levels[i as usize]);
        let (entry, top) = *self.top.read().unwrap_or_else(|e| e.into_inner());
        let q = self.row(i);
        let mut score = |j: u32| dot(q, self.row(j));
        let mut neighbours = |node: u32, l: usize, buf: &mut Vec<u32>| {
            buf.clear();
            if let Some(list) = self.lists(node).get(l) {
                buf.extend_from_slice(list);
            }
        };
        let mut cur = Scored(score(entry), entry);
        for l in (level + 1..=top).rev() {
            cur = greedy(cur, l, &mut neighbours, &mut score);
        }
        // The node's own lists first, back-links to it last: until then no other thread
        // can reach it, so nobody walks into a node whose lower lists are still empty, and
        // nobody adds a link to it that setting its own list would overwrite.
        let mut entries = vec![cur];
        let mut chosen_per_level = Vec::with_capacity(level.min(top) + 1);
        for l in (0..=level.min(top)).rev() {
            visited.reset(self.levels.len());
            visited.insert(i);
            let found = search_layer(
                &entries,
                self.ef_construction,
                l,
                &mut neighbours,
                &mut score,
                &|_| {},
                &|_| {},
                visited,
            );
            let chosen = self.select(&found, self.m);
            self.lists(i)[l] = chosen.iter().map(|s| s.1).collect();
            chosen_per_level.push((l, chosen));
            if !found.is_empty() {
                entries = found;
            }
        }
        for (l, chosen) in chosen_per_level {
            for &Scored(s, nb) in &chosen {
                self.link_back(nb, i, s, l);
            }
        }
        if level > top {
            let mut t = self.top.write().unwrap_or_else(|e| e.into_inner());
            if level > t.1 {
                *t = (i, level);
            }
        }
    }

    /// The paper's neighbour heuristic: walk the candidates best first and keep one only
    /// when it is closer to the base than to every neighbour kept so far (spreads the links
    /// over directions instead of one cluster).
    fn select(&self, candidates: &[Scored], m: usize) -> Vec<Scored> {
        if candidates.len() <= m {
            return candidates.to_vec();
        }
        let mut kept: Vec<Scored> = Vec::with_capacity(m);
        for &c in candidates {
            if kept.len() >= m {
                break;
            }
            let cv = self.row(c.1);
            if kept.iter().all(|k| dot(cv, self.row(k.1)) <= c.0) {
                kept.push(c);
            }
        }
        kept
    }

    /// Adds `new` (similarity `s`) to `node`'s list on `level`, re-selecting when full.
    fn link_back(&self, node: u32, new: u32, s: f32, level: usize) {
        let cap = if level == 0 { self.m0 } else { self.m };
        let mut lists = self.lists(node);
        let Some(list) = lists.get_mut(level) else {
            return;
        };
        if list.contains(&new) || node == new {
            return;
        }
        if list.len() < cap {
            list.push(new);
            return;
        }
        let base = self.row(node);
        let mut candidates: Vec<Scored> = list
            .iter()
            .map(|&x| Scored(dot(base, self.row(x)), x))
            .chain(std::iter::once(Scored(s, new)))
            .collect();
        candidates.sort_unstable_by(|a, b| b.cmp(a));
        *list = self
            .select(&candidates, cap)
            .into_iter()
            .map(|c| c.1)
            .collect();
    }

    /// The flat `graph.bin` words.
    fn freeze(self) -> Vec<u32> {
        let (entry, top_level) = *self.top.read().unwrap_or_else(|e| e.into_inner());
        let header = self.header(entry, top_level);
        let mut words = Vec::with_capacity(header.file_words().unwrap_or(0));
        self.emit(&header, &mut |w| {
            words.extend_from_slice(w);
            Ok(())
        })
        .unwrap_or_else(|e: std::io::Error| unreachable!("writing to a Vec cannot fail: {e}"));
        debug_assert_eq!(Some(words.len()), header.file_words());
        words
    }

    /// The header of the graph as it stands, entered at `entry` on `top_level`.
    fn header(&self, entry: u32, top_level: usize) -> Header {
        Header {
            m: self.m,
            m0: self.m0,
            count: self.levels.len(),
            entry,
            top_level,
            upper_lists: self.levels.iter().map(|&l| usize::from(l)).sum(),
        }
    }

    /// Passes the words of a graph file with `header` and the current lists to `sink`, in
    /// order (the layout of `graph.rs`): a node not inserted yet has empty lists.
    fn emit(
        &self,
        header: &Header,
        sink: &mut dyn FnMut(&[u32]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        sink(&header.words())?;
        let mut buf = Vec::with_capacity(1 + self.m0);
        let mut put = |list: &[u32], cap: usize, sink: &mut dyn FnMut(&[u32]) -> _| {
            let len = list.len().min(cap);
            buf.clear();
            buf.push(len as u32);
            buf.extend_from_slice(&list[..len]);
            buf.resize(1 + cap, 0);
            sink(&buf)
        };
        for i in 0..self.levels.len() {
            put(&self.lists(i as u32)[0], self.m0, sink)?;
        }
        let mut first = 0u32;
        sink(&[0])?;
        for &l in &self.levels {
            first += u32::from(l);
            sink(&[first])?;
        }
        for i in 0..self.levels.len() {
            for list in &self.lists(i as u32)[1..] {
                put(list, self.m, sink)?;
            }
        }
        Ok(())
    }
}
