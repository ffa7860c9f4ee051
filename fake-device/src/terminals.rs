//! Remote terminals (`_lembas/terminal/*`, only with `remote.terminal: true`): a login shell as
//! the device's user in a real PTY, at most four per link, its output and exit sent to the
//! client, closed by SIGHUP when the client hangs up or the link goes.
//!
//! For bash, the shell starts with an rc wrapper (the spec's shell integration): the user's own
//! login files first, then every prompt marked with OSC 133 (`A` prompt start, `B` command start,
//! `C` output start, `D;<status>` when a command finished, none for an empty line) and OSC 7 (the
//! working directory, percent-encoded byte by byte). Other shells, and every shell with
//! `remote.terminal_integration: false`, run plainly as login shells (`integration: false`).

use harness::lembas::methods;
use harness::rules::ids;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64::Engine;
use harness::jsonrpc::Peer;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod bash_rc;

/// The most terminals one link may hold open.
pub const MAX_PER_LINK: usize = 4;
/// Columns a terminal may have.
pub const COLS: std::ops::RangeInclusive<u64> = 20..=500;
/// Rows a terminal may have.
pub const ROWS: std::ops::RangeInclusive<u64> = 5..=300;

/// Which shell, as the answer names it.
fn shell_kind(shell: &Path) -> &'static str {
    match shell.file_name().and_then(|n| n.to_str()) {
        Some("bash") => "bash",
        Some("zsh") => "zsh",
        Some("fish") => "fish",
        _ => "other",
    }
}

/// The terminal section's misbehaviours, resolved once for the device's life.
#[derive(Debug, Clone, Copy, Default)]
struct Faults {
    /// Opens a shell though `remote.terminal` is off, or `terminal` is not listed.
    opens_when_off: bool,
    /// Takes any size.
    any_size: bool,
    /// Opens more than [`MAX_PER_LINK`] on a link.
    no_limit: bool,
    /// The shell's home is a service account's, not the user's.
    foreign_home: bool,
    /// Integrates though `remote.terminal_integration` is false.
    integrates_when_off: bool,
    /// Says integration is off, and starts the shell with the wrapper all the same.
    wraps_when_said_off: bool,
    /// Says it integrates, and runs bash without the wrapper.
    says_integrated_unwrapped: bool,
    /// An interactive shell that is no login shell.
    not_login: bool,
    /// Every shell said to exit with 0.
    exit_zero: bool,
    /// One more output after the exit.
    output_after_exit: bool,
    /// The exit said twice.
    exit_twice: bool,
}

impl Faults {
    fn of(misbehave: &harness::rules::Misbehaviours) -> Faults {
        Faults {
            opens_when_off: misbehave.breaks(ids::DEVICE_CAPABILITIES_TERMINAL_CONFIG)
                || misbehave.breaks_way(ids::DEVICE_CAPABILITIES_TERMINAL_CONFIG, "opens_unlisted"),
            any_size: misbehave.breaks_way(ids::DEVICE_TERMINAL_OPEN, "size_unchecked"),
            no_limit: misbehave.breaks(ids::DEVICE_TERMINAL_OPEN),
            foreign_home: misbehave.breaks_way(ids::DEVICE_TERMINAL_LOGIN_SHELL, "foreign_home"),
            integrates_when_off: misbehave.breaks(ids::DEVICE_TERMINAL_INTEGRATION_OFF),
            wraps_when_said_off: misbehave
                .breaks_way(ids::DEVICE_TERMINAL_INTEGRATION_OFF, "says_off"),
            says_integrated_unwrapped: misbehave.breaks(ids::DEVICE_TERMINAL_INTEGRATION),
            not_login: misbehave.breaks(ids::DEVICE_TERMINAL_LOGIN_SHELL),
            exit_zero: misbehave.breaks_way(ids::DEVICE_TERMINAL_IO, "exit_zero"),
            output_after_exit: misbehave.breaks(ids::DEVICE_TERMINAL_NOTIFY_SHAPE),
            exit_twice: misbehave.breaks_way(ids::DEVICE_TERMINAL_NOTIFY_SHAPE, "exit_twice"),
        }
    }
}

/// One open terminal.
#[derive(Debug)]
struct Terminal {
    writer: Arc<tokio::sync::Mutex<pty_process::OwnedWritePty>>,
    pid: Option<u32>,
}

/// Where one terminal's input and resizes wait their turn: (method, params).
type Queue = tokio::sync::mpsc::UnboundedSender<(String, Value)>;

