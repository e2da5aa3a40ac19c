//! Record framing and the encoding of a batch of ops inside a record.
//!
//! ```text
//! record  := payload_len: u32 LE | crc32c(payload): u32 LE | payload
//! payload := op_count: u32 LE (>= 1) | op * op_count
//! op      := 0x01 | index: u64 LE | len: u32 LE | bytes[len]    (Append)
//!          | 0x02 | since: u64 LE                                (Truncate)
//! ```
//!
//! The scanner here only classifies what it finds; whether a bad record is a
//! torn tail that may be cut or corruption that must stop recovery depends
//! on where the file sits in the log, which [`super::recovery`] decides.

use super::WalOp;

/// Bytes of `payload_len` + `crc`.
pub(crate) const RECORD_HEADER_LEN: usize = 8;
/// Upper bound on `payload_len`, so a garbage length cannot make recovery
/// (or a writer) allocate absurdly.
pub(crate) const MAX_PAYLOAD_LEN: usize = 256 << 20;

const TAG_APPEND: u8 = 1;
const TAG_TRUNCATE: u8 = 2;
const OP_COUNT_LEN: usize = 4;
const APPEND_FIXED_LEN: usize = 1 + 8 + 4;
const TRUNCATE_LEN: usize = 1 + 8;
/// The smallest payload we ever write: a batch holding one truncate. Zero is
/// never a valid length, which is what lets a zero-filled tail be recognised
/// (crc32c of the empty string is 0, so zeros would otherwise "verify").
const MIN_PAYLOAD_LEN: usize = OP_COUNT_LEN + TRUNCATE_LEN;

/// Encode `ops` as one complete record (header + payload) into `out`.
/// Returns the payload length that would have been needed if it exceeds
/// `max_payload`; `out` is then unspecified and nothing must be written.
pub(crate) fn encode_record(
    ops: &[WalOp<'_>],
    max_payload: usize,
    out: &mut Vec<u8>,
) -> Result<(), u64> {
    let payload_len = ops.iter().fold(OP_COUNT_LEN as u64, |acc, op| {
        acc.saturating_add(match op {
            WalOp::Append { payload, .. } => APPEND_FIXED_LEN as u64 + payload.len() as u64,
            WalOp::Truncate { .. } => TRUNCATE_LEN as u64,
        })
    });
    if payload_len > max_payload as u64 {
        return Err(payload_len);
    }
    // max_payload <= MAX_PAYLOAD_LEN < u32::MAX, and each op is >= 9 bytes, so
    // the count and every length below fit in a u32.
    let total = RECORD_HEADER_LEN + payload_len as usize;
    out.clear();
    out.reserve(total);
    out.extend_from_slice(&(payload_len as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]); // crc, filled in below
    out.extend_from_slice(&(ops.len() as u32).to_le_bytes());
    for op in ops {
        match *op {
            WalOp::Append { index, payload } => {
                out.push(TAG_APPEND);
                out.extend_from_slice(&index.to_le_bytes());
                out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
                out.extend_from_slice(payload);
            }
            WalOp::Truncate { since } => {
                out.push(TAG_TRUNCATE);
                out.extend_from_slice(&since.to_le_bytes());
            }
        }
    }
    debug_assert_eq!(out.len(), total);
    let crc = crc32c::crc32c(&out[RECORD_HEADER_LEN..]);
    out[4..8].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// Decode a payload whose CRC has already been verified.
pub(crate) fn decode_payload(payload: &[u8]) -> Result<Vec<WalOp<'_>>, String> {
    // Capacity from the claimed count is capped: the count is data.
    let mut ops = Vec::with_capacity(peek_count(payload).min(1024));
    walk_payload(payload, |op| ops.push(op))?;
    Ok(ops)
}

fn peek_count(payload: &[u8]) -> usize {
    payload
        .get(..4)
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
}

/// Parse `payload` exactly (no trailing bytes), calling `f` per op. Used both
/// to decode and, without allocating, to test whether bytes form a batch.
fn walk_payload<'a>(payload: &'a [u8], mut f: impl FnMut(WalOp<'a>)) -> Result<(), String> {
    let mut r = Reader {
        buf: payload,
        pos: 0,
    };
    let count = r.u32().ok_or("payload too short for the op count")?;
    if count == 0 {
        return Err("batch has no ops".into());
    }
    // Every op takes at least TRUNCATE_LEN bytes; rejecting an impossible
    // count up front keeps the walk over garbage short.
    if count as usize > (payload.len() - OP_COUNT_LEN) / TRUNCATE_LEN {
        return Err(format!(
            "op count {count} cannot fit in {} bytes",
            payload.len()
        ));
    }
    for i in 0..count {
        let truncated = || format!("payload ends inside op {i} of {count}");
        let tag = r.u8().ok_or_else(truncated)?;
        match tag {
            TAG_APPEND => {
                let index = r.u64().ok_or_else(truncated)?;
                let len = r.u32().ok_or_else(truncated)?;
                let payload = r.take(len as usize).ok_or_else(truncated)?;
                f(WalOp::Append { index, payload });
            }
            TAG_TRUNCATE => {
                let since = r.u64().ok_or_else(truncated)?;
                f(WalOp::Truncate { since });
            }
            other => return Err(format!("unknown op tag {other:#04x} in op {i} of {count}")),
        }
    }
    let trailing = payload.len() - r.pos;
    if trailing != 0 {
        return Err(format!("{trailing} trailing bytes after {count} ops"));
    }
    Ok(())
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    }
}

