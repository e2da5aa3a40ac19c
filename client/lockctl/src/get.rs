//! `lockctl get KEY`: who holds KEY (a linearizable read): every holding,
//! with its token, lease, mode and holder.

use lockd_client::Client;
use serde_json::json;

use crate::list::{holding_json, holding_text};
use crate::output::{print, Failure};

pub async fn run(client: &Client, j: bool, key: &str) -> Result<(), Failure> {
    let holders = client.holders(key).await?;
    let Some(first) = holders.first() else {
        print(
            j,
            json!({ "key": key, "held": false, "holders": [] }),
            format!("{key}: free"),
        );
        return Ok(());
    };
    let text: Vec<String> = holders
        .iter()
        .map(|h| format!("{key}: held, {}", holding_text(h)))
        .collect();
    print(
        j,
        json!({
            "key": key,
            "held": true,
            "token": crate::list::token(first),
            "lease_ms": first.lease_ms,
            "holders": holders.iter().map(holding_json).collect::<Vec<_>>(),
        }),
        text.join("\n"),
    );
    Ok(())
}
