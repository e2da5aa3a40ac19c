//! Every route's reading, recorded: for each path without parameters (and
//! samples of those with, and near misses), each method's parse (the
//! [`Op`](super::super::op::Op) and what authorisation asks of it, or the
//! error) and whether a forwarded principal is taken on it. A change to
//! any of them, on purpose or not, shows here line by line.

use axum::http::{Method, Uri};

use super::{answered_by_leader, public, Asks, ROUTES};
use crate::api::parse::parse;

const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"];

/// Queries, paths with parameters, and near misses of the table's paths.
const SAMPLES: [&str; 17] = [
    "/v1/locks?prefix=a&limit=2",
    "/v1/locks?nope=1",
    "/v1/watch?prefix=a&from=3",
    "/v1/watch?from=0",
    "/v1/locks/a",
    "/v1/locks/a/acquire",
    "/v1/locks/a/holders/7",
    "/v1/locks/",
    "/v1/sessions/1",
    "/v1/sessions/1/keepalive",
    "/v1/sessions/1/other",
    "/v1/sessions/",
    "/v1/admin/module-keys/ab",
    "/v1/admin/module-keys/",
    "/v1/admin/module-keys/a/b",
    "/v1/status/",
    "/nowhere",
];

fn reading(method: &str, path: &str) -> String {
    let m: Method = method.parse().expect("method");
    let u: Uri = path.parse().expect("uri");
    let what = match parse(&m, &u) {
        Ok(op) => format!("{op:?} -> {:?}", op.action()),
        Err(e) => format!("{} {}", e.status.as_u16(), e.message),
    };
    let by = match answered_by_leader(&m, u.path()) {
        true => "leader",
        false => "node",
    };
    format!("{method} {path}: {what}; {by}")
}

#[test]
fn every_route_reads_as_recorded() {
    let fixed = ROUTES.iter().map(|r| r.path).filter(|p| !p.contains('{'));
    let got: Vec<String> = fixed
        .chain(SAMPLES)
        .flat_map(|p| METHODS.map(|m| reading(m, p)))
        .collect();
    let want: Vec<&str> = RECORDED.lines().filter(|l| !l.is_empty()).collect();
    let differ: Vec<String> = got
        .iter()
        .zip(&want)
        .filter(|(g, w)| g != w)
        .map(|(g, w)| format!("recorded: {w}\n     now: {g}"))
        .collect();
    assert!(
        differ.is_empty() && got.len() == want.len(),
        "{} of {} readings differ ({} recorded):\n{}\nall now:\n{}",
        differ.len(),
        got.len(),
        want.len(),
        differ.join("\n"),
        got.join("\n")
    );
}

/// The parser of a path with parameters is its route's, whatever the
/// method (`parse::parse` takes it from the route's methods).
#[test]
fn a_route_with_parameters_asks_the_same_of_every_method() {
    for r in ROUTES {
        let asks: Vec<Asks> = r.methods.iter().map(|s| s.asks).collect();
        let parsed = asks
            .iter()
            .map(|a| matches!(a, Asks::Lock | Asks::Session | Asks::UntrustKey));
        match r.path.contains('{') {
            true => assert!(
                parsed.clone().all(|p| p) && asks.windows(2).all(|w| w[0] == w[1]),
                "{}: {asks:?}",
                r.path
            ),
            false => assert!(!parsed.clone().any(|p| p), "{}: {asks:?}", r.path),
        }
        assert!(!asks.is_empty(), "{} serves no method", r.path);
    }
}

/// What the routes read as: one line a request, `METHOD PATH: what it
/// parses to -> what authorisation asks; who answers it`.
const RECORDED: &str = include_str!("readings.txt");

#[test]
fn the_public_paths_are_the_routes_every_method_of_which_is_public() {
    for route in ROUTES {
        assert_eq!(
            public(route.path),
            crate::api::paths::PUBLIC.contains(&route.path),
            "{}",
            route.path
        );
    }
}
