//! The write-ahead log of the live corpus: one checksummed record per acknowledged batch, fsynced
//! before the batch is acknowledged, replayed on start.
//!
//! File: a header (`CAPOTWAL`, format version, the identity of the index the log extends), then
//! records `[payload length u32][CRC-32 of payload u32][payload]`, little-endian. A payload is
//! the batch's operation id (`u64`, one more than the record before) and its operation. A batch
//! is one record, so it is in the log whole or not at all.
//!
//! Group commit: writers append under a short lock, then wait for an fsync that covers their
//! record; while one fsync runs, the records written meanwhile wait and are covered together by
//! the next, so concurrent writers share fsyncs instead of queueing one each.
//!
//! Recovery: records are read until the first that is incomplete, fails its checksum or does not
//! decode; the file is cut there with a warning, and the bytes cut are kept beside the log
//! (`wal.log.cut-<offset>`), so nothing is thrown away unseen. A record is acknowledged only
//! after its fsync, so a torn tail is never an acknowledged batch.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, RwLock};

use super::{LiveDocument, LiveError, Operation};
use crate::sync::{lock, read, write};

const MAGIC: &[u8; 8] = b"CAPOTWAL";
const FORMAT: u32 = 1;
/// Largest record accepted on replay (a corrupt length must not allocate gigabytes).
pub const MAX_RECORD_BYTES: usize = 256 << 20;
const UPSERT: u8 = 1;
const DELETE: u8 = 2;

/// One replayed record.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The operation id: the record's position in the log, from 1.
    pub seq: u64,
    pub operation: Operation,
}

/// What opening the log found.
#[derive(Debug)]
pub struct Recovery {
    /// The valid records, in order.
    pub records: Vec<Record>,
    /// Bytes cut from the tail (torn or corrupt); 0 for a clean log.
    pub cut_bytes: u64,
    /// Where the cut bytes were kept, when there were any.
    pub cut_file: Option<PathBuf>,
}

/// Where the log's bytes go: a file, or (in the power-loss test) a disk that keeps only what
/// was synced. Appends go at the end; the log is never written in the middle.
pub(crate) trait LogStorage: Send + Sync {
    fn append(&self, bytes: &[u8]) -> std::io::Result<()>;
    /// Cuts the log to `len` bytes (a partial record taken back, a torn tail cut).
    fn truncate(&self, len: u64) -> std::io::Result<()>;
    /// Makes everything appended so far durable.
    fn sync(&self) -> std::io::Result<()>;
    /// The log's bytes as they are now, synced or not.
    fn read_all(&self) -> std::io::Result<Vec<u8>>;
    /// `len` of the log's bytes from `offset` (which the log holds).
    fn read_at(&self, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
        let all = self.read_all()?;
        all.get(offset as usize..(offset + len) as usize)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))
    }
    /// Replaces the whole log with `bytes`, durably and at once: after a crash the log is the
    /// old one or the new one, never a mix.
    fn replace(&self, bytes: &[u8]) -> std::io::Result<()>;
}

/// The log file, opened for appending; swapped whole by [`LogStorage::replace`].
struct FileStorage {
    path: PathBuf,
    file: RwLock<File>,
}

impl LogStorage for FileStorage {
    fn append(&self, bytes: &[u8]) -> std::io::Result<()> {
        (&*read(&self.file)).write_all(bytes)
    }
    fn truncate(&self, len: u64) -> std::io::Result<()> {
        read(&self.file).set_len(len)
    }
    fn sync(&self) -> std::io::Result<()> {
        read(&self.file).sync_data()
    }
    fn read_all(&self) -> std::io::Result<Vec<u8>> {
        std::fs::read(&self.path)
    }
    fn read_at(&self, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0u8; len as usize];
        read(&self.file).read_exact_at(&mut buf, offset)?;
        Ok(buf)
    }
    fn replace(&self, bytes: &[u8]) -> std::io::Result<()> {
        let tmp = self.path.with_extension("log.tmp");
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .truncate(false)
            .open(&tmp)?;
        file.set_len(0)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        // The new file takes the old one's lock before it takes its name.
        file.try_lock().map_err(std::io::Error::other)?;
        std::fs::rename(&tmp, &self.path)?;
        if let Some(dir) = self.path.parent() {
            crate::atomic_file::sync_dir(dir)?;
        }
        *write(&self.file) = file;
        Ok(())
    }
}

