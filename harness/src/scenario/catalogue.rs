//! The scenarios shipped with the suite, compiled into the binaries so that
//! `fake-instance --scenario negotiate.yaml` works from any directory after `cargo install`.

use include_dir::{Dir, include_dir};

use super::load::{LoadError, Reader, Side, load_file, load_str, load_str_for};
use super::model::Scenario;
use crate::family::Family;

static SCENARIOS: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/../scenarios");

/// A scenario compiled into the binary.
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct Embedded {
    /// Which double runs it.
    pub side: Side,
    /// The protocol family it speaks (from its folder).
    pub family: Family,
    /// Its file name (`negotiate.yaml`).
    pub file: &'static str,
    pub text: &'static str,
}

impl Embedded {
    /// How errors name it: `scenarios/instance/negotiate.yaml (embedded)`.
    pub fn label(&self) -> String {
        format!(
            "scenarios/{}{}/{} (embedded)",
            self.family.folder(),
            self.side.folder(),
            self.file
        )
    }

    /// Loads it.
    pub fn load(&self) -> Result<Scenario, LoadError> {
        self.in_its_family(load_str(self.text, &self.label(), Some(self.side))?)
    }

    /// Loads it as `harness selftest` runs it (its `selftest.vars` over its `vars:`).
    pub fn load_for_selftest(&self) -> Result<Scenario, LoadError> {
        self.in_its_family(load_str_for(
            self.text,
            &self.label(),
            Some(self.side),
            Reader::Selftest,
        )?)
    }

    /// The scenario, if it says the family of the folder it is in.
    fn in_its_family(&self, scenario: Scenario) -> Result<Scenario, LoadError> {
        if scenario.family == self.family {
            return Ok(scenario);
        }
        Err(LoadError {
            file: self.label(),
            line: None,
            column: None,
            key_path: Some("family".into()),
            message: format!(
                "says family `{}`, but it is in the folder of family `{}`",
                scenario.family, self.family
            ),
            snippet: None,
        })
    }
}

/// The embedded LLeMbas scenarios of one double, sorted by file name.
pub fn embedded(side: Side) -> Vec<Embedded> {
    embedded_of(side, Family::Lembas)
}

/// The embedded scenarios of one double in one family, sorted by file name.
pub fn embedded_of(side: Side, family: Family) -> Vec<Embedded> {
    let folder = format!("{}{}", family.folder(), side.folder());
    let mut found: Vec<Embedded> = SCENARIOS
        .get_dir(folder.as_str())
        .into_iter()
        .flat_map(|dir| dir.files())
        .filter_map(|file| {
            let name = file.path().file_name()?.to_str()?;
            if !(name.ends_with(".yaml") || name.ends_with(".yml")) {
                return None;
            }
            Some(Embedded {
                side,
                family,
                file: name,
                text: file.contents_utf8()?,
            })
        })
        .collect();
    found.sort_by_key(|e| e.file);
    found
}

/// Finds a scenario: a file path if one exists there, else an embedded one by file name (with
/// or without `.yaml`).
pub fn resolve(arg: &str, side: Side) -> Result<Scenario, LoadError> {
    resolve_in(arg, side, Family::Lembas)
}

/// [`resolve`] in `family`: a file path (whatever family it says), or an embedded scenario of
/// that family by file name.
pub fn resolve_in(arg: &str, side: Side, family: Family) -> Result<Scenario, LoadError> {
    let path = std::path::Path::new(arg);
    if path.is_file() {
        return load_file(path, Some(side));
    }
    let wanted = arg
        .trim_start_matches(family.folder())
        .trim_start_matches(&format!("{}/", side.folder()))
        .to_string();
    let embedded = |side| embedded_of(side, family);
    let found = embedded(side)
        .into_iter()
        .find(|e| e.file == wanted || e.file.trim_end_matches(".yaml") == wanted);
    match found {
        Some(e) => e.load(),
        None => Err(LoadError {
            file: arg.to_string(),
            line: None,
            column: None,
            key_path: None,
            message: format!(
                "no such file, and no embedded {} {family} scenario of that name (see --list-scenarios: {})",
                side.double(),
                embedded(side)
                    .iter()
                    .map(|e| e.file)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            snippet: None,
        }),
    }
}
