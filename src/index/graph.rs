//! capot's HNSW graph (Malkov & Yashunin, 2018), frozen in one flat file that is
//! memory-mapped and searched in place.
//!
//! `graph.bin` is a sequence of little-endian `u32` words:
//!
//! | words | content |
//! |---|---|
//! | 16 | header: magic `CAPOTHNW` (2 words), layout version, `m`, `m0`, count, entry point, top level, upper lists, 7 reserved zeros |
//! | count × (1 + m0) | layer 0: per node, its neighbour count, then `m0` slots |
//! | count + 1 | first upper list of each node (node `i` is on levels `1..=offsets[i+1] − offsets[i]`) |
//! | upper lists × (1 + m) | upper layers: per list, its neighbour count, then `m` slots |
//!
//! Fixed-size slots make a neighbour list one slice away from its node id, with no
//! per-node allocation: loading is a mapping plus one validating pass ([`Graph::open`]), and
//! search never follows a pointer the validation did not check.
//!
//! The build (`graph_build.rs`) and the search share [`search_layer`]; similarities are dot
//! products of unit vectors (higher is closer).

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::path::Path;

use super::error::IndexError;
use super::mapped::Mapped;

/// File name of the graph inside an index directory.
pub const GRAPH_FILE: &str = "graph.bin";
/// Version of the word layout above (independent of the index format version).
pub(crate) const LAYOUT_VERSION: u32 = 1;
pub(crate) const MAGIC: [u32; 2] = [u32::from_le_bytes(*b"CAPO"), u32::from_le_bytes(*b"THNW")];
pub(crate) const HEADER_WORDS: usize = 16;
/// Highest level a node may have (levels are drawn with `P(level ≥ l) = m^−l`, so with
/// m ≥ 2 level 32 is never reached by 2³² nodes).
pub(crate) const MAX_LEVEL: usize = 32;

/// A similarity and the node it belongs to, ordered by similarity (then id, for
/// determinism).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Scored(pub f32, pub u32);

impl Eq for Scored {}
impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scored {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0
            .total_cmp(&other.0)
            .then_with(|| other.1.cmp(&self.1))
    }
}

/// Marks of visited nodes for one search: a bit per node, so that the marks of a 1M-node graph
/// (125 KiB) stay in the core's L2 cache, where a generation stamp per node (2 MiB) did not and
/// each check of a neighbour went to L3. The words set in a search are noted and cleared by the
/// next [`Visited::reset`], so a reset costs what the search marked, not the graph's size.
pub(crate) struct Visited {
    words: Vec<u64>,
    /// Indices of the words set since the last reset.
    touched: Vec<u32>,
}

impl Visited {
    pub(crate) fn new() -> Self {
        Visited {
            words: Vec::new(),
            touched: Vec::new(),
        }
    }

    /// Starts a new search over `n` nodes.
    pub(crate) fn reset(&mut self, n: usize) {
        if self.touched.len() > self.words.len() / 8 {
            self.words.fill(0);
        } else {
            for &w in &self.touched {
                self.words[w as usize] = 0;
            }
        }
        self.touched.clear();
        let words = n.div_ceil(64);
        if self.words.len() < words {
            self.words.resize(words, 0);
        }
    }

    /// Marks `node`; true when it was not marked yet (false also for ids out of range).
    pub(crate) fn insert(&mut self, node: u32) -> bool {
        let (w, bit) = ((node / 64) as usize, 1u64 << (node % 64));
        match self.words.get_mut(w) {
            Some(word) if *word & bit == 0 => {
                if *word == 0 {
                    self.touched.push(w as u32);
                }
                *word |= bit;
                true
            }
            _ => false,
        }
    }
}

thread_local! {
    /// One visited set per thread, reused by every search on it.
    static VISITED: RefCell<Visited> = RefCell::new(Visited::new());
}

