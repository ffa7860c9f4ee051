//! fake-instance's own settings: a scenario's `instance:` section (how the simulated LLeMbas
//! behaves by default: discovery, initialize, the kind of client, its HTTP API, how its person
//! answers cards). The engine keeps the section as written; this module reads it, so the
//! vocabulary lives with the double that acts on it.

use harness::scenario::{Dur, LoadError, Mode, Scenario, Spanned};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// fake-instance's default behaviour.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstanceSettings {
    /// The `protocols` list discovery serves. Default: `[1, 2]` in protocol-2 cells, `[1]` in
    /// protocol-1 cells.
    #[serde(default)]
    pub protocols: Option<Vec<u8>>,
    /// Serve discovery without a `protocols` list at all (only `protocol: 1`).
    #[serde(default)]
    pub omit_protocols: bool,
    /// `auto`: send `initialize` after the device's hello; `manual`: the steps send it.
    #[serde(default)]
    pub initialize: Mode,
    /// `lembas` (default): say `_meta.lembas` in initialize; `plain`: act as a plain ACP client.
    #[serde(default)]
    pub client: ClientKind,
    /// The HTTP API the CLI uses: models, the scripted chat model, usage, personalization and
    /// the instance's description (see "The HTTP API fake-instance serves" in the format
    /// reference).
    #[serde(default)]
    pub http: Option<crate::http::HttpConfig>,
    /// How the person in the web UI answers the device's cards.
    #[serde(default)]
    pub cards: CardPolicy,
    /// `websocket` (default): the device dials the link; `stdio`: the device's command
    /// (`--exec`, `sut:`; `lembas serve --stdio`) is started and its standard input and output
    /// are the link, one message a line, as an editor speaks to it: no discovery, no hello.
    #[serde(default)]
    pub link: LinkKind,
}

/// How the device is reached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LinkKind {
    /// The device dials the instance's WebSocket link.
    #[default]
    Websocket,
    /// The device's command speaks on its standard input and output (`serve --stdio`).
    Stdio,
}

/// How fake-instance answers cards (approvals, questions, plans).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CardPolicy {
    /// Approvals: `allow_once` (default), `allow_always`, `deny`, or `ignore` (never answered;
    /// the device's timeout runs).
    #[serde(default)]
    pub permission: PermissionPolicy,
    /// Questions: `recommended` (default: the recommended option, else the first), `first`,
    /// `custom` (a written answer), `skip`, `dismiss`, or `ignore`.
    #[serde(default)]
    pub question: QuestionPolicy,
    /// Plans: `approve` (default, in `edit`), `approve_manual`, `revise`, `dismiss`, or `ignore`.
    #[serde(default)]
    pub plan: PlanPolicy,
    /// How long the person takes to answer (default: at once).
    #[serde(default)]
    pub delay: Option<Dur>,
    /// How long a card that is not patient stays up unanswered before LLeMbas dismisses it
    /// (default 30s). A patient card is never timed out.
    #[serde(default)]
    pub timeout: Option<Dur>,
}

/// How approvals are answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PermissionPolicy {
    /// The `once` option.
    #[default]
    AllowOnce,
    /// The `session` option (allow always), else once.
    AllowAlways,
    /// The `deny` option, with feedback.
    Deny,
    /// Never answered.
    Ignore,
}

/// How questions are answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QuestionPolicy {
    /// The recommended option, else the first.
    #[default]
    Recommended,
    /// The first option.
    First,
    /// A written answer of the person's own.
    Custom,
    /// Each question left blank.
    Skip,
    /// The card dismissed.
    Dismiss,
    /// Never answered.
    Ignore,
}

/// How plans are answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanPolicy {
    /// Approved, to go on in `edit`.
    #[default]
    Approve,
    /// Approved, to go on in `manual`.
    ApproveManual,
    /// Sent back with feedback.
    Revise,
    /// Dismissed.
    Dismiss,
    /// Never answered.
    Ignore,
}

/// What kind of ACP client fake-instance claims to be.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClientKind {
    /// LLeMbas: `clientCapabilities._meta.lembas` present.
    #[default]
    Lembas,
    /// An editor: no `_meta.lembas`.
    Plain,
}

/// Whether `scenario` speaks to the device on its standard input and output (`instance.link:
/// stdio`); a section that does not read is no stdio.
pub fn speaks_stdio(scenario: &Scenario) -> bool {
    of(scenario).is_ok_and(|settings| settings.link == LinkKind::Stdio)
}

/// Reads a scenario's `instance:` section (the defaults without one); an error names the file,
/// the section's line and the key at fault.
pub fn of(scenario: &Scenario) -> Result<InstanceSettings, LoadError> {
    read(scenario.instance.as_ref(), "instance", &scenario.source)
}

/// Reads a section typed by this double (`instance:`, `peer.cards`) from what the engine kept.
pub fn read<T: serde::de::DeserializeOwned + Default>(
    section: Option<&Spanned<Value>>,
    name: &str,
    file: &str,
) -> Result<T, LoadError> {
    match section {
        Some(section) => {
            harness::scenario::read_section(section.value.clone(), name, file, section)
        }
        None => Ok(T::default()),
    }
}
