//! The peer on a link fed by hand: a closed link, broken requests.

use super::*;
use tokio::sync::mpsc;

use crate::jsonrpc::message::{Message, classify};
use crate::transport::{Incoming, OutboxReceiver, Outgoing};

struct Quiet;

impl Dispatch for Quiet {
    fn on_event(&self, _: &Arc<Peer>, _: LinkEvent) {}
}

/// A peer on a link the test feeds by hand (`capacity` frames ahead), and what it sends.
fn started(
    config: PeerConfig,
    capacity: usize,
) -> (Arc<Peer>, mpsc::Sender<Incoming>, OutboxReceiver) {
    let (outgoing, sent) = crate::transport::outbox();
    let (to_peer, incoming) = mpsc::channel(capacity);
    let peer = Peer::start(
        Connection {
            outgoing,
            incoming,
            peer: "test".into(),
        },
        config,
        Arc::new(Journal::in_memory()),
        Arc::new(Findings::default()),
        Arc::new(Quiet),
    );
    (peer, to_peer, sent)
}

#[tokio::test(start_paused = true)]
async fn a_request_on_a_closed_link_fails_at_once_not_at_its_deadline() {
    let config = PeerConfig {
        link: 1,
        ..Default::default()
    };
    let (peer, to_peer, _sent) = started(config, 4);
    to_peer
        .send(Incoming::Closed(None))
        .await
        .expect("the reader takes it");
    peer.closed().await;
    let started = tokio::time::Instant::now();
    let answer = peer.request("m", json!({}), Duration::from_secs(5)).await;
    assert_eq!(answer, Err(RequestError::Closed { method: "m".into() }));
    assert!(started.elapsed() < Duration::from_millis(1));
}

#[tokio::test]
async fn a_broken_request_is_answered_with_its_id_only_when_that_is_an_id() {
    let (_peer, to_peer, mut sent) = started(PeerConfig::default(), 16);
    // Each is broken by its `jsonrpc`, so the peer answers it -32600.
    for (id, echoed) in [
        (json!(7), json!(7)),
        (json!("a"), json!("a")),
        (json!(1.5), Value::Null),
        (json!({"n": 1}), Value::Null),
        (json!([1]), Value::Null),
        (json!(true), Value::Null),
    ] {
        let text = json!({"jsonrpc": "1.0", "id": id, "method": "m"}).to_string();
        to_peer.send(Incoming::Text(text)).await.expect("read");
        let Some(Outgoing::Text(answer)) = sent.recv().await else {
            panic!("no answer to id {id}");
        };
        let (_, message) = classify(&answer).expect("the answer is JSON-RPC");
        assert!(
            matches!(&message, Message::Response { id, outcome: Err(e) } if *id == echoed && e.code == crate::jsonrpc::message::INVALID_REQUEST),
            "id {id}: {answer}"
        );
    }
}