/// Greedy walk on one layer from `start` to a local maximum of `score`.
pub(crate) fn greedy(
    start: Scored,
    level: usize,
    neighbours: &mut impl FnMut(u32, usize, &mut Vec<u32>),
    score: &mut impl FnMut(u32) -> f32,
) -> Scored {
    let mut cur = start;
    let mut buf = Vec::new();
    loop {
        let mut moved = false;
        neighbours(cur.1, level, &mut buf);
        for &nb in &buf {
            let s = score(nb);
            if s > cur.0 {
                cur = Scored(s, nb);
                moved = true;
            }
        }
        if !moved {
            return cur;
        }
    }
}

/// Best-first search of one layer from `entries`, keeping the `ef` best nodes seen;
/// returns them best first. `visited` must have been reset for this search. `prefetch` asks
/// memory for a node's vector ahead of scoring it, `prefetch_neighbours` for its layer-0 list
/// ahead of expanding it (no-ops where both are in memory already).
#[allow(clippy::too_many_arguments)]
pub(crate) fn search_layer(
    entries: &[Scored],
    ef: usize,
    level: usize,
    neighbours: &mut impl FnMut(u32, usize, &mut Vec<u32>),
    score: &mut impl FnMut(u32) -> f32,
    prefetch: &impl Fn(u32),
    prefetch_neighbours: &impl Fn(u32),
    visited: &mut Visited,
) -> Vec<Scored> {
    let ef = ef.max(1);
    let mut candidates: BinaryHeap<Scored> = BinaryHeap::with_capacity(ef * 2);
    // Min-heap of the results: the worst kept result is on top.
    let mut results: BinaryHeap<std::cmp::Reverse<Scored>> = BinaryHeap::with_capacity(ef + 1);
    for &e in entries {
        if visited.insert(e.1) {
            candidates.push(e);
            results.push(std::cmp::Reverse(e));
            if results.len() > ef {
                results.pop();
            }
        }
    }
    let mut buf = Vec::new();
    let mut fresh = Vec::new();
    while let Some(c) = candidates.pop() {
        let worst = results.peek().map_or(f32::NEG_INFINITY, |r| r.0 .0);
        if results.len() >= ef && c.0 < worst {
            break;
        }
        // The next candidate is most often the one expanded next: its list arrives while this
        // node's neighbours are scored.
        if let Some(n) = candidates.peek() {
            prefetch_neighbours(n.1);
        }
        neighbours(c.1, level, &mut buf);
        fresh.clear();
        fresh.extend(buf.iter().copied().filter(|&nb| visited.insert(nb)));
        for (j, &nb) in fresh.iter().enumerate() {
            if let Some(&next) = fresh.get(j + 1) {
                prefetch(next);
            }
            let s = score(nb);
            let worst = results.peek().map_or(f32::NEG_INFINITY, |r| r.0 .0);
            if results.len() < ef || s > worst {
                candidates.push(Scored(s, nb));
                results.push(std::cmp::Reverse(Scored(s, nb)));
                if results.len() > ef {
                    results.pop();
                }
            }
        }
    }
    let mut out: Vec<Scored> = results.into_iter().map(|r| r.0).collect();
    out.sort_unstable_by(|a, b| b.cmp(a));
    out
}

/// The fewest new neighbours whose admitted share decides how a filtered walk expands a node.
const HOP_READING: usize = 8;

/// The fewest neighbours a filtered walk must have met before it reads the share of them the
/// filter admits as a sign of the filter's correlation with the query (see
/// [`FilteredWalk::two_hop_below`]).
const SHARE_READING: usize = 128;

/// How a filtered walk treats the nodes its filter refuses, and when it gives up.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FilteredWalk {
    /// Where fewer than this share of a node's new neighbours are admitted, the refused ones
    /// are stepped through rather than scored (1.0: everywhere, ACORN-1's expansion).
    pub hop_below: f64,
    /// Once the share admitted among all the neighbours met so far falls below this (after
    /// [`SHARE_READING`] of them), the filter refuses the query's neighbourhood more than it
    /// refuses the index: the rest of the walk steps through everywhere, so that it does not
    /// score its way through that whole neighbourhood. 0.0: never.
    pub two_hop_below: f64,
    /// The walk gives up (`None`) past this many scored nodes.
    pub budget: usize,
}

