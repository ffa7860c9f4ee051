//! The instance's side of the protocol, one room per spec method family: what it sends, how it
//! answers, and what it checks in the device's part of that exchange. Each room holds the
//! well-behaved handling, the misbehaviours of its section (resolved once into its `Faults`) and
//! its checks on the device; [`crate::client`] and [`crate::actions`] only route to them.

pub(crate) mod cards;
pub(crate) mod composer;
pub(crate) mod configure;
pub(crate) mod discovery;
pub(crate) mod hello;
pub(crate) mod initialize;
pub(crate) mod links;
pub(crate) mod plan;
pub(crate) mod prompt;
pub(crate) mod question;
pub(crate) mod request_permission;
pub(crate) mod session_cancel;
pub(crate) mod session_delete;
pub(crate) mod session_menu;
pub(crate) mod session_new;
pub(crate) mod session_rewind;
pub(crate) mod steer;
pub(crate) mod terminal;
pub(crate) mod unknown_method;
