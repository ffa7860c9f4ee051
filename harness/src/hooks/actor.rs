//! `act` steps done by hooks: the other double's own steps (`peer.steps`) run against a real
//! peer, each action through the hook of its name.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::run::HookContext;
use crate::engine::{ActError, Actor};

/// An [`Actor`] whose every action is a hook.
#[derive(Debug, Clone)]
pub struct HookActor(pub Arc<HookContext>);

impl Actor for HookActor {
    fn act<'a>(
        &'a self,
        action: Value,
        _timeout: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<Value, ActError>> + Send + 'a>> {
        Box::pin(async move {
            let Some((name, value)) = action.as_object().and_then(|m| m.iter().next()) else {
                return Err(ActError::Failed(format!("`{action}` is not one action")));
            };
            self.0.run(name, value).await
        })
    }
}
