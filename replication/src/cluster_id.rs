//! The cluster id: which cluster a data dir belongs to (docs/operations.md,
//! "A new cluster has a new cluster id").
//!
//! Node ids and addresses are reused: a cluster restored from a backup, or
//! rebuilt from one survivor, usually has nodes 1, 2, 3 on the old
//! machines. Without more, an old node brought back with its data dir
//! would ask the new nodes for votes from a higher term and a longer log,
//! and could win and overwrite the new cluster's log. So every data dir
//! records the id of its cluster, every peer hello carries it, and a node
//! refuses a peer of another cluster (both ways: the caller is refused by
//! the node it calls, and refuses a caller of another cluster).
//!
//! Where the id comes from:
//! * **bootstrap**: derived from the initial members (every node started
//!   with the same `--initial-cluster` computes the same id, with nothing
//!   exchanged);
//! * **`lockd restore`**: derived from the backup's bytes and the new
//!   members, so the nodes restored one by one from one file agree, and
//!   the id differs from the old cluster's;
//! * **`lockd recover --force-new-cluster`**: random (one node);
//! * **a node that joins** (`--join`, or a data dir written by a build
//!   without cluster ids) has none, and adopts the id of the first peer
//!   hello that names one: the leader adding or calling it.
//!
//! A node without an id sends the older hello (`Role::Peer`), which every
//! build decodes; one with an id sends `Role::PeerInCluster`. A node that
//! has an id refuses a hello that names none: the caller proves nothing
//! about its cluster.
//!
//! [`meet`] is the pure rule; [`ClusterIdentity`] holds the node's id and
//! writes it to `cluster.id` in the data dir when it is first learnt.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use sha2::{Digest, Sha256};
use thiserror::Error;

use lockd_net::wire::Role;

/// The file in the data dir.
pub const FILE: &str = "cluster.id";

/// Hex digits of an id (128 bits).
const LEN: usize = 32;

/// A cluster's id: 32 lowercase hex digits.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ClusterId(String);

#[derive(Debug, Error)]
pub enum ClusterIdError {
    #[error("a cluster id is {LEN} lowercase hex digits, not {0:?}")]
    Malformed(String),
    #[error("{path}: {reason}")]
    File { path: String, reason: String },
    #[error("no random source for a cluster id: {0}")]
    Random(String),
}

