//! The node's OpenAPI document, read as plain JSON: a strict check of an
//! answer against a schema (a field on one side only is an error), and
//! the Markdown reference `docs/api.md` rendered from it.
//!
//! The check covers what the document uses (OpenAPI 3.1 as utoipa
//! writes it): `$ref`, `oneOf`/`anyOf`/`allOf`, `type` (one or a list),
//! `enum`, `properties`, `required`, `items` and `additionalProperties`.
//! An object schema without `additionalProperties` allows no other field:
//! that is the drift a server-only field would be.

mod markdown;

pub use markdown::markdown;
use serde_json::{Map, Value};

/// The schema `$ref` names (`#/components/schemas/NAME`).
pub fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> Result<&'a Value, String> {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r
                .strip_prefix("#/components/schemas/")
                .ok_or_else(|| format!("unsupported $ref {r}"))?;
            doc["components"]["schemas"]
                .get(name)
                .ok_or_else(|| format!("$ref to a missing schema {name}"))
        }
        None => Ok(schema),
    }
}

/// The schema's type other than `null`, and whether `null` is allowed.
pub fn type_of(s: &Value) -> (&str, bool) {
    match s.get("type") {
        Some(Value::String(t)) => (t.as_str(), false),
        Some(Value::Array(ts)) => {
            let null = ts.iter().any(|t| t == "null");
            let t = ts
                .iter()
                .filter_map(Value::as_str)
                .find(|t| *t != "null")
                .unwrap_or("null");
            (t, null)
        }
        _ if s.get("properties").is_some() => ("object", false),
        _ => ("null", true),
    }
}

/// The fields an object schema requires.
pub fn required(s: &Value) -> Vec<&str> {
    s.get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "string" => v.is_string(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        _ => false,
    }
}

/// Check `value` against `schema` (of `doc`); `at` names the place.
pub fn check(doc: &Value, schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    let s = resolve(doc, schema)?;
    for (key, all) in [("oneOf", false), ("anyOf", false), ("allOf", true)] {
        if let Some(list) = s.get(key).and_then(Value::as_array) {
            let results: Vec<Result<(), String>> =
                list.iter().map(|sub| check(doc, sub, value, at)).collect();
            let ok = if all {
                results.iter().all(Result::is_ok)
            } else {
                results.iter().any(Result::is_ok)
            };
            if !ok {
                let why: Vec<String> = results.into_iter().filter_map(Result::err).collect();
                return Err(format!("{at}: fits no {key} branch: {}", why.join("; ")));
            }
        }
    }
    if let Some(t) = s.get("type") {
        let types: Vec<&str> = match t {
            Value::String(one) => vec![one.as_str()],
            Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
            _ => return Err(format!("{at}: odd type {t}")),
        };
        if !types.iter().any(|t| type_ok(t, value)) {
            return Err(format!("{at}: {value} is not {}", types.join(" or ")));
        }
    }
    if let Some(allowed) = s.get("enum").and_then(Value::as_array) {
        if !allowed.contains(value) {
            return Err(format!("{at}: {value} is not one of {allowed:?}"));
        }
    }
    if let (Some(items), Some(list)) = (s.get("items"), value.as_array()) {
        for (i, v) in list.iter().enumerate() {
            check(doc, items, v, &format!("{at}[{i}]"))?;
        }
    }
    if let Some(obj) = value.as_object() {
        if s.get("properties").is_some() || s.get("type") == Some(&Value::from("object")) {
            check_object(doc, s, obj, at)?;
        }
    }
    Ok(())
}

fn check_object(doc: &Value, s: &Value, obj: &Map<String, Value>, at: &str) -> Result<(), String> {
    let empty = Map::new();
    let props = s
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for name in required(s) {
        if !obj.contains_key(name) {
            return Err(format!("{at}: the documented field {name:?} is missing"));
        }
    }
    let extra_allowed = match s.get("additionalProperties") {
        None | Some(Value::Bool(false)) => None,
        Some(other) => Some(other),
    };
    for (name, v) in obj {
        let here = format!("{at}.{name}");
        match (props.get(name), extra_allowed) {
            (Some(p), _) => check(doc, p, v, &here)?,
            (None, Some(Value::Bool(true))) => {}
            (None, Some(extra)) => check(doc, extra, v, &here)?,
            (None, None) => return Err(format!("{here}: a field the document does not name")),
        }
    }
    Ok(())
}

