//! `--console`: a double's own actions typed as JSON lines on standard input
//! (`{"share_session": true}` for fake-device, `{"open_chat": {}}` for fake-instance), each what
//! an `act` step could do. It is how a test drives a double it started as a process: the
//! `stdin` hooks of a run that spawned it, or a test in another language writing the lines.
//! Each result goes to stderr as one line, `console: <action> -> <result JSON>`, or
//! `console: <action> failed: <why>`.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead};

use super::runner::Actor;

/// How long one action may take.
const ACTION_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest line read; a longer one is refused whole.
const MAX_LINE_BYTES: usize = 1 << 20;

/// Reads actions from `input` until it closes, doing each in turn and printing its result.
pub async fn read_actions(actor: Arc<dyn Actor>, input: impl AsyncRead + Unpin) {
    let mut input = tokio::io::BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        // Read a line, but keep no more of it than the bound.
        let mut too_long = false;
        loop {
            let chunk = match input.fill_buf().await {
                Ok([]) => break,
                Ok(chunk) => chunk,
                Err(_) => return,
            };
            let (taken, ended) = match chunk.iter().position(|b| *b == b'\n') {
                Some(at) => (at + 1, true),
                None => (chunk.len(), false),
            };
            if line.len() + taken <= MAX_LINE_BYTES {
                line.extend_from_slice(&chunk[..taken]);
            } else {
                too_long = true;
            }
            input.consume(taken);
            if ended {
                break;
            }
        }
        if line.is_empty() && !too_long {
            return;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() && !too_long {
            continue;
        }
        let said = if too_long {
            format!("console: a line over {MAX_LINE_BYTES} bytes is refused")
        } else {
            match serde_json::from_str(text) {
                Ok(action) => match actor.act(action, ACTION_TIMEOUT).await {
                    Ok(result) => format!("console: {text} -> {result}"),
                    Err(e) => format!("console: {text} failed: {e:?}"),
                },
                Err(e) => format!("console: `{text}` is not a JSON action: {e}"),
            }
        };
        eprintln!("{said}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ActError;
    use serde_json::{Value, json};
    use std::sync::Mutex;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<Value>>);

    impl Actor for Recorder {
        fn act<'a>(
            &'a self,
            action: Value,
            _timeout: Duration,
        ) -> std::pin::Pin<Box<dyn Future<Output = Result<Value, ActError>> + Send + 'a>> {
            Box::pin(async move {
                if let Ok(mut seen) = self.0.lock() {
                    seen.push(action);
                }
                Ok(json!({}))
            })
        }
    }

    #[tokio::test]
    async fn each_json_line_is_an_action_and_a_bad_or_huge_one_is_refused() {
        let recorder = Arc::new(Recorder::default());
        let mut input = b"{\"share_session\": true}\n\nnot json\n".to_vec();
        input.extend(vec![b'x'; MAX_LINE_BYTES + 10]);
        input.extend(b"\n{\"open_chat\": {}}");
        read_actions(recorder.clone(), &input[..]).await;
        let seen = recorder.0.lock().map(|s| s.clone()).unwrap_or_default();
        assert_eq!(
            seen,
            [json!({ "share_session": true }), json!({ "open_chat": {} })]
        );
    }
}
