//! The CI recipes in `docs/recipes` say what `harness run` understands: each `harness run` line
//! in them parses with the command's own arguments, and the example baseline loads. They install
//! a pinned release of the doubles, the workspace's own version, from an asset the release
//! workflow makes, checked against its SHA256SUMS.

mod common;

use clap::Parser;
use common::{root, words};
use harness_cli::matrix::RunArgs;

#[derive(Debug, Parser)]
struct Run {
    #[command(flatten)]
    args: RunArgs,
}

/// The `harness run` command of a recipe: its line and the option lines after it, with the
/// CI's matrix variables given a cell's values.
fn harness_run(text: &str) -> String {
    let mut lines = text.lines().skip_while(|l| !l.contains("harness run"));
    let mut command = lines.next().expect("a `harness run` line").to_string();
    for line in lines {
        let line = line.trim();
        if !line.starts_with("--") {
            break;
        }
        command.push(' ');
        command.push_str(line);
    }
    command
        .replace('\\', " ")
        .replace("${{ matrix.protocol }}", "1")
        .replace("${{ matrix.spec }}", "1.1.0")
        .replace("\"$PROTOCOL\"", "1")
        .replace("\"$SPEC\"", "1.1.0")
}

const RECIPES: [&str; 2] = ["github-actions.yml", "gitlab-ci.yml"];

fn recipe(name: &str) -> String {
    std::fs::read_to_string(root().join("docs/recipes").join(name)).expect("the recipe")
}

#[test]
fn each_recipe_s_harness_run_parses() {
    for recipe in RECIPES {
        let text =
            std::fs::read_to_string(root().join("docs/recipes").join(recipe)).expect("the recipe");
        let command = harness_run(&text);
        let words = words(&command);
        let at = words.iter().position(|w| w == "run").expect("`run`");
        let mut argv = vec!["harness".to_string()];
        argv.extend(words[at + 1..].iter().cloned());
        let run = Run::try_parse_from(&argv).unwrap_or_else(|e| panic!("{recipe}: {e}\n{argv:?}"));
        assert!(
            run.args.exec.is_some(),
            "{recipe} starts the system under test"
        );
        assert!(
            run.args.expected_failures.is_some(),
            "{recipe} has a baseline"
        );
        assert!(
            run.args.reports.iter().any(|r| r.starts_with("junit:")),
            "{recipe} writes JUnit"
        );
        assert_eq!(run.args.protocols, [1], "{recipe}: one cell a job");
    }
}

#[test]
fn the_example_baseline_loads() {
    let entries =
        harness_cli::baseline::load(&root().join("docs/recipes/expected-failures.example.yaml"))
            .expect("it loads");
    assert_eq!(entries.len(), 3);
    assert_eq!(entries[2].protocol, Some(1));
}

/// The variable a recipe pins the doubles' release with, as a shell line spells it.
const PIN: &str = "$LEMBAS_DOUBLES_VERSION";

/// The lines of a recipe (shell continuations joined, comments included: a command shown in a
/// comment is copied too) that install the doubles without the pinned version: `cargo install`
/// without `--tag "v$LEMBAS_DOUBLES_VERSION"`, pip or npm without `$LEMBAS_DOUBLES_VERSION`, a
/// release download not of that version's tag.
fn unpinned_installs(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        // A comment's `#` and a YAML list's `- ` are no part of the command.
        let line = line.trim().trim_start_matches('#').trim();
        let line = line.strip_prefix("- ").unwrap_or(line);
        pending.push_str(line.trim_end_matches('\\'));
        pending.push(' ');
        if !line.ends_with('\\') {
            lines.push(std::mem::take(&mut pending));
        }
    }
    lines
        .into_iter()
        .filter(|line| {
            let cargo = line.contains("cargo install") || line.contains("cargo binstall");
            let package_manager = ["pip ", "uv ", "npm ", "pnpm ", "yarn "]
                .iter()
                .any(|tool| line.contains(tool))
                && line.contains("lembas-doubles");
            let download = line.contains("/releases/");
            if cargo {
                !line.contains(&format!("--tag \"v{PIN}\""))
            } else if download {
                !line.contains(&format!("/releases/download/v{PIN}"))
            } else {
                package_manager && !line.contains(PIN)
            }
        })
        .map(|line| line.trim().to_string())
        .collect()
}

