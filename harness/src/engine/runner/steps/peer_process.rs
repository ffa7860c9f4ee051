//! The steps about the peer's process, when the double started it (`expect_exit`,
//! `expect_output`, `restart_peer`), and how a wait that the process's end cut short fails.

use std::future::Future;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::Outcome;
use crate::engine::runner::Runner;
use crate::engine::verdict::Failure;
use crate::scenario::Dur;
use crate::scenario::model::*;

impl Runner {
    /// Waits for `wait`, unless the peer's process ends first (a CLI that could not start):
    /// then gives how it ended, and the step need not wait out its deadline.
    pub(super) async fn unless_exited<T>(
        &self,
        wait: impl Future<Output = T>,
        deadline: Instant,
    ) -> Result<T, crate::process::Exited> {
        let Some(process) = &self.process else {
            return Ok(wait.await);
        };
        tokio::select! {
            // What the step waited for wins when both are ready by the time this task runs (a
            // link that opened just before its process ended on a 4400): select! would
            // otherwise pick one at random.
            biased;
            value = wait => Ok(value),
            Some(exit) = process.wait_exit(deadline.into_std()) => Err(exit),
        }
    }

    /// The failure of a step whose wait the peer's process ended.
    pub(super) fn exited(
        &self,
        rule: &Option<String>,
        exit: crate::process::Exited,
        awaited: String,
    ) -> Outcome {
        let output = self
            .process
            .as_ref()
            .and_then(|p| p.output())
            .map(|o| output_tail(&o).to_string())
            .unwrap_or_default();
        // The shell's own codes for a command it could not find or run: the test's command
        // line is wrong, and no rule of the peer's is broken.
        if matches!(exit.code, Some(126 | 127)) {
            return Outcome::Error(format!(
                "the command that starts the peer could not run ({exit}: not found or not executable); its output: {output}"
            ));
        }
        Outcome::failed(Failure {
            rule: rule.clone(),
            summary: format!("the peer's process ended ({exit}) while the step waited"),
            awaited: Some(awaited),
            nearest: self
                .process
                .as_ref()
                .and_then(|p| p.output())
                .map(|o| output_tail(&o)),
            ..Failure::default()
        })
    }

    pub(super) async fn expect_exit(&self, e: &ExpectExitStep) -> Outcome {
        let Some(process) = &self.process else {
            return Outcome::NotApplicable(crate::engine::process::NO_PROCESS.into());
        };
        let within = self.timeout(e.within);
        let fail = |summary: String| {
            Outcome::failed(Failure {
                rule: e.rule.clone(),
                summary,
                awaited: Some(format!("the process to exit within {}", Dur(within))),
                expected: e.code.map(|c| json!({ "exit code": c })),
                nearest: process.output().map(|o| output_tail(&o)),
                diff: None,
            })
        };
        match process
            .wait_exit((Instant::now() + within).into_std())
            .await
        {
            None => fail(format!("the process still ran after {}", Dur(within))),
            Some(exit) => match e.code {
                Some(code) if exit.code != Some(code) => fail(format!(
                    "the process ended with {exit}, not exit code {code}"
                )),
                _ => Outcome::Passed,
            },
        }
    }

    pub(super) async fn expect_output(&self, e: &ExpectOutputStep) -> Outcome {
        let Some(output) = self.process.as_ref().and_then(|p| p.output()) else {
            return Outcome::NotApplicable(crate::engine::process::NO_PROCESS.into());
        };
        let pattern = match regex::Regex::new(&e.pattern) {
            Ok(p) => p,
            Err(err) => return Outcome::Error(format!("`{}` is not a regex: {err}", e.pattern)),
        };
        let within = self.timeout(e.within);
        let deadline = Instant::now() + within;
        let after = self.output_seen.load(std::sync::atomic::Ordering::SeqCst);
        let matches = |line: &crate::process::OutputLine| {
            e.stream.is_none_or(|s| s == line.stream) && pattern.is_match(&line.text)
        };
        loop {
            // Registered before looking, so a line pushed in between wakes the wait.
            let changed = output.changed();
            if let Some(line) = output.find(after, matches) {
                self.output_seen
                    .fetch_max(line.seq, std::sync::atomic::Ordering::SeqCst);
                return Outcome::Passed;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                break;
            }
        }
        let stream = e
            .stream
            .map(|s| s.to_string())
            .unwrap_or("stdout or stderr".into());
        Outcome::failed(Failure {
            rule: e.rule.clone(),
            summary: format!("no line of {stream} matched `{}`", e.pattern),
            awaited: Some(format!(
                "a line matching `{}` within {}",
                e.pattern,
                Dur(within)
            )),
            expected: Some(json!({ "pattern": e.pattern, "stream": stream })),
            nearest: Some(output_tail(&output)),
            diff: None,
        })
    }

    pub(super) async fn restart_peer(&self) -> Outcome {
        let Some(process) = &self.process else {
            return Outcome::NotApplicable(crate::engine::process::NO_PROCESS.into());
        };
        match process.restart().await {
            Ok(()) => Outcome::Passed,
            // The process would not start again: the set-up's fault, not a broken rule.
            Err(why) => Outcome::Error(format!("restart_peer: {why}")),
        }
    }
}

/// The process's last lines, as a report shows what came instead.
fn output_tail(output: &crate::process::OutputLog) -> Value {
    let lines: Vec<String> = output
        .tail(20)
        .iter()
        .map(|l| format!("{}: {}", l.stream, l.text))
        .collect();
    if lines.is_empty() {
        json!("(the process printed nothing)")
    } else {
        json!({ "last output": lines })
    }
}
