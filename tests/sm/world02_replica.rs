//! Both worlds on the node's own apply path ([`Replica`]): a 0.1 module
//! runs world 0.2's commands through the engine's adapter, an upgrade
//! entry moves a running 0.1 state to the 0.2 module (holders unknown
//! before it show as such), a downgrade to 0.1 is refused while the state
//! holds what 0.1 cannot represent and taken once it does not, entries
//! written in 0.1's types before world 0.2 still apply on either, and a
//! 0.2 shadow of 0.1 exclusive traffic differs in no outcome.

use std::sync::Arc;

use lockd_core::command::{legacy, Command, Grant, Holder, Mode, Outcome, Reason};
use lockd_core::engine::{EngineSettings, WasmEngine, World};
use lockd_core::entry::{Entry, LogId, Payload, Request, Response};
use lockd_core::precompile::Precompiler;
use lockd_core::replica::Replica;
use lockd_core::upgrade::{ShadowEntry, ShadowOutcome, UpgradeEntry, UpgradeOutcome};
use lockd_tests::fixtures::LOCK_SM_WORLD02;

struct Node {
    replica: Replica,
    index: u64,
}

impl Node {
    /// A replica on the built-in (0.1) module.
    fn new() -> Node {
        let engine = Arc::new(WasmEngine::new(EngineSettings::default(), None).unwrap());
        let loader = Precompiler::new(engine);
        let module = loader.load(lockd_core::builtin::LOCK_SM).unwrap();
        Node {
            replica: Replica::new(1, loader, module, 4).unwrap(),
            index: 0,
        }
    }

    fn apply(&mut self, request: Request) -> Response {
        self.index += 1;
        let entry = Entry {
            log_id: LogId::new(1, 0, self.index),
            payload: Payload::Normal(request),
        };
        self.replica.apply([entry]).unwrap().remove(0)
    }

    /// One entry of one group.
    fn commands(&mut self, commands: Vec<Command>) -> Vec<Outcome> {
        match self.apply(Request::commands(vec![commands])) {
            Response::Lock(mut groups) => groups.remove(0),
            other => panic!("a lock entry answered {other:?}"),
        }
    }

    fn upgrade(&mut self, module: &[u8]) -> UpgradeOutcome {
        let replaces = self.replica.module_hash();
        match self.apply(Request::Upgrade(UpgradeEntry {
            module: module.to_vec(),
            replaces,
        })) {
            Response::Upgrade(o) => o,
            other => panic!("an upgrade entry answered {other:?}"),
        }
    }
}

fn grant(key: &str, mode: Mode, limit: u32, owner: &str) -> Command {
    Command::Grant(Grant {
        key: key.into(),
        holder: Holder {
            principal: String::new(),
            owner: owner.into(),
        },
        request_id: String::new(),
        mode,
        limit,
        lease_ms: 1000,
        session: 0,
        reentrant: false,
        value: String::new(),
    })
}

fn token(o: &Outcome) -> u64 {
    match o {
        Outcome::Granted(g) => g.token,
        other => panic!("expected a grant, got {other}"),
    }
}

#[test]
fn a_0_1_module_refuses_what_it_cannot_express_naming_itself() {
    let mut n = Node::new();
    let version = n.replica.view(false).module_version;
    let out = n.commands(vec![
        grant("s", Mode::Shared, 1, ""),
        grant("sem", Mode::Exclusive, 3, ""),
        Command::SetPolicy(Vec::new()),
        grant("x", Mode::Exclusive, 1, "me"),
    ]);
    for o in &out[..3] {
        match o {
            Outcome::Rejected(Reason::Unsupported(why)) => {
                assert!(why.contains(&version), "{why}");
                assert!(why.contains("lock-sm@0.1.0"), "{why}");
            }
            other => panic!("expected unsupported, got {other}"),
        }
    }
    assert_eq!(token(&out[3]), 1, "nothing else took a token");
    // The holder is not stored by a 0.1 module: unknown.
    let h = n.replica.holders("x").unwrap();
    assert_eq!((h.len(), h[0].holder.clone()), (1, None));
    assert_eq!(n.replica.features().unwrap().max_limit, 1);
}