struct Tail {
    /// Length of the valid log.
    bytes: u64,
    /// Each record's id and the offset just past it, in log order: where the log is cut
    /// without reading what comes before.
    ends: Vec<(u64, u64)>,
    /// Id of the last record written (synced or not).
    written: u64,
    /// Set when a write or an fsync failed: what the kernel kept is unknown, so no more writes
    /// until a restart replays the log.
    failed: Option<String>,
}

/// An open log, shared by every writer.
pub struct Wal {
    path: PathBuf,
    identity: String,
    storage: std::sync::Arc<dyn LogStorage>,
    tail: Mutex<Tail>,
    /// The id of the last record known durable; also the lock one fsync holds at a time.
    synced: Mutex<u64>,
}

impl Wal {
    /// Opens (or creates) the log at `path` for the index named by `identity`, and returns
    /// what it holds. A log written for another index is refused. Operation ids go on after
    /// `floor` (the last one a compacted version holds) even when the log holds none.
    pub fn open(path: &Path, identity: &str, floor: u64) -> Result<(Wal, Recovery), LiveError> {
        let io = |e: std::io::Error| LiveError::Io(format!("{}: {e}", path.display()));
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(io)?;
        // One process per log: a second server on the same data directory would interleave
        // its records with this one's. The lock goes with the process, however it ends.
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(LiveError::Log(format!(
                    "{} is in use by another capot process; give each server its own --data-dir",
                    path.display()
                )))
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io)?;
        let fresh = bytes.len() < header(identity).len();
        let storage = std::sync::Arc::new(FileStorage {
            path: path.to_path_buf(),
            file: RwLock::new(file),
        });
        let (wal, mut recovery) = Wal::recover(path, &bytes, identity, floor, storage)?;
        if fresh {
            if let Some(dir) = path.parent() {
                crate::atomic_file::sync_dir(dir).map_err(io)?;
            }
        }
        if recovery.cut_bytes > 0 {
            let valid = bytes.len() - recovery.cut_bytes as usize;
            let cut = path.with_extension(format!("log.cut-{valid}"));
            std::fs::write(&cut, &bytes[valid..]).map_err(io)?;
            tracing::warn!(
                log = %path.display(),
                offset = valid,
                cut_bytes = recovery.cut_bytes,
                kept_in = %cut.display(),
                "write-ahead log: torn or corrupt tail cut (never an acknowledged batch)"
            );
            recovery.cut_file = Some(cut);
        }
        Ok((wal, recovery))
    }

    /// The log whose bytes so far are `bytes`, on `storage`: its valid records, the tail cut
    /// from the storage, a header written to a new one.
    pub(crate) fn recover(
        path: &Path,
        bytes: &[u8],
        identity: &str,
        floor: u64,
        storage: std::sync::Arc<dyn LogStorage>,
    ) -> Result<(Wal, Recovery), LiveError> {
        let io = |e: std::io::Error| LiveError::Io(format!("{}: {e}", path.display()));
        let header = header(identity);
        let mut recovery = Recovery {
            records: Vec::new(),
            cut_bytes: 0,
            cut_file: None,
        };
        let mut ends = Vec::new();
        let valid = if bytes.len() < header.len() && header.starts_with(bytes) {
            // New, or its header torn before anything was acknowledged.
            storage.truncate(0).map_err(io)?;
            storage.append(&header).map_err(io)?;
            storage.sync().map_err(io)?;
            header.len()
        } else {
            check_header(bytes, identity, path)?;
            let (records, record_ends) = read_records(&bytes[header.len()..]);
            ends = records
                .iter()
                .zip(&record_ends)
                .map(|(r, &end)| (r.seq, (header.len() + end) as u64))
                .collect();
            recovery.records = records;
            let valid = header.len() + record_ends.last().copied().unwrap_or(0);
            if valid < bytes.len() {
                storage.truncate(valid as u64).map_err(io)?;
                storage.sync().map_err(io)?;
                recovery.cut_bytes = (bytes.len() - valid) as u64;
            }
            valid
        };
        let last = recovery.records.last().map_or(0, |r| r.seq).max(floor);
        Ok((
            Wal {
                path: path.to_path_buf(),
                identity: identity.to_string(),
                storage,
                tail: Mutex::new(Tail {
                    bytes: valid as u64,
                    ends,
                    written: last,
                    failed: None,
                }),
                synced: Mutex::new(last),
            },
            recovery,
        ))
    }

    /// Appends one batch and returns its operation id once the record is durable.
    pub fn append(&self, operation: &Operation) -> Result<u64, LiveError> {
        let mut record = vec![0u8; 8];
        record.extend_from_slice(&0u64.to_le_bytes());
        encode(operation, &mut record);
        let payload_len = record.len() - 8;
        if payload_len > MAX_RECORD_BYTES {
            return Err(LiveError::TooLarge(format!(
                "the batch takes {payload_len} bytes in the log; at most {MAX_RECORD_BYTES}"
            )));
        }
        let seq = {
            let mut tail = lock(&self.tail);
            if let Some(reason) = &tail.failed {
                return Err(LiveError::LogFailed(reason.clone()));
            }
            let seq = tail.written + 1;
            record[8..16].copy_from_slice(&seq.to_le_bytes());
            let crc = crc32fast::hash(&record[8..]);
            record[0..4].copy_from_slice(&(payload_len as u32).to_le_bytes());
            record[4..8].copy_from_slice(&crc.to_le_bytes());
            if let Err(e) = self.storage.append(&record) {
                // Take back what part of it reached the file, so the log stays a clean prefix.
                if let Err(u) = self.storage.truncate(tail.bytes) {
                    tail.failed = Some(format!(
                        "a write failed ({e}) and could not be undone ({u})"
                    ));
                }
                return Err(LiveError::from_write(e, &self.path));
            }
            tail.bytes += record.len() as u64;
            tail.written = seq;
            let end = tail.bytes;
            tail.ends.push((seq, end));
            seq
        };
        super::crash_point("wal.before_sync");
        self.sync_to(seq)?;
        super::crash_point("wal.after_sync");
        Ok(seq)
    }

    /// Returns once record `seq` is durable, fsyncing unless another writer's fsync covered it.
    fn sync_to(&self, seq: u64) -> Result<(), LiveError> {
        let mut synced = lock(&self.synced);
        if *synced >= seq {
            return Ok(());
        }
        let upto = lock(&self.tail).written;
        if let Err(e) = self.storage.sync() {
            // After a failed fsync the kernel may have dropped the dirty pages: nothing written
            // since the last good fsync can be vouched for.
            let reason = format!("fsync of {} failed: {e}", self.path.display());
            lock(&self.tail).failed = Some(reason.clone());
            return Err(LiveError::LogFailed(reason));
        }
        *synced = upto;
        Ok(())
    }

    /// Bytes in the log.
    pub fn bytes(&self) -> u64 {
        lock(&self.tail).bytes
    }

    /// The id of the last record written.
    pub fn last_seq(&self) -> u64 {
        lock(&self.tail).written
    }

    /// The id of the last record known durable: every batch up to it is in the log for good.
    pub fn durable_seq(&self) -> u64 {
        *lock(&self.synced)
    }

    /// The log's records with ids in `range`, read back from it (a compaction's snapshot).
    pub fn records(
        &self,
        range: impl std::ops::RangeBounds<u64>,
    ) -> Result<Vec<Record>, LiveError> {
        let bytes = self.storage.read_all().map_err(|e| self.io(e))?;
        let body = bytes.get(self.header_len()..).unwrap_or_default();
        let (records, _) = read_records(body);
        Ok(records
            .into_iter()
            .filter(|r| range.contains(&r.seq))
            .collect())
    }

    /// Drops the records up to `covers`, which a durable frozen version now holds, and returns
    /// the rest, which it keeps: the log is rewritten and swapped in at once, so a crash leaves
    /// the old log or the new one, and both replay to the same corpus over that version. Only
    /// the kept records are read (from the offset where `covers` ends): writes wait while this
    /// runs, and the records before may be most of a large log.
    pub fn retain_after(&self, covers: u64) -> Result<Vec<Record>, LiveError> {
        let mut synced = lock(&self.synced);
        let mut tail = lock(&self.tail);
        if let Some(reason) = &tail.failed {
            return Err(LiveError::LogFailed(reason.clone()));
        }
        let header = header(&self.identity);
        let first_kept = tail.ends.partition_point(|&(seq, _)| seq <= covers);
        let from = match first_kept {
            0 => header.len() as u64,
            i => tail.ends[i - 1].1,
        };
        let body = self
            .storage
            .read_at(from, tail.bytes.saturating_sub(from))
            .map_err(|e| self.io(e))?;
        let (records, record_ends) = read_records(&body);
        let valid = record_ends.last().copied().unwrap_or(0);
        let mut kept = header;
        let header_len = kept.len() as u64;
        kept.extend_from_slice(&body[..valid]);
        self.storage
            .replace(&kept)
            .map_err(|e| LiveError::from_write(e, &self.path))?;
        tail.bytes = kept.len() as u64;
        tail.ends = records
            .iter()
            .zip(&record_ends)
            .map(|(r, &end)| (r.seq, header_len + end as u64))
            .collect();
        // The new log was synced whole.
        *synced = tail.written;
        Ok(records)
    }

    /// Where the log is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn header_len(&self) -> usize {
        header(&self.identity).len()
    }

    fn io(&self, e: std::io::Error) -> LiveError {
        LiveError::Io(format!("{}: {e}", self.path.display()))
    }
}

