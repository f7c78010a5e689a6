//! The directories the admin API may load encoder bundles from.
//!
//! An admin call names a bundle by path. Without a bound, a holder of the admin token could make
//! the server read (and run) any ONNX file the process can reach. The roots are `--models-dir`
//! (repeatable), the directory alignment jobs write their bundles to, and the directories of
//! the bundles given with `--encoder` at start. A requested path is resolved to its canonical
//! form (so `..` and symlinks are followed to where they really lead) and must lie under a
//! root; so must every entry of the bundle directory, so a symlinked `model.onnx` cannot reach
//! out either.

use std::path::{Path, PathBuf};

/// Canonical root directories (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct ModelRoots {
    roots: Vec<PathBuf>,
}

impl ModelRoots {
    /// Roots from `dirs`, each resolved to its canonical path; a directory that does not exist
    /// is an error naming it.
    pub fn new(dirs: impl IntoIterator<Item = PathBuf>) -> Result<Self, String> {
        let mut roots: Vec<PathBuf> = Vec::new();
        for dir in dirs {
            let canonical = std::fs::canonicalize(&dir)
                .map_err(|e| format!("model directory {}: {e}", dir.display()))?;
            if !canonical.is_dir() {
                return Err(format!(
                    "model directory {}: not a directory",
                    dir.display()
                ));
            }
            if !roots.contains(&canonical) {
                roots.push(canonical);
            }
        }
        Ok(ModelRoots { roots })
    }

    /// The roots, canonical.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.roots
    }

    fn inside(&self, canonical: &Path) -> bool {
        self.roots.iter().any(|r| canonical.starts_with(r))
    }

    /// The canonical bundle directory for `requested`, or why it may not be loaded.
    pub fn check(&self, requested: &Path) -> Result<PathBuf, Refusal> {
        let canonical = std::fs::canonicalize(requested)
            .map_err(|e| Refusal::Invalid(format!("path {}: {e}", requested.display())))?;
        if !self.inside(&canonical) {
            return Err(Refusal::Outside(format!(
                "path {} resolves to {}, outside the model directories ({}); bundles load only from --models-dir, the jobs' encoders directory and the directories of the --encoder bundles",
                requested.display(),
                canonical.display(),
                self.list()
            )));
        }
        if !canonical.is_dir() {
            return Err(Refusal::Invalid(format!(
                "path {}: not a directory",
                requested.display()
            )));
        }
        let entries = std::fs::read_dir(&canonical)
            .map_err(|e| Refusal::Invalid(format!("path {}: {e}", requested.display())))?;
        for entry in entries {
            let entry = entry
                .map_err(|e| Refusal::Invalid(format!("path {}: {e}", requested.display())))?;
            let target = std::fs::canonicalize(entry.path())
                .map_err(|e| Refusal::Invalid(format!("{}: {e}", entry.path().display())))?;
            if !self.inside(&target) {
                return Err(Refusal::Outside(format!(
                    "{} is a link to {}, outside the model directories ({})",
                    entry.path().display(),
                    target.display(),
                    self.list()
                )));
            }
        }
        Ok(canonical)
    }

    fn list(&self) -> String {
        self.roots
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Why a path may not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// It leads outside every root (403).
    Outside(String),
    /// It does not exist or is not a directory (422).
    Invalid(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_must_stay_under_a_root_after_resolving_links() {
        let tmp = tempfile::tempdir().unwrap();
        let models = tmp.path().join("models");
        let elsewhere = tmp.path().join("elsewhere");
        for d in [
            models.join("ok"),
            models.join("linked"),
            elsewhere.join("secret"),
        ] {
            std::fs::create_dir_all(&d).unwrap();
        }
        std::fs::write(models.join("ok/model.onnx"), b"x").unwrap();
        std::fs::write(elsewhere.join("secret/model.onnx"), b"x").unwrap();
        std::os::unix::fs::symlink(
            elsewhere.join("secret/model.onnx"),
            models.join("linked/model.onnx"),
        )
        .unwrap();
        std::os::unix::fs::symlink(elsewhere.join("secret"), models.join("escape")).unwrap();
        let roots = ModelRoots::new([models.clone()]).unwrap();

        let ok = roots.check(&models.join("ok")).unwrap();
        assert_eq!(ok, std::fs::canonicalize(models.join("ok")).unwrap());
        // `..` out of the root, an absolute path elsewhere, a symlinked directory, a symlinked file.
        for (path, what) in [
            (models.join("ok/../../elsewhere/secret"), "outside"),
            (elsewhere.join("secret"), "outside"),
            (models.join("escape"), "outside"),
            (models.join("linked"), "is a link to"),
        ] {
            match roots.check(&path) {
                Err(Refusal::Outside(m)) => assert!(m.contains(what), "{m}"),
                other => panic!("{} should be refused, got {other:?}", path.display()),
            }
        }
        assert!(matches!(
            roots.check(&models.join("missing")),
            Err(Refusal::Invalid(_))
        ));
        assert!(matches!(
            roots.check(&models.join("ok/model.onnx")),
            Err(Refusal::Invalid(_))
        ));
        assert!(ModelRoots::new([tmp.path().join("nope")]).is_err());
    }
}
