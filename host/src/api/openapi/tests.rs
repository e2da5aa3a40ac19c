//! The document against the route table: the same paths, methods and
//! public routes.

use std::collections::{BTreeMap, BTreeSet};

use axum::routing::MethodFilter;

use super::*;
use crate::api::routes::{self, find, ROUTES};

/// The route that serves a documented path: a path with parameters by
/// its fixed beginning (the lock and session paths are one wildcard
/// route each).
fn served_as(path: &str) -> &str {
    find(path).map_or(path, |(r, _)| r.path)
}

#[test]
fn the_document_names_exactly_the_routes_served() {
    let doc = document();
    let documented: BTreeSet<&str> = doc.paths.paths.keys().map(|p| served_as(p)).collect();
    let served: BTreeSet<&str> = ROUTES.iter().map(|r| r.path).collect();
    let only_doc: Vec<_> = documented.difference(&served).collect();
    let only_served: Vec<_> = served.difference(&documented).collect();
    assert!(
        only_doc.is_empty() && only_served.is_empty(),
        "documented only: {only_doc:?}; served only: {only_served:?}"
    );
}

#[test]
fn the_document_names_exactly_the_methods_served() {
    let doc = document();
    let mut documented: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (path, i) in &doc.paths.paths {
        let named = [
            ("get", &i.get),
            ("put", &i.put),
            ("post", &i.post),
            ("delete", &i.delete),
            ("options", &i.options),
            ("head", &i.head),
            ("patch", &i.patch),
            ("trace", &i.trace),
        ];
        let on = named.into_iter().filter(|(_, o)| o.is_some());
        documented
            .entry(served_as(path))
            .or_default()
            .extend(on.map(|(m, _)| m));
    }
    let name = |f: MethodFilter| match f {
        f if f == MethodFilter::GET => "get",
        f if f == MethodFilter::PUT => "put",
        f if f == MethodFilter::POST => "post",
        f if f == MethodFilter::DELETE => "delete",
        _ => "a method the document is not checked for",
    };
    let served: BTreeMap<&str, BTreeSet<&str>> = ROUTES
        .iter()
        .map(|r| (r.path, r.methods.iter().map(|s| name(s.method)).collect()))
        .collect();
    assert_eq!(documented, served);
}

#[test]
fn the_lock_actions_documented_are_the_ones_answered() {
    let doc = document();
    let actions: BTreeSet<&str> = doc
        .paths
        .paths
        .keys()
        .filter_map(|p| p.strip_prefix("/v1/locks/{key}/"))
        .collect();
    let mut answered: BTreeSet<&str> = locks::ACTIONS.into_iter().collect();
    answered.insert("holders/{token}");
    assert_eq!(actions, answered);
}

#[test]
fn public_paths_are_the_ones_the_authorisation_lets_through() {
    use crate::auth::Action;
    let action = |p: &str| {
        let uri: axum::http::Uri = p.replace(['{', '}'], "").parse().expect("uri");
        super::super::parse::parse(&axum::http::Method::GET, &uri).map(|o| o.action())
    };
    let doc = document();
    let public: Vec<&String> = doc
        .paths
        .paths
        .keys()
        .filter(|p| routes::public(p))
        .collect();
    assert_eq!(public, ["/healthz", "/readyz", "/ui", "/v1/openapi.json"]);
    for p in doc.paths.paths.keys() {
        let let_through = action(p).ok() == Some(Action::Public);
        assert_eq!(let_through, routes::public(p), "{p}");
    }
}

#[test]
fn the_document_serializes() {
    let v: serde_json::Value = serde_json::from_str(json()).expect("json");
    assert!(v["openapi"].as_str().is_some_and(|s| s.starts_with("3.")));
    assert_eq!(v["info"]["version"], env!("CARGO_PKG_VERSION"));
}
