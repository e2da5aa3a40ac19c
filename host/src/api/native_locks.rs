//! The native protocol's lock requests of world 0.2 (acquire with
//! options, holders, listing) and their conversions from the replicated
//! types. A holding's token is shown only to its holder and to admins
//! (0 stands for "not shown": tokens start at 1).

use std::time::Duration;

use lockd_proto::{
    Acquire3, AcquireRequest, ClientRequest, ClientResponse, HolderId, Holding, KeyHoldings,
    LeaderView, LockMode,
};

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

pub(crate) fn lock_mode(m: Mode) -> LockMode {
    match m {
        Mode::Exclusive => LockMode::Exclusive,
        Mode::Shared => LockMode::Shared,
    }
}

/// Whether `access` may see the token of `h`.
pub(crate) fn sees_token(access: &Access, h: &HolderInfo) -> bool {
    access.owns(h.holder.as_ref().map(|x| x.principal.as_str()))
}

/// The caller's principal as the lock table checks it: `None` for one who
/// may act on any holding.
pub(crate) fn bound_to(access: &Access) -> Option<&str> {
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
    let a = acquire3(
        node,
        Acquire3 {
            base: r,
            session: 0,
            reentrant: false,
            value: String::new(),
        },
        0,
        access,
    )
    .await?;
    Ok(match a {
        ClientResponse::Granted {
            token, lease_ms, ..
        } => ClientResponse::Acquired { token, lease_ms },
        other => other,
    })
}

/// An acquire with world 0.3's options, and a priority among the waiters.
pub(crate) async fn acquire3(
    node: &Services,
    r: Acquire3,
    priority: u32,
    access: &Access,
) -> Result<ClientResponse, ServiceError> {
    let Acquire3 {
        base: r,
        session,
        reentrant,
        value,
    } = r;
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
        session,
        reentrant,
        value,
        priority,
    };
    let a = node
        .locks()
        .acquire_with(&k, spec, Duration::from_millis(r.wait_ms))
        .await?;
    Ok(ClientResponse::Granted {
        token: a.token,
        lease_ms: a.lease_ms,
        count: a.count,
    })
}

/// Sessions, values and counted releases (world 0.3's requests).
pub(crate) async fn session_request(
    node: &Services,
    req: ClientRequest,
    access: &Access,
) -> Result<ClientResponse, ServiceError> {
    let by = bound_to(access);
    let locks = node.locks();
    match req {
        ClientRequest::AcquireIn(a) => acquire3(node, a, 0, access).await,
        ClientRequest::AcquireRanked(a) => acquire3(node, a.base, a.priority, access).await,
        ClientRequest::OpenSession {
            ttl_ms,
            owner,
            request_id,
        } => {
            let open = crate::service::SessionOpen {
                ttl_ms,
                principal: access.principal.clone(),
                owner,
                request_id,
            };
            let (id, ttl_ms) = locks.open_session(open).await?;
            Ok(ClientResponse::SessionOpened { id, ttl_ms })
        }
        ClientRequest::KeepSession { id } => {
            let lease_ms = locks.keep_session(id, by).await?;
            Ok(ClientResponse::KeptAlive { lease_ms })
        }
        ClientRequest::CloseSession { id } => Ok(ClientResponse::SessionClosed(
            locks.close_session(id, by).await?,
        )),
        ClientRequest::Proclaim {
            key: k,
            token,
            value,
        } => {
            locks.proclaim(&key(k)?, token, value, by).await?;
            Ok(ClientResponse::Done)
        }
        ClientRequest::Leader { key: k } => {
            let (index, leader) = locks.leader(&key(k)?).await?;
            Ok(ClientResponse::Leader {
                index,
                leader: leader.map(|h| LeaderView {
                    token: if sees_token(access, &h) { h.token } else { 0 },
                    holder: h.holder.map(|x| HolderId {
                        principal: x.principal,
                        owner: x.owner,
                    }),
                    value: h.value,
                }),
            })
        }
        ClientRequest::ReleaseCount { key: k, token } => {
            let left = locks.release(&key(k)?, token, by).await?;
            Ok(ClientResponse::ReleasedCount(left))
        }
        _ => Err(ServiceError::StateMachine("not a session request".into())),
    }
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
