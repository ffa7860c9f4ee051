//! The web UI's moves, as a sequence holds them, and the texts and close codes they are drawn
//! from: the one room the drawing and the writing of a sequence share.

/// What the person at the web UI (fake-instance) does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Move {
    /// Open a session in the device's first root (`session/new`).
    OpenSession {
        /// The session's label (`s1`).
        session: String,
    },
    /// Send a prompt and go on without waiting (`session/prompt`).
    Prompt {
        /// The request's label (`p1`), which an await names.
        prompt: String,
        /// The session's label.
        session: String,
        /// Its turn id: a fresh one, an earlier prompt's (the web UI sending it again), or none
        /// (the device makes one).
        turn_id: Option<String>,
        /// What the person typed.
        text: String,
    },
    /// Wait for a prompt's answer (any result or refusal; none at all breaks
    /// `device.prompt.answer`).
    Await {
        /// The prompt's label.
        prompt: String,
    },
    /// Ask a session's status (`_lembas/session/status`).
    Status {
        /// The session's label.
        session: String,
    },
    /// Stop a session's running turn (`session/cancel`).
    Cancel {
        /// The session's label.
        session: String,
    },
    /// Delete a session (`_lembas/session/delete`).
    Delete {
        /// The session's label.
        session: String,
    },
    /// Give a running turn a message (`_lembas/steer`), to a device that lists `steer`.
    Steer {
        /// The session's label.
        session: String,
        /// The message.
        text: String,
    },
    /// Name a session (`_lembas/session/title`), to a device that lists `title`.
    Title {
        /// The session's label.
        session: String,
        /// The title: short, and each its own.
        title: String,
    },
    /// Ask a session's conversation (`_lembas/session/history`), of a device that lists
    /// `sessions`.
    History {
        /// The session's label.
        session: String,
    },
    /// Edit from an earlier turn (`_lembas/session/rewind`), at harness spec 1.1.0 to a device
    /// that lists `rewind`.
    Rewind {
        /// The session's label.
        session: String,
        /// The turn id taken back, an earlier prompt's.
        turn_id: String,
    },
    /// Turn a session's effort off (`_lembas/configure`), to a device that lists `configure`.
    Configure {
        /// The session's label.
        session: String,
    },
    /// Drop the link without a close frame, as a lost network does: the device dials again.
    DropLink,
    /// Close the link with a close code the device dials again after.
    CloseLink {
        /// The close code.
        code: u16,
    },
    /// Restart the device (`restart_peer`) on the same state directory.
    Restart,
    /// Let time pass.
    Wait {
        /// How long, in milliseconds.
        ms: u64,
    },
}

/// The texts a prompt is drawn from: short ones, and one fake-instance's model answers slowly (a
/// model that stalls between its words), so that prompts, steers and cancels meet a running
/// turn on a device that speaks to the instance's model.
pub const TEXTS: [&str; 4] = ["say hello", "a long turn", "count to three", STALLED];

/// The prompt fake-instance's model stalls on.
pub const STALLED: &str = "a stalled model";

/// The close codes a link is closed with: each one a device dials again after (4400 is the one
/// it does not, and the explorer leaves it to `link-4400.yaml`).
pub const CLOSE_CODES: [u16; 4] = [1000, 1001, 1011, 1012];
