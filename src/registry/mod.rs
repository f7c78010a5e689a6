//! Loaded query encoders and their aliases, swapped atomically.
//!
//! Readers take a snapshot (`Arc`) and keep it for the whole request, so a request in flight
//! finishes on the encoder it started with while requests after a switch see the new target.
//! An encoder's memory is freed when the last snapshot holding it is dropped.

pub mod batcher;
pub mod metrics;
pub mod router;
pub mod state_file;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use crate::encoder::Encoder;
use crate::repair::{RepairFusion, RepairMode};
use batcher::Batcher;

/// The alias every service has; requests that name no encoder use it.
pub const DEFAULT_ALIAS: &str = "default";

/// An encoder ready to serve: the network and its batching worker.
pub struct LoadedEncoder {
    pub batcher: Batcher,
    pub loaded_at: SystemTime,
    /// Seconds spent loading and warming up.
    pub load_seconds: f64,
    /// Why it was accepted although incompatible with the index, when an override was used.
    pub compatibility_override: Option<String>,
    /// How the registry knows it (name, revision, override flag).
    pub registration: Registration,
}

/// How an encoder was registered: under which name, how often that name was (re)loaded, and
/// whether the compatibility check was overridden.
#[derive(Debug, Clone, Default)]
pub struct Registration {
    /// The name it is registered under; `None`: the manifest's name.
    pub name: Option<String>,
    /// 0 for encoders from `--encoder` flags, then +1 for every load under this name.
    pub revision: u64,
    /// The operator asked to load it even if incompatible with the index.
    pub allow_incompatible: bool,
}

impl LoadedEncoder {
    /// When it was loaded, as RFC 3339 UTC (`/info` and gRPC `Info`).
    pub fn loaded_at_rfc3339(&self) -> String {
        let secs = self
            .loaded_at
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        crate::clock::rfc3339_from_unix(secs)
    }

    /// The network and its tokenizer.
    pub fn encoder(&self) -> &Arc<Encoder> {
        self.batcher.encoder()
    }

    /// The name it is registered (and served) under.
    pub fn name(&self) -> &str {
        self.registration
            .name
            .as_deref()
            .unwrap_or(&self.encoder().manifest().name)
    }
}

/// How an alias treats its queries before they reach its encoder. Unset fields fall back to the
/// service's defaults (`--repair`, `--repair-fusion`); a request's own fields win over both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryPipeline {
    /// Query repair mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<RepairMode>,
    /// What a repaired query searches with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fusion: Option<RepairFusion>,
}

impl QueryPipeline {
    /// True when it sets nothing.
    pub fn is_empty(&self) -> bool {
        self.repair.is_none() && self.fusion.is_none()
    }
}

/// One consistent view of the encoders, the aliases and the aliases' query pipelines.
#[derive(Default, Clone)]
pub struct Snapshot {
    pub encoders: BTreeMap<String, Arc<LoadedEncoder>>,
    pub aliases: BTreeMap<String, String>,
    /// Query pipeline per alias (only aliases that set something).
    pub pipelines: BTreeMap<String, QueryPipeline>,
}

/// Checks an encoder or alias name: 1-64 of `A-Z a-z 0-9 - _ .`, not starting with `.`
/// (usable in URLs, metric labels and file names).
pub fn validate_name(name: &str) -> Result<(), String> {
    crate::encoder::import::validate_name(name).map_err(|e| e.to_string())
}

/// Why a name did not resolve.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("no encoder or alias named {0:?}")]
    Unknown(String),
    #[error("alias {alias:?} points at {target:?}, which is not loaded")]
    Dangling { alias: String, target: String },
}

impl Snapshot {
    /// The query pipeline of `name` when it is an alias (empty otherwise: encoder names have
    /// none).
    pub fn pipeline(&self, name: &str) -> QueryPipeline {
        if self.encoders.contains_key(name) {
            return QueryPipeline::default();
        }
        self.pipelines.get(name).copied().unwrap_or_default()
    }

    /// Resolves an encoder name or alias (encoder names win over aliases).
    pub fn resolve(&self, name: &str) -> Result<Arc<LoadedEncoder>, ResolveError> {
        if let Some(e) = self.encoders.get(name) {
            return Ok(e.clone());
        }
        let target = self
            .aliases
            .get(name)
            .ok_or_else(|| ResolveError::Unknown(name.to_string()))?;
        self.encoders
            .get(target)
            .cloned()
            .ok_or_else(|| ResolveError::Dangling {
                alias: name.to_string(),
                target: target.clone(),
            })
    }
}

/// The registry: a snapshot behind a lock held only to clone or replace the `Arc`.
#[derive(Default)]
pub struct Registry {
    current: RwLock<Arc<Snapshot>>,
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        match self.current.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Applies `change` to a copy of the current snapshot and publishes it atomically;
    /// if `change` fails nothing changes.
    pub fn update<T, E>(&self, change: impl FnOnce(&mut Snapshot) -> Result<T, E>) -> Result<T, E> {
        let mut guard = match self.current.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut next = Snapshot::clone(&guard);
        let out = change(&mut next)?;
        *guard = Arc::new(next);
        Ok(out)
    }
}
