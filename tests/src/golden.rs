//! Golden bytes: formats pinned by files in `tests/golden/*.hex` (made
//! from the code as it stood when each format was pinned), and the sample
//! values the format tests encode. `LOCKD_BLESS=1` writes a golden file
//! that does not exist yet, and never rewrites one that does.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use lockd::raft::{Entry, LogId, Node, SnapshotMeta, StoredMembership};
use lockd_core::command::{Command, Grant, Holder, Mode, OpenSession, PrefixPolicy, Proclaim};
use openraft::{CommittedLeaderId, EntryPayload, Membership};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Where the golden files are.
pub fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden")
}

pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::new();
    for (i, chunk) in bytes.chunks(32).enumerate() {
        if i > 0 {
            out.push('\n');
        }
        for b in chunk {
            out.push_str(&format!("{b:02x}"));
        }
    }
    out.push('\n');
    out
}

pub fn unhex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).expect("ascii"), 16).expect("hex"))
        .collect()
}

/// The golden bytes of `name`; with `LOCKD_BLESS=1`, `now` is written
/// first when no golden file exists.
pub fn golden(name: &str, now: &[u8]) -> Vec<u8> {
    let path = golden_dir().join(format!("{name}.hex"));
    if !path.exists() && std::env::var_os("LOCKD_BLESS").is_some() {
        std::fs::create_dir_all(golden_dir()).expect("golden dir");
        std::fs::write(&path, hex(now)).expect("write golden");
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (a new format: LOCKD_BLESS=1 writes it)",
            path.display()
        )
    });
    unhex(&text)
}

/// `value` encodes to the golden bytes, which decode and encode again to
/// themselves.
pub fn pinned<T: Serialize + DeserializeOwned>(name: &str, value: &T) {
    let now = postcard::to_allocvec(value).expect("encode");
    let gold = golden(name, &now);
    assert_eq!(hex(&now), hex(&gold), "{name}: the encoding changed");
    let back: T = postcard::from_bytes(&gold)
        .unwrap_or_else(|e| panic!("{name}: the golden bytes no longer decode: {e}"));
    assert_eq!(
        postcard::to_allocvec(&back).expect("encode"),
        gold,
        "{name}: decoded and encoded again, the bytes differ"
    );
}

pub fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, 2), index)
}

pub fn entry(index: u64, payload: EntryPayload<lockd::raft::TypeConfig>) -> Entry {
    Entry {
        log_id: log_id(3, index),
        payload,
    }
}

pub fn membership() -> Membership<u64, Node> {
    let voters: BTreeSet<u64> = [1, 2, 3].into();
    let nodes: BTreeMap<u64, Node> = (1..=4)
        .map(|i| {
            (
                i,
                Node {
                    addr: format!("10.0.0.{i}:7400"),
                },
            )
        })
        .collect();
    Membership::new(vec![voters], nodes)
}

pub fn commands() -> Vec<Vec<Command>> {
    let shared = Command::Grant(Grant {
        mode: Mode::Shared,
        limit: 8,
        ..match Command::grant("cfg/a", 10_000) {
            Command::Grant(g) => g,
            _ => unreachable!("a grant"),
        }
    });
    vec![
        vec![Command::grant("jobs/nightly", 30_000), shared],
        vec![
            Command::release("jobs/nightly", 7),
            Command::expire("cfg/a", 8),
        ],
        vec![Command::SetPolicy(vec![PrefixPolicy {
            prefix: "reserved/".into(),
            reserved: true,
            max_lease_ms: Some(60_000),
            max_holders: Some(4),
            max_held: None,
        }])],
    ]
}

/// Groups of world-0.3 commands (a session, a grant in it that enters
/// again and carries a value, a proclaim, the session's end): what a
/// [`lockd_core::entry::Request::Commands03`] entry carries.
pub fn commands_0_3() -> Vec<Vec<Command>> {
    let holder = Holder {
        principal: "svc".into(),
        owner: "worker-1".into(),
    };
    vec![
        vec![Command::OpenSession(OpenSession {
            holder: holder.clone(),
            request_id: "r1".into(),
            ttl_ms: 15_000,
            max_sessions: 64,
            max_holdings: 1024,
        })],
        vec![Command::Grant(Grant {
            key: "election/db".into(),
            holder,
            request_id: "r2".into(),
            mode: Mode::Exclusive,
            limit: 1,
            lease_ms: 0,
            session: 1,
            reentrant: true,
            value: "10.0.0.7:5432".into(),
        })],
        vec![
            Command::Proclaim(Proclaim {
                key: "election/db".into(),
                token: 9,
                value: "10.0.0.8:5432".into(),
            }),
            Command::CloseSession(1),
            Command::ExpireSession(2),
        ],
    ]
}

/// [`meta`] as the core's snapshot format carries it (the same bytes).
pub fn core_meta() -> lockd_core::entry::SnapshotMeta {
    lockd::raft::convert::snapshot_meta(&meta())
}

pub fn meta() -> SnapshotMeta {
    SnapshotMeta {
        last_log_id: Some(log_id(3, 40)),
        last_membership: StoredMembership::new(Some(log_id(3, 2)), membership()),
        snapshot_id: "3-40-1".into(),
    }
}
