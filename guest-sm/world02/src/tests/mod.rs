//! Unit tests of the 0.2 module's native build: the rules of each command
//! ([`semantics`]), the snapshot formats, migration and downgrade
//! ([`formats`]), and properties over random command streams ([`props`]).
//! The scenario files, the native-versus-wasm runs and the differential test
//! against the 0.1 module are in the `lock-tests` crate (`tests/sm/world02_*`).

mod formats;
mod props;
mod semantics;

use crate::{Command, LockState, Outcome, Reason};

/// Apply one command as an entry of its own.
fn apply(s: &mut LockState, c: impl Into<Command>) -> Outcome {
    let o = s.apply(c.into());
    assert_eq!(
        s.state_hash(),
        s.recomputed_hash(),
        "incremental hash drifted"
    );
    o
}

fn granted(token: u64, lease_ms: u64) -> Outcome {
    Outcome::Granted {
        token,
        lease_ms,
        repeat: false,
    }
}

const BUSY: Outcome = Outcome::Rejected(Reason::Busy);
