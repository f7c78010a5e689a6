//! The live corpus's admin routes: write and delete documents, read one back, and the index's
//! counts. The answers take Qdrant's shape (`{"result", "status", "time"}`), which users of
//! vector stores know; the work is `query::documents`.

use std::collections::HashMap;
use std::time::Instant;

use axum::http::HeaderMap;

use super::*;
use crate::query::compaction::{self, CompactionState, StartError};
use crate::query::documents::{self, DocumentInput, DocumentView, WriteResult};

/// Request body limit of the document routes: a full batch of the largest documents.
pub const DOCUMENTS_BODY_LIMIT: usize = 32 << 20;

/// `?wait=false` answers once the batch is durable, before it is applied.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WaitParam {
    /// Answer when the batch is searchable (`true`, the default) or once it is durable.
    #[serde(default = "yes")]
    pub wait: bool,
}

fn yes() -> bool {
    true
}

/// `POST /admin/documents` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpsertRequest {
    pub documents: Vec<DocumentInput>,
}

/// `POST /admin/documents/delete` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteRequest {
    pub ids: Vec<String>,
}

/// The document routes, with their own body limit.
pub(super) fn routes() -> Router<Arc<Admin>> {
    Router::new()
        .route("/admin/documents", axum::routing::post(upsert))
        .route("/admin/documents/delete", axum::routing::post(delete_many))
        .route(
            "/admin/documents/{id}",
            get(get_document).delete(delete_one),
        )
        .layer(DefaultBodyLimit::max(DOCUMENTS_BODY_LIMIT))
        .route("/admin/index", get(index_info))
        .route("/admin/index/vocab", axum::routing::post(rebuild_vocab))
        .route("/admin/index/compact", axum::routing::post(compact))
        .route("/admin/index/compaction/events", get(compaction_events))
        .route(
            "/admin/index/payload/{field}",
            axum::routing::put(put_payload_index).delete(delete_payload_index),
        )
}

fn answer(result: WriteResult, started: Instant) -> Json<Value> {
    Json(json!({
        "result": result,
        "status": "ok",
        "time": started.elapsed().as_secs_f64(),
    }))
}

async fn upsert(
    State(admin): State<Arc<Admin>>,
    QueryParams(q): QueryParams<WaitParam>,
    JsonBody(req): JsonBody<UpsertRequest>,
) -> Result<Json<Value>, ApiError> {
    let started = Instant::now();
    let result = documents::upsert(&admin.state, req.documents, q.wait).await?;
    Ok(answer(result, started))
}

async fn delete_many(
    State(admin): State<Arc<Admin>>,
    QueryParams(q): QueryParams<WaitParam>,
    JsonBody(req): JsonBody<DeleteRequest>,
) -> Result<Json<Value>, ApiError> {
    let started = Instant::now();
    let result = documents::delete(&admin.state, req.ids, q.wait).await?;
    Ok(answer(result, started))
}

async fn delete_one(
    State(admin): State<Arc<Admin>>,
    UrlPath(id): UrlPath<String>,
    QueryParams(q): QueryParams<WaitParam>,
) -> Result<Json<Value>, ApiError> {
    let started = Instant::now();
    let result = documents::delete(&admin.state, vec![id], q.wait).await?;
    Ok(answer(result, started))
}

