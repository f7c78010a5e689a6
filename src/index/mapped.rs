//! Index files memory-mapped and read in place as slices of plain values.
//!
//! Mapping instead of reading means a restart is ready without copying the vectors and the
//! graph into the heap, and the OS page cache is shared by every process serving the same
//! index. Index directories are immutable once built (builds write a new directory and rename
//! it in; a replaced index is renamed away before it is deleted, and a deleted file stays
//! mapped until unmapped), which is what makes the mapping sound: capot never writes to a
//! mapped file. Truncating one by hand under a running service is outside that contract.

use std::fs::File;
use std::marker::PhantomData;
use std::path::Path;

use bytemuck::Pod;
use memmap2::Mmap;

use super::error::IndexError;
use super::fileio::open_error;

/// A read-only file mapped as `[T]` (little-endian values; the length is checked at open).
pub(crate) struct Mapped<T> {
    map: Mmap,
    _values: PhantomData<T>,
}

impl<T: Pod> Mapped<T> {
    /// Maps `path`, which must hold exactly `len` values of `T` (`None`: any whole number).
    pub(crate) fn open(path: &Path, len: Option<usize>) -> Result<Self, IndexError> {
        if cfg!(target_endian = "big") {
            return Err(IndexError::corrupt(
                path,
                "index files are little-endian; this big-endian target cannot map them",
            ));
        }
        let file = File::open(path).map_err(|e| open_error(path, e))?;
        let bytes = file.metadata().map_err(|e| IndexError::io(path, e))?.len();
        let size = std::mem::size_of::<T>() as u64;
        if let Some(len) = len {
            let expected = len as u64 * size;
            if bytes != expected {
                return Err(IndexError::corrupt(
                    path,
                    format!(
                        "size is {bytes} bytes, expected {expected}{}",
                        if bytes < expected { " (truncated)" } else { "" }
                    ),
                ));
            }
        } else if bytes % size != 0 {
            return Err(IndexError::corrupt(
                path,
                format!("size {bytes} is not a multiple of {size} bytes"),
            ));
        }
        if bytes == 0 {
            return Err(IndexError::corrupt(path, "file is empty"));
        }
        // SAFETY: index files are never written after their build commits (see the module
        // documentation); the mapping is read-only.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| IndexError::io(path, e))?;
        if bytemuck::try_cast_slice::<u8, T>(&map).is_err() {
            return Err(IndexError::corrupt(path, "mapping is not aligned"));
        }
        Ok(Mapped {
            map,
            _values: PhantomData,
        })
    }

    /// The values. (The cast was checked at open; it cannot fail afterwards.)
    pub(crate) fn as_slice(&self) -> &[T] {
        bytemuck::try_cast_slice(&self.map).unwrap_or(&[])
    }

    /// Bytes mapped.
    pub(crate) fn bytes(&self) -> usize {
        self.map.len()
    }

    /// Tells the kernel the mapping is read at random (no read-ahead beyond the touched page).
    pub(crate) fn advise_random(&self) {
        #[cfg(unix)]
        let _ = self.map.advise(memmap2::Advice::Random);
    }

    /// Asks for the mapping's pages to be cached and mapped 2 MiB at a time where the kernel
    /// can (Linux, transparent huge pages for files; elsewhere nothing): for the files a graph
    /// walk reads all over within seconds (graph, walked vectors), where 4 KiB pages make most
    /// reads miss the TLB (~1.35× fewer queries/s at 1M, docs/benchmarks.md). It makes a
    /// cold-cache start read them in 2 MiB folios however they are touched first;
    /// `fileio::ChunkWriter` does the same for files still cached from their build.
    pub(crate) fn advise_huge_pages(&self) {
        #[cfg(target_os = "linux")]
        let _ = self.map.advise(memmap2::Advice::HugePage);
    }

    /// Both of the above: how a graph walk reads the vectors it scores.
    pub(crate) fn advise_walk(&self) {
        self.advise_random();
        self.advise_huge_pages();
    }
}
