//! The system under test as a child process: started by `sh -c` in a process group of its own,
//! its output read into an [`OutputLog`], stopped with SIGTERM and, after a grace period, SIGKILL
//! to the whole group, started again on the same state, and killed with its group whenever the
//! handle goes, so no process of a run outlives it, whatever ended the run.

use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::watch;

use super::output::{OutputLog, Stream};
use super::spec::SutSpec;
use super::template::{Placeholders, Quoting, TemplateError};

/// Why the system under test could not be started, or written to.
#[derive(Debug, thiserror::Error)]
pub enum SutError {
    /// Its command, environment or directory is written wrong.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// `sh` would not start it.
    #[error("cannot start `{command}`: {source}")]
    Spawn {
        /// The command as it was to run.
        command: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// A `stdin` hook, with no start running to take it.
    #[error("the system under test is not running")]
    NotRunning,
    /// Its standard input would not take the text.
    #[error("cannot write to its standard input: {0}")]
    Stdin(#[source] std::io::Error),
}

/// How a start of the process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Exited {
    /// Its exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
}

impl std::fmt::Display for Exited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (Some(code), _) => write!(f, "exit code {code}"),
            (None, Some(signal)) => write!(f, "killed by signal {signal}"),
            (None, None) => f.write_str("ended"),
        }
    }
}

impl From<std::process::ExitStatus> for Exited {
    fn from(status: std::process::ExitStatus) -> Self {
        #[cfg(unix)]
        let signal = std::os::unix::process::ExitStatusExt::signal(&status);
        #[cfg(not(unix))]
        let signal = None;
        Exited {
            code: status.code(),
            signal,
        }
    }
}

/// One start of the process, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    /// 1 for the first start, 2 after a restart, …
    pub run: u32,
    /// Its process id.
    pub pid: u32,
    /// When it started, in milliseconds since the first start.
    pub started_ms: f64,
    /// How it ended, once it did.
    pub exited: Option<Exited>,
    /// Whether the double stopped it (the run was over, or a restart), rather than it ending by
    /// itself.
    pub stopped: bool,
}

/// What the report says of the process: its command, each start, and its output.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessReport {
    /// The command as run (placeholders expanded).
    pub command: String,
    /// Each start.
    pub runs: Vec<RunRecord>,
    /// What it printed (the newest, bounded).
    pub output: Vec<super::output::OutputLine>,
    /// How many older lines were dropped to stay in bounds.
    pub dropped_lines: u64,
}

/// The system under test, running or stopped.
#[derive(Debug)]
pub struct Sut {
    command: String,
    spec: SutSpec,
    placeholders: Placeholders,
    output: Arc<OutputLog>,
    started: Instant,
    runs: AtomicU32,
    /// The current start's process group (its leader's pid; 0: none), for the kill on drop.
    group: AtomicI32,
    current: tokio::sync::Mutex<Option<Running>>,
    records: Mutex<Vec<RunRecord>>,
    /// The link over its standard input and output, until taken (`link_on_stdio`).
    link: Mutex<Option<crate::transport::Connection>>,
    /// A directory made for it (its `{tmp}`), removed after its processes are gone.
    _scratch: Option<tempfile::TempDir>,
}

#[derive(Debug)]
struct Running {
    run: u32,
    stdin: Option<ChildStdin>,
    exited: watch::Receiver<Option<Exited>>,
}

impl Sut {
    /// Starts `spec`'s command with `placeholders` expanded into it (shell-quoted) and set in its
    /// environment as `LEMBAS_TEST_<NAME>`. `scratch`, a directory made for it, lives as long as
    /// it does.
    pub async fn start(
        spec: SutSpec,
        placeholders: Placeholders,
        scratch: Option<tempfile::TempDir>,
    ) -> Result<Arc<Sut>, SutError> {
        let command = placeholders.expand(&spec.exec, Quoting::Shell)?;
        let sut = Arc::new(Sut {
            command,
            spec,
            placeholders,
            output: Arc::new(OutputLog::default()),
            started: Instant::now(),
            runs: AtomicU32::new(0),
            group: AtomicI32::new(0),
            current: tokio::sync::Mutex::new(None),
            records: Mutex::new(Vec::new()),
            link: Mutex::new(None),
            _scratch: scratch,
        });
        let mut current = sut.current.lock().await;
        *current = Some(sut.spawn()?);
        drop(current);
        if let Some(port) = sut.spec.listens_on {
            // A scenario's first step may dial at once, and a server still starting (a cold
            // binary on a busy machine) would fail that dial through no fault of its own.
            listening(port, LISTEN_WITHIN).await;
        }
        Ok(sut)
    }

