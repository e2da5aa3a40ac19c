//! The negative controls: one broken variant of the service per checker,
//! each of which *its* checker must catch within the CI seeds. All but
//! one are the node's test-only faults (`lockd_core::faults`), switched
//! for the thread a run is on, so nothing is built again for them; the
//! fast clock is the simulation's own (`super::clock`).

use lockd_core::faults::{self, Switches};

use crate::jepsen::check::Checker;

/// A broken variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Every lease ends after a quarter of its time.
    EarlyExpiry,
    /// One grant in three expires at once.
    DoubleGrant,
    /// No lease ever ends by itself.
    NeverExpire,
    /// A leader counts the tokens it hands out from 1 after each takeover.
    TokenReset,
    /// Node 1 applies one extra command at index 30.
    Divergence,
    /// "Held" and "not held" are answered without the read barrier that
    /// proves the answering node still leads.
    SkipReadBarrier,
    /// The log acknowledges a batch before (without) syncing it.
    AckBeforeSync,
    /// Every node's lease clock runs 20 % fast: beyond the drift bound.
    FastClock,
    /// Every session ends after a quarter of its TTL (leases do not).
    SessionEarlyExpiry,
    /// A node runs a module over its own `--max-module-bytes` instead of
    /// stopping before the swap (see `SimConfig::refusing`).
    RunOverBound,
    /// A replication stream is held: a peer call on a dead connection
    /// waits for its deadline (a snapshot's is ten minutes) instead of
    /// ending once nothing moves, and a stream that met an unreachable
    /// peer waits 10 s before it tries again.
    StuckStream,
    /// A node that led before it stopped is restored as its term's leader
    /// at start, though its disk may have lost entries a quorum committed.
    /// The random seeds see a restarted leader take office again in its
    /// term; its scenario (`super::leader_bounce`) shows the harm.
    RestoreLeader,
    /// Node 2 applies the first grant at index 40 or after under another
    /// key: it loses a write that was acknowledged and the others keep.
    ForgetGrant,
    /// A keepalive is answered as kept but extends nothing.
    InertKeepalive,
    /// One release in three is answered "not held" and changes nothing.
    RefuseRelease,
    /// A freed key is not granted to its waiters.
    StrandWaiters,
    /// The double grant, with the register the clients write to not
    /// fencing (it takes any token): two holders at once lose updates.
    UnfencedDoubleGrant,
    /// A release is answered as done and nothing commits it.
    PhantomRelease,
    /// Log recovery takes every torn tail for damage: a node whose last
    /// write a crash tore cannot restart.
    RefuseTornTail,
    /// Every lease lasts 400 ms longer than asked: within the bound the
    /// linearizability check once allowed (1.5 election timeouts and
    /// 400 ms), beyond the tightened one.
    LateExpiry,
}

impl Control {
    pub const ALL: [Control; 20] = [
        Control::EarlyExpiry,
        Control::DoubleGrant,
        Control::NeverExpire,
        Control::TokenReset,
        Control::Divergence,
        Control::SkipReadBarrier,
        Control::AckBeforeSync,
        Control::FastClock,
        Control::SessionEarlyExpiry,
        Control::RunOverBound,
        Control::StuckStream,
        Control::RestoreLeader,
        Control::ForgetGrant,
        Control::InertKeepalive,
        Control::RefuseRelease,
        Control::StrandWaiters,
        Control::UnfencedDoubleGrant,
        Control::PhantomRelease,
        Control::RefuseTornTail,
        Control::LateExpiry,
    ];

