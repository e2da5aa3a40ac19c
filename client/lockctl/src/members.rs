//! `lockctl members [list|add ID ADDR|promote ID|remove ID]`: show the
//! membership, or change it through the leader. Prints the members (or
//! with `--json`, the leader's answer as sent).

use lockd_client::admin::Admin;

use crate::cli::MembersOp;
use crate::output::Failure;

pub async fn run(admin: &Admin, j: bool, op: Option<MembersOp>) -> Result<(), Failure> {
    let value = match op {
        None | Some(MembersOp::List) => {
            serde_json::to_value(admin.members().await?).map_err(anyhow::Error::from)?
        }
        Some(MembersOp::Add { id, addr }) => admin.add_member(id, &addr).await?,
        Some(MembersOp::Promote { id }) => admin.promote_member(id).await?,
        Some(MembersOp::Remove { id }) => admin.remove_member(id).await?,
    };
    if j {
        println!("{value}");
    } else {
        for m in value.as_array().into_iter().flatten() {
            println!(
                "{:>3} {:<22} {}",
                m["id"],
                m["addr"].as_str().unwrap_or(""),
                if m["voter"] == true {
                    "voter"
                } else {
                    "learner"
                }
            );
        }
    }
    Ok(())
}
