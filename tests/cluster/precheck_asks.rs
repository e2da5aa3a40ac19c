//! Who may make a voter pre-check a module, and what it costs: only the
//! leader of the voter's current term may ask; while the cluster trusts
//! module keys, an unsigned module is refused before anything is compiled
//! (nothing reaches the module cache); and the same ask again is answered
//! from the first verdict, not compiled and migrated again.

use std::time::Duration;

use lockd::modules::peer_messages::{PeerRequest, PeerResponse};
use lockd::modules::peer_messages::{PrecheckAnswer, PrecheckAsk, SignedPrecheckAsk};
use lockd_core::engine::ModuleHash;
use lockd_core::signature::SignedFor;
use lockd_tests::cluster::{shared_module_cache, Cluster};
use lockd_tests::fixtures::LOCK_SM_WORLD01_V2;
use lockd_tests::raw;
use openraft::Vote;

fn ask(
    (addr, to, cluster): (&str, u64, &str),
    from: u64,
    vote: Vote<u64>,
    module: &[u8],
) -> PrecheckAnswer {
    // A compile and a migration may take a while on a busy machine.
    let mut s = raw::peer_conn((addr, to, cluster), from, Duration::from_secs(30));
    let body = PeerRequest::Service(SignedPrecheckAsk {
        ask: PrecheckAsk {
            vote,
            module: module.to_vec(),
            rollback: true,
        },
        signature: None,
        signed_for: SignedFor::Upgrade,
    });
    match raw::peer_call(&mut s, body) {
        PeerResponse::Service(a) => a,
        other => panic!("expected a verdict, got {other:?}"),
    }
}

/// `module` with a custom section naming `tag`: a valid module of its own
/// hash, which no other test has compiled.
fn unique(module: &[u8], tag: &str) -> Vec<u8> {
    let mut m = module.to_vec();
    let name = format!("precheck-asks-{tag}-{}", std::process::id());
    let mut payload = vec![name.len() as u8];
    payload.extend_from_slice(name.as_bytes());
    m.push(0); // custom section
    m.push(payload.len() as u8);
    m.extend_from_slice(&payload);
    m
}

/// Whether the shared module cache holds an artifact of `module`.
fn compiled(module: &[u8]) -> bool {
    let prefix = ModuleHash::of(module).to_string();
    std::fs::read_dir(shared_module_cache())
        .map(|d| {
            d.filter_map(Result::ok)
                .any(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        })
        .unwrap_or(false)
}

#[test]
fn only_the_leader_may_ask_admission_comes_first_and_a_verdict_is_given_once() {
    let c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    // Every node past the cluster's first module: a verdict is remembered
    // for the module it would replace, which must not change between asks.
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");
    lockd_tests::cluster::wait_for("the first module applied", Duration::from_secs(20), || {
        c.status(follower).is_some_and(|s| s.module_since_index > 0)
    });
    let other = (1..=3)
        .find(|id| *id != leader && *id != follower)
        .expect("another");
    let st = c.status(follower).expect("status");
    let cluster = st.cluster_id.expect("a cluster id");
    let to = (c.addr(follower), follower, cluster.as_str());
    let term_vote = Vote::new_committed(st.term, leader);

    // Another member, naming itself leader of this term: refused, and
    // the module never compiled.
    let m = unique(LOCK_SM_WORLD01_V2, "member");
    let a = ask(to, other, Vote::new_committed(st.term, other), &m);
    assert!(!a.accepted, "{a:?}");
    assert!(
        a.reason
            .as_deref()
            .is_some_and(|r| r.contains("only the leader may ask")),
        "{a:?}"
    );
    assert!(!compiled(&m), "a refused ask was compiled");

    // The leader's ask: dry-run once; the same ask again is answered from
    // that verdict (the same timings, not a second compile and migration).
    let m = unique(LOCK_SM_WORLD01_V2, "leader");
    let first = ask(to, leader, term_vote, &m);
    assert!(first.accepted, "{first:?}");
    assert!(compiled(&m), "an admitted module is compiled and kept");
    let again = ask(to, leader, term_vote, &m);
    assert_eq!(again, first);

    // While a key is trusted, an unsigned module is refused before its
    // compile.
    let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    let r = c
        .post(
            leader,
            "/v1/admin/module-keys",
            serde_json::json!({ "key": hex::encode(key.verifying_key().to_bytes()) }),
        )
        .expect("trust a key");
    assert!(r.ok(), "{r:?}");
    c.wait_converged(Duration::from_secs(20));
    let m = unique(LOCK_SM_WORLD01_V2, "unsigned");
    let a = ask(to, leader, term_vote, &m);
    assert!(!a.accepted, "{a:?}");
    assert!(
        a.reason.as_deref().is_some_and(|r| r.contains("sign")),
        "{a:?}"
    );
    assert!(!compiled(&m), "an unsigned module was compiled");
}
