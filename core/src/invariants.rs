//! What every migration to a new lock module must preserve, holding by
//! holding: each holding keeps its key, token, mode, limit and lease, and
//! (where both worlds record them) its holder and request id, and its
//! session, count and value. The counters' checks (no holding dropped, no
//! counter moved back) are in [`crate::upgrade::migrate`]; these catch what
//! counts cannot, such as a holding given a new token.
//!
//! Both sides are read through `list-keys`, page by page, in key order,
//! until a page comes back empty (a module may answer fewer than asked); a
//! listing that does not move forward, or lists more holdings than the
//! module's counters say it has, is refused rather than followed, so a
//! module cannot keep the check busy. The result is part of the replicated
//! outcome: it is built from the two modules' answers only.

use crate::command::{HolderInfo, KeyHolders};
use crate::engine::{GuestInstance, World};

/// Holdings read per `list-keys` call.
const PAGE: u32 = 1024;

/// Every holding of `g`, which counts `holders` of them, in key order; why
/// not, as text.
pub fn all_holdings(g: &mut GuestInstance, holders: u64) -> Result<Vec<KeyHolders>, String> {
    let mut out: Vec<KeyHolders> = Vec::new();
    let mut listed: u64 = 0;
    loop {
        let after = out.last().map(|k| k.key.clone());
        let page = g
            .list_keys("", after.as_deref(), PAGE)
            .map_err(|e| e.to_string())?;
        if page.is_empty() {
            return Ok(out);
        }
        for k in page {
            listed = listed.saturating_add(k.holders.len() as u64);
            if listed > holders {
                return Err(format!(
                    "list-keys listed more than the {holders} holdings its counters report"
                ));
            }
            if after.as_ref().is_some_and(|a| k.key <= *a)
                || out.last().is_some_and(|l| k.key <= l.key)
            {
                return Err(format!("list-keys went back to key {:?}", k.key));
            }
            out.push(k);
        }
    }
}

/// The first difference between the holdings before (of a module of world
/// `from`) and after (of world `to`): `(key, token, what)`.
pub fn first_change(
    before: &[KeyHolders],
    from: World,
    after: &[KeyHolders],
    to: World,
) -> Option<(String, u64, String)> {
    let flat = |ks: &[KeyHolders]| -> Vec<(String, HolderInfo)> {
        ks.iter()
            .flat_map(|k| k.holders.iter().map(|h| (k.key.clone(), h.clone())))
            .collect()
    };
    let (b, a) = (flat(before), flat(after));
    let holders = from.min(to) >= World::V02;
    let sessions = from.min(to) >= World::V03;
    for (i, (key, old)) in b.iter().enumerate() {
        let Some((k2, new)) = a.get(i) else {
            return Some((key.clone(), old.token, "is gone".into()));
        };
        if k2 != key || new.token != old.token {
            return Some((
                key.clone(),
                old.token,
                format!("became {k2:?} token {}", new.token),
            ));
        }
        let what = [
            (new.mode != old.mode, "its mode"),
            (new.limit != old.limit, "its limit"),
            (new.lease_ms != old.lease_ms, "its lease"),
            (holders && new.holder != old.holder, "its holder"),
            (
                holders && new.request_id != old.request_id,
                "its request id",
            ),
            (sessions && new.session != old.session, "its session"),
            (sessions && new.count != old.count, "its count"),
            (sessions && new.value != old.value, "its value"),
        ]
        .into_iter()
        .find(|(changed, _)| *changed)
        .map(|(_, what)| format!("changed {what}"));
        if let Some(what) = what {
            return Some((key.clone(), old.token, what));
        }
    }
    a.get(b.len())
        .map(|(key, new)| (key.clone(), new.token, "appeared".into()))
}
