//! Signed modules on the node's apply path ([`Replica`]): with a module key
//! trusted, an unsigned upgrade, one whose signature is of another module
//! and one signed by a key the cluster does not trust are rejected with the
//! same reason on independent replicas, the active module staying; a
//! correctly signed one swaps; a signed shadow starts, keeps its signature
//! and promotes with it, checked against the keys in force at the promote;
//! the trusted set survives a snapshot (build, decode, restore, install);
//! bad key entries change nothing; untrusting the last key lets unsigned
//! upgrades in again.

use std::sync::Arc;

use ed25519_dalek::{Signer, SigningKey};
use lockd_core::command::{Command, Outcome};
use lockd_core::engine::{EngineSettings, ModuleHash, WasmEngine};
use lockd_core::entry::{Entry, LogId, Payload, Request, Response, SnapshotMeta};
use lockd_core::precompile::Precompiler;
use lockd_core::replica::Replica;
use lockd_core::signature::{
    KeyChange, KeyEntry, KeyError, ModuleKey, ModuleSignature, SignedShadowStart, MAX_TRUSTED_KEYS,
};
use lockd_core::snapshot::SnapshotBlob;
use lockd_core::upgrade::SignedUpgrade;
use lockd_core::upgrade::{ShadowEntry, ShadowOutcome, UpgradeEntry, UpgradeOutcome};
use lockd_proto::signature::signed_message;
use lockd_tests::fixtures::{LOCK_SM_WORLD01_V2, LOCK_SM_WORLD02};

fn loader() -> Arc<Precompiler> {
    let engine = Arc::new(WasmEngine::new(EngineSettings::default(), None).unwrap());
    Precompiler::new(engine)
}

struct Node {
    replica: Replica,
    index: u64,
}

impl Node {
    fn new() -> Node {
        let loader = loader();
        let module = loader.load(lockd_core::builtin::LOCK_SM).unwrap();
        Node {
            replica: Replica::new(1, loader, module, 4).unwrap(),
            index: 0,
        }
    }

    fn from(replica: Replica) -> Node {
        let index = replica.last_applied().map_or(0, |l| l.index);
        Node { replica, index }
    }

    fn apply(&mut self, request: Request) -> Response {
        self.index += 1;
        let entry = Entry {
            log_id: LogId::new(1, 0, self.index),
            payload: Payload::Normal(request),
        };
        self.replica.apply([entry]).unwrap().remove(0)
    }

    fn keys(&mut self, entry: KeyEntry) -> Result<KeyChange, KeyError> {
        match self.apply(Request::ModuleKeys(entry)) {
            Response::ModuleKeys(result, keys) => {
                assert_eq!(keys.hex(), self.replica.view(false).trusted_module_keys);
                result
            }
            other => panic!("a key entry answered {other:?}"),
        }
    }

    fn upgrade(&mut self, module: &[u8], signature: Option<ModuleSignature>) -> UpgradeOutcome {
        let upgrade = UpgradeEntry {
            module: module.to_vec(),
            replaces: self.replica.module_hash(),
        };
        let request = match signature {
            Some(signature) => Request::SignedUpgrade(SignedUpgrade { upgrade, signature }),
            None => Request::Upgrade(upgrade),
        };
        match self.apply(request) {
            Response::Upgrade(o) => o,
            other => panic!("an upgrade answered {other:?}"),
        }
    }

    fn shadow(&mut self, module: &[u8], signature: Option<ModuleSignature>) -> ShadowOutcome {
        let request = match signature {
            Some(signature) => Request::SignedShadow(SignedShadowStart {
                module: module.to_vec(),
                signature,
            }),
            None => Request::Shadow(ShadowEntry::Start {
                module: module.to_vec(),
            }),
        };
        match self.apply(request) {
            Response::Shadow(o) => o,
            other => panic!("a shadow entry answered {other:?}"),
        }
    }

    fn grant(&mut self, key: &str) -> u64 {
        match self.apply(Request::commands(vec![vec![Command::grant(key, 1000)]])) {
            Response::Lock(g) => match &g[0][0] {
                Outcome::Granted(x) => x.token,
                other => panic!("{other}"),
            },
            other => panic!("{other:?}"),
        }
    }
}

