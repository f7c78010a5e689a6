//! The hnsw_rs graph: build, dump, validation of a dump before reload, reload.
//!
//! hnsw_rs 0.3.5 is not defensive about its input: on a corrupt dump it
//! panics (asserts, `unwrap`), exits the whole process (`std::process::exit`
//! when a data record is short), allocates sizes read from the file, and builds
//! slices from buffers that may be too short. So a dump is fully parsed and
//! checked here ([`validate_dump`]) before hnsw_rs sees it, and the reload also
//! runs under `catch_unwind` as a last resort.
//!
//! Lifetimes: `HnswIo::load_hnsw` returns a `Hnsw<'b, ..>` borrowing the
//! `HnswIo` (needed only for its mmap mode, which is not used here: points own
//! their vectors). The `HnswIo` is leaked with `Box::leak` to obtain a
//! `Hnsw<'static, ..>` that the `Index` can own and share between threads.
//! The leak is the `HnswIo` struct itself (a path, a name, an `Arc` — about
//! 100 bytes per load), not the graph: dropping the `Index` frees the graph.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use hnsw_rs::prelude::{AnnT, DistDot, Hnsw, HnswIo};

use super::error::{panic_message, IndexError};
use super::fileio::HashingReader;
use super::manifest::{
    HnswParams, HNSW_BASENAME, HNSW_DATA_FILE, HNSW_DISTANCE, HNSW_GRAPH_FILE, MAX_LAYERS,
};

/// The graph type: f32 vectors, distance `1 − dot` on unit vectors.
pub(crate) type Graph = Hnsw<'static, f32, DistDot>;

// Magic numbers of the hnsw_rs 0.3.5 dump format (private in hnsw_rs).
const MAGIC_DESCR_4: u32 = 0x002a_6779;
const MAGIC_LAYER: u32 = 0x000a_676f;
const MAGIC_POINT: u32 = 0x000a_678f;
const MAGIC_DATA: u32 = 0xa67f_0000;
/// Upper bound on a neighbour list (hnsw_rs keeps at most 2·m ≤ 510).
const MAX_NEIGHBOURS: usize = 512;
/// Bytes per neighbour in a full-mode dump: d_id u64, layer u8, rank i32, dist f32.
const NEIGHBOUR_BYTES: usize = 8 + 1 + 4 + 4;

/// Inserts all vectors (in parallel on the global rayon pool, in chunks so
/// that `progress(done, total)` is called regularly and can cancel).
pub(crate) fn build(
    vectors: &[f32],
    dim: usize,
    params: &HnswParams,
    progress: &mut dyn FnMut(usize, usize) -> Result<(), IndexError>,
) -> Result<Graph, IndexError> {
    let n = vectors.len() / dim;
    let mut graph: Graph = Hnsw::new(params.m, n, MAX_LAYERS, params.ef_construction, DistDot {});
    let items: Vec<(&[f32], usize)> = vectors.chunks_exact(dim).zip(0..n).collect();
    let chunk = (n / 50).clamp(1024, 16384);
    let mut done = 0;
    for part in items.chunks(chunk) {
        let part = part.to_vec();
        catch_unwind(AssertUnwindSafe(|| graph.parallel_insert_slice(&part))).map_err(|p| {
            IndexError::Hnsw(format!(
                "hnsw_rs panicked during insertion: {}",
                panic_message(&*p)
            ))
        })?;
        done += part.len();
        progress(done, n)?;
    }
    graph.set_searching_mode(true);
    Ok(graph)
}

/// Dumps the graph into `dir` as `hnsw.hnsw.graph` + `hnsw.hnsw.data`.
pub(crate) fn dump(graph: &Graph, dir: &Path) -> Result<(), IndexError> {
    let res = catch_unwind(AssertUnwindSafe(|| graph.file_dump(dir, HNSW_BASENAME)));
    match res {
        Ok(Ok(name)) if name == HNSW_BASENAME => Ok(()),
        Ok(Ok(name)) => Err(IndexError::Hnsw(format!(
            "hnsw_rs dumped under basename {name:?} instead of {HNSW_BASENAME:?}"
        ))),
        Ok(Err(e)) => Err(IndexError::Hnsw(format!("dumping the graph failed: {e:#}"))),
        Err(p) => Err(IndexError::Hnsw(format!(
            "hnsw_rs panicked while dumping: {}",
            panic_message(&*p)
        ))),
    }
}