/// [`search_layer`] under a filter: only admitted nodes are kept as results, and the walk stops
/// once the `ef` best admitted nodes are settled. `None` when it scores more than
/// `walk.budget` nodes: an exact scan of the admitted nodes is then the cheaper way (Lucene's
/// rule).
///
/// Where fewer than `walk.hop_below` of a node's neighbours are admitted, only admitted nodes
/// are scored: a refused neighbour is not scored but stepped through, its own neighbours taken
/// in its place (ACORN-1's expansion), which keeps the admitted nodes connected without paying
/// a dot product for each refused one. Where more are admitted, every neighbour is scored and
/// walked through. Deciding per node rather than per filter follows the filter's correlation
/// with the query: around a query whose neighbourhood the filter refuses (a filter
/// anti-correlated with it) the walk steps through, and where most nodes are admitted it walks
/// as an unfiltered one does. A walk that has met far fewer admitted nodes than the filter's
/// share promises (`walk.two_hop_below`) steps through everywhere from then on: the refused
/// nodes it would otherwise score lie between the query and every admitted one.
#[allow(clippy::too_many_arguments)]
pub(crate) fn search_layer_filtered(
    entries: &[Scored],
    ef: usize,
    neighbours: &mut impl FnMut(u32, usize, &mut Vec<u32>),
    score: &mut impl FnMut(u32) -> f32,
    prefetch: &impl Fn(u32),
    prefetch_neighbours: &impl Fn(u32),
    admit: &impl Fn(u32) -> bool,
    walk: FilteredWalk,
    visited: &mut Visited,
) -> Option<Vec<Scored>> {
    let ef = ef.max(1);
    let mut candidates: BinaryHeap<Scored> = BinaryHeap::with_capacity(ef * 2);
    let mut results: BinaryHeap<std::cmp::Reverse<Scored>> = BinaryHeap::with_capacity(ef + 1);
    let keep = |results: &mut BinaryHeap<std::cmp::Reverse<Scored>>, s: Scored| {
        results.push(std::cmp::Reverse(s));
        if results.len() > ef {
            results.pop();
        }
    };
    for &e in entries {
        if visited.insert(e.1) {
            candidates.push(e);
            if admit(e.1) {
                keep(&mut results, e);
            }
        }
    }
    let mut scored = 0usize;
    let mut buf = Vec::new();
    let mut hop = Vec::new();
    // Nodes to score, and whether each is admitted.
    let mut fresh: Vec<(u32, bool)> = Vec::new();
    let mut hop_below = walk.hop_below;
    // Neighbours met so far, and how many of them the filter admits.
    let (mut met, mut met_admitted) = (0usize, 0usize);
    while let Some(c) = candidates.pop() {
        if hop_below < 1.0
            && met >= SHARE_READING
            && (met_admitted as f64) < walk.two_hop_below * met as f64
        {
            hop_below = 1.0;
        }
        let worst = results.peek().map_or(f32::NEG_INFINITY, |r| r.0 .0);
        if results.len() >= ef && c.0 < worst {
            break;
        }
        // As in `search_layer`: the next candidate's list, asked for early.
        if let Some(n) = candidates.peek() {
            prefetch_neighbours(n.1);
        }
        neighbours(c.1, 0, &mut buf);
        fresh.clear();
        fresh.extend(
            buf.iter()
                .filter(|&&nb| visited.insert(nb))
                .map(|&nb| (nb, admit(nb))),
        );
        // The share admitted among the node's new neighbours, read only when there are enough
        // of them to read it (late in a walk a few new ones say little).
        let admitted = fresh.iter().filter(|f| f.1).count();
        met += fresh.len();
        met_admitted += admitted;
        let reading = fresh.len() >= HOP_READING || hop_below >= 1.0;
        if reading && (admitted as f64) < hop_below * fresh.len() as f64 {
            // Few admitted here: step through the refused ones to their admitted neighbours.
            // Each refused node's list is a miss to memory; asked for together, the misses
            // overlap instead of following one another (a node seldom brings more than a few).
            for &(nb, ok) in &fresh {
                if !ok {
                    prefetch_neighbours(nb);
                }
            }
            for i in 0..fresh.len() {
                let (nb, ok) = fresh[i];
                if ok {
                    continue;
                }
                neighbours(nb, 0, &mut hop);
                for &nb2 in &hop {
                    if admit(nb2) && visited.insert(nb2) {
                        fresh.push((nb2, true));
                    }
                }
            }
            fresh.retain(|f| f.1);
        }
        scored += fresh.len();
        if scored > walk.budget {
            return None;
        }
        for (j, &(nb, ok)) in fresh.iter().enumerate() {
            if let Some(&(next, _)) = fresh.get(j + 1) {
                prefetch(next);
            }
            let s = score(nb);
            let worst = results.peek().map_or(f32::NEG_INFINITY, |r| r.0 .0);
            if results.len() < ef || s > worst {
                candidates.push(Scored(s, nb));
                if ok {
                    keep(&mut results, Scored(s, nb));
                }
            }
        }
    }
    let mut out: Vec<Scored> = results.into_iter().map(|r| r.0).collect();
    out.sort_unstable_by(|a, b| b.cmp(a));
    Some(out)
}