    /// Its name on the `simulate` command line.
    pub fn name(self) -> &'static str {
        match self {
            Control::EarlyExpiry => "early-expiry",
            Control::DoubleGrant => "double-grant",
            Control::NeverExpire => "never-expire",
            Control::TokenReset => "token-reset",
            Control::Divergence => "divergence",
            Control::SkipReadBarrier => "skip-read-barrier",
            Control::AckBeforeSync => "ack-before-sync",
            Control::FastClock => "fast-clock",
            Control::SessionEarlyExpiry => "session-early-expiry",
            Control::RunOverBound => "run-over-bound",
            Control::StuckStream => "stuck-stream",
            Control::RestoreLeader => "restore-leader",
            Control::ForgetGrant => "forget-grant",
            Control::InertKeepalive => "inert-keepalive",
            Control::RefuseRelease => "refuse-release",
            Control::StrandWaiters => "strand-waiters",
            Control::UnfencedDoubleGrant => "unfenced-double-grant",
            Control::PhantomRelease => "phantom-release",
            Control::RefuseTornTail => "refuse-torn-tail",
            Control::LateExpiry => "late-expiry",
        }
    }

    /// The control named `name` (see [`Control::name`]).
    pub fn named(name: &str) -> Option<Control> {
        Control::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The checker that must catch it.
    pub fn caught_by(self) -> Checker {
        match self {
            Control::EarlyExpiry => Checker::Linearizable,
            Control::DoubleGrant => Checker::MutualExclusion,
            Control::NeverExpire => Checker::Linearizable,
            Control::LateExpiry => Checker::Linearizable,
            Control::TokenReset => Checker::Tokens,
            Control::Divergence => Checker::Convergence,
            Control::SkipReadBarrier => Checker::Linearizable,
            // Acknowledged writes a crash took: the recovered logs are
            // shorter than what was acknowledged.
            Control::AckBeforeSync => Checker::Acknowledged,
            Control::RefuseTornTail => Checker::Durability,
            Control::FastClock => Checker::MutualExclusion,
            // A session's holdings are left out of the linearizability
            // model (their end moves with every session keepalive): the
            // holders' windows, from the session's promise, catch it.
            Control::SessionEarlyExpiry => Checker::MutualExclusion,
            Control::RunOverBound => Checker::Convergence,
            Control::StuckStream => Checker::Progress,
            Control::RestoreLeader => Checker::LeadsOnce,
            Control::ForgetGrant => Checker::Acknowledged,
            Control::InertKeepalive => Checker::Keepalive,
            Control::RefuseRelease => Checker::RefusalInsideLease,
            Control::StrandWaiters => Checker::Liveness,
            Control::UnfencedDoubleGrant => Checker::LostUpdate,
            Control::PhantomRelease => Checker::Survived,
        }
    }

    /// Checkers that must catch it too: the Raft-level checkers, whose
    /// negative controls these are (docs/testing.md).
    pub fn also_caught_by(self) -> Vec<Checker> {
        match self {
            // Parted at index 30: the audit points after it differ.
            Control::Divergence => vec![Checker::AppliedAlike],
            // Node 2's outcome at that index differs from the others'.
            Control::ForgetGrant => vec![Checker::AppliedAlike],
            // The restored leader's entries under its followers' log ids.
            Control::RestoreLeader => vec![Checker::LogMatching],
            _ => Vec::new(),
        }
    }

    fn switches(self) -> Switches {
        let off = Switches::default();
        match self {
            Control::EarlyExpiry => Switches {
                early_expiry: true,
                ..off
            },
            Control::DoubleGrant => Switches {
                double_grant_one_in: 3,
                ..off
            },
            Control::NeverExpire => Switches {
                never_expire: true,
                ..off
            },
            Control::LateExpiry => Switches {
                late_expiry_ms: 400,
                ..off
            },
            Control::TokenReset => Switches {
                token_reset: true,
                ..off
            },
            Control::Divergence => Switches {
                diverge_at: Some((30, Some(1))),
                ..off
            },
            Control::SkipReadBarrier => Switches {
                skip_read_barrier: true,
                ..off
            },
            Control::AckBeforeSync => Switches {
                ack_before_sync: true,
                ..off
            },
            Control::SessionEarlyExpiry => Switches {
                session_early_expiry: true,
                ..off
            },
            Control::RunOverBound => Switches {
                ignore_module_bound: true,
                ..off
            },
            Control::StuckStream => Switches {
                stuck_stream: true,
                ..off
            },
            Control::RestoreLeader => Switches {
                restore_leader: true,
                ..off
            },
            Control::ForgetGrant => Switches {
                forget_grant_at: Some((40, Some(2))),
                ..off
            },
            Control::InertKeepalive => Switches {
                inert_keepalive: true,
                ..off
            },
            Control::RefuseRelease => Switches {
                refuse_release_one_in: 3,
                ..off
            },
            Control::StrandWaiters => Switches {
                strand_waiters: true,
                ..off
            },
            // The register's half is the simulation's (`run`).
            Control::UnfencedDoubleGrant => Switches {
                double_grant_one_in: 3,
                ..off
            },
            Control::PhantomRelease => Switches {
                phantom_release: true,
                ..off
            },
            Control::RefuseTornTail => Switches {
                refuse_torn_tail: true,
                ..off
            },
            // Not a switch of the node: the simulation's clocks (`drifts`).
            Control::FastClock => off,
        }
    }
}

/// Switch this thread's faults for a run: `control`'s, or none at all
/// (never the environment's).
pub fn set(control: Option<Control>) {
    faults::set(Some(control.map_or(Switches::default(), Control::switches)));
}
