//! Snapshots without copies of the table: sequences are written straight
//! from the table's iterators ([`SeqOf`]) into a buffer allocated once at
//! its exact size ([`encode_exact`]), and read back one item at a time
//! into the new table ([`decode_streamed`]). So building a snapshot holds
//! the table plus its encoded image, and restoring one the image plus the
//! new table, never a decoded copy of every row besides (measured with a
//! million locks: see `docs/scale.md`).

use serde::{Deserialize, Serialize, Serializer};

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

/// Why [`decode_streamed`] failed.
#[derive(Debug)]
pub enum Streamed<E> {
    /// The bytes do not decode (postcard's reason).
    Decode(postcard::Error),
    /// The body ended before the input did.
    Trailing(usize),
    /// `build` refused what it was given.
    Built(E),
}

/// Decode a postcard body that ends in a sequence: the fields before it as
/// `H`, then the sequence's items one at a time, handed to `build` as an
/// iterator (which it must drain). The items are never collected, so no
/// decoded copy of the table exists beside the one `build` makes. A
/// hostile length allocates nothing: the items run out first. The body
/// must fill the input exactly.
pub fn decode_streamed<'de, H, I, R, E>(
    bytes: &'de [u8],
    build: impl FnOnce(H, &mut dyn Iterator<Item = I>) -> Result<R, E>,
) -> Result<R, Streamed<E>>
where
    H: Deserialize<'de>,
    I: Deserialize<'de>,
{
    let (head, rest): (H, &[u8]) = postcard::take_from_bytes(bytes).map_err(Streamed::Decode)?;
    // A sequence is its length as a varint (the same bytes for usize and
    // u64), then its items.
    let (len, mut rest): (u64, &[u8]) =
        postcard::take_from_bytes(rest).map_err(Streamed::Decode)?;
    let mut failed = None;
    let built = {
        let mut items = (0..len).map_while(|_| match postcard::take_from_bytes::<I>(rest) {
            Ok((item, r)) => {
                rest = r;
                Some(item)
            }
            Err(e) => {
                failed = Some(e);
                None
            }
        });
        build(head, &mut items)
    };
    if let Some(e) = failed {
        return Err(Streamed::Decode(e));
    }
    let built = built.map_err(Streamed::Built)?;
    if !rest.is_empty() {
        return Err(Streamed::Trailing(rest.len()));
    }
    Ok(built)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(bytes: &[u8]) -> Result<(u64, u64), Streamed<String>> {
        decode_streamed(bytes, |head: u64, items: &mut dyn Iterator<Item = u64>| {
            let mut total = 0u64;
            for i in items {
                if i == 13 {
                    return Err("13".to_string());
                }
                total += i;
            }
            Ok((head, total))
        })
    }

    #[test]
    fn a_streamed_body_decodes_as_a_collected_one() {
        let bytes = postcard::to_allocvec(&(7u64, vec![1u64, 2, 300])).expect("encode");
        assert_eq!(sum(&bytes).ok(), Some((7, 303)));
        // Cut short, too long, a hostile length, and a refused item.
        assert!(matches!(
            sum(&bytes[..bytes.len() - 1]),
            Err(Streamed::Decode(_))
        ));
        let mut long = bytes.clone();
        long.push(0);
        assert!(matches!(sum(&long), Err(Streamed::Trailing(1))));
        let hostile = postcard::to_allocvec(&(7u64, u64::MAX)).expect("encode");
        assert!(matches!(sum(&hostile), Err(Streamed::Decode(_))));
        let thirteen = postcard::to_allocvec(&(7u64, vec![13u64])).expect("encode");
        assert!(matches!(sum(&thirteen), Err(Streamed::Built(e)) if e == "13"));
    }

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
