//! Issue 16's fleet and lean links: one fake-instance process and one `--fleet` process of
//! `FLEET_DEVICES` devices (default 10,000), each device with its own token; the bench times how
//! long the fleet takes to have every device linked and initialized, and reads both processes'
//! resident memory once they are. The two roles are this same binary run again (`--role`), so
//! each process holds only its double, as `fake-instance` and `fake-device --fleet` do. The
//! numbers go to docs/book/src/performance.md; nothing here asserts them.
//!
//! ```sh
//! cargo bench -p harness-cli --bench fleet
//! FLEET_DEVICES=2000 cargo bench -p harness-cli --bench fleet
//! ```

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// mimalloc, as the commands have (why is in the workspace's Cargo.toml).
#[cfg(not(feature = "dhat-heap"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// With `--features dhat-heap`: every allocation counted, to find what a device holds.
#[cfg(feature = "dhat-heap")]
#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

/// How many devices, unless `FLEET_DEVICES` says.
const DEVICES: usize = 10_000;
/// How long the whole fleet may take to link before the bench gives up.
const LINK_WITHIN: Duration = Duration::from_secs(300);
/// How many chats are opened and prompted at once.
const PROMPTS_AT_ONCE: usize = 64;
/// How long one prompt may take to be answered.
const PROMPT_WITHIN: Duration = Duration::from_secs(30);
/// How long every device may take to answer its prompt.
const ANSWER_WITHIN: Duration = Duration::from_secs(600);
/// How long the memory is left to settle once every device is linked.
const SETTLE: Duration = Duration::from_secs(2);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == "--role") {
        Some(at) => role(&args[at + 1..]),
        None => bench(),
    }
}

/// The child processes' parts.
fn role(args: &[String]) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    match args {
        [role, tokens] if role == "instance" => runtime.block_on(instance(Path::new(tokens))),
        [role, tokens, url] if role == "fleet" => runtime.block_on(fleet(Path::new(tokens), url)),
        _ => panic!("--role instance TOKENS | --role fleet TOKENS URL"),
    }
}

/// Plays the instance with the fleet's tokens; prints its address, then serves until killed.
/// Told `prompt` on stdin (once every device is linked), it opens a chat on each device, 64 at
/// a time, writes in it and waits for its answer, then prints how long that took.
async fn instance(tokens: &Path) {
    let tokens = read_tokens(tokens);
    let devices = tokens.len();
    let instance = fake_instance::FakeInstance::builder()
        .tokens(tokens)
        .start()
        .await
        .expect("the instance runs");
    println!("listening {}", instance.addr());
    let instance = Arc::new(instance);
    let mut told = String::new();
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
    while tokio::io::AsyncBufReadExt::read_line(&mut stdin, &mut told)
        .await
        .is_ok_and(|n| n > 0)
    {
        if told.trim() != "prompt" {
            told.clear();
            continue;
        }
        let begun = Instant::now();
        let room = Arc::new(tokio::sync::Semaphore::new(PROMPTS_AT_ONCE));
        let mut prompts = tokio::task::JoinSet::new();
        for device in 1..=devices {
            let (instance, room) = (instance.clone(), room.clone());
            prompts.spawn(async move {
                let _turn = room.acquire_owned().await.ok()?;
                let chat = instance
                    .open_chat_on(&format!("device-{device}"))
                    .await
                    .ok()?;
                instance.send(&chat, "hello").await.ok()?;
                instance.wait_answered(&chat, PROMPT_WITHIN).await.ok()
            });
        }
        let mut answered = 0;
        while let Some(done) = prompts.join_next().await {
            answered += usize::from(matches!(done, Ok(Some(()))));
        }
        println!("answered {answered} {:.3}", begun.elapsed().as_secs_f64());
        told.clear();
    }
}

/// Plays the fleet; prints the count of linked devices whenever it changes.
async fn fleet(tokens: &Path, url: &str) {
    // Profiled, the fleet stops by itself (its profile is written when it ends), at the peak.
    #[cfg(feature = "dhat-heap")]
    let _profiler = dhat::Profiler::new_heap();
    let runs_for = std::env::var("FLEET_RUNS_FOR")
        .ok()
        .and_then(|s| s.parse().ok())
        .map(Duration::from_secs);
    let tokens = fake_device::FleetTokens::List(read_tokens(tokens));
    let state = tempfile::tempdir().expect("a state root");
    let mut last = usize::MAX;
    let report = move |count: fake_device::FleetCount| {
        if count.linked != last {
            last = count.linked;
            println!("linked {} {:.3}", count.linked, count.elapsed.as_secs_f64());
        }
    };
    let report = std::sync::Mutex::new(report);
    // Told `go` on stdin: its resident size before any device is read first.
    let mut go = String::new();
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let _ = tokio::io::AsyncBufReadExt::read_line(&mut stdin, &mut go).await;
    fake_device::run_fleet(
        fake_device::Options::for_instance(url),
        tokens.devices(fake_device::Shard::WHOLE),
        state.path().to_path_buf(),
        |count| (report.lock().expect("not poisoned"))(count),
        Duration::from_millis(50),
        async move {
            match runs_for {
                Some(after) => tokio::time::sleep(after).await,
                None => std::future::pending().await,
            }
        },
    )
    .await;
}

fn read_tokens(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .expect("the token file")
        .lines()
        .map(String::from)
        .collect()
}

