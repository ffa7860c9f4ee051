//! One device of a fleet: its options, and its run, started again when its workload restarts
//! it, with its workload driven while it runs.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, watch};

use crate::actions::DeviceActor;
use crate::fleet::finished::DeviceEnd;
use crate::fleet::shard::{FleetDevice, INDEX_PLACEHOLDER};
use crate::run::{Options, run_started};
use crate::workload::{RestartAsked, Workload};

/// A fleet's workload and the seed of its draws.
#[derive(Debug, Clone)]
pub struct FleetPlan {
    /// What each device does, and how many run when.
    pub workload: Arc<Workload>,
    /// The seed of its draws.
    pub seed: u64,
    /// This process's part of the whole fleet (1.0, or a shard's devices over the fleet's):
    /// a stage's `devices` counts the whole fleet, and each shard runs its part of them.
    pub part: f64,
}

/// The options of one device of the fleet: the template's, with its token, state directory and
/// journal.
pub(crate) fn device_options(
    template: &Options,
    device: &FleetDevice,
    state_root: &std::path::Path,
) -> Options {
    let mut options = template.clone();
    // Nothing reads a fleet device's messages: it keeps none.
    options.lean = true;
    options.token = device.token.clone();
    options.state_dir = Some(state_root.join(format!("device-{}", device.number)));
    options.journal = template.journal.as_ref().map(|path| {
        PathBuf::from(
            path.to_string_lossy()
                .replace(INDEX_PLACEHOLDER, &device.number.to_string()),
        )
    });
    options
}

/// Everything one device of the fleet runs with.
pub(crate) struct DeviceRun {
    /// Its place in the fleet's lists.
    pub(crate) slot: usize,
    /// Its number in the whole fleet.
    pub(crate) number: usize,
    /// Its options.
    pub(crate) options: Options,
    /// Where its hands are kept while it runs (the fleet counts the linked from them).
    pub(crate) actors: Arc<Vec<Mutex<Option<Arc<DeviceActor>>>>>,
    /// Its place in the ramp of devices setting up, given back once linked.
    pub(crate) permit: OwnedSemaphorePermit,
    /// Set when the fleet stops this device (a stage ramping down).
    pub(crate) stop: watch::Receiver<bool>,
    /// Set when the fleet stops every device.
    pub(crate) fleet_stop: watch::Receiver<bool>,
    /// Its workload, when the fleet has one.
    pub(crate) plan: Option<FleetPlan>,
}

/// How long one device's set-up may hold its place in the ramp: a device the instance does not
/// initialize lets the next one go after this.
const SET_UP_HOLD: Duration = Duration::from_secs(5);

/// How often a device being set up looks whether it is linked yet.
const LINK_POLL: Duration = Duration::from_millis(10);

/// How many findings a restarted device carries from its earlier runs.
const FINDINGS_CARRIED: usize = 1000;

/// Runs one device until the fleet stops it or it stops by itself, starting it again each
/// time its workload restarts it.
pub(crate) async fn run_device(run: DeviceRun) -> DeviceEnd {
    let DeviceRun {
        slot,
        number,
        options,
        actors,
        permit,
        stop,
        fleet_stop,
        plan,
    } = run;
    let mut permit = Some(permit);
    let mut earlier_findings = Vec::new();
    loop {
        let restart = Arc::new(RestartAsked::default());
        let driver: Arc<Mutex<Option<tokio::task::JoinHandle<()>>>> = Arc::default();
        let set_up = {
            let (actors, driver, restart) = (actors.clone(), driver.clone(), restart.clone());
            let (plan, recorder) = (plan.clone(), options.recorder.clone());
            move |live: crate::run::Started| {
                let Some(actor) = live.actor else { return };
                if let Ok(mut kept) = actors[slot].lock() {
                    *kept = Some(actor.clone());
                }
                if let Some(plan) = plan
                    && let Ok(mut driver) = driver.lock()
                {
                    *driver = Some(tokio::spawn(crate::workload::drive(
                        actor,
                        plan.workload,
                        recorder,
                        plan.seed,
                        number,
                        restart,
                    )));
                }
            }
        };
        // The device gives its place in the ramp back once linked (or after the hold), while
        // it goes on running; a restarted device does not queue again.
        let watcher = permit.take().map(|permit| {
            let actors = actors.clone();
            tokio::spawn(async move {
                let deadline = Instant::now() + SET_UP_HOLD;
                while Instant::now() < deadline && !linked(&actors[slot]) {
                    tokio::time::sleep(LINK_POLL).await;
                }
                drop(permit);
            })
        });
        let shutdown = {
            let (mut stop, mut fleet_stop, restart) =
                (stop.clone(), fleet_stop.clone(), restart.clone());
            async move {
                tokio::select! {
                    _ = stop.wait_for(|stop| *stop) => {}
                    _ = fleet_stop.wait_for(|stop| *stop) => {}
                    () = restart.wake.notified() => {}
                }
            }
        };
        let ran = Box::pin(run_started(options.clone(), None, set_up, shutdown)).await;
        // A device that ended while setting up gives its place back too.
        if let Some(watcher) = watcher {
            watcher.abort();
        }
        if let Some(driver) = driver.lock().ok().and_then(|mut d| d.take()) {
            driver.abort();
        }
        if let Ok(mut kept) = actors[slot].lock() {
            *kept = None;
        }
        let asked_to_stop = *stop.borrow() || *fleet_stop.borrow();
        let restarting = restart.asked.load(Ordering::SeqCst) && !asked_to_stop;
        match ran {
            Ok(mut finished) if restarting => {
                let room = FINDINGS_CARRIED.saturating_sub(earlier_findings.len());
                earlier_findings.extend(finished.findings.drain(..).take(room));
            }
            Ok(mut finished) => {
                earlier_findings.append(&mut finished.findings);
                finished.findings = earlier_findings;
                return DeviceEnd {
                    number,
                    ran: Ok(finished),
                    asked_to_stop,
                };
            }
            Err(e) => {
                return DeviceEnd {
                    number,
                    ran: Err(e),
                    asked_to_stop,
                };
            }
        }
    }
}

/// Whether the device kept here is linked.
pub(crate) fn linked(kept: &Mutex<Option<Arc<DeviceActor>>>) -> bool {
    kept.lock()
        .ok()
        .and_then(|a| a.as_ref().map(|a| a.lembas_link().is_some()))
        .unwrap_or(false)
}
