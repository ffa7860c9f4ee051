//! A fleet: many simulated devices in one process (`fake-device --fleet N`), each with its own
//! token, state directory and link, and the usual default behaviour, so a web server's load test
//! need not start a process a device. Devices are set up a few dozen at a time (a ramp), so ten
//! thousand of them do not all read discovery in the same millisecond.

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use crate::actions::DeviceActor;
use crate::dial::Stopped;
use crate::run::{Options, run_started};

/// What `{i}` in a token pattern (and a per-device journal's path) stands for: the device's
/// number, from 1.
pub const INDEX_PLACEHOLDER: &str = "{i}";

/// How many devices may be setting up (reading discovery, dialling, initializing) at once.
const RAMP: usize = 64;

/// How long one device's set-up may hold its place in the ramp: a device the instance does not
/// initialize lets the next one go after this.
const SET_UP_HOLD: Duration = Duration::from_secs(5);

/// How often a device being set up looks whether it is linked yet.
const LINK_POLL: Duration = Duration::from_millis(10);

/// One machine's part of a fleet spread over several: the `index`-th of `of` equal slices of the
/// token list (`--shard 2/4`), counted from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// Which slice, from 1.
    pub index: usize,
    /// How many slices.
    pub of: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || format!("`{text}` is not a shard like 2/4 (the 2nd of 4, counted from 1)");
        let (index, of) = text.split_once('/').ok_or_else(bad)?;
        let index: usize = index.trim().parse().map_err(|_| bad())?;
        let of: usize = of.trim().parse().map_err(|_| bad())?;
        if of == 0 || index == 0 || index > of {
            return Err(bad());
        }
        Ok(Shard { index, of })
    }
}

impl Shard {
    /// The whole fleet on one machine.
    pub const WHOLE: Shard = Shard { index: 1, of: 1 };

    /// The range of `total` devices (0-based, end excluded) this shard runs: contiguous slices
    /// whose sizes differ by at most one, so `n` machines given the same file and `1/n` … `n/n`
    /// run every device exactly once.
    pub fn range(self, total: usize) -> std::ops::Range<usize> {
        let start = total * (self.index - 1) / self.of;
        let end = total * self.index / self.of;
        start..end
    }
}

/// Where a fleet's tokens come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FleetTokens {
    /// `count` tokens made from `pattern`, `{i}` replaced by 1 … `count` (`tok-{i}`).
    Pattern {
        /// The pattern, holding `{i}`.
        pattern: String,
        /// How many devices.
        count: usize,
    },
    /// The tokens of a file, one a line (`--tokens FILE`).
    List(Vec<String>),
}

impl FleetTokens {
    /// How many devices the whole fleet has.
    pub fn count(&self) -> usize {
        match self {
            FleetTokens::Pattern { count, .. } => *count,
            FleetTokens::List(tokens) => tokens.len(),
        }
    }

    /// The devices `shard` runs: each one's number in the whole fleet (from 1) and its token.
    pub fn devices(&self, shard: Shard) -> Vec<FleetDevice> {
        shard
            .range(self.count())
            .map(|at| FleetDevice {
                number: at + 1,
                token: match self {
                    FleetTokens::Pattern { pattern, .. } => {
                        pattern.replace(INDEX_PLACEHOLDER, &(at + 1).to_string())
                    }
                    FleetTokens::List(tokens) => tokens[at].clone(),
                },
            })
            .collect()
    }
}

/// One device of a fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct FleetDevice {
    /// Its number in the whole fleet, from 1 (its state directory is `device-{number}`).
    pub number: usize,
    pub token: String,
}

/// How a running fleet is getting on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetCount {
    /// How many devices this process runs.
    pub devices: usize,
    /// How many are linked now, with the instance's initialize answered.
    pub linked: usize,
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

