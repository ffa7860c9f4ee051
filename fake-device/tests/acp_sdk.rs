//! An official ACP SDK client (the Python `agent-client-protocol`) drives a whole session
//! through `fake-device serve --stdio`: initialize, session/new, a prompt with streamed updates
//! and a permission request, and a cancel (`tests/acp_sdk/drive.py`). CI installs the SDK
//! (`.ci/run`) and sets `LEMBAS_REQUIRE_ACP_SDK=1`, so there it cannot skip; elsewhere, without
//! the SDK, the test says so and skips.

use std::time::Duration;

#[tokio::test]
async fn the_official_python_sdk_drives_a_session_through_serve_stdio() {
    let available = tokio::process::Command::new("python3")
        .args(["-c", "import acp"])
        .output()
        .await
        .is_ok_and(|o| o.status.success());
    if !available {
        assert!(
            std::env::var_os("LEMBAS_REQUIRE_ACP_SDK").is_none(),
            "the ACP Python SDK (agent-client-protocol) is required here but not installed"
        );
        eprintln!("skipped: the `agent-client-protocol` Python package is not installed");
        return;
    }
    let here = env!("CARGO_MANIFEST_DIR");
    let project = tempfile::tempdir().expect("a project");
    let run = tokio::process::Command::new("python3")
        .arg(format!("{here}/tests/acp_sdk/drive.py"))
        .arg(env!("CARGO_BIN_EXE_fake-device"))
        .arg(format!("{here}/tests/data/editor-scripts.yaml"))
        .arg(project.path())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(90), run)
        .await
        .expect("the SDK's session finishes within 90 s")
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.trim_end().ends_with("ok"),
        "the SDK's session failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
