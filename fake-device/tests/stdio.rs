//! `serve --stdio` in process, over a pipe pair: what an editor sees. Every message fake-device
//! sends is checked against the official ACP schema (the JSON Schema of the
//! `agent-client-protocol-schema` types, as the ACP repository publishes it).

use std::time::Duration;

use agent_client_protocol_schema::v1;
use fake_device::Options;
use schemars::JsonSchema;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const PATIENCE: Duration = Duration::from_secs(10);

/// The editor's end of the pipes.
struct Editor {
    to_device: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    from_device: tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    /// Every message the device sent, in order.
    seen: Vec<Value>,
    /// The method of each request the editor sent, by id (to judge its result).
    asked: std::collections::HashMap<i64, String>,
    next_id: i64,
}

/// fake-device serving stdio with these scripts; the editor's end.
fn start(scripts: &str) -> Editor {
    let (editor_side, device_side) = tokio::io::duplex(1 << 20);
    let (device_read, device_write) = tokio::io::split(device_side);
    let (editor_read, editor_write) = tokio::io::split(editor_side);
    let mut options = Options::for_instance("");
    options.scripts =
        harness::scenario::load_yaml_file(std::path::Path::new(scripts)).expect("the scripts load");
    options.approval_timeout = Some(Duration::from_secs(5));
    let connection = harness::transport::stdio::from_streams(
        device_read,
        device_write,
        options.limits,
        "editor".into(),
    );
    tokio::spawn(fake_device::serve_stdio(
        options,
        connection,
        std::future::pending(),
    ));
    Editor {
        to_device: editor_write,
        from_device: BufReader::new(editor_read).lines(),
        seen: Vec::new(),
        asked: Default::default(),
        next_id: 1,
    }
}

impl Editor {
    async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.to_device
            .write_all(line.as_bytes())
            .await
            .expect("the device reads");
    }

    async fn request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.asked.insert(id, method.to_string());
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// The next message from the device; requests from it (permission cards) are answered
    /// with `answer`.
    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(PATIENCE, self.from_device.next_line())
            .await
            .expect("the device says something in time")
            .expect("reads")
            .expect("the device's stdout stays open");
        let message: Value = serde_json::from_str(&line).expect("only JSON-RPC on stdout");
        self.seen.push(message.clone());
        message
    }

    /// Reads until the answer to request `id`, answering permission cards with `option`.
    async fn answer_to(&mut self, id: i64, option: &str) -> Value {
        loop {
            let message = self.next().await;
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return message;
            }
            if message["method"] == "session/request_permission" {
                let reply = json!({"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": {"outcome": "selected", "optionId": option}}});
                self.send(reply).await;
            }
        }
    }
}

/// The official schema of a type, compiled.
fn validator<T: JsonSchema>() -> jsonschema::Validator {
    let schema = schemars::schema_for!(T);
    jsonschema::validator_for(&serde_json::to_value(&schema).expect("a schema"))
        .expect("the official schema compiles")
}

/// Checks each message the device sent against the official schema of what it is.
fn judge(editor: &Editor) {
    let initialize = validator::<v1::InitializeResponse>();
    let new_session = validator::<v1::NewSessionResponse>();
    let prompt = validator::<v1::PromptResponse>();
    let set_mode = validator::<v1::SetSessionModeResponse>();
    let update = validator::<v1::SessionNotification>();
    let permission = validator::<v1::RequestPermissionRequest>();
    let mut judged = 0;
    for message in &editor.seen {
        assert_eq!(message["jsonrpc"], "2.0", "{message}");
        let (validator, payload) = match (
            message.get("method").and_then(Value::as_str),
            message.get("id").and_then(Value::as_i64),
        ) {
            (Some("session/update"), _) => (&update, &message["params"]),
            (Some("session/request_permission"), _) => (&permission, &message["params"]),
            (Some(other), _) => panic!("an editor gets only standard ACP, not {other}: {message}"),
            (None, Some(id)) if message.get("result").is_some() => {
                let validator = match editor.asked.get(&id).map(String::as_str) {
                    Some("initialize") => &initialize,
                    Some("session/new") => &new_session,
                    Some("session/prompt") => &prompt,
                    Some("session/set_mode") => &set_mode,
                    other => panic!("an answer to {other:?}: {message}"),
                };
                (validator, &message["result"])
            }
            _ => continue,
        };
        let errors: Vec<String> = validator
            .iter_errors(payload)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{message}\ndoes not fit the ACP schema: {errors:#?}"
        );
        judged += 1;
    }
    assert!(judged >= 8, "only {judged} messages were judged");
}

