//! The saved progress of a graph build.
//!
//! The file is a `graph.bin` of all nodes as they stood when the workers paused (a node not
//! inserted yet has empty lists; see `graph.rs` for the layout) between a preamble and a
//! checksum, all little-endian `u32` words:
//!
//! | words | content |
//! |---|---|
//! | 5 | magic `CAPOTHGP`, layout version, nodes inserted, `ef_construction` |
//! | … | the graph words, header first |
//! | 8 | BLAKE3 of every byte before it |
//!
//! Nodes are claimed in id order and every claimed node was inserted when the workers paused,
//! so the inserted nodes are exactly `0..inserted` and a build continues at node `inserted`.
//! Levels are not stored beyond the graph's level table: they are drawn from the node id, and
//! a file whose levels differ from the draw (other `m`, other seed, other node count) is refused.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use super::{Building, Lists};
use crate::index::error::IndexError;
use crate::index::graph::{Header, HEADER_WORDS};
use crate::index::mapped::Mapped;

const MAGIC: [u32; 2] = [u32::from_le_bytes(*b"CAPO"), u32::from_le_bytes(*b"THGP")];
const VERSION: u32 = 1;
const PREAMBLE_WORDS: usize = 5;
const HASH_BYTES: usize = 32;

/// Progress read back from a file.
pub(crate) struct Saved {
    /// Every node's lists (levels `0..=level`), empty for nodes not inserted.
    pub links: Vec<Lists>,
    /// Entry point (on the highest level of the inserted nodes).
    pub entry: u32,
    /// Nodes `0..inserted` are in the graph.
    pub inserted: usize,
}

/// Nodes inserted according to the file at `path` (its preamble only), if it is one.
pub(crate) fn saved_progress(path: &Path) -> Option<usize> {
    let mut preamble = [0u8; PREAMBLE_WORDS * 4];
    let mut file = File::open(path).ok()?;
    std::io::Read::read_exact(&mut file, &mut preamble).ok()?;
    let word = |i: usize| u32::from_le_bytes([0, 1, 2, 3].map(|b| preamble[i * 4 + b]));
    (word(0) == MAGIC[0] && word(1) == MAGIC[1] && word(2) == VERSION).then(|| word(3) as usize)
}

/// Writes the graph of `b`, whose nodes `0..inserted` are inserted and whose workers are
/// paused, to `path` (through a temporary file, fsynced and renamed: a crash leaves the old
/// file or the new one).
pub(super) fn save(path: &Path, b: &Building<'_>, inserted: usize) -> Result<(), IndexError> {
    crate::atomic_file::write_with(path, crate::atomic_file::Access::Default, |out| {
        write(out, b, inserted)
    })
    .map_err(|e| IndexError::io(path, e))
}

fn write(out: &mut impl Write, b: &Building<'_>, inserted: usize) -> std::io::Result<()> {
    let mut hasher = blake3::Hasher::new();
    let mut sink = |words: &[u32]| {
        let bytes: &[u8] = bytemuck::cast_slice(words);
        hasher.update(bytes);
        out.write_all(bytes)
    };
    sink(&[
        MAGIC[0],
        MAGIC[1],
        VERSION,
        inserted as u32,
        b.ef_construction as u32,
    ])?;
    let (entry, top_level) = *b.top.read().unwrap_or_else(|e| e.into_inner());
    b.emit(&b.header(entry, top_level), &mut sink)?;
    out.write_all(hasher.finalize().as_bytes())
}