/// Reloads a dump that [`validate_dump`] accepted.
pub(crate) fn load(dir: &Path) -> Result<Graph, IndexError> {
    let res = catch_unwind(AssertUnwindSafe(|| {
        let io: &'static mut HnswIo = Box::leak(Box::new(HnswIo::new(dir, HNSW_BASENAME)));
        io.load_hnsw::<f32, DistDot>()
    }));
    match res {
        Ok(Ok(mut graph)) => {
            graph.set_searching_mode(true);
            Ok(graph)
        }
        Ok(Err(e)) => Err(IndexError::Hnsw(format!(
            "reloading the HNSW dump in {} failed: {e:#}",
            dir.display()
        ))),
        Err(p) => Err(IndexError::Hnsw(format!(
            "hnsw_rs panicked while reloading the dump in {}: {}",
            dir.display(),
            panic_message(&*p)
        ))),
    }
}

/// Little reader of native-endian dump fields (hnsw_rs writes native endian
/// and `usize` as 8 bytes on 64-bit targets).
struct Fields {
    r: HashingReader,
}

impl Fields {
    fn corrupt(&self, reason: impl Into<String>) -> IndexError {
        IndexError::corrupt(self.r.path(), reason)
    }
    fn u8(&mut self) -> Result<u8, IndexError> {
        Ok(self.r.array::<1>()?[0])
    }
    fn u32(&mut self) -> Result<u32, IndexError> {
        Ok(u32::from_ne_bytes(self.r.array()?))
    }
    fn i32(&mut self) -> Result<i32, IndexError> {
        Ok(i32::from_ne_bytes(self.r.array()?))
    }
    fn u64(&mut self) -> Result<u64, IndexError> {
        Ok(u64::from_ne_bytes(self.r.array()?))
    }
    fn f64(&mut self) -> Result<f64, IndexError> {
        Ok(f64::from_ne_bytes(self.r.array()?))
    }
    fn name(&mut self, what: &str) -> Result<String, IndexError> {
        let len = self.u64()?;
        if len > 256 {
            return Err(self.corrupt(format!("{what} length {len} > 256")));
        }
        let mut b = vec![0u8; len as usize];
        self.r.take(&mut b)?;
        String::from_utf8(b).map_err(|_| self.corrupt(format!("{what} is not UTF-8")))
    }
    fn magic(&mut self, expected: u32, what: &str) -> Result<(), IndexError> {
        let m = self.u32()?;
        if m != expected {
            return Err(self.corrupt(format!(
                "bad magic {m:#010x} at {what} (expected {expected:#010x})"
            )));
        }
        Ok(())
    }
}

