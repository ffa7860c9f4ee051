//! The release workflow (`.github/workflows/release.yml`) makes what a release promises: on a
//! version tag, a wheel and an npm platform package for each platform the packages name, built by
//! maturin's action from `packages/python`, attached to the GitHub release with their SHA256SUMS.
//! Nothing here runs it (that takes GitHub's runners); this reads it, so a platform dropped from
//! the matrix, or an npm key the launcher would never look for, fails here first.

mod common;

use std::collections::BTreeSet;

use common::root;
use serde_json::Value;

/// The platforms a release carries: the npm key (`lib/platform.js`) and the Rust target.
const PLATFORMS: [(&str, &str); 5] = [
    ("linux-x64", "x86_64-unknown-linux-gnu"),
    ("linux-arm64", "aarch64-unknown-linux-gnu"),
    ("darwin-x64", "x86_64-apple-darwin"),
    ("darwin-arm64", "aarch64-apple-darwin"),
    ("win32-x64", "x86_64-pc-windows-msvc"),
];

fn workflow() -> Value {
    let text = std::fs::read_to_string(root().join(".github/workflows/release.yml"))
        .expect("the release workflow");
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("release.yml does not parse: {e}"))
}

fn job<'a>(workflow: &'a Value, name: &str) -> &'a Value {
    workflow["jobs"]
        .get(name)
        .unwrap_or_else(|| panic!("release.yml has no job `{name}`"))
}

fn steps(job: &Value) -> &[Value] {
    job["steps"].as_array().expect("the job's steps")
}

fn step_using<'a>(job: &'a Value, action: &str) -> Vec<&'a Value> {
    steps(job)
        .iter()
        .filter(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.split('@').next() == Some(action))
        })
        .collect()
}

