//! Both doubles embedded in Rust tests through their builders: a scenario's verdict, a check
//! that catches a misbehaving peer, simulated peers driven from Rust, and a verdict nobody took.

use std::time::Duration;

use fake_device::FakeDevice;
use fake_device::Verdict;
use fake_instance::FakeInstance;

/// The "Done when" of the embedding API: both doubles, one scenario, the verdict, in a few lines.
#[tokio::test]
async fn a_fake_device_passes_the_instances_scenario() -> Result<(), Box<dyn std::error::Error>> {
    let root = tempfile::tempdir()?;
    let instance = FakeInstance::builder()
        .protocol(2)
        .scenario("negotiate")?
        .start()
        .await?;
    let device = FakeDevice::builder(instance.url())
        .root(root.path())
        .start()
        .await?;
    instance.verdict().await.strict().assert_passed();
    device.verdict().await.strict().assert_passed();
    Ok(())
}

#[tokio::test]
async fn a_misbehaving_device_fails_on_the_rule_it_breaks() -> Result<(), Box<dyn std::error::Error>>
{
    let root = tempfile::tempdir()?;
    let instance = FakeInstance::builder()
        .scenario("negotiate")?
        .start()
        .await?;
    let device = FakeDevice::builder(instance.url())
        .root(root.path())
        .misbehave("device.hello.shape")?
        .start()
        .await?;
    let verdict = instance.verdict().await;
    verdict.assert_failed_on("device.hello.shape");
    assert!(
        verdict.render().contains("device.hello.shape"),
        "the report names the rule:\n{verdict}"
    );
    drop(device);
    Ok(())
}

/// With no scenario, each double is a simulated peer the test drives from Rust.
#[tokio::test]
async fn simulated_peers_are_driven_from_rust() -> Result<(), Box<dyn std::error::Error>> {
    let root = tempfile::tempdir()?;
    let instance = FakeInstance::start().await?;
    let device = FakeDevice::builder(instance.url())
        .root(root.path())
        .start()
        .await?;
    device.wait_linked(Duration::from_secs(10)).await?;
    instance.wait_for_device(Duration::from_secs(10)).await?;
    let chat = instance.open_chat().await?;
    let sent = instance.send(&chat, "hello from a Rust test").await?;
    assert!(sent["turnId"].is_string(), "a prompt has a turn id: {sent}");
    let shared = device.share_session().await?;
    assert_ne!(shared, chat, "the terminal's session is a new one");
    instance.delete_chat(&chat).await?;
    instance.verdict().await.strict().assert_passed();
    device.verdict().await.strict().assert_passed();
    Ok(())
}

/// A simulated instance's monitors judge a device that breaks a rule by itself, without any
/// scenario.
#[tokio::test]
async fn a_simulated_instances_monitors_catch_a_device() -> Result<(), Box<dyn std::error::Error>> {
    let root = tempfile::tempdir()?;
    let instance = FakeInstance::start().await?;
    let device = FakeDevice::builder(instance.url())
        .root(root.path())
        .misbehave("device.hello.shape")?
        .start()
        .await?;
    // The device's hello is judged as it arrives; a link is not needed past it.
    let _ = device.wait_linked(Duration::from_secs(2)).await;
    let verdict = instance.verdict().await;
    assert_eq!(verdict.verdict(), Verdict::Failed, "{verdict}");
    verdict.assert_failed_on("device.hello.shape");
    drop(device);
    Ok(())
}

#[tokio::test]
async fn an_unknown_scenario_says_which_there_are() {
    let error = FakeInstance::builder()
        .scenario("no-such-scenario")
        .expect_err("an unknown name is an error");
    let said = error.to_string();
    assert!(said.contains("no-such-scenario"), "{said}");
    assert!(
        said.contains("negotiate.yaml"),
        "it lists the embedded ones: {said}"
    );
}

#[tokio::test]
#[should_panic(expected = "dropped without its verdict")]
async fn a_verdict_nobody_took_fails_the_test() {
    let instance = FakeInstance::builder()
        .scenario("negotiate")
        .expect("negotiate loads")
        .start()
        .await
        .expect("it starts");
    drop(instance);
}

#[tokio::test]
async fn a_scenario_that_does_not_end_in_time_is_a_broken_run() {
    let instance = FakeInstance::builder()
        .scenario("negotiate")
        .expect("negotiate loads")
        .verdict_within(Duration::from_millis(200))
        .start()
        .await
        .expect("it starts");
    // No device dials: the first step waits 30 s, longer than the verdict may.
    let verdict = instance.verdict().await;
    assert_eq!(verdict.verdict(), Verdict::ScenarioError, "{verdict}");
    assert!(
        verdict.render().contains("did not end within"),
        "the report says what was awaited:\n{verdict}"
    );
}

/// A Rust test can hand a program in another language the control API of a double it started.
#[tokio::test]
async fn a_builder_serves_the_control_api_when_asked() -> Result<(), Box<dyn std::error::Error>> {
    let instance = FakeInstance::builder().control().start().await?;
    let (url, token) = instance.control().expect("asked for");
    let state: serde_json::Value = reqwest::Client::new()
        .get(format!("{url}/v1/state"))
        .bearer_auth(token)
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(state["double"], "fake-instance");
    assert_eq!(state["cell"]["protocol"], 2);
    assert!(
        FakeInstance::start().await?.control().is_none(),
        "only when asked"
    );
    instance.verdict().await.strict().assert_passed();
    Ok(())
}
