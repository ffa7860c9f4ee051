//! fake-device as the device a fake-instance scenario's `peer:` section describes: the set-up a
//! real CLI's test arranges by hand or by hooks (a root laid out, sessions deleted while offline
//! or started elsewhere, a person at the terminal on timers), done here by the double itself.

use std::path::Path;

use harness::lembas::setup::{DeviceSetup, LibraryChoice, RootsNeed};
use harness::scenario::{Spanned, Step};

use crate::run::{Options, TerminalPlay};
use crate::settings::AgentKind;
use crate::store::{Store, StoredSession};

/// The device an instance scenario wants, as read from its `peer:` section.
#[derive(Debug, Clone)]
pub(crate) struct PeerPlay {
    /// The set-up.
    pub setup: DeviceSetup,
    /// What the person at the device does by itself (`peer.steps`).
    pub steps: Vec<Spanned<Step>>,
}

/// Sets `options` up as the device `play` describes, making its root, its terminals' empty
/// home and its seeded store under `scratch`.
pub(crate) fn apply(play: &PeerPlay, options: &mut Options, scratch: &Path) -> Result<(), String> {
    let setup = &play.setup;
    let root = scratch.join("root");
    // The terminals' shells start from an empty home: the machine's own startup files are no
    // part of the test.
    let home = scratch.join("home");
    for dir in [&root, &home] {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    }
    setup.lay_out(&root).map_err(|e| e.to_string())?;
    setup.lay_out_home(&home).map_err(|e| e.to_string())?;
    // A scenario that wants a device with no roots gets one; any other, one trusted root.
    if setup.roots != RootsNeed::None {
        options.roots.push(root.display().to_string());
    }
    let state_dir = root.join(".state");
    let store =
        Store::open(&state_dir).map_err(|e| format!("cannot make the device's store: {e}"))?;
    for id in &setup.pending_deletes {
        store
            .add_pending_delete(id)
            .map_err(|e| format!("cannot seed a pending delete: {e}"))?;
    }
    // Outside the one root: its sibling never is inside it.
    let elsewhere = root.with_extension("elsewhere");
    for id in &setup.foreign_sessions {
        store
            .save_session(&StoredSession::new(id.clone(), elsewhere.clone()))
            .map_err(|e| format!("cannot seed a session: {e}"))?;
    }
    if !setup.untrusted_sessions.is_empty() && setup.untrusted.is_empty() {
        return Err(
            "`peer.untrusted_sessions` are seeded in the first `peer.untrusted` folder: give one"
                .into(),
        );
    }
    if let Some(folder) = setup.untrusted.first() {
        for id in &setup.untrusted_sessions {
            store
                .save_session(&StoredSession::new(id.clone(), root.join(folder)))
                .map_err(|e| format!("cannot seed a session: {e}"))?;
        }
    }
    options.state_dir = Some(state_dir);
    // Instance scenarios script the model; the device follows it, as a CLI does.
    options.agent = AgentKind::Model;
    options.change_limits_after = setup.change_limits_after.map(|d| d.0);
    options.terminal = TerminalPlay {
        share_after: setup.share_session_after.map(|d| d.0),
        prompt_after: setup.terminal_prompt_after.map(|d| d.0),
        answers_after: setup.terminal_answers_after.map(|d| d.0),
        leave_after: setup.leave_session_after.map(|d| d.0),
    };
    options.approval_timeout = setup.approval_timeout.map(|d| d.0);
    options.max_mode = setup.max_mode.map(|m| m.as_str().to_string());
    options.local_personalization = setup
        .local_personalization
        .as_ref()
        .map(|local| serde_json::json!(local));
    options.library_local = setup.library == Some(LibraryChoice::Local);
    options.untrusted = setup
        .untrusted
        .iter()
        .map(|folder| root.join(folder).display().to_string())
        .collect();
    options.remote_terminal = setup.terminal == Some(true);
    options.terminal_home = Some(home);
    options.terminal_integration = setup.terminal_integration;
    options.steps = play.steps.clone();
    Ok(())
}
