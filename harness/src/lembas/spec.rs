//! Harness spec versions and what each promises.

use std::fmt;

/// The capabilities of harness spec 1.0.0, in the order of its table.
pub const CAPABILITIES_1_0_0: &[&str] = &[
    "directories",
    "configure",
    "steer",
    "terminal",
    "sessions",
    "status",
    "delete",
    "compact",
    "title",
    "files",
    "commands",
    "attachments",
    "ask",
    "plan",
    "model",
    "turns",
    "shell",
];

/// What harness spec 1.1.0 added (its change note).
pub const ADDED_IN_1_1_0: &[&str] = &["context", "library", "prototypes", "plan_state", "rewind"];

/// A harness spec version (not the link protocol: see the spec README).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Spec {
    /// Harness spec 1.0.0 (the CLI calls itself 1.0.0).
    V1_0_0,
    /// Harness spec 1.1.0 (the CLI calls itself 1.3.0).
    V1_1_0,
}

impl Spec {
    /// Every version, oldest first.
    pub const ALL: [Spec; 2] = [Spec::V1_0_0, Spec::V1_1_0];

    /// Reads `1.0.0` or `1.1.0`.
    pub fn parse(text: &str) -> Option<Spec> {
        match text {
            "1.0.0" => Some(Spec::V1_0_0),
            "1.1.0" => Some(Spec::V1_1_0),
            _ => None,
        }
    }

    /// The version as written in hello and initialize (`harness_spec`).
    pub fn as_str(self) -> &'static str {
        match self {
            Spec::V1_0_0 => "1.0.0",
            Spec::V1_1_0 => "1.1.0",
        }
    }

    /// The CLI version that implements it (`version` in hello, `agentInfo.version`).
    pub fn cli_version(self) -> &'static str {
        match self {
            Spec::V1_0_0 => "1.0.0",
            Spec::V1_1_0 => "1.3.0",
        }
    }

    /// Every capability this spec defines.
    pub fn capabilities(self) -> Vec<&'static str> {
        let mut all = CAPABILITIES_1_0_0.to_vec();
        if self >= Spec::V1_1_0 {
            all.extend_from_slice(ADDED_IN_1_1_0);
        }
        all
    }

    /// Whether `capability` exists in this spec.
    pub fn defines(self, capability: &str) -> bool {
        self.capabilities().contains(&capability)
    }
}

impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A version this suite does not implement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no harness spec `{0}`: this suite implements {versions}", versions = Spec::ALL.map(Spec::as_str).join(", "))]
pub struct UnknownSpec(pub String);

impl std::str::FromStr for Spec {
    type Err = UnknownSpec;

    fn from_str(text: &str) -> Result<Spec, UnknownSpec> {
        Spec::parse(text).ok_or_else(|| UnknownSpec(text.to_string()))
    }
}

/// Written as its version (`"1.1.0"`), as in hello and in reports.
impl serde::Serialize for Spec {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_1_0_0_lacks_what_1_1_0_added() {
        for added in ADDED_IN_1_1_0 {
            assert!(!Spec::V1_0_0.defines(added));
            assert!(Spec::V1_1_0.defines(added));
        }
        assert_eq!(Spec::V1_1_0.cli_version(), "1.3.0");
        assert_eq!(Spec::parse("1.1.0"), Some(Spec::V1_1_0));
        assert_eq!(Spec::parse("1.2.0"), None);
        let unknown = "1.2.0".parse::<Spec>().unwrap_err().to_string();
        assert!(
            unknown.contains("1.2.0") && unknown.contains("1.0.0, 1.1.0"),
            "{unknown}"
        );
        assert_eq!(serde_json::to_value(Spec::V1_0_0).unwrap(), "1.0.0");
    }
}