impl ClusterId {
    pub fn parse(text: &str) -> Result<ClusterId, ClusterIdError> {
        let ok = text.len() == LEN
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if ok {
            Ok(ClusterId(text.to_string()))
        } else {
            let shown: String = text.chars().take(LEN + 8).collect();
            Err(ClusterIdError::Malformed(shown))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id of a cluster bootstrapped with `members`.
    pub fn at_bootstrap(members: &BTreeMap<u64, String>) -> ClusterId {
        let mut h = Sha256::new();
        h.update(b"lockd cluster: bootstrap\n");
        hash_members(&mut h, members);
        from_digest(h)
    }

    /// The id of a cluster restored from the backup `snapshot` with
    /// `members`: the same for every node restored from the file.
    pub fn at_restore(snapshot: &[u8], members: &BTreeMap<u64, String>) -> ClusterId {
        let mut h = Sha256::new();
        h.update(b"lockd cluster: restore\n");
        h.update(Sha256::digest(snapshot));
        hash_members(&mut h, members);
        from_digest(h)
    }

    /// A fresh random id (`lockd recover`).
    pub fn random() -> Result<ClusterId, ClusterIdError> {
        let mut bytes = [0u8; LEN / 2];
        getrandom::fill(&mut bytes).map_err(|e| ClusterIdError::Random(e.to_string()))?;
        Ok(ClusterId(hex::encode(bytes)))
    }

    /// Record the id in data dir `dir`.
    pub fn write(&self, dir: &Path) -> Result<(), ClusterIdError> {
        let path = dir.join(FILE);
        lockd_log::write_atomic(&path, self.0.as_bytes()).map_err(|e| ClusterIdError::File {
            path: path.display().to_string(),
            reason: e.to_string(),
        })
    }

    /// The id data dir `dir` records, if any.
    pub fn read(dir: &Path) -> Result<Option<ClusterId>, ClusterIdError> {
        let path = dir.join(FILE);
        let file_err = |reason: String| ClusterIdError::File {
            path: path.display().to_string(),
            reason,
        };
        let Some(bytes) = lockd_log::read_atomic(&path).map_err(|e| file_err(e.to_string()))?
        else {
            return Ok(None);
        };
        let text = std::str::from_utf8(&bytes).map_err(|e| file_err(e.to_string()))?;
        ClusterId::parse(text)
            .map(Some)
            .map_err(|e| file_err(e.to_string()))
    }
}

impl std::fmt::Display for ClusterId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn hash_members(h: &mut Sha256, members: &BTreeMap<u64, String>) {
    for (id, addr) in members {
        h.update(format!("{id}={addr}\n").as_bytes());
    }
}

fn from_digest(h: Sha256) -> ClusterId {
    ClusterId(hex::encode(&h.finalize()[..LEN / 2]))
}

/// What a node does when a peer's hello names `theirs`.
#[derive(Debug, PartialEq, Eq)]
pub enum Meeting {
    /// Serve it: the same cluster, or neither side knows an id yet.
    Welcome,
    /// This node knew none: take the peer's and serve it.
    Adopt(ClusterId),
    /// Refuse it: another cluster, or (`theirs` is `None`) a caller that
    /// names none to a node that has one: any holder of a node
    /// certificate could call so, and it proves no membership.
    Refuse {
        ours: ClusterId,
        theirs: Option<ClusterId>,
    },
}

pub fn meet(ours: Option<&ClusterId>, theirs: Option<&ClusterId>) -> Meeting {
    match (ours, theirs) {
        (Some(a), b) if b != Some(a) => Meeting::Refuse {
            ours: a.clone(),
            theirs: b.cloned(),
        },
        (None, Some(b)) => Meeting::Adopt(b.clone()),
        _ => Meeting::Welcome,
    }
}

/// A node's cluster id, learnt at most once while it runs.
pub struct ClusterIdentity {
    dir: PathBuf,
    id: RwLock<Option<ClusterId>>,
}

impl ClusterIdentity {
    /// The identity of the node whose data dir is `dir`: what it records,
    /// else (a pristine data dir that bootstraps) `bootstrap`, recorded.
    pub fn open(
        dir: &Path,
        bootstrap: Option<ClusterId>,
    ) -> Result<ClusterIdentity, ClusterIdError> {
        let id = match ClusterId::read(dir)? {
            Some(id) => Some(id),
            None => match bootstrap {
                Some(id) => {
                    id.write(dir)?;
                    Some(id)
                }
                None => None,
            },
        };
        Ok(ClusterIdentity {
            dir: dir.to_path_buf(),
            id: RwLock::new(id),
        })
    }

    /// The hello node `from` opens a peer connection to node `to` with.
    pub fn hello(&self, from: u64, to: u64, fingerprint: &str) -> Role {
        let fingerprint = fingerprint.to_string();
        match self.get() {
            Some(id) => Role::PeerInCluster {
                from,
                to,
                fingerprint,
                cluster: id.0,
            },
            None => Role::Peer { from, fingerprint },
        }
    }

    /// An identity that never changes (no data dir): `lockd replay`, tests.
    pub fn fixed(id: Option<ClusterId>) -> ClusterIdentity {
        ClusterIdentity {
            dir: PathBuf::new(),
            id: RwLock::new(id),
        }
    }

    pub fn get(&self) -> Option<ClusterId> {
        self.id
            .read()
            .map(|g| g.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// Meet a peer whose hello names `theirs` (unparsed: it is the
    /// peer's word). `Err` is the reason to refuse it.
    pub fn meet_peer(&self, theirs: Option<&str>) -> Result<(), String> {
        let theirs = match theirs.map(ClusterId::parse).transpose() {
            Ok(t) => t,
            Err(e) => return Err(format!("its hello names no valid cluster: {e}")),
        };
        let mut id = self.id.write().unwrap_or_else(|p| p.into_inner());
        match meet(id.as_ref(), theirs.as_ref()) {
            Meeting::Welcome => Ok(()),
            Meeting::Refuse {
                ours,
                theirs: Some(theirs),
            } => Err(format!(
                "it belongs to cluster {theirs}, this node to cluster {ours} (an old node of a cluster that was restored or recovered? retire its data dir)"
            )),
            Meeting::Refuse { ours, theirs: None } => Err(format!(
                "its hello names no cluster, and this node belongs to cluster {ours}"
            )),
            Meeting::Adopt(new) => {
                new.write(&self.dir)
                    .map_err(|e| format!("cannot record the cluster id: {e}"))?;
                tracing::info!(cluster = %new, "joined cluster");
                *id = Some(new);
                Ok(())
            }
        }
    }
}

/// The id's 16 bytes, as bound signatures name it (zeros while the node
/// knows none: a cluster of builds before cluster ids).
impl lockd_core::replica::ClusterName for ClusterIdentity {
    fn bytes(&self) -> [u8; 16] {
        let mut out = [0u8; 16];
        if let Some(id) = self.get() {
            // A ClusterId is 32 hex digits by construction.
            let _ = hex::decode_to_slice(id.as_str(), &mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(list: &[(u64, &str)]) -> BTreeMap<u64, String> {
        list.iter().map(|(i, a)| (*i, a.to_string())).collect()
    }

    #[test]
    fn the_same_members_derive_the_same_id_and_a_restore_another() {
        let m = members(&[(1, "a:1"), (2, "b:1"), (3, "c:1")]);
        let again = members(&[(3, "c:1"), (1, "a:1"), (2, "b:1")]);
        assert_eq!(ClusterId::at_bootstrap(&m), ClusterId::at_bootstrap(&again));
        assert_ne!(
            ClusterId::at_bootstrap(&m),
            ClusterId::at_bootstrap(&members(&[(1, "a:1"), (2, "b:1"), (3, "c:2")]))
        );
        let restored = ClusterId::at_restore(b"backup", &m);
        assert_ne!(restored, ClusterId::at_bootstrap(&m));
        assert_eq!(restored, ClusterId::at_restore(b"backup", &again));
        assert_ne!(restored, ClusterId::at_restore(b"another backup", &m));
        assert_ne!(ClusterId::random().unwrap(), ClusterId::random().unwrap());
    }

    #[test]
    fn only_32_lowercase_hex_digits_parse() {
        let id = ClusterId::at_bootstrap(&members(&[(1, "a:1")]));
        assert_eq!(ClusterId::parse(id.as_str()).unwrap(), id);
        for bad in ["", "00", &"A".repeat(32), &"0".repeat(33), &"g".repeat(32)] {
            assert!(ClusterId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_node_refuses_another_cluster_and_adopts_only_when_it_has_none() {
        let a = ClusterId::at_bootstrap(&members(&[(1, "a:1")]));
        let b = ClusterId::at_bootstrap(&members(&[(1, "b:1")]));
        assert_eq!(meet(Some(&a), Some(&a)), Meeting::Welcome);
        assert_eq!(
            meet(Some(&a), None),
            Meeting::Refuse {
                ours: a.clone(),
                theirs: None
            }
        );
        assert_eq!(meet(None, None), Meeting::Welcome);
        assert_eq!(meet(None, Some(&b)), Meeting::Adopt(b.clone()));
        assert_eq!(
            meet(Some(&a), Some(&b)),
            Meeting::Refuse {
                ours: a.clone(),
                theirs: Some(b.clone())
            }
        );
    }

    #[test]
    fn an_adopted_id_is_recorded_and_then_holds() {
        let dir = tempfile::tempdir().unwrap();
        let a = ClusterId::at_bootstrap(&members(&[(1, "a:1")]));
        let b = ClusterId::at_bootstrap(&members(&[(1, "b:1")]));
        let joiner = ClusterIdentity::open(dir.path(), None).unwrap();
        assert_eq!(joiner.get(), None);
        assert!(joiner.meet_peer(Some("not hex")).is_err());
        assert_eq!(joiner.get(), None, "a bad hello changes nothing");
        joiner.meet_peer(Some(a.as_str())).unwrap();
        assert_eq!(joiner.get(), Some(a.clone()));
        let why = joiner.meet_peer(Some(b.as_str())).unwrap_err();
        assert!(
            why.contains(b.as_str()) && why.contains(a.as_str()),
            "{why}"
        );
        // After a restart the recorded id wins over a bootstrap id.
        let restarted = ClusterIdentity::open(dir.path(), Some(b)).unwrap();
        assert_eq!(restarted.get(), Some(a));
    }
}
