//! Building the HNSW graph: parallel insertion, then freezing into the flat layout of
//! `graph.bin` (see `graph.rs`).
//!
//! Insertion follows hnswlib: each node gets a level drawn with `P(level ≥ l) = m^−l`,
//! descends greedily to its level, and on each of its levels links to the `m` neighbours
//! that the heuristic of the HNSW paper keeps among `ef_construction` candidates; a
//! neighbour whose list is full re-selects with the same heuristic (at most `2m` on layer 0,
//! `m` above). Threads insert different nodes at once; each node's lists sit behind their
//! own lock, held only to copy or change them; a node becomes reachable only once all its
//! own lists are set. Levels come from a hash of the node id and
//! a seed, so they do not depend on the insertion order; with one thread the whole graph
//! is deterministic.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::Duration;

use super::error::{panic_message, IndexError};
use super::graph::{greedy, search_layer, Header, Scored, Visited, MAX_LEVEL};
use super::manifest::HnswParams;
use super::vectors::dot;

/// Seed of the level draw (fixed: the same vectors and parameters give the same levels).
const LEVEL_SEED: u64 = 0x5eed_ca90_7000_0001;

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

/// Builds the graph over `vectors` (`n × dim`, unit length) with `threads` threads and
/// returns the words of `graph.bin`. `progress(done, total)` is called from this thread
/// about every 200 ms; an error from it stops the build and is returned.
pub(crate) fn build(
    vectors: &[f32],
    dim: usize,
    params: &HnswParams,
    threads: usize,
    progress: &mut dyn FnMut(usize, usize) -> Result<(), IndexError>,
) -> Result<Vec<u32>, IndexError> {
    let n = vectors.len() / dim.max(1);
    if n == 0 || u32::try_from(n).is_err() {
        return Err(IndexError::InvalidInput(format!(
            "{n} vectors: a graph holds 1 to {} nodes",
            u32::MAX
        )));
    }
    let m = params.m;
    let level_scale = 1.0 / (m as f64).ln();
    let levels: Vec<u8> = (0..n as u64).map(|i| draw_level(i, level_scale)).collect();
    let b = Building {
        vectors,
        dim,
        m,
        m0: 2 * m,
        ef_construction: params.ef_construction.max(m),
        links: levels
            .iter()
            .map(|&l| Mutex::new(vec![Vec::new(); usize::from(l) + 1]))
            .collect(),
        top: RwLock::new((0, usize::from(levels[0]))),
        levels,
    };
    let next = AtomicUsize::new(1);
    let done = AtomicUsize::new(1);
    let stop = AtomicBool::new(false);
    let threads = threads.clamp(1, n);
    let outcome = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut visited = Visited::new();
                    while !stop.load(Ordering::Relaxed) {
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
            std::thread::sleep(Duration::from_millis(200));
            if result.is_ok() {
                result = progress(done.load(Ordering::Relaxed).min(n), n);
                if result.is_err() {
                    stop.store(true, Ordering::Relaxed);
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
    Ok(b.freeze())
}

/// Level of node `i`: `floor(−ln(u) · scale)` for `u` uniform in (0, 1] from a hash of `i`.
fn draw_level(i: u64, scale: f64) -> u8 {
    let mut z = i
        .wrapping_add(LEVEL_SEED)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15);
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
        let n = self.levels.len();
        let (entry, top_level) = *self.top.read().unwrap_or_else(|e| e.into_inner());
        let upper_lists: usize = self.levels.iter().map(|&l| usize::from(l)).sum();
        let header = Header {
            m: self.m,
            m0: self.m0,
            count: n,
            entry,
            top_level,
            upper_lists,
        };
        let mut words = Vec::with_capacity(header.file_words().unwrap_or(0));
        words.extend_from_slice(&header.words());
        let links: Vec<Lists> = self
            .links
            .into_iter()
            .map(|l| l.into_inner().unwrap_or_else(|e| e.into_inner()))
            .collect();
        let put = |words: &mut Vec<u32>, list: &[u32], cap: usize| {
            let len = list.len().min(cap);
            words.push(len as u32);
            words.extend_from_slice(&list[..len]);
            words.extend(std::iter::repeat_n(0, cap - len));
        };
        for lists in &links {
            put(&mut words, &lists[0], self.m0);
        }
        let mut first = 0u32;
        words.push(0);
        for &l in &self.levels {
            first += u32::from(l);
            words.push(first);
        }
        for lists in &links {
            for list in &lists[1..] {
                put(&mut words, list, self.m);
            }
        }
        debug_assert_eq!(Some(words.len()), header.file_words());
        words
    }
}
