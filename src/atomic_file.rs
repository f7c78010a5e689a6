//! Replacing a file so that a crash or a power loss leaves the old content or the new, never a
//! mix or nothing: write a temporary sibling, fsync it, rename it over the target, fsync the
//! directory (the rename is durable only then). Every file capot replaces in place — manifests,
//! the registry's state file, checkpoints, saved weights, the admin token — goes through here.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Who may read the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// As the process's umask allows.
    Default,
    /// The owner only (mode 0600 on Unix): secrets.
    Private,
}

/// Replaces `path` with `bytes`, atomically and durably.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_with(path, Access::Default, |w| w.write_all(bytes))
}

/// Replaces `path` with what `fill` writes, atomically and durably, with the given `access`. When
/// `fill` or any step fails, `path` is left as it was and the temporary file is removed.
pub fn write_with(
    path: &Path,
    access: Access,
    fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    let dir = parent(path);
    let tmp = temporary_sibling(path);
    let result = (|| {
        let mut opts = OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        if access == Access::Private {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut w = BufWriter::with_capacity(1 << 20, opts.open(&tmp)?);
        fill(&mut w)?;
        let file = w.into_inner().map_err(io::IntoInnerError::into_error)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(dir)
}

/// fsyncs a directory, so that the renames and new entries in it are durable. Where directories
/// cannot be opened for it (not Unix) it does nothing: there it is not needed.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    match File::open(dir).and_then(|f| f.sync_all()) {
        Ok(()) => Ok(()),
        Err(e) if cfg!(unix) => Err(e),
        Err(_) => Ok(()),
    }
}

fn parent(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// A hidden name beside `path`, unique to this process and call, so concurrent writers (threads
/// or processes) never share one.
fn temporary_sibling(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    parent(path).join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replaces_the_file_and_leaves_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write(&path, b"one").unwrap();
        write(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(names(dir.path()), ["state.json"]);
    }

    #[test]
    fn a_write_that_fails_part_way_leaves_the_old_file_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write(&path, b"the old content").unwrap();
        // The disk fills up half way through the temporary file.
        let e = write_with(&path, Access::Default, |w| {
            w.write_all(b"the new")?;
            w.flush()?;
            Err(io::Error::from_raw_os_error(28)) // ENOSPC
        })
        .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(28));
        assert_eq!(std::fs::read(&path).unwrap(), b"the old content");
        assert_eq!(
            names(dir.path()),
            ["state.json"],
            "a temporary file was left"
        );
        // A directory that does not exist: an error, nothing written.
        let missing = dir.path().join("no/such/dir/file");
        assert!(write(&missing, b"x").is_err());
        assert_eq!(names(dir.path()), ["state.json"]);
    }

    #[test]
    fn concurrent_writers_never_mix_their_contents() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shared.txt");
        std::thread::scope(|s| {
            for t in 0..4u8 {
                let path = &path;
                s.spawn(move || {
                    for _ in 0..25 {
                        write(path, &[b'a' + t; 4096]).unwrap();
                    }
                });
            }
        });
        let content = std::fs::read(&path).unwrap();
        assert_eq!(content.len(), 4096);
        assert!(content.iter().all(|&b| b == content[0]), "two writes mixed");
        assert_eq!(names(dir.path()), ["shared.txt"]);
    }

    #[cfg(unix)]
    #[test]
    fn private_files_are_the_owners_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        write_with(&path, Access::Private, |w| w.write_all(b"secret")).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
