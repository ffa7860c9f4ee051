//! One explored sequence against the other double in this process, the self-test's target:
//! fake-device with the echo agent paced as a real model's short turn, one trusted root, the
//! misbehaviour under test, and restarts on the same store as `restart_peer` asks; or
//! fake-instance with the misbehaviour under test, its web UI doing the scenario's `peer.steps`.

use std::sync::Arc;
use std::time::Duration;

use fake_device::{AgentKind, FakeDevice};
use fake_instance::FakeInstance;
use harness::embed::InProcessPeer;
use harness::engine::{Arranged, Cell, PeerProcess, RunOutcome};
use harness::journal::Entry;
use harness::scenario::Scenario;

use crate::Error;

/// How long either double waits for the other before it gives up on a step.
const PATIENCE: Duration = Duration::from_secs(5);

/// Runs `scenario` with fake-instance against fake-device breaking `misbehave` (when given),
/// its turns paced by `step_delay`: the instance's outcome and last messages.
pub async fn against_device(
    scenario: &Scenario,
    cell: Cell,
    misbehave: Option<&str>,
    step_delay: Duration,
) -> Result<(RunOutcome, Vec<Entry>), Error> {
    let peer = InProcessPeer::new();
    let process: Arc<dyn PeerProcess> = peer.clone();
    let instance = FakeInstance::builder()
        .with_scenario(scenario.clone())
        .cell(cell)
        .patience(PATIENCE)
        .arranged(Arranged::Everything)
        .peer_process(process)
        // A misbehaving device's run is decided by its rule's first finding.
        .end_at_finding(misbehave.map(|m| harness::rules::rule_of(m).to_string()))
        .start()
        .await?;
    let root = tempfile::tempdir().map_err(Error::Root)?;
    let device = FakeDevice::builder(instance.url())
        .cell(cell)
        .patience(PATIENCE)
        .restarted_by(peer)
        .own_runtime(true)
        .root(root.path())
        .agent(AgentKind::Echo)
        .step_delay(step_delay);
    let device = match misbehave {
        Some(m) => device.misbehave(m),
        None => Ok(device),
    };
    let started = match device {
        Ok(device) => device.start().await.map_err(Error::from),
        Err(e) => Err(Error::from(e)),
    };
    let device = match started {
        Ok(device) => device,
        Err(e) => {
            instance.dismiss();
            return Err(e);
        }
    };
    let report = instance.verdict().await;
    let _ = device.verdict().await;
    Ok(report.into_parts())
}

/// Runs `scenario` with fake-device against fake-instance breaking `misbehave` (when given),
/// whose web UI does the scenario's `peer.steps`: the device's outcome and last messages.
pub async fn against_instance(
    scenario: &Scenario,
    cell: Cell,
    misbehave: Option<&str>,
) -> Result<(RunOutcome, Vec<Entry>), Error> {
    let peer = InProcessPeer::new();
    let process: Arc<dyn PeerProcess> = peer.clone();
    let instance = FakeInstance::builder()
        .cell(cell)
        .patience(PATIENCE)
        .restarted_by(peer);
    let instance = match misbehave {
        Some(m) => instance.misbehave(m)?,
        None => instance,
    };
    let instance = instance.as_peer_of(scenario)?.start().await?;
    let root = tempfile::tempdir().map_err(Error::Root)?;
    let started = FakeDevice::builder(instance.url())
        .with_scenario(scenario.clone())
        .cell(cell)
        .root(root.path())
        .patience(PATIENCE)
        .arranged(Arranged::Everything)
        .peer_process(process)
        // A misbehaving instance's run is decided by its rule's first finding.
        .end_at_finding(misbehave.map(|m| harness::rules::rule_of(m).to_string()))
        .start()
        .await;
    let device = match started {
        Ok(device) => device,
        Err(e) => {
            instance.dismiss();
            return Err(e.into());
        }
    };
    let report = device.verdict().await;
    let _ = instance.verdict().await;
    Ok(report.into_parts())
}
