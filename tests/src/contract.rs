//! Talking to a node through its OpenAPI document: one HTTP call, whether
//! an answer fits what the document lists for it, and request bodies
//! generated from the document's request schemas.
//!
//! The generator draws, from a seed, bodies the document allows
//! ([`Gen::valid`]: every documented `minimum`, `maximum`, `maxLength`,
//! `enum`, `required`; a string with a `pattern` is one of its
//! `example`s) and bodies one step past it ([`Gen::hostile`]: one field
//! below its minimum, above its maximum, one character too long, of the
//! wrong type, or missing while required). A node must take every valid
//! body as well-formed (no 400) and answer every body, valid or not,
//! without an internal error, with an answer the document lists.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::openapi::{self, check, required, response_schema, type_of};

/// An HTTP answer.
pub struct Answer {
    pub status: u16,
    pub content_type: String,
    pub text: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }
}

/// One request; panics only when no answer came at all.
pub fn call(addr: &str, method: &str, path: &str, body: Option<&Value>) -> Answer {
    let req = ureq::request(&method.to_uppercase(), &format!("http://{addr}{path}"))
        .timeout(Duration::from_secs(10));
    let sent = match body {
        Some(b) => req.send_json(b.clone()),
        None => req.call(),
    };
    let resp = match sent {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{method} {path}: {e}"),
    };
    Answer {
        status: resp.status(),
        content_type: resp.content_type().to_string(),
        text: resp.into_string().unwrap_or_default(),
    }
}

/// A documented path with its parameters filled in.
pub fn concrete(path: &str) -> String {
    path.replace("{key}", "contract/probe")
        .replace("{token}", "1")
        .replace(
            "/module-keys/contract/probe",
            &format!("/module-keys/{}", "0".repeat(64)),
        )
}

/// Whether `answer` is one the document lists for `method path` with its
/// status, and fits its schema (JSON strictly; others by content type).
pub fn fits(doc: &Value, path: &str, method: &str, answer: &Answer) -> Result<(), String> {
    let m = method.to_uppercase();
    let documented = &doc["paths"][path][method]["responses"][answer.status.to_string()];
    if !documented.is_object() {
        return Err(format!(
            "{m} {path} answered {} ({}), which the document does not list",
            answer.status, answer.text
        ));
    }
    match response_schema(doc, path, method, answer.status) {
        Some(schema) => {
            if !answer.content_type.starts_with("application/json") {
                return Err(format!("{m} {path}: {}", answer.content_type));
            }
            let at = format!("{m} {path} {}", answer.status);
            check(doc, schema, &answer.json(), &at)
                .map_err(|e| format!("{e}\nthe answer: {}", answer.text))
        }
        None => {
            let types: Vec<&String> = documented["content"]
                .as_object()
                .map(|c| c.keys().collect())
                .unwrap_or_default();
            if types
                .iter()
                .any(|t| answer.content_type.starts_with(t.as_str()))
            {
                Ok(())
            } else {
                Err(format!(
                    "{m} {path}: answered {}, documented {types:?}",
                    answer.content_type
                ))
            }
        }
    }
}

/// Bodies drawn from a seed (splitmix64: a seed replays the same bodies).
pub struct Gen {
    state: u64,
}

static NULL: Value = Value::Null;

/// The schema `$ref` names, or the schema itself (null when it names none).
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    openapi::resolve(doc, schema).unwrap_or(&NULL)
}

/// The integer range a schema allows.
fn int_range(s: &Value) -> (i128, i128) {
    let top = match s.get("format").and_then(Value::as_str) {
        Some("int32") => i128::from(i32::MAX),
        _ => i128::from(i64::MAX),
    };
    let lo = s
        .get("minimum")
        .and_then(Value::as_i64)
        .map_or(-1000, i128::from);
    let hi = s
        .get("maximum")
        .and_then(Value::as_i64)
        .map_or(top, i128::from);
    (lo, hi)
}

const CHARS: &[char] = &['a', 'z', '0', '/', '-', '_', '.', 'é', '鍵', ' '];

