//! Bound module signatures on the apply path ([`Replica`]): a signature
//! made for one use (an upgrade or a shadow start, on one cluster, over the
//! active module since the index it became active at) swaps; the same
//! signature on another cluster, for the other purpose, or after the
//! cluster has moved on (a replay, a downgrade to a module once signed) is
//! rejected with the same reason on every replica, the active module
//! staying; a signature of the unbound format in a bound entry is
//! rejected; a shadow's signature promotes that shadow and nothing else.

use std::sync::Arc;

use ed25519_dalek::{Signer, SigningKey};
use lockd::cluster_id::{ClusterId, ClusterIdentity};
use lockd_core::engine::{EngineSettings, ModuleHash, WasmEngine};
use lockd_core::entry::{Entry, LogId, Payload, Request, Response};
use lockd_core::precompile::Precompiler;
use lockd_core::replica::Replica;
use lockd_core::signature::{KeyEntry, ModuleKey, ModuleSignature, SignedFor, SignedShadowStart};
use lockd_core::upgrade::BoundUpgrade;
use lockd_core::upgrade::{ShadowOutcome, UpgradeEntry, UpgradeOutcome};
use lockd_proto::signature::{bound_message, signed_message, Binding, Purpose};
use lockd_tests::fixtures::{LOCK_SM_WORLD01_V2, LOCK_SM_WORLD02};

const CLUSTER: &str = "0123456789abcdef0123456789abcdef";
const STAGING: &str = "fedcba9876543210fedcba9876543210";

struct Node {
    replica: Replica,
    index: u64,
}

impl Node {
    fn of(cluster: &str) -> Node {
        let engine = Arc::new(WasmEngine::new(EngineSettings::default(), None).unwrap());
        let loader = Precompiler::new(engine);
        let module = loader.load(lockd_core::builtin::LOCK_SM).unwrap();
        let mut replica = Replica::new(1, loader, module, 4).unwrap();
        let id = ClusterId::parse(cluster).unwrap();
        replica.bind_cluster(Arc::new(ClusterIdentity::fixed(Some(id))));
        let mut n = Node { replica, index: 0 };
        n.apply(Request::ModuleKeys(KeyEntry::Trust(ModuleKey(
            signer().verifying_key().to_bytes(),
        ))));
        n
    }

    fn apply(&mut self, request: Request) -> Response {
        self.index += 1;
        let entry = Entry {
            log_id: LogId::new(1, 0, self.index),
            payload: Payload::Normal(request),
        };
        self.replica.apply([entry]).unwrap().remove(0)
    }

    fn upgrade(&mut self, module: &[u8], sig: ModuleSignature, for_: SignedFor) -> UpgradeOutcome {
        let upgrade = UpgradeEntry {
            module: module.to_vec(),
            replaces: self.replica.module_hash(),
        };
        match self.apply(Request::BoundUpgrade(BoundUpgrade {
            upgrade,
            signature: sig,
            signed_for: for_,
        })) {
            Response::Upgrade(o) => o,
            other => panic!("an upgrade answered {other:?}"),
        }
    }

    fn shadow(&mut self, module: &[u8], sig: ModuleSignature) -> ShadowOutcome {
        match self.apply(Request::BoundShadow(SignedShadowStart {
            module: module.to_vec(),
            signature: sig,
        })) {
            Response::Shadow(o) => o,
            other => panic!("a shadow entry answered {other:?}"),
        }
    }

    /// A signature of `module` for `purpose`, bound to this node's state.
    fn sign(&self, module: &[u8], purpose: Purpose) -> ModuleSignature {
        sign(&self.replica.binding(purpose), module)
    }
}

fn signer() -> SigningKey {
    SigningKey::from_bytes(&[7; 32])
}

fn sign(binding: &Binding, module: &[u8]) -> ModuleSignature {
    let message = bound_message(binding, &ModuleHash::of(module).0);
    ModuleSignature(signer().sign(&message).to_bytes())
}

fn swapped(o: &UpgradeOutcome) -> bool {
    matches!(o, UpgradeOutcome::Swapped { .. })
}

fn rejected(o: &UpgradeOutcome) -> String {
    match o {
        UpgradeOutcome::Rejected { reason, .. } => reason.clone(),
        other => panic!("expected a rejection, got {other:?}"),
    }
}

