//! Snapshot encoding without copies of the table: sequences are written
//! straight from the table's iterators ([`SeqOf`]), and the output buffer
//! is allocated once at its exact size ([`encode_exact`]). So building a
//! snapshot holds the table plus its encoded image, which is a fraction of
//! the table, instead of the table, a borrowed copy of its rows and a buffer
//! grown by doubling (measured with a million locks: see
//! `docs/scale.md`).

use serde::{Serialize, Serializer};

/// A sequence serialized from a fresh iterator each time (the size pass and
/// the writing pass both walk it). The iterator must know its exact length,
/// as the table's do: postcard writes the length first.
pub struct SeqOf<F>(pub F);

impl<F, I> Serialize for SeqOf<F>
where
    F: Fn() -> I,
    I: Iterator,
    I::Item: Serialize,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq((self.0)())
    }
}

/// `prefix` followed by the postcard encoding of `body`, in a buffer
/// allocated once, at its exact size.
pub fn encode_exact<T: Serialize>(prefix: &[u8], body: &T) -> Vec<u8> {
    // Integers, strings and sequences of known length: cannot fail.
    let size = postcard::serialize_with_flavor(body, postcard::ser_flavors::Size::default())
        .expect("postcard sizing is infallible");
    let mut out = Vec::with_capacity(prefix.len() + size);
    out.extend_from_slice(prefix);
    let out = postcard::to_extend(body, out).expect("postcard encoding into a Vec is infallible");
    debug_assert_eq!(out.len(), out.capacity());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_sequence_encodes_as_a_collected_one() {
        let rows = [(1u64, "a"), (2, "bb"), (3, "ccc")];
        let streamed = encode_exact(b"P", &(7u64, SeqOf(|| rows.iter())));
        let collected = postcard::to_allocvec(&(7u64, rows.to_vec())).expect("encode");
        assert_eq!(streamed[0], b'P');
        assert_eq!(&streamed[1..], collected.as_slice());
        assert_eq!(streamed.len(), streamed.capacity());
    }
}
