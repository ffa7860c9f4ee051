//! `_lembas/hello`: the first thing the device says on a link, before the instance's
//! `initialize` (its protocol, version, harness spec, the device and its limits), and the limits
//! as the link says them, which `initialize` repeats.

use std::sync::Arc;

use harness::jsonrpc::Peer;
use harness::lembas::{Spec, methods};
use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};

use crate::registry::Registry;

/// What a misbehaving device's hello gets wrong; all off by default.
#[derive(Debug, Clone, Copy, Default)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub(crate) struct Faults {
    /// No hello at protocol 1; at 2, something else first, then hello.
    pub not_first: bool,
    /// Hello twice.
    pub twice: bool,
    /// Hello again, once initialize is answered.
    pub again_after_initialize: bool,
    /// The other protocol than the link's.
    pub other_protocol: bool,
    /// A protocol above any the instance lists.
    pub protocol_three: bool,
    /// The other harness spec than the device's.
    pub other_spec: bool,
    /// A harness spec that does not exist.
    pub unknown_spec: bool,
    pub no_device: bool,
    /// The version as a number.
    pub version_number: bool,
    /// A hello after a change of limits says those of the hello before.
    pub old_limits: bool,
    /// How the limits are said wrong.
    pub limits: LimitsFaults,
}

/// How a misbehaving device says its limits wrong (in hello and in initialize).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LimitsFaults {
    /// On stdio, `false`, not `null`.
    pub stdio_false: bool,
    /// On stdio, the device's own limits to an editor.
    pub stdio_own: bool,
    /// No roots said as a made-up one.
    pub invented_root: bool,
    /// No roots said as `null`, not `[]`.
    pub null_roots: bool,
}

impl Faults {
    /// The faults `m` asks for.
    pub(crate) fn of(m: &Misbehaviours) -> Faults {
        Faults {
            not_first: m.breaks(ids::DEVICE_HELLO_FIRST),
            twice: m.breaks(ids::DEVICE_HELLO_ONCE),
            again_after_initialize: m.breaks_way(ids::DEVICE_HELLO_ONCE, "after_initialize"),
            other_protocol: m.breaks(ids::DEVICE_HELLO_PROTOCOL),
            protocol_three: m.breaks_way(ids::DEVICE_HELLO_PROTOCOL, "three"),
            other_spec: m.breaks(ids::DEVICE_HELLO_SPEC),
            unknown_spec: m.breaks_way(ids::DEVICE_HELLO_SPEC, "unknown"),
            no_device: m.breaks(ids::DEVICE_HELLO_SHAPE),
            version_number: m.breaks_way(ids::DEVICE_HELLO_SHAPE, "version_number"),
            old_limits: m.breaks_way(ids::DEVICE_LIMITS_RELINK, "old_hello"),
            limits: LimitsFaults {
                stdio_false: m.breaks_way(ids::DEVICE_STDIO_LIMITS_NULL, "false"),
                stdio_own: m.breaks(ids::DEVICE_STDIO_LIMITS_NULL),
                invented_root: m.breaks(ids::DEVICE_LIMITS_NO_ROOTS),
                null_roots: m.breaks_way(ids::DEVICE_LIMITS_NO_ROOTS, "null_roots"),
            },
        }
    }
}

/// The limits as the link says them: the device's, or `null` to an editor on stdio.
pub(crate) fn limits(registry: &Registry, stdio: bool, faults: &LimitsFaults) -> Value {
    // Misbehaving: limits said false on stdio, not null.
    if stdio && faults.stdio_false {
        return Value::Bool(false);
    }
    // Misbehaving: the device's own limits to an editor.
    if stdio && !faults.stdio_own {
        return Value::Null;
    }
    let mut limits = registry
        .limits
        .read()
        .map(|l| l.to_value())
        .unwrap_or(Value::Null);
    let no_roots = |limits: &Value| limits["roots"].as_array().is_some_and(Vec::is_empty);
    if faults.invented_root && no_roots(&limits) {
        limits["roots"] = json!([std::env::temp_dir().display().to_string()]);
    }
    if faults.null_roots && no_roots(&limits) {
        // Misbehaving: no roots said as null, not [].
        limits["roots"] = Value::Null;
    }
    limits
}

/// The hello on a link of `protocol` from a device implementing `spec`.
pub(crate) fn payload(
    registry: &Registry,
    spec: Spec,
    stdio: bool,
    protocol: u8,
    faults: &Faults,
) -> Value {
    // Misbehaving: a hello after a change of limits says those of the hello before.
    let stale = registry.said_limits().filter(|_| faults.old_limits);
    registry.said_in_hello();
    let protocol = if faults.other_protocol {
        3 - protocol
    } else {
        protocol
    };
    let spec = if faults.other_spec {
        other_spec(spec)
    } else {
        spec
    };
    let mut hello = json!({
        "protocol": protocol,
        "version": spec.cli_version(),
        "harness_spec": spec.as_str(),
        "device": { "host": "fake-device", "platform": std::env::consts::OS },
        "limits": limits(registry, stdio, &faults.limits),
    });
    if faults.no_device {
        hello.as_object_mut().map(|o| o.remove("device"));
    }
    if faults.version_number {
        hello["version"] = json!(1);
    }
    if faults.unknown_spec {
        // Misbehaving: a harness spec that does not exist.
        hello["harness_spec"] = json!("9.9.9");
    }
    if let Some(stale) = stale {
        hello["limits"] = stale.to_value();
    }
    if faults.protocol_three {
        // Misbehaving: a protocol above any the instance lists.
        hello["protocol"] = json!(3);
    }
    hello
}

/// Says hello on a link that just opened, at `protocol`; `hello` makes each one sent.
pub(crate) fn send(peer: &Arc<Peer>, protocol: u8, faults: &Faults, hello: impl Fn() -> Value) {
    match (faults.not_first, protocol) {
        (false, _) => peer.notify(methods::LEMBAS_HELLO, hello()),
        // Misbehaving: no hello at protocol 1; at 2, something else first, then hello.
        (true, 1) => {}
        (true, _) => {
            peer.notify(
                methods::LEMBAS_SESSION_DELETED,
                json!({ "sessionId": "ses_early" }),
            );
            peer.notify(methods::LEMBAS_HELLO, hello());
        }
    }
    if faults.twice {
        peer.notify(methods::LEMBAS_HELLO, hello());
    }
}

fn other_spec(spec: Spec) -> Spec {
    match spec {
        Spec::V1_0_0 => Spec::V1_1_0,
        Spec::V1_1_0 => Spec::V1_0_0,
    }
}
