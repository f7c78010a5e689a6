//! The declarative registry state: which encoders are loaded (name → bundle path, override
//! flag) and where each alias points. The admin API writes it (temporary file + rename);
//! `capot serve` restores it at start and applies every later edit of it (so a mounted
//! Kubernetes ConfigMap reaches every replica without a restart).
//!
//! ```json
//! {
//!   "format": 1,
//!   "encoders": {
//!     "minilm": { "path": "/bundles/minilm" },
//!     "minilm-typo": { "path": "/bundles/minilm-typo", "allow_incompatible": false }
//!   },
//!   "aliases": { "default": "minilm", "typo": "minilm-typo" },
//!   "pipelines": { "typo": { "repair": "on", "fusion": "max" } }
//! }
//! ```
//!
//! `pipelines` (optional) holds each alias's query pipeline: query repair mode and fusion; an
//! alias without an entry uses the service's defaults.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{validate_name, QueryPipeline, Snapshot, DEFAULT_ALIAS};

/// The state-file format this build reads and writes.
pub const STATE_FORMAT: u32 = 1;

/// Errors reading, checking or writing a state file.
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: invalid state file: {message}")]
    Invalid { path: PathBuf, message: String },
}

fn format_one() -> u32 {
    STATE_FORMAT
}

/// One encoder of the state file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EncoderEntry {
    /// The bundle directory; relative paths are relative to the state file's directory.
    pub path: PathBuf,
    /// Load it even if its vectors do not fit the index (recorded as an override).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_incompatible: bool,
}

/// The whole state file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateFile {
    #[serde(default = "format_one")]
    pub format: u32,
    #[serde(default)]
    pub encoders: BTreeMap<String, EncoderEntry>,
    #[serde(default)]
    pub aliases: BTreeMap<String, String>,
    /// Query pipeline per alias (only aliases that set something).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pipelines: BTreeMap<String, QueryPipeline>,
}

impl StateFile {
    /// The state of a snapshot (paths made absolute where possible).
    pub fn from_snapshot(snapshot: &Snapshot) -> Self {
        let encoders = snapshot
            .encoders
            .iter()
            .map(|(name, e)| {
                let dir = e.encoder().dir();
                let path = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
                (
                    name.clone(),
                    EncoderEntry {
                        path,
                        allow_incompatible: e.registration.allow_incompatible,
                    },
                )
            })
            .collect();
        StateFile {
            format: STATE_FORMAT,
            encoders,
            aliases: snapshot.aliases.clone(),
            pipelines: snapshot
                .pipelines
                .iter()
                .filter(|(a, p)| snapshot.aliases.contains_key(*a) && !p.is_empty())
                .map(|(a, p)| (a.clone(), *p))
                .collect(),
        }
    }

    /// Parses and checks a state file's text; relative bundle paths are resolved against
    /// `base` (the file's directory).
    pub fn parse(text: &str, base: &Path) -> Result<Self, String> {
        let mut de = serde_json::Deserializer::from_str(text);
        let mut file: StateFile = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = e.path().to_string();
            if path.is_empty() || path == "." {
                e.into_inner().to_string()
            } else {
                format!("{path}: {}", e.into_inner())
            }
        })?;
        de.end().map_err(|e| e.to_string())?;
        if file.format != STATE_FORMAT {
            return Err(format!(
                "format {} is not supported (this build reads {STATE_FORMAT})",
                file.format
            ));
        }
        for (name, entry) in &mut file.encoders {
            validate_name(name).map_err(|e| format!("encoders: {e}"))?;
            if entry.path.as_os_str().is_empty() {
                return Err(format!("encoders.{name}.path must not be empty"));
            }
            if entry.path.is_relative() {
                entry.path = base.join(&entry.path);
            }
        }
        for (alias, target) in &file.aliases {
            validate_name(alias)
                .map_err(|e| format!("aliases: {}", e.replace("encoder name", "alias name")))?;
            if file.encoders.contains_key(alias) {
                return Err(format!("alias {alias:?} has the name of an encoder"));
            }
            validate_name(target).map_err(|e| format!("aliases.{alias}: {e}"))?;
        }
        for alias in file.pipelines.keys() {
            if !file.aliases.contains_key(alias) && alias != DEFAULT_ALIAS {
                return Err(format!(
                    "pipelines.{alias}: no alias named {alias:?} in aliases"
                ));
            }
        }
        Ok(file)
    }
}