/// Header fields of a graph file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub m: usize,
    pub m0: usize,
    pub count: usize,
    pub entry: u32,
    pub top_level: usize,
    pub upper_lists: usize,
}

impl Header {
    /// The header as words.
    pub(crate) fn words(&self) -> [u32; HEADER_WORDS] {
        let mut w = [0u32; HEADER_WORDS];
        w[0] = MAGIC[0];
        w[1] = MAGIC[1];
        w[2] = LAYOUT_VERSION;
        w[3] = self.m as u32;
        w[4] = self.m0 as u32;
        w[5] = self.count as u32;
        w[6] = self.entry;
        w[7] = self.top_level as u32;
        w[8] = self.upper_lists as u32;
        w
    }

    /// Total words of a file with this header (None on overflow).
    pub(crate) fn file_words(&self) -> Option<usize> {
        let l0 = self.count.checked_mul(1 + self.m0)?;
        let up = self.upper_lists.checked_mul(1 + self.m)?;
        HEADER_WORDS
            .checked_add(l0)?
            .checked_add(self.count + 1)?
            .checked_add(up)
    }

    /// Reads the header of a graph file's words and checks it against the expected node
    /// `count` and `m`, and the file's size against it (not the lists: see [`validate`]).
    pub(crate) fn parse(words: &[u32], count: usize, m: usize) -> Result<Header, String> {
        if words.len() < HEADER_WORDS {
            return Err(format!(
                "{} bytes: shorter than the header",
                words.len() * 4
            ));
        }
        if words[0..2] != MAGIC {
            return Err("bad magic: not a capot graph file".into());
        }
        if words[2] != LAYOUT_VERSION {
            return Err(format!(
                "graph layout version {} (this build reads {LAYOUT_VERSION})",
                words[2]
            ));
        }
        let h = Header {
            m: words[3] as usize,
            m0: words[4] as usize,
            count: words[5] as usize,
            entry: words[6],
            top_level: words[7] as usize,
            upper_lists: words[8] as usize,
        };
        if h.m != m || h.m0 != 2 * m {
            return Err(format!(
                "m = {}, m0 = {}; the manifest says m = {m} (m0 = 2m)",
                h.m, h.m0
            ));
        }
        if h.count != count {
            return Err(format!(
                "holds {} nodes, the manifest says {count}",
                h.count
            ));
        }
        let expected = h.file_words().ok_or("sizes overflow")?;
        if words.len() != expected {
            return Err(format!(
                "size is {} bytes, the header implies {}{}",
                words.len() * 4,
                expected * 4,
                if words.len() < expected {
                    " (truncated)"
                } else {
                    ""
                }
            ));
        }
        Ok(h)
    }

    /// Word index of the level table.
    pub(crate) fn offsets_start(&self) -> usize {
        HEADER_WORDS + self.count * (1 + self.m0)
    }

