//! Unit tests of the capacity bound: the plan of a range's guest calls, a
//! group's refusal, and the use followed command by command.
use super::*;
use crate::command::{Granted, Released};

fn limits(max_held: u64, max_key_bytes: u64) -> Capacity {
    Capacity {
        max_held,
        max_key_bytes,
    }
}

#[test]
fn plan_stops_at_the_first_group_that_could_pass_a_bound() {
    let g = |k: &str| vec![Command::grant(k, 5)];
    let groups = vec![g("a"), vec![Command::release("a", 1)], g("b"), g("c")];
    let start = Usage {
        held: 1,
        key_bytes: 1,
    };
    assert_eq!(plan(&groups, start, limits(3, 100)), 3);
    assert_eq!(plan(&groups, start, limits(10, 3)), 3);
    assert_eq!(plan(&groups, start, limits(10, 100)), 4);
    assert_eq!(plan(&groups, start, limits(1, 100)), 0);
}

#[test]
fn plan_cuts_long_ranges_between_groups() {
    let big: Vec<Command> = (0..MAX_COMMANDS_PER_CALL - 1)
        .map(|i| Command::expire(format!("k{i}"), 1))
        .collect();
    let groups = vec![big.clone(), big.clone(), big];
    let room = limits(10, 100);
    assert_eq!(plan(&groups, Usage::default(), room), 1);
    assert_eq!(plan(&groups[2..], Usage::default(), room), 1);
    let huge = vec![(0..MAX_COMMANDS_PER_CALL * 2)
        .map(|i| Command::expire(format!("k{i}"), 1))
        .collect::<Vec<_>>()];
    assert_eq!(plan(&huge, Usage::default(), room), 1);
}

#[test]
fn a_refused_group_keeps_its_other_commands() {
    let group = vec![
        Command::release("a", 1),
        Command::grant("b", 5),
        Command::grant("c", 5),
    ];
    let full = Usage {
        held: 2,
        key_bytes: 2,
    };
    let why = refusal(&group, full, limits(3, 100)).expect("refused");
    assert!(is_capacity(&why), "{why}");
    assert_eq!(refusal(&group, full, limits(4, 100)), None);
    let (rest, is_grant) = without_grants(&group);
    assert_eq!(rest, vec![Command::release("a", 1)]);
    let out = merge(
        &is_grant,
        vec![Outcome::Released(Released {
            freed: true,
            count: 0,
        })],
        &why,
    );
    assert_eq!(
        out[0],
        Outcome::Released(Released {
            freed: true,
            count: 0
        })
    );
    assert!(matches!(&out[1], Outcome::Rejected(Reason::Quota(w)) if is_capacity(w)));
    assert!(matches!(&out[2], Outcome::Rejected(Reason::Quota(_))));
}

#[test]
fn use_follows_what_really_changed() {
    let mut u = Usage::default();
    let granted = |repeat| {
        Outcome::Granted(Granted {
            token: 1,
            lease_ms: 5,
            repeat,
            count: 1,
        })
    };
    u.account(
        &[Command::grant("ab", 5), Command::grant("cd", 5)],
        &[granted(false), granted(true)],
    );
    assert_eq!(
        u,
        Usage {
            held: 1,
            key_bytes: 2
        }
    );
    u.account(&[Command::release("zz", 9)], &[Outcome::NotFound]);
    u.account(
        &[Command::release("ab", 1)],
        &[Outcome::Released(Released {
            freed: true,
            count: 0,
        })],
    );
    assert_eq!(u, Usage::default());
}
