//! The admin API's HTTP routes, behind the bearer token.

use super::registry_ops::{admin_view, LoadRequest};
use super::*;

/// The admin routes, each behind the bearer token.
pub(super) fn guarded(admin: Arc<Admin>) -> Router {
    Router::new()
        .route("/admin/encoders", get(list_encoders).post(post_encoder))
        .route(
            "/admin/encoders/{name}",
            axum::routing::delete(delete_encoder),
        )
        .route("/admin/aliases", get(list_aliases))
        .route(
            "/admin/aliases/{alias}",
            axum::routing::put(put_alias).delete(delete_alias),
        )
        .route("/admin/state", get(get_state))
        .route(
            "/admin/jobs",
            get(super::jobs::list).post(super::jobs::create),
        )
        .route("/admin/jobs/{id}", get(super::jobs::show))
        .merge(super::documents::routes())
        .route("/admin/jobs/{id}/events", get(super::jobs::events))
        .route(
            "/admin/jobs/{id}/cancel",
            axum::routing::post(super::jobs::cancel),
        )
        .fallback(|| async { ApiError::not_found("not_found", "no such admin route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "method not allowed on this route",
            )
        })
        .layer(axum::middleware::from_fn_with_state(
            admin.clone(),
            require_token,
        ))
        .with_state(admin)
}

/// `Authorization: Bearer <token>` on every admin call; 401 otherwise, before anything runs.
async fn require_token(State(admin): State<Arc<Admin>>, req: Request, next: Next) -> Response {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if !given.is_some_and(|g| constant_time_eq(g.as_bytes(), admin.token.as_bytes())) {
        let mut resp = ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or wrong admin token (Authorization: Bearer <token>)",
        )
        .into_response();
        resp.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return resp;
    }
    next.run(req).await
}

async fn list_encoders(State(admin): State<Arc<Admin>>) -> Json<Value> {
    let snap = admin.state.registry.snapshot();
    let mut list: Vec<Value> = snap
        .encoders
        .values()
        .map(|e| admin_view(e, &snap))
        .collect();
    for l in lock(&admin.loading).values() {
        let secs = l
            .since
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        list.push(json!({
            "name": l.name,
            "state": "loading",
            "path": l.path,
            "since": crate::clock::rfc3339_from_unix(secs),
        }));
    }
    Json(json!({ "encoders": list }))
}

async fn post_encoder(
    State(admin): State<Arc<Admin>>,
    JsonBody(req): JsonBody<LoadRequest>,
) -> Result<Response, ApiError> {
    let (created, view) = blocking(move || admin.load_and_register(req)).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(json!({ "encoder": view, "replaced": !created })),
    )
        .into_response())
}

async fn delete_encoder(
    State(admin): State<Arc<Admin>>,
    UrlPath(name): UrlPath<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(blocking(move || admin.unload(&name)).await?))
}

async fn list_aliases(State(admin): State<Arc<Admin>>) -> Json<Value> {
    let snap = admin.state.registry.snapshot();
    Json(json!({ "aliases": snap.aliases, "pipelines": snap.pipelines }))
}

/// `PUT /admin/aliases/{alias}` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AliasRequest {
    encoder: String,
    /// Query repair for requests through this alias: off, on, auto.
    #[serde(default)]
    repair: Option<RepairMode>,
    /// What a repaired query searches with: repaired, max.
    #[serde(default)]
    fusion: Option<RepairFusion>,
}

async fn put_alias(
    State(admin): State<Arc<Admin>>,
    UrlPath(alias): UrlPath<String>,
    JsonBody(req): JsonBody<AliasRequest>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(
        blocking(move || {
            let pipeline = QueryPipeline {
                repair: req.repair,
                fusion: req.fusion,
            };
            admin.switch_alias(&alias, &req.encoder, pipeline)
        })
        .await?,
    ))
}

async fn delete_alias(
    State(admin): State<Arc<Admin>>,
    UrlPath(alias): UrlPath<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(blocking(move || admin.remove_alias(&alias)).await?))
}

async fn get_state(State(admin): State<Arc<Admin>>) -> Json<Value> {
    let snap = admin.state.registry.snapshot();
    let sync = lock(&admin.sync);
    Json(json!({
        "path": admin.state_path,
        "state": StateFile::from_snapshot(&snap),
        "pinned": *lock(&admin.pinned),
        "last_error": sync.last_error,
    }))
}
