//! The accumulator of an incremental state hash, shared by both lock
//! modules.
//!
//! A module gives every element of its state (a holding) a 32-byte digest
//! and keeps the **sum** of the digests of the elements present: each digest
//! read as four little-endian `u64` lanes, added lane-wise with wrapping (a
//! sum in the group (Z/2^64)^4). Adding an element adds its digest, removing
//! it subtracts the digest, so keeping the sum costs O(1) per command, and
//! the sum depends on the set of elements alone, not on the order they came
//! and went in. The state hash then hashes the sum with a few counters: a
//! fixed-size input, so an audit point never walks the table.
//!
//! It detects divergence between replicas; it is not meant to resist
//! someone who chooses elements to make two states collide.

/// The sum of the digests of the elements of a state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Accumulator([u64; 4]);

impl Accumulator {
    pub fn add(&mut self, digest: &[u8; 32]) {
        for (lane, x) in self.0.iter_mut().zip(lanes(digest)) {
            *lane = lane.wrapping_add(x);
        }
    }

    pub fn sub(&mut self, digest: &[u8; 32]) {
        for (lane, x) in self.0.iter_mut().zip(lanes(digest)) {
            *lane = lane.wrapping_sub(x);
        }
    }

    /// The four lanes, to feed the state hash.
    pub fn lanes(&self) -> [u64; 4] {
        self.0
    }
}

fn lanes(digest: &[u8; 32]) -> [u64; 4] {
    let mut out = [0u64; 4];
    for (lane, chunk) in out.iter_mut().zip(digest.chunks_exact(8)) {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        *lane = u64::from_le_bytes(w);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(x: u8) -> [u8; 32] {
        let mut out = [0u8; 32];
        for (i, b) in out.iter_mut().enumerate() {
            *b = x.wrapping_mul(31).wrapping_add(i as u8).wrapping_mul(x | 1);
        }
        out
    }

    #[test]
    fn the_sum_forgets_order_and_removal_undoes_addition() {
        let (a, b, c) = (d(1), d(2), d(3));
        let mut x = Accumulator::default();
        x.add(&a);
        x.add(&b);
        let mut y = Accumulator::default();
        y.add(&c);
        y.add(&b);
        y.add(&a);
        y.sub(&c);
        assert_eq!(x, y);
        assert_ne!(x, Accumulator::default());
        x.sub(&a);
        x.sub(&b);
        assert_eq!(x, Accumulator::default());
    }
}
