//! Protocol families: which link a scenario speaks. The engine is the same for each; a family
//! decides how frames are read (see [`crate::jsonrpc::Framing`]), which steps make sense (a
//! family without requests has no `request` step), and where its scenarios live.

use schemars::JsonSchema;
use serde::Deserialize;

/// The protocol family a scenario (or a double's run) speaks.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Deserialize,
    serde::Serialize,
    JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// LLeMbas: ACP and `_lembas/*` over JSON-RPC 2.0 (the default).
    #[default]
    Lembas,
    /// lvmh v1: a pi plugin and its daemon, envelopes with a `type` over WebSocket, a REST API
    /// and a browser WebSocket.
    Lvmh,
}

impl Family {
    /// Every family, the default first.
    pub const ALL: [Family; 2] = [Family::Lembas, Family::Lvmh];

    /// Its name, as scenarios and `--family` write it.
    pub fn name(self) -> &'static str {
        match self {
            Family::Lembas => "lembas",
            Family::Lvmh => "lvmh",
        }
    }

    /// The folder under `scenarios/` its scenarios' side folders live in (`""`: directly).
    pub fn folder(self) -> &'static str {
        match self {
            Family::Lembas => "",
            Family::Lvmh => "lvmh/",
        }
    }

    /// Whether its links carry JSON-RPC (requests with answers), so that `request`, `start`,
    /// `await`, `notify`, `reply` and handlers have a meaning.
    pub fn has_requests(self) -> bool {
        matches!(self, Family::Lembas)
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Family {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Family::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| format!("`{s}` is not a protocol family (lembas or lvmh)"))
    }
}
