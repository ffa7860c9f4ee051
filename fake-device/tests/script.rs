//! The scripted agent (`--scripts`), end to end: fake-device runs as a process with a scripts
//! file, and fake-instance drives it with a scenario that checks what each step sends.

mod common;

use std::process::{Command, Stdio};

use common::{BIN, data, instance_checks};

#[test]
fn a_scripted_turn_streams_its_steps_and_branches_on_the_card() {
    let root = tempfile::tempdir().expect("root");
    let mut device = None;
    let failed = instance_checks("deploy-instance.yaml", |url| {
        device = Some(
            Command::new(BIN)
                .args(["--instance", &url])
                .args(["--root", &root.path().display().to_string()])
                .arg("--scripts")
                .arg(data("deploy-scripts.yaml"))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("fake-device starts"),
        );
    });
    if let Some(mut device) = device {
        let _ = device.kill();
        let _ = device.wait();
    }
    assert!(failed.is_none(), "{}", failed.unwrap_or_default());
}

#[test]
fn a_bad_scripts_file_is_a_usage_error_naming_file_line_and_key() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("scripts.yaml");
    // Runs fake-device with these scripts; gives its exit code and what it said on stderr.
    let run_with = |scripts: &str| {
        std::fs::write(&path, scripts).expect("written");
        let out = Command::new(BIN)
            .args(["--instance", "http://127.0.0.1:9", "--scripts"])
            .arg(&path)
            .output()
            .expect("runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run_with("- when: \"(unclosed\"\n  steps: []\n");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("scripts.yaml:1"), "{err}");
    assert!(err.contains("when"), "{err}");
    assert!(err.contains("not a regex"), "{err}");

    let (code, err) = run_with("- steps:\n    - shout: hello\n");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("scripts.yaml:2"), "{err}");
    assert!(err.contains("shout"), "{err}");
}