async fn get_document(
    State(admin): State<Arc<Admin>>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<DocumentView>, ApiError> {
    let state = admin.state.clone();
    let found = match state.store.get() {
        Some(store) => (documents::get_stored(store.as_ref(), &id).await?, id),
        None => blocking(move || documents::get(&state, &id).map(|d| (d, id))).await?,
    };
    match found {
        (Some(d), _) => Ok(Json(d)),
        (None, id) => Err(ApiError::not_found(
            "document_not_found",
            format!("no document {id:?} (never written, or deleted)"),
        )),
    }
}

async fn index_info(State(admin): State<Arc<Admin>>) -> Result<Json<Value>, ApiError> {
    if let Some(store) = admin.state.store.get() {
        let documents = store
            .count()
            .await
            .map_err(crate::query::stages::store_error)?;
        let building = crate::sync::lock(&admin.state.payload_builds).clone();
        let indexes: Vec<Value> = store
            .payload_fields()
            .into_iter()
            .map(|(key, schema)| {
                let mut v = json!({"key": key});
                if let (Some(o), Ok(Value::Object(s))) =
                    (v.as_object_mut(), serde_json::to_value(schema))
                {
                    o.extend(s);
                }
                v
            })
            .collect();
        return Ok(Json(json!({
            "store": store.info(),
            "documents": documents,
            "healthy": store.healthy(),
            "vocabulary": store_vocabulary(&admin.state),
            "payload": {"indexes": indexes, "builds": building},
        })));
    }
    let Some(corpus) = admin.state.corpus() else {
        return Err(ApiError::not_ready("the index is not loaded yet"));
    };
    let status = crate::sync::lock(&admin.state.compaction).clone();
    let mut view = documents::corpus_view(&corpus, status.state == CompactionState::Running);
    view["compaction"] = serde_json::to_value(status).unwrap_or_default();
    let payload = corpus.index.payload_indexes();
    let building = crate::sync::lock(&admin.state.payload_builds).clone();
    view["payload"] = json!({
        "indexes": payload.report(),
        "builds": building,
        "heap_bytes": payload.heap_bytes(),
        "metadata": corpus.index.has_metadata(),
    });
    view["sign_codes"] = serde_json::to_value(corpus.index.sign_codes()).unwrap_or_default();
    Ok(Json(view))
}

/// `PUT /admin/index/payload/{field}` body: the payload index's type, and whether the field is
/// the tenant key.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PayloadIndexRequest {
    #[serde(rename = "type")]
    pub kind: crate::index::payload::FieldType,
    #[serde(default)]
    pub tenant: bool,
}

/// `PUT /admin/index/payload/{field}`: declares a payload index and builds it in the background
/// (202; `GET /admin/index` reports it under `payload.builds` until it serves, then under
/// `payload.indexes`). Replacing a declared index with another type is allowed.
async fn put_payload_index(
    State(admin): State<Arc<Admin>>,
    UrlPath(field): UrlPath<String>,
    JsonBody(req): JsonBody<PayloadIndexRequest>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    use crate::index::payload::{check_key, FieldSchema, FieldType};
    check_key(&field).map_err(|e| ApiError::invalid(e).with_param("field"))?;
    if req.tenant && req.kind != FieldType::Keyword {
        return Err(ApiError::invalid("a tenant key must be a keyword field").with_param("tenant"));
    }
    let store = admin.state.store.get().cloned();
    if let Some(store) = &store {
        if !store.info().writable {
            return Err(crate::query::stages::store_error(
                crate::store::StoreError::ReadOnly(format!(
                    "{} is attached with --store-columns: its indexes are its pipeline's, and there is no capot record to declare fields in",
                    store.info().location
                )),
            ));
        }
    }
    let corpus = match &store {
        Some(_) => None,
        None => Some(
            admin
                .state
                .corpus()
                .ok_or_else(|| ApiError::not_ready("the index is not loaded yet"))?,
        ),
    };
    let schema = FieldSchema {
        kind: req.kind,
        tenant: req.tenant,
    };
    {
        let mut builds = crate::sync::lock(&admin.state.payload_builds);
        if building(&builds, &field) {
            return Err(still_building(&field));
        }
        // Checked under the builds' lock, as a compaction's start checks the builds.
        if store.is_none() && compaction::running(&admin.state) {
            return Err(compacting());
        }
        builds.insert(
            field.clone(),
            crate::query::state::PayloadBuild::building(schema),
        );
    }
    let state = admin.state.clone();
    let key = field.clone();
    let finish = move |started: Instant, failed: Option<String>| {
        let mut builds = crate::sync::lock(&state.payload_builds);
        match failed {
            None => {
                tracing::info!(field = %key, seconds = started.elapsed().as_secs_f64(), "payload index built");
                builds.remove(&key);
            }
            Some(e) => {
                tracing::warn!(field = %key, error = %e, "payload index build failed");
                if let Some(b) = builds.get_mut(&key) {
                    b.fail(e);
                }
            }
        }
    };
    let key = field.clone();
    if let Some(store) = store {
        // The store builds its indexes in the database (CONCURRENTLY: writes go on).
        tokio::spawn(async move {
            let started = Instant::now();
            let result = store.set_payload_index(&key, Some(schema)).await;
            finish(started, result.err().map(|e| e.to_string()));
        });
    } else if let Some(corpus) = corpus {
        tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let result = corpus.index.set_payload_index(&key, Some(schema));
            finish(started, result.err().map(|e| e.to_string()));
        });
    }
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({
            "result": {"field": field, "type": schema.kind, "tenant": schema.tenant, "state": "building"},
            "status": "accepted",
        })),
    ))
}