/// Every value of `LEMBAS_DOUBLES_VERSION` in a recipe (`env:` or `variables:`, at any level).
fn pinned_versions(yaml: &serde_json::Value, found: &mut Vec<String>) {
    match yaml {
        serde_json::Value::Object(map) => {
            for (key, value) in map {
                if key == "LEMBAS_DOUBLES_VERSION" {
                    found.push(value.as_str().map_or(value.to_string(), str::to_string));
                }
                pinned_versions(value, found);
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| pinned_versions(v, found)),
        _ => {}
    }
}

#[test]
fn each_recipe_installs_the_workspace_s_release_pinned_and_checked() {
    // The workspace's version: harness-cli has no other (`version.workspace = true`).
    let workspace = env!("CARGO_PKG_VERSION");
    // The release workflow's archive of a platform's binaries, as a recipe names it.
    let workflow = std::fs::read_to_string(root().join(".github/workflows/release.yml")).unwrap();
    let template = workflow
        .lines()
        .find_map(|l| l.trim().strip_prefix("ARCHIVE: "))
        .expect("release.yml names its archives in ARCHIVE");
    let linux_x64 = template
        .replace("${{ needs.version.outputs.version }}", PIN)
        .replace("${{ matrix.target }}", "x86_64-unknown-linux-gnu")
        + ".tar.gz";
    for name in RECIPES {
        let text = recipe(name);
        let yaml: serde_json::Value = serde_saphyr::from_str(&text).expect("the recipe parses");
        let mut versions = Vec::new();
        pinned_versions(&yaml, &mut versions);
        assert!(
            !versions.is_empty(),
            "{name} pins the doubles' release in LEMBAS_DOUBLES_VERSION"
        );
        for version in versions {
            assert_eq!(
                version, workspace,
                "{name} pins {version}: bump it with the workspace (packages/check-versions.sh says so too)"
            );
        }
        let unpinned = unpinned_installs(&text);
        assert!(
            unpinned.is_empty(),
            "{name} installs the doubles unpinned: {unpinned:?}"
        );
        assert!(
            text.contains(&linux_x64),
            "{name} downloads the release's own archive, {linux_x64}"
        );
        assert!(
            text.contains("SHA256SUMS") && text.contains("sha256sum --check"),
            "{name} checks what it downloaded against the release's SHA256SUMS"
        );
    }
}

#[test]
fn an_unpinned_install_is_caught() {
    for line in [
        r#"cargo install --locked --git "$LEMBAS_DOUBLES_GIT" harness-cli fake-device"#,
        "cargo install --locked --git \"$LEMBAS_DOUBLES_GIT\" \\\n  harness-cli --branch main",
        r#"cargo install --locked --git "$LEMBAS_DOUBLES_GIT" --tag v0.1.0 harness-cli"#,
        "pip install lembas-doubles",
        "  - npm i -D lembas-doubles vitest",
        r#"curl -fsSLO "$REPO/releases/download/latest/lembas-doubles.tar.gz""#,
        r#"release="$REPO/releases/latest/download/v$LEMBAS_DOUBLES_VERSION""#,
    ] {
        assert_eq!(unpinned_installs(line).len(), 1, "{line}");
    }
    for line in [
        "cargo install --locked --git \"$LEMBAS_DOUBLES_GIT\" \\\n  --tag \"v$LEMBAS_DOUBLES_VERSION\" harness-cli",
        r#"pip install "lembas-doubles==$LEMBAS_DOUBLES_VERSION""#,
        r#"npm i -D "lembas-doubles@$LEMBAS_DOUBLES_VERSION""#,
        r#"release="$REPO/releases/download/v$LEMBAS_DOUBLES_VERSION""#,
        "cargo build --release",
    ] {
        assert!(unpinned_installs(line).is_empty(), "{line}");
    }
}

/// The Kubernetes recipe's documents: the manifest split at `---`.
fn manifest() -> Vec<serde_json::Value> {
    recipe("kubernetes/fleet-job.yaml")
        .split("\n---\n")
        .map(|doc| serde_saphyr::from_str(doc).expect("a YAML document"))
        .collect()
}

/// A string list of the manifest as words.
fn strings(value: &serde_json::Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The Indexed Job runs one slice of the fleet a pod: each pod's command line, read by
/// fake-device's own arguments with that pod's JOB_COMPLETION_INDEX, runs its slice, the slices
/// cover every device once, each writes its own report, and the merge Job reads every one of
/// them with `harness merge`'s arguments. The image the Dockerfile makes holds both commands and
/// the workload.
#[test]
fn the_kubernetes_recipe_runs_every_device_once_and_merges_every_shard() {
    use harness::report::ReportTarget;
    let docs = manifest();
    let fleet = docs
        .iter()
        .find(|d| d["spec"]["completionMode"] == "Indexed")
        .expect("an Indexed Job");
    let pods = fleet["spec"]["completions"].as_u64().expect("completions") as usize;
    assert_eq!(fleet["spec"]["parallelism"], pods, "every shard at once");
    let container = &fleet["spec"]["template"]["spec"]["containers"][0];
    let index_from = container["env"]
        .as_array()
        .and_then(|env| env.iter().find(|e| e["name"] == "JOB_COMPLETION_INDEX"))
        .expect("JOB_COMPLETION_INDEX in env, for $(…) in args");
    assert_eq!(
        index_from["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    );
    let command = strings(&container["command"]);
    assert_eq!(command, ["fake-device"]);
    let mut covered = Vec::new();
    let mut written = Vec::new();
    for pod in 0..pods {
        let mut argv = command.clone();
        argv.extend(
            strings(&container["args"])
                .iter()
                .map(|a| a.replace("$(JOB_COMPLETION_INDEX)", &pod.to_string())),
        );
        let slice = fake_device::cli::fleet_slice(&argv, Some(&pod.to_string()))
            .unwrap_or_else(|e| panic!("pod {pod}: {e}"));
        assert_eq!((slice.shard.index, slice.shard.of), (pod + 1, pods));
        covered.extend(slice.shard.range(slice.devices));
        for report in slice.reports {
            if let ReportTarget::Json(path) = report {
                written.push(path.display().to_string());
            }
        }
        let workload = slice.workload.expect("a workload");
        let shipped = root()
            .join("docs/recipes/workloads")
            .join(workload.file_name().expect("a file"));
        assert!(
            workload.starts_with("/workloads") && shipped.exists(),
            "{workload:?}"
        );
        fake_device::workload::Workload::load(&shipped).expect("the workload loads");
    }
    covered.sort_unstable();
    let devices = covered.len();
    assert_eq!(
        covered,
        (0..devices).collect::<Vec<_>>(),
        "every device once"
    );
    written.dedup();
    assert_eq!(written.len(), pods, "a report a pod: {written:?}");
    // Without the index, --shards is refused rather than every pod running the whole fleet.
    let mut argv = command.clone();
    argv.extend(strings(&container["args"]));
    assert!(fake_device::cli::fleet_slice(&argv, None).is_err());

    #[derive(Debug, clap::Parser)]
    struct Merge {
        #[command(flatten)]
        args: harness_cli::merge::MergeArgs,
    }
    let merge = docs
        .iter()
        .find(|d| d["metadata"]["name"] == "lembas-fleet-merge")
        .expect("the merge Job");
    let merging = &merge["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(strings(&merging["command"]), ["harness"]);
    let args = strings(&merging["args"]);
    assert_eq!(args[0], "merge");
    let mut argv = vec!["harness-merge".to_string()];
    argv.extend(args[1..].iter().cloned());
    let parsed = Merge::try_parse_from(&argv).unwrap_or_else(|e| panic!("{e}"));
    let read: Vec<String> = parsed
        .args
        .files
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    assert_eq!(read, written, "the merge reads every shard's report");
    let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).expect("a Dockerfile");
    for needed in [
        "target/release/harness",
        "target/release/fake-device",
        "docs/recipes/workloads /workloads",
    ] {
        assert!(dockerfile.contains(needed), "the image holds {needed}");
    }
}
