//! Reading what the engine keeps as written for a double to type: its settings sections and the
//! actions of `act` steps. The engine knows neither vocabulary, so the double calls these with
//! its own types, and gets errors located like the loader's own.

use serde_saphyr::Spanned;

use super::error::{LoadError, span_of};
use crate::scenario::model::Step;

/// Reads a section the engine kept as written (`instance:`, `device:`, the peer's set-up) as a
/// double's own type `T`; an error names the file, the line `at` was written on, and the key at
/// fault under `name` (`instance.http.scripts[0].reply.colour`).
pub fn read_section<T: serde::de::DeserializeOwned, S>(
    value: serde_json::Value,
    name: &str,
    file: &str,
    at: &Spanned<S>,
) -> Result<T, LoadError> {
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let path = e.path().to_string();
        let key_path = if path == "." {
            name.to_string()
        } else {
            format!("{name}.{path}")
        };
        LoadError::found(file, span_of(at), key_path, e.into_inner().to_string())
    })
}

/// Checks every `act` of `steps` (nested ones too) against `A`, the action type of the double
/// that does them: the engine knows no double's actions, the double's type does. The first
/// action that does not read as an `A` is an error with its step's line and the key at fault
/// (`steps[3].act.open_chat.bogus`). `base` names the list (`steps`, `peer.steps`).
pub fn check_actions<A: serde::de::DeserializeOwned>(
    steps: &[Spanned<Step>],
    base: &str,
    file: &str,
) -> Result<(), LoadError> {
    for (i, step) in steps.iter().enumerate() {
        let path = format!("{base}[{i}]");
        match &step.value {
            Step::Act(act) => {
                if let Err(e) = serde_path_to_error::deserialize::<_, A>(act.action()) {
                    let at = e.path().to_string();
                    let key_path = if at == "." {
                        format!("{path}.act")
                    } else {
                        format!("{path}.act.{at}")
                    };
                    let message = e.into_inner().to_string();
                    return Err(LoadError::found(file, span_of(step), key_path, message));
                }
            }
            Step::When(when) => {
                check_actions::<A>(&when.steps, &format!("{path}.when.steps"), file)?
            }
            Step::AnyOrder(inner) => check_actions::<A>(inner, &format!("{path}.any_order"), file)?,
            _ => {}
        }
    }
    Ok(())
}