/// A child process, killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Running {
    fn rss_kib(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.0.id())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }
}

/// Starts a role; its stdin is piped, for what it is told (`prompt`, `go`).
fn start(args: &[&str], stdin: Stdio) -> (Running, BufReader<std::process::ChildStdout>) {
    let me = std::env::current_exe().expect("this binary");
    let mut child = Command::new(me)
        .arg("--role")
        .args(args)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("a role starts");
    let out = BufReader::new(child.stdout.take().expect("piped"));
    (Running(child), out)
}

fn bench() {
    let devices: usize = std::env::var("FLEET_DEVICES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(DEVICES);
    let dir = tempfile::tempdir().expect("a directory");
    let tokens: PathBuf = dir.path().join("tokens.txt");
    let list: Vec<String> = (1..=devices).map(|i| format!("fleet-token-{i}")).collect();
    std::fs::write(&tokens, list.join("\n")).expect("the token file");
    let tokens = tokens.to_str().expect("utf-8").to_string();

    let (mut instance, mut said) = start(&["instance", &tokens], Stdio::piped());
    let mut line = String::new();
    said.read_line(&mut line).expect("the instance's address");
    let addr = line
        .trim()
        .strip_prefix("listening ")
        .expect("`listening ADDR`")
        .to_string();
    std::thread::sleep(Duration::from_millis(300));
    let instance_idle = instance.rss_kib();

    let (mut fleet, counts) = start(
        &["fleet", &tokens, &format!("http://{addr}")],
        Stdio::piped(),
    );
    std::thread::sleep(Duration::from_millis(300));
    let fleet_idle = fleet.rss_kib();
    let begun = Instant::now();
    if let Some(stdin) = fleet.0.stdin.as_mut() {
        let _ = writeln!(stdin, "go");
        let _ = stdin.flush();
    }
    // Drained on a thread of its own, so the fleet never blocks on a full pipe.
    let (linked_tx, linked_rx) = std::sync::mpsc::channel::<(usize, f64)>();
    std::thread::spawn(move || {
        for line in counts.lines().map_while(Result::ok) {
            let mut words = line.split_whitespace().skip(1);
            let linked = words.next().and_then(|n| n.parse().ok()).unwrap_or(0);
            let seconds = words.next().and_then(|s| s.parse().ok()).unwrap_or(0.0);
            if linked_tx.send((linked, seconds)).is_err() {
                return;
            }
        }
    });
    let mut linked = (0, 0.0);
    while linked.0 < devices && begun.elapsed() < LINK_WITHIN {
        match linked_rx.recv_timeout(Duration::from_secs(1)) {
            Ok(now) => linked = now,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    if linked.0 < devices {
        eprintln!(
            "fleet: only {} of {devices} devices linked within {LINK_WITHIN:?}",
            linked.0
        );
    }
    std::thread::sleep(SETTLE);
    let (instance_kib, fleet_kib) = (instance.rss_kib(), fleet.rss_kib());
    let per = |kib: u64| kib as f64 * 1.024 / linked.0.max(1) as f64;
    println!(
        "fleet: {} of {devices} devices linked and initialized in {:.2} s ({:.0} a second)",
        linked.0,
        linked.1,
        linked.0 as f64 / linked.1.max(f64::EPSILON)
    );
    println!(
        "fake-instance: {:.1} MB resident ({:.1} MB idle), {:.1} kB a link over idle",
        instance_kib as f64 / 1024.0,
        instance_idle as f64 / 1024.0,
        per(instance_kib.saturating_sub(instance_idle))
    );
    println!(
        "fleet: {:.1} MB resident ({:.1} MB idle), {:.1} kB a device over idle ({:.1} kB with the idle process)",
        fleet_kib as f64 / 1024.0,
        fleet_idle as f64 / 1024.0,
        per(fleet_kib.saturating_sub(fleet_idle)),
        per(fleet_kib)
    );
    println!("both: {:.0} MB", (instance_kib + fleet_kib) as f64 / 1024.0);
    // Every device answers a prompt: a chat opened on it, written in, answered.
    if let Some(stdin) = instance.0.stdin.as_mut() {
        let _ = writeln!(stdin, "prompt");
        let _ = stdin.flush();
    }
    let (answered_tx, answered_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut answered = String::new();
        let _ = said.read_line(&mut answered);
        let _ = answered_tx.send(answered);
    });
    match answered_rx.recv_timeout(ANSWER_WITHIN) {
        Ok(line) => {
            let mut words = line.split_whitespace().skip(1);
            let count: usize = words.next().and_then(|n| n.parse().ok()).unwrap_or(0);
            let seconds: f64 = words.next().and_then(|s| s.parse().ok()).unwrap_or(0.0);
            println!(
                "prompts: {count} of {devices} devices answered one in {seconds:.2} s ({:.0} a second, {PROMPTS_AT_ONCE} at once)",
                count as f64 / seconds.max(f64::EPSILON)
            );
            println!(
                "after the prompts: fake-instance {:.1} MB, fleet {:.1} MB",
                instance.rss_kib() as f64 / 1024.0,
                fleet.rss_kib() as f64 / 1024.0
            );
        }
        Err(_) => eprintln!("prompts: no answer within {ANSWER_WITHIN:?}"),
    }
    drop(fleet);
    drop(instance);
}
