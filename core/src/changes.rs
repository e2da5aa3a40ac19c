//! What a committed entry changed in the lock table, as watchers see it.
//!
//! Every node derives the same changes from the same entries: they come
//! from the commands and the outcomes the module returned, nothing else,
//! so a watch on any node yields one sequence (docs/watch.md). Only what
//! changed the table counts: a grant that made a new holding (not a repeat
//! of one already committed, not a reentrant holder entering again), a
//! release that removed a holding (not one that only lowered its count),
//! an expiry that removed one, and the end of a session: one `released`
//! (closed) or `expired` (expired) per holding it had. Refusals, repeats,
//! releases of nothing and policy changes are not changes of holders. A
//! holding's value is a change of its own (`value`), after the grant that
//! carried it and at each `proclaim`. Waiters are not replicated (each
//! leader queues its own), so they are not here.

use crate::command::{Command, Mode, Outcome};

/// One change of one key's holders, at a log index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub index: u64,
    pub key: String,
    pub kind: ChangeKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// A new holding.
    Granted {
        token: u64,
        lease_ms: u64,
        mode: Mode,
        limit: u32,
        /// Empty strings where the grant named no one (world 0.1, or
        /// authentication off and no owner given).
        principal: String,
        owner: String,
    },
    /// The holding with `token` was released (0: a world-0.1 release,
    /// which names no token).
    Released { token: u64 },
    /// The holding with `token` expired.
    Expired { token: u64 },
    /// The holding with `token` published `value`: right after its grant
    /// when the grant carried one, and at each `proclaim` (an election's
    /// leader value).
    Value { token: u64, value: String },
}

/// The changes of the entry at `index`: its commands' groups and the
/// outcome of each command, in order (the module's answer, after the
/// host's capacity bound), appended to `out`.
pub fn of_entry(
    index: u64,
    groups: &[Vec<Command>],
    outcomes: &[Vec<Outcome>],
    out: &mut Vec<Change>,
) {
    for (commands, answered) in groups.iter().zip(outcomes) {
        for (command, outcome) in commands.iter().zip(answered) {
            of_command(index, command, outcome, out);
        }
    }
}

/// The changes one command made (most make one or none; a session's end
/// one per holding), appended to `out`.
pub fn of_command(index: u64, command: &Command, outcome: &Outcome, out: &mut Vec<Change>) {
    let (key, kind) = match (command, outcome) {
        (Command::CloseSession(_) | Command::ExpireSession(_), Outcome::SessionEnded(e)) => {
            let expired = matches!(command, Command::ExpireSession(_));
            out.extend(e.released.iter().map(|r| Change {
                index,
                key: r.key.clone(),
                kind: if expired {
                    ChangeKind::Expired { token: r.token }
                } else {
                    ChangeKind::Released { token: r.token }
                },
            }));
            return;
        }
        (Command::Proclaim(p), Outcome::Proclaimed) => (
            &p.key,
            ChangeKind::Value {
                token: p.token,
                value: p.value.clone(),
            },
        ),
        (Command::Grant(g), Outcome::Granted(d))
            if !d.repeat && d.count <= 1 && !g.value.is_empty() =>
        {
            out.push(Change {
                index,
                key: g.key.clone(),
                kind: granted(g, d),
            });
            (
                &g.key,
                ChangeKind::Value {
                    token: d.token,
                    value: g.value.clone(),
                },
            )
        }
        (Command::Grant(g), Outcome::Granted(d)) if !d.repeat && d.count <= 1 => {
            (&g.key, granted(g, d))
        }
        (Command::Release(r), Outcome::Released(x)) if x.count == 0 => {
            (&r.key, ChangeKind::Released { token: r.token })
        }
        (Command::Expire(r), Outcome::Expired(e)) if e.existed => {
            (&r.key, ChangeKind::Expired { token: r.token })
        }
        _ => return,
    };
    out.push(Change {
        index,
        key: key.clone(),
        kind,
    });
}

/// The change a new holding makes.
fn granted(g: &crate::command::Grant, d: &crate::command::Granted) -> ChangeKind {
    ChangeKind::Granted {
        token: d.token,
        lease_ms: d.lease_ms,
        mode: g.mode,
        limit: g.limit,
        principal: g.holder.principal.clone(),
        owner: g.holder.owner.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{Expired, Granted, Reason, Released};

    fn granted(token: u64, repeat: bool) -> Outcome {
        Outcome::Granted(Granted {
            token,
            lease_ms: 500,
            repeat,
            count: 1,
        })
    }

    #[test]
    fn only_what_changed_the_table_is_a_change() {
        let groups = vec![
            vec![Command::grant("a", 500), Command::grant("b", 500)],
            vec![
                Command::grant("a", 500),
                Command::release("a", 7),
                Command::release("zz", 9),
                Command::expire("c", 3),
                Command::expire("d", 4),
            ],
        ];
        let outcomes = vec![
            vec![granted(7, false), Outcome::Rejected(Reason::Busy)],
            vec![
                granted(7, true),
                Outcome::Released(Released {
                    freed: true,
                    count: 0,
                }),
                Outcome::NotFound,
                Outcome::Expired(Expired {
                    existed: true,
                    freed: true,
                }),
                Outcome::Expired(Expired {
                    existed: false,
                    freed: false,
                }),
            ],
        ];
        let mut out = Vec::new();
        of_entry(12, &groups, &outcomes, &mut out);
        let seen: Vec<(&str, &ChangeKind)> =
            out.iter().map(|c| (c.key.as_str(), &c.kind)).collect();
        assert_eq!(
            seen,
            vec![
                (
                    "a",
                    &ChangeKind::Granted {
                        token: 7,
                        lease_ms: 500,
                        mode: Mode::Exclusive,
                        limit: 1,
                        principal: String::new(),
                        owner: String::new(),
                    }
                ),
                ("a", &ChangeKind::Released { token: 7 }),
                ("c", &ChangeKind::Expired { token: 3 }),
            ]
        );
        assert!(out.iter().all(|c| c.index == 12));
    }
}