    /// The command as run.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Its output so far.
    pub fn output(&self) -> &Arc<OutputLog> {
        &self.output
    }

    /// How long a stop waits after SIGTERM before SIGKILL.
    pub fn grace(&self) -> Duration {
        self.spec
            .grace
            .map(|d| d.0)
            .unwrap_or(super::spec::DEFAULT_GRACE)
    }

    fn spawn(&self) -> Result<Running, SutError> {
        let run = self.runs.fetch_add(1, Ordering::SeqCst) + 1;
        let mut command = tokio::process::Command::new("sh");
        command
            .arg("-c")
            .arg(&self.command)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        for (name, value) in self.placeholders.iter() {
            command.env(format!("LEMBAS_TEST_{}", name.to_ascii_uppercase()), value);
        }
        for (name, value) in &self.spec.env {
            command.env(name, self.placeholders.expand(value, Quoting::Plain)?);
        }
        if let Some(dir) = &self.spec.cwd {
            command.current_dir(self.placeholders.expand(dir, Quoting::Plain)?);
        }
        // Its own process group: a stop reaches every process it started, and a signal sent to
        // the double's group (a terminal's ^C) is the double's to pass on, not the child's.
        #[cfg(unix)]
        command.process_group(0);
        let mut child = command.spawn().map_err(|source| SutError::Spawn {
            command: self.command.clone(),
            source,
        })?;
        let pid = child.id().unwrap_or(0);
        self.group.store(pid as i32, Ordering::SeqCst);
        let mut stdin = child.stdin.take();
        let stdout = child.stdout.take();
        match (stdout, stdin.take()) {
            // Its stdout and stdin are the link: one message a line, nothing logged of them.
            (Some(stdout), Some(to_it)) if self.spec.link_on_stdio => {
                let link = crate::transport::stdio::from_streams(
                    stdout,
                    to_it,
                    crate::transport::FrameLimits::default(),
                    "stdio".to_owned(),
                );
                if let Ok(mut slot) = self.link.lock() {
                    *slot = Some(link);
                }
            }
            (stdout, to_it) => {
                stdin = to_it;
                if let Some(stdout) = stdout {
                    let log = self.output.clone();
                    tokio::spawn(async move { log.read_from(run, Stream::Stdout, stdout).await });
                }
            }
        }
        if let Some(stderr) = child.stderr.take() {
            let log = self.output.clone();
            tokio::spawn(async move { log.read_from(run, Stream::Stderr, stderr).await });
        }
        let (exited_tx, exited) = watch::channel(None);
        tokio::spawn(async move {
            let status = child.wait().await;
            let _ = exited_tx.send(Some(match status {
                Ok(status) => Exited::from(status),
                Err(_) => Exited {
                    code: None,
                    signal: None,
                },
            }));
        });
        if let Ok(mut records) = self.records.lock() {
            records.push(RunRecord {
                run,
                pid,
                started_ms: self.started.elapsed().as_secs_f64() * 1000.0,
                exited: None,
                stopped: false,
            });
        }
        Ok(Running { run, stdin, exited })
    }

    /// Waits until the current start ends, or `deadline`; `None` when it still runs.
    pub async fn wait_exit(&self, deadline: Instant) -> Option<Exited> {
        let mut exited = {
            let current = self.current.lock().await;
            current.as_ref()?.exited.clone()
        };
        // The borrow the wait gives is let go of at once: it must not live across an await.
        let exit = match tokio::time::timeout_at(deadline.into(), exited.wait_for(|e| e.is_some()))
            .await
        {
            Ok(Ok(seen)) => *seen,
            _ => None,
        };
        if let Some(exit) = exit {
            self.note_exit(exit, false).await;
        }
        exit
    }

