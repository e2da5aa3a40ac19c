//! Version 2 of the lock module, run by the engine: it migrates a version-1
//! state (tokens continue), answers reserved keys with `GrantRejected`
//! (through the engine's 0.1 adapter: a `policy` rejection, the key being
//! free), and refuses garbage without changing anything.

use lockd_core::command::{Command, Granted, Outcome, Reason, Released};
use lockd_tests::fixtures::LOCK_SM_WORLD01_V2;
use lockd_tests::machines::builtin;

fn granted(token: u64, lease_ms: u64) -> Outcome {
    Outcome::Granted(Granted {
        token,
        lease_ms,
        repeat: false,
        count: 1,
    })
}
use lockd_core::engine::EngineError;

#[test]
fn v2_migrates_v1_state_and_applies_its_policy() {
    let (engine, v1_module) = builtin();
    let mut v1 = engine.instantiate(v1_module).unwrap();
    let batch = [vec![
        Command::grant("a", 100),
        Command::grant("b", 200),
        Command::release("a", 1),
        Command::grant("reserved/x", 5),
    ]];
    assert_eq!(
        v1.apply(&batch).unwrap(),
        [[
            granted(1, 100),
            granted(2, 200),
            Outcome::Released(Released {
                freed: true,
                count: 0
            }),
            granted(3, 5)
        ]]
    );

    let v2_module = engine
        .load(LOCK_SM_WORLD01_V2)
        .expect("v2 is a valid lock module");
    assert_ne!(v2_module.hash(), v1_module.hash());
    let mut v2 = engine.instantiate(&v2_module).unwrap();
    assert!(v2.version().unwrap().contains("snapshot format 2"));
    v2.restore(&v1.snapshot().unwrap())
        .expect("v2 migrates a v1 snapshot");
    assert_eq!(v2.counters().unwrap(), v1.counters().unwrap());
    assert_eq!(
        v2.list_keys("", None, 10).unwrap(),
        v1.list_keys("", None, 10).unwrap()
    );
    assert_ne!(
        v2.snapshot().unwrap(),
        v1.snapshot().unwrap(),
        "a different state format"
    );

    // Tokens continue; the new policy applies to new grants only.
    assert_eq!(
        v2.apply(&[vec![
            Command::grant("c", 1),
            Command::grant("reserved/y", 1),
            Command::grant("d", 1)
        ]])
        .unwrap(),
        [[
            granted(4, 1),
            Outcome::Rejected(Reason::Policy("refused by the active lock module".into())),
            granted(5, 1)
        ]]
    );
    assert_eq!(
        v1.apply(&[vec![Command::grant("reserved/y", 1)]]).unwrap(),
        [[granted(4, 1)]],
        "v1 has no such policy"
    );

    // v2's own format round-trips, and garbage is refused without change.
    let mut again = engine.instantiate(&v2_module).unwrap();
    again.restore(&v2.snapshot().unwrap()).unwrap();
    assert_eq!(again.state_hash().unwrap(), v2.state_hash().unwrap());
    let hash = again.state_hash().unwrap();
    assert!(matches!(
        again.restore(b"LKSM\x02\x01"),
        Err(EngineError::RestoreRejected(_))
    ));
    assert_eq!(again.state_hash().unwrap(), hash);
}
