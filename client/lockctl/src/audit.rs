//! `lockctl audit`: read the state hashes every member recorded and
//! compare them at the indices they share; name any node that differs
//! (then exit with status 1). Members that do not answer are listed, not
//! fatal.

use anyhow::anyhow;
use lockd_client::admin::Admin;
use lockd_client::audit::compare;
use serde_json::json;

use crate::output::{print, Failure};

pub async fn run(admin: &Admin, j: bool) -> Result<(), Failure> {
    let members = admin.members().await?;
    let mut reports = Vec::new();
    let mut unreachable = Vec::new();
    for m in &members {
        match admin.audit_report(&m.addr).await {
            Ok(r) => reports.push(r),
            Err(e) => unreachable.push((m.id, e.to_string())),
        }
    }
    let c = compare(&reports);
    let nodes: Vec<u64> = reports.iter().map(|r| r.id).collect();
    let value = json!({
        "nodes": nodes,
        "unreachable": unreachable.iter().map(|(id, e)| json!({"id": id, "error": e})).collect::<Vec<_>>(),
        "common_indices": c.common_indices,
        "last_common": c.last_common,
        "divergences": c.divergences,
        "divergent_nodes": c.divergent_nodes(),
    });
    let mut human = format!(
        "audit: nodes {nodes:?} answered; {} common indices (last {})",
        c.common_indices,
        c.last_common.map_or("-".into(), |l| l.to_string())
    );
    for (id, e) in &unreachable {
        human.push_str(&format!("\nnode {id} unreachable: {e}"));
    }
    if c.divergences.is_empty() {
        human.push_str("; no divergence");
    }
    for d in &c.divergences {
        human.push_str(&format!(
            "\nDIVERGENCE at index {}: node {} has state hash {}, {}",
            d.index,
            d.node,
            d.hash,
            match &d.majority {
                Some(m) => format!("the majority has {m}"),
                None => "and no hash has a majority".into(),
            }
        ));
    }
    print(j, value, human);
    if !c.divergences.is_empty() {
        return Err(Failure(
            anyhow!(
                "the determinism audit found divergent node(s) {:?}",
                c.divergent_nodes()
            ),
            1,
        ));
    }
    Ok(())
}
