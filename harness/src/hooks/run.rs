//! Doing an action through its hook: a command, an HTTP request, or a line to the system under
//! test's standard input; each bounded in time and in what is kept of its output, and recorded
//! for the report.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use super::file::{DEFAULT_HOOK_TIMEOUT, Hook, Hooks, HttpHook, needs_hook};
use crate::engine::ActError;
use crate::engine::verdict::HookRun;
use crate::process::{Placeholders, Quoting, Sut};

/// An HTTP hook's answer saying the project does not implement the action as asked.
const NOT_IMPLEMENTED: i32 = 501;

/// The most of a hook's output (each stream, or a response body) that is kept.
const KEPT_OUTPUT: usize = 16 * 1024;

/// What hooks run with: the hooks, the placeholders of the run, the system under test (for
/// `stdin` hooks), and the record of what each did.
#[derive(Debug)]
pub struct HookContext {
    hooks: Arc<Hooks>,
    base: Placeholders,
    sut: std::sync::OnceLock<Arc<Sut>>,
    log: Mutex<Vec<HookRun>>,
    /// One `stdin` hook at a time: a line written and the answer read belong together, even
    /// when the timed set-up and `peer.steps` both drive the process.
    stdin_turn: tokio::sync::Mutex<()>,
    started: Instant,
    http: reqwest::Client,
}

impl HookContext {
    /// Hooks run with `base` placeholders (`{url}`, `{token}`, `{tmp}`, `{root}`, …).
    pub fn new(hooks: Arc<Hooks>, base: Placeholders) -> Self {
        HookContext {
            hooks,
            base,
            sut: std::sync::OnceLock::new(),
            log: Mutex::new(Vec::new()),
            stdin_turn: tokio::sync::Mutex::new(()),
            started: Instant::now(),
            http: crate::transport::http_client(),
        }
    }

    /// The system under test, once started: `stdin` hooks write to it.
    pub fn set_sut(&self, sut: Arc<Sut>) {
        let _ = self.sut.set(sut);
    }

    /// Whether an action has a hook.
    pub fn has(&self, action: &str) -> bool {
        self.hooks.get(action).is_some()
    }

    /// The actions there are hooks for.
    pub fn names(&self) -> Vec<String> {
        self.hooks.names().map(String::from).collect()
    }

    /// What every hook did so far.
    pub fn runs(&self) -> Vec<HookRun> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Does `action` (with `value`, its fields) through its hook. Gives its result, or why not:
    /// not applicable with no hook, failed when the hook failed.
    pub async fn run(&self, action: &str, value: &Value) -> Result<Value, ActError> {
        let Some(hook) = self.hooks.get(action) else {
            return Err(ActError::NotApplicable(needs_hook(action)));
        };
        let mut fields = Placeholders::of_fields(value);
        let mut whole = serde_json::Map::new();
        whole.insert(action.to_string(), value.clone());
        fields.set("action", Value::Object(whole).to_string());
        let placeholders = self.base.with(&fields);
        let at_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        let began = Instant::now();
        let timeout = hook.timeout.map(|d| d.0).unwrap_or(DEFAULT_HOOK_TIMEOUT);
        let (kind, detail, done) = match self.describe(hook, &placeholders, &fields) {
            Ok((kind, detail)) => {
                let done = match kind {
                    "run" => run_command(&detail, hook, &placeholders, timeout).await,
                    "http" => self.request(hook, &placeholders, &fields, timeout).await,
                    _ => {
                        self.write_stdin(&detail, hook.reply.as_deref(), timeout)
                            .await
                    }
                };
                (kind, detail, done)
            }
            Err(e) => ("run", String::new(), Done::failed(None, e)),
        };
        let not_applicable = (!done.ok && done.status == Some(NOT_IMPLEMENTED)).then(|| {
            format!(
                "the project does not implement `{action}` as asked (its hook answered 501: {})",
                done.output.trim()
            )
        });
        let record = HookRun {
            action: action.to_string(),
            kind,
            detail,
            ok: done.ok,
            not_applicable: not_applicable.clone(),
            status: done.status,
            output: done.output.clone(),
            at_ms,
            elapsed_ms: began.elapsed().as_secs_f64() * 1000.0,
        };
        if let Ok(mut log) = self.log.lock() {
            // Bounded like everything a peer's run feeds: the first hundreds say what happened.
            if log.len() < 1000 {
                log.push(record.clone());
            }
        }
        if done.ok {
            Ok(done.result)
        } else if let Some(why) = not_applicable {
            // The project does not do this at all (a message with files, say): the run does not
            // apply to it, as with no hook.
            Err(ActError::NotApplicable(why))
        } else {
            Err(ActError::Failed(format!("{record}: {}", done.output)))
        }
    }

