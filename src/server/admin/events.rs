//! Numbered events as JSON or as a live server-sent event stream: what alignment jobs
//! (`/admin/jobs/{id}/events`) and compactions (`/admin/index/compaction/events`) report.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use axum::http::{header, HeaderMap};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::json;
use tokio_stream::wrappers::ReceiverStream;

use super::Admin;
use crate::query::compaction::CompactionEvent;
use crate::query::ApiError;

/// An event with a number (the stream's event id) and a kind (the stream's event name).
pub(super) trait Numbered: Serialize + Send + 'static {
    fn seq(&self) -> u64;
    fn kind(&self) -> &str;
    /// Whether nothing follows it: the stream ends after it.
    fn is_final(&self) -> bool;
}

impl Numbered for crate::jobs::JobEvent {
    fn seq(&self) -> u64 {
        self.seq
    }
    fn kind(&self) -> &str {
        &self.kind
    }
    fn is_final(&self) -> bool {
        crate::jobs::JobEvent::is_final(self)
    }
}

impl Numbered for CompactionEvent {
    fn seq(&self) -> u64 {
        self.seq
    }
    fn kind(&self) -> &str {
        self.kind
    }
    fn is_final(&self) -> bool {
        CompactionEvent::is_final(self)
    }
}

/// What tells a stream that new events may be there.
pub(super) enum Wake {
    /// The job manager's news of any job.
    Jobs(tokio::sync::broadcast::Receiver<String>),
    /// The number of the newest compaction event.
    Compaction(tokio::sync::watch::Receiver<u64>),
}

impl Wake {
    /// Waits for news; false once none can come.
    async fn changed(&mut self) -> bool {
        match self {
            Wake::Jobs(rx) => !matches!(
                rx.recv().await,
                Err(tokio::sync::broadcast::error::RecvError::Closed)
            ),
            Wake::Compaction(rx) => rx.changed().await.is_ok(),
        }
    }
}

/// Whether the client asked for server-sent events (`Accept: text/event-stream`).
pub(super) fn wants_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("text/event-stream"))
}

/// The event number a listing or stream starts after: `Last-Event-ID` (a reconnecting
/// stream), else `?after=N`, else 0. Any other query parameter is refused.
pub(super) fn resume_after(
    q: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Result<u64, ApiError> {
    if let Some(k) = q.keys().find(|k| k.as_str() != "after") {
        return Err(
            ApiError::invalid(format!("unknown query parameter {k:?}; use after"))
                .with_param(k.clone()),
        );
    }
    let after = match q.get("after") {
        None => None,
        Some(s) => Some(s.parse::<u64>().map_err(|_| {
            ApiError::invalid("after: must be an event number (integer ≥ 0)").with_param("after")
        })?),
    };
    let last_event_id = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    Ok(last_event_id.or(after).unwrap_or(0))
}

/// `first` as `{"events": [...]}`, or with `Accept: text/event-stream` a live stream: `first`,
/// then what `more(last number sent)` gives — at once after events, else when `wake` says so
/// (or every 2 s) — until a final event, until `more` says nothing more will come (`None`), the
/// client leaves, or the service shuts down (the client reconnects with `Last-Event-ID` and
/// misses nothing; this does not hold the drain up).
pub(super) fn respond<E, F, Fut>(
    admin: &Admin,
    headers: &HeaderMap,
    after: u64,
    first: Vec<E>,
    mut wake: Wake,
    mut more: F,
) -> Response
where
    E: Numbered,
    F: FnMut(u64) -> Fut + Send + 'static,
    Fut: Future<Output = Option<Vec<E>>> + Send,
{
    if !wants_stream(headers) {
        return Json(json!({ "events": first })).into_response();
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Event, Infallible>>(64);
    let mut stopping = admin.stopping.clone();
    tokio::spawn(async move {
        let mut last = after;
        let mut batch = first;
        loop {
            let sent = !batch.is_empty();
            for ev in batch.drain(..) {
                last = ev.seq();
                let sse = Event::default()
                    .id(last.to_string())
                    .event(ev.kind())
                    .data(serde_json::to_string(&ev).unwrap_or_default());
                if tx.send(Ok(sse)).await.is_err() || ev.is_final() {
                    return;
                }
            }
            if !sent {
                tokio::select! {
                    open = wake.changed() => {
                        if !open {
                            return;
                        }
                    }
                    _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                    _ = tx.closed() => return,
                    _ = stopping.wait_for(|s| *s) => return,
                }
            }
            batch = match more(last).await {
                Some(b) => b,
                None => return,
            };
        }
    });
    Sse::new(ReceiverStream::new(rx))
        .keep_alive(KeepAlive::default())
        .into_response()
}
