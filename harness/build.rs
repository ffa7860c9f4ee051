//! Rebuild when a shipped scenario or the rule catalogue changes: `include_dir!` and
//! `include_str!` of a folder are not tracked by cargo on stable Rust.
fn main() {
    println!("cargo:rerun-if-changed=../scenarios");
    println!("cargo:rerun-if-changed=../conformance");
}
