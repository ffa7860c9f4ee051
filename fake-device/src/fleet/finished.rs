//! What a fleet says as it runs and when it ends: its count, and its devices' ends added up.

use std::time::Duration;

use crate::dial::Stopped;

/// How a running fleet is getting on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetCount {
    /// How many devices this process runs.
    pub devices: usize,
    /// How many are linked now, with the instance's initialize answered.
    pub linked: usize,
    /// How many are running now (a workload's stages ramp this).
    pub running: usize,
    /// How many have stopped for good (refused, a protocol mismatch).
    pub stopped: usize,
    /// Since the fleet started.
    pub elapsed: Duration,
}

/// How a fleet ended.
#[derive(Debug, Clone, Default)]
pub struct FleetFinished {
    /// How many devices it ran.
    pub devices: usize,
    /// How many findings its devices made, together.
    pub findings: usize,
    /// How many the instance refused (401).
    pub unauthorized: usize,
    /// How many it closed with 4400.
    pub protocol_mismatch: usize,
    /// How many could not start (their state directory, say), with the first reason.
    pub not_started: usize,
    /// Why the first that could not start did not.
    pub first_error: Option<String>,
    /// The first findings (at most 20), each with its device's number.
    pub examples: Vec<(usize, harness::finding::Finding)>,
}

/// How many findings a fleet keeps to show (it counts them all).
pub const EXAMPLES_KEPT: usize = 20;

/// One device's run as it ended.
#[derive(Debug)]
pub(crate) struct DeviceEnd {
    /// Its number in the whole fleet.
    pub(crate) number: usize,
    /// How its run ended (its findings those of every run, when it was restarted).
    pub(crate) ran: Result<crate::run::Finished, crate::run::StartError>,
    /// Whether the fleet asked it to stop (a ramp down, the end): else it stopped by itself.
    pub(crate) asked_to_stop: bool,
}

/// Adds one device's end (or its task's failure) to the fleet's; gives whether the device is
/// done for good (it stopped by itself, or could not start), not to be started again.
pub(crate) fn tally(
    finished: &mut FleetFinished,
    ended: Result<DeviceEnd, tokio::task::JoinError>,
) -> bool {
    match ended {
        Ok(DeviceEnd {
            number,
            ran: Ok(device),
            asked_to_stop,
        }) => {
            finished.findings += device.findings.len();
            let room = EXAMPLES_KEPT.saturating_sub(finished.examples.len());
            finished
                .examples
                .extend(device.findings.into_iter().take(room).map(|f| (number, f)));
            match device.stopped {
                Some(Stopped::Unauthorized) => finished.unauthorized += 1,
                Some(Stopped::ProtocolMismatch) => finished.protocol_mismatch += 1,
                _ => {}
            }
            !asked_to_stop
        }
        Ok(DeviceEnd { ran: Err(e), .. }) => {
            finished.not_started += 1;
            finished.first_error.get_or_insert_with(|| e.to_string());
            true
        }
        Err(e) => {
            finished.not_started += 1;
            finished
                .first_error
                .get_or_insert_with(|| format!("a device's task ended: {e}"));
            true
        }
    }
}
