//! A fleet: many simulated devices in one process (`fake-device --fleet N`), each with its own
//! token, state directory and link, and the usual default behaviour, so a web server's load test
//! need not start a process a device. Devices are set up a few dozen at a time (a ramp), so ten
//! thousand of them do not all read discovery in the same millisecond; a workload's stages
//! start and stop them over time, and its activities drive each one.
//!
//! The parts: `shard` says which devices and tokens, `device` runs one device, `finished` adds
//! their ends up.

mod device;
mod finished;
mod shard;

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use crate::run::Options;
pub use device::FleetPlan;
use device::{DeviceRun, device_options, linked, run_device};
pub use finished::{FleetCount, FleetFinished};
pub use shard::{FleetDevice, FleetTokens, INDEX_PLACEHOLDER, Shard};

/// How many devices may be setting up (reading discovery, dialling, initializing) at once.
const RAMP: usize = 64;

/// Where each device of a fleet stands.
enum Slot {
    /// Not running; may be started.
    Idle,
    /// Running; sending `true` stops it.
    Running(watch::Sender<bool>),
    /// Asked to stop, not ended yet.
    Stopping,
    /// Stopped by itself, or could not start: not started again.
    Done,
}

/// Runs `devices`, each as `template` with its own token and a state directory
/// `state_root/device-{number}` (and, when the template's journal path holds `{i}`, a journal
/// of its own; with no root, the empty folder `state_root/root` is theirs), until `shutdown` or
/// until every device has stopped by itself. `report` hears the count every `report_every`, and
/// once more at the end.
pub async fn run_fleet(
    template: Options,
    devices: Vec<FleetDevice>,
    state_root: PathBuf,
    report: impl Fn(FleetCount),
    report_every: Duration,
    shutdown: impl Future<Output = ()>,
) -> FleetFinished {
    run_fleet_plan(
        template,
        devices,
        state_root,
        None,
        report,
        report_every,
        shutdown,
    )
    .await
}

/// [`run_fleet`] with a workload: its stages decide how many devices run when (the run ends
/// with the last stage), and its activities drive each device.
pub async fn run_fleet_plan(
    template: Options,
    devices: Vec<FleetDevice>,
    state_root: PathBuf,
    plan: Option<FleetPlan>,
    report: impl Fn(FleetCount),
    report_every: Duration,
    shutdown: impl Future<Output = ()>,
) -> FleetFinished {
    let started = Instant::now();
    let total = devices.len();
    // Without a root a device has nowhere to open a chat: they share one empty folder.
    let mut template = template;
    if template.roots.is_empty() {
        let root = state_root.join("root");
        match std::fs::create_dir_all(&root) {
            Ok(()) => template.roots.push(root.display().to_string()),
            Err(e) => tracing::warn!("cannot make the fleet's root {}: {e}", root.display()),
        }
    }
    // A shard may hold no device: there is nothing to wait for.
    if total == 0 {
        return FleetFinished::default();
    }
    let stages = plan
        .as_ref()
        .map(|p| (p.workload.stage_list(), p.part))
        .filter(|(s, _)| !s.is_empty());
    let target_at = |elapsed: Duration| match &stages {
        Some((stages, part)) => crate::workload::target(stages, elapsed)
            .map(|t| ((t as f64 * part).round() as usize).min(total)),
        None => Some(total),
    };
    let (fleet_stop, fleet_stopping) = watch::channel(false);
    let actors: Arc<Vec<Mutex<Option<Arc<crate::actions::DeviceActor>>>>> =
        Arc::new((0..total).map(|_| Mutex::new(None)).collect());
    let ramp = Arc::new(Semaphore::new(RAMP));
    let mut slots: Vec<Slot> = (0..total).map(|_| Slot::Idle).collect();
    let mut running = JoinSet::new();
    let mut slot_of_task = HashMap::new();
    let mut ended = 0;
    let mut target = target_at(Duration::ZERO).unwrap_or(0);
    let count = |slots: &[Slot], ended: usize| FleetCount {
        devices: total,
        linked: actors.iter().filter(|a| linked(a)).count(),
        running: slots
            .iter()
            .filter(|s| matches!(s, Slot::Running(_) | Slot::Stopping))
            .count(),
        stopped: ended,
        elapsed: started.elapsed(),
    };
    let mut finished = FleetFinished {
        devices: total,
        ..FleetFinished::default()
    };
    let recorder = template.recorder.clone();
    if let Some(recorder) = &recorder {
        // Said even when none is found, so a threshold on it reads 0, not "never measured".
        recorder.count("findings", 0);
    }
    let figure_levels = |now: &FleetCount| {
        if let Some(recorder) = &recorder {
            recorder.gauge("devices.linked", now.linked as u64);
            recorder.gauge("devices.running", now.running as u64);
        }
    };
    tokio::pin!(shutdown);
    let mut ticks = tokio::time::interval(report_every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let active = slots
            .iter()
            .filter(|s| matches!(s, Slot::Running(_)))
            .count();
        let may_start = active < target && slots.iter().any(|s| matches!(s, Slot::Idle));
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            _ = ticks.tick() => {
                match target_at(started.elapsed()) {
                    Some(now) => target = now,
                    None => break,
                }
                stop_beyond(&mut slots, target);
                let now = count(&slots, ended);
                figure_levels(&now);
                report(now);
            }
            permit = ramp.clone().acquire_owned(), if may_start => {
                let Ok(permit) = permit else { break };
                let Some(slot) = slots.iter().position(|s| matches!(s, Slot::Idle)) else {
                    continue;
                };
                let (stop, stopping) = watch::channel(false);
                slots[slot] = Slot::Running(stop);
                let run = DeviceRun {
                    slot,
                    number: devices[slot].number,
                    options: device_options(&template, &devices[slot], &state_root),
                    actors: actors.clone(),
                    permit,
                    stop: stopping,
                    fleet_stop: fleet_stopping.clone(),
                    plan: plan.clone(),
                };
                let task = running.spawn(run_device(run));
                slot_of_task.insert(task.id(), slot);
            }
            Some(joined) = running.join_next_with_id(), if !running.is_empty() => {
                let (task, end) = match joined {
                    Ok((task, end)) => (task, Ok(end)),
                    Err(e) => (e.id(), Err(e)),
                };
                let for_good = finished::tally(&mut finished, end);
                if let Some(slot) = slot_of_task.remove(&task) {
                    slots[slot] = if for_good {
                        ended += 1;
                        Slot::Done
                    } else {
                        Slot::Idle
                    };
                }
                if slots.iter().all(|s| matches!(s, Slot::Done)) {
                    break;
                }
            }
        }
    }
    let _ = fleet_stop.send(true);
    while let Some(joined) = running.join_next_with_id().await {
        let end = joined.map(|(_, end)| end);
        if finished::tally(&mut finished, end) {
            ended += 1;
        }
    }
    // Every device has ended: a link still closing is not linked any more.
    let last = FleetCount {
        linked: 0,
        running: 0,
        ..count(&slots, ended)
    };
    figure_levels(&last);
    report(last);
    finished
}

/// Stops the newest running devices beyond `target` (a stage ramping down).
fn stop_beyond(slots: &mut [Slot], target: usize) {
    let mut active = slots
        .iter()
        .filter(|s| matches!(s, Slot::Running(_)))
        .count();
    for slot in slots.iter_mut().rev() {
        if active <= target {
            break;
        }
        if let Slot::Running(stop) = slot {
            let _ = stop.send(true);
            *slot = Slot::Stopping;
            active -= 1;
        }
    }
}
