//! The cells of the matrix a scenario runs in: which link protocols and spec versions.

use schemars::JsonSchema;
use serde::Deserialize;

/// The cells a scenario applies to.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Matrix {
    /// Link protocols (1, 2). Default: both.
    #[serde(default = "Matrix::all_protocols")]
    pub protocol: Vec<u8>,
    /// Harness spec versions ("1.0.0", "1.1.0"). Default: both.
    #[serde(default = "Matrix::all_specs")]
    pub spec: Vec<String>,
}

impl Matrix {
    fn all_protocols() -> Vec<u8> {
        vec![1, 2]
    }

    fn all_specs() -> Vec<String> {
        vec!["1.0.0".into(), "1.1.0".into()]
    }
}

impl Default for Matrix {
    fn default() -> Self {
        Self {
            protocol: Self::all_protocols(),
            spec: Self::all_specs(),
        }
    }
}