fn header(identity: &str) -> Vec<u8> {
    let mut h = MAGIC.to_vec();
    h.extend_from_slice(&FORMAT.to_le_bytes());
    put_str(&mut h, identity);
    h
}

fn check_header(bytes: &[u8], identity: &str, path: &Path) -> Result<(), LiveError> {
    let bad = |why: String| LiveError::Log(format!("{}: {why}", path.display()));
    if bytes.len() < 16 || &bytes[..8] != MAGIC {
        return Err(bad("not a capot write-ahead log".into()));
    }
    let format = u32::from_le_bytes(bytes[8..12].try_into().unwrap_or_default());
    if format != FORMAT {
        return Err(bad(format!(
            "log format {format}; this capot reads format {FORMAT}"
        )));
    }
    let mut r = Reader {
        bytes: &bytes[12..],
        pos: 0,
    };
    let written_for = r.string().ok_or_else(|| bad("its header is torn".into()))?;
    if written_for != identity {
        return Err(bad(format!(
            "the log extends index {written_for}, not this index ({identity}); \
             start with the index it was written for, or move the log away"
        )));
    }
    Ok(())
}

/// The valid records at the start of `bytes` and how many bytes they take.
/// The valid records at the start of `bytes`, and the offset just past each.
fn read_records(bytes: &[u8]) -> (Vec<Record>, Vec<usize>) {
    let mut records = Vec::new();
    let mut ends = Vec::new();
    let mut pos = 0;
    let mut expected = None;
    while bytes.len() - pos >= 8 {
        let len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap_or_default()) as usize;
        let crc = u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().unwrap_or_default());
        if len > MAX_RECORD_BYTES || bytes.len() - pos - 8 < len {
            break;
        }
        let payload = &bytes[pos + 8..pos + 8 + len];
        if crc32fast::hash(payload) != crc {
            break;
        }
        let Some(record) = decode(payload) else {
            break;
        };
        if expected.is_some_and(|e| record.seq != e) {
            break;
        }
        expected = Some(record.seq + 1);
        records.push(record);
        pos += 8 + len;
        ends.push(pos);
    }
    (records, ends)
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn encode(op: &Operation, out: &mut Vec<u8>) {
    match op {
        Operation::Upsert(docs) => {
            out.push(UPSERT);
            out.extend_from_slice(&(docs.len() as u32).to_le_bytes());
            for d in docs {
                put_str(out, &d.id);
                put_str(out, &d.title);
                put_str(out, &d.text);
                put_str(
                    out,
                    &d.metadata
                        .as_ref()
                        .map(|m| m.to_string())
                        .unwrap_or_default(),
                );
                out.extend_from_slice(&(d.vector.len() as u32).to_le_bytes());
                for x in &d.vector {
                    out.extend_from_slice(&x.to_le_bytes());
                }
            }
        }
        Operation::Delete(ids) => {
            out.push(DELETE);
            out.extend_from_slice(&(ids.len() as u32).to_le_bytes());
            for id in ids {
                put_str(out, id);
            }
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.bytes.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(s)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap_or_default()))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
    }
    fn string(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
}