    /// Stops the current start: SIGTERM to its group, SIGKILL after the grace period, and
    /// SIGKILL to whatever of the group is left. Gives how it ended.
    pub async fn stop(&self) -> Option<Exited> {
        let mut exited = {
            let current = self.current.lock().await;
            current.as_ref()?.exited.clone()
        };
        let group = self.group.load(Ordering::SeqCst);
        // SIGTERM to the whole group even when the leader is gone: what it left running gets
        // the chance to end cleanly too.
        signal_group(group, Signal::Term);
        if exited.borrow().is_none() {
            let grace = self.grace();
            if tokio::time::timeout(grace, exited.wait_for(|e| e.is_some()))
                .await
                .is_err()
            {
                signal_group(group, Signal::Kill);
                let _ =
                    tokio::time::timeout(Duration::from_secs(5), exited.wait_for(|e| e.is_some()))
                        .await;
            }
        }
        // The leader is gone; a process it left behind in its group is not. Once killed, the
        // group is forgotten: its id could be another's later, and the drop must not reach it.
        signal_group(group, Signal::Kill);
        let _ = self
            .group
            .compare_exchange(group, 0, Ordering::SeqCst, Ordering::SeqCst);
        let exit = { *exited.borrow() };
        if let Some(exit) = exit {
            self.note_exit(exit, true).await;
        }
        exit
    }

    /// Stops the current start and starts the command again, on the same placeholders (the same
    /// `{tmp}` and state); a server (`listens_on`) is waited for until it listens again.
    pub async fn restart(&self) -> Result<(), SutError> {
        self.stop().await;
        let running = self.spawn()?;
        *self.current.lock().await = Some(running);
        if let Some(port) = self.spec.listens_on {
            listening(port, LISTEN_WITHIN).await;
        }
        Ok(())
    }

    /// The link over its standard input and output (`link_on_stdio`), once: the double attaches
    /// it as the peer's link.
    pub fn take_link(&self) -> Option<crate::transport::Connection> {
        self.link.lock().ok().and_then(|mut slot| slot.take())
    }

    /// The placeholders it was started with (hooks use the same).
    pub fn placeholders(&self) -> &Placeholders {
        &self.placeholders
    }

    /// Writes `text` to the current start's standard input (a `stdin` hook).
    pub async fn write_stdin(&self, text: &str) -> Result<(), SutError> {
        let mut current = self.current.lock().await;
        let Some(stdin) = current.as_mut().and_then(|r| r.stdin.as_mut()) else {
            return Err(SutError::NotRunning);
        };
        stdin
            .write_all(text.as_bytes())
            .await
            .map_err(SutError::Stdin)?;
        stdin.flush().await.map_err(SutError::Stdin)
    }

    async fn note_exit(&self, exit: Exited, stopped: bool) {
        let run = self.current.lock().await.as_ref().map(|r| r.run);
        if let (Some(run), Ok(mut records)) = (run, self.records.lock())
            && let Some(record) = records.iter_mut().find(|r| r.run == run)
            && record.exited.is_none()
        {
            record.exited = Some(exit);
            record.stopped = stopped;
        }
    }

    /// What the report says of it.
    pub fn report(&self) -> ProcessReport {
        ProcessReport {
            command: self.command.clone(),
            runs: self.records.lock().map(|r| r.clone()).unwrap_or_default(),
            output: self.output.lines(),
            dropped_lines: self.output.dropped(),
        }
    }
}

impl Drop for Sut {
    fn drop(&mut self) {
        // Whatever ended the run (a panic, a timeout, a signal), its processes end with it.
        signal_group(self.group.load(Ordering::SeqCst), Signal::Kill);
    }
}

#[derive(Debug, Clone, Copy)]
enum Signal {
    Term,
    Kill,
}

/// Kills the process group led by `group` (a hook's command that ran out of time).
pub(crate) fn kill_group(group: i32) {
    signal_group(group, Signal::Kill);
}

