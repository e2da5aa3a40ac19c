//! The admin side of lockd over its HTTP/JSON API: membership changes,
//! module upgrades and shadow mode, the trusted module keys (sent to the
//! leader), and the audit points each node serves.
//!
//! * [`Http`]: plain requests to one node, such as [`Http::get_json`] with a
//!   timeout (also what a node uses to read its peers' audit points).
//! * [`Admin`]: a cluster seen through a list of endpoints; finds the leader
//!   with the native [`Client`] and posts admin requests to it; its module
//!   requests (upgrade, rollback, shadow, module keys) are in `modules`.
//!
//! Admin answers come back as the leader's JSON, unchanged, so that a
//! command line can print exactly what the node said.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use serde_json::{json, Value};

use crate::proto::{AuditReport, Capacity, CapacityStatus, Member, Status};
use crate::{Client, ClientError};

mod health;
mod modules;
pub use health::Probe;
pub use lockd_net::http::{connector, AdminError, Http, GET_TIMEOUT, WRITE_TIMEOUT};
pub use lockd_proto::SNAPSHOT_INDEX_HEADER;
pub use modules::UpgradeHow;

/// A cluster, reached through any of its endpoints.
#[derive(Clone)]
pub struct Admin {
    client: Client,
    endpoints: Vec<String>,
    http: Http,
}

impl Admin {
    /// `client` asks the nodes for their status (native protocol);
    /// `endpoints` are the nodes to ask, in order.
    pub fn new(client: Client, endpoints: Vec<String>) -> Admin {
        Admin {
            http: Http::secured(GET_TIMEOUT, client.credentials().clone()),
            client,
            endpoints,
        }
    }

    /// The status of every endpoint, in order, or why it did not answer.
    pub async fn statuses(&self) -> Vec<(String, Result<Status, ClientError>)> {
        // All at once: one endpoint that hangs costs its timeout once.
        let asks = self
            .endpoints
            .iter()
            .map(|e| async move { (e.clone(), self.client.status_of(e).await) });
        futures::future::join_all(asks).await
    }

    /// The membership as the first endpoint that answers sees it.
    pub async fn members(&self) -> Result<Vec<Member>, AdminError> {
        self.statuses()
            .await
            .into_iter()
            .find_map(|(_, s)| s.ok())
            .map(|s| s.members)
            .ok_or(AdminError::NoAnswer)
    }

    /// The address of the leader of the newest term any endpoint knows
    /// ([`newest_leader`]): every endpoint is asked, so a deposed leader
    /// that some endpoint still names (or that still names itself) is not
    /// believed while another endpoint has seen a newer term.
    pub async fn leader_addr(&self) -> Result<String, AdminError> {
        let statuses: Vec<Status> = self
            .statuses()
            .await
            .into_iter()
            .filter_map(|(_, s)| s.ok())
            .collect();
        if statuses.is_empty() {
            return Err(AdminError::NoAnswer);
        }
        newest_leader(
            statuses
                .iter()
                .map(|s| (s.term, s.leader, s.members.as_slice())),
        )
        .ok_or(AdminError::NoLeader)
    }

    /// The leader's own status (what it has applied: the active module,
    /// the index it became active at, the cluster id). A node that no
    /// longer names itself leader when asked is not taken for one.
    pub async fn leader_status(&self) -> Result<Status, AdminError> {
        let addr = self.leader_addr().await?;
        let status = self
            .client
            .status_of(&addr)
            .await
            .map_err(|_| AdminError::NoAnswer)?;
        if status.leader != Some(status.id) {
            return Err(AdminError::NoLeader);
        }
        Ok(status)
    }

    /// Add node `id` at `addr` as a learner.
    pub async fn add_member(&self, id: u64, addr: &str) -> Result<Value, AdminError> {
        self.post_json("/v1/members/add", &json!({ "id": id, "addr": addr }))
            .await
    }

    /// Make learner `id` a voter.
    pub async fn promote_member(&self, id: u64) -> Result<Value, AdminError> {
        self.post_json("/v1/members/promote", &json!({ "id": id }))
            .await
    }

    pub async fn remove_member(&self, id: u64) -> Result<Value, AdminError> {
        self.post_json("/v1/members/remove", &json!({ "id": id }))
            .await
    }

    /// The audit points of the node at `addr` (asked directly: audit
    /// requests are never forwarded).
    pub async fn audit_report(&self, addr: &str) -> Result<AuditReport, AdminError> {
        self.http.get_json(addr, "/v1/audit").await
    }

    /// The lock module's policy data (`{"rules":[…]}`), from the leader.
    pub async fn policy(&self) -> Result<Value, AdminError> {
        let addr = self.leader_addr().await?;
        self.http.get_json(&addr, "/v1/admin/policy").await
    }

    /// Replace the policy data with `policy` (`{"rules":[…]}`).
    pub async fn set_policy(&self, policy: &Value) -> Result<Value, AdminError> {
        let body = Bytes::from(policy.to_string());
        self.send(Method::PUT, "/v1/admin/policy", "application/json", body)
            .await
    }

    /// The cluster's capacity bounds and their use, from the leader.
    pub async fn capacity(&self) -> Result<CapacityStatus, AdminError> {
        let addr = self.leader_addr().await?;
        self.http.get_json(&addr, "/v1/admin/capacity").await
    }

