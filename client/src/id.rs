//! Random identifiers: request ids and the client's owner name.

use std::cell::Cell;

thread_local! {
    /// A simulation's generator for this thread (splitmix64 state), if it
    /// seeded one: its runs must replay to the byte.
    static SEEDED: Cell<Option<u64>> = const { Cell::new(None) };
}

/// From now on, draw this thread's ids from `seed` (a deterministic
/// simulation's), not from the OS.
pub fn seed(seed: u64) {
    SEEDED.with(|s| s.set(Some(seed)));
}

/// Back to the OS's entropy on this thread.
pub fn unseed() {
    SEEDED.with(|s| s.set(None));
}

/// The next 64 bits of this thread's seeded generator, if it has one
/// (splitmix64: ids need uniqueness under a seed, not secrecy).
fn seeded() -> Option<u64> {
    SEEDED.with(|s| {
        let state = s.get()?.wrapping_add(0x9E37_79B9_7F4A_7C15);
        s.set(Some(state));
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Some(z ^ (z >> 31))
    })
}

/// 128 random bits from the OS (or this thread's seeded generator), as hex.
pub fn random_id() -> String {
    let mut bytes = [0u8; 16];
    if let (Some(a), Some(b)) = (seeded(), seeded()) {
        bytes[..8].copy_from_slice(&a.to_le_bytes());
        bytes[8..].copy_from_slice(&b.to_le_bytes());
    } else if getrandom::fill(&mut bytes).is_err() {
        // The OS has no entropy only in a broken sandbox; then the id is
        // the time, still unique enough for one owner's requests.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        bytes = t.to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
