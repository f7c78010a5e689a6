//! Small file helpers: hashing readers/writers (BLAKE3 and byte count computed
//! while the data streams through, so checksums cost no extra pass), a writer that leaves
//! files in huge-page-sized pieces of the page cache, and fsync.

use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use super::error::IndexError;
use super::manifest::FileInfo;

/// The piece of a file [`ChunkWriter`] hands the kernel at once: the size of a huge page on
/// x86-64 and most arm64 kernels.
pub(crate) const WRITE_CHUNK: u64 = 2 << 20;

/// Buffered writer whose writes end on multiples of [`WRITE_CHUNK`] in the file, so that each
/// one (after the first) is a whole, aligned 2 MiB piece.
///
/// Why: the page cache keeps a file in folios sized after the writes that made them. Whole
/// aligned 2 MiB writes leave 2 MiB folios, which a read-only mapping of the index maps with
/// huge pages; the row-sized or 1 MiB writes of a `BufWriter` leave 4 KiB pages, and a graph
/// walk over them, one random vector after another, misses the TLB on most reads (a served
/// 1M index answered ~1.35× fewer queries/s from a freshly built file than from one read back
/// into the cache; docs/benchmarks.md). Filesystems without large folios are unaffected.
///
/// Unlike `BufWriter`, dropping it discards what was not flushed: every caller flushes (a
/// checkpoint, `finish`) or gives the file up.
pub(crate) struct ChunkWriter<W: Write> {
    inner: W,
    /// Bytes of the file before `buf`.
    pos: u64,
    buf: Vec<u8>,
}

impl<W: Write> ChunkWriter<W> {
    /// A writer continuing `inner` at file offset `pos` (0 for a new file, the length for one
    /// appended to).
    pub(crate) fn new(inner: W, pos: u64) -> Self {
        ChunkWriter {
            inner,
            pos,
            buf: Vec::with_capacity(WRITE_CHUNK as usize),
        }
    }

    /// The underlying writer (e.g. the file, to sync it after a [`flush`](Write::flush)).
    pub(crate) fn get_ref(&self) -> &W {
        &self.inner
    }

    /// Flushes and returns the underlying writer.
    pub(crate) fn into_inner(mut self) -> io::Result<W> {
        self.flush()?;
        Ok(self.inner)
    }

    /// Bytes still free before the buffer reaches the next chunk boundary of the file.
    fn room(&self) -> usize {
        let end = self.pos + self.buf.len() as u64;
        (WRITE_CHUNK - end % WRITE_CHUNK) as usize
    }

    fn write_buffer(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.inner.write_all(&self.buf)?;
            self.pos += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(())
    }
}

impl<W: Write> Write for ChunkWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(self.room());
        self.buf.extend_from_slice(&data[..n]);
        if self.room() == WRITE_CHUNK as usize {
            // The buffer ends on a chunk boundary.
            self.write_buffer()?;
        }
        Ok(n)
    }

    /// Writes what is buffered, whatever its end: the next writes realign by themselves.
    fn flush(&mut self) -> io::Result<()> {
        self.write_buffer()?;
        self.inner.flush()
    }
}

/// Buffered file writer that hashes everything written.
pub(crate) struct HashingWriter {
    path: PathBuf,
    inner: ChunkWriter<File>,
    hasher: blake3::Hasher,
    bytes: u64,
}

impl HashingWriter {
    /// Creates (truncates) `path`.
    pub(crate) fn create(path: &Path) -> Result<Self, IndexError> {
        let file = File::create(path).map_err(|e| IndexError::io(path, e))?;
        Ok(HashingWriter {
            path: path.to_path_buf(),
            inner: ChunkWriter::new(file, 0),
            hasher: blake3::Hasher::new(),
            bytes: 0,
        })
    }

    /// Writes all of `buf`.
    pub(crate) fn put(&mut self, buf: &[u8]) -> Result<(), IndexError> {
        self.inner
            .write_all(buf)
            .map_err(|e| IndexError::io(&self.path, e))?;
        self.hasher.update(buf);
        self.bytes += buf.len() as u64;
        Ok(())
    }

    /// Flushes, fsyncs and returns size and checksum.
    pub(crate) fn finish(self) -> Result<FileInfo, IndexError> {
        let path = self.path;
        let file = self
            .inner
            .into_inner()
            .map_err(|e| IndexError::io(&path, e))?;
        file.sync_all().map_err(|e| IndexError::io(&path, e))?;
        Ok(FileInfo {
            bytes: self.bytes,
            blake3: self.hasher.finalize().to_hex().to_string(),
        })
    }
}

/// Writes `values` as little-endian bytes into a new file (fsynced) and returns its size and
/// hash: the raw arrays of an index (vectors, graph), which are mapped back as they are.
pub(crate) fn write_values<T: bytemuck::Pod>(
    path: &Path,
    values: &[T],
) -> Result<FileInfo, IndexError> {
    if cfg!(target_endian = "big") {
        return Err(IndexError::InvalidInput(
            "index files are little-endian; this big-endian target cannot write them".into(),
        ));
    }
    let mut w = HashingWriter::create(path)?;
    for chunk in values.chunks((1 << 20) / std::mem::size_of::<T>().max(1)) {
        w.put(bytemuck::cast_slice(chunk))?;
    }
    w.finish()
}

/// Buffered file reader that hashes everything read (when asked to).
pub(crate) struct HashingReader {
    path: PathBuf,
    inner: BufReader<File>,
    hasher: Option<blake3::Hasher>,
    read: u64,
    len: u64,
}