    /// Set the capacity bounds (one log entry); the bounds then in force.
    pub async fn set_capacity(&self, bounds: Capacity) -> Result<CapacityStatus, AdminError> {
        let body = Bytes::from(serde_json::to_string(&bounds).unwrap_or_default());
        let v = self
            .send(Method::PUT, "/v1/admin/capacity", "application/json", body)
            .await?;
        Ok(serde_json::from_value(v)?)
    }

    async fn post_json(&self, path: &str, body: &Value) -> Result<Value, AdminError> {
        self.post(path, "application/json", Bytes::from(body.to_string()))
            .await
    }

    async fn post_wasm(&self, path: &str, body: Bytes) -> Result<Value, AdminError> {
        self.post(path, "application/wasm", body).await
    }

    /// A consistent snapshot of the cluster from its leader (module, state,
    /// token counter, settings): the bytes of `GET /v1/admin/snapshot`, and
    /// the log index they are the state at. No timeout: a big table takes
    /// a while to encode.
    pub async fn snapshot(&self) -> Result<(u64, Bytes), AdminError> {
        let addr = self.leader_addr().await?;
        let path = "/v1/admin/snapshot";
        let request = Request::builder()
            .method(Method::GET)
            .uri(self.http.url(&addr, path))
            .body(Full::new(Bytes::new()))?;
        let response = self.http.request(request).await.map_err(|e| match e {
            AdminError::Send(source) => AdminError::Post {
                path: path.to_string(),
                addr: addr.clone(),
                source,
            },
            other => other,
        })?;
        let status = response.status();
        let index = response
            .headers()
            .get(SNAPSHOT_INDEX_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let bytes = response.into_body().collect().await?.to_bytes();
        if !status.is_success() {
            return Err(refusal(status, &bytes));
        }
        let index = index.ok_or_else(|| AdminError::Refused {
            status,
            message: format!("the answer has no {SNAPSHOT_INDEX_HEADER} header"),
        })?;
        Ok((index, bytes))
    }

    /// POST to the leader; a refusal carries the leader's `error` message.
    /// No timeout: an upgrade compiles and commits before it answers.
    async fn post(&self, path: &str, content_type: &str, body: Bytes) -> Result<Value, AdminError> {
        self.send(Method::POST, path, content_type, body).await
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: Bytes,
    ) -> Result<Value, AdminError> {
        let addr = self.leader_addr().await?;
        let request = Request::builder()
            .method(method)
            .uri(self.http.url(&addr, path))
            .header("content-type", content_type)
            .body(Full::new(body))?;
        let sent = self.http.send_within(request, WRITE_TIMEOUT).await;
        let (status, bytes) = sent.map_err(|e| match e {
            AdminError::Send(source) => AdminError::Post {
                path: path.to_string(),
                addr: addr.clone(),
                source,
            },
            AdminError::Timeout => AdminError::WriteTimeout {
                path: path.to_string(),
                addr: addr.clone(),
                ms: WRITE_TIMEOUT.as_millis() as u64,
            },
            other => other,
        })?;
        if !status.is_success() {
            return Err(refusal(status, &bytes));
        }
        Ok(serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }
}

/// A refusal, with the node's `error` message. An answer that is not JSON
/// (a proxy's error page, say) still has a status worth reporting.
fn refusal(status: StatusCode, body: &[u8]) -> AdminError {
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    AdminError::Refused {
        status,
        message: value["error"]
            .as_str()
            .unwrap_or("request failed")
            .to_string(),
    }
}

/// `route` with `query` parameters joined by `&`, if any.
fn with_query(route: &str, query: &[String]) -> String {
    if query.is_empty() {
        route.to_string()
    } else {
        format!("{route}?{}", query.join("&"))
    }
}

/// The leader among nodes' views `(term, leader, members)`: the one named
/// at the highest term any view has, by a view whose membership has its
/// address. A leader named only at a lower term is deposed, or is about to
/// be, and its membership may be stale: a voter removed since would still
/// be listed. `None` when the newest term has no leader yet (an election
/// under way) or none that a view can address.
///
/// Two nodes may lead in one term: openraft 0.9 identifies a leader by
/// (term, node id), and a candidate of a higher id may win a term another
/// won a moment before (simulation seed 2 shows it at its first election).
/// The higher id is then the newer leader, as openraft orders them.
pub fn newest_leader<'a>(
    views: impl IntoIterator<Item = (u64, Option<u64>, &'a [Member])>,
) -> Option<String> {
    let mut newest: Option<(u64, Option<(u64, String)>)> = None;
    for (term, leader, members) in views {
        let named = leader.and_then(|l| {
            let m = members.iter().find(|m| m.id == l)?;
            Some((l, m.addr.clone()))
        });
        match &mut newest {
            Some((t, _)) if term < *t => {}
            Some((t, known)) if term == *t => {
                if named.as_ref().map(|n| n.0) > known.as_ref().map(|k| k.0) {
                    *known = named;
                }
            }
            _ => newest = Some((term, named)),
        }
    }
    newest.and_then(|(_, named)| named.map(|(_, addr)| addr))
}

#[cfg(test)]
mod tests;