/// The device's terminals, by link.
#[derive(Debug)]
pub struct Terminals {
    /// `remote.terminal`: whether terminals may be opened at all.
    pub enabled: bool,
    /// `remote.terminal_integration`: whether shells start with the rc wrapper (bash's here).
    pub integration: bool,
    /// The shell to run (`$SHELL`, else `/bin/bash`).
    pub shell: PathBuf,
    /// Where rc wrappers are written.
    pub scratch: PathBuf,
    /// The rules to break (the rc wrapper reads its own from them).
    pub misbehave: harness::rules::Misbehaviours,
    faults: Faults,
    /// The shell's home instead of the user's (the self-test's: a machine's own startup files
    /// are no part of a test, and may hang).
    pub home: Option<PathBuf>,
    open: Mutex<HashMap<u32, HashMap<String, Terminal>>>,
    /// Each terminal's input and resizes, handled one at a time in arrival order (a resize then
    /// a keystroke must reach the PTY in that order), by link and terminal id: a terminal whose
    /// program reads nothing holds up only its own.
    queues: Mutex<HashMap<(u32, String), Queue>>,
}

impl Terminals {
    /// Terminals on or off, with the user's shell; rc wrappers go under `scratch`.
    pub fn new(enabled: bool, scratch: PathBuf, misbehave: harness::rules::Misbehaviours) -> Self {
        let shell = std::env::var_os("SHELL")
            .map(PathBuf::from)
            .filter(|s| s.is_absolute())
            .unwrap_or_else(|| PathBuf::from("/bin/bash"));
        Self {
            enabled,
            integration: true,
            shell,
            scratch,
            faults: Faults::of(&misbehave),
            misbehave,
            home: None,
            open: Mutex::new(HashMap::new()),
            queues: Mutex::new(HashMap::new()),
        }
    }

    fn count(&self, link: u32) -> usize {
        self.open
            .lock()
            .map(|o| o.get(&link).map_or(0, HashMap::len))
            .unwrap_or(0)
    }

    /// `_lembas/terminal/open`: `cwd` already checked against the roots. The error is the
    /// -32602's sentence.
    pub fn open(
        self: &Arc<Self>,
        peer: &Arc<Peer>,
        params: &Value,
        cwd: PathBuf,
        with_shell_fields: bool,
    ) -> Result<Value, String> {
        let (cols, rows) = self.admit(peer.link(), params)?;
        let kind = shell_kind(&self.shell);
        let (pty, pts) = pty_process::open().map_err(|e| format!("no PTY: {e}"))?;
        let to_u16 = |n: u64| u16::try_from(n).unwrap_or(u16::MAX);
        pty.resize(pty_process::Size::new(to_u16(rows), to_u16(cols)))
            .map_err(|e| format!("cannot size the PTY: {e}"))?;
        let (command, integration) = self.shell_command(&cwd, kind)?;
        let child = command
            .spawn(pts)
            .map_err(|e| format!("cannot start {}: {e}", self.shell.display()))?;
        let pid = child.id();
        let terminal_id = format!("term_{:08x}", harness::random::u32());
        let (reader, writer) = pty.into_split();
        if let Ok(mut open) = self.open.lock() {
            open.entry(peer.link()).or_default().insert(
                terminal_id.clone(),
                Terminal {
                    writer: Arc::new(tokio::sync::Mutex::new(writer)),
                    pid,
                },
            );
        }
        tokio::spawn(
            self.clone()
                .relay(peer.clone(), terminal_id.clone(), reader, child),
        );
        let mut answer = json!({
            "terminalId": terminal_id,
            "cwd": cwd.display().to_string(),
            "cols": cols,
            "rows": rows,
        });
        if with_shell_fields {
            answer["shell"] = json!(kind);
            answer["integration"] = json!(integration);
        }
        Ok(answer)
    }

    /// Whether a terminal may open on `link` (terminals on, a size within the bounds, fewer
    /// than [`MAX_PER_LINK`] open): its columns and rows, or the refusal's sentence.
    fn admit(&self, link: u32, params: &Value) -> Result<(u64, u64), String> {
        if !self.enabled && !self.faults.opens_when_off {
            return Err("remote terminals are off on this device".into());
        }
        let size = |key: &str, range: &std::ops::RangeInclusive<u64>, default: u64| match params
            .get(key)
        {
            None | Some(Value::Null) => Ok(default),
            Some(v) => v
                .as_u64()
                .filter(|n| range.contains(n) || self.faults.any_size)
                .ok_or_else(|| {
                    format!(
                        "`{key}` must be a whole number from {} to {}",
                        range.start(),
                        range.end()
                    )
                }),
        };
        let cols = size("cols", &COLS, 80)?;
        let rows = size("rows", &ROWS, 24)?;
        if self.count(link) >= MAX_PER_LINK && !self.faults.no_limit {
            return Err(format!(
                "at most {MAX_PER_LINK} terminals may be open on one link"
            ));
        }
        Ok((cols, rows))
    }

