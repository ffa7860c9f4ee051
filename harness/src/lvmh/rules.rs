//! The lvmh rules checked by code (the catalogue, `conformance/rules/lvmh/`, holds them all).
//! `lvmh.plugin.*` bind the plugin (the fake daemon checks them), `lvmh.daemon.*` the daemon
//! (the fake plugin and fake browser check them).

/// Frames on the agent link are JSON text, one object each.
pub const JSON_FRAMES: &str = "lvmh.frames.json";
/// Every frame carries the envelope: `v` 1, `sessionId`, `seq`, `ts` and `type`.
pub const ENVELOPE: &str = "lvmh.envelope";
/// The plugin's first frame is `hello` with the session snapshot.
pub const HELLO_FIRST: &str = "lvmh.plugin.hello.first";
/// A session's seq lasts as long as the session: a resumed session numbers on after the last.
pub const SEQ_SESSION_LIFETIME: &str = "lvmh.plugin.seq.session_lifetime";
/// Per session the plugin numbers its events from 1, each above the one before.
pub const SEQ_MONOTONIC: &str = "lvmh.plugin.seq.monotonic";
/// After `welcome`, the plugin resends what the daemon lacks: from `lastSeq + 1`, nothing
/// lost, nothing the daemon has again.
pub const REPLAY_AFTER_LAST_SEQ: &str = "lvmh.plugin.replay.after_last_seq";
/// A buffer that overflowed while the daemon was away is announced with `buffer_overflow`.
pub const BUFFER_OVERFLOW_NOTICE: &str = "lvmh.plugin.buffer.overflow_notice";
/// A `tool_execution_end`'s `resultPreview` is cut to 2 KB.
pub const RESULT_PREVIEW: &str = "lvmh.plugin.tool.result_preview";
/// The daemon answers `hello` with `welcome` and the highest `seq` it persisted for the session.
pub const WELCOME_LAST_SEQ: &str = "lvmh.daemon.welcome.last_seq";
/// The daemon persists every event but `message_update`, served in `seq` order.
pub const PERSISTS_EVENTS: &str = "lvmh.daemon.events.persisted";
/// `message_update` reaches web subscribers live and is never persisted.
pub const UPDATES_NOT_PERSISTED: &str = "lvmh.daemon.updates.not_persisted";
/// Every route wants the token: a missing or wrong one gets 401 (REST) or a refused upgrade.
pub const AUTH: &str = "lvmh.daemon.auth";
/// A prompt to a session whose plugin is not linked is refused with 409.
pub const PROMPT_OFFLINE: &str = "lvmh.daemon.prompt.offline";
/// A prompt to an online session reaches its plugin as `prompt` with `promptId` and `message`.
pub const PROMPT_ROUTED: &str = "lvmh.daemon.prompt.routed";
/// A subscribed browser gets the session's events live, deltas included.
pub const UPDATES_LIVE: &str = "lvmh.daemon.updates.live";
/// The plugin redials forever, at most 30 s apart.
pub const RECONNECT: &str = "lvmh.plugin.reconnect";
/// A prompt from the daemon comes back as the session's own user message (message_start and
/// message_end), which mirrors it to the web; nothing else answers it.
pub const PROMPT_MIRRORED: &str = "lvmh.plugin.prompt.mirrored";
/// A prompt that comes during a run waits like typed-ahead input (delivered as a steer): the
/// reply under way is not cut, and the prompt is taken after it.
pub const PROMPT_STEER: &str = "lvmh.plugin.prompt.steer";
/// `message_update` deltas stream assistant messages only.
pub const UPDATES_ASSISTANT: &str = "lvmh.plugin.updates.assistant";
/// A graceful disconnect says `bye` with reason `shutdown`.
pub const BYE: &str = "lvmh.plugin.bye";
/// A rename or a model change sends `session_info` with the whole new snapshot.
pub const SESSION_INFO: &str = "lvmh.plugin.session_info";
/// An `abort` ends the current run: the reply stops where it was, the run ends and settles.
pub const ABORT: &str = "lvmh.plugin.abort";
/// A prompt starts a run framed by `agent_start` and `agent_end`, its reply streamed, and the run
/// settles (`agent_settled`).
pub const RUN_FRAMED: &str = "lvmh.plugin.run.framed";
/// A spawn answers at once with the session's and the container's ids, lists its job, and its
/// session comes with `agent: true` and the repo.
pub const SPAWN: &str = "lvmh.daemon.spawn";
/// A browser gets the whole session list again whenever it changes.
pub const SESSION_LIST: &str = "lvmh.daemon.session_list";
/// The daemon's frames to the plugin carry the envelope too: `v` 1, the link's session, `seq`
/// and `ts`.
pub const DAEMON_ENVELOPE: &str = "lvmh.daemon.envelope";
/// `GET …/events` honours `after` and `limit`.
pub const EVENTS_PAGED: &str = "lvmh.daemon.events.paged";
/// `GET /api/sessions/:id/events` gives the events of the session its path names only.
pub const EVENTS_PER_SESSION: &str = "lvmh.daemon.events.per_session";
/// `GET /api/sessions` says `online` while, and only while, the session's plugin is linked.
pub const ONLINE: &str = "lvmh.daemon.sessions.online";
/// An abort from the web reaches the session's plugin as `abort`.
pub const ABORT_ROUTED: &str = "lvmh.daemon.abort.routed";
/// The REST API's errors are `{"error": "message"}` with a fitting status.
pub const ERRORS: &str = "lvmh.daemon.errors";
/// A browser that unsubscribes gets no more of the session's events.
pub const UNSUBSCRIBE: &str = "lvmh.daemon.unsubscribe";
/// A web UI whose browser link reopens subscribes again and fetches the events after the last
/// seq it saw.
pub const WEB_RESUBSCRIBE: &str = "lvmh.web.resubscribe";
/// The GitLab token the daemon keeps is in no answer and no frame.
pub const GITLAB_TOKEN_HIDDEN: &str = "lvmh.daemon.gitlab.token_hidden";
/// A token is validated against the GitLab: kept and answered with its user when accepted,
/// refused when not, forgotten on `DELETE`.
pub const GITLAB_CONNECT: &str = "lvmh.daemon.gitlab.connect";
/// The repos are the user's member projects, most recent activity first.
pub const GITLAB_REPOS: &str = "lvmh.daemon.gitlab.repos";
/// Stopping a spawned session's container answers ok and takes the session offline.
pub const CONTAINER_STOP: &str = "lvmh.daemon.container.stop";
/// A browser gets `spawn_status` when a spawn job changes.
pub const SPAWN_STATUS_PUSHED: &str = "lvmh.daemon.spawn_status";
