//! The scenario language (v1): the model, its loading with located errors, and the catalogue
//! of scenarios compiled into the binaries.
//!
//! The reference for scenario authors is `docs/book/src/scenario-format.md`; the JSON Schema for editors
//! is `docs/scenario.schema.json`, generated from these types (see [`schema::json_schema`]).

pub mod catalogue;
pub mod load;
pub mod model;
pub mod schema;

pub use crate::duration::Dur;
pub use crate::family::Family;
pub use load::{
    LoadError, Reader, Side, check_actions, load_file, load_str, load_str_for, load_yaml_file,
    load_yaml_str, read_section,
};
pub use model::*;
/// A value with the line it was written on (steps and handlers carry it, for reports).
pub use serde_saphyr::Spanned;
