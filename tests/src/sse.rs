//! A watch stream read as a caller reads it: `GET /v1/watch` over plain
//! HTTP (or HTTPS with a principal's credentials), its Server-Sent Events parsed one message at a time.

use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

use lockd_client::tls::Alpn;
use lockd_client::Credentials;
use serde_json::Value;

/// One message of the stream.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// `changes`, `progress` or `cut`.
    pub event: String,
    /// The `id:` line (a log index), if any.
    pub id: Option<u64>,
    pub data: Value,
}

/// An open watch.
pub struct Watch {
    lines: BufReader<Box<dyn Read + Send + Sync>>,
}

/// How a watch could not be opened: the status and body of the answer.
#[derive(Debug)]
pub struct Refused {
    pub status: u16,
    pub body: Value,
}

impl Watch {
    /// Open `GET /v1/watch` on `addr` with `query` (`prefix=…&from=…`),
    /// and `Last-Event-ID` when given.
    pub fn open(addr: &str, query: &str, last_event_id: Option<u64>) -> Result<Watch, Refused> {
        Watch::open_as(None, addr, query, last_event_id)
    }

    /// [`Watch::open`] with `credentials` (HTTPS with their TLS, and their
    /// bearer token), or plain HTTP without.
    pub fn open_as(
        credentials: Option<&Credentials>,
        addr: &str,
        query: &str,
        last_event_id: Option<u64>,
    ) -> Result<Watch, Refused> {
        // Progress comes every 5 s on a quiet stream: a read that waits
        // much longer means the stream is broken.
        let mut agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs(10))
            .timeout_read(Duration::from_secs(30));
        let tls = credentials.and_then(|c| c.tls.as_ref());
        if let Some(tls) = tls {
            agent = agent.tls_config(tls.config(Alpn::Http));
        }
        let scheme = if tls.is_some() { "https" } else { "http" };
        let mut req = agent
            .build()
            .get(&format!("{scheme}://{addr}/v1/watch?{query}"));
        if let Some(t) = credentials.and_then(|c| c.token.as_ref()) {
            req = req.set("authorization", &format!("Bearer {}", t.expose()));
        }
        if let Some(id) = last_event_id {
            req = req.set("Last-Event-ID", &id.to_string());
        }
        match req.call() {
            Ok(r) => Ok(Watch {
                lines: BufReader::new(r.into_reader()),
            }),
            Err(ureq::Error::Status(status, r)) => Err(Refused {
                status,
                body: r.into_json().unwrap_or(Value::Null),
            }),
            Err(e) => Err(Refused {
                status: 0,
                body: Value::String(e.to_string()),
            }),
        }
    }

    /// The next message; `None` when the stream ended.
    pub fn next_message(&mut self) -> Option<Message> {
        let (mut event, mut id, mut data) = (String::from("message"), None, String::new());
        let mut any = false;
        loop {
            let mut line = String::new();
            match self.lines.read_line(&mut line) {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if any {
                    let data = serde_json::from_str(&data).unwrap_or(Value::String(data));
                    return Some(Message { event, id, data });
                }
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            any = true;
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => event = value.to_string(),
                "id" => id = value.parse().ok(),
                "data" => {
                    if !data.is_empty() {
                        data.push('\n');
                    }
                    data.push_str(value);
                }
                _ => {}
            }
        }
    }
}
