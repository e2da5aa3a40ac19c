//! Unit tests of the parent module.
use openraft::EntryPayload;

use super::storage::in_range;
use super::*;

fn entry(index: u64) -> Entry {
    Entry {
        log_id: openraft::LogId::new(openraft::CommittedLeaderId::new(1, 1), index),
        payload: EntryPayload::Blank,
    }
}

#[test]
fn a_range_that_holds_no_index_yields_no_entries() {
    let entries: BTreeMap<u64, Entry> = (1..=5).map(|i| (i, entry(i))).collect();
    let got = |v: Vec<Entry>| v.iter().map(|e| e.log_id.index).collect::<Vec<_>>();
    assert_eq!(got(in_range(&entries, 2..4)), vec![2, 3]);
    assert_eq!(got(in_range(&entries, 4..=5)), vec![4, 5]);
    assert_eq!(got(in_range(&entries, ..)), vec![1, 2, 3, 4, 5]);
    #[allow(clippy::reversed_empty_ranges)]
    let inverted = in_range(&entries, 4..2);
    assert!(inverted.is_empty());
    assert!(in_range(&entries, 3..3).is_empty());
    assert!(in_range(&entries, ..0).is_empty());
    let excluded_both = (std::ops::Bound::Excluded(3), std::ops::Bound::Excluded(3));
    assert!(in_range(&entries, excluded_both).is_empty());
    let from_max = (
        std::ops::Bound::Excluded(u64::MAX),
        std::ops::Bound::Unbounded,
    );
    assert!(in_range(&entries, from_max).is_empty());
}
#[test]
fn an_answer_is_the_run_from_the_start_of_the_range() {
    // 1..=3 purged, 6 missing: as after a snapshot, or a damaged log.
    let entries: BTreeMap<u64, Entry> = [4, 5, 7, 8].map(|i| (i, entry(i))).into();
    let got = |v: Vec<Entry>| v.iter().map(|e| e.log_id.index).collect::<Vec<_>>();
    assert_eq!(got(in_range(&entries, 1..9)), Vec::<u64>::new());
    assert_eq!(got(in_range(&entries, 4..9)), vec![4, 5]);
    assert_eq!(got(in_range(&entries, 7..)), vec![7, 8]);
    assert_eq!(got(in_range(&entries, ..)), vec![4, 5]);
    assert_eq!(got(in_range(&entries, 6..9)), Vec::<u64>::new());
}
