//! The steps about the links themselves: waiting for one (first, again, or never again),
//! closing one, watching the peer close one, and dialling out.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::duration::Dur;

/// Expect the peer to link.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectLinkStep {
    /// How long it may take.
    pub within: Dur,
    /// The catalogue rule the peer breaks otherwise.
    #[serde(default)]
    pub rule: Option<String>,
}

/// Close the link.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CloseStep {
    /// The close code (default 1000).
    #[serde(default)]
    pub code: Option<u16>,
    /// The reason text.
    #[serde(default)]
    pub reason: Option<String>,
    /// End the link without a close frame (no code, no reason), as a crashed process or a lost
    /// network does: what a reattach must survive.
    #[serde(default)]
    pub drop: bool,
    /// End only this side's sending direction (TCP's end of stream, no close frame) and go on
    /// reading what the peer still sends: a link half gone, which a peer that notices a lost
    /// link only when its own writes fail never sees.
    #[serde(default)]
    pub half: bool,
}

/// Expect the peer to close the link.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectCloseStep {
    /// The code it must close with; absent: any close, or vanishing.
    #[serde(default)]
    pub code: Option<u16>,
    /// The catalogue rule the peer breaks otherwise.
    #[serde(default)]
    pub rule: Option<String>,
    /// This step's deadline.
    #[serde(default)]
    pub timeout: Option<Dur>,
}

/// Expect the peer to link again.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectReconnectStep {
    /// How long it may take.
    pub within: Dur,
    /// The catalogue rule the peer breaks otherwise.
    #[serde(default)]
    pub rule: Option<String>,
}

/// Expect the peer not to link again.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectNoReconnectStep {
    /// How long to watch.
    #[serde(rename = "for")]
    pub duration: Dur,
    /// The catalogue rule the peer breaks when it does.
    #[serde(default)]
    pub rule: Option<String>,
}

/// Dial the instance (fake-device only).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DialStep {
    /// The bearer token to dial with (default: the device's own).
    #[serde(default)]
    pub token: Option<String>,
    /// The protocol to say in hello (default: what discovery allows).
    #[serde(default)]
    pub protocol: Option<u8>,
    /// The dial must be refused with this HTTP status (401 for a wrong token).
    #[serde(default)]
    pub refused: Option<u16>,
    /// The catalogue rule the peer breaks otherwise.
    #[serde(default)]
    pub rule: Option<String>,
    /// This step's deadline.
    #[serde(default)]
    pub timeout: Option<Dur>,
}