    /// The shell's command in `cwd`: a login shell as the device's user, with the rc wrapper
    /// where integration is on (bash's); and whether it integrates.
    fn shell_command(
        &self,
        cwd: &Path,
        kind: &str,
    ) -> Result<(pty_process::Command, bool), String> {
        let mut command = pty_process::Command::new(&self.shell)
            .current_dir(cwd)
            .env("TERM", "xterm-256color")
            .kill_on_drop(true);
        if let Some(home) = &self.home {
            command = command.env("HOME", home);
        }
        if self.faults.foreign_home {
            command = command.env("HOME", "/nonexistent");
        }
        let faults = self.faults;
        let integration = kind == "bash" && (self.integration || faults.integrates_when_off);
        let wrapped = integration || (kind == "bash" && faults.wraps_when_said_off);
        command = if wrapped && !faults.says_integrated_unwrapped {
            let rc = self
                .rc_file()
                .map_err(|e| format!("cannot write the rc: {e}"))?;
            command.arg("--rcfile").arg(&rc).arg("-i")
        } else if faults.says_integrated_unwrapped {
            command.arg("--norc").arg("-i")
        } else if faults.not_login {
            command.arg("-i")
        } else {
            command.arg("-l")
        };
        Ok((command, integration))
    }

    /// Sends the shell's output to the client until the shell ends, then its exit. The shell's
    /// end, not the PTY's, is the terminal's: a job left in the background keeps the PTY open
    /// after the shell has gone.
    async fn relay(
        self: Arc<Self>,
        peer: Arc<Peer>,
        id: String,
        mut reader: pty_process::OwnedReadPty,
        mut child: tokio::process::Child,
    ) {
        let mut buffer = vec![0u8; 16 * 1024];
        let send = |bytes: &[u8]| {
            let data = base64::engine::general_purpose::STANDARD.encode(bytes);
            peer.notify(
                methods::LEMBAS_TERMINAL_OUTPUT,
                json!({ "terminalId": id, "data": data }),
            );
        };
        let status = loop {
            // Backpressure: output the instance has not taken yet holds the shell back (its PTY
            // fills and its writes block), as a real terminal's reader would.
            peer.writable().await;
            tokio::select! {
                read = reader.read(&mut buffer) => match read {
                    // EIO once nothing holds the PTY's other end.
                    Ok(0) | Err(_) => break child.wait().await,
                    Ok(n) => send(&buffer[..n]),
                },
                status = child.wait() => {
                    // What the shell wrote last, then no more.
                    while let Ok(Ok(n)) = tokio::time::timeout(
                        std::time::Duration::from_millis(50),
                        reader.read(&mut buffer),
                    )
                    .await
                    {
                        if n == 0 {
                            break;
                        }
                        send(&buffer[..n]);
                    }
                    break status;
                }
            }
        };
        let code = match (status, self.faults.exit_zero) {
            (_, true) => 0,
            (Ok(status), false) => status.code().unwrap_or_else(|| {
                128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0)
            }),
            (Err(_), false) => -1,
        };
        // Forgotten (its writer dropped) and the reader dropped here: the PTY closes, and what
        // is left in it is hung up.
        self.forget(peer.link(), &id);
        drop(reader);
        if peer.is_closed() {
            return;
        }
        let exit = json!({ "terminalId": id, "code": code });
        peer.notify(methods::LEMBAS_TERMINAL_EXIT, exit.clone());
        if self.faults.output_after_exit {
            send(b"\r\n");
        }
        if self.faults.exit_twice {
            peer.notify(methods::LEMBAS_TERMINAL_EXIT, exit);
        }
    }

    /// The rc wrapper's file, written whole before any shell reads it: written to a file of its
    /// own and renamed into place, so a shell starting meanwhile never reads half of it.
    /// Named by its text's hash: a wrapper with faults never replaces the right one.
    fn rc_file(&self) -> std::io::Result<PathBuf> {
        use std::hash::{Hash, Hasher};
        let text = bash_rc::text(&self.misbehave);
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        text.hash(&mut hasher);
        let rc = self
            .scratch
            .join(format!("bashrc-lembas-{:016x}", hasher.finish()));
        if std::fs::read_to_string(&rc).is_ok_and(|written| written == text) {
            return Ok(rc);
        }
        std::fs::create_dir_all(&self.scratch)?;
        let fresh = self
            .scratch
            .join(format!("bashrc-lembas.{:08x}", harness::random::u32()));
        std::fs::write(&fresh, &text)?;
        std::fs::rename(&fresh, &rc)?;
        Ok(rc)
    }

    fn forget(&self, link: u32, id: &str) {
        if let Ok(mut open) = self.open.lock()
            && let Some(terminals) = open.get_mut(&link)
        {
            terminals.remove(id);
        }
    }

    /// Misbehaving: a dropped link's terminals go on, reachable by their ids from the next link.
    fn carries_over(&self) -> bool {
        self.misbehave
            .breaks_way(ids::DEVICE_TERMINAL_CLOSE_WITH_LINK, "carried_over")
    }

    fn writer(
        &self,
        link: u32,
        id: &str,
    ) -> Option<Arc<tokio::sync::Mutex<pty_process::OwnedWritePty>>> {
        let open = self.open.lock().ok()?;
        if self.carries_over()
            && let Some(terminal) = open.values().find_map(|terminals| terminals.get(id))
        {
            return Some(terminal.writer.clone());
        }
        open.get(&link)?.get(id).map(|t| t.writer.clone())
    }

    /// `_lembas/terminal/input`: keystrokes (base64); unknown terminals and bad data are
    /// dropped (a notification has no answer).
    pub async fn input(&self, link: u32, params: &Value) {
        let (Some(id), Some(data)) = (
            params.get("terminalId").and_then(Value::as_str),
            params.get("data").and_then(Value::as_str),
        ) else {
            return;
        };
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(data) else {
            tracing::info!("terminal input that is not base64, dropped");
            return;
        };
        if let Some(writer) = self.writer(link, id) {
            let mut writer = writer.lock().await;
            let _ = writer.write_all(&bytes).await;
            let _ = writer.flush().await;
        }
    }

    /// `_lembas/terminal/resize`, within the spec's bounds.
    pub async fn resize(&self, link: u32, params: &Value) {
        if self
            .misbehave
            .breaks(harness::rules::ids::DEVICE_TERMINAL_IO)
        {
            return;
        }
        let id = params.get("terminalId").and_then(Value::as_str);
        let cols = params
            .get("cols")
            .and_then(Value::as_u64)
            .filter(|c| COLS.contains(c));
        let rows = params
            .get("rows")
            .and_then(Value::as_u64)
            .filter(|r| ROWS.contains(r));
        let (Some(id), Some(cols), Some(rows)) = (id, cols, rows) else {
            return;
        };
        if let Some(writer) = self.writer(link, id) {
            let writer = writer.lock().await;
            let to_u16 = |n: u64| u16::try_from(n).unwrap_or(u16::MAX);
            let _ = writer.resize(pty_process::Size::new(to_u16(rows), to_u16(cols)));
        }
    }

    /// `_lembas/terminal/close`: the shell is hung up (SIGHUP to its process group).
    pub fn close(&self, link: u32, params: &Value) {
        if let Some(id) = params.get("terminalId").and_then(Value::as_str) {
            self.hang_up(link, Some(id));
        }
    }

    /// Every terminal of a link that went: hung up.
    pub fn close_link(&self, link: u32) {
        if let Ok(mut queues) = self.queues.lock() {
            queues.retain(|(l, _), _| *l != link);
        }
        // Misbehaving: the shells live on, orphaned, or carried over to the next link.
        if !self.misbehave.breaks(ids::DEVICE_TERMINAL_CLOSE_WITH_LINK) && !self.carries_over() {
            self.hang_up(link, None);
        }
    }

    /// Takes a terminal notification (`input`, `resize`, `close`) from a link, to be handled
    /// after the ones before it.
    pub fn notified(self: &Arc<Self>, link: u32, method: &str, params: &Value) {
        // A hang-up is never held up behind input the program does not read.
        if method == methods::LEMBAS_TERMINAL_CLOSE {
            self.close(link, params);
            if let (Ok(mut queues), Some(id)) = (
                self.queues.lock(),
                params.get("terminalId").and_then(Value::as_str),
            ) {
                queues.remove(&(link, id.to_string()));
            }
            return;
        }
        let Some(id) = params.get("terminalId").and_then(Value::as_str) else {
            return;
        };
        let Ok(mut queues) = self.queues.lock() else {
            return;
        };
        let queue = queues.entry((link, id.to_string())).or_insert_with(|| {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Value)>();
            let terminals = self.clone();
            tokio::spawn(async move {
                while let Some((method, params)) = rx.recv().await {
                    match method.as_str() {
                        methods::LEMBAS_TERMINAL_INPUT => terminals.input(link, &params).await,
                        methods::LEMBAS_TERMINAL_RESIZE => terminals.resize(link, &params).await,
                        _ => {}
                    }
                }
            });
            tx
        });
        let _ = queue.send((method.to_string(), params.clone()));
    }

    fn hang_up(&self, link: u32, only: Option<&str>) {
        let pids: Vec<u32> = self
            .open
            .lock()
            .ok()
            .and_then(|o| {
                o.get(&link).map(|terminals| {
                    terminals
                        .iter()
                        .filter(|(id, _)| only.is_none_or(|o| o == id.as_str()))
                        .filter_map(|(_, t)| t.pid)
                        .collect()
                })
            })
            .unwrap_or_default();
        for pid in pids.into_iter().filter_map(|p| i32::try_from(p).ok()) {
            // The shell leads its own session: its group is its pid.
            // SAFETY: kill(2) with a process group we started and a valid signal number.
            unsafe {
                libc::kill(-pid, libc::SIGHUP);
            }
            // Whatever ignores the hang-up is ended a moment later.
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                // SAFETY: as above; a group already gone makes this a no-op (ESRCH).
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness::transport::outbox::HIGH_WATER;

    struct Quiet;

    impl harness::jsonrpc::Dispatch for Quiet {
        fn on_event(&self, _: &Arc<Peer>, _: harness::jsonrpc::LinkEvent) {}
    }

    /// Takes what the terminal queued for the client so far, without saying any of it was
    /// written (the client reads nothing); gives its bytes.
    fn queued(sent: &mut harness::transport::OutboxReceiver) -> usize {
        let mut bytes = 0;
        while let Ok(harness::transport::Outgoing::Text(text)) = sent.try_recv() {
            bytes += text.len();
        }
        bytes
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_that_reads_nothing_holds_a_terminal_running_yes_back() {
        // The regression: `yes` with an instance that stopped reading took the device to
        // 1.55 GB in 40 s (issue 16). Now the terminal's reader waits while the link's queue
        // is over its high water, so the PTY fills and `yes` blocks.
        let (outgoing, mut sent) = harness::transport::outbox();
        let (_keep_open, incoming) = tokio::sync::mpsc::channel(16);
        let peer = Peer::start(
            harness::transport::Connection {
                outgoing,
                incoming,
                peer: "test".into(),
            },
            harness::jsonrpc::PeerConfig {
                link: 1,
                ..Default::default()
            },
            Arc::new(harness::journal::Journal::in_memory()),
            Arc::new(harness::finding::Findings::default()),
            Arc::new(Quiet),
        );
        let home = tempfile::tempdir().expect("a home");
        let mut terminals = Terminals::new(true, home.path().to_path_buf(), Default::default());
        terminals.integration = false;
        terminals.home = Some(home.path().to_path_buf());
        let terminals = Arc::new(terminals);
        let opened = terminals
            .open(&peer, &json!({}), home.path().to_path_buf(), false)
            .expect("a terminal");
        let id = opened["terminalId"].as_str().expect("an id").to_owned();
        let keys = base64::engine::general_purpose::STANDARD.encode("exec yes\n");
        terminals
            .input(1, &json!({ "terminalId": id, "data": keys }))
            .await;
        // Up to the high water: `yes` writes far faster than this.
        let mut taken = 0;
        let filled = tokio::time::timeout(std::time::Duration::from_secs(30), async {
            while taken < HIGH_WATER {
                taken += queued(&mut sent);
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
        .await;
        assert!(filled.is_ok(), "`yes` wrote only {taken} bytes in 30 s");
        // Then held back: a second later, at most the chunk the reader had in hand came on
        // top (a terminal unheld adds megabytes a second).
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        taken += queued(&mut sent);
        assert!(
            taken <= HIGH_WATER + 64 * 1024,
            "{taken} bytes queued for a client that reads nothing (high water {HIGH_WATER})"
        );
        terminals.close_link(1);
    }

    #[test]
    fn shells_are_named_by_their_file() {
        assert_eq!(shell_kind(Path::new("/bin/bash")), "bash");
        assert_eq!(shell_kind(Path::new("/usr/bin/zsh")), "zsh");
        assert_eq!(shell_kind(Path::new("/opt/fish")), "fish");
        assert_eq!(shell_kind(Path::new("/bin/sh")), "other");
    }
}