/// The schema of the `status` answer of `method path` (as documented).
pub fn response_schema<'a>(
    doc: &'a Value,
    path: &str,
    method: &str,
    status: u16,
) -> Option<&'a Value> {
    doc["paths"][path][method]["responses"][status.to_string()]["content"]["application/json"]
        .get("schema")
}

/// A body with every property a request schema documents: a field the
/// server does not know is refused (`deny_unknown_fields`), so sending it
/// shows the document names no field the server lacks. `pick` may choose
/// a value by field name; otherwise one is made from the type.
pub fn full_body(doc: &Value, schema: &Value, pick: &dyn Fn(&str) -> Option<Value>) -> Value {
    let Ok(s) = resolve(doc, schema) else {
        return Value::Null;
    };
    if let Some(list) = s.get("oneOf").and_then(Value::as_array) {
        let real = list
            .iter()
            .find(|b| b.get("type") != Some(&Value::from("null")));
        return real.map_or(Value::Null, |b| full_body(doc, b, pick));
    }
    if let Some(first) = s
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    match type_of(s).0 {
        "object" => {
            let mut out = Map::new();
            for (name, p) in s
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                let v = pick(name).unwrap_or_else(|| full_body(doc, p, pick));
                out.insert(name.clone(), v);
            }
            Value::Object(out)
        }
        "array" => Value::Array(vec![full_body(doc, &s["items"], pick)]),
        "integer" | "number" => Value::from(1),
        "boolean" => Value::from(true),
        "string" => Value::from("contract"),
        _ => Value::Null,
    }
}

const METHODS: [&str; 4] = ["get", "put", "post", "delete"];

/// Every (path, method) the document names.
pub fn operations(doc: &Value) -> Vec<(String, &'static str)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for m in METHODS {
            if item.get(m).is_some() {
                out.push((path.clone(), m));
            }
        }
    }
    out
}

pub fn methods() -> [&'static str; 4] {
    METHODS
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        json!({"components": {"schemas": {
            "Thing": {"type": "object", "required": ["a"], "properties": {
                "a": {"type": "integer"},
                "b": {"oneOf": [{"type": "null"}, {"$ref": "#/components/schemas/Mode"}]},
                "c": {"type": "array", "items": {"type": "string"}}}},
            "Mode": {"type": "string", "enum": ["x", "y"]},
            "Open": {"type": "object", "properties": {"e": {"type": "string"}},
                     "additionalProperties": {}}
        }}})
    }

    fn thing() -> Value {
        json!({"$ref": "#/components/schemas/Thing"})
    }

    #[test]
    fn a_field_on_either_side_only_is_refused() {
        let d = doc();
        assert!(check(&d, &thing(), &json!({"a": 1, "b": "x", "c": ["s"]}), "$").is_ok());
        assert!(check(&d, &thing(), &json!({"a": 1, "b": null}), "$").is_ok());
        let extra = check(&d, &thing(), &json!({"a": 1, "z": 2}), "$").unwrap_err();
        assert!(extra.contains("$.z"), "{extra}");
        let missing = check(&d, &thing(), &json!({"b": "x"}), "$").unwrap_err();
        assert!(missing.contains("\"a\""), "{missing}");
        assert!(check(&d, &thing(), &json!({"a": "1"}), "$").is_err());
        assert!(check(&d, &thing(), &json!({"a": 1, "b": "q"}), "$").is_err());
        assert!(check(&d, &thing(), &json!({"a": 1, "c": [1]}), "$").is_err());
        let open = json!({"$ref": "#/components/schemas/Open"});
        assert!(check(&d, &open, &json!({"e": "s", "index": 3}), "$").is_ok());
    }

    #[test]
    fn a_full_body_names_every_field() {
        let d = doc();
        let b = full_body(&d, &thing(), &|n| (n == "a").then(|| json!(7)));
        assert_eq!(b, json!({"a": 7, "b": "x", "c": ["contract"]}));
    }
}
