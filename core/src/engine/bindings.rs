//! Rust types and typed exports generated from the four worlds in `wit/`.
//!
//! * [`v01`]: world `lockd:sm/lock-sm@0.1.0` (`wit/lock-sm-0.1.wit`), the seed's
//!   three commands (docs/architecture.md, "The lock commands (world
//!   0.1)").
//! * [`v02`]: world `lockd:sm/lock-sm@0.2.0` (`wit/lock-sm-0.2.wit`), where
//!   the module decides the lock semantics (docs/writing-a-lock-module.md,
//!   "The 0.2 contract in short").
//! * [`v03`]: world `lockd:sm/lock-sm@0.3.0` (`wit/lock-sm-0.3.wit`): 0.2
//!   and sessions, reentrant holdings and values (docs/writing-a-lock-module.md,
//!   "What 0.3 adds"). The host's own command types are these.
//! * [`v04`]: world `lockd:sm/lock-sm@0.4.0` (`wit/lock-sm-0.4.wit`): 0.3
//!   and `pick`, the module's election policy. Only `pick` is called
//!   through these bindings; everything else a 0.4 module exports is 0.3's
//!   and called through [`v03`] on the same instance.
//!
//! The command and outcome types get serde derives so the log and the wire
//! can carry them unchanged; [`crate::command`] adds constructors and
//! `Display` on top.

/// World `lock-sm@0.1.0`.
pub mod v01 {
    wasmtime::component::bindgen!({
        world: "lock-sm",
        path: "../wit/lock-sm-0.1.wit",
        additional_derives: [serde::Serialize, serde::Deserialize, PartialEq, Eq],
    });
}

/// World `lock-sm@0.2.0`.
pub mod v02 {
    wasmtime::component::bindgen!({
        world: "lock-sm",
        path: "../wit/lock-sm-0.2.wit",
        additional_derives: [serde::Serialize, serde::Deserialize, PartialEq, Eq],
    });
}

/// World `lock-sm@0.3.0`.
pub mod v03 {
    wasmtime::component::bindgen!({
        world: "lock-sm",
        path: "../wit/lock-sm-0.3.wit",
        additional_derives: [serde::Serialize, serde::Deserialize, PartialEq, Eq],
    });
}

/// World `lock-sm@0.4.0` (for `pick`; its types are 0.3's).
pub mod v04 {
    wasmtime::component::bindgen!({
        world: "lock-sm",
        path: "../wit/lock-sm-0.4.wit",
    });
}

/// `flags` types get no derives from `bindgen!`: policy kinds go over the
/// wire as four booleans (the same in both worlds that have them).
macro_rules! policy_kinds_serde {
    ($world:ident) => {
        mod $world {
            use serde::{Deserialize, Deserializer, Serialize, Serializer};

            use super::super::$world::PolicyKinds;

            #[derive(Serialize, Deserialize)]
            struct Kinds {
                reserved: bool,
                max_lease: bool,
                max_holders: bool,
                quota: bool,
            }

            impl Serialize for PolicyKinds {
                fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                    Kinds {
                        reserved: self.contains(PolicyKinds::RESERVED),
                        max_lease: self.contains(PolicyKinds::MAX_LEASE),
                        max_holders: self.contains(PolicyKinds::MAX_HOLDERS),
                        quota: self.contains(PolicyKinds::QUOTA),
                    }
                    .serialize(s)
                }
            }

            impl<'de> Deserialize<'de> for PolicyKinds {
                fn deserialize<D: Deserializer<'de>>(d: D) -> Result<PolicyKinds, D::Error> {
                    let k = Kinds::deserialize(d)?;
                    let mut out = PolicyKinds::empty();
                    for (on, flag) in [
                        (k.reserved, PolicyKinds::RESERVED),
                        (k.max_lease, PolicyKinds::MAX_LEASE),
                        (k.max_holders, PolicyKinds::MAX_HOLDERS),
                        (k.quota, PolicyKinds::QUOTA),
                    ] {
                        if on {
                            out |= flag;
                        }
                    }
                    Ok(out)
                }
            }
        }
    };
}

mod policy_kinds {
    policy_kinds_serde!(v02);
    policy_kinds_serde!(v03);
}
