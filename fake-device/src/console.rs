//! `--console`: the person at the device's terminal, typed as JSON lines on standard input
//! (`{"share_session": true}`, `{"terminal_prompt": "fix the build"}`), each an action an `act`
//! step could take. It is how a run that starts fake-device as a stand-in CLI (`--exec`) gives
//! it its set-up: `stdin` hooks write the lines. Each result goes to stderr as a line.

use std::sync::Arc;
use std::time::Duration;

use harness::engine::Actor;
use tokio::io::AsyncBufReadExt;

use crate::actions::DeviceActor;

/// How long one action may take.
const ACTION_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest line read; a longer one is refused whole.
const MAX_LINE_BYTES: usize = 1 << 20;

/// Reads actions from standard input until it closes, doing each in turn.
pub async fn read_actions(actor: Arc<DeviceActor>) {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let said = if line.len() > MAX_LINE_BYTES {
            format!("console: a line of {} bytes is too long", line.len())
        } else {
            match serde_json::from_str(line) {
                Ok(action) => match actor.act(action, ACTION_TIMEOUT).await {
                    Ok(result) => format!("console: {line} -> {result}"),
                    Err(e) => format!("console: {line} failed: {e:?}"),
                },
                Err(e) => format!("console: `{line}` is not a JSON action: {e}"),
            }
        };
        eprintln!("{said}");
    }
}
