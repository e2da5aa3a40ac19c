//! Durations as people type them: `10s`, `1m30s`, `1.5s`, `500ms`,
//! `1h 30m` (jiff's friendly format, a maintained parser), or a bare
//! number of milliseconds (what the server's `*_ms` settings and the HTTP
//! API's `*_ms` fields always took). The one parser of durations on a
//! command line, in an environment variable or in a config file, for
//! `lockctl` and `lockd` alike.

use std::time::Duration;

/// `s` as a duration (see the module docs).
pub fn parse(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(ms) = s.parse::<u64>() {
        return Ok(Duration::from_millis(ms));
    }
    let d: jiff::SignedDuration = s
        .parse()
        .map_err(|e| format!("{s:?} is not a duration like 10s, 1m30s, 1.5s or 500ms ({e})"))?;
    Duration::try_from(d).map_err(|_| format!("{s:?} is negative; a duration is 0 or more"))
}

/// `s` as whole milliseconds (a finer part is refused, not rounded: the
/// setting would not be what was asked).
pub fn parse_ms(s: &str) -> Result<u64, String> {
    let d = parse(s)?;
    if d.subsec_nanos() % 1_000_000 != 0 {
        return Err(format!("{s:?} is finer than a millisecond"));
    }
    u64::try_from(d.as_millis()).map_err(|_| format!("{s:?} is too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_a_unit_or_milliseconds() {
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse(" 500ms "), Ok(Duration::from_millis(500)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("250"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_ms("1m30s"), Ok(90_000));
        assert_eq!(parse_ms("40"), Ok(40));
    }

    #[test]
    fn bad_durations_say_why() {
        for (bad, why) in [
            (
                "10x",
                "\"10x\" is not a duration like 10s, 1m30s, 1.5s or 500ms (",
            ),
            ("s", "\"s\" is not a duration like"),
            (
                "99999999999999999h",
                "\"99999999999999999h\" is not a duration like",
            ),
            ("-1s", "\"-1s\" is negative"),
        ] {
            let got = parse(bad);
            assert!(
                got.as_ref().is_err_and(|e| e.starts_with(why)),
                "{bad}: {got:?}"
            );
        }
        assert_eq!(
            parse_ms("1.5ms"),
            Err("\"1.5ms\" is finer than a millisecond".into())
        );
    }
}
