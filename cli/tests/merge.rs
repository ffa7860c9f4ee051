//! `harness merge`: four shard processes of one fleet against one server, merged, count what one
//! process running every device counts, bucket by bucket the sum of the shards' histograms;
//! a shard given twice is refused.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

mod common;

const DEVICES: usize = 8;

/// A fleet process of `DEVICES` devices (one shard of them, when `shard` is given) that runs for
/// two seconds and writes its JSON report to `json`.
fn fleet(url: &str, tokens: &Path, shard: Option<&str>, json: &Path) -> Child {
    let mut command = Command::new(common::fake_device());
    command
        .args(["--instance", url, "--fleet", &DEVICES.to_string()])
        .args(["--tokens", &tokens.display().to_string(), "--for", "2s"])
        .args(["--report", &format!("json:{}", json.display())])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(shard) = shard {
        command.args(["--shard", shard]);
    }
    command.spawn().expect("fake-device starts")
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("a report")).expect("JSON")
}

/// A latency's recorded buckets as value → count.
fn buckets(latency: &Value) -> BTreeMap<u64, u64> {
    latency["recorded"]
        .as_array()
        .expect("recorded buckets")
        .iter()
        .map(|pair| {
            (
                pair[0].as_u64().expect("a value"),
                pair[1].as_u64().expect("a count"),
            )
        })
        .collect()
}

#[test]
fn four_shards_merged_count_what_one_process_counts() {
    let dir = tempfile::tempdir().expect("tmp");
    let tokens = dir.path().join("tokens.txt");
    let list: Vec<String> = (1..=DEVICES).map(|i| format!("tok-{i}")).collect();
    std::fs::write(&tokens, list.join("\n")).expect("tokens");
    let port = harness::free_port::free_port().expect("a port");
    let mut instance = Command::new(common::binary("fake-instance"))
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--tokens", &tokens.display().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("fake-instance starts");
    let url = format!("http://127.0.0.1:{port}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "fake-instance listens"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let whole = dir.path().join("whole.json");
    let shard_files: Vec<_> = (1..=4)
        .map(|k| dir.path().join(format!("shard-{k}.json")))
        .collect();
    let mut runs = vec![fleet(&url, &tokens, None, &whole)];
    for (k, file) in shard_files.iter().enumerate() {
        runs.push(fleet(&url, &tokens, Some(&format!("{}/4", k + 1)), file));
    }
    for run in runs {
        let out = run.wait_with_output().expect("the fleet ends");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let merged = dir.path().join("merged.json");
    let mut args: Vec<String> = vec!["merge".into()];
    args.extend(shard_files.iter().map(|f| f.display().to_string()));
    args.extend(["--report".into(), format!("json:{}", merged.display())]);
    args.extend(["--threshold".into(), format!("link.setup.count=={DEVICES}")]);
    let (code, said) = common::harness(&args);
    let _ = instance.kill();
    let _ = instance.wait();
    assert_eq!(code, 0, "{said}");
    assert!(
        said.contains(&format!("✓ link.setup.count=={DEVICES}")),
        "{said}"
    );
    let (whole, merged) = (read(&whole), read(&merged));
    assert_eq!(merged["devices"], DEVICES);
    assert_eq!(
        merged["shards"],
        serde_json::json!(["1/4", "2/4", "3/4", "4/4"])
    );
    for name in ["link.setup", "device.initialize"] {
        assert_eq!(
            merged["figures"]["latencies"][name]["count"],
            whole["figures"]["latencies"][name]["count"],
            "{name}"
        );
        // Merged, not averaged: each bucket holds the shards' counts added.
        let mut added: BTreeMap<u64, u64> = BTreeMap::new();
        for file in &shard_files {
            for (value, count) in buckets(&read(file)["figures"]["latencies"][name]) {
                *added.entry(value).or_default() += count;
            }
        }
        assert_eq!(
            buckets(&merged["figures"]["latencies"][name]),
            added,
            "{name}"
        );
    }
    for counter in ["links.opened", "messages.in", "messages.out", "findings"] {
        assert_eq!(
            merged["figures"]["counters"][counter], whole["figures"]["counters"][counter],
            "{counter}"
        );
    }
    // A slice given twice would count its devices twice.
    let first = shard_files[0].display().to_string();
    let (code, said) = common::harness(&["merge", &first, &first]);
    assert_eq!(code, 2, "{said}");
    assert!(
        said.contains("shard 1/4 is in more than one report"),
        "{said}"
    );
}
