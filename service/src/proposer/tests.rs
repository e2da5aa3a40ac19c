//! The proposer's batching and answers, without a cluster.

use super::*;

fn pending(n: usize, key_bytes: usize) -> Pending {
    let commands: Vec<Command> = (0..n)
        .map(|_| Command::grant("k".repeat(key_bytes), 1))
        .collect();
    Pending {
        queued: Instant::now(),
        term: None,
        bytes: commands.iter().map(Command::wire_bytes).sum(),
        commands,
        done: Done::new(drop),
    }
}

#[test]
fn a_group_decided_under_another_term_is_refused_and_not_written() {
    let answered = Arc::new(std::sync::Mutex::new(Vec::new()));
    let group = |term: Option<u64>| {
        let answered = answered.clone();
        Pending {
            term,
            done: Done::new(move |r| answered.lock().unwrap().push((term, r.is_err()))),
            ..pending(1, 1)
        }
    };
    let kept = current(
        vec![group(Some(3)), group(None), group(Some(1))],
        Some(3),
        7,
    );
    assert_eq!(
        kept.iter().map(|g| g.term).collect::<Vec<_>>(),
        [Some(3), None]
    );
    assert_eq!(*answered.lock().unwrap(), [(Some(1), true)]);
    // Not leading: only what no term decided goes on.
    let kept = current(vec![group(Some(3)), group(None)], None, 7);
    assert_eq!(kept.iter().map(|g| g.term).collect::<Vec<_>>(), [None]);
}

#[test]
fn an_entry_is_cut_at_its_command_and_byte_bounds() {
    // 1 KiB keys: the byte bound cuts first, under 1 MiB.
    let mut b = Batch::new(pending(1, 1024));
    let mut n = 1;
    while b.push(pending(1, 1024)).is_ok() {
        n += 1;
    }
    let one = 1024 + lockd_core::command::WIRE_OVERHEAD;
    assert!(b.bytes <= MAX_ENTRY_BYTES && b.bytes + one > MAX_ENTRY_BYTES);
    assert_eq!(n, MAX_ENTRY_BYTES / one);
    // Short keys: the command bound cuts first.
    let mut b = Batch::new(pending(4000, 8));
    assert!(b.push(pending(96, 8)).is_ok());
    assert!(b.push(pending(1, 8)).is_err());
    assert_eq!(b.commands, MAX_BATCH);
    // A group alone bigger than the bound still goes, alone.
    let b = Batch::new(pending(2000, 1024));
    assert!(b.bytes > MAX_ENTRY_BYTES && b.groups.len() == 1);
}

#[test]
fn a_group_is_answered_once_and_a_dropped_one_is_told_the_node_is_shutting_down() {
    let (tx, rx) = std::sync::mpsc::channel();
    let done = |tx: std::sync::mpsc::Sender<Proposed>| Done::new(move |r| tx.send(r).unwrap());
    done(tx.clone()).send(Ok(vec![]));
    drop(done(tx.clone()));
    drop(tx);
    let answers: Vec<Proposed> = rx.iter().collect();
    assert!(
        matches!(answers[..], [Ok(_), Err(ServiceError::Unavailable(ref m))] if m.contains("shutting down"))
    );
}
