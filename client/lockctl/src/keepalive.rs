//! `lockctl keepalive KEY --token T`: renew the lease of token T (status 2
//! if T does not hold the lock).

use lockd_client::Client;
use serde_json::json;

use crate::output::{print, Failure};

pub async fn run(client: &Client, j: bool, key: &str, token: u64) -> Result<(), Failure> {
    let lease = client.keepalive(key, token).await?;
    print(
        j,
        json!({ "key": key, "lease_ms": lease.as_millis() as u64 }),
        format!("{key} renewed for {} ms", lease.as_millis()),
    );
    Ok(())
}
