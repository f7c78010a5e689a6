//! Loaded query encoders and their aliases, swapped atomically.
//!
//! Readers take a snapshot (`Arc`) and keep it for the whole request, so a request in flight
//! finishes on the encoder it started with while requests after a switch see the new target.
//! An encoder's memory is freed when the last snapshot holding it is dropped.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use crate::encoder::Encoder;
use crate::server::batcher::Batcher;

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
}

impl LoadedEncoder {
    pub fn encoder(&self) -> &Arc<Encoder> {
        self.batcher.encoder()
    }

    pub fn name(&self) -> &str {
        &self.encoder().manifest().name
    }
}

/// One consistent view of the encoders and aliases.
#[derive(Default, Clone)]
pub struct Snapshot {
    pub encoders: BTreeMap<String, Arc<LoadedEncoder>>,
    pub aliases: BTreeMap<String, String>,
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
