//! The election policy of the reference 0.4 module (`pick`, world
//! `lockd:sm@0.4.0`): which waiting candidate takes a key that frees.
//!
//! The rules, in order:
//!
//! 1. **Priority.** The candidates that asked for the highest priority go
//!    before all others (a candidate that gives none asks for 0). A
//!    standby campaigning at priority 0 behind a preferred node at 10
//!    takes over only when no preferred candidate waits.
//! 2. **Sticky leadership.** Among those, the holder whose lease has just
//!    run out (`leaving`, given only for an expiry, never for a release)
//!    goes first when it waits again: a leader that lost its lease to a
//!    pause or a short partition and campaigned again keeps leading
//!    instead of handing over to the next in line. Only a named holder
//!    (an owner) is recognised: an anonymous one is everyone.
//! 3. **Otherwise FIFO**: the oldest of them.
//!
//! A pure function of its arguments: it reads no state, so the answer is
//! the same at any applied index. It is a leader's query, not a command,
//! and never replicated; what commits is the grant the leader proposes
//! for the candidate picked.

use crate::types::{Holder, Mode};

/// A waiting candidate, as `pick` sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub holder: Holder,
    pub mode: Mode,
    pub priority: u32,
}

/// The index of the candidate that goes first (see the module docs), or
/// `None` when that is the first one (also for no candidates).
pub fn pick(leaving: Option<&Holder>, candidates: &[Candidate]) -> Option<u32> {
    let top = candidates.iter().map(|c| c.priority).max()?;
    let sticky = leaving.filter(|h| !h.owner.is_empty());
    let best = candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| c.priority == top)
        .find(|(_, c)| sticky.is_some_and(|h| *h == c.holder))
        .or_else(|| {
            candidates
                .iter()
                .enumerate()
                .find(|(_, c)| c.priority == top)
        })
        .map(|(i, _)| i)?;
    match best {
        0 => None,
        i => u32::try_from(i).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(owner: &str, priority: u32) -> Candidate {
        Candidate {
            holder: Holder::new("p", owner),
            mode: Mode::Exclusive,
            priority,
        }
    }

    #[test]
    fn fifo_when_nothing_sets_anyone_apart() {
        assert_eq!(pick(None, &[]), None);
        assert_eq!(pick(None, &[c("a", 0), c("b", 0)]), None);
        assert_eq!(
            pick(Some(&Holder::new("p", "z")), &[c("a", 3), c("b", 3)]),
            None
        );
    }

    #[test]
    fn the_highest_priority_goes_first_and_fifo_among_equals() {
        assert_eq!(pick(None, &[c("a", 0), c("b", 5), c("c", 5)]), Some(1));
        assert_eq!(pick(None, &[c("a", 1), c("b", 0), c("c", 2)]), Some(2));
    }

    #[test]
    fn a_leader_whose_lease_ran_out_leads_again_within_its_priority() {
        let leaving = Holder::new("p", "c");
        assert_eq!(
            pick(Some(&leaving), &[c("a", 0), c("b", 0), c("c", 0)]),
            Some(2)
        );
        // A higher priority still goes first.
        assert_eq!(pick(Some(&leaving), &[c("a", 1), c("c", 0)]), None);
        // Another principal with the same owner is somebody else.
        let other = Holder::new("q", "c");
        assert_eq!(pick(Some(&other), &[c("a", 0), c("c", 0)]), None);
    }

    #[test]
    fn an_anonymous_holder_is_nobody_in_particular() {
        let leaving = Holder::new("p", "");
        assert_eq!(pick(Some(&leaving), &[c("a", 0), c("", 0)]), None);
    }
}
