//! The test-only faults' switches (the `faults` feature; a build of lockd
//! alone has none): the broken variants the checkers must catch
//! (docs/testing.md, "Test-only faults").
//!
//! A process of real nodes takes them from its environment (`LOCKD_FAULT_*`,
//! read once). The simulation runs every node of a run on one thread, and
//! several runs side by side on other threads, so it switches them per
//! thread ([`set`]), at run time, without building anything again.

use std::cell::Cell;
use std::sync::OnceLock;

/// Which faults are on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Switches {
    /// Every lease ends after a quarter of its time.
    pub early_expiry: bool,
    /// One grant in this many expires at once (0: never).
    pub double_grant_one_in: u64,
    /// At this applied index, the node (any node when `None`) applies one
    /// extra command, so its state diverges.
    pub diverge_at: Option<(u64, Option<u64>)>,
    /// At this applied index or after, the node (any node when `None`)
    /// applies the first grant under another key (`fault/forgotten`): it
    /// loses a write the other nodes keep.
    pub forget_grant_at: Option<(u64, Option<u64>)>,
    /// A keepalive is answered as kept but extends nothing
    /// (`lockd::service::table`).
    pub inert_keepalive: bool,
    /// One release in this many is answered "not held" and changes
    /// nothing (0: never).
    pub refuse_release_one_in: u64,
    /// A key freed by a release or an expiry is not granted to its
    /// waiters: they wait until their wait runs out.
    pub strand_waiters: bool,
    /// A release is answered as done at once, and nothing is proposed: the
    /// holding stays until its lease ends.
    pub phantom_release: bool,
    /// No lease ever ends by itself.
    pub never_expire: bool,
    /// Every lease lasts this many ms longer than asked (0: none): a
    /// late expiry with a bound, inside the old slack of the
    /// simulation's linearizability check and outside its tightened one.
    pub late_expiry_ms: u64,
    /// A leader answers the grants it makes with its count of them since
    /// it took over, from 1 (as if the token counter were reset at every
    /// takeover).
    pub token_reset: bool,
    /// A refusal ("held", "not held") is answered from the leader's table
    /// without the read barrier that proves it is still the leader, and a
    /// release of a holding whose expiry is in flight without waiting for
    /// it to commit.
    pub skip_read_barrier: bool,
    /// The WAL acknowledges a batch without syncing it (the negative
    /// control of the simulated disk, whose crashes lose unsynced writes).
    pub ack_before_sync: bool,
    /// Log recovery takes every torn tail for damage and refuses to open
    /// the log (`lockd::log`; the negative control of the simulation's
    /// durability checker, which must see a node that cannot restart).
    pub refuse_torn_tail: bool,
    /// Every session ends after a quarter of its TTL (leases are left
    /// alone): what the checkers must catch in a session's holdings.
    pub session_early_expiry: bool,
    /// The node runs a module over its own `--max-module-bytes` instead of
    /// stopping before it (`crate::replica`, "Cannot run").
    pub ignore_module_bound: bool,
    /// A node that wants to stand does so without a pre-vote round
    /// (`lockd::raft::stand`), as openraft 0.9 alone would.
    pub skip_prevote: bool,
    /// A replication stream is held: a peer call waits for its deadline
    /// however long its connection makes no progress
    /// (`lockd_replication::peer_conn`; a snapshot's is ten minutes), and after
    /// an unreachable peer the stream waits 10 s before it tries again
    /// (`lockd::raft::network`).
    pub stuck_stream: bool,
    /// Pre-votes and votes are answered whoever asks, and every claimed log
    /// is believed (`lockd::raft::stand`): a learner can then hold the
    /// voters back (the negative control of `tests/cluster/prevote_flood.rs`).
    pub any_voter: bool,
    /// A node that led before it stopped is restored as its term's leader
    /// at start (openraft 0.9's own behaviour), although it replicated
    /// entries its own disk may have lost (`lockd::raft::log_store`,
    /// `forget_leadership`).
    pub restore_leader: bool,
}

