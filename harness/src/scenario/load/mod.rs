//! Loading a scenario: YAML to the model, then the checks YAML cannot express, every error
//! naming the file, line, column and key path at fault.
//!
//! The parts, by job: `error` is the error and where it points, `yaml` reads text with
//! located errors, `variables` reads the variables ahead of the rest, `checks` and `steps`
//! check the scenario and its steps, `rules` its ties to the rule catalogue, and `sections`
//! reads what a double types itself.

use std::path::Path;

use super::model::Scenario;

mod checker;
mod checks;
mod error;
mod rules;
mod sections;
mod steps;
mod variables;
mod who;
mod yaml;

pub use error::LoadError;
pub use rules::unruled;
pub use sections::{check_actions, read_section};
pub use steps::step_key;
pub use who::{Reader, Side};
pub(crate) use yaml::parse;

/// Reads and checks a scenario file.
pub fn load_file(path: &Path, side: Option<Side>) -> Result<Scenario, LoadError> {
    let (text, file) = yaml::read(path)?;
    load_str(&text, &file, side.or_else(|| Side::from_path(path)))
}

/// Reads a YAML file as a `T` of a double's own (fake-device's `--scripts`), with the same
/// located errors as a scenario and the same reading of YAML (only `true`/`false` are booleans).
pub fn load_yaml_file<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, LoadError> {
    let (text, file) = yaml::read(path)?;
    parse(&text, &file)
}

/// Reads YAML text as a `T` of a double's own (a workload), with [`load_yaml_file`]'s located
/// errors; `file` names it in them.
pub fn load_yaml_str<T: serde::de::DeserializeOwned>(
    text: &str,
    file: &str,
) -> Result<T, LoadError> {
    parse(text, file)
}

/// Parses and checks a scenario from text; `file` names it in errors.
pub fn load_str(text: &str, file: &str, side: Option<Side>) -> Result<Scenario, LoadError> {
    load_str_for(text, file, side, Reader::Peer)
}

/// [`load_str`] for `reader`: the variables it sees are set before anything else is read, so
/// a duration written `${name}` takes their value.
pub fn load_str_for(
    text: &str,
    file: &str,
    side: Option<Side>,
    reader: Reader,
) -> Result<Scenario, LoadError> {
    let variables = variables::variables_of(text, file, reader)?;
    let mut scenario: Scenario =
        crate::duration::with_variables(variables.clone(), || parse(text, file))?;
    scenario.vars = variables;
    scenario.source = file.to_string();
    checks::check(&scenario, file, side, text)?;
    if scenario.family == crate::family::Family::Lvmh {
        // lvmh has one version (the envelope's `v: 1`), so one cell, and no matrix to say.
        checks::check_lvmh(&scenario, file, text)?;
    }
    Ok(scenario)
}
