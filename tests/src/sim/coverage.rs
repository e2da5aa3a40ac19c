//! What a run covered: how often each event that matters happened (each
//! fault kind, a torn write kept by a crash and the torn tail cut when the
//! node reopened, segments rotated and purged, snapshots built and
//! installed, a leader change, a module swapped in, an answer lost), so
//! that a range of seeds that passes also says what it went through.
//!
//! A run prints one [`COVERAGE_LINE`] (`coverage fault.crash=2 …`, every
//! mark of [`MARKS`] in order, zero included); [`Coverage::read`] is the
//! one reader of it back. `simulate --seeds` adds the runs up and prints
//! [`Coverage::table`]; the CI test fails when a mark never happened in
//! its seeds ([`Coverage::missing`]).

use std::collections::BTreeMap;

/// Every mark a run counts, with what it counts. A new mark goes here and
/// where it happens; the CI seeds must meet each.
pub const MARKS: &[(&str, &str)] = &[
    ("fault.partition", "two nodes cut from each other"),
    ("fault.one-way", "a link cut one way"),
    ("fault.isolate", "a node cut from everyone"),
    (
        "fault.peers-cut",
        "a node cut from its peers, not its clients",
    ),
    ("fault.clients-cut", "a node cut from the clients"),
    (
        "fault.hold",
        "a link holding every message, then releasing them at once",
    ),
    (
        "fault.crash",
        "a node crashed, restarted later on what its disk kept",
    ),
    ("fault.bounce", "a node crashed and restarted at once"),
    ("fault.pause", "a node paused"),
    (
        "fault.stop",
        "a node stopped as on SIGTERM (a leader hands over), restarted later",
    ),
    (
        "fault.stop-leader",
        "a leader stopped as on SIGTERM: it hands over first",
    ),
    ("fault.disk-full", "a node's disk full"),
    ("fault.disk-sync-fails", "a node's disk failing its syncs"),
    (
        "fault.power-loss-majority",
        "a majority losing power at once",
    ),
    (
        "fault.power-loss-all",
        "the whole cluster losing power at once",
    ),
    (
        "disk.torn-write",
        "a crash kept part of a file's unsynced appends",
    ),
    (
        "log.torn-tail-cut",
        "a node reopened its log and cut a torn tail",
    ),
    (
        "log.segment-rotated",
        "a log segment after a node's first one made",
    ),
    (
        "log.segment-purged",
        "a whole log segment removed behind a snapshot",
    ),
    ("snapshot.built", "a node built a snapshot"),
    (
        "snapshot.installed",
        "a node installed its leader's snapshot",
    ),
    ("raft.leader-change", "a node took over from another leader"),
    (
        "module.swapped",
        "a node applied an upgrade entry that swapped its module",
    ),
    (
        "module.swapped-under-fault",
        "an upgrade answered swapped while a link was cut or held, or a node down",
    ),
    (
        "run.secure",
        "a run with TLS on every connection and authentication",
    ),
    (
        "client.died",
        "a worker's process died mid-acquire or holding",
    ),
    (
        "lock.phantom-release",
        "a leader released a grant whose caller had gone",
    ),
    (
        "op.http",
        "an acquire or release over the HTTP/JSON routes answered",
    ),
    (
        "check.close-handoff",
        "holders: a key's next holding began within 100 ms of the previous one's promised end",
    ),
    (
        "check.refused-release",
        "refusal inside lease: a release answered \"not held\", judged against its lease",
    ),
    (
        "check.fenced-write",
        "lost update: the register refused a write with a stale token",
    ),
    (
        "check.renewed-past-lease",
        "keepalive: a keepalive acknowledged after the grant's own lease had ended",
    ),
    ("op.granted", "a client was granted a lock"),
    ("op.held", "an acquire was answered that the key is held"),
    (
        "op.unknown",
        "a client got no answer (it may or may not have taken effect)",
    ),
];

/// How a run's output names its coverage.
pub const COVERAGE_LINE: &str = "coverage ";

