//! The answer to a peer's request: the replication crate's answerer
//! ([`crate::raft::peer_answer`]) over this node's parts, with the
//! upgrader answering the module pre-check.

use super::Services;
use crate::modules::peer_messages::{PeerRequest, PeerResponse};
use crate::raft::peer_answer::{self, Answerer};
use crate::raft::stand::PeerConn;
use crate::raft::NodeId;

impl Services {
    /// A peer's connection opens: served until the guard drops
    /// (`raft::stand` learns when the leader's closes).
    pub(crate) fn peer_connection(&self) -> PeerConn {
        self.parts.silence.connection()
    }

    /// Whether a peer RPC from `id` may reach openraft
    /// ([`peer_answer::may_send`]).
    pub(super) fn may_send(&self, id: NodeId) -> Option<bool> {
        peer_answer::may_send(&self.parts.raft, &self.parts.vouches, id)
    }

    /// Answer a peer's request, once the peer gate lets it through; `conn`
    /// is the connection it came on ([`Services::peer_connection`]).
    pub(crate) async fn answer_peer(
        &self,
        from: NodeId,
        conn: u64,
        req: PeerRequest,
    ) -> PeerResponse {
        let p = &self.parts;
        let answerer = Answerer {
            id: p.id,
            raft: &p.raft,
            log: &p.log,
            gate: &p.peer_gate,
            standing: &p.standing,
            silence: &p.silence,
            vouches: &p.vouches,
            service: &p.upgrader,
        };
        answerer.answer(from, conn, req).await
    }
}
