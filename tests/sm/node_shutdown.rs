//! `Node::shutdown` waits for everything the node started (the listener,
//! the background tasks, every connection): once it returns no task of the
//! node is left, the port can be bound again, and a native client, a
//! kept-alive HTTP connection and one that never said anything are all
//! closed.

use std::time::Duration;

use lockd::config::NodeConfig;
use lockd::node::Node;
use lockd_client::wire::{self, Hello, HelloReply, Role};
use lockd_tests::cluster::free_port;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn read_some(s: &mut TcpStream) -> Vec<u8> {
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(20), s.read(&mut buf))
        .await
        .expect("an answer in time")
        .expect("read");
    buf.truncate(n);
    buf
}

/// Whether the node closed `s` (end of stream or a reset).
async fn closed(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => continue,
            Err(_) => return false,
        }
    }
}

#[test]
fn shutdown_returns_once_every_task_and_connection_has_ended() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("dir");
    let addr = format!("127.0.0.1:{}", free_port());
    let config = NodeConfig {
        addr: addr.clone(),
        data_dir: dir.path().join("n1"),
        ..NodeConfig::default()
    };
    rt.block_on(async {
        let node = Node::start(config).await.expect("start");
        let mut http = TcpStream::connect(&addr).await.expect("connect");
        http.write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
            .await
            .expect("write");
        let answer = String::from_utf8_lossy(&read_some(&mut http).await).into_owned();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let mut native = TcpStream::connect(&addr).await.expect("connect");
        native.write_all(&wire::PREFACE).await.expect("preface");
        let hello = wire::encode(&Hello { role: Role::Client }).expect("encode");
        native
            .write_all(&(hello.len() as u32).to_be_bytes())
            .await
            .expect("length");
        native.write_all(&hello).await.expect("hello");
        let reply = read_some(&mut native).await;
        let reply: HelloReply = wire::decode(&reply[4..]).expect("decode");
        assert!(matches!(reply, HelloReply::Welcome(_)), "{reply:?}");
        let mut silent = TcpStream::connect(&addr).await.expect("connect");
        assert!(node.tasks_running() > 0);

        node.shutdown().await;
        assert_eq!(node.tasks_running(), 0, "tasks left after shutdown");
        tokio::net::TcpListener::bind(&addr)
            .await
            .expect("the port is free once shutdown returns");
        for (what, s) in [
            ("HTTP", &mut http),
            ("native", &mut native),
            ("silent", &mut silent),
        ] {
            assert!(closed(s).await, "{what}: still open after shutdown");
        }
    });
}
