//! Segment files: naming, the file header, listing a directory, creating a
//! new segment durably, and the per-segment index range used by purge.
//!
//! ```text
//! header := magic "LOCKDWAL" | version: u32 LE | seq: u64 LE | crc32c(previous 20 bytes): u32 LE
//! ```
//!
//! The sequence number is repeated in the header so a file that was copied
//! or renamed into the wrong place is caught instead of replayed.

use std::path::{Path, PathBuf};

use super::disk::{disk, DiskFile};
use super::error::{io_err, WalError};
use super::meta::sync_dir;

pub(crate) const HEADER_LEN: usize = 24;
const MAGIC: &[u8; 8] = b"LOCKDWAL";
pub(crate) const FORMAT_VERSION: u32 = 1;
const SEGMENT_SUFFIX: &str = ".wal";
/// A segment being created; renamed to its final name once its header is durable.
const TMP_SUFFIX: &str = ".wal.tmp";
const SEQ_DIGITS: usize = 16;

pub(crate) fn segment_name(seq: u64) -> String {
    format!("{seq:0SEQ_DIGITS$}{SEGMENT_SUFFIX}")
}

/// The sequence number of a name of exactly `<16 digits><suffix>`.
fn parse_seq(name: &str, suffix: &str) -> Option<u64> {
    let digits = name.strip_suffix(suffix)?;
    if digits.len() != SEQ_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

pub(crate) fn encode_header(seq: u64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    h[12..20].copy_from_slice(&seq.to_le_bytes());
    let crc = crc32c::crc32c(&h[..20]);
    h[20..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Result of checking the start of a segment file.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum HeaderCheck {
    Ok,
    /// The file is all zeros, or shorter than a header and holding only a
    /// prefix of the expected one: a segment whose creation was interrupted.
    /// It never held a record.
    Incomplete,
    Bad(String),
}

pub(crate) fn check_header(buf: &[u8], seq: u64) -> HeaderCheck {
    let expected = encode_header(seq);
    // An all-zero file holds no record whatever its length.
    if buf.iter().all(|&b| b == 0) {
        return HeaderCheck::Incomplete;
    }
    let Some(h) = buf.get(..HEADER_LEN) else {
        return if expected.starts_with(buf) {
            HeaderCheck::Incomplete
        } else {
            HeaderCheck::Bad(format!(
                "file is {} bytes, shorter than the {HEADER_LEN}-byte header",
                buf.len()
            ))
        };
    };
    if h == expected {
        return HeaderCheck::Ok;
    }
    if &h[..8] != MAGIC {
        return HeaderCheck::Bad(format!(
            "wrong magic {:02x?} (expected {:02x?} \"LOCKDWAL\")",
            &h[..8],
            MAGIC
        ));
    }
    let version = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
    if version != FORMAT_VERSION {
        return HeaderCheck::Bad(format!(
            "unsupported format version {version} (this build reads version {FORMAT_VERSION})"
        ));
    }
    if crc32c::crc32c(&h[..20]).to_le_bytes() != h[20..24] {
        return HeaderCheck::Bad("header checksum mismatch".into());
    }
    let found = u64::from_le_bytes([h[12], h[13], h[14], h[15], h[16], h[17], h[18], h[19]]);
    HeaderCheck::Bad(format!(
        "header says sequence number {found}, but the file name says {seq}"
    ))
}

/// What a WAL directory holds.
pub(crate) struct Listing {
    /// Segments sorted by sequence number (not yet checked for gaps).
    pub segments: Vec<(u64, PathBuf)>,
    /// Segments whose creation never finished.
    pub stray_tmps: Vec<PathBuf>,
}

/// List the segments in `dir`. Files that are not ours (the lock file, or
/// anything without a `.wal` suffix) are ignored; a `.wal` file with a
/// malformed name is an error rather than a silently ignored segment.
pub(crate) fn list_dir(dir: &Path) -> Result<Listing, WalError> {
    let mut segments = Vec::new();
    let mut stray_tmps = Vec::new();
    for name in disk().list(dir).map_err(io_err(dir))? {
        let path = dir.join(&name);
        let name = name.to_string_lossy();
        if name.ends_with(TMP_SUFFIX) && parse_seq(&name, TMP_SUFFIX).is_some() {
            stray_tmps.push(path);
        } else if name.ends_with(SEGMENT_SUFFIX) {
            match parse_seq(&name, SEGMENT_SUFFIX) {
                Some(seq) => segments.push((seq, path)),
                None => return Err(WalError::UnexpectedFile { file: path }),
            }
        }
    }
    segments.sort_unstable_by_key(|(seq, _)| *seq);
    Ok(Listing {
        segments,
        stray_tmps,
    })
}

/// Create segment `seq` durably and return it opened for appending.
///
/// The header is written to a temporary name, fsynced, renamed into place
/// and the directory fsynced, so a crash leaves either no segment or one
/// with a complete header. Renaming over an existing file of that name is
/// how recovery replaces a segment whose header was never completed.
pub(crate) fn create_segment(
    dir: &Path,
    seq: u64,
) -> Result<(Box<dyn DiskFile>, PathBuf), WalError> {
    let path = dir.join(segment_name(seq));
    let tmp = dir.join(format!("{seq:0SEQ_DIGITS$}{TMP_SUFFIX}"));
    let mut f = disk().create(&tmp).map_err(io_err(&tmp))?;
    f.write_all(&encode_header(seq)).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    drop(f);
    disk().rename(&tmp, &path).map_err(io_err(&path))?;
    sync_dir(dir)?;
    Ok((open_for_append(&path)?, path))
}

pub(crate) fn open_for_append(path: &Path) -> Result<Box<dyn DiskFile>, WalError> {
    disk().append(path).map_err(io_err(path))
}

/// What the log knows about one segment file.
#[derive(Debug, Clone)]
pub(crate) struct SegmentInfo {
    pub seq: u64,
    pub path: PathBuf,
    /// Current file length in bytes (header included).
    pub len: u64,
    /// Smallest and largest index of any Append in the file, if it has one.
    pub min_index: Option<u64>,
    pub max_index: Option<u64>,
}

impl SegmentInfo {
    pub fn new(seq: u64, path: PathBuf, len: u64) -> SegmentInfo {
        SegmentInfo {
            seq,
            path,
            len,
            min_index: None,
            max_index: None,
        }
    }

    pub fn note_append(&mut self, index: u64) {
        self.min_index = Some(self.min_index.map_or(index, |m| m.min(index)));
        self.max_index = Some(self.max_index.map_or(index, |m| m.max(index)));
    }

    /// Whether every Append in this file has an index `<= upto` (true for a
    /// file with no appends at all).
    pub fn all_at_or_below(&self, upto: u64) -> bool {
        self.max_index.is_none_or(|m| m <= upto)
    }

    /// Whether this file holds at least one record.
    pub fn has_records(&self) -> bool {
        self.len > HEADER_LEN as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(segment_name(1), "0000000000000001.wal");
        assert_eq!(parse_seq(&segment_name(42), SEGMENT_SUFFIX), Some(42));
        assert_eq!(parse_seq("1.wal", SEGMENT_SUFFIX), None);
        assert_eq!(parse_seq("000000000000000x.wal", SEGMENT_SUFFIX), None);
    }

    #[test]
    fn header_checks() {
        let h = encode_header(5);
        assert_eq!(check_header(&h, 5), HeaderCheck::Ok);
        assert_eq!(check_header(&h[..10], 5), HeaderCheck::Incomplete);
        assert_eq!(check_header(&[], 5), HeaderCheck::Incomplete);
        assert_eq!(check_header(&[0; 40], 5), HeaderCheck::Incomplete);
        assert!(
            matches!(check_header(b"NOTAWAL!\x01\0\0\0\x05\0\0\0\0\0\0\0\0\0\0\0", 5), HeaderCheck::Bad(r) if r.contains("wrong magic"))
        );
        assert!(
            matches!(check_header(b"garbage", 5), HeaderCheck::Bad(r) if r.contains("shorter than"))
        );
        assert!(
            matches!(check_header(&h, 6), HeaderCheck::Bad(r) if r.contains("sequence number 5"))
        );
        let mut v2 = h;
        v2[8] = 2;
        assert!(matches!(check_header(&v2, 5), HeaderCheck::Bad(r) if r.contains("version 2")));
    }
}
