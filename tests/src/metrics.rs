//! `/metrics` read with a Prometheus text parser (`prometheus-parse`),
//! and samples picked by a selector like `name{label="value"}`.

use std::collections::BTreeMap;

pub use prometheus_parse::{Sample, Scrape, Value};

/// Parse a scrape; an error says which line the parser refused.
pub fn parse(text: &str) -> Result<Scrape, String> {
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).map_err(|e| e.to_string())
}

/// `name{a="x",b="y"}` as the name and the labels it asks for.
fn selector(s: &str) -> (&str, BTreeMap<String, String>) {
    let Some((name, rest)) = s.split_once('{') else {
        return (s, BTreeMap::new());
    };
    let labels = rest
        .trim_end_matches('}')
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
        .collect();
    (name, labels)
}

/// The number a sample carries, when it is one number.
pub fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Counter(x) | Value::Gauge(x) | Value::Untyped(x) => Some(*x),
        Value::Histogram(_) | Value::Summary(_) => None,
    }
}

/// The samples `selector` matches: the name exactly, and every label it
/// names with that value.
pub fn matching<'a>(scrape: &'a Scrape, selector_text: &str) -> Vec<&'a Sample> {
    let (name, want) = selector(selector_text);
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .filter(|s| {
            want.iter()
                .all(|(k, v)| s.labels.get(k) == Some(v.as_str()))
        })
        .collect()
}

/// The value of the first sample `selector` matches in `text`.
pub fn value(text: &str, selector_text: &str) -> Option<f64> {
    value_of(&parse(text).ok()?, selector_text)
}

/// The value of the first sample `selector` matches in `scrape`.
pub fn value_of(scrape: &Scrape, selector_text: &str) -> Option<f64> {
    matching(scrape, selector_text)
        .first()
        .and_then(|s| number(&s.value))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP a_events Events.\n# TYPE a_events counter\na_events_total{node=\"1\",event=\"grant\"} 3\na_events_total{node=\"1\",event=\"release\"} 2\n# TYPE g gauge\ng{node=\"1\"} 7\n# EOF\n";

    #[test]
    fn a_selector_picks_by_name_and_labels() {
        assert_eq!(value(TEXT, "a_events_total{event=\"release\"}"), Some(2.0));
        assert_eq!(
            value(TEXT, "a_events_total{event=\"grant\",node=\"1\"}"),
            Some(3.0)
        );
        assert_eq!(value(TEXT, "g"), Some(7.0));
        assert_eq!(value(TEXT, "a_events_total{event=\"expire\"}"), None);
        assert_eq!(value(TEXT, "a_event"), None);
    }
}
