//! The framing of a device on `serve --stdio`: every line it writes to its standard output is
//! one whole JSON-RPC message (spec, opening paragraph). A line that is not a JSON object (a
//! log line, a banner) breaks the framing an editor relies on: a finding of its own, before the
//! JSON-RPC layer sees the line.

use std::sync::Arc;

use harness::finding::{Finding, Findings};
use harness::rules::ids;
use harness::transport::{Connection, Incoming};
use tokio::sync::mpsc;

/// The most of a stray line a finding quotes.
const QUOTED: usize = 200;

/// `connection`, with each line it brings checked on the way in; findings go to `findings`.
pub fn watch(connection: Connection, findings: Arc<Findings>) -> Connection {
    let Connection {
        outgoing,
        mut incoming,
        peer,
    } = connection;
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        while let Some(event) = incoming.recv().await {
            if let Some(finding) = check(&event) {
                findings.push(finding);
            }
            if tx.send(event).await.is_err() {
                return;
            }
        }
    });
    Connection {
        outgoing,
        incoming: rx,
        peer,
    }
}

/// A finding for a line that is no JSON-RPC message.
fn check(event: &Incoming) -> Option<Finding> {
    let text = match event {
        Incoming::Text(text) => text,
        Incoming::Binary(_) | Incoming::NotUtf8(_) => {
            return Some(Finding::new(
                ids::DEVICE_STDIO_FRAMING,
                "a line on the device's standard output that is not UTF-8 text",
            ));
        }
        Incoming::Closed(_) => return None,
    };
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(_)) => None,
        _ => {
            let mut quoted: String = text.chars().take(QUOTED).collect();
            if quoted.len() < text.len() {
                quoted.push('…');
            }
            Some(Finding::new(
                ids::DEVICE_STDIO_FRAMING,
                format!(
                    "a line on the device's standard output that is no JSON-RPC message: {quoted:?}"
                ),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_json_objects_are_lines_of_the_protocol() {
        assert!(
            check(&Incoming::Text(
                r#"{"jsonrpc":"2.0","id":1,"result":{}}"#.into()
            ))
            .is_none()
        );
        assert!(check(&Incoming::Closed(None)).is_none());
        for stray in ["listening on stdio", "[1, 2]", "", "{\"half\":"] {
            let finding = check(&Incoming::Text(stray.into())).expect(stray);
            assert_eq!(finding.rule, ids::DEVICE_STDIO_FRAMING);
        }
        assert!(check(&Incoming::Binary(vec![0xff])).is_some());
    }
}
