//! Every invariant the state relies on, checked from the outside after the
//! commands of a test: the derived data (request indexes, counts, session
//! holding sets, per-principal counts, the extended count) agrees with the
//! data, the bounds hold, and the incremental hash is the recomputed one.

use std::collections::BTreeSet;

use proptest::prelude::*;

use crate::{LockState, MAX_VALUE_BYTES};

pub fn check_invariants(s: &LockState) -> Result<(), TestCaseError> {
    let mut holders = 0;
    let mut extended = 0;
    let mut in_sessions = BTreeSet::new();
    for (key, k) in &s.keys {
        prop_assert!(!k.holdings.is_empty(), "{key:?} listed with no holders");
        prop_assert!(
            k.holdings.len() <= k.limit as usize,
            "{key:?} above its limit"
        );
        let with_request = k.holdings.values().filter(|h| h.request_key().is_some());
        prop_assert_eq!(with_request.count(), k.requests.len());
        for (rk, t) in &k.requests {
            let held = k.holdings.get(t).and_then(|h| h.request_key());
            prop_assert_eq!(held.as_ref(), Some(rk));
        }
        prop_assert!(k.holdings.keys().all(|&t| t < s.next_token));
        for (&token, h) in k.holdings.iter() {
            prop_assert!(h.count() >= 1, "{key:?}/{token} has count 0");
            prop_assert!(h.value().len() <= MAX_VALUE_BYTES);
            extended += u64::from(h.is_extended());
            if h.session() != 0 {
                let session = s.sessions.get(h.session());
                prop_assert!(session.is_some(), "{key:?}/{token} in a dead session");
                let session = session.expect("checked");
                let principal = h.holder.as_ref().map(|who| who.principal.as_str());
                prop_assert_eq!(principal, Some(session.holder.principal.as_str()));
                prop_assert_eq!(h.lease_ms, session.ttl_ms);
                in_sessions.insert((h.session(), key.0.clone(), token));
            }
        }
        holders += k.holdings.len() as u64;
    }
    prop_assert_eq!(holders, s.holders);
    prop_assert_eq!(extended, s.extended);
    let mut listed = BTreeSet::new();
    for (&id, session) in s.sessions.iter() {
        prop_assert!(session.holdings.len() <= session.max_holdings as usize);
        for (key, token) in &session.holdings {
            listed.insert((id, key.0.clone(), *token));
        }
    }
    prop_assert_eq!(listed, in_sessions, "session holding sets drifted");
    s.sessions.check().map_err(TestCaseError::fail)?;
    prop_assert_eq!(
        s.state_hash(),
        s.recomputed_hash(),
        "incremental hash drifted"
    );
    let format = s.snapshot()[4];
    prop_assert_eq!(format, if s.is_0_2() { 3 } else { 4 });
    Ok(())
}
