//! The watch on the native protocol: a stream of responses under the
//! request's id (docs/watch.md; the types are `lockd_proto::watch`'s).
//!
//! Each message is handed to the connection's writer and the next is made
//! only once it is written, so a caller that reads slowly holds back its
//! own stream (and is cut when the node's kept changes pass it), never
//! the node or the connection's other requests.

use lockd_core::changes::{Change, ChangeKind as Kind};
use lockd_core::command::Mode;
use lockd_proto::{
    ChangeBatch, ChangeKind, ClientResponse, ErrorCode, HolderId, LockMode, WatchChange, WatchCut,
    WatchRequest,
};
use tokio::sync::{mpsc, oneshot};

use super::reauth::{Due, Reauth};
use super::services::Services;
use crate::auth::Access;
use crate::watch::Next;
use lockd_net::wire::Envelope;

/// A response on its way to the connection's writer; `written` is told
/// once it is on the wire.
pub struct Outgoing {
    pub env: Envelope<ClientResponse>,
    /// An error's precise code, sent after the envelope (older clients
    /// read the envelope and ignore the rest of the frame).
    pub code: Option<ErrorCode>,
    pub written: Option<oneshot::Sender<()>>,
}

impl Outgoing {
    pub fn answer(id: u64, body: ClientResponse, code: Option<ErrorCode>) -> Outgoing {
        Outgoing {
            env: Envelope { id, body },
            code,
            written: None,
        }
    }

    /// The frame's bytes ([`lockd_proto::wire::encode_answer`]).
    pub fn encode(&self) -> Result<Vec<u8>, postcard::Error> {
        lockd_proto::wire::encode_answer(&self.env, self.code)
    }
}

pub(crate) type Outbox = mpsc::UnboundedSender<Outgoing>;

/// Send `body` and wait until it is written; false when the connection is
/// gone.
async fn send_written(out: &Outbox, id: u64, body: ClientResponse) -> bool {
    let (written, done) = oneshot::channel();
    let env = Envelope { id, body };
    out.send(Outgoing {
        env,
        code: None,
        written: Some(written),
    })
    .is_ok()
        && done.await.is_ok()
}

fn cut(code: &str, message: String, resume_from: u64) -> ClientResponse {
    ClientResponse::Cut(WatchCut {
        code: code.into(),
        message,
        resume_from,
    })
}

/// One change as `access` may see it (a grant's token only for its own
/// principal and admins, as the HTTP stream shows it).
fn change(access: &Access, c: Change) -> WatchChange {
    let kind = match c.kind {
        Kind::Granted {
            token,
            lease_ms,
            mode,
            limit,
            principal,
            owner,
        } => ChangeKind::Granted {
            token: if access.owns(Some(&principal)) {
                token
            } else {
                0
            },
            lease_ms,
            mode: match mode {
                Mode::Exclusive => LockMode::Exclusive,
                Mode::Shared => LockMode::Shared,
            },
            limit,
            holder: HolderId { principal, owner },
        },
        Kind::Released { token } => ChangeKind::Released { token },
        Kind::Expired { token } => ChangeKind::Expired { token },
        Kind::Value { token, value } => ChangeKind::Value { token, value },
    };
    WatchChange { key: c.key, kind }
}

/// Serve one watch until it is cut, its caller's right to it is revoked
/// (`reauth`, checked every second), or the connection goes.
pub async fn stream(
    node: &Services,
    req: WatchRequest,
    (access, reauth): (&Access, &Reauth),
    id: u64,
    out: &Outbox,
) {
    let end = |body| {
        let _ = out.send(Outgoing::answer(id, body, None));
    };
    let Ok(prefix) = String::from_utf8(req.prefix) else {
        return end(cut(
            ErrorCode::BadRequest.as_str(),
            "the prefix is not UTF-8".into(),
            req.from,
        ));
    };
    let Some(hub) = node.watch_hub() else {
        return end(cut(
            ErrorCode::Unavailable.as_str(),
            "this node keeps no watch".into(),
            req.from,
        ));
    };
    let from = (req.from != 0).then_some(req.from);
    let mut w = match hub.watch(prefix, from, &access.principal) {
        Ok(w) => w,
        Err(e) => return end(cut(e.code().as_str(), e.to_string(), req.from)),
    };
    let mut due = Due::new();
    loop {
        let next = tokio::select! {
            next = w.next() => next,
            why = reauth.revoked(&mut due) => Err(w.revoked(why)),
        };
        let sent = match next {
            Err(c) => return end(cut(c.code(), c.to_string(), c.resume_from())),
            Ok(Next::Progress(index)) => {
                send_written(out, id, ClientResponse::Progress { index }).await
            }
            Ok(Next::Changes(batches)) => {
                let mut sent = true;
                for b in batches {
                    let body = ClientResponse::Changes(ChangeBatch {
                        index: b.index,
                        changes: b.changes.into_iter().map(|c| change(access, c)).collect(),
                    });
                    sent = send_written(out, id, body).await;
                    if !sent {
                        break;
                    }
                }
                sent
            }
        };
        if !sent {
            return;
        }
    }
}