    /// The hook's kind and what it does, placeholders expanded (the command, the text).
    fn describe(
        &self,
        hook: &Hook,
        placeholders: &Placeholders,
        fields: &Placeholders,
    ) -> Result<(&'static str, String), String> {
        if let Some(command) = &hook.run {
            let command = placeholders.expand(command, Quoting::Shell);
            Ok(("run", command.map_err(|e| e.to_string())?))
        } else if let Some(http) = &hook.http {
            let method = http.method.clone().unwrap_or_else(|| "POST".into());
            Ok((
                "http",
                format!("{method} {}", url(&http.url, placeholders, fields)?),
            ))
        } else if let Some(text) = &hook.stdin {
            let text = placeholders.expand(text, Quoting::Line);
            Ok(("stdin", text.map_err(|e| e.to_string())?))
        } else {
            Err("the hook says neither `run`, `http` nor `stdin`".into())
        }
    }

    async fn request(
        &self,
        hook: &Hook,
        placeholders: &Placeholders,
        fields: &Placeholders,
        timeout: Duration,
    ) -> Done {
        let Some(http) = &hook.http else {
            return Done::failed(None, "no request".into());
        };
        match self.send(http, placeholders, fields, timeout).await {
            Ok((status, body)) => {
                let parsed = serde_json::from_str(&body);
                let result = match (status, parsed) {
                    // The project said no (a message to a chat deleted meanwhile): that is the
                    // action's outcome, for the scenario to judge, not a broken set-up.
                    (400..500, Ok(json)) => json!({ "refused": status, "body": json }),
                    (400..500, Err(_)) => json!({ "refused": status, "body": body }),
                    (_, Ok(json)) => json,
                    (_, Err(_)) => json!({ "status": status, "body": body }),
                };
                Done {
                    ok: (200..500).contains(&status),
                    status: Some(i32::from(status)),
                    output: body,
                    result,
                }
            }
            Err(e) => Done::failed(None, e),
        }
    }

