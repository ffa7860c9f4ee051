//! Both doubles embedded as a user's Rust test embeds them, with this crate depending on
//! `fake-instance`, `fake-device` and tokio alone: every type the test meets (handles, builders,
//! reports, verdicts, findings, errors) is named through the double's crate. A type missing
//! from a double's re-exports stops this file compiling; a double that misjudges the other
//! fails its assertions.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use fake_device::{DeviceBuilder, FakeDevice};
use fake_instance::{FakeInstance, InstanceBuilder};

/// How long a simulated peer may take to link.
const LINK_WITHIN: Duration = Duration::from_secs(10);

/// A fresh directory for a device's root (no tempfile crate here: an embedder may have none),
/// removed when dropped.
struct Root(PathBuf);

impl Root {
    fn new() -> Root {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "embed-check-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&path).expect("a root directory");
        Root(path)
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A device pointed at `instance`, in a root of its own.
fn device_for(instance: &FakeInstance, root: &Root) -> DeviceBuilder {
    FakeDevice::builder(instance.url()).root(&root.0)
}

#[tokio::test]
async fn an_instance_scenario_passes_against_a_simulated_device()
-> Result<(), Box<dyn std::error::Error>> {
    let root = Root::new();
    let builder: InstanceBuilder = FakeInstance::builder().protocol(2).scenario("negotiate")?;
    let instance = builder.start().await?;
    let device = device_for(&instance, &root).start().await?;
    let report: fake_instance::RunReport = instance.verdict().await.strict();
    assert_eq!(report.verdict(), fake_instance::Verdict::Passed, "{report}");
    let findings: &[fake_instance::Finding] = report.findings();
    assert!(findings.is_empty(), "{report}");
    let device_report: fake_device::RunReport = device.verdict().await.strict();
    assert_eq!(
        device_report.verdict(),
        fake_device::Verdict::Passed,
        "{device_report}"
    );
    Ok(())
}

#[tokio::test]
async fn a_device_scenario_passes_against_a_simulated_instance()
-> Result<(), Box<dyn std::error::Error>> {
    let root = Root::new();
    let instance = FakeInstance::start().await?;
    let device = device_for(&instance, &root)
        .scenario("negotiate")?
        .start()
        .await?;
    let report: fake_device::RunReport = device.verdict().await.strict();
    assert!(report.passed(), "{report}");
    // The device really ran the scenario: its steps were judged, and none failed (a step of
    // another protocol's cell is skipped).
    let outcome: &fake_device::RunOutcome = report.outcome();
    let status = |wanted: fake_device::StepStatus| {
        outcome.steps.iter().filter(|s| s.status == wanted).count()
    };
    assert!(status(fake_device::StepStatus::Passed) > 0, "{report}");
    assert_eq!(status(fake_device::StepStatus::Failed), 0, "{report}");
    // The scenario speaks protocol 1 on purpose on a link, which a simulated instance's monitors
    // flag as the device's fault: its verdict is not this test's to take.
    instance.dismiss();
    Ok(())
}

#[tokio::test]
async fn the_instance_finds_the_rule_a_misbehaving_device_breaks()
-> Result<(), Box<dyn std::error::Error>> {
    let root = Root::new();
    let instance = FakeInstance::builder()
        .scenario("negotiate")?
        .start()
        .await?;
    let device = device_for(&instance, &root)
        .misbehave("device.hello.shape")?
        .start()
        .await?;
    let report = instance.verdict().await;
    assert_eq!(report.verdict(), fake_instance::Verdict::Failed, "{report}");
    assert!(
        report
            .findings()
            .iter()
            .any(|f: &fake_instance::Finding| f.rule == "device.hello.shape"),
        "the finding names the rule:\n{report}"
    );
    assert_eq!(report.broken_rules(), ["device.hello.shape"], "{report}");
    drop(device);
    Ok(())
}

#[tokio::test]
async fn simulated_peers_act_for_the_test() -> Result<(), Box<dyn std::error::Error>> {
    let root = Root::new();
    let instance = FakeInstance::start().await?;
    let device = device_for(&instance, &root).start().await?;
    let linked: Result<(), fake_device::ActError> = device.wait_linked(LINK_WITHIN).await;
    linked?;
    let seen: Result<(), fake_instance::ActError> = instance.wait_for_device(LINK_WITHIN).await;
    seen?;
    let chat = instance.open_chat().await?;
    let sent = instance.send(&chat, "hello from an embedder").await?;
    assert!(sent["turnId"].is_string(), "a prompt has a turn id: {sent}");
    instance.verdict().await.strict().assert_passed();
    device.verdict().await.strict().assert_passed();
    Ok(())
}

#[tokio::test]
async fn errors_are_the_doubles_own_types() {
    let Err(unknown): Result<InstanceBuilder, fake_instance::LoadError> =
        FakeInstance::builder().scenario("no-such-scenario")
    else {
        panic!("an unknown scenario is an error");
    };
    assert!(
        unknown.to_string().contains("no-such-scenario"),
        "{unknown}"
    );
    let Err(refused): Result<DeviceBuilder, fake_device::StartError> =
        FakeDevice::builder("http://127.0.0.1:9").misbehave("no.such.rule")
    else {
        panic!("an unknown misbehaviour is an error");
    };
    assert!(
        refused
            .to_string()
            .starts_with("`no.such.rule` is not a misbehaviour of this double; it knows: "),
        "{refused}"
    );
    let typed: fake_device::UnknownMisbehaviour = fake_device::Misbehaviours::parse(
        &["no.such.rule".to_string()],
        fake_device::Binds::Device,
    )
    .expect_err("the same check, typed");
    assert_eq!(typed.id, "no.such.rule");
    assert!(typed.known.iter().any(|id| id == "device.hello.shape"));
}
