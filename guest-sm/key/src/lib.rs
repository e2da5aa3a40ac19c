//! What the lock modules (`guest-sm`, world 0.1, and `lock-logic`, the
//! logic of worlds 0.2 to 0.4) share: lock keys ordered byte-wise a word at a
//! time ([`Key`]), the accumulator of their incremental state hashes
//! ([`Accumulator`]), the snapshot encoder that writes straight from the
//! table ([`encode_exact`]), and the worlds ([`World`], `lockd-core`'s too).
//!
//! The order is exactly `str`'s, so the table's iteration order and the
//! snapshot encoding are unchanged. It is written out because in wasm
//! `str::cmp` ends in `compiler_builtins`' byte-at-a-time `memcmp`, and a
//! B-tree lookup compares keys that usually share a long prefix
//! (`service/db/primary`, `service/db/replica-1`) a dozen times: eight bytes
//! per step as big-endian words give the same answer in an eighth the steps.

mod acc;
mod encode;
mod world;
pub use acc::Accumulator;
pub use encode::{decode_streamed, encode_exact, SeqOf, Streamed};
pub use world::World;

use std::borrow::Borrow;
use std::cmp::Ordering;

/// An owned key, as stored in the lock table.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key(pub String);

/// A borrowed key, for lookups without allocating.
#[derive(Debug, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct KeyRef(str);

impl KeyRef {
    pub fn new(s: &str) -> &KeyRef {
        // SAFETY: KeyRef is a repr(transparent) wrapper around str, so the
        // two references have the same layout and metadata.
        unsafe { &*(s as *const str as *const KeyRef) }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Lexicographic byte comparison, eight bytes per step.
pub fn cmp_bytes(a: &[u8], b: &[u8]) -> Ordering {
    let (mut a_words, mut b_words) = (a.chunks_exact(8), b.chunks_exact(8));
    for (x, y) in (&mut a_words).zip(&mut b_words) {
        let (x, y) = (word(x), word(y));
        if x != y {
            return x.cmp(&y);
        }
    }
    // Fewer than eight bytes left in the shorter key (the other may have
    // whole words left): finish byte by byte from the same offset.
    let done = a.len().min(b.len()) / 8 * 8;
    a[done..].cmp(&b[done..])
}

fn word(bytes: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(bytes);
    u64::from_be_bytes(w)
}

impl Ord for KeyRef {
    fn cmp(&self, other: &Self) -> Ordering {
        cmp_bytes(self.0.as_bytes(), other.0.as_bytes())
    }
}

impl PartialOrd for KeyRef {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Borrow<KeyRef> for Key {
    fn borrow(&self) -> &KeyRef {
        KeyRef::new(&self.0)
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        KeyRef::new(&self.0).cmp(KeyRef::new(&other.0))
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn same_order_as_str(a in ".{0,40}", b in ".{0,40}", prefix in ".{0,20}") {
            let (a, b) = (format!("{prefix}{a}"), format!("{prefix}{b}"));
            prop_assert_eq!(cmp_bytes(a.as_bytes(), b.as_bytes()), a.as_str().cmp(b.as_str()));
        }
    }

    #[test]
    fn prefixes_and_word_boundaries() {
        for (a, b) in [
            ("", ""),
            ("", "a"),
            ("abcdefgh", "abcdefghi"),
            ("abcdefgh", "abcdefgg"),
            ("abcdefghij", "abcdefghik"),
        ] {
            assert_eq!(
                cmp_bytes(a.as_bytes(), b.as_bytes()),
                a.cmp(b),
                "{a:?} {b:?}"
            );
            assert_eq!(
                cmp_bytes(b.as_bytes(), a.as_bytes()),
                b.cmp(a),
                "{b:?} {a:?}"
            );
        }
    }
}
