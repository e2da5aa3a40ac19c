//! The rules of each command, one test per rule.

use super::{apply, granted, released, BUSY};
use crate::types::Holder;
use crate::{Command, Grant, LockState, Mode, Outcome, PrefixPolicy, Reason};

fn unsupported(o: &Outcome) -> &str {
    match o {
        Outcome::Rejected(Reason::Unsupported(m)) => m,
        other => panic!("expected unsupported, got {other:?}"),
    }
}

#[test]
fn a_mutex_is_the_seed_lock() {
    let mut s = LockState::new();
    assert_eq!(apply(&mut s, Grant::exclusive("a", 10)), granted(1, 10));
    assert_eq!(apply(&mut s, Grant::exclusive("a", 10)), BUSY);
    assert_eq!(
        apply(&mut s, Command::release("a", 2)),
        Outcome::NotFound,
        "only the holder's token releases"
    );
    assert_eq!(apply(&mut s, Command::release("a", 1)), released(true));
    assert_eq!(apply(&mut s, Grant::exclusive("a", 7)), granted(2, 7));
    assert_eq!(
        apply(&mut s, Command::expire("a", 1)),
        Outcome::Expired {
            existed: false,
            freed: false
        },
        "a late expiry of the old holding changes nothing"
    );
    assert_eq!(s.holders("a")[0].token, 2);
}

#[test]
fn readers_share_up_to_the_limit_and_keep_writers_out() {
    let mut s = LockState::new();
    for t in 1..=3 {
        assert_eq!(apply(&mut s, Grant::shared("r", 5).limit(3)), granted(t, 5));
    }
    assert_eq!(apply(&mut s, Grant::shared("r", 5).limit(3)), BUSY, "full");
    assert_eq!(apply(&mut s, Grant::exclusive("r", 5)), BUSY, "writer");
    assert_eq!(apply(&mut s, Command::release("r", 2)), released(true));
    assert_eq!(
        apply(&mut s, Grant::exclusive("r", 5)),
        BUSY,
        "a reader left"
    );
    apply(&mut s, Command::release("r", 1));
    apply(&mut s, Command::expire("r", 3));
    assert_eq!(apply(&mut s, Grant::exclusive("r", 5)), granted(4, 5));
    assert_eq!(apply(&mut s, Grant::shared("r", 5).limit(3)), BUSY);
}

#[test]
fn an_exclusive_limit_n_is_a_counting_semaphore() {
    let mut s = LockState::new();
    let sem = || Grant::exclusive("s", 1).limit(2);
    assert_eq!(apply(&mut s, sem()), granted(1, 1));
    assert_eq!(apply(&mut s, sem()), granted(2, 1));
    assert_eq!(apply(&mut s, sem()), BUSY);
    assert_eq!(apply(&mut s, Grant::shared("s", 1).limit(2)), BUSY);
    let infos = s.holders("s");
    assert!(infos
        .iter()
        .all(|h| h.mode == Mode::Exclusive && h.limit == 2));
}

#[test]
fn holders_of_a_key_agree_on_its_limit() {
    let mut s = LockState::new();
    apply(&mut s, Grant::exclusive("s", 1).limit(3));
    let o = apply(&mut s, Grant::exclusive("s", 1).limit(4));
    assert!(
        unsupported(&o).contains("limit 4 differs from limit 3"),
        "{o:?}"
    );
    // Another mode waits whatever its limit: the limits of different modes
    // are never compared.
    assert_eq!(apply(&mut s, Grant::shared("s", 1).limit(9)), BUSY);
    let o = apply(&mut s, Grant::exclusive("z", 1).limit(0));
    assert!(unsupported(&o).contains("at least 1"));
    assert_eq!(s.counters().next_token, 2, "refusals use no token");
}

#[test]
fn a_retried_grant_gets_its_token_back() {
    let mut s = LockState::new();
    let g = || Grant::exclusive("k", 50).by("alice", "s1").request("r1");
    assert_eq!(apply(&mut s, g()), granted(1, 50));
    let hash = s.state_hash();
    let repeat = Outcome::Granted {
        token: 1,
        lease_ms: 50,
        repeat: true,
        count: 1,
    };
    assert_eq!(apply(&mut s, g()), repeat);
    assert_eq!(s.state_hash(), hash, "a repeat changes nothing");
    // Another request id, owner or principal is another request.
    assert_eq!(apply(&mut s, g().request("r2")), BUSY);
    assert_eq!(apply(&mut s, g().by("alice", "s2")), BUSY);
    assert_eq!(apply(&mut s, g().by("bob", "s1")), BUSY);
    // No request id: never a repeat.
    let anon = || Grant::exclusive("k", 50).by("alice", "s1");
    assert_eq!(apply(&mut s, anon()), BUSY);
    // Remembered while the holding lives, and no longer.
    apply(&mut s, Command::release("k", 1));
    assert_eq!(apply(&mut s, g()), granted(2, 50));
}

