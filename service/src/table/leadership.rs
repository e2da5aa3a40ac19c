//! Leadership in the table: becoming leader (load the applied table, then
//! serve), losing it (fail everyone who waits), and rebuilding the mirror
//! on doubt.

use std::collections::HashMap;
use std::time::Duration;

use super::{retry_delay, Action, Holder, Loaded, Request, Role, Table, GIVE_UP_AFTER};
use crate::error::ServiceError;
use lockd_replication::NodeId;

/// The deadlines of a mirror dropped for a rebuild while this node kept
/// leading the same term. They were promised under this leadership, which
/// never lapsed: the rebuilt mirror keeps them rather than restart every
/// lease with a full one plus an election (which let a lease outlive its
/// documented bound after any rebuild: simulation seed 312868).
#[derive(Debug)]
pub(super) struct Kept {
    term: u64,
    leases: HashMap<(String, u64), Duration>,
    sessions: HashMap<u64, Duration>,
}

impl Kept {
    /// The kept deadline of `(key, token)`'s own lease, if any.
    fn lease(&self, key: &str, token: u64) -> Option<Duration> {
        self.leases.get(&(key.to_string(), token)).copied()
    }

    /// The kept deadline of session `id`, if any.
    pub(super) fn session(&self, id: u64) -> Option<Duration> {
        self.sessions.get(&id).copied()
    }
}

impl Table {
    pub(super) fn became_leader(&mut self, term: u64) {
        self.reload(term, ServiceError::Unavailable("leadership changed".into()));
    }

    pub(super) fn lost_leadership(&mut self, leader: Option<NodeId>) {
        self.kept = None;
        self.reset(ServiceError::NotLeader {
            id: self.id,
            leader,
        });
        self.role = Role::Follower(leader);
    }

    /// Rebuild the mirror now, if leading.
    pub(super) fn doubt(&mut self) {
        if let Role::Leader { term } = self.role {
            tracing::warn!(node = self.id, "rebuilding the lock mirror on request");
            self.reload(
                term,
                ServiceError::Unavailable("lock table reloaded".into()),
            );
        }
    }

    /// Drop all leader state (failing everyone who waits with `err`) and
    /// rebuild the mirror from the applied state for `term`.
    pub(super) fn reload(&mut self, term: u64, err: ServiceError) {
        match self.role {
            Role::Leader { term: t } if t == term => self.kept = Some(self.keep(term)),
            // A rebuild of a rebuild keeps what the first one kept.
            Role::Starting { term: t, .. } if t == term => {}
            _ => self.kept = None,
        }
        self.reset(err);
        self.role = Role::Starting {
            term,
            queued: Vec::new(),
            loading: false,
            failures: 0,
        };
        self.start_loading();
    }

    /// Read the table once no proposal from before is still in flight: its
    /// completion would otherwise be applied to a mirror that already holds
    /// its effect (or, committed after the read, lacks it) — a stale
    /// release that clears the busy flag of a grant in flight drops that
    /// grant's holder from the mirror, and the holder's own release is then
    /// refused as "not held" inside its lease.
    ///
    /// Only proposals of this term count. One this node made while it led
    /// an earlier term is decided by the time the load reads: the load's
    /// barrier waits until this node has applied its log up to this term's
    /// first entry, and an entry of an earlier term either lies below that
    /// (committed with it, so applied and read) or is not in this leader's
    /// log (never to commit). Its completion may come much later (openraft
    /// answers it only when another entry is applied at its index), and
    /// waiting for it held back the restart of every lease by as long
    /// (simulation seed 290770: 458 ms after a takeover, a lease outlived
    /// its promise).
    pub(super) fn start_loading(&mut self) {
        let current = self.role.term();
        let idle = self.ops.values().all(|(t, _)| *t < current);
        if !idle {
            tracing::debug!(
                node = self.id,
                in_flight = self.ops.len(),
                "leader: the table loads once the proposals in flight end"
            );
        }
        if let Role::Starting { term, loading, .. } = &mut self.role {
            if !*loading && idle {
                *loading = true;
                let term = *term;
                self.emit(Action::LoadTable {
                    term,
                    after: Duration::ZERO,
                });
            }
        }
    }