#[test]
fn upgrade_to_0_2_then_shared_and_semaphores_then_a_downgrade_only_when_representable() {
    let mut n = Node::new();
    let out = n.commands(vec![
        Command::grant("a", 100),
        Command::grant("b", 200),
        Command::grant("a", 100),
    ]);
    assert_eq!(out[2], Outcome::Rejected(Reason::Busy));
    let v01 = n.replica.module_hash();

    match n.upgrade(LOCK_SM_WORLD02) {
        UpgradeOutcome::Swapped { version, .. } => assert!(version.contains("0.2"), "{version}"),
        other => panic!("the 0.1 → 0.2 upgrade was refused: {other:?}"),
    }
    assert_eq!(n.replica.world(), World::V02);
    let a = n.replica.holders("a").unwrap();
    assert_eq!(
        (a[0].token, a[0].holder.clone()),
        (1, None),
        "holder unknown"
    );

    // Tokens continue; shared holders and a semaphore of 3 work.
    let out = n.commands(vec![
        grant("r", Mode::Shared, 2, "reader-1"),
        grant("r", Mode::Shared, 2, "reader-2"),
        grant("sem", Mode::Exclusive, 3, "w1"),
        grant("sem", Mode::Exclusive, 3, "w2"),
        grant("sem", Mode::Exclusive, 3, "w3"),
        grant("sem", Mode::Exclusive, 3, "w4"),
    ]);
    let tokens: Vec<u64> = out[..5].iter().map(token).collect();
    assert_eq!(tokens, [3, 4, 5, 6, 7]);
    assert_eq!(out[5], Outcome::Rejected(Reason::Busy));
    assert_eq!(n.replica.holders("sem").unwrap().len(), 3);

    // Back to 0.1: refused while shared holders and a semaphore are held.
    match n.upgrade(lockd_core::builtin::LOCK_SM) {
        UpgradeOutcome::Rejected { reason, .. } => {
            assert!(reason.contains("lock-sm@0.1.0"), "{reason}")
        }
        other => panic!("a downgrade that loses holders was taken: {other:?}"),
    }
    assert_eq!(n.replica.world(), World::V02);

    let mut release = Vec::new();
    for k in ["r", "sem"] {
        for h in n.replica.holders(k).unwrap() {
            release.push(Command::release(k, h.token));
        }
    }
    assert!(n
        .commands(release)
        .iter()
        .all(|o| matches!(o, Outcome::Released(_))));
    match n.upgrade(lockd_core::builtin::LOCK_SM) {
        UpgradeOutcome::Swapped { module, .. } => assert_eq!(module, v01),
        other => panic!("the downgrade was refused: {other:?}"),
    }
    assert_eq!(n.replica.world(), World::V01);
    // Fencing tokens never go back.
    assert_eq!(token(&n.commands(vec![Command::grant("c", 1)])[0]), 8);
}

#[test]
fn entries_written_in_0_1_types_apply_on_either_world() {
    let legacy_entry = || {
        Request::Lock(vec![
            legacy::Command::Grant(legacy::Grant {
                key: "k".into(),
                lease_ms: 10,
            }),
            legacy::Command::Grant(legacy::Grant {
                key: "k".into(),
                lease_ms: 10,
            }),
            legacy::Command::Release("k".into()),
            legacy::Command::Release("k".into()),
        ])
    };
    let mut results = Vec::new();
    for upgrade in [false, true] {
        let mut n = Node::new();
        if upgrade {
            assert!(matches!(
                n.upgrade(LOCK_SM_WORLD02),
                UpgradeOutcome::Swapped { .. }
            ));
        }
        match n.apply(legacy_entry()) {
            Response::Lock(groups) => results.push(groups),
            other => panic!("a legacy entry answered {other:?}"),
        }
    }
    assert_eq!(results[0], results[1], "the same outcomes on both worlds");
    let out = &results[0][0];
    assert_eq!(token(&out[0]), 1);
    assert_eq!(out[1], Outcome::Rejected(Reason::Busy));
    assert!(matches!(out[2], Outcome::Released(_)));
    assert_eq!(out[3], Outcome::NotFound);
}

#[test]
fn a_0_2_shadow_of_0_1_exclusive_traffic_differs_in_nothing() {
    let mut n = Node::new();
    match n.apply(Request::Shadow(ShadowEntry::Start {
        module: LOCK_SM_WORLD02.to_vec(),
    })) {
        Response::Shadow(ShadowOutcome::Started { .. }) => {}
        other => panic!("the shadow did not start: {other:?}"),
    }
    // A seeded stream of exclusive grants, releases and expiries over a
    // few keys, in entries of a few groups. A release names the holder's
    // token, as the leader's table guarantees (a 0.1 release ignores it).
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut tokens: Vec<u64> = Vec::new();
    for _ in 0..300 {
        let mut groups = Vec::new();
        for _ in 0..1 + next() % 3 {
            let key = format!("k{}", next() % 5);
            let cmd = match next() % 4 {
                0 | 1 => Command::grant(key, 1 + next() % 100),
                2 => {
                    let holder = n.replica.holders(&key).unwrap().first().map(|h| h.token);
                    Command::release(key, holder.unwrap_or(1))
                }
                _ => Command::expire(key, next() % 40),
            };
            groups.push(vec![cmd]);
        }
        if let Response::Lock(out) = n.apply(Request::commands(groups)) {
            tokens.extend(out.iter().flatten().filter_map(|o| match o {
                Outcome::Granted(g) => Some(g.token),
                _ => None,
            }));
        }
    }
    let shadow = n.replica.view(false).shadow.expect("a shadow runs");
    assert!(shadow.commands_compared > 300, "{shadow:?}");
    assert!(tokens.len() > 50, "the stream granted {}", tokens.len());
    assert_eq!(shadow.failed, None);
    assert_eq!(shadow.outcome_diffs, 0, "{:?}", shadow.examples);
}
