//! Discovery: the `protocols` list this instance serves, changed by a scenario as an instance
//! upgraded or rolled back between two dials.

use harness::engine::ActError;
use harness::lembas::Discovery;
use serde_json::json;

use crate::actions::{Acted, InstanceActor};

impl InstanceActor {
    /// Serves discovery with `list` from now on (`[]`: no list at all).
    pub(crate) fn serve_protocols(&self, list: Vec<u8>) -> Acted {
        let protocols = (!list.is_empty()).then(|| list.clone());
        let mut discovery = self
            .discovery
            .write()
            .map_err(|_| ActError::Failed("discovery is unavailable".into()))?;
        *discovery = Discovery::for_protocols(protocols);
        Ok(json!({ "protocols": list }))
    }
}
