//! `lockctl watch [PREFIX] [--from INDEX] [--count N]`: every grant,
//! release and expiry under PREFIX as it is applied, a line each (with
//! `--json`, one JSON object per line), until Ctrl-C or N changes. A
//! broken connection or a node that shuts down is resumed on the next
//! endpoint from where it stopped; a watch the cluster cut (`compacted`,
//! `watch_behind`) exits 1 with the index to start again from.

use futures::StreamExt;
use lockd_client::proto::{ChangeKind, WatchChange};
use lockd_client::{Client, WatchEvent};
use serde_json::{json, Value};

use crate::output::Failure;

fn change_json(index: u64, c: &WatchChange) -> Value {
    match &c.kind {
        ChangeKind::Granted {
            token,
            lease_ms,
            mode,
            limit,
            holder,
        } => json!({
            "index": index, "type": "granted", "key": c.key,
            "token": (*token != 0).then_some(*token), "lease_ms": lease_ms,
            "mode": mode.as_str(), "limit": limit,
            "principal": holder.principal, "owner": holder.owner,
        }),
        ChangeKind::Released { token } => {
            json!({ "index": index, "type": "released", "key": c.key, "token": token })
        }
        ChangeKind::Expired { token } => {
            json!({ "index": index, "type": "expired", "key": c.key, "token": token })
        }
        ChangeKind::Value { token, value } => {
            json!({ "index": index, "type": "value", "key": c.key, "token": token, "value": value })
        }
    }
}

fn change_text(index: u64, c: &WatchChange) -> String {
    match &c.kind {
        ChangeKind::Granted {
            token,
            lease_ms,
            mode,
            limit,
            holder,
        } => {
            let token = if *token == 0 {
                "(not shown)".to_string()
            } else {
                token.to_string()
            };
            let who = match (holder.principal.as_str(), holder.owner.as_str()) {
                ("", "") => String::new(),
                ("", o) => format!(", owner {o:?}"),
                (p, o) => format!(", {p}/{o:?}"),
            };
            format!(
                "{index} granted {} token {token} lease {lease_ms} ms {} limit {limit}{who}",
                c.key,
                mode.as_str()
            )
        }
        ChangeKind::Released { token } => format!("{index} released {} token {token}", c.key),
        ChangeKind::Expired { token } => format!("{index} expired {} token {token}", c.key),
        ChangeKind::Value { token, value } => {
            format!("{index} value {} token {token} {value:?}", c.key)
        }
    }
}

pub async fn run(
    client: &Client,
    j: bool,
    prefix: &str,
    from: Option<u64>,
    count: Option<u64>,
) -> Result<(), Failure> {
    let mut watch = client.watch(prefix, from);
    let mut seen = 0u64;
    if count == Some(0) {
        return Ok(());
    }
    loop {
        let event = tokio::select! {
            e = watch.next() => e,
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        let batch = match event {
            None => return Ok(()),
            Some(Err(e)) => return Err(e.into()),
            Some(Ok(WatchEvent::Progress(_))) => continue,
            Some(Ok(WatchEvent::Changes(b))) => b,
        };
        for c in &batch.changes {
            if j {
                println!("{}", change_json(batch.index, c));
            } else {
                println!("{}", change_text(batch.index, c));
            }
            seen += 1;
            if count.is_some_and(|n| seen >= n) {
                return Ok(());
            }
        }
    }
}
