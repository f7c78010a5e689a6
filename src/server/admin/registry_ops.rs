//! Registry operations: load, replace and unload encoders, move and remove aliases, each
//! committed with the state file in one critical section.

use super::*;

impl EncoderHost for Admin {
    /// As a search resolves it ([`Snapshot::resolve`]): an encoder name first, then an alias.
    fn resolve(&self, name_or_alias: &str) -> Option<(String, PathBuf)> {
        let e = self.state.registry.snapshot().resolve(name_or_alias).ok()?;
        Some((e.name().to_string(), absolute(e.encoder().dir())))
    }

    fn name_taken(&self, name: &str) -> bool {
        let snap = self.state.registry.snapshot();
        snap.encoders.contains_key(name) || snap.aliases.contains_key(name)
    }

    fn index_dir(&self) -> PathBuf {
        self.index_dir.clone()
    }

    fn register(&self, name: &str, path: &Path) -> Result<(), String> {
        self.load_and_register(LoadRequest {
            name: Some(name.to_string()),
            path: path.to_path_buf(),
            allow_incompatible: false,
        })
        .map(|_| ())
        .map_err(|e| e.to_string())
    }

    fn promote(&self, alias: &str, encoder: &str) -> Result<Option<String>, String> {
        self.switch_alias(alias, encoder, QueryPipeline::default())
            .map(|v| v["previous"].as_str().map(str::to_string))
            .map_err(|e| e.to_string())
    }
}

impl Admin {
    /// Publishes `next` and updates the metrics; the caller holds `sync`.
    pub(super) fn publish(&self, current: &Snapshot, next: Snapshot) {
        let removed: Vec<Arc<LoadedEncoder>> = current
            .encoders
            .iter()
            .filter(|(n, e)| next.encoders.get(*n).is_none_or(|x| !Arc::ptr_eq(x, e)))
            .map(|(_, e)| e.clone())
            .collect();
        let _ = self.state.registry.update(|s| {
            *s = next;
            Ok::<(), std::convert::Infallible>(())
        });
        let now = self.state.registry.snapshot();
        for e in removed {
            self.forget_metrics(&e, &now);
        }
        self.metrics.publish_aliases(&now);
    }

    /// Drops an encoder's `encoder_info` series unless another loaded encoder shares it.
    pub(super) fn forget_metrics(&self, e: &LoadedEncoder, now: &Snapshot) {
        let m = e.encoder().manifest();
        let shared = now.encoders.values().any(|o| {
            let om = o.encoder().manifest();
            om.name == m.name && om.version == m.version && om.fingerprint == m.fingerprint
        });
        if !shared {
            let provider = e.encoder().provider().to_string();
            let _ = self.state.metrics.encoder_info.remove_label_values(&[
                m.name.as_str(),
                m.version.as_str(),
                provider.as_str(),
                m.fingerprint.as_str(),
            ]);
        }
    }

    /// Runs `change` on a copy of the registry, writes the state file and publishes the copy,
    /// all under one lock; on any error nothing changes. Counts the swap by result.
    pub(super) fn commit<T>(
        &self,
        change: impl FnOnce(&mut Snapshot) -> Result<T, AdminError>,
    ) -> Result<T, AdminError> {
        let result = (|| {
            if !self.restored.load(Ordering::Acquire) {
                return Err(AdminError::NotReady("the service is still starting".into()));
            }
            let mut sync = lock(&self.sync);
            let current = self.state.registry.snapshot();
            let mut next = Snapshot::clone(&current);
            let out = change(&mut next)?;
            let hash = state_file::write_atomic(&self.state_path, &StateFile::from_snapshot(&next))
                .map_err(|e| {
                    AdminError::StateFile(format!(
                        "cannot write the state file, nothing changed: {e}"
                    ))
                })?;
            sync.applied = Some(hash);
            sync.rejected = None;
            self.publish(&current, next);
            Ok(out)
        })();
        self.metrics.swap(result.is_ok());
        result
    }