impl HashingReader {
    /// Opens `path`; `hash` selects whether a BLAKE3 hash is computed.
    pub(crate) fn open(path: &Path, hash: bool) -> Result<Self, IndexError> {
        let file = File::open(path).map_err(|e| open_error(path, e))?;
        let len = file.metadata().map_err(|e| IndexError::io(path, e))?.len();
        Ok(HashingReader {
            path: path.to_path_buf(),
            inner: BufReader::with_capacity(1 << 20, file),
            hasher: hash.then(blake3::Hasher::new),
            read: 0,
            len,
        })
    }

    /// File size at open time.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Fills `buf` exactly; a short file is reported as corrupt (truncated).
    pub(crate) fn take(&mut self, buf: &mut [u8]) -> Result<(), IndexError> {
        match self.inner.read_exact(buf) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                return Err(IndexError::corrupt(
                    &self.path,
                    format!("truncated: unexpected end of file at byte {}", self.read),
                ))
            }
            Err(e) => return Err(IndexError::io(&self.path, e)),
        }
        if let Some(h) = self.hasher.as_mut() {
            h.update(&*buf);
        }
        self.read += buf.len() as u64;
        Ok(())
    }

    /// Reads a fixed-size array.
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], IndexError> {
        let mut b = [0u8; N];
        self.take(&mut b)?;
        Ok(b)
    }

    /// Checks that the whole file was consumed and, when hashing, that the
    /// checksum matches `expected` (hex BLAKE3, if given).
    pub(crate) fn finish(self, expected: Option<&str>) -> Result<(), IndexError> {
        if self.read != self.len {
            return Err(IndexError::corrupt(
                &self.path,
                format!(
                    "{} unexpected trailing bytes after the data",
                    self.len - self.read
                ),
            ));
        }
        if let (Some(h), Some(expected)) = (self.hasher, expected) {
            let actual = h.finalize().to_hex().to_string();
            if !actual.eq_ignore_ascii_case(expected) {
                return Err(IndexError::ChecksumMismatch {
                    path: self.path,
                    expected: expected.to_string(),
                    actual,
                });
            }
        }
        Ok(())
    }
}

/// Maps "not found" to a clear "missing file" error.
pub(crate) fn open_error(path: &Path, e: io::Error) -> IndexError {
    if e.kind() == io::ErrorKind::NotFound {
        IndexError::corrupt(path, "file is missing")
    } else {
        IndexError::io(path, e)
    }
}

/// Size and BLAKE3 hash of a whole file, read in large blocks through the page cache (not
/// through a mapping, so hashing does not make the file count towards the process's resident
/// memory).
pub(crate) fn hash_file(path: &Path) -> Result<FileInfo, IndexError> {
    let file = File::open(path).map_err(|e| open_error(path, e))?;
    let mut hasher = blake3::Hasher::new();
    let bytes = io::copy(&mut BufReader::with_capacity(1 << 20, file), &mut hasher)
        .map_err(|e| IndexError::io(path, e))?;
    Ok(FileInfo {
        bytes,
        blake3: hasher.finalize().to_hex().to_string(),
    })
}

/// Verifies the BLAKE3 hash of a whole file against `expected` (hex), as [`hash_file`] reads it.
pub(crate) fn verify_file(path: &Path, expected: &str) -> Result<(), IndexError> {
    let actual = hash_file(path)?.blake3;
    if actual.eq_ignore_ascii_case(expected) {
        Ok(())
    } else {
        Err(IndexError::ChecksumMismatch {
            path: path.to_path_buf(),
            expected: expected.to_string(),
            actual,
        })
    }
}

/// fsyncs a directory so that renames and new entries in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), IndexError> {
    crate::atomic_file::sync_dir(dir).map_err(|e| IndexError::io(dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the (offset, length) of every write it receives.
    #[derive(Default)]
    struct Recorder {
        data: Vec<u8>,
        writes: Vec<(u64, usize)>,
    }

    impl Write for Recorder {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.writes.push((self.data.len() as u64, buf.len()));
            self.data.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn chunk_writer_keeps_the_bytes_and_writes_whole_aligned_chunks_between_flushes() {
        // Rows of an odd size, a flush (a checkpoint) in the middle, and a start at an
        // unaligned offset (a resumed file).
        let start = 1000u64;
        let rec = Recorder {
            data: vec![7; start as usize],
            ..Recorder::default()
        };
        let mut w = ChunkWriter::new(rec, start);
        let mut expected = vec![7u8; start as usize];
        let chunk = WRITE_CHUNK as usize;
        let mut flushed_at = Vec::new();
        for i in 0..9000u32 {
            let row: Vec<u8> = (0..1536u32).map(|j| (i * 31 + j) as u8).collect();
            w.write_all(&row).unwrap();
            expected.extend_from_slice(&row);
            if i == 4000 {
                w.flush().unwrap();
                flushed_at.push(expected.len() as u64);
            }
        }
        let rec = w.into_inner().unwrap();
        assert_eq!(rec.data, expected);
        let last = rec.writes.len() - 1;
        let mut whole = 0;
        for (n, &(offset, len)) in rec.writes.iter().enumerate() {
            let end = offset + len as u64;
            if n == last || flushed_at.contains(&end) {
                continue; // a flush writes what it has
            }
            assert_eq!(end % WRITE_CHUNK, 0, "write {n} ends at {end}");
            assert!(len <= chunk);
            if offset % WRITE_CHUNK == 0 {
                assert_eq!(len, chunk);
                whole += 1;
            }
        }
        // 13.8 MB written: all but the pieces next to the start, the flush and the end are
        // whole chunks.
        assert!(whole >= 4, "{whole} whole chunks of {:?}", rec.writes);
    }
}
