//! The declarative state file: restored at start, watched, applied when it changes.

use super::*;

impl Admin {
    /// The alignment job manager (set once the admin API started).
    pub fn jobs(&self) -> Option<Arc<JobManager>> {
        self.jobs.get().cloned()
    }

    /// The state file's path.
    pub fn state_path(&self) -> &Path {
        &self.state_path
    }

    /// Called once the index and the `--encoder` flags are loaded (on a blocking thread): pins
    /// the flag encoders, applies the state file (or writes it when there is none yet), and
    /// starts watching it. A state file that cannot be applied is logged and counted; the
    /// service then runs with the flags' state.
    pub fn restore(self: &Arc<Self>) {
        let snapshot = self.state.registry.snapshot();
        *lock(&self.pinned) = snapshot.encoders.keys().cloned().collect();
        match state_file::read_bytes(&self.state_path) {
            Ok(Some(bytes)) => self.apply_and_record(&bytes),
            Ok(None) => {
                let mut sync = lock(&self.sync);
                match state_file::write_atomic(
                    &self.state_path,
                    &StateFile::from_snapshot(&snapshot),
                ) {
                    Ok(hash) => sync.applied = Some(hash),
                    Err(e) => tracing::warn!("cannot write the state file: {e}"),
                }
            }
            Err(e) => {
                tracing::error!("cannot read the state file: {e}");
                self.metrics.reload(false);
            }
        }
        self.metrics
            .publish_aliases(&self.state.registry.snapshot());
        self.restored.store(true, Ordering::Release);
        let weak = Arc::downgrade(self);
        let interval = self.watch_interval;
        let spawned = std::thread::Builder::new()
            .name("capot-state-watch".into())
            .spawn(move || loop {
                std::thread::sleep(interval);
                match weak.upgrade() {
                    Some(admin) => admin.poll_state_file(),
                    None => return,
                }
            });
        if let Err(e) = spawned {
            tracing::error!("cannot start the state file watcher: {e}");
        }
    }

    /// Applies the state file if its content changed since it was last written or applied.
    pub fn poll_state_file(&self) {
        let bytes = match state_file::read_bytes(&self.state_path) {
            Ok(Some(b)) => b,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!("cannot read the state file: {e}");
                return;
            }
        };
        let hash = state_file::content_hash(&bytes);
        {
            let mut sync = lock(&self.sync);
            if sync.applied.as_deref() == Some(hash.as_str()) {
                // Back to what is applied (e.g. a rejected edit was reverted).
                sync.rejected = None;
                sync.last_error = None;
                return;
            }
            if sync.rejected.as_deref() == Some(hash.as_str()) {
                return;
            }
        }
        self.apply_and_record(&bytes);
    }

    pub(super) fn apply_and_record(&self, bytes: &[u8]) {
        let hash = state_file::content_hash(bytes);
        match self.apply_bytes(bytes, &hash) {
            Ok(Applied::Changed) => {
                tracing::info!(path = %self.state_path.display(), "state file applied");
                self.metrics.reload(true);
            }
            Ok(Applied::Unchanged) => self.metrics.reload(true),
            Ok(Applied::Superseded) => {}
            Err(reason) => {
                tracing::error!(path = %self.state_path.display(), %reason, "state file rejected; the current state is kept");
                eprintln!(
                    "capot: state file {} rejected: {reason}",
                    self.state_path.display()
                );
                self.metrics.reload(false);
                let mut sync = lock(&self.sync);
                sync.rejected = Some(hash);
                sync.last_error = Some(reason);
            }
        }
    }

    /// Applies a state file as a whole: loads what it adds or changes first, then switches
    /// everything at once; on any error nothing changes.
    pub(super) fn apply_bytes(&self, bytes: &[u8], hash: &str) -> Result<Applied, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "the file is not UTF-8".to_string())?;
        let base = self
            .state_path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let desired = StateFile::parse(text, base)?;
        let pinned = lock(&self.pinned).clone();
        let current = self.state.registry.snapshot();
        let plan = state_file::plan(&current, &desired, &pinned)?;
        if plan.is_empty(&current) {
            let mut sync = lock(&self.sync);
            sync.applied = Some(hash.to_string());
            sync.rejected = None;
            sync.last_error = None;
            return Ok(Applied::Unchanged);
        }
        let mut loaded: BTreeMap<String, LoadedEncoder> = BTreeMap::new();
        for (name, entry) in &plan.load {
            let e = self
                .load(name, &entry.path, entry.allow_incompatible)
                .map_err(|e| format!("encoder {name:?}: {e}"))?;
            loaded.insert(name.clone(), e);
        }
        let mut sync = lock(&self.sync);
        // The file must still say what was loaded for, and the registry must not have moved.
        match state_file::read_bytes(&self.state_path) {
            Ok(Some(b)) if state_file::content_hash(&b) == hash => {}
            _ => return Ok(Applied::Superseded),
        }
        let current = self.state.registry.snapshot();
        let plan = state_file::plan(&current, &desired, &pinned)?;
        if plan.load.keys().any(|n| !loaded.contains_key(n)) {
            return Ok(Applied::Superseded);
        }
        let mut next = Snapshot::clone(&current);
        for name in &plan.unload {
            next.encoders.remove(name);
        }
        for (name, mut e) in loaded {
            if plan.load.contains_key(&name) {
                e.registration.revision = next
                    .encoders
                    .get(&name)
                    .map_or(1, |o| o.registration.revision + 1);
                next.encoders.insert(name, Arc::new(e));
            }
        }
        next.aliases = plan.aliases;
        next.pipelines = plan.pipelines;
        self.publish(&current, next);
        sync.applied = Some(hash.to_string());
        sync.rejected = None;
        sync.last_error = None;
        Ok(Applied::Changed)
    }
}
