//! The JSON bodies and answers of the lock routes ([`super::locks`]), and
//! what a caller may see of a holding.

use lockd_proto::LockMode;
use serde::{Deserialize, Serialize};

use super::native_locks;
use crate::auth::Access;
use lockd_core::command::HolderInfo;

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AcquireBody {
    /// How long the lock is held unless renewed: at least 1, at most the
    /// node's `--max-lease-ms` (the maximum here is its default).
    #[schema(minimum = 1, maximum = 3_600_000)]
    pub(super) lease_ms: u64,
    /// How long to wait for the key when it is busy (0: try once; at most
    /// the node's `--max-wait-ms`, whose default is the maximum here).
    #[serde(default)]
    #[schema(maximum = 600_000)]
    pub(super) wait_ms: u64,
    #[serde(default)]
    pub(super) mode: LockMode,
    /// Holders at once, the same for every holder of a key. `exclusive`:
    /// 1 (the default) is a mutex, N a semaphore of N. `shared`: at most N
    /// readers; without it, the limit of the key's readers, or for a key
    /// without readers 1024 or the smallest `max_holders` of the policy
    /// rules whose prefix the key has.
    #[schema(minimum = 1)]
    pub(super) limit: Option<u32>,
    /// Who holds it, for people (world 0.2).
    #[serde(default)]
    #[schema(max_length = 256)]
    pub(super) owner: String,
    /// Makes a retry safe: the same owner and request id get the grant
    /// that committed (also the `Idempotency-Key` header).
    #[serde(default)]
    #[schema(max_length = 128)]
    pub(super) request_id: Option<String>,
    /// Hold it in this session (`POST /v1/sessions`) instead of on a
    /// lease of its own: it lives as long as the session, `lease_ms` is
    /// ignored (give any valid value). 0 or absent: no session.
    #[serde(default)]
    pub(super) session: u64,
    /// Enter again if this holder (principal, owner, session) holds the
    /// key already in this mode: the same token and a count one higher;
    /// each release takes one off. Needs an owner or a session.
    #[serde(default)]
    pub(super) reentrant: bool,
    /// A value published with the holding (an election's leader value),
    /// at most 1024 characters.
    #[serde(default)]
    #[schema(max_length = 1024)]
    pub(super) value: String,
    /// Asks to go before other waiters when the key frees (higher goes
    /// earlier; 0, the default, is none). The module's election policy
    /// decides what it means (world 0.4's `pick`; the reference module:
    /// the highest priority first, then a leader whose lease just ran
    /// out, then the oldest); a module of an older world keeps FIFO.
    #[serde(default)]
    pub(super) priority: u32,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenBody {
    /// The fencing token the acquire returned.
    pub(super) token: u64,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct AcquireReply {
    /// The fencing token: larger than every token granted before.
    pub(super) token: u64,
    /// The lease granted (the module may shorten it; in a session, the
    /// session's TTL).
    pub(super) lease_ms: u64,
    /// How many times the holder holds it now: 1, or more for a reentrant
    /// holder that entered again (the same token).
    pub(super) count: u32,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct ReleaseReply {
    /// What is left of a reentrant holding: 0 when the holding is gone.
    pub(super) count: u32,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct KeepaliveReply {
    /// The lease, restarted now.
    pub(super) lease_ms: u64,
}

/// An answer with nothing more to say.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Done {}

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct HolderJson {
    pub(super) principal: String,
    pub(super) owner: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct HoldingJson {
    /// Null: not shown to this caller (another principal's holding).
    pub(super) token: Option<u64>,
    /// The lease granted (or last renewed to).
    pub(super) lease_ms: u64,
    /// What is left of it on the leader's clock when it answered (null:
    /// not timed there yet: a grant committed an instant before, whose
    /// answer the leader's table is still settling, or a holding a new
    /// leader has not yet loaded).
    pub(super) lease_left_ms: Option<u64>,
    pub(super) mode: LockMode,
    pub(super) limit: u32,
    /// Null: carried over from a 0.1 state, holder unknown.
    pub(super) holder: Option<HolderJson>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(super) request_id: String,
    /// The session it lives in (absent: on its own lease).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) session: Option<u64>,
    /// Times its holder entered it (1 unless reentrant).
    pub(super) count: u32,
    /// Its published value (absent: none).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(super) value: String,
}

/// `left`: (token, ms left) of the key's holdings on the leader's clock.
pub(super) fn holding(access: &Access, h: HolderInfo, left: &[(u64, u64)]) -> HoldingJson {
    HoldingJson {
        token: native_locks::sees_token(access, &h).then_some(h.token),
        lease_ms: h.lease_ms,
        lease_left_ms: left.iter().find(|(t, _)| *t == h.token).map(|(_, l)| *l),
        mode: native_locks::lock_mode(h.mode),
        limit: h.limit,
        holder: h.holder.map(|x| HolderJson {
            principal: x.principal,
            owner: x.owner,
        }),
        request_id: h.request_id,
        session: (h.session != 0).then_some(h.session),
        count: h.count,
        value: h.value,
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct LockReply {
    pub(super) held: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) token: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) lease_ms: Option<u64>,
    pub(super) holders: Vec<HoldingJson>,
}
