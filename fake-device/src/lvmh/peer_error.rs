//! Why a daemon scenario's `peer:` section does not give the plugin its settings: kept apart
//! from the plugin's run so that the self-test and the CLI can name it without reaching into
//! how the plugin runs.

/// The `peer:` section's settings (beside `steps`) do not read as the plugin's.
#[derive(Debug, thiserror::Error)]
#[error("peer: {source}")]
pub struct PeerSettingsError {
    /// What the settings' reading found.
    #[from]
    pub source: serde_json::Error,
}
