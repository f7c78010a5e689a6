//! Small file helpers: hashing readers/writers (BLAKE3 and byte count computed
//! while the data streams through, so checksums cost no extra pass) and fsync.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use super::error::IndexError;
use super::manifest::FileInfo;

/// Buffered file writer that hashes everything written.
pub(crate) struct HashingWriter {
    path: PathBuf,
    inner: BufWriter<File>,
    hasher: blake3::Hasher,
    bytes: u64,
}

impl HashingWriter {
    /// Creates (truncates) `path`.
    pub(crate) fn create(path: &Path) -> Result<Self, IndexError> {
        let file = File::create(path).map_err(|e| IndexError::io(path, e))?;
        Ok(HashingWriter {
            path: path.to_path_buf(),
            inner: BufWriter::with_capacity(1 << 20, file),
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
            .map_err(|e| IndexError::io(&path, e.into_error()))?;
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
    // Opening a directory read-only and calling fsync works on Linux and macOS;
    // elsewhere (Windows) it fails, and there it is not needed.
    match File::open(dir) {
        Ok(f) => match f.sync_all() {
            Ok(()) => Ok(()),
            Err(e) if cfg!(unix) => Err(IndexError::io(dir, e)),
            Err(_) => Ok(()),
        },
        Err(e) if cfg!(unix) => Err(IndexError::io(dir, e)),
        Err(_) => Ok(()),
    }
}