impl Switches {
    fn from_env() -> Switches {
        let var = |k: &str| std::env::var(k).ok();
        Switches {
            early_expiry: var("LOCKD_FAULT_EARLY_EXPIRY").is_some(),
            double_grant_one_in: var("LOCKD_FAULT_DOUBLE_GRANT")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            diverge_at: var("LOCKD_FAULT_DIVERGE_AT")
                .and_then(|v| v.parse().ok())
                .map(|at| (at, None)),
            forget_grant_at: var("LOCKD_FAULT_FORGET_GRANT_AT")
                .and_then(|v| v.parse().ok())
                .map(|at| (at, None)),
            inert_keepalive: var("LOCKD_FAULT_INERT_KEEPALIVE").is_some(),
            refuse_release_one_in: var("LOCKD_FAULT_REFUSE_RELEASE")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            strand_waiters: var("LOCKD_FAULT_STRAND_WAITERS").is_some(),
            phantom_release: var("LOCKD_FAULT_PHANTOM_RELEASE").is_some(),
            never_expire: var("LOCKD_FAULT_NEVER_EXPIRE").is_some(),
            late_expiry_ms: var("LOCKD_FAULT_LATE_EXPIRY_MS")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            token_reset: var("LOCKD_FAULT_TOKEN_RESET").is_some(),
            skip_read_barrier: var("LOCKD_FAULT_SKIP_READ_BARRIER").is_some(),
            ack_before_sync: var("LOCKD_FAULT_ACK_BEFORE_SYNC").is_some(),
            refuse_torn_tail: var("LOCKD_FAULT_REFUSE_TORN_TAIL").is_some(),
            session_early_expiry: var("LOCKD_FAULT_SESSION_EARLY_EXPIRY").is_some(),
            ignore_module_bound: var("LOCKD_FAULT_IGNORE_MODULE_BOUND").is_some(),
            skip_prevote: var("LOCKD_FAULT_SKIP_PREVOTE").is_some(),
            stuck_stream: var("LOCKD_FAULT_STUCK_STREAM").is_some(),
            any_voter: var("LOCKD_FAULT_ANY_VOTER").is_some(),
            restore_leader: var("LOCKD_FAULT_RESTORE_LEADER").is_some(),
        }
    }
}

thread_local! {
    static ON_THIS_THREAD: Cell<Option<Switches>> = const { Cell::new(None) };
    static GRANTS: Cell<u64> = const { Cell::new(0) };
    static RELEASES: Cell<u64> = const { Cell::new(0) };
}

/// The faults on for code running on this thread: the thread's own (see
/// [`set`]), else the process environment's.
pub fn get() -> Switches {
    static ENV: OnceLock<Switches> = OnceLock::new();
    ON_THIS_THREAD
        .with(Cell::get)
        .unwrap_or_else(|| *ENV.get_or_init(Switches::from_env))
}

/// Switch this thread's faults (`None`: back to the environment's).
pub fn set(switches: Option<Switches>) {
    ON_THIS_THREAD.with(|s| s.set(switches));
    GRANTS.with(|g| g.set(0));
    RELEASES.with(|r| r.set(0));
    TOKENS.with(|t| t.borrow_mut().clear());
}

/// Whether the grant being made now is the one in
/// [`Switches::double_grant_one_in`] that expires at once.
pub fn double_grant_now() -> bool {
    nth_of(&GRANTS, get().double_grant_one_in)
}

/// Whether the release being answered now is the one in
/// [`Switches::refuse_release_one_in`] refused without cause.
pub fn refuse_release_now() -> bool {
    nth_of(&RELEASES, get().refuse_release_one_in)
}

/// Count one more event on `counter`: whether it is the last of each
/// `one_in` (never when `one_in` is 0).
fn nth_of(counter: &'static std::thread::LocalKey<Cell<u64>>, one_in: u64) -> bool {
    one_in > 0
        && counter.with(|c| {
            let n = c.get();
            c.set(n + 1);
            n % one_in == one_in - 1
        })
}

thread_local! {
    static TOKENS: std::cell::RefCell<std::collections::BTreeMap<u64, u64>> =
        const { std::cell::RefCell::new(std::collections::BTreeMap::new()) };
}

/// `node` took over: with [`Switches::token_reset`], its count of grants
/// starts again from 1.
pub fn took_over(node: u64) {
    TOKENS.with(|t| t.borrow_mut().remove(&node));
}

/// With [`Switches::token_reset`], the token `node` reports for its next
/// grant: its count of grants since it took over, from 1 (`None`: the
/// fault is off).
pub fn reset_token(node: u64) -> Option<u64> {
    get().token_reset.then(|| {
        TOKENS.with(|t| {
            let mut t = t.borrow_mut();
            let n = t.entry(node).or_insert(0);
            *n += 1;
            *n
        })
    })
}