    /// Loads, checks and warms up a bundle without registering it.
    pub(super) fn load(
        &self,
        name: &str,
        path: &Path,
        allow_incompatible: bool,
    ) -> Result<LoadedEncoder, AdminError> {
        // The document encoder whose vectors are searched: the store's, or the index's.
        let (fingerprint, dimension) = match self.state.store.get() {
            Some(store) => (
                store.info().encoder_fingerprint.clone(),
                store.info().dimension,
            ),
            None => self
                .state
                .corpus()
                .map(|c| {
                    let m = c.index.manifest();
                    (m.encoder_fingerprint.clone(), m.dimension)
                })
                .ok_or_else(|| AdminError::NotReady("the index is still loading".into()))?,
        };
        let id = self.next_load.fetch_add(1, Ordering::Relaxed);
        lock(&self.loading).insert(
            id,
            Loading {
                name: name.to_string(),
                path: path.to_path_buf(),
                since: SystemTime::now(),
            },
        );
        let started = Instant::now();
        let result = (|| {
            let mut e = load_encoder(path, &self.runtime, &self.batch, &self.state.metrics)
                .map_err(AdminError::Load)?;
            let m = e.encoder().manifest();
            let verdict = match check_compatible(m, &fingerprint, dimension) {
                Ok(()) => Ok(()),
                Err(reason @ Incompatible::Unaligned { .. }) if allow_incompatible => {
                    tracing::warn!(encoder = name, %reason, "loaded despite incompatibility (allow_incompatible)");
                    e.compatibility_override = Some(format!("allow_incompatible: {reason}"));
                    Ok(())
                }
                Err(reason @ Incompatible::Unaligned { .. }) => Err(AdminError::Incompatible(
                    format!("{reason}; pass \"allow_incompatible\": true to load it anyway"),
                )),
                // No override can make vectors of another size searchable.
                Err(reason @ Incompatible::Dimension { .. }) => {
                    Err(AdminError::Incompatible(reason.to_string()))
                }
            };
            if let Err(err) = verdict {
                self.forget_metrics(&e, &self.state.registry.snapshot());
                return Err(err);
            }
            e.registration = Registration {
                name: Some(name.to_string()),
                revision: 1,
                allow_incompatible,
            };
            Ok(e)
        })();
        lock(&self.loading).remove(&id);
        if result.is_ok() {
            self.metrics
                .load_seconds
                .observe(started.elapsed().as_secs_f64());
        }
        result
    }

    /// `POST /admin/encoders`: loads (or replaces) an encoder. Returns whether it is new.
    pub(super) fn load_and_register(&self, req: LoadRequest) -> Result<(bool, Value), AdminError> {
        let result = (|| {
            if !self.restored.load(Ordering::Acquire) {
                return Err(AdminError::NotReady("the service is still starting".into()));
            }
            if req.path.as_os_str().is_empty() {
                return Err(AdminError::Invalid(
                    "path: the bundle directory is required".into(),
                ));
            }
            let path = self.roots.check(&req.path).map_err(|r| match r {
                Refusal::Outside(m) => {
                    tracing::warn!(path = %req.path.display(), reason = %m, "refused to load a bundle from outside the model directories");
                    AdminError::Forbidden(m)
                }
                Refusal::Invalid(m) => AdminError::Invalid(m),
            })?;
            let name = match req.name {
                Some(n) => n,
                None => {
                    EncoderManifest::read(&path)
                        .map_err(|e| AdminError::Load(e.to_string()))?
                        .name
                }
            };
            validate_name(&name).map_err(AdminError::Invalid)?;
            if self.state.registry.snapshot().aliases.contains_key(&name) {
                return Err(AdminError::Conflict(format!(
                    "{name:?} is an alias; give the encoder another name"
                )));
            }
            Ok((name, path))
        })();
        let (name, path) = match result {
            Ok(x) => x,
            Err(e) => {
                self.metrics.swap(false);
                return Err(e);
            }
        };
        let e = match self.load(&name, &path, req.allow_incompatible) {
            Ok(e) => e,
            Err(err) => {
                self.metrics.swap(false);
                return Err(err);
            }
        };
        self.commit(move |snap| {
            if snap.aliases.contains_key(&name) {
                return Err(AdminError::Conflict(format!(
                    "{name:?} is an alias; give the encoder another name"
                )));
            }
            let mut e = e;
            e.registration.revision = snap
                .encoders
                .get(&name)
                .map_or(1, |o| o.registration.revision + 1);
            let e = Arc::new(e);
            let created = snap.encoders.insert(name.clone(), e.clone()).is_none();
            Ok((created, admin_view(&e, snap)))
        })
    }