/// Runs `devices`, each as `template` with its own token and a state directory
/// `state_root/device-{number}` (and, when the template's journal path holds `{i}`, a journal
/// of its own; with no root, the empty folder `state_root/root` is theirs), until `shutdown` or until every device has stopped by itself. `report` hears
/// the count every `report_every`, and once more at the end.
pub async fn run_fleet(
    template: Options,
    devices: Vec<FleetDevice>,
    state_root: PathBuf,
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
    let (stop, stopping) = watch::channel(false);
    let actors: Arc<Vec<OnceLock<Arc<DeviceActor>>>> =
        Arc::new((0..total).map(|_| OnceLock::new()).collect());
    let ramp = Arc::new(Semaphore::new(RAMP));
    let mut running = JoinSet::new();
    let mut ended = 0;
    let count = |ended: usize| FleetCount {
        devices: total,
        linked: actors
            .iter()
            .filter_map(OnceLock::get)
            .filter(|a| a.lembas_link().is_some())
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
    let figure_levels = |now: &FleetCount, launched: usize| {
        if let Some(recorder) = &recorder {
            recorder.gauge("devices.linked", now.linked as u64);
            recorder.gauge("devices.running", (launched - now.stopped) as u64);
        }
    };
    tokio::pin!(shutdown);
    let mut ticks = tokio::time::interval(report_every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut waiting = devices.into_iter().enumerate();
    let mut launched = 0;
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            _ = ticks.tick() => {
                let now = count(ended);
                figure_levels(&now, launched);
                report(now);
            }
            permit = ramp.clone().acquire_owned(), if launched < total => {
                let Ok(permit) = permit else { break };
                let Some((slot, device)) = waiting.next() else { break };
                launched += 1;
                let options = device_options(&template, &device, &state_root);
                let number = device.number;
                let (actors, mut stopping) = (actors.clone(), stopping.clone());
                running.spawn(async move {
                    let keep = actors.clone();
                    let set_up = move |live: crate::run::Started| {
                        if let Some(actor) = live.actor {
                            let _ = keep[slot].set(actor);
                        }
                    };
                    // The device gives its place in the ramp back once linked (or after the
                    // hold), while it goes on running.
                    let watcher = tokio::spawn(async move {
                        let deadline = Instant::now() + SET_UP_HOLD;
                        while Instant::now() < deadline
                            && actors[slot].get().is_none_or(|a| a.lembas_link().is_none())
                        {
                            tokio::time::sleep(LINK_POLL).await;
                        }
                        drop(permit);
                    });
                    let shutdown = async move {
                        let _ = stopping.wait_for(|stop| *stop).await;
                    };
                    let ran = Box::pin(run_started(options, None, set_up, shutdown)).await;
                    // A device that ended while setting up gives its place back too.
                    watcher.abort();
                    (number, ran)
                });
            }
            Some(device) = running.join_next(), if !running.is_empty() => {
                ended += 1;
                tally(&mut finished, device);
                if launched == total && running.is_empty() {
                    break;
                }
            }
        }
    }
    let _ = stop.send(true);
    while let Some(device) = running.join_next().await {
        ended += 1;
        tally(&mut finished, device);
    }
    // Every device has ended: a link still closing is not linked any more.
    let last = FleetCount {
        linked: 0,
        ..count(ended)
    };
    figure_levels(&last, launched);
    report(last);
    finished
}

/// Adds one device's end to the fleet's.
fn tally(
    finished: &mut FleetFinished,
    ended: Result<
        (usize, Result<crate::run::Finished, crate::run::StartError>),
        tokio::task::JoinError,
    >,
) {
    match ended {
        Ok((number, Ok(device))) => {
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
        }
        Ok((_, Err(e))) => {
            finished.not_started += 1;
            finished.first_error.get_or_insert_with(|| e.to_string());
        }
        Err(e) => {
            finished.not_started += 1;
            finished
                .first_error
                .get_or_insert_with(|| format!("a device's task ended: {e}"));
        }
    }
}

/// The options of one device of the fleet: the template's, with its token, state directory and
/// journal.
fn device_options(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_every_device_once() {
        for total in [0, 1, 7, 10, 10_001] {
            for of in 1..=5 {
                let mut covered = Vec::new();
                for index in 1..=of {
                    covered.extend(Shard { index, of }.range(total));
                }
                assert_eq!(covered, (0..total).collect::<Vec<_>>(), "{total} in {of}");
            }
        }
    }

    #[test]
    fn a_shard_reads_k_of_n_from_one() {
        assert_eq!("2/4".parse(), Ok(Shard { index: 2, of: 4 }));
        for bad in ["0/4", "5/4", "1/0", "2", "a/b", "-1/2"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_pattern_numbers_its_tokens_from_one_and_a_shard_keeps_the_numbers() {
        let tokens = FleetTokens::Pattern {
            pattern: "tok-{i}".into(),
            count: 4,
        };
        let second_half = tokens.devices(Shard { index: 2, of: 2 });
        assert_eq!(
            second_half,
            vec![
                FleetDevice {
                    number: 3,
                    token: "tok-3".into()
                },
                FleetDevice {
                    number: 4,
                    token: "tok-4".into()
                },
            ]
        );
        let list = FleetTokens::List(vec!["a".into(), "b".into(), "c".into()]);
        let first = list.devices(Shard { index: 1, of: 2 });
        assert_eq!(
            first.iter().map(|d| d.token.as_str()).collect::<Vec<_>>(),
            ["a"]
        );
    }
}
