//! In exclusive mode with limit 1 the 0.2 module is the seed's state
//! machine (docs/architecture.md, "The lock commands (world 0.1)"),
//! checked against the 0.1 module itself.
//!
//! Random 0.1 command streams, cut into random entries, are mapped onto 0.2
//! commands as the host's adapter would map them:
//!
//! | 0.1 | 0.2 |
//! |---|---|
//! | `Grant { key, lease_ms }` | `grant` exclusive, limit 1, anonymous, no request id |
//! | `Release { key }` | `release (key, token of the current holder)`; token 0 (never issued) when free |
//! | `Expire { key, token }` | `expire (key, token)` |
//!
//! and the answers must correspond exactly: `Granted { token }` ↔
//! `granted { token, the lease asked, not a repeat }`, `GrantRejected` ↔
//! `busy`, `Released` ↔ `released { freed }`, `NotFound` ↔ `not-found`,
//! `Expired { existed }` ↔ `expired { existed, freed: existed }`. After
//! every entry the holders agree, and the 0.2 state downgraded to the 0.1
//! format is byte for byte the 0.1 module's snapshot. A copy of the 0.2
//! module migrated from the 0.1 snapshot at a random point answers the rest
//! of the stream identically too.

use guest_sm::{Command as V1, LockTable, Outcome as V1Out};
use guest_sm_world02::{Command, Grant, LockState, Outcome, Reason};
use proptest::prelude::*;

const KEYS: &[&str] = &["a", "b", "c", "lock/with/slashes", "ключ", ""];

fn command() -> impl Strategy<Value = V1> {
    let key = prop::sample::select(KEYS).prop_map(str::to_string);
    prop_oneof![
        4 => (key.clone(), 0u64..100_000).prop_map(|(key, lease_ms)| V1::Grant { key, lease_ms }),
        3 => key.clone().prop_map(|key| V1::Release { key }),
        // Small tokens, so expiries hit the holder as often as they miss.
        3 => (key, 0u64..12).prop_map(|(key, token)| V1::Expire { key, token }),
    ]
}

fn stream() -> impl Strategy<Value = (Vec<Vec<V1>>, usize)> {
    prop::collection::vec(prop::collection::vec(command(), 1..6), 1..60).prop_flat_map(|entries| {
        let n = entries.len();
        (Just(entries), 0..n)
    })
}

/// The 0.2 command for a 0.1 command, given the 0.1 state it applies to.
pub fn map(c: &V1, v1: &LockTable) -> Command {
    match c {
        V1::Grant { key, lease_ms } => Command::Grant(Grant::exclusive(key.clone(), *lease_ms)),
        V1::Release { key } => Command::release(key.clone(), v1.get(key).map_or(0, |i| i.token)),
        V1::Expire { key, token } => Command::expire(key.clone(), *token),
    }
}

/// Whether a 0.2 outcome is the 0.1 outcome of the same command.
pub fn corresponds(v1: &V1Out, v2: &Outcome, lease_asked: u64) -> bool {
    match (v1, v2) {
        (
            V1Out::Granted { token },
            Outcome::Granted {
                token: t,
                lease_ms,
                repeat: false,
                count: 1,
            },
        ) => token == t && *lease_ms == lease_asked,
        (V1Out::GrantRejected, Outcome::Rejected(Reason::Busy)) => true,
        (
            V1Out::Released,
            Outcome::Released {
                freed: true,
                count: 0,
            },
        ) => true,
        (V1Out::NotFound, Outcome::NotFound) => true,
        (V1Out::Expired { existed }, Outcome::Expired { existed: e, freed }) => {
            existed == e && freed == e
        }
        _ => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn exclusive_limit_1_is_the_seed_lock((entries, migrate_at) in stream()) {
        let mut v1 = LockTable::new();
        let mut v2 = LockState::new();
        let mut migrated: Option<LockState> = None;
        for (i, entry) in entries.iter().enumerate() {
            if i == migrate_at {
                let mut m = LockState::new();
                m.restore(&v1.snapshot()).map_err(|e| TestCaseError::fail(e.to_string()))?;
                migrated = Some(m);
            }
            let mut mapped = Vec::new();
            let mut expected = Vec::new();
            for c in entry {
                mapped.push(map(c, &v1));
                expected.push(v1.apply(c.clone()));
            }
            let leases: Vec<u64> = entry
                .iter()
                .map(|c| match c { V1::Grant { lease_ms, .. } => *lease_ms, _ => 0 })
                .collect();
            let mut machines = vec![&mut v2];
            machines.extend(migrated.as_mut());
            for m in machines {
                let got = m.apply_entry(mapped.clone());
                for (j, ((want, got), lease)) in expected.iter().zip(&got).zip(&leases).enumerate() {
                    prop_assert!(
                        corresponds(want, got, *lease),
                        "entry {} command {} ({:?}): 0.1 says {:?}, 0.2 says {:?}",
                        i, j, entry[j], want, got
                    );
                }
                let downgraded = m.downgrade_snapshot().map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(downgraded, v1.snapshot(), "the states differ after entry {}", i);
            }
        }
        for key in KEYS {
            let h = v2.holders(key);
            prop_assert_eq!(h.first().map(|h| (h.token, h.lease_ms)), v1.get(key).map(|i| (i.token, i.lease_ms)));
            prop_assert!(h.len() <= 1);
        }
        prop_assert_eq!(v2.counters().next_token, v1.stats().next_token);
        prop_assert_eq!(v2.counters().holders, v1.stats().held);
    }
}

/// The comparison can fail: a 0.2 module whose busy is a policy refusal, or
/// whose release frees nothing, does not pass for the seed lock.
#[test]
fn the_comparison_rejects_a_different_lock() {
    assert!(corresponds(
        &V1Out::GrantRejected,
        &Outcome::Rejected(Reason::Busy),
        0
    ));
    assert!(!corresponds(
        &V1Out::GrantRejected,
        &Outcome::Rejected(Reason::Policy("no".into())),
        0
    ));
    assert!(!corresponds(
        &V1Out::Released,
        &Outcome::Released {
            freed: false,
            count: 0
        },
        0
    ));
    let granted = |token, lease_ms, repeat| Outcome::Granted {
        token,
        lease_ms,
        repeat,
        count: 1,
    };
    assert!(corresponds(
        &V1Out::Granted { token: 3 },
        &granted(3, 9, false),
        9
    ));
    assert!(!corresponds(
        &V1Out::Granted { token: 3 },
        &granted(3, 8, false),
        9
    ));
    assert!(!corresponds(
        &V1Out::Granted { token: 3 },
        &granted(3, 9, true),
        9
    ));
    assert!(!corresponds(
        &V1Out::Granted { token: 3 },
        &granted(4, 9, false),
        9
    ));
    assert!(!corresponds(
        &V1Out::Expired { existed: true },
        &Outcome::Expired {
            existed: true,
            freed: false
        },
        0
    ));
}
