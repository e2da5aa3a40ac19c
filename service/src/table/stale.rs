//! Answering the callers of a proposal made before the mirror was
//! dropped (leadership changed, or a reload): what committed is a fact.

use super::settle::refusal;
use super::{Answer, Op, Outcome, Reject, Table};
use crate::error::{Acquired, ServiceError};

impl Table {
    /// Answer the callers of a proposal made before the mirror was dropped
    /// (leadership changed, or a reload): what committed is a fact, so a
    /// grant is handed out and a release confirmed; the mirror is rebuilt
    /// from the table, which holds the same effects.
    pub(super) fn answer_stale(&mut self, op: Op, result: Result<Vec<Outcome>, ServiceError>) {
        let Op {
            key, end, grants, ..
        } = op;
        let outcomes = match result {
            Ok(o) => o,
            Err(e) => return self.fail_op(end.and_then(|e| e.reply), &grants, e),
        };
        let gone = || {
            ServiceError::Unavailable(
                "leadership changed while the request was being committed".into(),
            )
        };
        let mut outcomes = outcomes.into_iter();
        if let Some(end) = end {
            let answer = match outcomes.next() {
                // A release that waited for its holding's expiry.
                Some(Outcome::Expired { .. }) if end.expired => {
                    Err(ServiceError::NotHeld { key: key.clone() })
                }
                Some(Outcome::Released { count: n, .. }) if n > 0 => Ok(Answer::StillHeld(n)),
                Some(Outcome::Released { .. } | Outcome::Expired { .. }) => Ok(Answer::Released),
                Some(Outcome::NotFound) => Err(ServiceError::NotHeld { key: key.clone() }),
                _ => Err(gone()),
            };
            if let Some(r) = end.reply {
                self.reply(r, answer);
            }
        }
        for w in grants {
            let answer = match outcomes.next() {
                Some(Outcome::Granted {
                    token,
                    lease_ms,
                    count,
                    ..
                }) => {
                    self.counters.grants += 1;
                    Ok(Answer::Granted(Acquired {
                        token,
                        lease_ms,
                        count,
                    }))
                }
                Some(Outcome::Rejected(Reject::Busy)) => {
                    Err(ServiceError::Held { key: key.clone() })
                }
                Some(Outcome::Rejected(reject)) => Err(refusal(&key, reject)),
                _ => Err(gone()),
            };
            if w.gone {
                // Nobody to tell: the lease ends it, on the rebuilt mirror.
                tracing::info!(
                    node = self.id,
                    key,
                    "caller left before a grant from before a reload"
                );
            } else {
                self.reply(w.req, answer);
            }
        }
    }
}