    /// Word index of the first upper list.
    pub(crate) fn upper_start(&self) -> usize {
        self.offsets_start() + self.count + 1
    }
}

/// A frozen graph, mapped from `graph.bin` and validated.
pub(crate) struct Graph {
    words: Mapped<u32>,
    header: Header,
}

impl Graph {
    /// Maps and validates `path` against the manifest's `count` and `m`: sizes, every
    /// neighbour count and id, the level table and the entry point, so that no search can
    /// read out of bounds or loop on a malformed file.
    pub(crate) fn open(path: &Path, count: usize, m: usize) -> Result<Graph, IndexError> {
        let words = Mapped::<u32>::open(path, None)?;
        // Validation reads it in order; searches at random. Read-ahead stays on for the former.
        words.advise_huge_pages();
        let header = validate(words.as_slice(), count, m)
            .map_err(|reason| IndexError::corrupt(path, reason))?;
        Ok(Graph { words, header })
    }

    /// Bytes of the mapped file.
    pub(crate) fn bytes(&self) -> usize {
        self.words.bytes()
    }

    /// Neighbours of `node` on `level` (empty when the node is not on that level).
    pub(crate) fn neighbours(&self, node: u32, level: usize) -> &[u32] {
        neighbours_in(self.words.as_slice(), &self.header, node, level)
    }

    /// The words that hold `node`'s layer-0 list (its length first), without reading them: what
    /// a prefetch asks for.
    fn layer0_slot(&self, node: u32) -> &[u32] {
        let node = node as usize;
        if node >= self.header.count {
            return &[];
        }
        let start = HEADER_WORDS + node * (1 + self.header.m0);
        self.words
            .as_slice()
            .get(start..start + 1 + self.header.m0)
            .unwrap_or(&[])
    }

    /// The layer-0 node a search starts from: greedy descent from the entry point through the
    /// upper layers.
    fn descend(&self, score: &mut impl FnMut(u32) -> f32) -> Scored {
        let mut neighbours = |node: u32, level: usize, buf: &mut Vec<u32>| {
            buf.clear();
            buf.extend_from_slice(self.neighbours(node, level));
        };
        let entry = self.header.entry;
        let mut cur = Scored(score(entry), entry);
        for level in (1..=self.header.top_level).rev() {
            cur = greedy(cur, level, &mut neighbours, score);
        }
        cur
    }

    /// The `ef` best nodes for `score` (best first): greedy descent through the upper
    /// layers, then best-first search of layer 0.
    pub(crate) fn search(
        &self,
        ef: usize,
        score: &mut impl FnMut(u32) -> f32,
        prefetch: &impl Fn(u32),
    ) -> Vec<Scored> {
        let mut neighbours = |node: u32, level: usize, buf: &mut Vec<u32>| {
            buf.clear();
            buf.extend_from_slice(self.neighbours(node, level));
        };
        let cur = self.descend(score);
        VISITED.with(|v| {
            let mut visited = v.borrow_mut();
            visited.reset(self.header.count);
            search_layer(
                &[cur],
                ef,
                0,
                &mut neighbours,
                score,
                prefetch,
                &|node| super::vectors::prefetch(self.layer0_slot(node)),
                &mut visited,
            )
        })
    }

    /// The `ef` best admitted nodes for `score` (best first), or `None` past `walk.budget`
    /// scored nodes (see [`search_layer_filtered`]). The walk starts from where the greedy
    /// descent ends and from `seeds`, admitted nodes anywhere in the graph: a filter that
    /// refuses the query's whole neighbourhood leaves the descent's end among refused nodes,
    /// far from any admitted one, and a seed starts the walk where admitted nodes are.
    pub(crate) fn search_filtered(
        &self,
        ef: usize,
        score: &mut impl FnMut(u32) -> f32,
        prefetch: &impl Fn(u32),
        admit: &impl Fn(u32) -> bool,
        walk: FilteredWalk,
        seeds: &[u32],
    ) -> Option<Vec<Scored>> {
        let mut neighbours = |node: u32, level: usize, buf: &mut Vec<u32>| {
            buf.clear();
            buf.extend_from_slice(self.neighbours(node, level));
        };
        let mut entries = vec![self.descend(score)];
        entries.extend(
            seeds
                .iter()
                .filter(|&&i| (i as usize) < self.header.count)
                .map(|&i| Scored(score(i), i)),
        );
        VISITED.with(|v| {
            let mut visited = v.borrow_mut();
            visited.reset(self.header.count);
            search_layer_filtered(
                &entries,
                ef,
                &mut neighbours,
                score,
                prefetch,
                &|node| super::vectors::prefetch(self.layer0_slot(node)),
                admit,
                walk,
                &mut visited,
            )
        })
    }
}

