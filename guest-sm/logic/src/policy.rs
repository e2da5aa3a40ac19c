//! Policy data: rules per key prefix, kept in the replicated state and
//! replaced as a whole by the admin command `set-policy`.
//!
//! A key is governed by **every** rule whose prefix it starts with (the
//! empty prefix matches every key), and where several rules limit the same
//! thing the strictest wins: nested prefixes compose (`jobs/` may cap leases
//! while `jobs/nightly/` has a quota of its own) and no rule can be escaped
//! by a more specific one. Rules are bounded ([`MAX_RULES`] rules, prefixes
//! of at most [`MAX_PREFIX_BYTES`]), so checking a grant against them is
//! bounded too; with no rules it costs nothing.
//!
//! A new policy applies to later grants only: holdings already granted are
//! kept even when they exceed it (a quota lowered below its use refuses new
//! grants until enough holdings end).
//!
//! For quotas the policy keeps, per rule, the number of holdings under its
//! prefix (`held`), updated as holdings come and go and recounted when the
//! rules are replaced or a snapshot is restored. It is derived data: not in
//! the snapshot, not in the state hash.

use std::collections::BTreeMap;

use thiserror::Error;

use crate::hash;
use crate::types::{PrefixPolicy, Reason};

/// The most rules the policy data may have.
pub const MAX_RULES: usize = 256;
/// The longest prefix a rule may have, in bytes.
pub const MAX_PREFIX_BYTES: usize = 1024;

/// Why a `set-policy` (or the policy data of a snapshot) is invalid.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PolicyError {
    #[error("{0} rules; at most {max} are allowed", max = MAX_RULES)]
    TooManyRules(usize),
    #[error("a prefix of {0} bytes; at most {max} are allowed", max = MAX_PREFIX_BYTES)]
    PrefixTooLong(usize),
    #[error("prefix {0:?} appears twice")]
    DuplicatePrefix(String),
    #[error("max-lease-ms of prefix {0:?} is 0; it must be at least 1")]
    ZeroMaxLease(String),
    #[error("max-holders of prefix {0:?} is 0; it must be at least 1 (use reserved to forbid the prefix)")]
    ZeroMaxHolders(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    policy: PrefixPolicy,
    /// Holdings under the prefix now.
    held: u64,
}

/// The validated policy data and the quota counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    rules: BTreeMap<String, Rule>,
    digest: [u8; 32],
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            rules: BTreeMap::new(),
            digest: hash::policy_digest([].iter()),
        }
    }
}

impl Policy {
    /// Validate `rules`; quota counts start at zero (see [`Policy::count`]).
    pub fn from_rules(rules: Vec<PrefixPolicy>) -> Result<Policy, PolicyError> {
        if rules.len() > MAX_RULES {
            return Err(PolicyError::TooManyRules(rules.len()));
        }
        let mut map = BTreeMap::new();
        for policy in rules {
            let prefix = policy.prefix.clone();
            if prefix.len() > MAX_PREFIX_BYTES {
                return Err(PolicyError::PrefixTooLong(prefix.len()));
            }
            if policy.max_lease_ms == Some(0) {
                return Err(PolicyError::ZeroMaxLease(prefix));
            }
            if policy.max_holders == Some(0) {
                return Err(PolicyError::ZeroMaxHolders(prefix));
            }
            if map.contains_key(&prefix) {
                return Err(PolicyError::DuplicatePrefix(prefix));
            }
            map.insert(prefix, Rule { policy, held: 0 });
        }
        let digest = hash::policy_digest(map.values().map(|r| &r.policy));
        Ok(Policy { rules: map, digest })
    }

    /// The rules in prefix order.
    pub fn rules(&self) -> Vec<PrefixPolicy> {
        self.rules.values().map(|r| r.policy.clone()).collect()
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn digest(&self) -> &[u8; 32] {
        &self.digest
    }

    fn matching<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a Rule> + 'a {
        self.rules
            .values()
            .filter(move |r| key.starts_with(r.policy.prefix.as_str()))
    }

    /// The rules a grant for `key` with `limit` breaks before the key's
    /// holders are even looked at: a reserved prefix, a limit above a
    /// max-holders.
    pub fn check_grant(&self, key: &str, limit: u32) -> Result<(), Reason> {
        for r in self.matching(key) {
            let p = &r.policy;
            if p.reserved {
                return Err(Reason::Policy(format!(
                    "key {key:?} is under the reserved prefix {:?}",
                    p.prefix
                )));
            }
            if let Some(max) = p.max_holders.filter(|&max| limit > max) {
                return Err(Reason::Policy(format!(
                    "limit {limit} is above max-holders {max} of prefix {:?}",
                    p.prefix
                )));
            }
        }
        Ok(())
    }

