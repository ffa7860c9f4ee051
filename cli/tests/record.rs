//! `harness record` between fake-device and fake-instance: the session passes through unchanged,
//! and the draft recorded for fake-instance replays green against a fake device; a device that
//! then behaves otherwise fails it.

use std::time::{Duration, Instant};

use fake_device::FakeDevice;
use fake_instance::FakeInstance;
use harness::scenario::{Side, load_str};
use harness_cli::record::Recording;

/// A chat opened and a message answered, through the recorder; the drafts it wrote.
async fn record_a_session(out: &std::path::Path) -> harness_cli::record::Written {
    let instance = FakeInstance::start().await.expect("an instance");
    let recording = Recording::start(
        "127.0.0.1:0".parse().expect("an address"),
        &instance.url(),
        out,
        "recorded",
    )
    .await
    .expect("recording");
    let root = tempfile::tempdir().expect("a root");
    let device = FakeDevice::builder(recording.url())
        .root(root.path())
        .start()
        .await
        .expect("a device");
    device
        .wait_linked(Duration::from_secs(10))
        .await
        .expect("linked through the recorder");
    let chat = instance.open_chat().await.expect("a chat");
    instance
        .send(&chat, "hello through the recorder")
        .await
        .expect("sent");
    // Until the device answered the prompt.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !recording
        .messages()
        .iter()
        .any(|m| m.from_device && m.msg["result"]["stopReason"].is_string())
    {
        assert!(Instant::now() < deadline, "the turn did not end");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    device.verdict().await.strict().assert_passed();
    instance.verdict().await.strict().assert_passed();
    recording.finish().expect("the drafts are written")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_session_replays_green_against_the_double_it_was_recorded_for() {
    let out = tempfile::tempdir().expect("a directory");
    let written = record_a_session(out.path()).await;
    assert!(
        written.messages > 6,
        "the link's messages: {}",
        written.messages
    );
    let journal = std::fs::read_to_string(&written.journal).expect("the journal");
    assert!(journal.contains("\"session/prompt\""), "{journal}");
    assert!(journal.contains("\"path\":\"/.well-known/lembas.json\""));

    let text = std::fs::read_to_string(&written.instance).expect("the instance draft");
    let draft = load_str(
        &text,
        &written.instance.display().to_string(),
        Some(Side::Instance),
    )
    .unwrap_or_else(|e| panic!("the draft loads: {e}\n{text}"));
    fake_instance::check_scenario(&draft).expect("fake-instance reads all of it");
    assert!(text.contains("session/prompt"), "{text}");

    // Replayed: fake-instance plays the recorded instance, and a fake device (a fresh one, in
    // another root) behaves as the recorded one did.
    let instance = FakeInstance::builder()
        .with_scenario(draft)
        .start()
        .await
        .expect("the replay starts");
    let root = tempfile::tempdir().expect("another root");
    let device = FakeDevice::builder(instance.url())
        .root(root.path())
        .start()
        .await
        .expect("a device");
    let verdict = instance.verdict().await;
    assert!(verdict.passed(), "the replay:\n{text}\n{verdict}");
    drop(device);

    // A device that answers otherwise (here: its hello leaves out `device`) fails the replay
    // (given less time to come right, so the test does not wait the draft's 30 s).
    let impatient = text.replace("timeout: 30s", "timeout: 2s");
    let impatient = load_str(&impatient, "impatient.yaml", Some(Side::Instance)).expect("loads");
    let instance = FakeInstance::builder()
        .with_scenario(impatient)
        .start()
        .await
        .expect("the replay starts");
    let device = FakeDevice::builder(instance.url())
        .root(root.path())
        .misbehave("device.hello.shape")
        .expect("a rule")
        .start()
        .await
        .expect("a device");
    let verdict = instance.verdict().await;
    assert!(!verdict.passed(), "a different device fails the replay");
    drop(device);

    // fake-device's draft reads too.
    let text = std::fs::read_to_string(&written.device).expect("the device draft");
    let draft = load_str(
        &text,
        &written.device.display().to_string(),
        Some(Side::Device),
    )
    .unwrap_or_else(|e| panic!("the device draft loads: {e}\n{text}"));
    fake_device::check_scenario(&draft).expect("fake-device reads all of it");
    assert!(text.contains("initialize"), "{text}");
}
