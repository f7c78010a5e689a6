//! Small file helpers: hashing readers/writers (SHA-256 and byte count computed
//! while the data streams through, so checksums cost no extra pass) and fsync.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::error::IndexError;
use super::manifest::FileInfo;

/// Buffered file writer that hashes everything written.
pub(crate) struct HashingWriter {
    path: PathBuf,
    inner: BufWriter<File>,
    hasher: Sha256,
    bytes: u64,
}

impl HashingWriter {
    /// Creates (truncates) `path`.
    pub(crate) fn create(path: &Path) -> Result<Self, IndexError> {
        let file = File::create(path).map_err(|e| IndexError::io(path, e))?;
        Ok(HashingWriter {
            path: path.to_path_buf(),
            inner: BufWriter::with_capacity(1 << 20, file),
            hasher: Sha256::new(),
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
            sha256: hex::encode(self.hasher.finalize()),
        })
    }
}

/// Buffered file reader that hashes everything read (when asked to).
pub(crate) struct HashingReader {
    path: PathBuf,
    inner: BufReader<File>,
    hasher: Option<Sha256>,
    read: u64,
    len: u64,
}

impl HashingReader {
    /// Opens `path`; `hash` selects whether a SHA-256 is computed.
    pub(crate) fn open(path: &Path, hash: bool) -> Result<Self, IndexError> {
        let file = File::open(path).map_err(|e| open_error(path, e))?;
        let len = file.metadata().map_err(|e| IndexError::io(path, e))?.len();
        Ok(HashingReader {
            path: path.to_path_buf(),
            inner: BufReader::with_capacity(1 << 20, file),
            hasher: hash.then(Sha256::new),
            read: 0,
            len,
        })
    }

    /// File size at open time.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Bytes not yet read.
    pub(crate) fn remaining(&self) -> u64 {
        self.len.saturating_sub(self.read)
    }

    /// Path being read (for error messages).
    pub(crate) fn path(&self) -> &Path {
        &self.path
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
    /// checksum matches `expected_sha256` (if given).
    pub(crate) fn finish(self, expected_sha256: Option<&str>) -> Result<(), IndexError> {
        if self.read != self.len {
            return Err(IndexError::corrupt(
                &self.path,
                format!(
                    "{} unexpected trailing bytes after the data",
                    self.len - self.read
                ),
            ));
        }
        if let (Some(h), Some(expected)) = (self.hasher, expected_sha256) {
            let actual = hex::encode(h.finalize());
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

/// Size and SHA-256 of an existing file (used for files written by hnsw_rs);
/// also fsyncs it.
pub(crate) fn hash_and_sync(path: &Path) -> Result<FileInfo, IndexError> {
    let mut r = HashingReader::open(path, true)?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = usize::try_from(r.remaining().min(buf.len() as u64)).unwrap_or(buf.len());
        if n == 0 {
            break;
        }
        r.take(&mut buf[..n])?;
    }
    let bytes = r.len;
    let sha256 = r.hasher.take().map(|h| hex::encode(h.finalize()));
    File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| IndexError::io(path, e))?;
    Ok(FileInfo {
        bytes,
        sha256: sha256.unwrap_or_default(),
    })
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
