//! A port for a server the run starts and tells where to listen (`{port}`).
//!
//! Asking the OS for a free port (binding port 0) and handing its number on is a race: once the
//! probe's socket closes, the next bind to port 0 anywhere on the machine, or the next outgoing
//! connection's local end, may be given the same number before the server binds it. With two
//! matrices at once on one machine (a CI job, or `cargo test`'s threads), a server under test
//! then shares its port with another run's double, and each run talks to the wrong peer. So the
//! port is drawn from below the OS's ephemeral range, which neither a port-0 bind nor an outgoing
//! connection ever takes, and only kept if it binds now.

use std::net::TcpListener;

/// Where Linux's ephemeral range starts by default; other systems start it higher.
const DEFAULT_EPHEMERAL_LOW: u16 = 32768;
/// The lowest port drawn: above the well-known and most registered services' ports.
const LOWEST: u16 = 15000;
/// How many draws are tried before falling back to the OS's choice.
const DRAWS: usize = 64;

/// A port on 127.0.0.1 that is free now and outside the OS's ephemeral range, or, when none of
/// the draws binds, one the OS chose.
pub fn free_port() -> std::io::Result<u16> {
    let highest = ephemeral_low().saturating_sub(1);
    if highest > LOWEST {
        for _ in 0..DRAWS {
            // Not the run's seeded randomness: two runs with one seed must not draw one port.
            let port = rand::random_range(LOWEST..=highest);
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    Ok(TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port())
}

/// The first port of the OS's ephemeral range (Linux's setting, else its default).
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(DEFAULT_EPHEMERAL_LOW)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drawn_port_is_free_and_below_the_ephemeral_range() {
        for _ in 0..20 {
            let port = free_port().expect("a port");
            assert!(port >= LOWEST && port < ephemeral_low(), "{port}");
            TcpListener::bind(("127.0.0.1", port)).expect("it is free");
        }
    }
}
