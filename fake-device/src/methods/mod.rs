//! One room per spec section the device sends: the well-behaved message, that section's
//! misbehaviours and the checks of the peer's answer, side by side.

pub(crate) mod card;
pub(crate) mod plan;
pub(crate) mod plan_update;
pub(crate) mod question;
pub(crate) mod request_permission;