#[tokio::test]
async fn an_editor_gets_plain_acp_that_fits_the_official_schema() {
    let scripts = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/editor-scripts.yaml"
    );
    let mut editor = start(scripts);
    let cwd = tempfile::tempdir().expect("a project");
    let id = editor
        .request(
            "initialize",
            // Even an editor that says it is LLeMbas gets plain ACP on stdio.
            json!({"protocolVersion": 1, "clientCapabilities": {"_meta": {"lembas": {"protocol": 2}}}}),
        )
        .await;
    let init = editor.answer_to(id, "once").await;
    assert_eq!(
        init["result"]["_meta"]["lembas"]["limits"],
        Value::Null,
        "{init}"
    );

    let id = editor
        .request("session/new", json!({"cwd": cwd.path(), "mcpServers": []}))
        .await;
    let session = editor.answer_to(id, "once").await;
    let sid = session["result"]["sessionId"].clone();
    assert!(sid.is_string(), "{session}");

    let id = editor
        .request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "deploy"}]}),
        )
        .await;
    let answer = editor.answer_to(id, "once").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    let id = editor
        .request(
            "session/set_mode",
            json!({"sessionId": sid, "modeId": "plan"}),
        )
        .await;
    editor.answer_to(id, "once").await;

    // Only on the link: refused here.
    let id = editor.request("_lembas/directories", json!({})).await;
    let refused = editor.answer_to(id, "once").await;
    assert_eq!(refused["error"]["code"], -32601, "{refused}");

    judge(&editor);
}

#[tokio::test]
async fn a_prompt_whose_text_the_store_cannot_keep_is_refused_and_the_device_goes_on() {
    let scripts = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/editor-scripts.yaml"
    );
    let mut editor = start(scripts);
    let cwd = tempfile::tempdir().expect("a project");
    let id = editor
        .request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await;
    editor.answer_to(id, "once").await;
    let id = editor
        .request("session/new", json!({"cwd": cwd.path(), "mcpServers": []}))
        .await;
    let sid = editor.answer_to(id, "once").await["result"]["sessionId"].clone();
    // One byte past the 1 MiB of text the device keeps of a message.
    let huge = "x".repeat(1024 * 1024 + 1);
    let id = editor
        .request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": huge}]}),
        )
        .await;
    let refused = editor.answer_to(id, "once").await;
    assert_eq!(refused["error"]["code"], -32602, "{}", refused["error"]);
    // The session still works.
    let id = editor
        .request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}]}),
        )
        .await;
    let answer = editor.answer_to(id, "once").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
}

#[test]
fn the_schema_check_fails_a_message_that_breaks_the_schema() {
    let prompt = validator::<v1::PromptResponse>();
    assert!(prompt.is_valid(&json!({"stopReason": "end_turn"})));
    assert!(!prompt.is_valid(&json!({"stopReason": "finished"})));
    let update = validator::<v1::SessionNotification>();
    assert!(update.is_valid(&json!({"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}})));
    assert!(!update.is_valid(&json!({"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {"text": "no type"}}})));
    assert!(!update.is_valid(&json!({"sessionId": "s", "update": {"sessionUpdate": "made_up"}})));
    let permission = validator::<v1::RequestPermissionRequest>();
    assert!(!permission.is_valid(&json!({"sessionId": "s", "toolCall": {"toolCallId": "t"}, "options": [{"optionId": "once", "name": "Allow", "kind": "sometimes"}]})));
}
