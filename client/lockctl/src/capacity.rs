//! `lockctl capacity` prints the cluster's capacity bounds and their use;
//! with `--max-held N` and/or `--max-key-bytes N` it sets new bounds
//! (through the log; the other bound keeps its value).

use lockd_client::admin::Admin;
use lockd_client::proto::{Capacity, CapacityStatus};

use crate::output::{print, Failure};

fn text(c: &CapacityStatus) -> String {
    format!(
        "holdings {} of {}\nkey bytes {} of {}",
        c.held, c.limits.max_held, c.key_bytes, c.limits.max_key_bytes
    )
}

pub async fn run(
    admin: &Admin,
    j: bool,
    max_held: Option<u64>,
    max_key_bytes: Option<u64>,
) -> Result<(), Failure> {
    let now = admin.capacity().await?;
    let status = if max_held.is_none() && max_key_bytes.is_none() {
        now
    } else {
        let bounds = Capacity {
            max_held: max_held.unwrap_or(now.limits.max_held),
            max_key_bytes: max_key_bytes.unwrap_or(now.limits.max_key_bytes),
        };
        admin.set_capacity(bounds).await?
    };
    print(
        j,
        serde_json::to_value(status).unwrap_or_default(),
        text(&status),
    );
    Ok(())
}
