//! Issue 16's fleet and lean links: one fake-instance process and one `--fleet` process of
//! `FLEET_DEVICES` devices (default 10,000), each device with its own token; the bench times how
//! long the fleet takes to have every device linked and initialized, and reads both processes'
//! resident memory once they are. The two roles are this same binary run again (`--role`), so
//! each process holds only its double, as `fake-instance` and `fake-device --fleet` do. The
//! numbers go to docs/benchmarks.md; nothing here asserts them.
//!
//! ```sh
//! cargo bench -p harness-cli --bench fleet
//! FLEET_DEVICES=2000 cargo bench -p harness-cli --bench fleet
//! ```

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
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
async fn instance(tokens: &Path) {
    let options = fake_instance::Options {
        tokens: read_tokens(tokens),
        ..Default::default()
    };
    let ready = |addr: std::net::SocketAddr| println!("listening {addr}");
    fake_instance::run(options, None, ready, std::future::pending::<()>())
        .await
        .expect("the instance runs");
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

fn start(args: &[&str]) -> (Running, BufReader<std::process::ChildStdout>) {
    let me = std::env::current_exe().expect("this binary");
    let mut child = Command::new(me)
        .arg("--role")
        .args(args)
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

    let (instance, mut said) = start(&["instance", &tokens]);
    let mut line = String::new();
    said.read_line(&mut line).expect("the instance's address");
    let addr = line
        .trim()
        .strip_prefix("listening ")
        .expect("`listening ADDR`")
        .to_string();
    std::thread::sleep(Duration::from_millis(300));
    let instance_idle = instance.rss_kib();

    let begun = Instant::now();
    let (fleet, counts) = start(&["fleet", &tokens, &format!("http://{addr}")]);
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
        "fleet: {:.1} MB resident, {:.1} kB a device",
        fleet_kib as f64 / 1024.0,
        per(fleet_kib)
    );
    println!("both: {:.0} MB", (instance_kib + fleet_kib) as f64 / 1024.0);
    drop(fleet);
    drop(instance);
}
