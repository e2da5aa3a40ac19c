//! The end of a holding: its `Release` or `Expire` proposed with the
//! next waiters' grants in the same group, and the release of a grant
//! whose caller left before its answer.

use super::{Cmd, End, Op, ReqId, Role, Table, Why};

impl Table {
    /// Propose the end of the holding `(key, token)` (`Release`, or
    /// `Expire` when its lease ran out), with the next live waiters'
    /// grants behind it.
    pub(super) fn free(
        &mut self,
        key: String,
        token: u64,
        reply: Option<ReqId>,
        expired: bool,
        phantom: bool,
    ) {
        let Some(k) = self.keys.get_mut(&key) else {
            return;
        };
        if let Some(h) = k.holders.get(&token).filter(|h| !expired && h.count > 1) {
            let session = h.session;
            // A reentrant holding released once: the module takes one off
            // its count and it stays, so no waiter goes behind it.
            k.inflight += 1;
            let end = End {
                token,
                reply,
                expired,
                phantom,
                session,
            };
            let why = if phantom {
                Why::PhantomRelease
            } else {
                Why::Release
            };
            let op = Op {
                key: key.clone(),
                end: Some(end),
                grants: Vec::new(),
                extra: None,
            };
            return self.propose(why, vec![Cmd::Release { key, token }], op);
        }
        let Some(h) = k.holders.remove(&token) else {
            return;
        };
        self.leases.remove(&(h.deadline, key.clone(), token));
        if h.session != 0 {
            self.leave_session(h.session, &key, token);
        }
        if let Some(k) = self.keys.get_mut(&key) {
            k.inflight += 1;
        }
        // A holder whose lease ran out may be waiting again (sticky
        // leadership); one that releases steps down.
        let leaving = expired.then(|| lockd_core::command::Holder {
            principal: h.principal.clone(),
            owner: h.owner.clone(),
        });
        self.pick_head(&key, leaving);
        let grants = self.next_batch(&key);
        let (why, first) = match (expired, phantom) {
            (true, _) => (
                Why::Expire,
                Cmd::Expire {
                    key: key.clone(),
                    token,
                },
            ),
            (false, p) => (
                if p { Why::PhantomRelease } else { Why::Release },
                Cmd::Release {
                    key: key.clone(),
                    token,
                },
            ),
        };
        let mut commands = vec![first];
        commands.extend(grants.iter().map(|w| Cmd::Grant {
            key: key.clone(),
            spec: w.spec.clone(),
        }));
        let end = End {
            token,
            reply,
            expired,
            phantom,
            session: h.session,
        };
        self.propose(
            why,
            commands,
            Op {
                key,
                end: Some(end),
                grants,
                extra: None,
            },
        );
    }

    /// A grant's answer found no caller: release `(key, token)` at once, so
    /// no phantom lock stays until its lease ends.
    pub(super) fn undelivered(&mut self, key: String, token: u64) {
        if !matches!(self.role, Role::Leader { .. }) {
            // A grant from before the mirror was dropped: the rebuilt
            // mirror holds it and its lease ends it.
            tracing::info!(
                node = self.id,
                key,
                token,
                "caller left before a grant from before a reload"
            );
            return;
        }
        let held = self
            .keys
            .get(&key)
            .is_some_and(|k| k.inflight == 0 && k.holders.contains_key(&token));
        if held {
            tracing::info!(
                node = self.id,
                key,
                token,
                "caller left before its grant; releasing"
            );
            self.free(key, token, None, false, true);
        }
    }
}
