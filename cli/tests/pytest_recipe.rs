//! The pytest recipe in `docs/recipes/pytest` runs: its fixture starts fake-device against a
//! stand-in web server, maps the web UI's actions to Python callables, and asserts verdicts.
//! Without pytest the test says so and passes, unless `LEMBAS_REQUIRE_PYTEST` is set (CI sets
//! it, and installs pytest).

mod common;

use std::process::Command;

use common::{binary, root};

#[test]
fn the_pytest_fixture_drives_fake_device_against_a_stand_in_server() {
    let has_pytest = Command::new("python3")
        .args(["-c", "import pytest"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_pytest {
        assert!(
            std::env::var_os("LEMBAS_REQUIRE_PYTEST").is_none(),
            "LEMBAS_REQUIRE_PYTEST is set, and python3 cannot import pytest"
        );
        eprintln!("no pytest on this machine: the recipe's test is skipped");
        return;
    }
    let out = Command::new("python3")
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .current_dir(root().join("docs/recipes/pytest"))
        .env("LEMBAS_FAKE_DEVICE", binary("fake-device"))
        .env("LEMBAS_FAKE_INSTANCE", binary("fake-instance"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("4 passed"), "{text}");
}
