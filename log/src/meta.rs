//! Atomic small files (the Raft vote, the purge mark, snapshots): a reader
//! sees either the previous value or the new one, never a mix, and a value
//! that rotted on disk is reported instead of returned.
//!
//! ```text
//! file := magic "LKMT" | len: u32 LE | crc32c(body): u32 LE | body[len]
//! ```

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use super::disk::disk;
use super::error::{io_err, WalError};

const MAGIC: &[u8; 4] = b"LKMT";
const HEADER_LEN: usize = 12;

/// Write `bytes` to `path` atomically and durably: write `<path>.tmp` with a
/// checksummed header, fsync it, rename it over `path`, fsync the directory.
/// When this returns `Ok` the new value survives a crash.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), WalError> {
    let len = u32::try_from(bytes.len()).map_err(|_| WalError::TooLarge {
        file: path.to_path_buf(),
        len: bytes.len() as u64,
        max: u32::MAX as u64,
    })?;
    let tmp = tmp_path(path)?;
    let mut buf = Vec::with_capacity(HEADER_LEN + bytes.len());
    buf.extend_from_slice(MAGIC);
    buf.extend_from_slice(&len.to_le_bytes());
    buf.extend_from_slice(&crc32c::crc32c(bytes).to_le_bytes());
    buf.extend_from_slice(bytes);

    let mut f = disk().create(&tmp).map_err(io_err(&tmp))?;
    f.write_all(&buf).map_err(io_err(&tmp))?;
    // The data must be durable before the rename makes it visible, or a crash
    // could leave `path` naming an empty or partial file.
    f.sync_all().map_err(io_err(&tmp))?;
    drop(f);
    disk().rename(&tmp, path).map_err(io_err(path))?;
    sync_dir(parent_dir(path))
}

/// Read a file written by [`write_atomic`]. `Ok(None)` if it does not exist;
/// [`WalError::CorruptMeta`] naming the file if its framing or checksum fails.
pub fn read_atomic(path: &Path) -> Result<Option<Vec<u8>>, WalError> {
    let mut buf = match disk().read(path) {
        Ok(buf) => buf,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(path)(e)),
    };
    let corrupt = |reason: String| WalError::CorruptMeta {
        file: path.to_path_buf(),
        reason,
    };
    let Some(header) = buf.get(..HEADER_LEN) else {
        return Err(corrupt(format!(
            "file is {} bytes, shorter than the {HEADER_LEN}-byte header",
            buf.len()
        )));
    };
    if &header[..4] != MAGIC {
        return Err(corrupt(format!(
            "wrong magic {:02x?} (expected \"LKMT\")",
            &header[..4]
        )));
    }
    let len = u32::from_le_bytes([header[4], header[5], header[6], header[7]]) as usize;
    let crc = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
    let body_len = buf.len() - HEADER_LEN;
    if len != body_len {
        return Err(corrupt(format!(
            "header says {len} bytes of data, file holds {body_len}"
        )));
    }
    if crc32c::crc32c(&buf[HEADER_LEN..]) != crc {
        return Err(corrupt("checksum mismatch".into()));
    }
    buf.drain(..HEADER_LEN);
    Ok(Some(buf))
}

/// fsync a directory, making creations, renames and deletions in it durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), WalError> {
    disk().sync_dir(dir).map_err(io_err(dir))
}

/// The directory holding `path` (`.` for a bare file name).
pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn tmp_path(path: &Path) -> Result<PathBuf, WalError> {
    let Some(name) = path.file_name() else {
        let source = io::Error::new(io::ErrorKind::InvalidInput, "path has no file name");
        return Err(WalError::Io {
            path: path.to_path_buf(),
            source,
        });
    };
    let mut tmp: OsString = name.to_os_string();
    tmp.push(".tmp");
    Ok(path.with_file_name(tmp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn round_trip_and_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vote");
        assert_eq!(read_atomic(&path).unwrap(), None);
        write_atomic(&path, b"term 1").unwrap();
        assert_eq!(read_atomic(&path).unwrap().as_deref(), Some(&b"term 1"[..]));
        write_atomic(&path, b"term 2, voted for 3").unwrap();
        assert_eq!(
            read_atomic(&path).unwrap().as_deref(),
            Some(&b"term 2, voted for 3"[..])
        );
        write_atomic(&path, b"").unwrap();
        assert_eq!(read_atomic(&path).unwrap().as_deref(), Some(&b""[..]));
        assert!(
            !dir.path().join("vote.tmp").exists(),
            "the tmp file is renamed away"
        );
    }

    #[test]
    fn flipped_byte_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("purged");
        write_atomic(&path, b"purged up to 42").unwrap();
        let mut raw = fs::read(&path).unwrap();
        raw[HEADER_LEN + 3] ^= 0x01;
        fs::write(&path, &raw).unwrap();
        let err = read_atomic(&path).unwrap_err();
        assert!(
            matches!(err, WalError::CorruptMeta { ref file, .. } if file == &path),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains(&path.display().to_string()) && msg.contains("checksum mismatch"),
            "{msg}"
        );
    }

    #[test]
    fn truncated_or_foreign_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vote");
        write_atomic(&path, b"0123456789").unwrap();
        let raw = fs::read(&path).unwrap();
        for cut in [0, 5, HEADER_LEN, raw.len() - 1] {
            fs::write(&path, &raw[..cut]).unwrap();
            let err = read_atomic(&path).unwrap_err();
            assert!(
                err.to_string().contains(&path.display().to_string()),
                "{err}"
            );
        }
        fs::write(&path, b"{\"term\": 1, \"voted_for\": 2}").unwrap();
        assert!(read_atomic(&path)
            .unwrap_err()
            .to_string()
            .contains("wrong magic"));
    }

    #[test]
    fn leftover_tmp_file_does_not_matter() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vote");
        write_atomic(&path, b"old").unwrap();
        // A crash between writing the tmp file and renaming it.
        fs::write(dir.path().join("vote.tmp"), b"half-writ").unwrap();
        assert_eq!(read_atomic(&path).unwrap().as_deref(), Some(&b"old"[..]));
        write_atomic(&path, b"new").unwrap();
        assert_eq!(read_atomic(&path).unwrap().as_deref(), Some(&b"new"[..]));
    }
}
