//! Discovery (`/.well-known/lembas.json`): what an instance says it speaks.

use serde_json::{Value, json};

/// Why an instance's discovery cannot be read: which of its fields is missing or wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    /// No `protocol` field.
    #[error("discovery has no `protocol`")]
    NoProtocol,
    /// `protocol` is not a number that fits a byte.
    #[error("discovery's `protocol` is not a small whole number")]
    ProtocolNotANumber,
    /// An item of `protocols` is not a protocol number.
    #[error("discovery's `protocols` holds something that is not a protocol number")]
    ProtocolsItem,
    /// `protocols` is there, and not a list.
    #[error("discovery's `protocols` is not a list")]
    ProtocolsNotAList,
}

/// Discovery as the spec shapes it: `protocol` (kept at 1 on purpose) and `protocols`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    /// The `protocol` field.
    pub protocol: u8,
    /// The `protocols` list, when the instance serves one.
    pub protocols: Option<Vec<u8>>,
}

impl Discovery {
    /// Discovery for an instance speaking these protocols, as a correct instance serves it.
    pub fn for_protocols(protocols: Option<Vec<u8>>) -> Self {
        Self {
            protocol: 1,
            protocols,
        }
    }

    /// The JSON an instance serves.
    pub fn to_value(&self) -> Value {
        let mut value = json!({ "protocol": self.protocol });
        if let Some(list) = &self.protocols {
            value["protocols"] = json!(list);
        }
        value
    }

    /// Reads an instance's discovery. Peer input: every way it can be wrong is an error that says
    /// which, never a panic.
    pub fn from_value(value: &Value) -> Result<Discovery, DiscoveryError> {
        let protocol = value
            .get("protocol")
            .ok_or(DiscoveryError::NoProtocol)?
            .as_u64()
            .and_then(|p| u8::try_from(p).ok())
            .ok_or(DiscoveryError::ProtocolNotANumber)?;
        let protocols = match value.get("protocols") {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) => Some(
                items
                    .iter()
                    .map(|p| p.as_u64().and_then(|p| u8::try_from(p).ok()))
                    .collect::<Option<Vec<u8>>>()
                    .ok_or(DiscoveryError::ProtocolsItem)?,
            ),
            Some(_) => return Err(DiscoveryError::ProtocolsNotAList),
        };
        Ok(Discovery {
            protocol,
            protocols,
        })
    }

    /// The protocol a device says to this instance: 2 only when it lists 2 (or, with no list,
    /// when its `protocol` is 2), else 1.
    pub fn protocol_for_device(&self) -> u8 {
        let speaks_2 = match &self.protocols {
            Some(list) => list.contains(&2),
            None => self.protocol >= 2,
        };
        if speaks_2 { 2 } else { 1 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_says_2_only_where_2_is_listed() {
        assert_eq!(
            Discovery::for_protocols(Some(vec![1, 2])).protocol_for_device(),
            2
        );
        assert_eq!(
            Discovery::for_protocols(Some(vec![1])).protocol_for_device(),
            1
        );
        assert_eq!(Discovery::for_protocols(None).protocol_for_device(), 1);
        assert_eq!(
            Discovery {
                protocol: 2,
                protocols: None
            }
            .protocol_for_device(),
            2
        );
    }

    #[test]
    fn broken_discovery_is_an_error_not_a_panic() {
        for bad in [
            json!({}),
            json!({"protocol": "1"}),
            json!({"protocol": 1, "protocols": "1,2"}),
            json!({"protocol": 1, "protocols": [1, "2"]}),
            json!([]),
        ] {
            assert!(Discovery::from_value(&bad).is_err(), "{bad}");
        }
        let round = Discovery::for_protocols(Some(vec![1, 2]));
        assert_eq!(Discovery::from_value(&round.to_value()), Ok(round));
    }
}