/// Reads the progress saved at `path` for a build of nodes with `levels`, `m` and
/// `ef_construction`: `None` when there is no file, the reason when it cannot be continued.
pub(super) fn load(
    path: &Path,
    levels: &[u8],
    m: usize,
    ef_construction: usize,
) -> Result<Option<Saved>, String> {
    if !path.exists() {
        return Ok(None);
    }
    let map = Mapped::<u32>::open(path, None).map_err(|e| e.to_string())?;
    let words = map.as_slice();
    let bytes: &[u8] = bytemuck::cast_slice(words);
    if words.len() < PREAMBLE_WORDS + HEADER_WORDS + HASH_BYTES / 4 {
        return Err(format!("{} bytes: too short", bytes.len()));
    }
    let (body, hash) = bytes.split_at(bytes.len() - HASH_BYTES);
    if blake3::hash(body).as_bytes() != hash {
        return Err("its checksum does not match: the file is damaged".into());
    }
    if words[0..2] != MAGIC || words[2] != VERSION {
        return Err("not a graph progress file of this capot".into());
    }
    let n = levels.len();
    let inserted = words[3] as usize;
    if inserted == 0 || inserted > n {
        return Err(format!("{inserted} nodes inserted of {n}"));
    }
    if words[4] as usize != ef_construction {
        return Err(format!(
            "it was built with ef_construction {}, this build uses {ef_construction}",
            words[4]
        ));
    }
    let graph = &words[PREAMBLE_WORDS..(bytes.len() - HASH_BYTES) / 4];
    if graph.len() > 5 && (graph[3] as usize != m || graph[5] as usize != n) {
        return Err(format!(
            "it holds {} nodes with m = {}, this build {n} with m = {m}",
            graph[5], graph[3]
        ));
    }
    let h = Header::parse(graph, n, m)?;
    read_lists(graph, &h, levels, inserted).map(|links| {
        Some(Saved {
            links,
            entry: h.entry,
            inserted,
        })
    })
}

/// The lists of a checked header's `graph`, checked against the drawn `levels`: ids in
/// range, inserted and on the level they are linked on; nodes not inserted without links.
fn read_lists(
    graph: &[u32],
    h: &Header,
    levels: &[u8],
    inserted: usize,
) -> Result<Vec<Lists>, String> {
    let n = levels.len();
    if h.entry as usize >= inserted || h.top_level != usize::from(levels[h.entry as usize]) {
        return Err(format!(
            "entry point {} on level {} is not an inserted node on its level",
            h.entry, h.top_level
        ));
    }
    let offsets = &graph[h.offsets_start()..h.offsets_start() + n + 1];
    if offsets[0] != 0 || h.upper_lists != levels.iter().map(|&l| usize::from(l)).sum::<usize>() {
        return Err("its level table differs from this build's (another m?)".into());
    }
    let list = |start: usize, cap: usize, level: usize, node: usize| -> Result<Vec<u32>, String> {
        let len = graph[start] as usize;
        let ids = graph
            .get(start + 1..start + 1 + len)
            .filter(|_| len <= cap)
            .ok_or_else(|| format!("node {node}: {len} neighbours on level {level}"))?;
        if node >= inserted && len > 0 {
            return Err(format!("node {node} has links but was not inserted"));
        }
        match ids
            .iter()
            .find(|&&id| id as usize >= inserted || usize::from(levels[id as usize]) < level)
        {
            Some(bad) => Err(format!(
                "node {node}: neighbour {bad} on level {level} is not an inserted node of that level"
            )),
            None => Ok(ids.to_vec()),
        }
    };
    let mut links = Vec::with_capacity(n);
    for (node, &level) in levels.iter().enumerate() {
        let level = usize::from(level);
        let first = offsets[node] as usize;
        if offsets[node + 1] as usize != first + level {
            return Err(format!(
                "node {node}: its level differs from this build's (another m?)"
            ));
        }
        let mut lists = Vec::with_capacity(level + 1);
        lists.push(list(HEADER_WORDS + node * (1 + h.m0), h.m0, 0, node)?);
        for l in 1..=level {
            lists.push(list(
                h.upper_start() + (first + l - 1) * (1 + h.m),
                h.m,
                l,
                node,
            )?);
        }
        links.push(lists);
    }
    Ok(links)
}
