//! One room per spec method the device answers or sends: each holds the well-behaved message,
//! that section's misbehaviours (its `Faults`, resolved once) and what it checks of the peer.
//! `call` and `route` carry a request to its room; `card` is what the three cards share.

pub(crate) mod call;
pub(crate) mod card;
pub(crate) mod commands;
pub(crate) mod configure;
pub(crate) mod directories;
pub(crate) mod files_search;
pub(crate) mod hello;
pub(crate) mod initialize;
pub(crate) mod plan;
pub(crate) mod plan_update;
pub(crate) mod question;
pub(crate) mod request_permission;
pub(crate) mod route;
pub(crate) mod session_announce;
pub(crate) mod session_cancel;
pub(crate) mod session_compact;
pub(crate) mod session_delete;
pub(crate) mod session_history;
pub(crate) mod session_new;
pub(crate) mod session_rewind;
pub(crate) mod session_set_mode;
pub(crate) mod session_status;
pub(crate) mod session_title;
pub(crate) mod steer;
pub(crate) mod terminal_open;