/// Sends `signal` to the process group led by `group` (nothing for 0).
fn signal_group(group: i32, signal: Signal) {
    if group <= 0 {
        return;
    }
    #[cfg(unix)]
    {
        let signal = match signal {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        };
        // SAFETY: kill(2) takes plain integers and touches no memory of ours; a group that is
        // gone gives ESRCH, which is what we want to ignore.
        unsafe {
            libc::kill(-group, signal);
        }
    }
    #[cfg(not(unix))]
    let _ = signal;
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// Whether `pid` runs: a zombie (killed, not yet reaped by an init that may never reap
    /// it in a container) does not.
    fn alive(pid: i32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => stat
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| !rest.starts_with('Z')),
            // No /proc (not Linux): signal 0 only asks whether the process exists.
            // SAFETY: kill(2) with signal 0 touches nothing.
            Err(_) => unsafe { libc::kill(pid, 0) == 0 },
        }
    }

    async fn pid_in(path: &std::path::Path) -> i32 {
        for _ in 0..200 {
            if let Ok(text) = std::fs::read_to_string(path)
                && let Ok(pid) = text.trim().parse()
            {
                return pid;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the child never wrote its pid");
    }

    fn spec_with_grandchild(dir: &std::path::Path) -> (SutSpec, Placeholders) {
        let mut p = Placeholders::new();
        p.set("tmp", dir.display().to_string())
            .set("greeting", "hello there");
        // A child that ignores SIGTERM and leaves a grandchild behind: the worst case.
        let spec = SutSpec {
            grace: Some(crate::duration::Dur(Duration::from_millis(200))),
            ..SutSpec::command(
                "trap '' TERM; echo {greeting}; echo \"$LEMBAS_TEST_GREETING\" >&2; sleep 300 & echo $! > {tmp}/grandchild; wait",
            )
        };
        (spec, p)
    }

    #[tokio::test]
    async fn a_stop_ends_the_whole_group_even_a_child_that_ignores_sigterm() {
        let dir = tempfile::tempdir().expect("dir");
        let (spec, p) = spec_with_grandchild(dir.path());
        let sut = Sut::start(spec, p, None).await.expect("starts");
        let grandchild = pid_in(&dir.path().join("grandchild")).await;
        assert!(alive(grandchild));
        let exit = sut.stop().await.expect("it ended");
        assert_eq!(exit.signal, Some(libc::SIGKILL), "{exit}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!alive(grandchild), "the grandchild outlived the stop");
        let report = sut.report();
        assert!(report.runs[0].stopped);
        let texts: Vec<_> = report
            .output
            .iter()
            .map(|l| (l.stream, l.text.as_str()))
            .collect();
        assert!(
            texts.contains(&(Stream::Stdout, "hello there")),
            "{texts:?}"
        );
        assert!(
            texts.contains(&(Stream::Stderr, "hello there")),
            "{texts:?}"
        );
    }

    #[tokio::test]
    async fn dropping_the_handle_kills_the_group() {
        let dir = tempfile::tempdir().expect("dir");
        let (spec, p) = spec_with_grandchild(dir.path());
        let sut = Sut::start(spec, p, None).await.expect("starts");
        let grandchild = pid_in(&dir.path().join("grandchild")).await;
        drop(sut);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!alive(grandchild), "the grandchild outlived the handle");
    }

    #[tokio::test]
    async fn a_restart_starts_it_again_and_an_exit_is_seen_with_its_code() {
        let dir = tempfile::tempdir().expect("dir");
        let mut p = Placeholders::new();
        p.set("tmp", dir.path().display().to_string());
        let sut = Sut::start(
            SutSpec::command("echo start >> {tmp}/starts; read line; exit 4"),
            p,
            None,
        )
        .await
        .expect("starts");
        assert_eq!(
            sut.wait_exit(Instant::now() + Duration::from_millis(100))
                .await,
            None,
            "it waits for a line"
        );
        sut.restart().await.expect("restarts");
        sut.write_stdin("go\n").await.expect("writes");
        let exit = sut
            .wait_exit(Instant::now() + Duration::from_secs(5))
            .await
            .expect("it exits");
        assert_eq!(exit.code, Some(4));
        let starts = std::fs::read_to_string(dir.path().join("starts")).expect("starts");
        assert_eq!(starts.lines().count(), 2);
        let runs = sut.report().runs;
        assert_eq!(runs.len(), 2);
        assert!(runs[0].stopped && !runs[1].stopped, "{runs:?}");
        assert_eq!(runs[1].exited.and_then(|e| e.code), Some(4));
    }
}

/// How long a server under test has to listen on its port after a start before the run goes on
/// anyway (its steps then say what they could not reach).
const LISTEN_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// Waits until something accepts connections on `port` on this machine, at most `within`.
async fn listening(port: u16, within: std::time::Duration) {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