    /// The quota check: every matching rule with `max-held` must have room
    /// for one more holding.
    pub fn check_quota(&self, key: &str) -> Result<(), Reason> {
        for r in self.matching(key) {
            if let Some(max) = r.policy.max_held.filter(|&max| r.held >= max) {
                return Err(Reason::Quota(format!(
                    "prefix {:?} holds {} of its {max} locks",
                    r.policy.prefix, r.held
                )));
            }
        }
        Ok(())
    }

    /// The longest lease a grant for `key` gets, if a rule says.
    pub fn lease_cap(&self, key: &str) -> Option<u64> {
        self.matching(key)
            .filter_map(|r| r.policy.max_lease_ms)
            .min()
    }

    /// A holding of `key` came (`delta` 1) or went (`delta` -1).
    pub fn count(&mut self, key: &str, delta: i8) {
        if self.rules.is_empty() {
            return;
        }
        for r in self.rules.values_mut() {
            if key.starts_with(r.policy.prefix.as_str()) {
                r.held = if delta >= 0 {
                    r.held.saturating_add(1)
                } else {
                    r.held.saturating_sub(1)
                };
            }
        }
    }

    /// Count holdings under every prefix from scratch: `held(prefix)` is the
    /// number of holdings of keys that start with it.
    pub fn recount(&mut self, held: impl Fn(&str) -> u64) {
        for r in self.rules.values_mut() {
            r.held = held(&r.policy.prefix);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(prefix: &str) -> PrefixPolicy {
        PrefixPolicy::new(prefix)
    }

    #[test]
    fn invalid_rules_are_refused() {
        let many = (0..=MAX_RULES).map(|i| rule(&i.to_string())).collect();
        assert_eq!(
            Policy::from_rules(many),
            Err(PolicyError::TooManyRules(MAX_RULES + 1))
        );
        let long = "x".repeat(MAX_PREFIX_BYTES + 1);
        assert_eq!(
            Policy::from_rules(vec![rule(&long)]),
            Err(PolicyError::PrefixTooLong(MAX_PREFIX_BYTES + 1))
        );
        assert_eq!(
            Policy::from_rules(vec![rule("a"), rule("b"), rule("a")]),
            Err(PolicyError::DuplicatePrefix("a".into()))
        );
        let zero_lease = PrefixPolicy {
            max_lease_ms: Some(0),
            ..rule("a")
        };
        assert!(matches!(
            Policy::from_rules(vec![zero_lease]),
            Err(PolicyError::ZeroMaxLease(_))
        ));
        let zero_holders = PrefixPolicy {
            max_holders: Some(0),
            ..rule("a")
        };
        assert!(matches!(
            Policy::from_rules(vec![zero_holders]),
            Err(PolicyError::ZeroMaxHolders(_))
        ));
    }

    #[test]
    fn every_matching_rule_applies_and_the_strictest_wins() {
        let p = Policy::from_rules(vec![
            PrefixPolicy {
                max_lease_ms: Some(100),
                max_holders: Some(8),
                ..rule("")
            },
            PrefixPolicy {
                max_lease_ms: Some(500),
                max_holders: Some(3),
                ..rule("jobs/")
            },
        ])
        .unwrap();
        assert_eq!(p.lease_cap("jobs/x"), Some(100));
        assert_eq!(p.lease_cap("other"), Some(100));
        assert!(p.check_grant("jobs/x", 3).is_ok());
        assert!(p.check_grant("other", 8).is_ok());
        assert!(p.check_grant("other", 9).is_err());
        assert!(matches!(
            p.check_grant("jobs/x", 4),
            Err(Reason::Policy(m)) if m.contains("\"jobs/\"")
        ));
    }

    #[test]
    fn quota_counts_follow_holdings() {
        let mut p = Policy::from_rules(vec![PrefixPolicy {
            max_held: Some(1),
            ..rule("q/")
        }])
        .unwrap();
        assert!(p.check_quota("q/a").is_ok());
        p.count("q/a", 1);
        p.count("elsewhere", 1);
        assert!(matches!(p.check_quota("q/b"), Err(Reason::Quota(_))));
        assert!(p.check_quota("elsewhere").is_ok());
        p.count("q/a", -1);
        assert!(p.check_quota("q/b").is_ok());
    }
}
