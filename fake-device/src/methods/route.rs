//! Which room answers a link's session work: each request goes to its method's room, taken in
//! arrival order per link; prompts go to [`crate::turns`] once the session they name is open;
//! a method the device does not have (or whose capability it did not list) is
//! method-not-found. The rooms' misbehaviours are resolved here once per link.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use harness::jsonrpc::{INTERNAL_ERROR, METHOD_NOT_FOUND, RpcError};
use harness::lembas::methods;
use harness::rules::{Misbehaviours, ids};
use serde_json::Value;
use tokio::sync::mpsc;

use super::call::Call;
use super::{
    commands, configure, directories, files_search, session_cancel, session_compact,
    session_delete, session_history, session_new, session_rewind, session_set_mode, session_status,
    session_title, steer,
};
use crate::answers::{Answer, Reply};
use crate::events::Client;
use crate::sessions::Sessions;

/// Session work from a link, in the order it arrived.
#[derive(Debug)]
pub(crate) enum Work {
    /// A request for the sessions.
    Request {
        method: String,
        params: Value,
        id: Value,
        client: Client,
        /// The link the request came on: its answer goes there, whichever link the client
        /// is on by then (a JSON-RPC id names a request of one connection only).
        link: Arc<harness::jsonrpc::Peer>,
    },
    /// `session/cancel`.
    Cancel(Value),
}

/// What each room the link's work reaches gets wrong on purpose; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// A method it does not have goes unanswered.
    pub unknown_unanswered: bool,
    /// A method it does not have is answered as if done.
    pub unknown_pretends: bool,
    /// A Context field of a capability not listed is refused on `session/prompt`.
    pub prompt_unlisted_context_refused: bool,
    /// `session/new`.
    pub new: session_new::Faults,
    /// `session/set_mode`.
    pub set_mode: session_set_mode::Faults,
    /// `_lembas/configure`.
    pub configure: configure::Faults,
    /// `_lembas/session/status`.
    pub status: session_status::Faults,
    /// `_lembas/session/history`.
    pub history: session_history::Faults,
    /// `_lembas/session/delete`.
    pub delete: session_delete::Faults,
    /// `_lembas/session/title`.
    pub title: session_title::Faults,
    /// `_lembas/directories`.
    pub directories: directories::Faults,
    /// `_lembas/commands`.
    pub commands: commands::Faults,
    /// `_lembas/files/search`.
    pub files: files_search::Faults,
    /// `_lembas/steer`.
    pub steer: steer::Faults,
    /// `session/cancel`.
    pub cancel: session_cancel::Faults,
    /// `_lembas/session/rewind`.
    pub rewind: session_rewind::Faults,
    /// `_lembas/session/compact`.
    pub compact: session_compact::Faults,
}

impl Faults {
    /// The faults `m` asks for.
    pub(crate) fn of(m: &Misbehaviours) -> Faults {
        Faults {
            unknown_unanswered: m.breaks(ids::DEVICE_METHOD_UNKNOWN),
            unknown_pretends: m.breaks_way(ids::DEVICE_METHOD_UNKNOWN, "pretends"),
            prompt_unlisted_context_refused: m
                .breaks_way(ids::DEVICE_CONTEXT_UNLISTED_IGNORED, "on_prompt"),
            new: session_new::Faults::of(m),
            set_mode: session_set_mode::Faults::of(m),
            configure: configure::Faults::of(m),
            status: session_status::Faults::of(m),
            history: session_history::Faults::of(m),
            delete: session_delete::Faults::of(m),
            title: session_title::Faults::of(m),
            directories: directories::Faults::of(m),
            commands: commands::Faults::of(m),
            files: files_search::Faults::of(m),
            steer: steer::Faults::of(m),
            cancel: session_cancel::Faults::of(m),
            rewind: session_rewind::Faults::of(m),
            compact: session_compact::Faults::of(m),
        }
    }
}

