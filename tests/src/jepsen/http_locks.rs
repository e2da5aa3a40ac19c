//! A worker's round over the HTTP/JSON lock routes, as curl or the
//! Python client makes it: `POST /v1/locks/{key}/acquire`, then
//! `POST /v1/locks/{key}/release`, each one request to one node (a
//! follower passes it to the leader), never retried. An answer is read by
//! its status and its `code` only (docs/api.md, "Error codes"): 200 is
//! the outcome, a code is what the code means ([`ret_of_code`]), anything
//! else (no answer, a timeout, a 5xx) leaves the outcome unknown.

use std::time::Duration;

use lockd_client::admin::Http;
use lockd_client::Credentials;
use lockd_proto::ErrorCode;
use serde_json::{json, Value};

use super::history::{Call, History, Holding, LockMode, Ret};
use super::register::FencedRegister;
use super::rng::Rng;
use super::workload::{ret_of_code, work};

/// One worker's HTTP client: a kept-alive connection per node, as an HTTP
/// client library keeps it.
pub struct HttpLocks {
    http: Http,
    endpoints: Vec<String>,
}

impl HttpLocks {
    pub fn new(endpoints: Vec<String>, credentials: Credentials) -> HttpLocks {
        HttpLocks {
            http: Http::kept_alive(Duration::from_secs(3), credentials),
            endpoints,
        }
    }

    /// POST `body` to `/v1/locks/{key}/{action}` on node `node`: the
    /// answer's JSON on 200, else what the answer means.
    async fn post(&self, node: usize, key: &str, action: &str, body: Value) -> Result<Value, Ret> {
        let addr = &self.endpoints[node % self.endpoints.len()];
        let path = format!("/v1/locks/{key}/{action}");
        match self.http.post_json(addr, &path, &body).await {
            Ok((status, bytes)) if status.is_success() => {
                serde_json::from_slice(&bytes).map_err(|_| Ret::Unknown)
            }
            Ok((status, bytes)) if status.is_client_error() => {
                let code = serde_json::from_slice::<Value>(&bytes)
                    .ok()
                    .and_then(|v| serde_json::from_value::<ErrorCode>(v["code"].clone()).ok());
                Err(ret_of_code(code, || {
                    String::from_utf8_lossy(&bytes).into_owned()
                }))
            }
            _ => Err(Ret::Unknown),
        }
    }

    /// Take `key` for `lease_ms`, waiting up to `wait_ms`: its token.
    pub async fn acquire(
        &self,
        node: usize,
        key: &str,
        lease_ms: u64,
        wait_ms: u64,
    ) -> Result<u64, Ret> {
        let body = json!({ "lease_ms": lease_ms, "wait_ms": wait_ms });
        let v = self.post(node, key, "acquire", body).await?;
        v["token"].as_u64().ok_or(Ret::Unknown)
    }

    /// Give `key`'s holding `token` up.
    pub async fn release(&self, node: usize, key: &str, token: u64) -> Ret {
        match self
            .post(node, key, "release", json!({ "token": token }))
            .await
        {
            Ok(_) => Ret::Released,
            Err(r) => r,
        }
    }
}

/// Worker `id`'s round on mutex `key` over HTTP: acquire on a node drawn
/// from `rng`, the fenced register read and written under the lock
/// ([`work`] between), release on another
/// drawn node; each operation recorded, and the window held by the
/// server's promise.
pub async fn round(
    (id, http): (usize, &HttpLocks),
    history: &History,
    register: &FencedRegister,
    key: &str,
    (lease_ms, wait_ms): (u64, u64),
    rng: &mut Rng,
    pause_one_in: u64,
) {
    let node = rng.below(http.endpoints.len() as u64) as usize;
    let invoke = history.now();
    let got = http.acquire(node, key, lease_ms, wait_ms).await;
    if got != Err(Ret::Unknown) {
        history.note("op.http");
    }
    let ret = match got {
        Ok(token) => Ret::Granted(token),
        Err(ref r) => r.clone(),
    };
    history.completed(id, key, Call::acquire(lease_ms, wait_ms), invoke, ret);
    let Ok(token) = got else {
        tokio::time::sleep(Duration::from_millis(rng.below(50))).await;
        return;
    };
    let from = history.now();
    if let Some(v) = register.read(key, token) {
        work(rng, lease_ms, pause_one_in).await;
        register.write(key, id, token, v);
    }
    history.record_holding(Holding {
        client: id,
        key: key.to_string(),
        token,
        mode: LockMode::Exclusive,
        limit: 1,
        from,
        until: history.now().min(invoke + lease_ms as f64),
    });
    let node = rng.below(http.endpoints.len() as u64) as usize;
    let invoke = history.now();
    let ret = http.release(node, key, token).await;
    if ret != Ret::Unknown {
        history.note("op.http");
    }
    history.completed(id, key, Call::Release { token }, invoke, ret);
}
