//! The log alone on the simulated disk: random batches, crashes at random
//! points, full and failing disks, and after each reopen the one promise
//! the log makes (`lockd_log`, "Crash safety"): every batch whose
//! `write_batch` returned `Ok` is there, in order, and nothing else is,
//! except that a batch whose write failed may or may not be.

use std::collections::BTreeMap;
use std::path::Path;

use lockd_log::{Wal, WalOp, WalOptions};

use super::disk::{Broken, SimDisk, ROOT};
use crate::jepsen::rng::Rng;

type Entries = BTreeMap<u64, Vec<u8>>;

fn apply(entries: &mut Entries, ops: &[(u64, Option<Vec<u8>>)]) {
    for (index, payload) in ops {
        match payload {
            Some(p) => {
                entries.insert(*index, p.clone());
            }
            None => {
                let _ = entries.split_off(index);
            }
        }
    }
}

/// One trial of `steps` batches under `seed`, in the directory `name` on
/// the disk; `Err` says what was lost or made up. Small segments, so
/// rotations (segment creation, a directory sync) happen between crashes
/// too.
pub fn run(disk: &SimDisk, name: &str, seed: u64, steps: usize) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    let dir = Path::new(ROOT).join(format!("{name}-{seed}"));
    let opts = WalOptions { segment_bytes: 600 };
    let open = |dir: &Path| Wal::open(dir, opts).map_err(|e| format!("reopen failed: {e}"));
    let (mut wal, _) = open(&dir)?;
    let mut acked = Entries::new();
    // A batch that failed: it may or may not have survived.
    let mut maybe: Option<Vec<(u64, Option<Vec<u8>>)>> = None;
    let mut next = 1u64;
    for step in 0..steps {
        match rng.below(10) {
            0 => {
                drop(wal);
                disk.crash(&dir, &mut rng);
                let (w, recovered) = open(&dir)?;
                wal = w;
                let mut with_maybe = acked.clone();
                if let Some(ops) = maybe.take() {
                    apply(&mut with_maybe, &ops);
                }
                if recovered.entries == acked {
                } else if recovered.entries == with_maybe {
                    acked = with_maybe;
                } else {
                    return Err(format!(
                        "seed {seed}, step {step}: after a crash the log holds {:?}, \
                         but the acknowledged batches hold {:?}",
                        recovered.entries.keys().collect::<Vec<_>>(),
                        acked.keys().collect::<Vec<_>>()
                    ));
                }
                next = acked.keys().next_back().map_or(1, |i| i + 1);
            }
            1 if maybe.is_none() => {
                let how = if rng.below(2) == 0 {
                    Broken::Full
                } else {
                    Broken::SyncFails
                };
                disk.break_disk(&dir, how);
            }
            _ => {
                let mut ops = Vec::new();
                if next > 3 && rng.below(8) == 0 {
                    next -= 1 + rng.below(2);
                    ops.push((next, None));
                }
                for _ in 0..1 + rng.below(4) {
                    let len = rng.below(40) as usize;
                    let payload: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
                    ops.push((next, Some(payload)));
                    next += 1;
                }
                let wal_ops: Vec<WalOp<'_>> = ops
                    .iter()
                    .map(|(index, p)| match p {
                        Some(p) => WalOp::Append {
                            index: *index,
                            payload: p,
                        },
                        None => WalOp::Truncate { since: *index },
                    })
                    .collect();
                match wal.write_batch(&wal_ops) {
                    Ok(()) => apply(&mut acked, &ops),
                    // Poisoned: only a reopen (after a crash here) goes on.
                    Err(_) if maybe.is_some() => {}
                    Err(_) => maybe = Some(ops),
                }
            }
        }
    }
    Ok(())
}
