//! HTTP rendering of [`ApiError`]: one JSON shape, `{"error": {"code", "message"}}`, with the
//! error's HTTP status, and extractors (JSON body, path, query string) that map every rejection
//! onto it.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::query::ApiError;

#[derive(Serialize)]
struct Body<'a> {
    error: Inner<'a>,
}

#[derive(Serialize)]
struct Inner<'a> {
    code: &'a str,
    message: &'a str,
    /// OpenAI clients read `type`; same value as `code`.
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    param: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<&'a serde_json::Value>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Body {
            error: Inner {
                code: self.code,
                message: &self.message,
                kind: self.code,
                param: self.param.as_deref(),
                details: self.details.as_ref(),
            },
        };
        let mut resp = (self.status, axum::Json(body)).into_response();
        if matches!(
            self.status,
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
        ) {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        // Let the metrics layer see the reason without parsing the body.
        resp.extensions_mut().insert(FailureReason(self.code));
        resp
    }
}

/// The error code of a failed response, for metrics.
#[derive(Debug, Clone, Copy)]
pub struct FailureReason(pub &'static str);

/// A JSON request body whose every failure is an [`ApiError`]: 415 for another content type,
/// 413 over the size limit, 400 for bytes that are not JSON (or not UTF-8), 422 for JSON of
/// the wrong shape.
pub struct JsonBody<T>(pub T);

impl<S, T> FromRequest<S> for JsonBody<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let is_json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                let mime = v
                    .split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase();
                mime == "application/json"
                    || (mime.starts_with("application/") && mime.ends_with("+json"))
            })
            .unwrap_or(false);
        if !is_json {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "expected Content-Type: application/json",
            ));
        }
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|e| {
                if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::new(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "payload_too_large",
                        "request body is too large (the limit is limits.max_body_bytes in /info)",
                    )
                } else {
                    ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", e.body_text())
                }
            })?;
        if std::str::from_utf8(&bytes).is_err() {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_json",
                "request body is not valid UTF-8",
            ));
        }
        // serde reads a struct from a JSON array too (`["text"]` would pass as `{"query":
        // "text"}`); every request body is an object, so say so (syntax errors stay 400).
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            serde_json::from_slice::<serde::de::IgnoredAny>(&bytes)
                .map_err(|e| json_error(&e, ""))?;
            return Err(ApiError::invalid("request body must be a JSON object"));
        }
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            json_error(&inner, &path)
        })?;
        de.end().map_err(|e| json_error(&e, ""))?;
        Ok(JsonBody(value))
    }
}

/// A URL path parameter whose every failure is an [`ApiError`] (400 `invalid_path`: a segment
/// that is not UTF-8 once decoded), not axum's plain-text rejection.
pub struct UrlPath<T>(pub T);

impl<S, T> FromRequestParts<S> for UrlPath<T>
where
    S: Send + Sync,
    T: DeserializeOwned + Send,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(v)| UrlPath(v))
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_path", e.body_text()))
    }
}

/// A query string whose every failure is an [`ApiError`] (422 `invalid_request`, as a body of
/// the wrong shape: `?wait=maybe`), not axum's plain-text rejection.
pub struct QueryParams<T>(pub T);

impl<S, T> FromRequestParts<S> for QueryParams<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(v)| QueryParams(v))
            .map_err(|e| ApiError::invalid(e.body_text()))
    }
}

fn json_error(e: &serde_json::Error, path: &str) -> ApiError {
    use serde_json::error::Category;
    match e.classify() {
        Category::Syntax | Category::Eof | Category::Io => ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_json",
            format!("request body is not valid JSON: {e}"),
        ),
        Category::Data => {
            let message = if path.is_empty() || path == "." {
                e.to_string()
            } else {
                format!("{path}: {e}")
            };
            let err = ApiError::invalid(message);
            // serde names an unknown or missing field in the message, not in the path.
            let text = e.to_string();
            let named = ["unknown field `", "missing field `"]
                .iter()
                .find_map(|p| text.strip_prefix(p))
                .and_then(|rest| rest.split('`').next());
            let path = if path == "." { "" } else { path };
            match named {
                // The path already ends with an unknown field; a missing one is below it.
                Some(f) if path == f || path.ends_with(&format!(".{f}")) => err.with_param(path),
                Some(f) if path.is_empty() => err.with_param(f),
                Some(f) => err.with_param(format!("{path}.{f}")),
                None if path.is_empty() => err,
                None => err.with_param(path),
            }
        }
    }
}
