//! The pipeline's error: a stable code, a message, the request field at fault and the HTTP status
//! that says what went wrong. Each transport renders it its own way (`server::error` as a JSON
//! body, `server::grpc` as a gRPC status with the code in trailing metadata); the status is the
//! `http` crate's vocabulary type, shared by both, not a transport.

use http::StatusCode;

/// A failed request, as either transport reports it.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    /// Stable, machine-readable reason (also the `reason` label of the failure metric).
    pub code: &'static str,
    pub message: String,
    /// The request field at fault, when one is (`steps`, `eval.dataset`).
    pub param: Option<String>,
    /// Structured detail, when one message is not enough (per-item reasons of a batch).
    pub details: Option<serde_json::Value>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            param: None,
            details: None,
        }
    }

    /// The same error, naming the request field at fault.
    pub fn with_param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }

    /// The same error with structured detail.
    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = Some(details);
        self
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", message)
    }

    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }

    pub fn overloaded(message: impl Into<String>) -> Self {
        Self::new(StatusCode::TOO_MANY_REQUESTS, "overloaded", message)
    }

    pub fn not_ready(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "not_ready", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}
