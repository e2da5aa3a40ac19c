//! The auth file: principals, their tokens (stored hashed) and their
//! roles, and what each role allows. Pure: text in, [`Rules`] out.
//!
//! ```toml
//! # A role of your own: lock use on key prefixes, and optionally reads.
//! [roles.jobs]
//! lock = ["jobs/", "batch/"]   # acquire, release, keepalive (and read) keys under these
//! read = false                 # true: also every right of the built-in `read` role
//!
//! # A principal is a client certificate's name (its first DNS name) or
//! # the name a token stands for.
//! [principals.admin]
//! roles = ["admin"]            # built-in: everything
//!
//! [principals.ci]
//! roles = ["jobs", "read"]     # built-in `read`: get, list, status, metrics, audit
//! tokens = ["sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"]
//! ```
//!
//! A token is stored as the hex SHA-256 of the whole token text
//! (`lockd auth token NAME` makes one). Tokens are long random strings, so
//! a plain hash is enough: there is nothing to guess that a slower hash
//! would protect. Everything not allowed is denied.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Deserialize;
use sha2::{Digest, Sha256};
use thiserror::Error;

/// The built-in role with every right.
pub const ADMIN: &str = "admin";
/// The built-in role that reads everything and changes nothing.
pub const READ: &str = "read";
/// The most principals, roles, prefixes and tokens a file may hold: it
/// is read into memory whole and searched on every request.
pub(crate) const MAX_ENTRIES: usize = 10_000;
/// The longest principal or role name, or lock prefix, in bytes.
pub(crate) const MAX_NAME_BYTES: usize = 1024;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum RulesError {
    #[error("{0}")]
    Toml(String),
    #[error("principal {0:?}: a principal's name is 1 to {MAX_NAME_BYTES} bytes")]
    BadName(String),
    #[error("principal {0:?}: names of the form node-N.lockd belong to the nodes' certificates")]
    NodeName(String),
    #[error("role {0:?} is built in; define roles of other names")]
    BuiltIn(String),
    #[error("principal {principal:?} has role {role:?}, which is neither built in (admin, read) nor defined under [roles]")]
    UnknownRole { principal: String, role: String },
    #[error("role {role:?}: lock prefix {prefix:?} is over {MAX_NAME_BYTES} bytes")]
    LongPrefix { role: String, prefix: String },
    #[error("principal {principal:?}: token {token:?} is not sha256:<64 hex digits>")]
    BadToken { principal: String, token: String },
    #[error("one token is listed for both {0:?} and {1:?}")]
    SharedToken(String, String),
    #[error("the file holds {0} entries; at most {MAX_ENTRIES}")]
    TooMany(usize),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    roles: BTreeMap<String, RoleFile>,
    #[serde(default)]
    principals: BTreeMap<String, PrincipalFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleFile {
    #[serde(default)]
    lock: Vec<String>,
    #[serde(default)]
    read: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PrincipalFile {
    #[serde(default)]
    roles: Vec<String>,
    #[serde(default)]
    tokens: Vec<String>,
}

/// What one principal may do, its roles folded together.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grants {
    pub admin: bool,
    pub read: bool,
    /// Key prefixes it may lock (and read); `""` is every key.
    pub lock: BTreeSet<String>,
    /// Its roles' names, for log lines.
    pub roles: Vec<String>,
}

impl Grants {
    /// Whether `key` is under one of the lock prefixes.
    pub(crate) fn may_lock(&self, key: &str) -> bool {
        self.lock.iter().any(|p| key.starts_with(p.as_str()))
    }

    /// Whether it may lock any key at all.
    pub(crate) fn may_lock_some(&self) -> bool {
        !self.lock.is_empty()
    }
}

/// The parsed auth file.
#[derive(Debug, Default)]
pub struct Rules {
    principals: HashMap<String, Grants>,
    /// SHA-256 of a token → the principal it names.
    tokens: HashMap<[u8; 32], String>,
}

/// The SHA-256 of a token, as the file stores it.
pub fn token_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn is_node_name(name: &str) -> bool {
    name.strip_prefix("node-")
        .and_then(|r| r.strip_suffix(".lockd"))
        .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
}

impl Rules {
    pub fn parse(text: &str) -> Result<Rules, RulesError> {
        let file: File = toml::from_str(text).map_err(|e| RulesError::Toml(e.to_string()))?;
        let entries = file.roles.len()
            + file.principals.len()
            + file.roles.values().map(|r| r.lock.len()).sum::<usize>()
            + file
                .principals
                .values()
                .map(|p| p.roles.len() + p.tokens.len())
                .sum::<usize>();
        if entries > MAX_ENTRIES {
            return Err(RulesError::TooMany(entries));
        }
        for (name, role) in &file.roles {
            if name == ADMIN || name == READ {
                return Err(RulesError::BuiltIn(name.clone()));
            }
            if let Some(p) = role.lock.iter().find(|p| p.len() > MAX_NAME_BYTES) {
                return Err(RulesError::LongPrefix {
                    role: name.clone(),
                    prefix: p.clone(),
                });
            }
        }
        let mut rules = Rules::default();
        for (name, p) in file.principals {
            if name.is_empty() || name.len() > MAX_NAME_BYTES {
                return Err(RulesError::BadName(name));
            }
            if is_node_name(&name) {
                return Err(RulesError::NodeName(name));
            }
            let mut grants = Grants::default();
            for role in &p.roles {
                match role.as_str() {
                    ADMIN => grants.admin = true,
                    READ => grants.read = true,
                    other => {
                        let Some(def) = file.roles.get(other) else {
                            return Err(RulesError::UnknownRole {
                                principal: name.clone(),
                                role: role.clone(),
                            });
                        };
                        grants.read |= def.read;
                        grants.lock.extend(def.lock.iter().cloned());
                    }
                }
                grants.roles.push(role.clone());
            }
            for token in &p.tokens {
                let hash = token
                    .strip_prefix("sha256:")
                    .and_then(|h| hex::decode(h).ok())
                    .and_then(|b| <[u8; 32]>::try_from(b).ok())
                    .ok_or_else(|| RulesError::BadToken {
                        principal: name.clone(),
                        token: token.clone(),
                    })?;
                if let Some(other) = rules.tokens.insert(hash, name.clone()) {
                    if other != name {
                        return Err(RulesError::SharedToken(other, name));
                    }
                }
            }
            rules.principals.insert(name, grants);
        }
        Ok(rules)
    }

    /// What `principal` may do (nothing, if the file does not name it).
    pub fn grants(&self, principal: &str) -> Option<&Grants> {
        self.principals.get(principal)
    }

    /// The principal `token` stands for.
    pub(crate) fn principal_of_token(&self, token: &str) -> Option<&str> {
        self.tokens.get(&token_hash(token)).map(String::as_str)
    }

    pub fn principals(&self) -> usize {
        self.principals.len()
    }

    pub fn tokens(&self) -> usize {
        self.tokens.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
        [roles.jobs]
        lock = ["jobs/", "batch/"]

        [roles.ops]
        lock = [""]
        read = true

        [principals.admin]
        roles = ["admin"]

        [principals.ci]
        roles = ["jobs"]
        tokens = ["sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"]

        [principals.op]
        roles = ["ops"]
    "#;

    #[test]
    fn roles_fold_into_grants_and_tokens_name_principals() {
        let r = Rules::parse(FILE).expect("parse");
        let ci = r.grants("ci").expect("ci");
        assert!(!ci.admin && !ci.read);
        assert!(ci.may_lock("jobs/x") && ci.may_lock("batch/") && !ci.may_lock("job"));
        assert!(r.grants("admin").expect("admin").admin);
        let op = r.grants("op").expect("op");
        assert!(op.read && op.may_lock("anything"));
        assert_eq!(r.principal_of_token("test"), Some("ci"));
        assert_eq!(r.principal_of_token("Test"), None);
        assert!(r.grants("nobody").is_none());
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let bad = |text: &str| Rules::parse(text).expect_err(text);
        assert!(matches!(
            bad("[principals.a]\nroles = [\"x\"]"),
            RulesError::UnknownRole { .. }
        ));
        assert!(matches!(
            bad("[roles.admin]\nlock = [\"\"]"),
            RulesError::BuiltIn(_)
        ));
        assert!(matches!(
            bad("[principals.a]\ntokens = [\"abc\"]"),
            RulesError::BadToken { .. }
        ));
        assert!(matches!(
            bad("[principals.\"node-2.lockd\"]\nroles = [\"admin\"]"),
            RulesError::NodeName(_)
        ));
        assert!(matches!(
            bad("[principals.a]\nrole = []"),
            RulesError::Toml(_)
        ));
        let shared = "[principals.a]\ntokens = [\"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"]\n[principals.b]\ntokens = [\"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"]";
        assert!(matches!(bad(shared), RulesError::SharedToken(..)));
        assert!(Rules::parse("").expect("empty").principals() == 0);
    }
}