/// Neighbour slice of `node` on `level` in a validated word array.
fn neighbours_in<'a>(words: &'a [u32], h: &Header, node: u32, level: usize) -> &'a [u32] {
    let node = node as usize;
    if node >= h.count {
        return &[];
    }
    let (start, cap) = if level == 0 {
        (HEADER_WORDS + node * (1 + h.m0), h.m0)
    } else {
        let off = h.offsets_start();
        let (first, end) = match (words.get(off + node), words.get(off + node + 1)) {
            (Some(&a), Some(&b)) => (a as usize, b as usize),
            _ => return &[],
        };
        if level > end.saturating_sub(first) {
            return &[];
        }
        (h.upper_start() + (first + level - 1) * (1 + h.m), h.m)
    };
    let len = words.get(start).map_or(0, |&l| (l as usize).min(cap));
    words.get(start + 1..start + 1 + len).unwrap_or(&[])
}

/// Checks a whole word array; returns its header or what is wrong.
pub(crate) fn validate(words: &[u32], count: usize, m: usize) -> Result<Header, String> {
    let h = Header::parse(words, count, m)?;
    if h.top_level > MAX_LEVEL || h.entry as usize >= count {
        return Err(format!(
            "invalid entry point {} or top level {}",
            h.entry, h.top_level
        ));
    }
    // Layer 0.
    for node in 0..count {
        let start = HEADER_WORDS + node * (1 + h.m0);
        let len = words[start] as usize;
        if len > h.m0 {
            return Err(format!(
                "node {node}: {len} neighbours on layer 0 (max {})",
                h.m0
            ));
        }
        if let Some(&bad) = words[start + 1..start + 1 + len]
            .iter()
            .find(|&&id| id as usize >= count)
        {
            return Err(format!("node {node}: neighbour id {bad} out of range"));
        }
    }
    // Level table.
    let off = h.offsets_start();
    let offsets = &words[off..off + count + 1];
    if offsets[0] != 0 || offsets[count] as usize != h.upper_lists {
        return Err("level table does not span the upper lists".into());
    }
    let mut top = 0;
    for (node, w) in offsets.windows(2).enumerate() {
        if w[1] < w[0] || (w[1] - w[0]) as usize > h.top_level {
            return Err(format!("node {node}: invalid level"));
        }
        top = top.max((w[1] - w[0]) as usize);
    }
    let entry_level = (offsets[h.entry as usize + 1] - offsets[h.entry as usize]) as usize;
    if top != h.top_level || entry_level != h.top_level {
        return Err(format!(
            "top level is {}, but the entry point is on level {entry_level} and the highest node on {top}",
            h.top_level
        ));
    }
    // Upper layers: ids in range and on the layer they are linked on.
    let level_of = |id: u32| (offsets[id as usize + 1] - offsets[id as usize]) as usize;
    for (node, w) in offsets.windows(2).enumerate() {
        for level in 1..=(w[1] - w[0]) as usize {
            let start = h.upper_start() + (w[0] as usize + level - 1) * (1 + h.m);
            let len = words[start] as usize;
            if len > h.m {
                return Err(format!(
                    "node {node}: {len} neighbours on level {level} (max {})",
                    h.m
                ));
            }
            for &id in &words[start + 1..start + 1 + len] {
                if id as usize >= count || level_of(id) < level {
                    return Err(format!(
                        "node {node}: neighbour {id} on level {level} is not on that level"
                    ));
                }
            }
        }
    }
    Ok(h)
}
