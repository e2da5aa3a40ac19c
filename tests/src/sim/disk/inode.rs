//! One simulated file's bytes: what a running node reads, and what a
//! crash would leave (the writes since the last sync, each with what it
//! replaced, so a crash can keep a prefix of them and undo the rest).

/// A write since the file's last sync, and what it replaced.
struct Written {
    at: usize,
    len: usize,
    /// The bytes it overwrote (those below the file's length then).
    old: Vec<u8>,
    /// The file's length before it.
    old_len: usize,
}

impl Written {
    /// Put back what this write replaced (the writes after it undone).
    fn undo(&self, data: &mut Vec<u8>) {
        if let Some(span) = data.get_mut(self.at..self.at + self.old.len()) {
            span.copy_from_slice(&self.old);
        }
        data.truncate(self.old_len);
    }
}

#[derive(Default)]
pub(super) struct Inode {
    pub(super) data: Vec<u8>,
    /// A crash undoes these, last first, but for a random prefix of their
    /// bytes...
    unsynced: Vec<Written>,
    /// ...unless the file was emptied since its last sync: then it keeps
    /// what was synced before.
    pub(super) before: Option<Vec<u8>>,
}

impl Inode {
    /// Created again over itself: empty now, and a crash before the next
    /// sync brings back what was synced.
    pub(super) fn empty(&mut self) {
        if self.before.is_none() {
            self.before = Some(self.synced_image());
        }
        self.data.clear();
        self.unsynced.clear();
    }

    pub(super) fn sync(&mut self) {
        self.unsynced.clear();
        self.before = None;
    }

    pub(super) fn write_at(&mut self, at: usize, bytes: &[u8]) {
        let old_len = self.data.len();
        let old = self
            .data
            .get(at..old_len.min(at + bytes.len()))
            .unwrap_or_default();
        self.unsynced.push(Written {
            at,
            len: bytes.len(),
            old: old.to_vec(),
            old_len,
        });
        if self.data.len() < at + bytes.len() {
            self.data.resize(at + bytes.len(), 0);
        }
        self.data[at..at + bytes.len()].copy_from_slice(bytes);
    }

    /// What the file held at its last sync.
    pub(super) fn synced_image(&self) -> Vec<u8> {
        let mut data = self.data.clone();
        for w in self.unsynced.iter().rev() {
            w.undo(&mut data);
        }
        data
    }

    /// The bytes written since the last sync.
    pub(super) fn unsynced_bytes(&self) -> usize {
        self.unsynced.iter().map(|w| w.len).sum()
    }

    /// A crash: keep the first `keep` bytes written since the last sync,
    /// in write order, and undo the rest; with `zeros_from`, the kept
    /// bytes from that one on read back as zeros.
    pub(super) fn tear(&mut self, keep: usize, zeros_from: Option<usize>) {
        // Each write's part kept: (at, bytes).
        let mut kept = Vec::new();
        let mut left = keep;
        let mut undo_from = self.unsynced.len();
        for (i, w) in self.unsynced.iter().enumerate() {
            let n = left.min(w.len);
            if n > 0 {
                kept.push((w.at, self.data[w.at..w.at + n].to_vec()));
            }
            if n < w.len {
                undo_from = i;
                break;
            }
            left -= n;
        }
        for w in self.unsynced.drain(undo_from..).rev() {
            w.undo(&mut self.data);
        }
        let mut zero_after = zeros_from;
        for (at, mut bytes) in kept {
            if let Some(z) = zero_after {
                let from = z.min(bytes.len());
                bytes[from..].fill(0);
                zero_after = Some(z - from);
            }
            if self.data.len() < at + bytes.len() {
                self.data.resize(at + bytes.len(), 0);
            }
            self.data[at..at + bytes.len()].copy_from_slice(&bytes);
        }
        self.sync();
    }
}