fn decode(payload: &[u8]) -> Option<Record> {
    let mut r = Reader {
        bytes: payload,
        pos: 0,
    };
    let seq = r.u64()?;
    let kind = r.take(1)?[0];
    let n = r.u32()? as usize;
    // Each item takes at least four bytes: a count beyond that is corruption.
    if n > payload.len() / 4 {
        return None;
    }
    let operation = match kind {
        UPSERT => {
            let mut docs = Vec::with_capacity(n);
            for _ in 0..n {
                let id = r.string()?;
                let title = r.string()?;
                let text = r.string()?;
                let metadata = r.string()?;
                let metadata = if metadata.is_empty() {
                    None
                } else {
                    Some(serde_json::from_str(&metadata).ok()?)
                };
                let dim = r.u32()? as usize;
                let raw = r.take(dim.checked_mul(4)?)?;
                let vector = raw
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                docs.push(LiveDocument {
                    id,
                    title,
                    text,
                    metadata,
                    vector,
                });
            }
            Operation::Upsert(docs)
        }
        DELETE => Operation::Delete((0..n).map(|_| r.string()).collect::<Option<_>>()?),
        _ => return None,
    };
    (r.pos == payload.len()).then_some(Record { seq, operation })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(id: &str, text: &str) -> LiveDocument {
        LiveDocument {
            id: id.into(),
            title: String::new(),
            text: text.into(),
            metadata: Some(serde_json::json!({"lang": "en"})),
            vector: vec![0.25, -0.5, 1.0],
        }
    }

    fn three(path: &Path) -> Vec<Operation> {
        let (wal, rec) = Wal::open(path, "index-a", 0).unwrap();
        assert!(rec.records.is_empty());
        let ops = vec![
            Operation::Upsert(vec![doc("a", "first"), doc("b", "second")]),
            Operation::Delete(vec!["a".into()]),
            Operation::Upsert(vec![doc("c", "third")]),
        ];
        for (i, op) in ops.iter().enumerate() {
            assert_eq!(wal.append(op).unwrap(), i as u64 + 1);
        }
        ops
    }

    #[test]
    fn records_come_back_in_order_with_their_ids() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        let ops = three(&path);
        let (wal, rec) = Wal::open(&path, "index-a", 0).unwrap();
        let got: Vec<_> = rec.records.iter().map(|r| r.operation.clone()).collect();
        assert_eq!(got, ops);
        assert_eq!(rec.cut_bytes, 0);
        assert_eq!(wal.append(&Operation::Delete(vec!["c".into()])).unwrap(), 4);
    }

    #[test]
    fn a_log_in_use_is_refused_until_its_holder_closes_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        let (held, _) = Wal::open(&path, "index-a", 0).unwrap();
        let err = Wal::open(&path, "index-a", 0).err().expect("refused");
        assert!(err.to_string().contains("in use"), "{err}");
        drop(held);
        assert!(Wal::open(&path, "index-a", 0).is_ok());
    }

    #[test]
    fn a_log_of_another_index_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        three(&path);
        let err = Wal::open(&path, "index-b", 0).err().expect("refused");
        assert!(err.to_string().contains("index-a"), "{err}");
    }

    #[test]
    fn a_tail_cut_anywhere_or_flipped_recovers_the_valid_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        let ops = three(&path);
        let full = std::fs::read(&path).unwrap();
        // Where the last record starts: the length of a log of the first two.
        let two = dir.path().join("two.log");
        {
            let (wal, _) = Wal::open(&two, "index-a", 0).unwrap();
            wal.append(&ops[0]).unwrap();
            wal.append(&ops[1]).unwrap();
        }
        let start = std::fs::read(&two).unwrap().len();
        assert!(start < full.len());
        let check = |bytes: &[u8], what: &str| {
            std::fs::write(&path, bytes).unwrap();
            let (wal, rec) = Wal::open(&path, "index-a", 0).unwrap();
            let got: Vec<_> = rec.records.iter().map(|r| r.operation.clone()).collect();
            assert_eq!(got, ops[..2], "{what}");
            assert_eq!(
                std::fs::metadata(&path).unwrap().len(),
                start as u64,
                "{what}"
            );
            // The log goes on from the cut, with the next id.
            assert_eq!(wal.append(&ops[2]).unwrap(), 3, "{what}");
        };
        for cut in start..full.len() {
            check(&full[..cut], &format!("cut at {cut}"));
        }
        for at in start..full.len() {
            let mut bytes = full.clone();
            bytes[at] ^= 0x5a;
            check(&bytes, &format!("byte {at} flipped"));
        }
        // What was cut is kept beside the log.
        let kept = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .any(|e| e.file_name().to_string_lossy().contains(".cut-"));
        assert!(kept);
    }

    #[test]
    fn concurrent_writers_each_get_a_distinct_durable_id() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        let (wal, _) = Wal::open(&path, "index-a", 0).unwrap();
        let wal = std::sync::Arc::new(wal);
        let ids: Vec<u64> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|t| {
                    let wal = wal.clone();
                    s.spawn(move || {
                        (0..20)
                            .map(|i| {
                                wal.append(&Operation::Upsert(vec![doc(&format!("{t}-{i}"), "x")]))
                                    .unwrap()
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (1..=160).collect::<Vec<_>>());
        drop(wal);
        let (_, rec) = Wal::open(&path, "index-a", 0).unwrap();
        assert_eq!(rec.records.len(), 160);
    }

    #[test]
    fn a_compacted_prefix_leaves_the_log_and_ids_go_on_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        let (wal, _) = Wal::open(&path, "index-a", 0).unwrap();
        for i in 1..=5 {
            let op = Operation::Upsert(vec![doc(&format!("d{i}"), "x")]);
            assert_eq!(wal.append(&op).unwrap(), i);
        }
        assert_eq!(wal.records(..=3).unwrap().len(), 3);
        let before = wal.bytes();
        let kept = wal.retain_after(3).unwrap();
        assert_eq!(kept.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![4, 5]);
        assert!(wal.bytes() < before);
        let seqs = |w: &Wal| {
            w.records(..)
                .unwrap()
                .iter()
                .map(|r| r.seq)
                .collect::<Vec<_>>()
        };
        assert_eq!(seqs(&wal), vec![4, 5]);
        // Appends go on in the new file, and a restart replays what is left.
        assert_eq!(
            wal.append(&Operation::Delete(vec!["d4".into()])).unwrap(),
            6
        );
        drop(wal);
        let (wal, rec) = Wal::open(&path, "index-a", 3).unwrap();
        assert_eq!(
            rec.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
            vec![4, 5, 6]
        );
        // Cut again, from the offsets of a reopened log and of a record appended since: only
        // what comes after is read back, and it is whole.
        assert_eq!(
            wal.append(&Operation::Upsert(vec![doc("d7", "y")]))
                .unwrap(),
            7
        );
        let kept = wal.retain_after(5).unwrap();
        assert_eq!(kept.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![6, 7]);
        assert_eq!(seqs(&wal), vec![6, 7]);
        assert_eq!(
            wal.retain_after(5).unwrap().len(),
            2,
            "a second cut at the same place"
        );
        // Everything compacted: the log is a header, and ids still go on from the version's.
        assert!(wal.retain_after(7).unwrap().is_empty());
        assert_eq!(wal.bytes(), header("index-a").len() as u64);
        drop(wal);
        let (wal, rec) = Wal::open(&path, "index-a", 7).unwrap();
        assert!(rec.records.is_empty());
        assert_eq!(
            wal.append(&Operation::Delete(vec!["d1".into()])).unwrap(),
            8
        );
        assert!(!dir.path().join("wal.log.tmp").exists());
    }

    /// A disk that, at a power cut, keeps what was synced and a torn piece of the rest.
    #[derive(Default)]
    struct Disk {
        written: Mutex<Vec<u8>>,
        durable: Mutex<Vec<u8>>,
    }

    impl LogStorage for Disk {
        fn append(&self, bytes: &[u8]) -> std::io::Result<()> {
            lock(&self.written).extend_from_slice(bytes);
            Ok(())
        }
        fn truncate(&self, len: u64) -> std::io::Result<()> {
            lock(&self.written).truncate(len as usize);
            Ok(())
        }
        fn sync(&self) -> std::io::Result<()> {
            let written = lock(&self.written);
            *lock(&self.durable) = written.clone();
            Ok(())
        }
        fn read_all(&self) -> std::io::Result<Vec<u8>> {
            Ok(lock(&self.written).clone())
        }
        fn replace(&self, bytes: &[u8]) -> std::io::Result<()> {
            *lock(&self.written) = bytes.to_vec();
            *lock(&self.durable) = bytes.to_vec();
            Ok(())
        }
    }

    impl Disk {
        /// What survives a power cut now: the synced bytes and `torn` bytes of the rest.
        fn power_cut(&self, torn: usize) -> Vec<u8> {
            let written = lock(&self.written);
            let mut kept = lock(&self.durable).clone();
            if written.starts_with(&kept) {
                let rest = &written[kept.len()..];
                kept.extend_from_slice(&rest[..torn.min(rest.len())]);
            }
            kept
        }
    }

    #[test]
    fn after_power_cuts_every_acknowledged_batch_is_there() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1;
        eprintln!("power-cut test seed {seed}");
        let mut rng = seed;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let path = Path::new("simulated.log");
        let mut bytes = Vec::new();
        let mut acked: std::collections::BTreeMap<u64, Operation> = Default::default();
        for round in 0..40 {
            let disk = Arc::new(Disk::default());
            *lock(&disk.written) = bytes.clone();
            *lock(&disk.durable) = bytes.clone();
            let (wal, rec) = Wal::recover(path, &bytes, "index-a", 0, disk.clone()).unwrap();
            let found: std::collections::BTreeMap<u64, Operation> = rec
                .records
                .into_iter()
                .map(|r| (r.seq, r.operation))
                .collect();
            for (seq, op) in &acked {
                assert_eq!(
                    found.get(seq),
                    Some(op),
                    "seed {seed}, round {round}: acknowledged batch {seq} lost"
                );
            }
            // What came back, acknowledged or not, is what later rounds must keep.
            acked = found;
            let wal = Arc::new(wal);
            let cut = Arc::new(AtomicBool::new(false));
            let got = Arc::new(Mutex::new(Vec::new()));
            let writers: Vec<_> = (0..4)
                .map(|t| {
                    let (wal, cut, got) = (wal.clone(), cut.clone(), got.clone());
                    let n = 5 + next() % 20;
                    std::thread::spawn(move || {
                        for i in 0..n {
                            let op = if i % 3 == 2 {
                                Operation::Delete(vec![format!("r{round}-t{t}-{}", i - 1)])
                            } else {
                                Operation::Upsert(vec![doc(&format!("r{round}-t{t}-{i}"), "x")])
                            };
                            let seq = wal.append(&op).unwrap();
                            if cut.load(Ordering::SeqCst) {
                                return;
                            }
                            lock(&got).push((seq, op));
                        }
                    })
                })
                .collect();
            std::thread::sleep(std::time::Duration::from_micros(next() % 3000));
            cut.store(true, Ordering::SeqCst);
            bytes = disk.power_cut((next() % 300) as usize);
            for w in writers {
                w.join().unwrap();
            }
            acked.extend(lock(&got).drain(..));
        }
        assert!(
            acked.len() > 20,
            "too few batches acknowledged to test anything"
        );
    }
}