    /// The deadlines of the mirror as it stands, leading `term`.
    fn keep(&self, term: u64) -> Kept {
        let leases = self
            .keys
            .iter()
            .flat_map(|(key, k)| {
                k.holders
                    .iter()
                    .filter(|(_, h)| h.session == 0)
                    .map(|(token, h)| ((key.clone(), token), h.deadline))
            })
            .collect();
        let sessions = self
            .sessions
            .iter()
            .map(|(id, s)| (*id, s.deadline))
            .collect();
        Kept {
            term,
            leases,
            sessions,
        }
    }

    /// Drop all leader state, failing everyone who waits. Proposals in
    /// flight stay: their completions answer their callers (stale).
    fn reset(&mut self, err: ServiceError) {
        let mut failed: Vec<u64> = Vec::new();
        for (_, k) in self.keys.drain() {
            failed.extend(k.waiters.iter().map(|w| w.req));
        }
        if let Role::Starting { queued, .. } = &mut self.role {
            failed.extend(queued.drain(..).map(|q| q.req()));
        }
        failed.sort_unstable();
        for req in failed {
            self.reply(req, Err(err.clone()));
        }
        self.leases.clear();
        self.sessions.clear();
        self.session_timers.clear();
        self.waits.clear();
        self.counters.waiting = 0;
    }

    pub(super) fn loaded(&mut self, term: u64, locks: Result<Loaded, ServiceError>) {
        let Role::Starting {
            term: t,
            queued,
            loading: true,
            failures,
        } = &mut self.role
        else {
            return;
        };
        if *t != term {
            return;
        }
        let queued = std::mem::take(queued);
        let failures = *failures + 1;
        match locks {
            Ok(Loaded { locks, sessions }) => {
                // A lease never ends earlier than promised: restart every
                // timer with a full lease plus the longest election the gap
                // could have lasted (a session's too, in load_sessions).
                // Unless this node led the same term all along: then what
                // the mirror had promised stands (see `Kept`).
                let kept = self.kept.take().filter(|k| k.term == term);
                self.load_sessions(sessions, kept.as_ref());
                for l in locks {
                    let deadline =
                        if l.session != 0 && self.join_session(l.session, &l.key, l.token) {
                            self.sessions
                                .get(&l.session)
                                .map_or(self.now, |s| s.deadline)
                        } else {
                            let d = kept.as_ref().and_then(|k| k.lease(&l.key, l.token));
                            let d = d.unwrap_or_else(|| {
                                self.now + crate::lease::lease(l.lease_ms) + self.election_timeout
                            });
                            self.leases.insert((d, l.key.clone(), l.token));
                            d
                        };
                    self.keys.entry(l.key).or_default().holders.insert(
                        l.token,
                        Holder {
                            lease_ms: l.lease_ms,
                            deadline,
                            mode: l.mode,
                            limit: l.limit,
                            ident: l.ident,
                            principal: l.principal,
                            owner: l.owner,
                            // Only one it joined lives without a lease.
                            session: if self.sessions.contains_key(&l.session) {
                                l.session
                            } else {
                                0
                            },
                            count: l.count,
                        },
                    );
                }
                tracing::info!(
                    node = self.id,
                    term,
                    held = self.leases.len(),
                    kept = kept.is_some(),
                    "leader: lock table loaded, lease timers restarted (or kept)"
                );
                self.role = Role::Leader { term };
                for q in queued {
                    self.request(q);
                }
            }
            Err(e) => {
                // A load can fail while leadership settles; one that keeps
                // failing (the state machine stopped, say) may never
                // succeed, and whoever waits then gets the reason rather
                // than no answer at all.
                let queued: Vec<Request> = if failures >= GIVE_UP_AFTER {
                    let id = self.id;
                    for q in queued {
                        self.reply(
                            q.req(),
                            Err(ServiceError::Unavailable(format!(
                                "node {id} leads but cannot load its lock table ({e}); the request was not proposed"
                            ))),
                        );
                    }
                    Vec::new()
                } else {
                    queued
                };
                let after = retry_delay(failures);
                if failures.is_power_of_two() {
                    tracing::warn!(node = self.id, term, failures, error = %e, retry_in_ms = after.as_millis() as u64, "leader: could not load the lock table");
                }
                self.role = Role::Starting {
                    term,
                    queued,
                    loading: true,
                    failures,
                };
                self.emit(Action::LoadTable { term, after });
            }
        }
    }
}