/// How a scan of one file ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ScanEnd {
    /// Every byte belongs to a verified record.
    Clean,
    /// Zeros from `offset` to the end: the padding the log lays ahead of
    /// its records (or a last write of which nothing reached the disk).
    Zeros { offset: u64, reason: String },
    /// The record at `offset` fails verification (an incomplete header, an impossible length, a payload running past
    /// EOF, a failed CRC): a torn write if the file is the last segment
    /// and no valid record follows it, which recovery checks. Bytes may
    /// follow it even so: a crash inside one write can leave a later block
    /// of it written and an earlier one not, and a header whose length
    /// lost a block claims a short record.
    TornCandidate { offset: u64, reason: String },
    /// A CRC-valid record whose payload does not decode: corruption
    /// wherever it is.
    Corrupt { offset: u64, reason: String },
}

/// Verify and decode the records of a segment held in `buf`, from `start`
/// (the end of the file header) to the end. Offsets are file offsets.
/// Returns the ops of each verified record, in order, and how the scan ended.
pub(crate) fn scan(buf: &[u8], start: usize) -> (Vec<Vec<WalOp<'_>>>, ScanEnd) {
    let mut records = Vec::new();
    let mut pos = start;
    loop {
        let rest = match buf.get(pos..) {
            Some(rest) if !rest.is_empty() => rest,
            _ => return (records, ScanEnd::Clean),
        };
        let offset = pos as u64;
        // Filesystems can leave a zero-filled extent after a crash (size
        // updated, data not); no record we write starts with a zero length.
        if rest.iter().all(|&b| b == 0) {
            let reason = format!("{} zero bytes at the end of the file", rest.len());
            return (records, ScanEnd::Zeros { offset, reason });
        }
        let Some(header) = rest.get(..RECORD_HEADER_LEN) else {
            let reason = format!(
                "incomplete record header ({} of {RECORD_HEADER_LEN} bytes)",
                rest.len()
            );
            return (records, ScanEnd::TornCandidate { offset, reason });
        };
        let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
        let record_len = RECORD_HEADER_LEN as u64 + len as u64;
        let checked = if !(MIN_PAYLOAD_LEN..=MAX_PAYLOAD_LEN).contains(&len) {
            Err(format!("impossible record length {len}"))
        } else {
            match rest.get(RECORD_HEADER_LEN..RECORD_HEADER_LEN + len) {
                None => Err(format!(
                    "record of {record_len} bytes runs past the end of the file ({} bytes left)",
                    rest.len()
                )),
                Some(p) if crc32c::crc32c(p) != crc => Err("crc mismatch".to_string()),
                Some(p) => Ok(p),
            }
        };
        let payload = match checked {
            Ok(p) => p,
            Err(reason) => return (records, ScanEnd::TornCandidate { offset, reason }),
        };
        // The CRC matched, so these are bytes we wrote: failing to decode
        // them is a format bug or incompatibility, never a torn write.
        match decode_payload(payload) {
            Ok(ops) => records.push(ops),
            Err(e) => {
                return (
                    records,
                    ScanEnd::Corrupt {
                        offset,
                        reason: format!("undecodable batch: {e}"),
                    },
                )
            }
        }
        pos += record_len as usize;
    }
}

/// Outcome of [`find_record_from`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Resync {
    /// A complete, CRC-valid, decodable record starts at this offset.
    Found(usize),
    NotFound,
    /// The work budget ran out before every position was checked.
    GaveUp,
}

/// Work [`find_record_from`] may do before giving up, in bytes: each op
/// it decodes counts as an append's fixed part, each payload it
/// checksums as its length. A bound on recovery time whatever the tail
/// contains.
const RESYNC_BUDGET: u64 = 1 << 30;

/// Look for a valid record starting at or after `from`.
///
/// A torn tail is only safe to cut if it really is the end of the log. A bit
/// flip in the length field of an earlier record can make it look as if it
/// runs past EOF (or ends exactly at EOF with a bad CRC), which would
/// silently swallow the acknowledged records after it; finding one of them
/// here turns that into a `Corrupt` error instead. Candidates are rejected
/// by length and structure before any CRC is computed, so this is cheap on
/// real data; crafted payloads could make it quadratic, hence the budget.
pub(crate) fn find_record_from(buf: &[u8], from: usize) -> Resync {
    find_record_within(buf, from, RESYNC_BUDGET)
}

fn find_record_within(buf: &[u8], from: usize, mut budget: u64) -> Resync {
    let Some(last_start) = buf.len().checked_sub(RECORD_HEADER_LEN + MIN_PAYLOAD_LEN) else {
        return Resync::NotFound;
    };
    for q in from..=last_start {
        let h = &buf[q..q + RECORD_HEADER_LEN];
        let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
        if !(MIN_PAYLOAD_LEN..=MAX_PAYLOAD_LEN).contains(&len) {
            continue;
        }
        let Some(payload) = buf.get(q + RECORD_HEADER_LEN..q + RECORD_HEADER_LEN + len) else {
            continue;
        };
        // The structure first: garbage fails within an op or two, and only
        // a payload that walks whole is checksummed. Each is paid for by
        // what it costs (the ops decoded, then the bytes summed), not by
        // the length a candidate claims: behind a torn record lie the
        // log's zeros, where every claimed length fits (seed 252521).
        let mut ops = 0u64;
        let walked = walk_payload(payload, |_| ops += 1).is_ok();
        let summed = if walked { len as u64 } else { 0 };
        let cost = (ops + 1) * APPEND_FIXED_LEN as u64 + summed;
        let Some(left) = budget.checked_sub(cost) else {
            return Resync::GaveUp;
        };
        budget = left;
        let crc = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
        if walked && crc32c::crc32c(payload) == crc {
            return Resync::Found(q);
        }
    }
    Resync::NotFound
}

#[cfg(test)]
mod tests;
