//! One room per spec method the device answers: each holds the well-behaved answer, the
//! section's misbehaviours (its `Faults`, resolved once per link) and what it checks of the peer.

pub(crate) mod call;
pub(crate) mod commands;
pub(crate) mod configure;
pub(crate) mod directories;
pub(crate) mod files_search;
pub(crate) mod hello;
pub(crate) mod initialize;
pub(crate) mod route;
pub(crate) mod session_announce;
pub(crate) mod session_delete;
pub(crate) mod session_history;
pub(crate) mod session_new;
pub(crate) mod session_set_mode;
pub(crate) mod session_status;
pub(crate) mod session_title;
pub(crate) mod terminal_open;
