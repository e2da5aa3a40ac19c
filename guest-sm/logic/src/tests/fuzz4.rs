//! Hostile format-4 input: bodies built from small ranges (so that many
//! are valid and the rest break the invariants in every combination the
//! ranges allow) and valid snapshots cut short or with bytes flipped. Each
//! decodes to a consistent state or is refused, never a panic, and a
//! refused restore keeps the state.

use proptest::prelude::*;

use super::format4::{format_4, state_0_3, Body4};
use super::invariants::check_invariants;
use crate::snapshot::decode;
use crate::{Grant, Holder, LockState, Mode};

fn small_body() -> impl Strategy<Value = Body4<'static>> {
    let who = prop::sample::select(&["", "p", "q"][..]).prop_map(|p| Holder::new(p, "o"));
    let session = (
        0u64..4,
        who.clone(),
        prop::sample::select(&["", "r"][..]),
        0u64..3,
        0u32..3,
    );
    let holding = (
        0u64..6,
        0u64..3,
        prop::option::of(who),
        prop::sample::select(&["", "r"][..]),
        0u64..4,
        0u32..3,
        prop::sample::select(&["", "v"][..]).prop_map(str::to_string),
    );
    let key = (
        prop::sample::select(&["a", "b", "c"][..]),
        prop::sample::select(&[Mode::Exclusive, Mode::Shared][..]),
        0u32..3,
        prop::collection::vec(holding, 0..3),
    );
    (
        0u64..6,
        0u64..5,
        prop::collection::vec(session, 0..3),
        prop::collection::vec(key, 0..3),
    )
        .prop_map(|(next_token, next_session, sessions, keys)| Body4 {
            next_token,
            policy: vec![],
            next_session,
            sessions,
            keys,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Format-4 bodies from small ranges, valid and broken in every way the
    /// ranges allow: decoded to a consistent state or refused, never a
    /// panic; a state decoded writes a snapshot that decodes to itself.
    #[test]
    fn random_format_4_bodies_decode_or_are_refused(body in small_body()) {
        let mut s = LockState::new();
        s.apply(Grant::exclusive("kept", 1).into());
        let before = s.clone();
        match s.restore(&format_4(&body)) {
            Err(_) => prop_assert_eq!(s, before),
            Ok(()) => {
                check_invariants(&s)?;
                let back = decode(&s.snapshot()).map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(&back, &s);
            }
        }
    }

    /// A valid format-4 snapshot cut short or with bytes flipped.
    #[test]
    fn corrupted_format_4_snapshots_are_refused_without_a_panic(
        cut in any::<prop::sample::Index>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..), 0..4),
    ) {
        let mut bytes = state_0_3().snapshot();
        for (at, x) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= x;
        }
        bytes.truncate(cut.index(bytes.len() + 1));
        if let Ok(s) = decode(&bytes) {
            check_invariants(&s)?;
        }
    }
}