/// Serves one link's session work in arrival order (a prompt is queued before the next message
/// is read, as a device does); answers that wait for a turn are sent from tasks of their own,
/// so a long turn never holds up a `status` or a `steer`.
pub(crate) async fn serve_link(
    sessions: Arc<Sessions>,
    mut work: mpsc::UnboundedReceiver<Box<Work>>,
) {
    let faults = Faults::of(&sessions.registry().config.misbehave);
    while let Some(item) = work.recv().await {
        // The work's futures are boxed so the task an idle link keeps (waiting for work) is
        // small: its size would otherwise be that of the largest of them.
        match *item {
            Work::Cancel(params) => {
                Box::pin(session_cancel::take(&sessions, &params, &faults.cancel)).await;
            }
            Work::Request {
                method,
                params,
                id,
                client,
                link,
            } => match Box::pin(handle(&sessions, &faults, &method, &params, &client)).await {
                // Misbehaving: a method it does not have goes unanswered.
                None if faults.unknown_unanswered => {}
                // Misbehaving: a method it does not have is answered as if done.
                None if faults.unknown_pretends => {
                    link.respond(&id, Ok(serde_json::json!({})));
                }
                None => {
                    link.respond(
                        &id,
                        Err(RpcError::new(
                            METHOD_NOT_FOUND,
                            format!("method not found: {method}"),
                        )),
                    );
                }
                // Misbehaving: what follows session/new's answer goes before it.
                Some(Reply::Now(answer)) if faults.new.follow_up_first => {
                    Box::pin(after(&sessions, &faults, &method, &answer, &client)).await;
                    link.respond(&id, answer);
                }
                Some(Reply::Now(answer)) => {
                    link.respond(&id, answer.clone());
                    Box::pin(after(&sessions, &faults, &method, &answer, &client)).await;
                }
                Some(later) => {
                    tokio::spawn(async move {
                        let answer = later.wait().await;
                        link.respond(&id, answer);
                    });
                }
            },
        }
    }
}

/// What follows an answer on the wire (only `session/new`'s has a follow-up).
async fn after(
    sessions: &Sessions,
    faults: &Faults,
    method: &str,
    answer: &Answer,
    client: &Client,
) {
    if method == methods::SESSION_NEW {
        session_new::after(sessions, &faults.new, answer, client).await;
    }
}

/// Answers a session method; `None` when `method` is none of them (or its capability was not
/// listed), so the caller answers method-not-found.
pub(crate) async fn handle(
    sessions: &Sessions,
    faults: &Faults,
    method: &str,
    params: &Value,
    client: &Client,
) -> Option<Reply> {
    let registry = sessions.registry();
    // Misbehaving: a Context field of a capability not listed refused as an unknown field.
    let refuses_context = match method {
        methods::SESSION_NEW => faults.new.unlisted_context_refused,
        methods::SESSION_PROMPT => faults.prompt_unlisted_context_refused,
        _ => false,
    };
    if refuses_context
        && let Some(refusal) = session_new::unlisted_context_refused(registry, params)
    {
        return Some(Reply::Now(Err(refusal)));
    }
    if method == methods::SESSION_PROMPT && registry.usage_refused.load(Ordering::Relaxed) {
        return Some(Reply::Now(Err(RpcError::new(
            INTERNAL_ERROR,
            "logged out: the instance has no usage",
        ))));
    }
    let has = |capability| registry.has(capability);
    let call = Call {
        sessions,
        params,
        client,
    };
    let answer = match method {
        methods::SESSION_NEW => session_new::answer(call, &faults.new).await,
        methods::SESSION_PROMPT => {
            return Some(
                sessions
                    .prompt(params, client)
                    .await
                    .unwrap_or_else(|e| Reply::Now(Err(e))),
            );
        }
        methods::SESSION_SET_MODE => session_set_mode::answer(call, &faults.set_mode).await,
        methods::LEMBAS_CONFIGURE if has("configure") => {
            configure::answer(call, &faults.configure).await
        }
        methods::LEMBAS_STEER if has("steer") => steer::answer(call, &faults.steer).await,
        methods::LEMBAS_SESSION_STATUS if has("status") => {
            session_status::answer(call, &faults.status).await
        }
        methods::LEMBAS_SESSION_HISTORY if has("sessions") => {
            session_history::answer(call, &faults.history).await
        }
        methods::LEMBAS_SESSION_DELETE if has("delete") => {
            session_delete::answer(call, &faults.delete).await
        }
        methods::LEMBAS_SESSION_REWIND if has("rewind") => {
            session_rewind::answer(call, &faults.rewind).await
        }
        // Misbehaving: compact is listed and answered method-not-found.
        methods::LEMBAS_SESSION_COMPACT if has("compact") && !faults.compact.unserved => {
            session_compact::answer(call, &faults.compact).await
        }
        methods::LEMBAS_SESSION_TITLE if has("title") => {
            session_title::answer(call, &faults.title).await
        }
        methods::LEMBAS_DIRECTORIES if has("directories") => {
            directories::answer(&registry.limits(), params, faults.directories)
        }
        methods::LEMBAS_COMMANDS if has("commands") => {
            commands::answer(call, &faults.commands).await
        }
        methods::LEMBAS_FILES_SEARCH if has("files") => {
            files_search::answer(call, &faults.files).await
        }
        _ => return None,
    };
    Some(Reply::Now(answer))
}
