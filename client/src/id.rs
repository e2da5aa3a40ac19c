//! Random identifiers: request ids and the client's owner name.

/// 128 random bits from the OS, as hex.
pub fn random_id() -> String {
    let mut bytes = [0u8; 16];
    // The OS has no entropy only in a broken sandbox; then the id is the
    // time, still unique enough for one owner's requests.
    if getrandom::fill(&mut bytes).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        bytes = t.to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