#[test]
fn a_bound_signature_serves_once_on_its_cluster_for_its_purpose() {
    // The binding is the same on every replica of a cluster.
    let (mut a, mut b) = (Node::of(CLUSTER), Node::of(CLUSTER));
    assert_eq!(
        a.replica.binding(Purpose::Upgrade),
        b.replica.binding(Purpose::Upgrade)
    );
    let builtin = a.replica.module_hash();
    let for_v2 = a.sign(LOCK_SM_WORLD01_V2, Purpose::Upgrade);

    // Made for staging, or for a shadow, or in the unbound format: refused
    // alike on both replicas, nothing changes.
    let staging = Node::of(STAGING);
    let for_staging = staging.sign(LOCK_SM_WORLD01_V2, Purpose::Upgrade);
    let as_shadow = a.sign(LOCK_SM_WORLD01_V2, Purpose::Shadow);
    let unbound = ModuleSignature(
        signer()
            .sign(&signed_message(&ModuleHash::of(LOCK_SM_WORLD01_V2).0))
            .to_bytes(),
    );
    for sig in [for_staging, as_shadow, unbound] {
        let (ra, rb) = (
            a.upgrade(LOCK_SM_WORLD01_V2, sig, SignedFor::Upgrade),
            b.upgrade(LOCK_SM_WORLD01_V2, sig, SignedFor::Upgrade),
        );
        let reason = rejected(&ra);
        assert_eq!(reason, rejected(&rb), "the same reason on every replica");
        assert!(reason.contains("for this use"), "{reason}");
        assert!(
            reason.contains(CLUSTER),
            "names what it must be bound to: {reason}"
        );
        assert_eq!(a.replica.module_hash(), builtin);
    }
    // The signature made here and now swaps, on both.
    assert!(swapped(&a.upgrade(
        LOCK_SM_WORLD01_V2,
        for_v2,
        SignedFor::Upgrade
    )));
    assert!(swapped(&b.upgrade(
        LOCK_SM_WORLD01_V2,
        for_v2,
        SignedFor::Upgrade
    )));
    assert_eq!(
        a.replica.binding(Purpose::Upgrade),
        b.replica.binding(Purpose::Upgrade)
    );
    // On with v3; then the v2 signature again (a replay, and a downgrade
    // to a module that was once signed): refused.
    let for_v3 = a.sign(LOCK_SM_WORLD02, Purpose::Upgrade);
    assert!(swapped(&a.upgrade(
        LOCK_SM_WORLD02,
        for_v3,
        SignedFor::Upgrade
    )));
    let replay = a.upgrade(LOCK_SM_WORLD01_V2, for_v2, SignedFor::Upgrade);
    assert!(rejected(&replay).contains("for this use"), "{replay:?}");
    assert_eq!(a.replica.module_hash(), ModuleHash::of(LOCK_SM_WORLD02));
    // The binding moved with the swap: a signature over the same module
    // made before it does not serve after it.
    let v3_binding = a.replica.binding(Purpose::Upgrade);
    assert_eq!(v3_binding.replaces, ModuleHash::of(LOCK_SM_WORLD02).0);
    assert!(v3_binding.since > 0);
}

#[test]
fn a_shadows_signature_starts_it_and_promotes_it_and_nothing_else() {
    let mut n = Node::of(CLUSTER);
    // An upgrade's signature does not start a shadow.
    let for_upgrade = n.sign(LOCK_SM_WORLD01_V2, Purpose::Upgrade);
    match n.shadow(LOCK_SM_WORLD01_V2, for_upgrade) {
        ShadowOutcome::Failed { reason, .. } => {
            assert!(reason.contains("for this use"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    let for_shadow = n.sign(LOCK_SM_WORLD01_V2, Purpose::Shadow);
    assert!(matches!(
        n.shadow(LOCK_SM_WORLD01_V2, for_shadow),
        ShadowOutcome::Started { .. }
    ));
    // The shadow's signature promotes no other module (even one it would
    // verify for: v3 signed for a shadow start that never happened).
    let v3_as_shadow = n.sign(LOCK_SM_WORLD02, Purpose::Shadow);
    let other = n.upgrade(LOCK_SM_WORLD02, v3_as_shadow, SignedFor::Shadow);
    assert!(rejected(&other).contains("only the module running as the shadow"));
    // It promotes the shadow.
    assert!(swapped(&n.upgrade(
        LOCK_SM_WORLD01_V2,
        for_shadow,
        SignedFor::Shadow
    )));
    assert_eq!(n.replica.module_hash(), ModuleHash::of(LOCK_SM_WORLD01_V2));
}