#[test]
fn a_repeat_wins_over_policy_set_after_the_grant() {
    let mut s = LockState::new();
    let g = || Grant::shared("p/k", 50).limit(2).by("a", "o").request("r");
    assert_eq!(apply(&mut s, g()), granted(1, 50));
    let rule = PrefixPolicy {
        reserved: true,
        ..PrefixPolicy::new("p/")
    };
    assert_eq!(
        apply(&mut s, Command::SetPolicy(vec![rule])),
        Outcome::PolicySet
    );
    assert!(matches!(
        apply(&mut s, g()),
        Outcome::Granted {
            token: 1,
            repeat: true,
            ..
        }
    ));
    assert!(matches!(
        apply(&mut s, g().request("other")),
        Outcome::Rejected(Reason::Policy(_))
    ));
}

#[test]
fn a_busy_grant_bars_later_grants_of_its_key_in_the_entry() {
    let mut s = LockState::new();
    apply(&mut s, Grant::shared("k", 1).limit(9));
    // Head waiter: a writer, busy behind the reader. The reader queued
    // behind it must not overtake it, though a reader could join now.
    let out = s.apply_entry(vec![
        Grant::exclusive("k", 1).into(),
        Grant::shared("k", 1).limit(9).into(),
        Grant::shared("other", 1).into(),
    ]);
    assert_eq!(out, vec![BUSY, BUSY, granted(2, 1)]);
    // Removing a holding of the key lifts the barrier.
    let out = s.apply_entry(vec![
        Grant::exclusive("k", 1).into(),
        Command::release("k", 1),
        Grant::exclusive("k", 1).into(),
        Grant::shared("k", 1).limit(9).into(),
    ]);
    assert_eq!(out, vec![BUSY, released(true), granted(3, 1), BUSY]);
    // Alone in its entry the same reader grant would have been granted.
    let mut t = LockState::new();
    apply(&mut t, Grant::shared("k", 1).limit(9));
    apply(&mut t, Grant::exclusive("k", 1));
    assert_eq!(apply(&mut t, Grant::shared("k", 1).limit(9)), granted(2, 1));
}

#[test]
fn freed_says_whether_a_waiter_can_get_in() {
    let mut s = LockState::new();
    for _ in 0..3 {
        apply(&mut s, Grant::shared("k", 1).limit(3));
    }
    let freed = released;
    assert_eq!(
        apply(&mut s, Command::release("k", 1)),
        freed(true),
        "was full"
    );
    assert_eq!(
        apply(&mut s, Command::release("k", 2)),
        freed(false),
        "had room"
    );
    assert_eq!(
        apply(&mut s, Command::release("k", 3)),
        freed(true),
        "now free"
    );
}

#[test]
fn holders_above_a_lowered_max_holders_are_kept() {
    let mut s = LockState::new();
    apply(&mut s, Grant::shared("k", 1).limit(3));
    apply(&mut s, Grant::shared("k", 1).limit(3));
    let cap = PrefixPolicy {
        max_holders: Some(1),
        ..PrefixPolicy::new("k")
    };
    apply(&mut s, Command::SetPolicy(vec![cap]));
    assert_eq!(s.holders("k").len(), 2);
    assert!(matches!(
        apply(&mut s, Grant::shared("k", 1).limit(3)),
        Outcome::Rejected(Reason::Policy(_))
    ));
    let o = apply(&mut s, Grant::shared("k", 1).limit(1));
    assert!(
        unsupported(&o).contains("limit 1 differs from limit 3"),
        "{o:?}"
    );
}

