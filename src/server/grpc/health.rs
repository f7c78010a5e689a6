//! `grpc.health.v1.Health`, answered from the service's own readiness.

use super::*;

/// The standard `grpc.health.v1.Health` service, answered from the service state itself so it
/// always agrees with `GET /ready`: NOT_SERVING while loading, SERVING once ready, NOT_SERVING
/// again from the moment shutdown begins. Known services: `""` (the whole server) and
/// `capot.v1.Retrieval`.
#[derive(Clone)]
pub struct HealthService {
    state: Arc<AppState>,
    stop: watch::Receiver<bool>,
}

impl HealthService {
    /// Health of the service over `state`; `Watch` streams end when `stop` turns true.
    pub fn new(state: Arc<AppState>, stop: watch::Receiver<bool>) -> Self {
        HealthService { state, stop }
    }

    fn status(state: &AppState, service: &str) -> Option<HealthStatus> {
        if !service.is_empty() && service != SERVICE_NAME {
            return None;
        }
        Some(if state.is_ready() {
            HealthStatus::Serving
        } else {
            HealthStatus::NotServing
        })
    }
}

type WatchStream =
    Pin<Box<dyn tokio_stream::Stream<Item = Result<HealthCheckResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Health for HealthService {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        let service = &request.get_ref().service;
        match Self::status(&self.state, service) {
            Some(s) => Ok(Response::new(HealthCheckResponse { status: s as i32 })),
            None => Err(Status::not_found(format!("unknown service {service:?}"))),
        }
    }

    type WatchStream = WatchStream;

    /// Sends the status at once and again on every change (polled); an unknown service gets
    /// SERVICE_UNKNOWN, as the health protocol asks. The stream ends, NOT_SERVING, at shutdown.
    async fn watch(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let service = request.into_inner().service;
        let (tx, rx) = mpsc::channel(1);
        let state = self.state.clone();
        let mut stop = self.stop.clone();
        tokio::spawn(async move {
            let mut last = None;
            loop {
                let stopping = *stop.borrow();
                let status = match Self::status(&state, &service) {
                    Some(_) if stopping => HealthStatus::NotServing,
                    Some(s) => s,
                    None => HealthStatus::ServiceUnknown,
                };
                if last != Some(status) {
                    if tx
                        .send(Ok(HealthCheckResponse {
                            status: status as i32,
                        }))
                        .await
                        .is_err()
                    {
                        return;
                    }
                    last = Some(status);
                }
                if stopping {
                    return;
                }
                tokio::select! {
                    _ = tokio::time::sleep(HEALTH_POLL) => {}
                    _ = stop.changed() => {}
                    _ = tx.closed() => return,
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}
