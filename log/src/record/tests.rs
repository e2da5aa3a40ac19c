//! Unit tests of the record framing: round trips, refusals, corruption, and
//! the resync search and its budget.
use super::*;

fn rec(ops: &[WalOp<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_record(ops, MAX_PAYLOAD_LEN, &mut out).expect("small batch");
    out
}

#[test]
fn encode_decode_round_trip() {
    let ops = [
        WalOp::Append {
            index: 7,
            payload: b"seven",
        },
        WalOp::Truncate { since: 3 },
        WalOp::Append {
            index: u64::MAX,
            payload: b"",
        },
    ];
    let r = rec(&ops);
    let len = u32::from_le_bytes(r[0..4].try_into().unwrap()) as usize;
    assert_eq!(len, r.len() - RECORD_HEADER_LEN);
    let (records, end) = scan(&r, 0);
    assert_eq!(end, ScanEnd::Clean);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0], ops);
}

#[test]
fn oversized_batch_is_refused() {
    let big = vec![0u8; 100];
    let mut out = Vec::new();
    let err = encode_record(
        &[WalOp::Append {
            index: 1,
            payload: &big,
        }],
        64,
        &mut out,
    )
    .unwrap_err();
    assert_eq!(err, (OP_COUNT_LEN + APPEND_FIXED_LEN + 100) as u64);
}

#[test]
fn undecodable_but_crc_valid_is_corrupt() {
    // A well-framed record whose payload has an unknown op tag.
    let payload = [1, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut r = (payload.len() as u32).to_le_bytes().to_vec();
    r.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    r.extend_from_slice(&payload);
    let (_, end) = scan(&r, 0);
    assert!(
        matches!(end, ScanEnd::Corrupt { offset: 0, ref reason } if reason.contains("unknown op tag")),
        "{end:?}"
    );
}

#[test]
fn zero_length_record_before_data_is_found_out_by_the_resync() {
    // The scan stops at the bad frame; the record after it is what
    // tells recovery this is damage and not a torn tail.
    let mut buf = vec![0u8; 16];
    buf.extend_from_slice(&rec(&[WalOp::Truncate { since: 1 }]));
    let (_, end) = scan(&buf, 0);
    assert!(
        matches!(end, ScanEnd::TornCandidate { offset: 0, ref reason } if reason.contains("impossible record length 0")),
        "{end:?}"
    );
    assert_eq!(find_record_from(&buf, 1), Resync::Found(16));
}

#[test]
fn finds_a_record_hidden_behind_a_bad_length() {
    let mut buf = rec(&[WalOp::Append {
        index: 1,
        payload: b"a",
    }]);
    let second = buf.len();
    buf.extend_from_slice(&rec(&[WalOp::Append {
        index: 2,
        payload: b"b",
    }]));
    assert_eq!(find_record_from(&buf, 1), Resync::Found(second));
    assert_eq!(find_record_from(&buf, second + 1), Resync::NotFound);
    assert_eq!(find_record_within(&buf, 1, 5), Resync::GaveUp);
}

#[test]
fn a_torn_record_before_the_padding_is_searched_within_the_budget() {
    // Torn bytes whose every fourth position claims a 512 KiB record,
    // then the zeros the log lays ahead: every claimed length fits.
    // Charged by the lengths claimed, 2 100 of them spent the budget
    // and recovery refused a torn tail as damage.
    let mut buf = [0x00, 0x00, 0x08, 0x00].repeat(2_100);
    buf.resize(buf.len() + (1 << 20), 0);
    assert_eq!(find_record_from(&buf, 0), Resync::NotFound);
}

#[test]
fn impossible_op_count_is_rejected_before_walking() {
    let payload = [0xff, 0xff, 0xff, 0x0f, 2, 0, 0, 0, 0, 0, 0, 0, 0];
    let err = decode_payload(&payload).unwrap_err();
    assert!(err.contains("cannot fit"), "{err}");
}