#[test]
fn policy_rules_reject_shorten_and_count() {
    let mut s = LockState::new();
    let rules = vec![
        PrefixPolicy {
            reserved: true,
            ..PrefixPolicy::new("admin/")
        },
        PrefixPolicy {
            max_lease_ms: Some(100),
            max_holders: Some(2),
            max_held: Some(2),
            ..PrefixPolicy::new("jobs/")
        },
    ];
    apply(&mut s, Command::SetPolicy(rules.clone()));
    assert_eq!(s.policy(), rules);
    assert!(matches!(
        apply(&mut s, Grant::exclusive("admin/x", 1)),
        Outcome::Rejected(Reason::Policy(m)) if m.contains("reserved prefix \"admin/\"")
    ));
    assert!(matches!(
        apply(&mut s, Grant::exclusive("jobs/a", 1).limit(3)),
        Outcome::Rejected(Reason::Policy(m)) if m.contains("above max-holders 2")
    ));
    assert_eq!(
        apply(&mut s, Grant::exclusive("jobs/a", 5000)),
        granted(1, 100)
    );
    assert_eq!(
        apply(&mut s, Grant::exclusive("jobs/b", 50)),
        granted(2, 50)
    );
    assert!(matches!(
        apply(&mut s, Grant::exclusive("jobs/c", 1)),
        Outcome::Rejected(Reason::Quota(m)) if m.contains("holds 2 of its 2")
    ));
    apply(&mut s, Command::release("jobs/a", 1));
    assert_eq!(apply(&mut s, Grant::exclusive("jobs/c", 1)), granted(3, 1));
    assert_eq!(
        apply(&mut s, Grant::exclusive("free", 5000)),
        granted(4, 5000)
    );
}

#[test]
fn a_new_policy_counts_the_holdings_already_there() {
    let mut s = LockState::new();
    apply(&mut s, Grant::shared("q/a", 1).limit(3));
    apply(&mut s, Grant::shared("q/a", 1).limit(3));
    apply(&mut s, Grant::exclusive("q/b", 1));
    apply(&mut s, Grant::exclusive("qx", 1));
    let quota = PrefixPolicy {
        max_held: Some(3),
        ..PrefixPolicy::new("q/")
    };
    apply(&mut s, Command::SetPolicy(vec![quota]));
    assert!(matches!(
        apply(&mut s, Grant::exclusive("q/c", 1)),
        Outcome::Rejected(Reason::Quota(m)) if m.contains("holds 3 of its 3")
    ));
}

#[test]
fn an_invalid_policy_changes_nothing() {
    let mut s = LockState::new();
    apply(&mut s, Command::SetPolicy(vec![PrefixPolicy::new("a")]));
    let before = s.clone();
    let o = apply(
        &mut s,
        Command::SetPolicy(vec![PrefixPolicy::new("b"), PrefixPolicy::new("b")]),
    );
    assert!(
        unsupported(&o).contains("prefix \"b\" appears twice"),
        "{o:?}"
    );
    assert_eq!(s, before);
}

#[test]
fn tokens_are_never_reused_even_at_the_end_of_the_counter() {
    let mut s = LockState::new();
    s.next_token = u64::MAX - 1;
    assert_eq!(
        apply(&mut s, Grant::exclusive("a", 1)),
        granted(u64::MAX - 1, 1)
    );
    let o = apply(&mut s, Grant::exclusive("b", 1));
    assert!(unsupported(&o).contains("exhausted"));
    assert_eq!(s.counters().next_token, u64::MAX);
}

#[test]
fn listing_pages_by_prefix() {
    let mut s = LockState::new();
    for k in ["a/1", "a/2", "a/3", "b/1", "a"] {
        apply(&mut s, Grant::exclusive(k, 1).by("p", "o"));
    }
    apply(&mut s, Grant::shared("a/2x", 1).limit(2));
    apply(&mut s, Grant::shared("a/2x", 1).limit(2));
    let keys = |prefix, after, limit| -> Vec<String> {
        s.list_keys(prefix, after, limit)
            .into_iter()
            .map(|k| k.key)
            .collect()
    };
    assert_eq!(keys("a/", None, 2), ["a/1", "a/2"]);
    assert_eq!(keys("a/", Some("a/2"), 10), ["a/2x", "a/3"]);
    assert_eq!(keys("a/", Some("0"), 1), ["a/1"], "after before the prefix");
    assert!(keys("a/", Some("a/3"), 10).is_empty());
    assert_eq!(keys("", None, u32::MAX).len(), 6);
    let page = s.list_keys("a/2x", None, 1);
    assert_eq!(page[0].holders.len(), 2);
    assert_eq!(page[0].holders[0].holder, Some(Holder::default()));
    assert_eq!(s.holders("b/1")[0].holder, Some(Holder::new("p", "o")));
    assert!(s.holders("nope").is_empty());
    let c = s.counters();
    assert_eq!((c.keys, c.holders, c.next_token), (6, 7, 8));
}
