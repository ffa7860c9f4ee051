//! The library behind the `harness` command, so its tests can drive the self-test directly.
#![warn(missing_docs)]

pub mod selftest;
