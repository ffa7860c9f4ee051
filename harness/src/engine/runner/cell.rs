//! The cell of the test matrix a run is in: for LLeMbas, the link protocol and the harness spec
//! every scenario may read; lvmh has one version, so one cell of its own.

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::json;

use crate::family::Family;
use crate::lembas::Spec;
use crate::pattern::Vars;

/// One cell of the matrix a run is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cell {
    /// A LLeMbas link: the link protocol (1 or 2) and the harness spec.
    Lembas {
        /// The link protocol (1 or 2).
        protocol: u8,
        /// The harness spec.
        spec: Spec,
    },
    /// The lvmh link, which has one version (the envelope's `v: 1`).
    Lvmh,
}

impl Cell {
    /// The newest LLeMbas cell: what a double runs in unless told otherwise.
    pub const LATEST: Cell = Cell::lembas(2, Spec::V1_1_0);

    /// A LLeMbas cell.
    pub const fn lembas(protocol: u8, spec: Spec) -> Cell {
        Cell::Lembas { protocol, spec }
    }

    /// The family whose link the cell is of.
    pub fn family(&self) -> Family {
        match self {
            Cell::Lembas { .. } => Family::Lembas,
            Cell::Lvmh => Family::Lvmh,
        }
    }

    /// The link protocol: lvmh's is its one version, 1, which is what a catalogue rule's
    /// protocol filter and the `{protocol}` placeholder read for it.
    pub fn protocol(&self) -> u8 {
        match self {
            Cell::Lembas { protocol, .. } => *protocol,
            Cell::Lvmh => 1,
        }
    }

    /// The harness spec, which only a LLeMbas link has.
    pub fn spec(&self) -> Option<Spec> {
        match self {
            Cell::Lembas { spec, .. } => Some(*spec),
            Cell::Lvmh => None,
        }
    }

    /// The harness spec a LLeMbas double serves: a LLeMbas double never runs in the lvmh
    /// cell (an lvmh run is the plugin's or the daemon's), so there it is simply the newest.
    pub fn lembas_spec(&self) -> Spec {
        self.spec().unwrap_or(Spec::V1_1_0)
    }

    /// Whether a catalogue rule, a step or a matrix limited to these specs holds here (lvmh is
    /// never limited by a spec: it has none).
    pub fn spec_is(&self, spec: &str) -> bool {
        self.spec().is_none_or(|s| s.as_str() == spec)
    }

    /// The same cell for another harness spec (an lvmh cell has none to change).
    pub fn with_spec(self, spec: Spec) -> Cell {
        match self {
            Cell::Lembas { protocol, .. } => Cell::lembas(protocol, spec),
            Cell::Lvmh => Cell::Lvmh,
        }
    }

    /// The cell as a file name's part: `protocol-2.spec-1.1.0`, or `lvmh-v1`.
    pub fn slug(&self) -> String {
        match self {
            Cell::Lembas { protocol, spec } => format!("protocol-{protocol}.spec-{spec}"),
            Cell::Lvmh => "lvmh-v1".to_string(),
        }
    }

    /// The order runs are listed in: each spec's cells by protocol, then lvmh's.
    pub fn listing_key(&self) -> (Family, Option<Spec>, u8) {
        (self.family(), self.spec(), self.protocol())
    }

    /// The cells a scenario runs in: an lvmh scenario's one, or each of its matrix's protocols
    /// with each spec this suite implements.
    pub fn all_of(scenario: &crate::scenario::Scenario) -> Vec<Cell> {
        if scenario.family == Family::Lvmh {
            return vec![Cell::Lvmh];
        }
        let specs: Vec<Spec> = scenario
            .matrix
            .spec
            .iter()
            .filter_map(|s| s.parse().ok())
            .collect();
        scenario
            .matrix
            .protocol
            .iter()
            .flat_map(|protocol| specs.iter().map(|spec| Cell::lembas(*protocol, *spec)))
            .collect()
    }

    /// The variables every scenario has: `protocol`, `spec` (LLeMbas only), `url` (the double's
    /// own URL, or the instance's for fake-device), `token` and `tmp` (a directory of the run's
    /// own).
    pub fn builtin_vars(&self, url: &str, token: &str, tmp: &std::path::Path) -> Vars {
        let mut vars = Vars::default();
        vars.set("protocol", json!(self.protocol()));
        if let Some(spec) = self.spec() {
            vars.set("spec", json!(spec));
        }
        vars.set("url", json!(url));
        vars.set("token", json!(token));
        vars.set("tmp", json!(tmp.display().to_string()));
        vars
    }
}

impl Default for Cell {
    fn default() -> Self {
        Cell::LATEST
    }
}

impl std::fmt::Display for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cell::Lembas { protocol, spec } => write!(f, "protocol {protocol} · spec {spec}"),
            Cell::Lvmh => f.write_str("lvmh v1"),
        }
    }
}

/// A LLeMbas cell is `{"protocol": 2, "spec": "1.1.0"}` in reports, as it always was; lvmh's
/// says its family and version instead of borrowing those.
impl Serialize for Cell {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        match self {
            Cell::Lembas { protocol, spec } => {
                map.serialize_entry("protocol", protocol)?;
                map.serialize_entry("spec", spec)?;
            }
            Cell::Lvmh => {
                map.serialize_entry("family", &Family::Lvmh)?;
                map.serialize_entry("version", &1)?;
            }
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_lvmh_cell_says_lvmh_and_borrows_no_llembas_spec() {
        assert_eq!(Cell::Lvmh.to_string(), "lvmh v1");
        assert_eq!(
            serde_json::to_value(Cell::Lvmh).unwrap(),
            json!({"family": "lvmh", "version": 1})
        );
        assert_eq!(Cell::Lvmh.spec(), None);
        assert!(Cell::Lvmh.spec_is("1.0.0"));
    }

    #[test]
    fn a_lembas_cell_reads_and_serializes_as_before() {
        let cell = Cell::lembas(1, Spec::V1_0_0);
        assert_eq!(cell.to_string(), "protocol 1 · spec 1.0.0");
        assert_eq!(
            serde_json::to_value(cell).unwrap(),
            json!({"protocol": 1, "spec": "1.0.0"})
        );
        assert!(cell.spec_is("1.0.0") && !cell.spec_is("1.1.0"));
    }
}
