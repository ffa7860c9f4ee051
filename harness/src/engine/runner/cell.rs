//! The cell of the test matrix a run is in: the protocol and spec every scenario may read.

use serde::Serialize;
use serde_json::json;

use crate::pattern::Vars;

/// One cell of the matrix: the link protocol and the harness spec of this run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cell {
    /// The link protocol (1 or 2).
    pub protocol: u8,
    /// The harness spec.
    pub spec: crate::lembas::Spec,
}

impl Cell {
    /// The variables every scenario has: `protocol`, `spec`, `url` (the double's own URL, or the
    /// instance's for fake-device), `token` and `tmp` (a directory of the run's own).
    pub fn builtin_vars(&self, url: &str, token: &str, tmp: &std::path::Path) -> Vars {
        let mut vars = Vars::default();
        vars.set("protocol", json!(self.protocol));
        vars.set("spec", json!(self.spec));
        vars.set("url", json!(url));
        vars.set("token", json!(token));
        vars.set("tmp", json!(tmp.display().to_string()));
        vars
    }
}

impl std::fmt::Display for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "protocol {} · spec {}", self.protocol, self.spec)
    }
}