    /// `DELETE /admin/encoders/{name}`.
    pub(super) fn unload(&self, name: &str) -> Result<Value, AdminError> {
        self.commit(|snap| {
            if !snap.encoders.contains_key(name) {
                return Err(AdminError::NotFound(format!("no encoder named {name:?}")));
            }
            let pointing: Vec<&str> = snap
                .aliases
                .iter()
                .filter(|(_, t)| t.as_str() == name)
                .map(|(a, _)| a.as_str())
                .collect();
            if !pointing.is_empty() {
                return Err(AdminError::Conflict(format!(
                    "alias {} point{} at {name:?}; point {} elsewhere first",
                    pointing.join(", "),
                    if pointing.len() == 1 { "s" } else { "" },
                    if pointing.len() == 1 { "it" } else { "them" }
                )));
            }
            snap.encoders.remove(name);
            Ok(json!({ "unloaded": name }))
        })
    }

    /// `PUT /admin/aliases/{alias}`: returns the previous target. The alias's query pipeline
    /// changes in the same snapshot as its target: fields of `pipeline` that are set replace
    /// the alias's, unset ones keep it.
    pub(super) fn switch_alias(
        &self,
        alias: &str,
        encoder: &str,
        pipeline: QueryPipeline,
    ) -> Result<Value, AdminError> {
        let started = Instant::now();
        let (previous, now) = self.commit(|snap| {
            validate_name(alias)
                .map_err(|e| AdminError::Invalid(e.replace("encoder name", "alias name")))?;
            if !snap.encoders.contains_key(encoder) {
                let hint = if snap.aliases.contains_key(encoder) {
                    " (aliases point at encoders, not at aliases)"
                } else {
                    ""
                };
                return Err(AdminError::NotFound(format!(
                    "no encoder named {encoder:?}{hint}"
                )));
            }
            if snap.encoders.contains_key(alias) {
                return Err(AdminError::Conflict(format!(
                    "{alias:?} is an encoder's name; an alias needs another"
                )));
            }
            let previous = snap.aliases.insert(alias.to_string(), encoder.to_string());
            let mut p = snap.pipelines.get(alias).copied().unwrap_or_default();
            p.repair = pipeline.repair.or(p.repair);
            p.fusion = pipeline.fusion.or(p.fusion);
            if p.is_empty() {
                snap.pipelines.remove(alias);
            } else {
                snap.pipelines.insert(alias.to_string(), p);
            }
            Ok((previous, p))
        })?;
        Ok(json!({
            "alias": alias,
            "encoder": encoder,
            "pipeline": now,
            "previous": previous,
            "switch_ms": started.elapsed().as_secs_f64() * 1e3,
        }))
    }

    /// `DELETE /admin/aliases/{alias}` (never `default`).
    pub(super) fn remove_alias(&self, alias: &str) -> Result<Value, AdminError> {
        self.commit(|snap| {
            if alias == DEFAULT_ALIAS {
                return Err(AdminError::Conflict(
                    "the alias default cannot be removed; point it elsewhere".into(),
                ));
            }
            snap.pipelines.remove(alias);
            match snap.aliases.remove(alias) {
                Some(t) => Ok(json!({ "removed": alias, "previous": t })),
                None => Err(AdminError::NotFound(format!("no alias named {alias:?}"))),
            }
        })
    }
}

/// `POST /admin/encoders` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LoadRequest {
    /// Name to register it under (default: the bundle manifest's name).
    #[serde(default)]
    pub(super) name: Option<String>,
    /// The bundle directory, as the server sees it.
    #[schema(value_type = String)]
    pub(super) path: PathBuf,
    #[serde(default)]
    pub(super) allow_incompatible: bool,
}

/// An encoder as the admin API shows it: the `/info` view plus state, revision, path,
/// aliases pointing at it and provenance.
pub(super) fn admin_view(e: &LoadedEncoder, snap: &Snapshot) -> Value {
    let mut v = encoder_view(e);
    let m = e.encoder().manifest();
    let aliases: Vec<&String> = snap
        .aliases
        .iter()
        .filter(|(_, t)| t.as_str() == e.name())
        .map(|(a, _)| a)
        .collect();
    if let Value::Object(o) = &mut v {
        o.insert("state".into(), json!("ready"));
        o.insert("revision".into(), json!(e.registration.revision));
        o.insert("path".into(), json!(e.encoder().dir()));
        o.insert("bundle_name".into(), json!(m.name));
        o.insert(
            "allow_incompatible".into(),
            json!(e.registration.allow_incompatible),
        );
        o.insert("aliases".into(), json!(aliases));
        o.insert(
            "provenance".into(),
            serde_json::to_value(&m.provenance).unwrap_or(Value::Null),
        );
    }
    v
}
