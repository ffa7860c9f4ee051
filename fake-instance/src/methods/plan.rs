//! `_lembas/plan`, the plan card: the answer the card policy gives, and what a misbehaving
//! client answers for a plan nobody answered in time.

use serde_json::{Value, json};

use crate::settings::PlanPolicy;

/// The answer `policy` gives; `None`: the policy leaves the card unanswered.
pub(crate) fn by_policy(policy: PlanPolicy) -> Option<Value> {
    match policy {
        PlanPolicy::Approve => Some(json!({ "outcome": "approve", "mode": "edit" })),
        PlanPolicy::ApproveManual => Some(json!({ "outcome": "approve", "mode": "manual" })),
        PlanPolicy::Revise => Some(json!({ "outcome": "revise", "feedback": "smaller steps" })),
        PlanPolicy::Dismiss => Some(json!({ "outcome": "dismissed" })),
        PlanPolicy::Ignore => None,
    }
}

/// Misbehaving: a plan nobody answered in time, approved as if the person had.
pub(crate) fn as_if_approved() -> Value {
    json!({ "outcome": "approve", "mode": "manual" })
}