/// Whether the payload index of `field` is being built.
fn building(
    builds: &std::collections::BTreeMap<String, crate::query::state::PayloadBuild>,
    field: &str,
) -> bool {
    builds
        .get(field)
        .is_some_and(|b| b.state == crate::query::state::PayloadBuildState::Building)
}

/// 409 `payload_index_building`: a declaration or a drop of `field` while its build runs.
fn still_building(field: &str) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "payload_index_building",
        format!("the payload index of {field:?} is being built; wait for it"),
    )
}

/// 409 `compaction_running`: a payload declaration or drop on the embedded index while a
/// compaction rebuilds it (the new version takes the declarations the compaction started with).
fn compacting() -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "compaction_running",
        "a compaction is running; declare or drop payload indexes after it (GET /admin/index follows it)",
    )
}

/// The store's vocabulary as `GET /admin/index` reports it: when it was built, from how many
/// documents, and whether a rebuild runs or failed.
fn store_vocabulary(state: &crate::query::AppState) -> Value {
    let Some(speller) = state.store_speller.get() else {
        return Value::Null;
    };
    let build = crate::sync::lock(&speller.build).clone();
    json!({
        "built": speller.record().map(|v| json!({
            "built_at": v.built_at,
            "age_seconds": crate::clock::now_unix().saturating_sub(v.built_unix),
            "documents": v.documents,
            "words": v.info.words,
        })),
        "state": match &build {
            None => "building",
            Some(Ok(())) => "idle",
            Some(Err(_)) => "failed",
        },
        "error": build.and_then(Result::err),
    })
}

/// `POST /admin/index/vocab`: rebuilds the store's vocabulary from its table in the background
/// and serves it once built (202; `GET /admin/index` → `vocabulary` follows it). The embedded
/// index's vocabulary is built with its index (`capot index vocab DIR`): 409 there.
async fn rebuild_vocab(
    State(admin): State<Arc<Admin>>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let state = admin.state.clone();
    let (Some(store), Some(speller)) = (state.store.get(), state.store_speller.get()) else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "embedded_index",
            "the embedded index's vocabulary is built with it (`capot index build`, or `capot index vocab DIR` on a stopped copy)",
        ));
    };
    // A database that does not answer would only fail the build in the background.
    if !store.healthy() {
        return Err(crate::query::stages::store_unhealthy());
    }
    {
        let mut build = crate::sync::lock(&speller.build);
        if build.is_none() {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "vocabulary_building",
                "a rebuild of the vocabulary is running; GET /admin/index follows it",
            ));
        }
        *build = None;
    }
    let (store, speller) = (store.clone(), speller.clone());
    tokio::spawn(async move {
        let started = Instant::now();
        let result = async {
            let dir = speller.dir.clone();
            let mut spill =
                crate::store::vocab::TextSpill::create(&dir).map_err(|e| e.to_string())?;
            store.texts(&mut spill).await.map_err(|e| e.to_string())?;
            let location = store.info().location.clone();
            let speller2 = speller.clone();
            tokio::task::spawn_blocking(move || {
                let texts = spill.finish().map_err(|e| e.to_string())?;
                crate::store::vocab::build(&dir, &location, texts.iter())
                    .map_err(|e| e.to_string())?;
                speller2.reload().map_err(|e| e.to_string())
            })
            .await
            .map_err(|e| e.to_string())??;
            Ok::<_, String>(())
        }
        .await;
        match &result {
            Ok(()) => tracing::info!(
                seconds = started.elapsed().as_secs_f64(),
                "store vocabulary rebuilt"
            ),
            Err(e) => tracing::warn!(error = %e, "store vocabulary rebuild failed"),
        }
        *crate::sync::lock(&speller.build) = Some(result);
    });
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"state": "building", "vocabulary": store_vocabulary(&state)})),
    ))
}

