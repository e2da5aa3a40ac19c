//! Golden bytes: the snapshot formats and state hashes pinned by files in
//! `guest-sm/logic/golden/*.hex`. The format-3 file and the 0.2 state hash
//! were written by the 0.2 module as it stood before the logic moved into
//! this crate, so they hold the logic to 0.2's bytes on 0.2 input; the
//! format-4 files were made from this code when the format was pinned.
//! `LOCKD_BLESS=1` writes a golden file that does not exist yet, and never
//! rewrites one that does (a changed format is a new format, not a new
//! golden file).

use std::path::PathBuf;

use super::apply;
use super::formats::busy_state;
use crate::snapshot::decode;
use crate::{Grant, LockState, OpenSession};

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden")
}

fn hex(bytes: &[u8]) -> String {
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

fn unhex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).expect("ascii"), 16).expect("hex"))
        .collect()
}

/// The golden bytes of `name`; with `LOCKD_BLESS=1`, `now` is written
/// first when no golden file exists.
fn golden(name: &str, now: &[u8]) -> Vec<u8> {
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

/// `s` snapshots to the golden bytes, which decode to `s` again, and its
/// state hash is the golden hash.
fn pinned(snapshot: &str, hash: &str, s: &LockState) {
    let now = s.snapshot();
    let gold = golden(snapshot, &now);
    assert_eq!(hex(&now), hex(&gold), "{snapshot}: the encoding changed");
    let back = decode(&gold).unwrap_or_else(|e| panic!("{snapshot} no longer decodes: {e}"));
    assert_eq!(&back, s, "{snapshot}: decoded, the state differs");
    let gold_hash = golden(hash, &s.state_hash());
    assert_eq!(
        hex(&s.state_hash()),
        hex(&gold_hash),
        "{hash}: the hash changed"
    );
    assert_eq!(back.state_hash(), s.state_hash());
}

/// A 0.2 state (shared and semaphore keys, holders, request ids, policy, a
/// released holding) is written in format 3 with 0.2's bytes and hash.
#[test]
fn a_0_2_state_has_0_2_s_snapshot_and_hash() {
    let s = busy_state();
    assert_eq!(s.snapshot()[4], 3);
    pinned("snapshot_format_3", "state_hash_0_2", &s);
}

/// One session with a request id and a holding in it, entered twice, with
/// a value: every 0.3 field once.
#[test]
fn a_small_0_3_state_has_its_pinned_format_4_and_hash() {
    let mut s = LockState::new();
    apply(
        &mut s,
        OpenSession::new(100)
            .by("p", "o")
            .request("r")
            .max_holdings(3),
    );
    let g = || Grant::exclusive("e", 1).by("p", "o").session(1).reentrant();
    apply(&mut s, g().value("v"));
    apply(&mut s, g());
    assert_eq!(s.snapshot()[4], 4);
    pinned("snapshot_format_4", "state_hash_0_3", &s);
}
