//! Each endpoint's liveness (`GET /healthz`) or readiness (`GET /readyz`),
//! public routes a probe calls without credentials (docs/operations.md,
//! "Health").

use serde_json::Value;

use super::{Admin, AdminError};

/// What one endpoint answered a probe.
#[derive(Debug)]
pub enum Probe {
    /// 200, with the node's answer.
    Healthy(Value),
    /// Any other status, with the node's answer (for `/readyz`, the
    /// reasons it is not ready).
    Unhealthy { status: u16, body: Value },
    /// No answer (connection refused, timeout, not HTTP).
    Unreachable(AdminError),
}

impl Admin {
    /// Probe every endpoint, in order: `/readyz` when `ready`, else
    /// `/healthz`.
    pub async fn probe(&self, ready: bool) -> Vec<(String, Probe)> {
        let path = if ready { "/readyz" } else { "/healthz" };
        let mut out = Vec::with_capacity(self.endpoints.len());
        for e in &self.endpoints {
            let probe = match self.http.get_json::<Value>(e, path).await {
                Ok(v) => Probe::Healthy(v),
                Err(AdminError::Status { status, body }) => Probe::Unhealthy {
                    status: status.as_u16(),
                    body: serde_json::from_str(&body).unwrap_or(Value::String(body)),
                },
                Err(other) => Probe::Unreachable(other),
            };
            out.push((e.clone(), probe));
        }
        out
    }
}