/// `DELETE /admin/index/payload/{field}`: drops a payload index (filters on the field are then
/// refused, or scan with `--allow-unindexed-filters`; a store filters on any key, without the
/// index); 404 when none is declared.
async fn delete_payload_index(
    State(admin): State<Arc<Admin>>,
    UrlPath(field): UrlPath<String>,
) -> Result<Json<Value>, ApiError> {
    let started = Instant::now();
    // A build still running would declare the field again after the drop.
    if building(&crate::sync::lock(&admin.state.payload_builds), &field) {
        return Err(still_building(&field));
    }
    if let Some(store) = admin.state.store.get().cloned() {
        if !store.payload_fields().contains_key(&field) {
            return Err(ApiError::not_found(
                "payload_index_not_found",
                format!("no payload index is declared for {field:?}"),
            ));
        }
        store
            .set_payload_index(&field, None)
            .await
            .map_err(crate::query::stages::store_error)?;
        crate::sync::lock(&admin.state.payload_builds).remove(&field);
        return Ok(Json(json!({
            "result": {"field": field, "dropped": true},
            "status": "ok",
            "time": started.elapsed().as_secs_f64(),
        })));
    }
    let Some(corpus) = admin.state.corpus() else {
        return Err(ApiError::not_ready("the index is not loaded yet"));
    };
    if compaction::running(&admin.state) {
        return Err(compacting());
    }
    if corpus.index.payload_indexes().field(&field).is_none() {
        return Err(ApiError::not_found(
            "payload_index_not_found",
            format!("no payload index is declared for {field:?}"),
        ));
    }
    let key = field.clone();
    blocking(move || {
        corpus
            .index
            .set_payload_index(&key, None)
            .map_err(|e| ApiError::internal(e.to_string()))
    })
    .await?;
    crate::sync::lock(&admin.state.payload_builds).remove(&field);
    Ok(Json(json!({
        "result": {"field": field, "dropped": true},
        "status": "ok",
        "time": started.elapsed().as_secs_f64(),
    })))
}

/// `POST /admin/index/compact`: folds the live segment into a new frozen version in the
/// background; 202 with the compaction's status, 409 when one runs.
async fn compact(State(admin): State<Arc<Admin>>) -> Result<(StatusCode, Json<Value>), ApiError> {
    match compaction::start(&admin.state, "api") {
        Ok(status) => Ok((
            StatusCode::ACCEPTED,
            Json(serde_json::to_value(status).unwrap_or_default()),
        )),
        Err(e @ StartError::NotReady) => Err(ApiError::not_ready(e.to_string())),
        Err(
            e @ (StartError::Running(_) | StartError::ReadOnly | StartError::PayloadBuilding(_)),
        ) => Err(ApiError::new(
            StatusCode::CONFLICT,
            match e {
                StartError::ReadOnly => "read_only",
                StartError::PayloadBuilding(_) => "payload_index_building",
                _ => "compaction_running",
            },
            e.to_string(),
        )),
    }
}

/// `GET /admin/index/compaction/events[?after=N]`: the events of the compaction running or last
/// run as JSON, or with `Accept: text/event-stream` a stream that replays them (after
/// `Last-Event-ID` when given), follows the compaction and ends after its final event — at once
/// when none runs.
async fn compaction_events(
    State(admin): State<Arc<Admin>>,
    QueryParams(q): QueryParams<HashMap<String, String>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let after = super::events::resume_after(&q, &headers)?;
    let state = admin.state.clone();
    let first = crate::sync::lock(&state.compaction).events_after(after);
    let wake = super::events::Wake::Compaction(state.compaction_news.subscribe());
    Ok(super::events::respond(
        &admin,
        &headers,
        after,
        first,
        wake,
        move |last| {
            let state = state.clone();
            async move {
                let st = crate::sync::lock(&state.compaction);
                let new = st.events_after(last);
                // Once it has ended and its last events are sent, nothing more will come.
                (st.state == CompactionState::Running || !new.is_empty()).then_some(new)
            }
        },
    ))
}
