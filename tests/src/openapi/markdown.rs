//! `docs/api.md`, rendered from the OpenAPI document: every operation
//! with its parameters and answers, the schemas, and the error codes.

use serde_json::Value;

use super::{operations, required};

/// A schema in words, linking to named schemas.
fn type_text(s: &Value) -> String {
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or(r);
        return format!("[{name}](#{})", name.to_lowercase());
    }
    if let Some(list) = s.get("oneOf").and_then(Value::as_array) {
        let parts: Vec<String> = list.iter().map(type_text).collect();
        return parts.join(" or ");
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        let parts: Vec<String> = e.iter().map(|v| format!("`{v}`")).collect();
        return parts.join(" \\| ");
    }
    let base = match s.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any".into(),
    };
    if base.starts_with("array") {
        return format!("array of {}", type_text(&s["items"]));
    }
    base
}

fn one_line(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// The "Error codes" section: every [`ErrorCode`](lockd_proto::ErrorCode)
/// with its meaning, in the order they were added.
fn error_codes() -> String {
    let mut out = String::from(
        "## Error codes\n\nEvery error answer carries a stable `code` (HTTP: the body's `code`; the native protocol: the error's code), which clients match instead of the text. New codes are only ever appended; a client meeting a code it does not know falls back on the HTTP status. Each code has one HTTP status (`bad_module_key` excepted: 400 for a key that is not 64 hex digits, 422 for one that is not a usable key, 409 when the cluster trusts as many keys as it keeps, 404 for removing a key it does not trust); `Retry-After: 1` comes with `overloaded`, `too_many_waiters`, `too_many_watchers` and `busy`.\n\n| code | HTTP status | meaning |\n|---|---:|---|\n",
    );
    for c in lockd_proto::ErrorCode::ALL {
        out.push_str(&format!(
            "| `{c}` | {} | {} |\n",
            c.http_status(),
            one_line(c.describe())
        ));
    }
    out.push('\n');
    out
}

/// The Markdown reference of the document.
pub fn markdown(doc: &Value) -> String {
    let mut out = String::new();
    let info = &doc["info"];
    out.push_str(&format!(
        "# {} HTTP API {}\n\n<!-- Rendered from GET /v1/openapi.json by the test api_contract (LOCKD_BLESS=1 rewrites it); do not edit. -->\n\n{}\n\nThe document itself: [`openapi.json`](openapi.json) (OpenAPI {}), also served by every node at `GET /v1/openapi.json`.\n\n",
        info["title"].as_str().unwrap_or("API"),
        info["version"].as_str().unwrap_or(""),
        one_line(info["description"].as_str().unwrap_or("")),
        doc["openapi"].as_str().unwrap_or("3")
    ));
    for tag in doc["tags"].as_array().into_iter().flatten() {
        let name = tag["name"].as_str().unwrap_or("");
        out.push_str(&format!(
            "## {name}\n\n{}\n\n",
            one_line(tag["description"].as_str().unwrap_or(""))
        ));
        for (path, m) in operations(doc) {
            let op = &doc["paths"][&path][m];
            let tagged = op["tags"]
                .as_array()
                .is_some_and(|t| t.iter().any(|x| x == name));
            if !tagged {
                continue;
            }
            out.push_str(&format!("### `{} {path}`\n\n", m.to_uppercase()));
            for key in ["summary", "description"] {
                if let Some(t) = op[key].as_str() {
                    out.push_str(&format!("{}\n\n", one_line(t)));
                }
            }
            if let Some(params) = op["parameters"].as_array() {
                out.push_str("| parameter | in | type | |\n|---|---|---|---|\n");
                for p in params {
                    out.push_str(&format!(
                        "| `{}` | {} | {} | {} |\n",
                        p["name"].as_str().unwrap_or(""),
                        p["in"].as_str().unwrap_or(""),
                        type_text(&p["schema"]),
                        one_line(p["description"].as_str().unwrap_or(""))
                    ));
                }
                out.push('\n');
            }
            for (ct, c) in op["requestBody"]["content"]
                .as_object()
                .into_iter()
                .flatten()
            {
                out.push_str(&format!("Body (`{ct}`): {}\n\n", type_text(&c["schema"])));
            }
            out.push_str("| status | answer | body |\n|---|---|---|\n");
            for (status, r) in op["responses"].as_object().into_iter().flatten() {
                let body: Vec<String> = r["content"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(ct, c)| format!("{} (`{ct}`)", type_text(&c["schema"])))
                    .collect();
                out.push_str(&format!(
                    "| {status} | {} | {} |\n",
                    one_line(r["description"].as_str().unwrap_or("")),
                    body.join(", ")
                ));
            }
            out.push('\n');
        }
    }
    out.push_str(&error_codes());
    out.push_str("## Schemas\n\n");
    for (name, s) in doc["components"]["schemas"]
        .as_object()
        .into_iter()
        .flatten()
    {
        out.push_str(&format!("### {name}\n\n"));
        if let Some(d) = s["description"].as_str() {
            out.push_str(&format!("{}\n\n", one_line(d)));
        }
        match s["properties"].as_object() {
            Some(props) => {
                let required = required(s);
                out.push_str("| field | type | always | |\n|---|---|---|---|\n");
                for (field, p) in props {
                    out.push_str(&format!(
                        "| `{field}` | {} | {} | {} |\n",
                        type_text(p),
                        if required.contains(&field.as_str()) {
                            "yes"
                        } else {
                            ""
                        },
                        one_line(p["description"].as_str().unwrap_or(""))
                    ));
                }
                out.push('\n');
            }
            None => out.push_str(&format!("{}\n\n", type_text(s))),
        }
    }
    out
}
