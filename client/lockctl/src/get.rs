//! `lockctl get KEY`: who holds KEY (a linearizable read).

use lockd_client::Client;
use serde_json::json;

use crate::output::{print, Failure};

pub async fn run(client: &Client, j: bool, key: &str) -> Result<(), Failure> {
    match client.get(key).await? {
        Some(v) => print(
            j,
            json!({ "key": key, "held": true, "token": v.token, "lease_ms": v.lease_ms }),
            format!("{key}: held, token {} lease {} ms", v.token, v.lease_ms),
        ),
        None => print(
            j,
            json!({ "key": key, "held": false }),
            format!("{key}: free"),
        ),
    }
    Ok(())
}