/// sha256 of a state file's bytes, hex-encoded: how the watcher tells a change.
pub fn content_hash(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Reads the file's bytes; `None` when it does not exist.
pub fn read_bytes(path: &Path) -> Result<Option<Vec<u8>>, StateFileError> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(StateFileError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Writes `state` to `path` atomically and durably ([`crate::atomic_file`]), so readers never
/// see a partial file; returns the content hash of what was written. When a write fails (a full
/// disk), the previous file stays as it was.
pub fn write_atomic(path: &Path, state: &StateFile) -> Result<String, StateFileError> {
    let mut text = serde_json::to_string_pretty(state).map_err(|e| StateFileError::Invalid {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    text.push('\n');
    let io = |source| StateFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    crate::atomic_file::write(path, text.as_bytes()).map_err(io)?;
    Ok(content_hash(text.as_bytes()))
}

/// What applying a state file to the current registry means.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// Encoders to load (new, or whose path or override flag changed).
    pub load: BTreeMap<String, EncoderEntry>,
    /// Encoders to unload.
    pub unload: BTreeSet<String>,
    /// The aliases afterwards.
    pub aliases: BTreeMap<String, String>,
    /// The aliases' query pipelines afterwards.
    pub pipelines: BTreeMap<String, QueryPipeline>,
}

impl Plan {
    /// Whether applying it changes nothing.
    pub fn is_empty(&self, current: &Snapshot) -> bool {
        self.load.is_empty()
            && self.unload.is_empty()
            && self.aliases == current.aliases
            && self.pipelines == current.pipelines
    }
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// The changes that take `current` to `desired`. Encoders in `pinned` (the `--encoder` flags)
/// stay loaded when the file does not list them; `default` keeps its target when the file
/// does not set it. Refuses (with the reason) a file whose aliases would point at encoders
/// that would not be loaded.
pub fn plan(
    current: &Snapshot,
    desired: &StateFile,
    pinned: &BTreeSet<String>,
) -> Result<Plan, String> {
    let mut p = Plan::default();
    for (name, entry) in &desired.encoders {
        let keep = current.encoders.get(name).is_some_and(|e| {
            same_dir(e.encoder().dir(), &entry.path)
                && e.registration.allow_incompatible == entry.allow_incompatible
        });
        if !keep {
            p.load.insert(name.clone(), entry.clone());
        }
    }
    for name in current.encoders.keys() {
        if !desired.encoders.contains_key(name) && !pinned.contains(name) {
            p.unload.insert(name.clone());
        }
    }
    p.aliases = desired.aliases.clone();
    p.pipelines = desired.pipelines.clone();
    if !p.aliases.contains_key(DEFAULT_ALIAS) {
        if let Some(t) = current.aliases.get(DEFAULT_ALIAS) {
            p.aliases.insert(DEFAULT_ALIAS.to_string(), t.clone());
        }
    }
    let after: BTreeSet<&String> = desired
        .encoders
        .keys()
        .chain(current.encoders.keys().filter(|n| !p.unload.contains(*n)))
        .collect();
    for (alias, target) in &p.aliases {
        if !after.contains(target) {
            return Err(format!(
                "alias {alias:?} points at {target:?}, which would not be loaded"
            ));
        }
        if after.contains(alias) {
            return Err(format!("alias {alias:?} has the name of an encoder"));
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_state_reads_back_with_its_hash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/state.json");
        let state = StateFile::parse(
            r#"{"encoders": {"a": {"path": "/a"}}, "aliases": {"default": "a"}}"#,
            &path,
        )
        .unwrap();
        let hash = write_atomic(&path, &state).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(content_hash(&bytes), hash);
        let text = String::from_utf8(bytes).unwrap();
        assert_eq!(StateFile::parse(&text, &path).unwrap(), state);
    }

    #[test]
    fn pipelines_parse_and_must_name_aliases() {
        let f = StateFile::parse(
            r#"{"encoders": {"a": {"path": "/a"}}, "aliases": {"default": "a", "typo": "a"},
                "pipelines": {"typo": {"repair": "on", "fusion": "repaired"}}}"#,
            Path::new("/x"),
        )
        .unwrap();
        assert_eq!(
            f.pipelines["typo"],
            QueryPipeline {
                repair: Some(crate::repair::RepairMode::On),
                fusion: Some(crate::repair::RepairFusion::Repaired),
            }
        );
        for (text, want) in [
            (
                r#"{"aliases": {"default": "a"}, "pipelines": {"zz": {"repair": "on"}}}"#,
                "no alias named",
            ),
            (
                r#"{"aliases": {"default": "a"}, "pipelines": {"default": {"repair": "often"}}}"#,
                "pipelines.default.repair",
            ),
            (
                r#"{"aliases": {"default": "a"}, "pipelines": {"default": {"speed": 1}}}"#,
                "pipelines.default",
            ),
        ] {
            let err = StateFile::parse(text, Path::new("/x")).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn parses_minimal_and_full_files() {
        let f = StateFile::parse(r#"{"aliases": {}}"#, Path::new("/x")).unwrap();
        assert_eq!(f.format, 1);
        assert!(f.encoders.is_empty());
        let f = StateFile::parse(
            r#"{"format": 1, "encoders": {"a": {"path": "rel/a", "allow_incompatible": true}}, "aliases": {"default": "a"}}"#,
            Path::new("/cfg"),
        )
        .unwrap();
        assert_eq!(f.encoders["a"].path, PathBuf::from("/cfg/rel/a"));
        assert!(f.encoders["a"].allow_incompatible);
        assert_eq!(f.aliases["default"], "a");
    }

    #[test]
    fn refuses_bad_files_with_the_reason() {
        let base = Path::new("/");
        for (text, want) in [
            ("{", "EOF"),
            (r#"{"format": 2}"#, "format 2"),
            (
                r#"{"encoders": {"a b": {"path": "/x"}}}"#,
                "invalid encoder name",
            ),
            (r#"{"encoders": {"a": {"path": ""}}}"#, "must not be empty"),
            (r#"{"encoders": {"a": {"pth": "/x"}}}"#, "unknown field"),
            (r#"{"aliases": {"../x": "a"}}"#, "alias name"),
            (
                r#"{"encoders": {"a": {"path": "/x"}}, "aliases": {"a": "a"}}"#,
                "name of an encoder",
            ),
            (r#"{"aliases": {"default": 3}}"#, "aliases.default"),
        ] {
            let err = StateFile::parse(text, base).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn plan_of_an_empty_registry_loads_everything_and_checks_aliases() {
        let current = Snapshot::default();
        let desired = StateFile::parse(
            r#"{"encoders": {"a": {"path": "/a"}, "b": {"path": "/b"}}, "aliases": {"default": "a", "typo": "b"}}"#,
            Path::new("/"),
        )
        .unwrap();
        let p = plan(&current, &desired, &BTreeSet::new()).unwrap();
        assert_eq!(p.load.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert!(p.unload.is_empty());
        assert_eq!(p.aliases.len(), 2);
        let dangling = StateFile::parse(
            r#"{"encoders": {"a": {"path": "/a"}}, "aliases": {"typo": "zz"}}"#,
            Path::new("/"),
        )
        .unwrap();
        let err = plan(&current, &dangling, &BTreeSet::new()).unwrap_err();
        assert!(err.contains("zz"), "{err}");
    }

    #[test]
    fn writes_atomically_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let state = StateFile::parse(
            r#"{"encoders": {"a": {"path": "/a"}}, "aliases": {"default": "a"}}"#,
            dir.path(),
        )
        .unwrap();
        let hash = write_atomic(&path, &state).unwrap();
        let bytes = read_bytes(&path).unwrap().unwrap();
        assert_eq!(content_hash(&bytes), hash);
        let back = StateFile::parse(std::str::from_utf8(&bytes).unwrap(), dir.path()).unwrap();
        assert_eq!(back, state);
        assert!(read_bytes(&dir.path().join("missing.json"))
            .unwrap()
            .is_none());
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(Result::ok)
            .collect();
        assert_eq!(leftovers.len(), 1, "temporary file left behind");
    }
}
