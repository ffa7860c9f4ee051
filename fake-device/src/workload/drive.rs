//! One device doing its workload: once linked, its `start` actions in order, then each activity
//! again and again at its own pace, the first time after a seeded random part of its period so
//! that a fleet's devices spread out. What each took goes to the fleet's figures.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use harness::load::Recorder;
use rand::{Rng, SeedableRng};
use tokio::sync::Notify;

use crate::actions::{DeviceAction, DeviceActor};
use crate::workload::format::{Move, Workload};

/// How long an action or a terminal turn may take before it counts as an error.
const ACT_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a device waiting for its link looks again.
const LINK_POLL: Duration = Duration::from_millis(20);

/// What a device's restart move sets and wakes: the fleet stops its run and starts it again.
#[derive(Debug, Default)]
pub(crate) struct RestartAsked {
    /// Set when a restart was asked (before the wake).
    pub(crate) asked: AtomicBool,
    /// Woken to end the run.
    pub(crate) wake: Notify,
}

/// Runs `workload` on `actor`, device `number` of the fleet, drawing from `seed`, until the task
/// is aborted (the device's run ends).
pub(crate) async fn drive(
    actor: Arc<DeviceActor>,
    workload: Arc<Workload>,
    recorder: Option<Arc<Recorder>>,
    seed: u64,
    number: usize,
    restart: Arc<RestartAsked>,
) {
    let figures = Figures(recorder);
    wait_linked(&actor).await;
    for action in &workload.start {
        act(&actor, &figures, action.clone()).await;
    }
    // Each device its own draws, the same for the same seed and number.
    let mut draws = rand::rngs::StdRng::seed_from_u64(
        seed ^ (number as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
    );
    let mut activities = tokio::task::JoinSet::new();
    for activity in &workload.every {
        let Ok(step) = activity.value.move_of() else {
            continue;
        };
        let period = activity.value.every.0;
        let first = period.mul_f64(draws.random_range(0.0..1.0));
        let (actor, figures, restart) = (actor.clone(), figures.clone(), restart.clone());
        activities.spawn(async move {
            tokio::time::sleep(first).await;
            let mut ticks = tokio::time::interval(period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                if actor.lembas_link().is_none() {
                    // A person would wait for the link too: nothing is sent while it is down.
                    figures.count("workload.skipped_unlinked");
                    continue;
                }
                one_move(&actor, &figures, &step, &restart).await;
            }
        });
    }
    while activities.join_next().await.is_some() {}
}

/// The fleet's figures, when it keeps any.
#[derive(Debug, Clone)]
struct Figures(Option<Arc<Recorder>>);

impl Figures {
    fn latency(&self, name: &str, took: Duration, ok: bool) {
        if let Some(recorder) = &self.0 {
            recorder.latency(name, took, ok);
        }
    }

    fn count(&self, name: &str) {
        if let Some(recorder) = &self.0 {
            recorder.count(name, 1);
        }
    }
}

async fn wait_linked(actor: &DeviceActor) {
    while actor.lembas_link().is_none() {
        tokio::time::sleep(LINK_POLL).await;
    }
}

async fn one_move(actor: &DeviceActor, figures: &Figures, step: &Move, restart: &RestartAsked) {
    match step {
        Move::Act(action) => act(actor, figures, action.clone()).await,
        Move::Prompt(text) => prompt(actor, figures, text).await,
        Move::DropLink => {
            if let Some(peer) = actor.lembas_link() {
                figures.count("workload.drop_link");
                peer.lose_link();
            }
        }
        Move::Restart => {
            figures.count("workload.restart");
            restart.asked.store(true, Ordering::SeqCst);
            restart.wake.notify_one();
        }
    }
}

/// Does one action, timed as `act.KIND`.
async fn act(actor: &DeviceActor, figures: &Figures, action: DeviceAction) {
    let name = format!("act.{}", kind_of(&action));
    let began = Instant::now();
    let done = actor.act_now(action, ACT_TIMEOUT).await;
    if let Err(why) = &done {
        tracing::debug!("{name}: {why}");
    }
    figures.latency(&name, began.elapsed(), done.is_ok());
}

/// A person types `text` at the terminal (sharing a session first when none is): timed to the
/// turn's end as `terminal.turn`.
async fn prompt(actor: &DeviceActor, figures: &Figures, text: &str) {
    if actor.sessions.registry().terminal_session().is_none()
        && let Err(why) = actor.share_session().await
    {
        tracing::debug!("a workload's prompt could not share a session: {why}");
        figures.latency("terminal.turn", Duration::ZERO, false);
        return;
    }
    let began = Instant::now();
    let ended = match actor.terminal_turn(text).await {
        Ok((_, _, answer)) => tokio::time::timeout(ACT_TIMEOUT, answer)
            .await
            .is_ok_and(|answer| answer.is_ok()),
        Err(why) => {
            tracing::debug!("a workload's prompt: {why}");
            false
        }
    };
    figures.latency("terminal.turn", began.elapsed(), ended);
}

/// An action's key, as a workload writes it.
fn kind_of(action: &DeviceAction) -> &'static str {
    match action {
        DeviceAction::ShareSession(_) => "share_session",
        DeviceAction::TerminalPrompt(_) => "terminal_prompt",
        DeviceAction::AnswerCard(_) => "answer_card",
        DeviceAction::LeaveSession(_) => "leave_session",
        DeviceAction::DeleteSession(_) => "delete_session",
        DeviceAction::ChangeLimits(_) => "change_limits",
        DeviceAction::SetPersonalization(_) => "set_personalization",
        DeviceAction::ShowUsage(_) => "show_usage",
        DeviceAction::Http(_) => "http",
        DeviceAction::Library(_) => "library",
    }
}
