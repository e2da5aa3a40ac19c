//! `lockctl list [PREFIX] [--after KEY] [--limit N]`: held keys under
//! PREFIX and their holders, in key order (a linearizable read). With more
//! keys than the limit, the last line says where the next page starts.

use lockd_client::proto::{Holding, KeyHoldings, LockMode};
use lockd_client::Client;
use serde_json::{json, Value};

use crate::output::{print, Failure};

/// A holding's token, `None` when the node did not show it (0: another
/// principal's holding, shown only to its holder and admins).
pub fn token(h: &Holding) -> Option<u64> {
    (h.token != 0).then_some(h.token)
}

/// One holding as JSON (also what `get` prints).
pub fn holding_json(h: &Holding) -> Value {
    json!({
        "token": token(h),
        "lease_ms": h.lease_ms,
        "mode": h.mode.as_str(),
        "limit": h.limit,
        "holder": h.holder.as_ref().map(|x| json!({ "principal": x.principal, "owner": x.owner })),
        "request_id": h.request_id,
    })
}

/// One holding as a line of text.
pub fn holding_text(h: &Holding) -> String {
    let who = match &h.holder {
        Some(x) if x.principal.is_empty() => format!("owner {:?}", x.owner),
        Some(x) => format!("{}/{:?}", x.principal, x.owner),
        // A 0.1 module records no holder; nor did one before an upgrade.
        None => "holder not recorded".into(),
    };
    let kind = if h.limit == 1 && h.mode == LockMode::Exclusive {
        String::new()
    } else {
        format!(" {} limit {}", h.mode.as_str(), h.limit)
    };
    let token = token(h).map_or("(not shown)".to_string(), |t| t.to_string());
    format!("token {token} lease {} ms{kind}, {who}", h.lease_ms)
}

pub async fn run(
    client: &Client,
    j: bool,
    prefix: &str,
    after: Option<&str>,
    limit: u32,
) -> Result<(), Failure> {
    let page: Vec<KeyHoldings> = client.list(prefix, after, limit).await?;
    let next = (page.len() == limit as usize)
        .then(|| page.last().map(|k| k.key.clone()))
        .flatten();
    let mut text = Vec::new();
    for k in &page {
        for h in &k.holdings {
            text.push(format!("{}: {}", k.key, holding_text(h)));
        }
    }
    if let Some(n) = &next {
        text.push(format!("(more: --after {n:?})"));
    }
    if page.is_empty() {
        text.push(format!("no lock held under {prefix:?}"));
    }
    let locks: Vec<Value> = page
        .iter()
        .map(|k| json!({ "key": k.key, "holders": k.holdings.iter().map(holding_json).collect::<Vec<_>>() }))
        .collect();
    print(j, json!({ "locks": locks, "next": next }), text.join("\n"));
    Ok(())
}
