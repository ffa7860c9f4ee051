//! The `fake-device` command: [`fake_device::cli::main`].

/// mimalloc, not the system's allocator: why is in the workspace's Cargo.toml.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    fake_device::cli::main()
}
