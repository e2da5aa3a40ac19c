//! [`Watch`]: the changes under a prefix as a [`Stream`], resumed on
//! another node when its node goes away (docs/watch.md).
//!
//! A watch has a connection of its own (a slow reader of the stream must
//! not hold back the answers of other requests). Every node yields the
//! same sequence, so when the connection breaks or the node shuts down,
//! the watch goes on from the index after the last one it delivered, on
//! the next endpoint that answers, without a gap or a duplicate. A node
//! says where a quiet stream is every 5 s, so a stream silent for
//! [`SILENT_FOR`] is taken for broken too (a partition that left its
//! connection dead, a node that hangs) and resumed the same way. A cut
//! that resuming cannot mend (`compacted`, `watch_behind`, `revoked`: the
//! caller may no longer watch the prefix) ends the stream
//! with [`ClientError::WatchCut`]: list the prefix and watch again from
//! the list's index.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::client::{Client, ClientError};
use crate::conn::Conn;
use crate::proto::{ChangeBatch, ClientRequest, ClientResponse, WatchRequest};

/// How long a watch's stream may stay silent before it is taken for
/// broken and resumed elsewhere: three of the node's progress intervals
/// (5 s, docs/watch.md).
pub const SILENT_FOR: Duration = Duration::from_secs(15);

/// What a watch yields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchEvent {
    /// One log entry's changes under the prefix.
    Changes(ChangeBatch),
    /// Everything up to this index has been delivered (at the start, and
    /// after a quiet while).
    Progress(u64),
}

impl WatchEvent {
    /// The log index this event brings the watch to.
    pub fn index(&self) -> u64 {
        match self {
            WatchEvent::Changes(b) => b.index,
            WatchEvent::Progress(i) => *i,
        }
    }
}

/// A stream of [`WatchEvent`]s; dropping it ends the watch.
pub struct Watch {
    rx: mpsc::Receiver<Result<WatchEvent, ClientError>>,
    task: JoinHandle<()>,
}

impl Stream for Watch {
    type Item = Result<WatchEvent, ClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Client {
    /// Follow every change under `prefix` from log index `from` (`None`:
    /// from the next entry applied). See [`Watch`].
    pub fn watch(&self, prefix: &str, from: Option<u64>) -> Watch {
        let (tx, rx) = mpsc::channel(16);
        let task = tokio::spawn(follow(
            self.clone(),
            prefix.as_bytes().to_vec(),
            from.unwrap_or(0),
            tx,
        ));
        Watch { rx, task }
    }
}

/// The watch's task: connect, stream, and on a break go on from `next`
/// elsewhere; gives up after `retry_for` without a node that answers.
async fn follow(
    client: Client,
    prefix: Vec<u8>,
    mut next: u64,
    out: mpsc::Sender<Result<WatchEvent, ClientError>>,
) {
    let opts = client.options().clone();
    let endpoints = client.endpoints().to_vec();
    if endpoints.is_empty() {
        let _ = out
            .send(Err(ClientError::Unreachable {
                ms: 0,
                last: "no endpoints given".into(),
            }))
            .await;
        return;
    }
    let mut attempt = 0usize;
    let mut last = String::new();
    let mut since = Instant::now();
    loop {
        let addr = &endpoints[attempt % endpoints.len()];
        attempt += 1;
        let request = ClientRequest::Watch(WatchRequest {
            prefix: prefix.clone(),
            from: next,
        });
        let opened = Conn::open(addr, opts.connect_timeout, &opts.credentials).await;
        let stream = opened.and_then(|conn| conn.stream(request).map(|rx| (conn, rx)));
        match stream {
            Err(e) => last = e.to_string(),
            Ok((_conn, mut rx)) => {
                while let Ok(Some(resp)) = tokio::time::timeout(SILENT_FOR, rx.recv()).await {
                    let event = match resp {
                        ClientResponse::Changes(b) => WatchEvent::Changes(b),
                        ClientResponse::Progress { index } => WatchEvent::Progress(index),
                        ClientResponse::Cut(cut) if cut.resumable() => {
                            last = cut.message;
                            break;
                        }
                        ClientResponse::Cut(cut) => {
                            let _ = out.send(Err(ClientError::WatchCut(cut))).await;
                            return;
                        }
                        ClientResponse::Error(e) => {
                            let _ = out.send(Err(e.into())).await;
                            return;
                        }
                        other => {
                            let _ = out
                                .send(Err(ClientError::Protocol(format!("{other:?}"))))
                                .await;
                            return;
                        }
                    };
                    next = event.index() + 1;
                    since = Instant::now();
                    if out.send(Ok(event)).await.is_err() {
                        return; // The watch was dropped.
                    }
                }
                if last.is_empty() {
                    last = format!(
                        "the stream from {addr} ended or stayed silent for {} s",
                        SILENT_FOR.as_secs()
                    );
                }
            }
        }
        if since.elapsed() >= opts.retry_for {
            let _ = out
                .send(Err(ClientError::Unreachable {
                    ms: opts.retry_for.as_millis() as u64,
                    last,
                }))
                .await;
            return;
        }
        tokio::time::sleep(Duration::from_millis((10 * attempt as u64).min(250))).await;
    }
}