    async fn send(
        &self,
        http: &HttpHook,
        placeholders: &Placeholders,
        fields: &Placeholders,
        timeout: Duration,
    ) -> Result<(u16, String), String> {
        let method = http.method.as_deref().unwrap_or("POST");
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|_| format!("`{method}` is not an HTTP method"))?;
        let url = url(&http.url, placeholders, fields)?;
        let mut request = self.http.request(method, &url).timeout(timeout);
        for (name, value) in &http.headers {
            let value = placeholders.expand(value, Quoting::Plain);
            request = request.header(name, value.map_err(|e| e.to_string())?);
        }
        if let Some(body) = &http.json {
            let body = placeholders.expand_json(body);
            request = request.json(&body.map_err(|e| e.to_string())?);
        } else if let Some(body) = &http.body {
            let body = placeholders.expand(body, Quoting::Plain);
            request = request.body(body.map_err(|e| e.to_string())?);
        }
        let mut response = request
            .send()
            .await
            .map_err(|e| format!("the request to {url} failed: {e}"))?;
        let status = response.status().as_u16();
        let mut body = Vec::new();
        while let Ok(Some(chunk)) = response.chunk().await {
            let room = KEPT_OUTPUT.saturating_sub(body.len());
            body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if room == 0 {
                break;
            }
        }
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }

    async fn write_stdin(&self, text: &str, reply: Option<&str>, timeout: Duration) -> Done {
        let Some(sut) = self.sut.get() else {
            return Done::failed(
                None,
                "a `stdin` hook needs the system under test started by the run (--exec)".into(),
            );
        };
        let reply = match reply.map(regex::Regex::new).transpose() {
            Ok(reply) => reply,
            Err(e) => return Done::failed(None, format!("`reply` is not a regex: {e}")),
        };
        let _turn = self.stdin_turn.lock().await;
        let output = sut.output().clone();
        // Lines before the text are not its answer.
        let after = output.lines().last().map_or(0, |l| l.seq);
        let deadline = tokio::time::Instant::now() + timeout;
        match tokio::time::timeout_at(deadline, sut.write_stdin(text)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Done::failed(None, e.to_string()),
            Err(_) => return Done::failed(None, format!("not written within {timeout:?}")),
        }
        let Some(reply) = reply else {
            return Done {
                ok: true,
                status: None,
                output: String::new(),
                result: json!({}),
            };
        };
        loop {
            let changed = output.changed();
            if let Some(line) = output.find(after, |l| reply.is_match(&l.text)) {
                let said = reply
                    .captures(&line.text)
                    .and_then(|c| c.get(1))
                    .map_or(line.text.as_str(), |m| m.as_str());
                let result = serde_json::from_str(said).unwrap_or_else(|_| json!(said));
                return Done {
                    ok: true,
                    status: None,
                    output: line.text.clone(),
                    result,
                };
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                let since: Vec<String> = output
                    .lines()
                    .into_iter()
                    .filter(|l| l.seq > after)
                    .map(|l| format!("{}: {}", l.stream, l.text))
                    .collect();
                let came = if since.is_empty() {
                    "nothing came".to_string()
                } else {
                    format!("what came:\n{}", since.join("\n"))
                };
                return Done::failed(
                    None,
                    format!("no line matching `{reply}` came within {timeout:?}; {came}"),
                );
            }
        }
    }

    /// Records set-up that could not be done by hooks (a step of `peer.steps` that erred), so
    /// the verdict says the set-up broke rather than leaving the peer to fail for it.
    pub fn note_failure(&self, what: &str, why: String) {
        let record = HookRun {
            action: what.to_string(),
            kind: "steps",
            detail: String::new(),
            ok: false,
            not_applicable: None,
            status: None,
            output: why,
            at_ms: self.started.elapsed().as_secs_f64() * 1000.0,
            elapsed_ms: 0.0,
        };
        if let Ok(mut log) = self.log.lock() {
            log.push(record);
        }
    }
}

/// A hook's URL: the run's placeholders as they are (`{url}` is a base), the action's fields
/// percent-encoded (a captured id cannot change the path).
fn url(
    template: &str,
    placeholders: &Placeholders,
    fields: &Placeholders,
) -> Result<String, String> {
    placeholders
        .expand_each(template, |name| {
            if fields.get(name).is_some() {
                Quoting::Url
            } else {
                Quoting::Plain
            }
        })
        .map_err(|e| e.to_string())
}

/// How a hook ended.
struct Done {
    ok: bool,
    status: Option<i32>,
    output: String,
    result: Value,
}

impl Done {
    fn failed(status: Option<i32>, why: String) -> Done {
        Done {
            ok: false,
            status,
            output: why,
            result: Value::Null,
        }
    }
}

/// Kills a hook command's process group when dropped.
struct GroupGuard(i32);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        crate::process::kill_group(self.0);
    }
}

