//! [`LockService`]: what the HTTP and framed APIs call. Requests are
//! checked here — key and lease rules — and tokens in the actor, **before**
//! anything is proposed, so bad input never reaches the log.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::actor::{self, Msg};
use super::barrier;
use super::clock::{LeaseClock, TableClock};
use super::error::{
    check_key, check_len, check_value, Acquired, Needs, ServiceError, MAX_OWNER_CHARS,
    MAX_REQUEST_ID_CHARS,
};
use super::proposer::Proposer;
use super::stats::ServiceStats;
use super::table::{Spec, WaitLimits};
use lockd_core::command::Mode;
use lockd_replication::state_machine::StateMachineStore;
use lockd_replication::{NodeId, Raft};

mod support;

/// The lock service of a node. Cheap to clone.
#[derive(Clone)]
pub struct LockService {
    pub(super) tx: mpsc::UnboundedSender<Msg>,
    /// Numbers the requests sent to the actor.
    next_req: Arc<AtomicU64>,
    /// Callers' requests in the actor now (waiting or not): bounded by
    /// `limits.max_requests`, so the actor's queue cannot grow without end.
    in_actor: Arc<AtomicUsize>,
    pub stats: Arc<ServiceStats>,
    pub(super) id: NodeId,
    pub(super) raft: Raft,
    pub(super) sm: StateMachineStore,
    /// For admin commands that need no lock table (`set-policy`).
    pub(super) proposer: Proposer,
    pub(super) limits: RequestLimits,
    /// The longest an election can take.
    pub(super) election_max: Duration,
    /// The table's clock, shared with the actor.
    pub(super) clock: Arc<TableClock>,
}

/// What callers may ask for and how many may wait (see
/// docs/configuration.md, "Limits").
#[derive(Clone, Copy, Debug)]
pub struct RequestLimits {
    pub max_lease_ms: u64,
    pub max_wait_ms: u64,
    pub waiters: WaitLimits,
    /// Callers' requests in the lock service at once; past it, 503 with
    /// `Retry-After` (`Unavailable` on the native protocol, which clients
    /// retry).
    pub max_requests: usize,
    /// Live sessions one principal may have (enforced by the module).
    pub max_sessions: u32,
    /// Holdings one session may have (enforced by the module).
    pub max_session_holdings: u32,
}

/// A caller's place in the actor, given back when its request ends.
struct InActor<'a>(&'a AtomicUsize);

impl Drop for InActor<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The most keys one page of a listing returns.
pub(crate) const MAX_LIST: u32 = 1000;

fn gone() -> ServiceError {
    ServiceError::Unavailable("the node is shutting down".into())
}

impl LockService {
    /// Start the leader's actor. `election_max` is the longest an election
    /// can take: a new leader adds it to every held lease it inherits.
    pub fn start(
        id: NodeId,
        raft: Raft,
        sm: StateMachineStore,
        proposer: Proposer,
        election_max: Duration,
        clock: Arc<dyn LeaseClock>,
        limits: RequestLimits,
    ) -> LockService {
        let stats = Arc::new(ServiceStats::default());
        let clock = Arc::new(TableClock::new(clock));
        let timing = actor::Timing {
            election_timeout: election_max,
            clock: clock.clone(),
        };
        let tx = actor::spawn(
            id,
            raft.clone(),
            sm.clone(),
            proposer.clone(),
            timing,
            limits.waiters,
            stats.clone(),
        );
        LockService {
            tx,
            next_req: Arc::new(AtomicU64::new(1)),
            in_actor: Arc::new(AtomicUsize::new(0)),
            stats,
            id,
            raft,
            sm,
            proposer,
            limits,
            election_max,
            clock,
        }
    }

    /// Send the actor a request and wait for its answer. A caller that
    /// stops waiting (its connection closed, so this future is dropped)
    /// is reported to the actor, which then skips it in the queue or
    /// releases the grant it was about to get.
    pub(super) async fn ask<T>(
        &self,
        msg: impl FnOnce(u64, oneshot::Sender<Result<T, ServiceError>>) -> Msg,
    ) -> Result<T, ServiceError> {
        let before = self.in_actor.fetch_add(1, Ordering::Relaxed);
        let _place = InActor(&self.in_actor);
        if before >= self.limits.max_requests {
            return Err(ServiceError::Overloaded(format!(
                "{before} requests in progress on node {} (--max-requests); try again",
                self.id
            )));
        }
        let req = self.next_req.fetch_add(1, Ordering::Relaxed);
        let (reply, rx) = oneshot::channel();
        self.tx.send(msg(req, reply)).map_err(|_| gone())?;
        let mut watch = GoneGuard {
            tx: &self.tx,
            req,
            waiting: true,
        };
        let answer = rx.await;
        watch.waiting = false;
        answer.map_err(|_| gone())?
    }

    pub(super) fn check_lease(&self, lease_ms: u64) -> Result<(), ServiceError> {
        match lease_ms {
            0 => Err(ServiceError::ZeroLease),
            n if n > self.limits.max_lease_ms => Err(ServiceError::LeaseTooLong {
                got: n,
                max: self.limits.max_lease_ms,
            }),
            _ => Ok(()),
        }
    }

    fn check_wait(&self, wait: Duration) -> Result<(), ServiceError> {
        let got = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        if got > self.limits.max_wait_ms {
            return Err(ServiceError::WaitTooLong {
                got,
                max: self.limits.max_wait_ms,
            });
        }
        Ok(())
    }

