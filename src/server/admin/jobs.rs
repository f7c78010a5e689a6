//! The jobs routes of the admin API: create, list, show, follow (JSON or server-sent events)
//! and cancel alignment jobs (see `docs/jobs.md`).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::{blocking, Admin};
use crate::jobs::{JobError, JobManager, JobSpec, JobStatus};
use crate::query::ApiError;
use crate::server::error::{JsonBody, QueryParams, UrlPath};

impl From<JobError> for ApiError {
    fn from(e: JobError) -> Self {
        match e {
            JobError::Invalid(f) => ApiError::invalid(f.to_string()).with_param(f.field),
            JobError::NotFound(m) => {
                let param = m.split_once(": ").map(|(p, _)| p.to_string());
                let err = ApiError::not_found("not_found", m.clone());
                match param.filter(|p| p == "base_encoder") {
                    Some(p) => err.with_param(p),
                    None => err,
                }
            }
            JobError::Conflict(m) => {
                let err = ApiError::new(StatusCode::CONFLICT, "conflict", m.clone());
                match m.split_once(": ").filter(|(p, _)| *p == "name") {
                    Some((p, _)) => err.with_param(p),
                    None => err,
                }
            }
            JobError::Store(e) => ApiError::internal(e.to_string()),
        }
    }
}

fn manager(admin: &Admin) -> Result<Arc<JobManager>, ApiError> {
    admin
        .jobs()
        .ok_or_else(|| ApiError::not_ready("the job manager is not running"))
}

/// `POST /admin/jobs` → 202 with the queued job.
pub async fn create(
    State(admin): State<Arc<Admin>>,
    JsonBody(spec): JsonBody<JobSpec>,
) -> Result<Response, ApiError> {
    let m = manager(&admin)?;
    let job = blocking(move || m.submit(spec)).await?;
    let location = format!("/admin/jobs/{}", job.id);
    let mut resp = (
        StatusCode::ACCEPTED,
        Json(json!({ "id": job.id, "status": job.status, "job": job })),
    )
        .into_response();
    if let Ok(v) = HeaderValue::from_str(&location) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    Ok(resp)
}

/// `GET /admin/jobs?limit=&page_token=&status=` → newest first.
pub async fn list(
    State(admin): State<Arc<Admin>>,
    QueryParams(q): QueryParams<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let m = manager(&admin)?;
    if let Some(k) = q
        .keys()
        .find(|k| !matches!(k.as_str(), "limit" | "page_token" | "status"))
    {
        return Err(ApiError::invalid(format!(
            "unknown query parameter {k:?}; use limit, page_token, status"
        ))
        .with_param(k.clone()));
    }
    let limit = match q.get("limit") {
        None => 20,
        Some(s) => match s.parse::<usize>() {
            Ok(n) if (1..=100).contains(&n) => n,
            _ => {
                return Err(ApiError::invalid("limit: must be an integer from 1 to 100")
                    .with_param("limit"))
            }
        },
    };
    let token = q.get("page_token").cloned();
    if let Some(t) = &token {
        if t.parse::<u64>().is_err() {
            return Err(ApiError::invalid(
                "page_token: not a token this API returned (use next_page_token)",
            )
            .with_param("page_token"));
        }
    }
    let status = match q.get("status") {
        None => None,
        Some(s) => Some(
            s.parse::<JobStatus>()
                .map_err(|e| ApiError::invalid(format!("status: {e}")).with_param("status"))?,
        ),
    };
    let (page, totals) = blocking(move || {
        let page = m.list(limit, token.as_deref(), status)?;
        Ok::<_, JobError>((page, m.totals()?))
    })
    .await?;
    Ok(Json(json!({
        "jobs": page.jobs,
        "next_page_token": page.next_page_token,
        "totals": totals,
    })))
}

/// `GET /admin/jobs/{id}`.
pub async fn show(
    State(admin): State<Arc<Admin>>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<Value>, ApiError> {
    let m = manager(&admin)?;
    let job = blocking(move || m.get(&id)).await?;
    Ok(Json(serde_json::to_value(job).unwrap_or(Value::Null)))
}

/// `POST /admin/jobs/{id}/cancel`: 200 when the job ended at once (it was queued), 202 when
/// a running job was asked to stop.
pub async fn cancel(
    State(admin): State<Arc<Admin>>,
    UrlPath(id): UrlPath<String>,
) -> Result<Response, ApiError> {
    let m = manager(&admin)?;
    let job = blocking(move || m.cancel(&id)).await?;
    let status = if job.status == JobStatus::Cancelled {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok((
        status,
        Json(json!({ "id": job.id, "status": job.status, "cancel_requested": true, "job": job })),
    )
        .into_response())
}

/// `GET /admin/jobs/{id}/events[?after=N]`: the events as JSON, or with
/// `Accept: text/event-stream` a live stream that replays them (after `Last-Event-ID` when
/// given), follows the job and ends after its final event.
pub async fn events(
    State(admin): State<Arc<Admin>>,
    UrlPath(id): UrlPath<String>,
    QueryParams(q): QueryParams<HashMap<String, String>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let m = manager(&admin)?;
    let after = super::events::resume_after(&q, &headers)?;
    // 404 before a stream starts.
    let first = {
        let (m, id) = (m.clone(), id.clone());
        blocking(move || m.events(&id, after)).await?
    };
    // News of any job wakes the stream; it reads this job's new events.
    let wake = super::events::Wake::Jobs(m.subscribe());
    Ok(super::events::respond(
        &admin,
        &headers,
        after,
        first,
        wake,
        move |last| {
            let (m, id) = (m.clone(), id.clone());
            async move {
                match tokio::task::spawn_blocking(move || m.events(&id, last)).await {
                    Ok(Ok(b)) => Some(b),
                    _ => None,
                }
            }
        },
    ))
}