impl Gen {
    pub fn new(seed: u64) -> Gen {
        Gen { state: seed }
    }

    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// 0..n.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, list: &'a [T]) -> &'a T {
        &list[self.below(list.len())]
    }

    fn int_in(&mut self, lo: i128, hi: i128) -> i128 {
        let span = (hi - lo).max(0) as u128;
        match self.below(5) {
            0 => lo,
            1 => hi,
            2 => lo + (self.next() as u128 % (span.min(1000) + 1)) as i128,
            _ => lo + (((self.next() as u128) << 64 | self.next() as u128) % (span + 1)) as i128,
        }
    }

    fn string(&mut self, len: usize) -> String {
        (0..len).map(|_| *self.pick(CHARS)).collect()
    }

    /// A value `schema` allows. `cap` may narrow a field by name (a wait
    /// the test should not sit through), never widen it.
    pub fn valid(
        &mut self,
        doc: &Value,
        schema: &Value,
        cap: &dyn Fn(&str, Value) -> Value,
    ) -> Value {
        let s = resolve(doc, schema);
        if let Some(branches) = s.get("oneOf").and_then(Value::as_array) {
            let b = self.pick(branches).clone();
            return self.valid(doc, &b, cap);
        }
        if let Some(e) = s.get("enum").and_then(Value::as_array) {
            return self.pick(e).clone();
        }
        let (t, null) = type_of(s);
        if null && self.below(4) == 0 {
            return Value::Null;
        }
        match t {
            "object" => {
                let required = required(s);
                let mut out = Map::new();
                for (name, p) in s["properties"].as_object().into_iter().flatten() {
                    if required.contains(&name.as_str()) || self.below(2) == 0 {
                        let v = self.valid(doc, p, cap);
                        out.insert(name.clone(), cap(name, v));
                    }
                }
                Value::Object(out)
            }
            "array" => {
                let n = self.below(4);
                Value::Array((0..n).map(|_| self.valid(doc, &s["items"], cap)).collect())
            }
            "integer" => {
                let (lo, hi) = int_range(s);
                let n = self.int_in(lo, hi);
                serde_json::from_str(&n.to_string()).unwrap_or(Value::Null)
            }
            "boolean" => Value::from(self.below(2) == 0),
            "string" if s.get("pattern").is_some() => {
                let examples: Vec<Value> = s
                    .get("example")
                    .into_iter()
                    .chain(s["examples"].as_array().into_iter().flatten())
                    .cloned()
                    .collect();
                assert!(!examples.is_empty(), "a pattern without an example: {s}");
                self.pick(&examples).clone()
            }
            "string" => {
                let max = s.get("maxLength").and_then(Value::as_u64).unwrap_or(40) as usize;
                let min = s.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
                let len = match self.below(3) {
                    0 => min,
                    1 => max,
                    _ => min + self.below(max - min + 1),
                };
                Value::from(self.string(len))
            }
            _ => Value::Null,
        }
    }

    /// A valid body with one field past what its schema allows (for an
    /// object), or a value of another type.
    pub fn hostile(
        &mut self,
        doc: &Value,
        schema: &Value,
        cap: &dyn Fn(&str, Value) -> Value,
    ) -> Value {
        let s = resolve(doc, schema);
        let mut body = self.valid(doc, s, cap);
        let Some(obj) = body.as_object_mut() else {
            return self.wrong(&Value::Null);
        };
        let props: Vec<(&String, &Value)> =
            s["properties"].as_object().into_iter().flatten().collect();
        if props.is_empty() {
            return body;
        }
        let (name, p) = *self.pick(&props);
        let p = resolve(doc, p);
        if self.below(6) == 0 {
            obj.remove(name);
        } else {
            obj.insert(name.clone(), self.past(p));
        }
        body
    }

    /// A value just past `s`'s bounds, or of another type.
    fn past(&mut self, s: &Value) -> Value {
        let (t, _) = type_of(s);
        match (t, self.below(3)) {
            ("integer", 0 | 1) => {
                let (lo, hi) = int_range(s);
                let n = if self.below(2) == 0 { lo - 1 } else { hi + 1 };
                serde_json::from_str(&n.to_string()).unwrap_or(Value::Null)
            }
            ("string", 0 | 1) => {
                // Long, but under the body limit (its bound is bad_input_http's).
                let max = s.get("maxLength").and_then(Value::as_u64).unwrap_or(5_000) as usize;
                Value::from(self.string(max + 1))
            }
            _ => self.wrong(s),
        }
    }

    fn wrong(&mut self, _s: &Value) -> Value {
        self.pick(&[
            Value::from(-1),
            Value::from(1.5),
            Value::from("x"),
            Value::from(true),
            Value::Array(vec![]),
            serde_json::json!({"x": 1}),
            Value::from(u64::MAX),
        ])
        .clone()
    }
}
