//! The live corpus's admin routes: write and delete documents, read one back, and the index's
//! counts. The answers take Qdrant's shape (`{"result", "status", "time"}`), which users of
//! vector stores know; the work is `query::documents`.

use std::collections::HashMap;
use std::time::Instant;

use axum::extract::Query;
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
        .route("/admin/index/compact", axum::routing::post(compact))
        .route("/admin/index/compaction/events", get(compaction_events))
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
    Query(q): Query<WaitParam>,
    JsonBody(req): JsonBody<UpsertRequest>,
) -> Result<Json<Value>, ApiError> {
    let started = Instant::now();
    let result = documents::upsert(&admin.state, req.documents, q.wait).await?;
    Ok(answer(result, started))
}

async fn delete_many(
    State(admin): State<Arc<Admin>>,
    Query(q): Query<WaitParam>,
    JsonBody(req): JsonBody<DeleteRequest>,
) -> Result<Json<Value>, ApiError> {
    let started = Instant::now();
    let result = documents::delete(&admin.state, req.ids, q.wait).await?;
    Ok(answer(result, started))
}

async fn delete_one(
    State(admin): State<Arc<Admin>>,
    UrlPath(id): UrlPath<String>,
    Query(q): Query<WaitParam>,
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
    let found = blocking(move || documents::get(&state, &id).map(|d| (d, id))).await?;
    match found {
        (Some(d), _) => Ok(Json(d)),
        (None, id) => Err(ApiError::not_found(
            "document_not_found",
            format!("no document {id:?} (never written, or deleted)"),
        )),
    }
}

async fn index_info(State(admin): State<Arc<Admin>>) -> Result<Json<Value>, ApiError> {
    let Some(corpus) = admin.state.corpus() else {
        return Err(ApiError::not_ready("the index is not loaded yet"));
    };
    let status = crate::sync::lock(&admin.state.compaction).clone();
    let mut view = documents::corpus_view(&corpus, status.state == CompactionState::Running);
    view["compaction"] = serde_json::to_value(status).unwrap_or_default();
    Ok(Json(view))
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
        Err(e @ (StartError::Running(_) | StartError::ReadOnly)) => Err(ApiError::new(
            StatusCode::CONFLICT,
            match e {
                StartError::ReadOnly => "read_only",
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
    Query(q): Query<HashMap<String, String>>,
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
