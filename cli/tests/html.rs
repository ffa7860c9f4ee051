//! The HTML report in a real browser: headless Chromium (Debian's `chromium`, which `.ci/run`
//! installs) opens the report of a failing run; its DOM must hold the verdicts, the arrows and
//! the failing mark, with the page's script having run, and a screenshot is saved. Without a
//! browser the test says so and passes, unless `LEMBAS_REQUIRE_CHROMIUM` is set (CI sets it).

use std::path::Path;
use std::process::Command;

mod common;

use common::{HARNESS, fake_device, root};

/// A headless browser on this machine, if there is one.
fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|name| {
            Command::new(name)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

fn browse(browser: &str, args: &[&str], page: &Path) -> String {
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1400,1100",
        ])
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("the browser runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[cfg(unix)]
#[test]
fn a_failing_run_s_report_shows_its_verdict_arrows_and_failing_mark_in_a_browser() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("LEMBAS_REQUIRE_CHROMIUM").is_none(),
            "LEMBAS_REQUIRE_CHROMIUM is set, and no chromium is installed"
        );
        eprintln!("no chromium on this machine: the browser test is skipped");
        return;
    };
    let dir = tempfile::tempdir().expect("dir");
    let page = dir.path().join("report.html");
    // A device that says protocol 2 to an instance that speaks only 1.
    let device = format!(
        "exec {} --instance {{url}} --root {{root}} --state-dir {{tmp}}/state --spec {{spec}} --misbehave device.hello.protocol",
        fake_device().display()
    );
    let out = Command::new(HARNESS)
        .args([
            "run",
            "--exec",
            &device,
            "--protocols",
            "1,2",
            "--specs",
            "1.1.0",
        ])
        .args(["--report", &format!("html:{}", page.display()), "--quiet"])
        .arg("instance/negotiate.yaml")
        .current_dir(root())
        .output()
        .expect("harness runs");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let dom = browse(browser, &["--dump-dom"], &page);
    // The script ran, and counted the arrows it made clickable.
    let ready = dom
        .split("data-ready=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(0);
    assert!(
        ready >= 4,
        "the page's script did not run over the arrows:\n{dom}"
    );
    assert_eq!(dom.matches("data-verdict=\"failed\"").count(), 2, "{dom}");
    assert!(
        dom.contains("<a href=\"#run-0\">FAILED</a>"),
        "the matrix links each run"
    );
    assert!(dom.contains("_lembas/hello"), "an arrow for hello");
    assert!(dom.contains("class=\"failing\""), "the failing mark");
    assert!(
        dom.contains("step 4 failed: check hello.protocol"),
        "the diff beside it"
    );
    assert!(
        dom.contains("closed by fake-instance: 4400"),
        "a close shows its code"
    );
    let shot = dir.path().join("report.png");
    browse(
        browser,
        &[&format!("--screenshot={}", shot.display())],
        &page,
    );
    let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(size > 10_000, "the screenshot is {size} bytes");
}