/// Parses both dump files completely and checks every count, index and magic
/// number that hnsw_rs would trust, against the index's `count`, `dim` and `m`.
/// With `sha256 = Some((graph, data))` it also verifies the checksums (the
/// hashing rides on the same read).
pub(crate) fn validate_dump(
    dir: &Path,
    count: usize,
    dim: usize,
    m: usize,
    sha256: Option<(&str, &str)>,
) -> Result<(), IndexError> {
    if usize::BITS != 64 {
        return Err(IndexError::Hnsw(
            "hnsw_rs dumps are only supported on 64-bit targets".into(),
        ));
    }
    let hash = sha256.is_some();
    let mut g = Fields {
        r: HashingReader::open(&dir.join(HNSW_GRAPH_FILE), hash)?,
    };
    let mut d = Fields {
        r: HashingReader::open(&dir.join(HNSW_DATA_FILE), hash)?,
    };
    let n = count as u64;

    // Data file: its size is fully determined by count and dim.
    let record = 4 + 8 + 8 + 4 * dim as u64;
    let expected = 4 + 8 + n * record;
    if d.r.len() != expected {
        return Err(d.corrupt(format!(
            "size is {} bytes, expected {expected} for {count} vectors of dimension {dim}{}",
            d.r.len(),
            if d.r.len() < expected {
                " (truncated)"
            } else {
                ""
            }
        )));
    }
    d.magic(MAGIC_DATA, "data file header")?;
    let ddim = d.u64()?;
    if ddim != dim as u64 {
        return Err(d.corrupt(format!("dimension {ddim}, expected {dim}")));
    }

    // Graph file description.
    g.magic(MAGIC_DESCR_4, "start (not an hnsw_rs v4 dump)")?;
    if g.u8()? != 1 {
        return Err(g.corrupt("dump mode is not Full"));
    }
    let dm = g.u8()?;
    if usize::from(dm) != m {
        return Err(g.corrupt(format!("max_nb_connection {dm}, the manifest says m={m}")));
    }
    let scale = g.f64()?;
    if !(scale.is_finite() && scale > 0.0) {
        return Err(g.corrupt(format!("invalid level scale {scale}")));
    }
    let nb_layer_descr = g.u8()?;
    if usize::from(nb_layer_descr) != MAX_LAYERS {
        return Err(g.corrupt(format!("{nb_layer_descr} layers, expected {MAX_LAYERS}")));
    }
    let _ef_construction = g.u64()?;
    let nb_point = g.u64()?;
    if nb_point != n {
        return Err(g.corrupt(format!("{nb_point} points, the manifest says {count}")));
    }
    let gdim = g.u64()?;
    if gdim != dim as u64 {
        return Err(g.corrupt(format!("dimension {gdim}, the manifest says {dim}")));
    }
    let dist = g.name("distance name")?;
    if dist.rsplit("::").next() != Some(HNSW_DISTANCE) {
        return Err(g.corrupt(format!("distance {dist:?}, expected {HNSW_DISTANCE}")));
    }
    let tname = g.name("type name")?;
    if tname != "f32" {
        return Err(g.corrupt(format!("value type {tname:?}, expected f32")));
    }

    // Layers and points.
    let layers = usize::from(g.u8()?);
    if layers == 0 || layers > MAX_LAYERS {
        return Err(g.corrupt(format!("{layers} layers stored")));
    }
    let mut seen = vec![false; count];
    let mut layer_len = vec![0u64; layers];
    let mut max_rank_ref = vec![-1i64; layers];
    let mut total = 0u64;
    let mut nbuf = Vec::new();
    let mut vbuf = vec![0u8; 4 * dim];
    for (l, len) in layer_len.iter_mut().enumerate() {
        g.magic(MAGIC_LAYER, &format!("layer {l}"))?;
        let cnt = g.u64()?;
        if cnt > n - total {
            return Err(g.corrupt(format!("layer {l} claims {cnt} points")));
        }
        for r in 0..cnt {
            g.magic(MAGIC_POINT, &format!("point {r} of layer {l}"))?;
            let origin = g.u64()?;
            if origin >= n || seen[origin as usize] {
                return Err(g.corrupt(format!("invalid or repeated point id {origin}")));
            }
            seen[origin as usize] = true;
            let (pl, pr) = (g.u8()?, g.i32()?);
            if usize::from(pl) != l || i64::from(pr) != r as i64 {
                return Err(g.corrupt(format!("point {origin} misplaced")));
            }
            for _ in 0..MAX_LAYERS {
                let k = g.u64()?;
                if k > MAX_NEIGHBOURS as u64
                    || k > n
                    || k * NEIGHBOUR_BYTES as u64 > g.r.remaining()
                {
                    return Err(g.corrupt(format!("point {origin}: bad neighbour count {k}")));
                }
                nbuf.resize(k as usize * NEIGHBOUR_BYTES, 0);
                g.r.take(&mut nbuf)?;
                for nb in nbuf.chunks_exact(NEIGHBOUR_BYTES) {
                    let d_id = u64::from_ne_bytes(nb[0..8].try_into().unwrap_or([0xff; 8]));
                    let nl = usize::from(nb[8]);
                    let nr = i32::from_ne_bytes(nb[9..13].try_into().unwrap_or([0xff; 4]));
                    if d_id >= n || nl >= layers || nr < 0 {
                        return Err(g.corrupt(format!("point {origin}: invalid neighbour")));
                    }
                    max_rank_ref[nl] = max_rank_ref[nl].max(i64::from(nr));
                }
            }
            // The matching data record.
            d.magic(MAGIC_DATA, &format!("vector of point {origin}"))?;
            let dorigin = d.u64()?;
            let dlen = d.u64()?;
            if dorigin != origin || dlen != 4 * dim as u64 {
                return Err(d.corrupt(format!(
                    "record for point {origin} does not match the graph file"
                )));
            }
            d.r.take(&mut vbuf)?;
        }
        *len = cnt;
        total += cnt;
    }
    if total != n {
        return Err(g.corrupt(format!("{total} points stored, expected {count}")));
    }
    for l in 0..layers {
        if max_rank_ref[l] >= layer_len[l] as i64 {
            return Err(g.corrupt(format!("neighbour reference beyond layer {l}")));
        }
    }
    let ep = g.u64()?;
    let (el, er) = (usize::from(g.u8()?), g.i32()?);
    if ep >= n || el >= layers || er < 0 || er as u64 >= layer_len[el] {
        return Err(g.corrupt("invalid entry point"));
    }
    let (gs, ds) = match sha256 {
        Some((gs, ds)) => (Some(gs), Some(ds)),
        None => (None, None),
    };
    g.r.finish(gs)?;
    d.r.finish(ds)?;
    Ok(())
}