/// The first [`KEPT_OUTPUT`] bytes of a pipe; the rest is read and dropped, so a chatty hook
/// never blocks on a full pipe.
async fn read_kept(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> String {
    let Some(mut pipe) = pipe else {
        return String::new();
    };
    let mut kept = Vec::new();
    let mut chunk = [0u8; 8192];
    while let Ok(n) = pipe.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        let room = KEPT_OUTPUT.saturating_sub(kept.len());
        kept.extend_from_slice(&chunk[..n.min(room)]);
    }
    String::from_utf8_lossy(&kept).into_owned()
}

/// Runs a hook's command in a process group of its own, kills the group when it runs out of
/// time, and keeps the first [`KEPT_OUTPUT`] bytes of each stream.
async fn run_command(
    command: &str,
    hook: &Hook,
    placeholders: &Placeholders,
    timeout: Duration,
) -> Done {
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    for (name, value) in placeholders.iter() {
        if name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            cmd.env(format!("LEMBAS_TEST_{}", name.to_ascii_uppercase()), value);
        }
    }
    for (name, value) in &hook.env {
        match placeholders.expand(value, Quoting::Plain) {
            Ok(value) => {
                cmd.env(name, value);
            }
            Err(e) => return Done::failed(None, e.to_string()),
        }
    }
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => return Done::failed(None, format!("cannot start it: {e}")),
    };
    // Its group is killed however this ends: done, timed out, or dropped with an aborted run.
    let _group = GroupGuard(child.id().unwrap_or(0) as i32);
    let deadline = tokio::time::Instant::now() + timeout;
    let stdout = tokio::spawn(read_kept(child.stdout.take()));
    let stderr = tokio::spawn(read_kept(child.stderr.take()));
    let status = match tokio::time::timeout_at(deadline, child.wait()).await {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => return Done::failed(None, format!("cannot wait for it: {e}")),
        Err(_) => return Done::failed(None, format!("it did not finish within {timeout:?}")),
    };
    // Whatever it left behind in its group goes with it; a process that left the group and
    // still holds a pipe is not waited for past the deadline (and a moment to drain).
    drop(_group);
    let drain = deadline.max(tokio::time::Instant::now() + Duration::from_millis(500));
    let stdout = tokio::time::timeout_at(drain, stdout)
        .await
        .ok()
        .and_then(|r| r.ok())
        .unwrap_or_default();
    let stderr = tokio::time::timeout_at(drain, stderr)
        .await
        .ok()
        .and_then(|r| r.ok())
        .unwrap_or_default();
    let result =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|_| json!({ "stdout": stdout }));
    let output = match (stdout.trim().is_empty(), stderr.trim().is_empty()) {
        (_, true) => stdout.trim().to_string(),
        (true, false) => stderr.trim().to_string(),
        (false, false) => format!("{}\n{}", stdout.trim(), stderr.trim()),
    };
    Done {
        ok: status.success(),
        status: status.code(),
        output,
        result,
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn context(yaml: &str) -> HookContext {
        let hooks: Hooks = serde_saphyr::from_str(yaml).expect("hooks");
        let mut base = Placeholders::new();
        base.set("root", "/tmp/a root");
        HookContext::new(Arc::new(hooks), base)
    }

    #[tokio::test]
    async fn a_command_gets_the_fields_quoted_and_its_json_stdout_is_the_result() {
        let hooks = context(
            r#"terminal_prompt: { run: 'printf ''{{"said": "%s", "root": "%s"}}'' {value} {root}' }"#,
        );
        let result = hooks
            .run("terminal_prompt", &json!("it's typed"))
            .await
            .expect("it runs");
        assert_eq!(
            result,
            json!({ "said": "it's typed", "root": "/tmp/a root" })
        );
        let runs = hooks.runs();
        assert!(runs[0].ok && runs[0].status == Some(0), "{:?}", runs[0]);
    }

    #[tokio::test]
    async fn a_failing_or_hanging_command_fails_with_its_output_and_no_hook_is_not_applicable() {
        let hooks = context(
            "share_session: { run: \"echo no terminal here >&2; exit 3\" }\nleave_session: { run: \"sleep 30\", timeout: 200ms }\n",
        );
        let Err(ActError::Failed(why)) = hooks.run("share_session", &json!(true)).await else {
            panic!("a failing hook fails");
        };
        assert!(
            why.contains("exit 3") && why.contains("no terminal here"),
            "{why}"
        );
        let started = Instant::now();
        let Err(ActError::Failed(why)) = hooks.run("leave_session", &json!(true)).await else {
            panic!("a hanging hook fails");
        };
        assert!(why.contains("did not finish within"), "{why}");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(
            hooks.run("answer_card", &json!("allow")).await,
            Err(ActError::NotApplicable("needs hook `answer_card`".into()))
        );
    }

    #[tokio::test]
    async fn an_http_hook_sends_its_json_and_takes_the_answer_as_the_result() {
        use axum::{Json, Router, http::StatusCode, routing::post};
        let app = Router::new()
            .route(
                "/test/chats",
                post(|Json(body): Json<Value>| async move {
                    Json(json!({ "sessionId": "ses_1", "asked": body }))
                }),
            )
            .route(
                "/broken",
                post(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "it broke") }),
            )
            .route(
                "/unsupported",
                post(|| async { (StatusCode::NOT_IMPLEMENTED, "no files here") }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        let hooks = context(&format!(
            "open_chat: {{ http: {{ url: \"http://{addr}/test/chats\", json: {{ root: \"{{root}}\", prompt: \"{{system_prompt}}\" }} }} }}\nmissing: {{ http: {{ url: \"http://{addr}/nowhere\" }} }}\nbroken: {{ http: {{ url: \"http://{addr}/broken\" }} }}\nunsupported: {{ http: {{ url: \"http://{addr}/unsupported\" }} }}\n"
        ));
        let result = hooks
            .run("open_chat", &json!({ "system_prompt": "Be brief." }))
            .await
            .expect("it answers");
        assert_eq!(
            result,
            json!({ "sessionId": "ses_1", "asked": { "root": "/tmp/a root", "prompt": "Be brief." } })
        );
        // A 4xx is the project refusing the action: its outcome, for the scenario to judge.
        let refused = hooks.run("missing", &json!({})).await.expect("a refusal");
        assert_eq!(refused["refused"], 404, "{refused}");
        // A 5xx is a broken set-up; a 501, an action the project does not implement.
        let Err(ActError::Failed(why)) = hooks.run("broken", &json!({})).await else {
            panic!("a 500 fails");
        };
        assert!(why.contains("HTTP 500"), "{why}");
        let Err(ActError::NotApplicable(why)) = hooks.run("unsupported", &json!({})).await else {
            panic!("a 501 does not apply");
        };
        assert!(
            why.contains("501") && why.contains("no files here"),
            "{why}"
        );
        let record = hooks.runs();
        assert!(
            !record[3].ok && record[3].not_applicable.is_some(),
            "{record:?}"
        );
    }

    #[tokio::test]
    async fn a_stdin_hook_writes_a_line_and_reads_its_reply_from_the_output() {
        let sut = Sut::start(
            crate::process::SutSpec::command("while read line; do echo \"got $line\"; done"),
            Placeholders::new(),
            None,
        )
        .await
        .expect("it starts");
        let hooks = context(
            "open_chat: { stdin: \"{action}\\n\", reply: \"^got (.*)$\" }\nsend: { stdin: \"x\\n\", reply: \"^never$\", timeout: 300ms }\n",
        );
        hooks.set_sut(sut.clone());
        let result = hooks
            .run("open_chat", &json!({ "title": "t" }))
            .await
            .expect("it answers");
        assert_eq!(result, json!({ "open_chat": { "title": "t" } }));
        let Err(ActError::Failed(why)) = hooks.run("send", &json!({})).await else {
            panic!("no reply fails");
        };
        assert!(why.contains("no line matching `^never$`"), "{why}");
        sut.stop().await;
    }
}
