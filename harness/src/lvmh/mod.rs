//! What both doubles know of lvmh v1 (`lvmh-protocol-v1.md`): a pi plugin dials a daemon's
//! agent WebSocket and streams envelopes; the daemon persists them and serves a REST API and a
//! browser WebSocket to the web UI. Kept here so the daemon and the plugin cannot disagree on a
//! fact: paths, the envelope, which kinds are persisted, the limits the spec sets.
//!
//! [`plugin`] is the plugin itself (the fake plugin of fake-device, and the session a spawn
//! starts inside the fake daemon): it lives here because both doubles run it.

pub mod envelope;
pub mod gitlab;
pub mod plugin;
pub mod rules;

pub use envelope::{Envelope, EnvelopeError, VERSION, kinds, now_ms};

use std::time::Duration;

/// Where the plugin dials the daemon (spec, "Transport 1").
pub const AGENT_PATH: &str = "/agent/ws";

/// Where the web UI's browser opens its WebSocket, with `?token=` (spec, "Transport 3").
pub const BROWSER_PATH: &str = "/ws";

/// How many unpersisted events the plugin keeps while the daemon is away (spec, "Reconnect &
/// buffering").
pub const BUFFER_CAP: usize = 10_000;

/// The longest wait between two of the plugin's dials (spec, "Reconnect & buffering").
pub const BACKOFF_CAP: Duration = Duration::from_secs(30);

/// The longest `resultPreview` of a `tool_execution_end`, in bytes (spec, "Plugin → daemon
/// events").
pub const RESULT_PREVIEW_MAX: usize = 2048;

/// How an lvmh link's frames are read: envelopes naming their kind in `type`, whose malformed
/// frames break the envelope rules.
pub fn framing() -> crate::jsonrpc::Framing {
    crate::jsonrpc::Framing::Typed(crate::jsonrpc::TypedFrames {
        kind_key: "type",
        not_json: rules::JSON_FRAMES,
        // Either side's: the envelope's fields are checked by the daemon, on the plugin's frames.
        not_typed: rules::JSON_FRAMES,
        not_text: rules::JSON_FRAMES,
    })
}

/// The always-on shape checks of a double judging the lvmh side `judged` (the catalogue's lvmh
/// rules with a `shape`), and the shape misbehaviours in `misbehave` it acts out on what it
/// sends and answers.
pub fn shape_watch(
    judged: crate::rules::Binds,
    misbehave: &crate::rules::Misbehaviours,
) -> crate::shapes::ShapeWatch {
    // lvmh has no harness spec and none of its rules is limited to one, so the spec the
    // compiled checks are keyed by changes nothing: the newest is as good as any.
    let spec = crate::lembas::Spec::V1_1_0.as_str();
    crate::shapes::ShapeWatch::of_family(
        crate::family::Family::Lvmh,
        crate::rules::catalogue(),
        judged,
        misbehave,
        spec,
    )
}

/// A REST call's route as the catalogue's shapes name it: `VERB /path`, the query left out
/// and a session's id written `:id`, as the spec writes it (`GET /api/sessions/:id/events`).
pub fn api_route(verb: &str, path: &str) -> String {
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let mut segments: Vec<&str> = path.split('/').collect();
    // ["", "api", "sessions", id, …]
    if segments.len() >= 4 && segments[1] == "api" && segments[2] == "sessions" {
        segments[3] = ":id";
    }
    crate::shapes::route(verb, &segments.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_route_names_its_id_as_the_spec_does() {
        assert_eq!(
            api_route("get", "/api/sessions/s-1/events?after=3&limit=2"),
            "GET /api/sessions/:id/events"
        );
        assert_eq!(api_route("GET", "/api/sessions"), "GET /api/sessions");
        assert_eq!(
            api_route("post", "/api/sessions/abc/prompt"),
            "POST /api/sessions/:id/prompt"
        );
        assert_eq!(
            api_route("GET", "/api/spawn/status"),
            "GET /api/spawn/status"
        );
    }
}
