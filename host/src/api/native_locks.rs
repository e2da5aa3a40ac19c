//! The native protocol's lock requests of world 0.2 (acquire with
//! options, holders, listing) and their conversions from the replicated
//! types. A holding's token is shown only to its holder and to admins
//! (0 stands for "not shown": tokens start at 1).

use std::time::Duration;

use lockd_proto::{AcquireRequest, ClientResponse, HolderId, Holding, KeyHoldings, LockMode};

use super::services::Services;
use crate::auth::Access;
use crate::service::table::Spec;
use crate::service::ServiceError;
use lockd_core::command::{HolderInfo, KeyHolders, Mode};

fn key(k: Vec<u8>) -> Result<String, ServiceError> {
    String::from_utf8(k).map_err(|_| ServiceError::KeyNotUtf8)
}

pub fn mode(m: LockMode) -> Mode {
    match m {
        LockMode::Exclusive => Mode::Exclusive,
        LockMode::Shared => Mode::Shared,
    }
}

pub fn lock_mode(m: Mode) -> LockMode {
    match m {
        Mode::Exclusive => LockMode::Exclusive,
        Mode::Shared => LockMode::Shared,
    }
}

/// Whether `access` may see the token of `h`.
pub fn sees_token(access: &Access, h: &HolderInfo) -> bool {
    access.owns(h.holder.as_ref().map(|x| x.principal.as_str()))
}

/// The caller's principal as the lock table checks it: `None` for one who
/// may act on any holding.
pub fn bound_to(access: &Access) -> Option<&str> {
    (!access.admin).then_some(access.principal.as_str())
}

pub fn holding(access: &Access, h: HolderInfo) -> Holding {
    Holding {
        token: if sees_token(access, &h) { h.token } else { 0 },
        lease_ms: h.lease_ms,
        mode: lock_mode(h.mode),
        limit: h.limit,
        holder: h.holder.map(|x| HolderId {
            principal: x.principal,
            owner: x.owner,
        }),
        request_id: h.request_id,
    }
}

fn key_holdings(access: &Access, k: KeyHolders) -> KeyHoldings {
    KeyHoldings {
        key: k.key,
        holdings: k.holders.into_iter().map(|h| holding(access, h)).collect(),
    }
}

pub async fn acquire(
    node: &Services,
    r: AcquireRequest,
    access: &Access,
) -> Result<ClientResponse, ServiceError> {
    let k = key(r.key)?;
    let spec = Spec {
        lease_ms: r.lease_ms,
        mode: mode(r.mode),
        // 0: not given (the service gives the mode's default).
        limit: r.limit,
        adopt: None,
        principal: access.principal.clone(),
        owner: r.owner,
        request_id: r.request_id,
    };
    let a = node
        .locks()
        .acquire_with(&k, spec, Duration::from_millis(r.wait_ms))
        .await?;
    Ok(ClientResponse::Acquired {
        token: a.token,
        lease_ms: a.lease_ms,
    })
}

pub async fn holders(
    node: &Services,
    k: Vec<u8>,
    access: &Access,
) -> Result<ClientResponse, ServiceError> {
    let k = key(k)?;
    let hs = node.locks().holders(&k).await?;
    Ok(ClientResponse::Holders(
        hs.into_iter().map(|h| holding(access, h)).collect(),
    ))
}

pub async fn list(
    node: &Services,
    prefix: Vec<u8>,
    after: Option<Vec<u8>>,
    limit: u32,
    access: &Access,
) -> Result<ClientResponse, ServiceError> {
    let prefix = key(prefix)?;
    let after = after.map(key).transpose()?;
    let page = node.locks().list(&prefix, after.as_deref(), limit).await?;
    Ok(ClientResponse::Listed(
        page.into_iter().map(|k| key_holdings(access, k)).collect(),
    ))
}