    /// Take `key` exclusively, waiting up to `wait` in the key's FIFO
    /// queue if it is held.
    pub async fn acquire(
        &self,
        key: &str,
        lease_ms: u64,
        wait: Duration,
    ) -> Result<Acquired, ServiceError> {
        self.acquire_with(key, Spec::exclusive(lease_ms), wait)
            .await
    }

    /// Take a slot of `key` as `spec` asks (mode, limit, owner, request
    /// id), waiting up to `wait` in the key's FIFO queue while it is busy.
    /// A mode or limit the active module does not support is refused here,
    /// naming the module, before anything is proposed.
    pub async fn acquire_with(
        &self,
        key: &str,
        spec: Spec,
        wait: Duration,
    ) -> Result<Acquired, ServiceError> {
        let started = std::time::Instant::now();
        let answer = self.acquire_checked(key, spec, wait).await;
        let result = match &answer {
            Ok(_) => "granted",
            Err(e) => e.metric_label(),
        };
        self.stats
            .acquire_latency
            .observe(result, started.elapsed());
        answer
    }

    async fn acquire_checked(
        &self,
        key: &str,
        mut spec: Spec,
        wait: Duration,
    ) -> Result<Acquired, ServiceError> {
        check_key(key)?;
        self.check_lease(spec.lease_ms)?;
        self.check_wait(wait)?;
        check_spec(&spec)?;
        let defaulted = spec.limit == 0 && spec.mode != Mode::Exclusive;
        self.settle_limit(key, &mut spec)?;
        if defaulted && spec.limit == 1 {
            // Maybe the index-0 module's largest limit on a new cluster
            // whose first module is not applied yet: the default is the
            // cluster's module's. (Checked only here: it takes the state
            // machine's lock.)
            barrier::cluster_module(&self.raft, &self.sm, self.id).await?;
            (spec.limit, spec.adopt) = (0, None);
            self.settle_limit(key, &mut spec)?;
        }
        if spec.mode != Mode::Exclusive || spec.limit != 1 {
            self.check_supported(key, &spec).await?;
        }
        for (asks, needs) in [
            (spec.session != 0, Needs::Sessions),
            (spec.reentrant, Needs::Reentrant),
            (!spec.value.is_empty(), Needs::Values),
        ] {
            if asks {
                self.check_feature(key, needs).await?;
            }
        }
        self.ask(|req, reply| Msg::Acquire {
            req,
            key: key.to_string(),
            spec,
            wait,
            reply,
        })
        .await
    }

    /// How long each proposed entry took to commit and apply.
    pub fn commit_latency(&self) -> &lockd_replication::telemetry::Latency {
        self.proposer.commit_latency()
    }

    /// Free `key`, if `token` is its holder's (checked before proposing).
    /// `by`: the caller's principal, which must be the holding's when it is
    /// recorded; `None` for a caller who may free any holding (an admin, or
    /// no authentication).
    /// Answers what is left of a reentrant holding (0: released).
    pub async fn release(
        &self,
        key: &str,
        token: u64,
        by: Option<&str>,
    ) -> Result<u32, ServiceError> {
        check_key(key)?;
        let r = self
            .ask(|req, reply| Msg::Release {
                req,
                key: key.to_string(),
                token,
                by: by.map(str::to_string),
                reply,
            })
            .await;
        log_not_holder("release", &r);
        r
    }

    /// Extend the lease of `token` on `key` by its full `lease_ms`, counted
    /// from before this node confirmed with a quorum that it is still the
    /// leader (read-index). A deposed or partitioned leader cannot confirm,
    /// so it cannot extend. Returns the lease in ms. `by` as for
    /// [`LockService::release`].
    pub async fn keepalive(
        &self,
        key: &str,
        token: u64,
        by: Option<&str>,
    ) -> Result<u64, ServiceError> {
        check_key(key)?;
        let from = self.clock.now();
        self.confirm_leading().await?;
        let r = self
            .ask(|req, reply| Msg::Extend {
                req,
                key: key.to_string(),
                token,
                from,
                by: by.map(str::to_string),
                reply,
            })
            .await;
        log_not_holder("keepalive", &r);
        r
    }
}

/// A release or keepalive refused because another principal holds the
/// lock is a refused request like any other: it is logged.
fn log_not_holder<T>(what: &str, r: &Result<T, ServiceError>) {
    if let Err(ServiceError::NotHolder {
        key,
        token,
        holder,
        caller,
    }) = r
    {
        tracing::warn!(principal = %caller, %holder, key = %key, token, request = what, "refused a request: another principal's holding");
    }
}

/// Tells the actor when a caller stops waiting before its answer came.
struct GoneGuard<'a> {
    tx: &'a mpsc::UnboundedSender<Msg>,
    req: u64,
    waiting: bool,
}

impl Drop for GoneGuard<'_> {
    fn drop(&mut self) {
        if self.waiting {
            let _ = self.tx.send(Msg::Gone { req: self.req });
        }
    }
}

/// The bounds on what an acquire carries besides key and lease.
fn check_spec(spec: &Spec) -> Result<(), ServiceError> {
    check_len("owner", &spec.owner, MAX_OWNER_CHARS)?;
    check_len("request id", &spec.request_id, MAX_REQUEST_ID_CHARS)?;
    check_value(&spec.value)
}
