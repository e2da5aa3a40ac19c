//! `lockctl elect NAME --observe [--count N]`: the leader of election
//! NAME now and at every change, a line each (`--json`: an object each),
//! until Ctrl-C or N changes; and `lockctl proclaim KEY VALUE --token T`:
//! the leader publishes a new value. Campaigning (`lockctl elect NAME
//! VALUE -- CMD`) is in [`crate::lock`].

use lockd_client::{Client, Leader};
use serde_json::json;

use crate::output::{print, Failure};

fn show(j: bool, leader: &Option<Leader>) {
    match leader {
        Some(l) => print(
            j,
            json!({ "leader": true, "epoch": (l.epoch != 0).then_some(l.epoch), "value": l.value,
                    "owner": l.holder.as_ref().map(|h| h.owner.clone()) }),
            format!("leader {:?} epoch {}", l.value, l.epoch),
        ),
        None => print(j, json!({ "leader": false }), "no leader".to_string()),
    }
}

pub async fn observe(
    client: &Client,
    j: bool,
    name: &str,
    count: Option<u64>,
) -> Result<(), Failure> {
    let mut o = client.observe(name).await?;
    let mut seen = 0u64;
    loop {
        if count.is_some_and(|n| seen >= n) {
            return Ok(());
        }
        let next = tokio::select! {
            n = o.next() => n,
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        match next {
            None => return Ok(()),
            Some(Err(e)) => return Err(e.into()),
            Some(Ok(leader)) => show(j, &leader),
        }
        seen += 1;
    }
}

pub async fn proclaim(
    client: &Client,
    j: bool,
    key: &str,
    value: &str,
    token: u64,
) -> Result<(), Failure> {
    client.proclaim(key, token, value).await?;
    print(
        j,
        json!({ "key": key, "token": token, "value": value }),
        format!("{key} now publishes {value:?}"),
    );
    Ok(())
}