fn signer(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

fn key_of(s: &SigningKey) -> ModuleKey {
    ModuleKey(s.verifying_key().to_bytes())
}

fn sign(s: &SigningKey, module: &[u8]) -> ModuleSignature {
    let message = signed_message(&ModuleHash::of(module).0);
    ModuleSignature(s.sign(&message).to_bytes())
}

fn rejected(o: &UpgradeOutcome) -> &str {
    match o {
        UpgradeOutcome::Rejected { reason, .. } => reason,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

#[test]
fn unsigned_wrongly_signed_and_untrusted_upgrades_are_rejected_alike_on_every_replica() {
    let (ops, outsider) = (signer(1), signer(2));
    let mut nodes = [Node::new(), Node::new()];
    let v1 = nodes[0].replica.module_hash();
    let mut seen = Vec::new();
    for n in &mut nodes {
        assert_eq!(
            n.keys(KeyEntry::Trust(key_of(&ops))),
            Ok(KeyChange::Trusted)
        );
        n.grant("held");
        let unsigned = n.upgrade(LOCK_SM_WORLD01_V2, None);
        let other_module = n.upgrade(LOCK_SM_WORLD01_V2, Some(sign(&ops, LOCK_SM_WORLD02)));
        let untrusted = n.upgrade(
            LOCK_SM_WORLD01_V2,
            Some(sign(&outsider, LOCK_SM_WORLD01_V2)),
        );
        assert_eq!(
            rejected(&unsigned),
            "the module is not signed; the cluster trusts 1 module key"
        );
        for o in [&other_module, &untrusted] {
            assert_eq!(
                rejected(o),
                "the signature verifies under none of the 1 trusted module key"
            );
        }
        assert_eq!(n.replica.module_hash(), v1, "the active module stays");
        let view = n.replica.view(true);
        let records: Vec<_> = view.upgrades.iter().map(|r| r.outcome()).collect();
        let records: Vec<String> = records.iter().map(|r| format!("{r:?}")).collect();
        seen.push((unsigned, other_module, untrusted, records, view.state_hash));
    }
    assert_eq!(seen[0], seen[1], "the same on both replicas");
    assert_eq!(seen[0].3.len(), 3, "each rejection is an upgrade record");

    // Signed by the trusted key: swapped on both, at the same index.
    for n in &mut nodes {
        match n.upgrade(LOCK_SM_WORLD01_V2, Some(sign(&ops, LOCK_SM_WORLD01_V2))) {
            UpgradeOutcome::Swapped { module, .. } => {
                assert_eq!(module, ModuleHash::of(LOCK_SM_WORLD01_V2))
            }
            other => panic!("a signed upgrade was refused: {other:?}"),
        }
        assert_eq!(n.grant("after"), 2, "tokens go on");
    }
    let hashes: Vec<_> = nodes
        .iter_mut()
        .map(|n| n.replica.state_hash().unwrap())
        .collect();
    assert_eq!(hashes[0], hashes[1]);
}

#[test]
fn a_signed_shadow_keeps_its_signature_through_a_snapshot_and_promotes_with_it() {
    let ops = signer(7);
    let mut a = Node::new();
    assert_eq!(
        a.keys(KeyEntry::Trust(key_of(&ops))),
        Ok(KeyChange::Trusted)
    );
    match a.shadow(LOCK_SM_WORLD01_V2, None) {
        ShadowOutcome::Failed { reason, .. } => assert_eq!(
            reason,
            "the module is not signed; the cluster trusts 1 module key"
        ),
        other => panic!("an unsigned shadow started: {other:?}"),
    }
    assert!(a.replica.shadow_module().is_none());
    let sig = sign(&ops, LOCK_SM_WORLD01_V2);
    assert!(matches!(
        a.shadow(LOCK_SM_WORLD01_V2, Some(sig)),
        ShadowOutcome::Started { .. }
    ));
    a.grant("k");

    // A snapshot of that state, restored on another node and installed on
    // a third: the trusted key comes along (the shadow does not: shadows
    // are never in snapshots), and the first node keeps its shadow and the
    // shadow's signature.
    let blob = a
        .replica
        .snapshot_blob(SnapshotMeta {
            last_log_id: a.replica.last_applied(),
            ..SnapshotMeta::default()
        })
        .unwrap();
    let back = SnapshotBlob::decode(&blob.encode().unwrap()).unwrap();
    assert_eq!(back.module_keys.hex(), vec![key_of(&ops).to_string()]);
    let mut restored = Replica::from_snapshot(2, loader(), &back, 4).unwrap();
    assert_eq!(
        restored.view(false).trusted_module_keys,
        a.replica.view(false).trusted_module_keys
    );
    assert!(restored.shadow_module().is_none());
    let mut installed = Node::new();
    let mut other = Replica::from_snapshot(3, loader(), &back, 4).unwrap();
    let hash = other.state_hash().unwrap();
    installed.replica.install(other, hash);
    let mut installed = Node::from(installed.replica);
    assert_eq!(installed.replica.module_keys(), a.replica.module_keys());
    let mut b = Node::from(restored);

    let shadow = a.replica.shadow_module().expect("the shadow runs on");
    assert_eq!(shadow.signature, Some(sig));
    // The promote the leader builds: the shadow's bytes and signature.
    let promote = || {
        Request::SignedUpgrade(SignedUpgrade {
            upgrade: UpgradeEntry {
                module: shadow.bytes.to_vec(),
                replaces: ModuleHash::of(lockd_core::builtin::LOCK_SM),
            },
            signature: shadow.signature.expect("signed"),
        })
    };
    for n in [&mut a, &mut b, &mut installed] {
        match n.apply(promote()) {
            Response::Upgrade(UpgradeOutcome::Swapped { module, .. }) => {
                assert_eq!(module, ModuleHash::of(LOCK_SM_WORLD01_V2))
            }
            other => panic!("the promote was refused: {other:?}"),
        }
    }
    assert!(a.replica.shadow_module().is_none(), "promoted: shadow ends");
    let hashes: Vec<_> = [&mut a, &mut b, &mut installed]
        .into_iter()
        .map(|n| n.replica.state_hash().unwrap())
        .collect();
    assert!(hashes.windows(2).all(|w| w[0] == w[1]));
}

#[test]
fn a_promote_is_checked_against_the_keys_in_force_when_it_applies() {
    let (old, new) = (signer(3), signer(4));
    let mut n = Node::new();
    // Started while no key was trusted: its signature is kept unchecked.
    let by_old = sign(&old, LOCK_SM_WORLD01_V2);
    assert!(matches!(
        n.shadow(LOCK_SM_WORLD01_V2, Some(by_old)),
        ShadowOutcome::Started { .. }
    ));
    assert_eq!(
        n.keys(KeyEntry::Trust(key_of(&new))),
        Ok(KeyChange::Trusted)
    );
    let shadow = n.replica.shadow_module().expect("shadow");
    let o = n.upgrade(&shadow.bytes, shadow.signature);
    assert_eq!(
        rejected(&o),
        "the signature verifies under none of the 1 trusted module key"
    );
    assert!(
        n.replica.shadow_module().is_some(),
        "a refused promote ends nothing"
    );
    assert_eq!(
        n.keys(KeyEntry::Trust(key_of(&old))),
        Ok(KeyChange::Trusted)
    );
    assert!(matches!(
        n.upgrade(&shadow.bytes, shadow.signature),
        UpgradeOutcome::Swapped { .. }
    ));
}

#[test]
fn key_entries_are_bounded_exact_and_untrusting_the_last_lifts_the_rule() {
    let mut n = Node::new();
    let ops = signer(5);
    let mut off_curve = [0u8; 32];
    off_curve[0] = 2;
    let bad = n.keys(KeyEntry::Trust(ModuleKey(off_curve)));
    assert!(matches!(bad, Err(KeyError::NotAKey { .. })), "{bad:?}");
    assert_eq!(
        n.keys(KeyEntry::Untrust(key_of(&ops))),
        Err(KeyError::NotTrusted(key_of(&ops)))
    );
    for seed in 0..MAX_TRUSTED_KEYS as u8 {
        assert_eq!(
            n.keys(KeyEntry::Trust(key_of(&signer(100 + seed)))),
            Ok(KeyChange::Trusted)
        );
    }
    assert_eq!(
        n.keys(KeyEntry::Trust(key_of(&ops))),
        Err(KeyError::Full { max: 16 })
    );
    assert_eq!(
        rejected(&n.upgrade(LOCK_SM_WORLD01_V2, None)),
        "the module is not signed; the cluster trusts 16 module keys"
    );
    for seed in 0..MAX_TRUSTED_KEYS as u8 {
        assert_eq!(
            n.keys(KeyEntry::Untrust(key_of(&signer(100 + seed)))),
            Ok(KeyChange::Untrusted)
        );
    }
    assert!(n.replica.view(false).trusted_module_keys.is_empty());
    assert!(matches!(
        n.upgrade(LOCK_SM_WORLD01_V2, None),
        UpgradeOutcome::Swapped { .. }
    ));
}