/// Every `run:` script of a job, one after the other.
fn scripts(job: &Value) -> String {
    steps(job)
        .iter()
        .filter_map(|s| s["run"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn str_of<'a>(value: &'a Value, what: &str) -> &'a str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {value}"))
}

/// Whether `lib/platform.js` can name a machine by `key`. It builds keys from Node's
/// `process.platform` and `process.arch`, and adds `-musl` on a musl Linux; a key of another
/// shape (`macos-arm64`, `linux-amd64`) would never be looked for, and its package never used.
fn platform_js_knows(key: &str) -> bool {
    let source =
        std::fs::read_to_string(root().join("packages/npm/lembas-doubles/lib/platform.js"))
            .expect("platform.js");
    assert!(
        source.contains("`${process.platform}-${process.arch}`") && source.contains("\"-musl\""),
        "platform.js builds its keys some other way now: teach this test how"
    );
    // Node's values of `process.platform` and `process.arch`.
    const PLATFORMS: [&str; 9] = [
        "aix", "android", "darwin", "freebsd", "linux", "netbsd", "openbsd", "sunos", "win32",
    ];
    const ARCHES: [&str; 12] = [
        "arm", "arm64", "ia32", "loong64", "mips", "mipsel", "ppc", "ppc64", "riscv64", "s390",
        "s390x", "x64",
    ];
    match key.split('-').collect::<Vec<_>>()[..] {
        [os, arch] => PLATFORMS.contains(&os) && ARCHES.contains(&arch),
        [os, arch, "musl"] => os == "linux" && ARCHES.contains(&arch),
        _ => false,
    }
}

#[test]
fn it_runs_on_a_pushed_version_tag_that_is_the_workspace_s_version() {
    let workflow = workflow();
    let on = &workflow["on"];
    assert_eq!(
        on["push"]["tags"],
        serde_json::json!(["v*"]),
        "release.yml runs on pushed v* tags: {on}"
    );
    assert_eq!(
        on.as_object().map(|o| o.len()),
        Some(1),
        "only a pushed tag makes a release: {on}"
    );
    assert!(on["push"].get("branches").is_none(), "{on}");
    // The check that the tag, the workspace, the packages and the recipes agree comes first:
    // every other job needs it.
    let version = job(&workflow, "version");
    assert!(
        scripts(version).contains("packages/check-versions.sh \"$GITHUB_REF_NAME\""),
        "the version job passes the tag to check-versions.sh"
    );
    let check = std::fs::read_to_string(root().join("packages/check-versions.sh")).unwrap();
    assert!(
        check.contains("\"v$workspace\""),
        "check-versions.sh compares the tag with v and the workspace's version"
    );
    for name in ["build", "release"] {
        let needs = job(&workflow, name)["needs"].to_string();
        assert!(needs.contains("version"), "{name} needs the version job");
    }
}

#[test]
fn its_matrix_builds_the_wheel_and_the_npm_package_of_every_platform() {
    let workflow = workflow();
    let build = job(&workflow, "build");
    let include = build["strategy"]["matrix"]["include"]
        .as_array()
        .expect("the build job's matrix lists its platforms under `include`");
    let mut built = BTreeSet::new();
    for entry in include {
        let key = str_of(&entry["npm"], "a platform's npm key");
        let target = str_of(&entry["target"], "a platform's target");
        let runner = str_of(&entry["runner"], "a platform's runner");
        assert!(
            platform_js_knows(key),
            "{key} is no key platform.js would look for"
        );
        let family = if target.contains("-linux-") {
            assert!(
                entry["manylinux"].is_string(),
                "{key}: a Linux wheel names its manylinux"
            );
            "ubuntu-"
        } else if target.contains("-apple-") {
            "macos-"
        } else {
            "windows-"
        };
        assert!(
            runner.starts_with(family),
            "{key} ({target}) builds on {runner}"
        );
        built.insert((key.to_string(), target.to_string()));
    }
    let expected: BTreeSet<_> = PLATFORMS
        .iter()
        .map(|(k, t)| (k.to_string(), t.to_string()))
        .collect();
    assert_eq!(
        built, expected,
        "the matrix builds each platform once, each npm key with its target"
    );

    // The wheel: maturin's own action, on the packaging crate, for the matrix's target, with the
    // maturin packages/build-wheel.sh (CI's test of the packages) pins.
    let maturin = step_using(build, "PyO3/maturin-action");
    assert_eq!(maturin.len(), 1, "one maturin-action step builds the wheel");
    let with = &maturin[0]["with"];
    assert_eq!(with["working-directory"], "packages/python");
    assert_eq!(with["target"], "${{ matrix.target }}");
    assert_eq!(with["manylinux"], "${{ matrix.manylinux }}");
    let build_wheel = std::fs::read_to_string(root().join("packages/build-wheel.sh")).unwrap();
    let pinned = build_wheel
        .lines()
        .find_map(|l| l.strip_prefix("MATURIN_VERSION="))
        .expect("build-wheel.sh pins maturin")
        .trim_matches('"');
    assert_eq!(with["maturin-version"], format!("v{pinned}"));
    let args = str_of(&with["args"], "maturin's args");
    assert!(args.contains("--release"), "a release build: {args}");
    let pyproject = std::fs::read_to_string(root().join("packages/python/pyproject.toml")).unwrap();
    assert!(
        pyproject.contains("bindings = \"bin\""),
        "the wheel carries the commands"
    );

    // Each platform's wheel and binaries leave the job as artifacts named by its npm key.
    let uploads: Vec<String> = step_using(build, "actions/upload-artifact")
        .iter()
        .map(|s| s["with"]["name"].as_str().unwrap_or_default().to_string())
        .collect();
    for name in ["wheel-${{ matrix.npm }}", "archive-${{ matrix.npm }}"] {
        assert!(
            uploads.iter().any(|u| u == name),
            "{name} is uploaded: {uploads:?}"
        );
    }
    let script = scripts(build);
    assert!(script.contains("packages/wheel-binaries.py"), "{script}");
    assert!(
        script.contains("\"dist/$ARCHIVE.tar.gz\"") && script.contains("\"../dist/$ARCHIVE.zip\""),
        "{script}"
    );

    // The npm packages: one pack.mjs for every platform's binaries, each under its key.
    let release = job(&workflow, "release");
    let script = scripts(release);
    assert!(
        script.contains("packages/npm/pack.mjs") && script.contains("--platform \"$key=bin/$key\""),
        "the release job packs the npm packages: {script}"
    );
    assert!(
        script.contains("for dir in artifacts/archive-*") && script.contains("win32-*)"),
        "{script}"
    );
}

#[test]
fn the_release_carries_every_artifact_and_their_sha256sums() {
    let workflow = workflow();
    let release = job(&workflow, "release");
    assert_eq!(release["permissions"]["contents"], "write");
    let script = scripts(release);
    assert!(
        script.contains("sha256sum") && script.contains("> SHA256SUMS"),
        "the release job writes SHA256SUMS: {script}"
    );
    let gh_release = step_using(release, "softprops/action-gh-release");
    assert_eq!(gh_release.len(), 1, "one step makes the GitHub release");
    let files: Vec<&str> = str_of(&gh_release[0]["with"]["files"], "its files")
        .lines()
        .map(str::trim)
        .collect();
    for file in [
        "release/*.whl",
        "release/*.tgz",
        "release/*.tar.gz",
        "release/*.zip",
        "release/SHA256SUMS",
    ] {
        assert!(files.contains(&file), "the release has {file}: {files:?}");
    }
    assert_eq!(gh_release[0]["with"]["fail_on_unmatched_files"], true);
}

#[test]
fn every_action_is_pinned_and_publishing_is_opt_in() {
    let workflow = workflow();
    for (name, job) in workflow["jobs"].as_object().expect("jobs") {
        for step in steps(job) {
            let Some(uses) = step["uses"].as_str() else {
                continue;
            };
            let (_, version) = uses
                .split_once('@')
                .unwrap_or_else(|| panic!("{name}: {uses} names no version"));
            // A major tag (`v4`), a full commit, or pypa's `release/v1` branch, which that
            // action documents as its stable line.
            let pinned = version.strip_prefix('v').is_some_and(|v| {
                v.split('.')
                    .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            }) || (version.len() == 40
                && version.bytes().all(|b| b.is_ascii_hexdigit()))
                || version == "release/v1";
            assert!(pinned, "{name}: {uses} is not pinned");
        }
        // A job that uploads to a registry runs only where the repository turned it on.
        let publishes = !step_using(job, "pypa/gh-action-pypi-publish").is_empty()
            || scripts(job).contains("npm publish");
        if publishes {
            let guard = job["if"].as_str().unwrap_or_default();
            assert!(
                guard.contains("vars."),
                "{name} publishes without a repository's opt-in: if: {guard:?}"
            );
        }
    }
}
