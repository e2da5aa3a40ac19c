//! `lockctl release KEY --token T`: release a lock held with token T
//! (status 2 if T does not hold it).

use lockd_client::Client;
use serde_json::json;

use crate::output::{print, Failure};

pub async fn run(client: &Client, j: bool, key: &str, token: u64) -> Result<(), Failure> {
    client.release(key, token).await?;
    print(
        j,
        json!({ "key": key, "released": true }),
        format!("released {key}"),
    );
    Ok(())
}
