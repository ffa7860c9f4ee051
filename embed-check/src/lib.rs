//! Nothing: this crate is its test, `tests/embedding.rs`, which embeds both doubles while
//! depending on their crates alone (and tokio), as a user's Rust test does (issue 35).