/// Counts by mark (only marks of [`MARKS`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    counts: BTreeMap<&'static str, u64>,
}

impl Coverage {
    /// Count `n` more of `mark`, which must be one of [`MARKS`].
    pub fn add(&mut self, mark: &'static str, n: u64) {
        debug_assert!(MARKS.iter().any(|(m, _)| *m == mark), "unknown mark {mark}");
        if n > 0 {
            *self.counts.entry(mark).or_default() += n;
        }
    }

    /// How many of `mark`.
    pub fn get(&self, mark: &str) -> u64 {
        self.counts.get(mark).copied().unwrap_or(0)
    }

    /// The line a run prints: every mark, in [`MARKS`]' order.
    pub fn line(&self) -> String {
        let marks: Vec<String> = MARKS
            .iter()
            .map(|(m, _)| format!("{m}={}", self.get(m)))
            .collect();
        format!("{COVERAGE_LINE}{}", marks.join(" "))
    }

    /// The coverage a run's output printed, if it printed one; a mark this
    /// build does not know is left out.
    pub fn read(out: &str) -> Option<Coverage> {
        let line = out.lines().find_map(|l| l.strip_prefix(COVERAGE_LINE))?;
        let mut c = Coverage::default();
        for word in line.split_whitespace() {
            let (name, n) = word.split_once('=')?;
            let n: u64 = n.parse().ok()?;
            if let Some((mark, _)) = MARKS.iter().find(|(m, _)| *m == name) {
                c.add(mark, n);
            }
        }
        Some(c)
    }

    /// Another run's counts added to these.
    pub fn merge(&mut self, other: &Coverage) {
        for (mark, n) in &other.counts {
            self.add(mark, *n);
        }
    }

    /// The marks never counted.
    pub fn missing(&self) -> Vec<&'static str> {
        MARKS
            .iter()
            .map(|(m, _)| *m)
            .filter(|m| self.get(m) == 0)
            .collect()
    }

    /// A table of the marks over several runs: in how many runs each
    /// happened (`seen`: one per run that counted it), and how often in
    /// all (`self`).
    pub fn table(&self, seen: &Coverage, runs: u64) -> String {
        let mut t = String::from("| mark | runs | times | what |\n|---|---:|---:|---|\n");
        for (m, what) in MARKS {
            t.push_str(&format!(
                "| `{m}` | {} of {runs} | {} | {what} |\n",
                seen.get(m),
                self.get(m)
            ));
        }
        t
    }

    /// One for each mark this run counted at all (for [`Coverage::table`]'s
    /// runs column).
    pub fn seen(&self) -> Coverage {
        let mut c = Coverage::default();
        for (mark, n) in &self.counts {
            if *n > 0 {
                c.add(mark, 1);
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_reads_back_as_it_was_written() {
        let mut c = Coverage::default();
        c.add("fault.crash", 3);
        c.add("op.unknown", 1);
        let out = format!("history…\n{}\nseed 1: done\n", c.line());
        assert_eq!(Coverage::read(&out), Some(c));
        assert_eq!(Coverage::read("no such line"), None);
    }

    /// The negative control of the CI's coverage check: a mark that never
    /// happened is named, and only it.
    #[test]
    fn a_mark_never_counted_is_missing() {
        let mut all = Coverage::default();
        for (m, _) in MARKS {
            all.add(m, 1);
        }
        assert!(all.missing().is_empty());
        let mut short = Coverage::default();
        for (m, _) in MARKS.iter().filter(|(m, _)| *m != "log.torn-tail-cut") {
            short.add(m, 2);
        }
        assert_eq!(short.missing(), ["log.torn-tail-cut"]);
        let mut runs = Coverage::default();
        runs.merge(&short.seen());
        runs.merge(&short.seen());
        assert_eq!(runs.get("fault.crash"), 2);
        assert!(short
            .table(&runs, 2)
            .contains("| `log.torn-tail-cut` | 0 of 2 | 0 |"));
    }
}
