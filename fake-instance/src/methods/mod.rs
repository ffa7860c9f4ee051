//! The instance's side of the protocol, one room per spec method family: what it sends, how it
//! answers, and what it checks in the device's part of that exchange. Each room holds the
//! well-behaved handling, the misbehaviours of its section (resolved once into its `Faults`) and
//! its checks on the device; [`crate::client`] and [`crate::actions`] only route to them.

pub(crate) mod cards;
pub(crate) mod hello;
pub(crate) mod initialize;
