//! The module pre-check's peer messages: the leader's ask and a voter's
//! answer, carried by the peer protocol as the layer above's messages
//! ([`lockd_replication::messages::ServiceMessages`]), which consensus
//! neither makes nor reads. [`PeerRequest`] and [`PeerResponse`] name the
//! peer protocol with them, as the node answers it.
//!
//! Peer messages: their encoding (postcard) is pinned by
//! `tests/sm/golden_peer.rs`; new fields only through a new variant.

use std::time::Duration;

use lockd_core::signature::{ModuleSignature, SignedFor};
use lockd_replication::messages::{self, Asked, ServiceMessages};
use lockd_replication::peer_client::PeerClient;
use lockd_replication::Vote;
use serde::{Deserialize, Serialize};

/// The pre-check's messages, for the peer protocol to carry.
#[derive(Debug)]
pub enum Prechecks {}

impl ServiceMessages for Prechecks {
    type FirstAsk = PrecheckAsk;
    type Ask = SignedPrecheckAsk;
    type Answer = PrecheckAnswer;
}

/// A peer request as the node reads it (with the pre-check's asks).
pub type PeerRequest = messages::PeerRequest<Prechecks>;
/// A peer answer as the node writes it (with the pre-check's verdict).
pub type PeerResponse = messages::PeerResponse<Prechecks>;

/// The leader's question to a voter (an older leader's, unsigned).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PrecheckAsk {
    /// The asking leader's vote (the peer gate checks term and sender).
    pub vote: Vote,
    /// The candidate's component bytes.
    pub module: Vec<u8>,
    /// Marked as a rollback: no version order.
    pub rollback: bool,
}

impl Asked for PrecheckAsk {
    fn vote(&self) -> &Vote {
        &self.vote
    }
}

/// [`PrecheckAsk`] with the signature the candidate carries and what it
/// is signed for: a voter checks it, as apply would, before it compiles
/// anything.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SignedPrecheckAsk {
    pub ask: PrecheckAsk,
    pub signature: Option<ModuleSignature>,
    pub signed_for: SignedFor,
}

impl Asked for SignedPrecheckAsk {
    fn vote(&self) -> &Vote {
        &self.ask.vote
    }
}

impl SignedPrecheckAsk {
    /// An older leader's ask: no signature.
    pub fn unsigned(ask: PrecheckAsk) -> SignedPrecheckAsk {
        SignedPrecheckAsk {
            ask,
            signature: None,
            signed_for: SignedFor::Upgrade,
        }
    }
}

/// A voter's verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrecheckAnswer {
    pub accepted: bool,
    /// Why it refused.
    pub reason: Option<String>,
    /// Time to load (compile or take from the cache), µs.
    pub compile_us: u64,
    /// Time to migrate the live state, µs.
    pub migrate_us: u64,
}

impl PrecheckAnswer {
    /// A refusal with its reason (nothing was loaded or migrated).
    pub fn refused(reason: String) -> PrecheckAnswer {
        PrecheckAnswer {
            accepted: false,
            reason: Some(reason),
            compile_us: 0,
            migrate_us: 0,
        }
    }
}

/// Ask `client`'s peer to pre-check a module, within `timeout`.
pub async fn ask(
    client: &mut PeerClient,
    ask: SignedPrecheckAsk,
    timeout: Duration,
) -> Result<PrecheckAnswer, String> {
    match client.call_as(PeerRequest::Service(ask), timeout).await {
        Ok(PeerResponse::Service(answer)) => Ok(answer),
        Ok(PeerResponse::Error(why) | PeerResponse::NotMember(why)) => Err(why),
        Ok(other) => Err(format!("answered {other:?}")),
        Err(e) => Err(format!("unreachable: {e}")),
    }
}
