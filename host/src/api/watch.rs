//! `GET /v1/watch`: the changes under a prefix as Server-Sent Events
//! (docs/watch.md).
//!
//! Answered by the node asked, from its own applied state (every node
//! derives the same changes, so any node will do). One message per log
//! entry, `event: changes`, its `id` the entry's index, so a browser's
//! `EventSource` resumes by itself (`Last-Event-ID`); `event: progress`
//! at the start and when nothing under the prefix happened for a while,
//! with the index the stream has reached; `event: cut` (with a code and
//! the index to resume from) before the server ends a stream.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use futures::Stream;
use lockd_core::changes::{Change, ChangeKind};
use lockd_core::command::Mode;
use lockd_proto::ErrorCode;
use serde::Serialize;
use serde_json::json;

use super::error::{ApiError, ErrorBody};
use super::op::{Op, WatchQuery};
use super::paths;
use super::reauth::{Due, Reauth};
use super::services::Services;
use crate::auth::Access;
use crate::watch::{Cut, Next, WatchError, Watcher};

/// One change as a watcher sees it.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct ChangeJson {
    /// `granted`, `released`, `expired` or `value` (a holding's published value).
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub key: String,
    /// The holding's fencing token; on `granted`, only for its own
    /// principal and admins (as `GET /v1/locks/{key}` shows it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// A `value` change's value (what the holding published).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// The data of an `event: changes` message.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct ChangesJson {
    pub index: u64,
    pub changes: Vec<ChangeJson>,
}

fn change_json(access: &Access, c: Change) -> ChangeJson {
    let bare = |kind, token| ChangeJson {
        kind,
        key: c.key.clone(),
        token: Some(token),
        lease_ms: None,
        mode: None,
        limit: None,
        principal: None,
        owner: None,
        value: None,
    };
    match c.kind {
        ChangeKind::Granted {
            token,
            lease_ms,
            mode,
            limit,
            principal,
            owner,
        } => ChangeJson {
            kind: "granted",
            token: access.owns(Some(&principal)).then_some(token),
            key: c.key,
            lease_ms: Some(lease_ms),
            mode: Some(match mode {
                Mode::Exclusive => "exclusive",
                Mode::Shared => "shared",
            }),
            limit: Some(limit),
            principal: Some(principal),
            owner: Some(owner),
            value: None,
        },
        ChangeKind::Value { token, value } => ChangeJson {
            value: Some(value),
            ..bare("value", token)
        },
        // A holding that ended: its token opens nothing any more.
        ChangeKind::Released { token } => bare("released", token),
        ChangeKind::Expired { token } => bare("expired", token),
    }
}

/// Where a stream is.
struct Stream_ {
    watcher: Watcher,
    access: Access,
    /// The caller checked again while the stream runs.
    reauth: Reauth,
    due: Due,
    /// Messages made but not yet sent.
    ready: std::collections::VecDeque<Event>,
    done: bool,
}

fn progress(index: u64) -> Event {
    Event::default()
        .event("progress")
        .id(index.to_string())
        .data(json!({ "index": index }).to_string())
}

fn cut_event(cut: &Cut) -> Event {
    Event::default().event("cut").data(
        json!({ "code": cut.code(), "error": cut.to_string(), "resume_from": cut.resume_from() })
            .to_string(),
    )
}

impl Stream_ {
    /// The next message ([`Watcher::next`]), a cut and then the end.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.ready.pop_front() {
                return Some(e);
            }
            if self.done {
                return None;
            }
            let next = tokio::select! {
                next = self.watcher.next() => next,
                why = self.reauth.revoked(&mut self.due) => Err(self.watcher.revoked(why)),
            };
            match next {
                Err(cut) => {
                    self.done = true;
                    return Some(cut_event(&cut));
                }
                Ok(Next::Progress(at)) => return Some(progress(at)),
                Ok(Next::Changes(batches)) => {
                    for b in batches {
                        let data = ChangesJson {
                            index: b.index,
                            changes: b
                                .changes
                                .into_iter()
                                .map(|c| change_json(&self.access, c))
                                .collect(),
                        };
                        let event = Event::default()
                            .event("changes")
                            .id(b.index.to_string())
                            .json_data(&data)
                            .unwrap_or_else(|e| Event::default().comment(e.to_string()));
                        self.ready.push_back(event);
                    }
                }
            }
        }
    }
}

fn refusal(e: WatchError) -> ApiError {
    let mut err = ApiError::new(e.code(), e.to_string());
    if let WatchError::Compacted { first, applied, .. } = e {
        err.details.insert("first".into(), first.into());
        err.details.insert("applied".into(), applied.into());
    }
    err
}

/// Follow the changes under a prefix.
#[utoipa::path(get, path = paths::WATCH, tag = "locks", params(WatchQuery),
    responses(
        (status = 200, description = "a stream of Server-Sent Events: `changes` (data: ChangesJson), `progress` (data: {\"index\": N}), `cut` (data: {\"code\", \"error\", \"resume_from\"}); see docs/watch.md", content_type = "text/event-stream", body = ChangesJson),
        (status = 400, description = "a bad query", body = ErrorBody),
        (status = 410, description = "`from` is older than the changes this node keeps (code `compacted`): list the prefix, then watch from the list's `index`", body = ErrorBody),
        (status = 429, description = "too many watchers on this node (code `too_many_watchers`)", body = ErrorBody),
        (status = 503, description = "the node is shutting down", body = ErrorBody),
    ))]
pub async fn watch(
    State(node): State<Arc<Services>>,
    Extension(access): Extension<Access>,
    Extension(op): Extension<Op>,
    Extension(reauth): Extension<Reauth>,
    headers: HeaderMap,
) -> Response {
    let Op::Watch(mut q) = op else {
        return ApiError::not_found("not a watch").into_response();
    };
    // An EventSource reconnecting names the last message it got.
    if let (None, Some(last)) = (q.from, headers.get("last-event-id")) {
        match last.to_str().ok().and_then(|v| v.parse::<u64>().ok()) {
            Some(id) => q.from = Some(id.saturating_add(1)),
            None => return ApiError::bad_request("Last-Event-ID: not a log index").into_response(),
        }
    }
    let Some(hub) = node.watch_hub() else {
        return ApiError::new(ErrorCode::Unavailable, "this node keeps no watch").into_response();
    };
    let watcher = match hub.watch(q.prefix, q.from, &access.principal) {
        Ok(w) => w,
        Err(e) => return refusal(e).into_response(),
    };
    let state = Stream_ {
        watcher,
        access,
        reauth,
        due: Due::new(),
        ready: Default::default(),
        done: false,
    };
    Sse::new(events(state)).into_response()
}

fn events(state: Stream_) -> impl Stream<Item = Result<Event, Infallible>> {
    futures::stream::unfold(
        state,
        |mut s| async move { s.next().await.map(|e| (Ok(e), s)) },
    )
}

#[cfg(test)]
mod tests;
