//! `initialize`: what the client says of itself (`_meta.lembas`: whether it speaks LLeMbas, at
//! which protocol), the device's answer (its capabilities, limits and connection), what
//! follows the answer on a new link (the shared session's announce, the `left`s and deletes
//! kept while no link was up), and the instance's order: initialize first, and soon after hello.

use std::sync::Arc;
use std::time::Duration;

use harness::finding::Finding;
use harness::jsonrpc::{INVALID_REQUEST, Peer, RpcError};
use harness::lembas::{Spec, methods};
use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};

use super::session_announce;
use crate::registry::Registry;

/// The capabilities that come only with `remote.terminal: true`.
const TERMINAL_ONLY: [&str; 2] = ["terminal", "shell"];

/// How a misbehaving device lists its capabilities; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CapabilityFaults {
    /// The terminal capabilities though `remote.terminal` is off.
    pub terminal_unasked: bool,
    /// `commands` left out of the list (its updates are still sent).
    pub no_commands: bool,
    /// A capability its spec does not have.
    pub foreign: bool,
}

impl CapabilityFaults {
    /// The faults `m` asks for.
    pub(crate) fn of(m: &Misbehaviours) -> CapabilityFaults {
        CapabilityFaults {
            terminal_unasked: m.breaks(ids::DEVICE_CAPABILITIES_TERMINAL_CONFIG),
            no_commands: m.breaks(ids::DEVICE_COMMANDS_CAPABILITY),
            foreign: m.breaks(ids::DEVICE_INITIALIZE_CAPABILITIES),
        }
    }
}

/// What a misbehaving device's initialize gets wrong; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// An editor that says `_meta.lembas` is taken for LLeMbas on stdio too.
    pub stdio_lembas: bool,
    /// A `_meta.lembas` naming no protocol is taken for no LLeMbas.
    pub unnamed_protocol_plain: bool,
    /// A `_meta.lembas` naming no protocol is read as protocol 2.
    pub unnamed_protocol_two: bool,
    /// The answer names the other protocol than hello did.
    pub other_protocol: bool,
    /// The answer has no `agentInfo`.
    pub no_agent_info: bool,
    /// An ACP protocol version the spec does not say.
    pub protocol_version: bool,
    /// A capability listed as an object, not a string.
    pub capability_object: bool,
    /// The answer names one root more than hello did.
    pub extra_root: bool,
    /// The answer names another `max_mode` than hello did.
    pub other_max_mode: bool,
    /// Deletes kept while no link was up are never sent (protocol 1) or never forgotten (2).
    pub deletes_kept: bool,
    /// The first link after the delete gets none of the kept deletes; the next does.
    pub deletes_late: bool,
}

impl Faults {
    /// The faults `m` asks for.
    pub(crate) fn of(m: &Misbehaviours) -> Faults {
        Faults {
            stdio_lembas: m.breaks(ids::DEVICE_STDIO_PLAIN_ACP),
            unnamed_protocol_plain: m.breaks_way(ids::DEVICE_CLIENT_PROTOCOL_ABSENT, "plain"),
            unnamed_protocol_two: m.breaks(ids::DEVICE_CLIENT_PROTOCOL_ABSENT),
            // Broken in hello or in initialize alone, the two disagree.
            other_protocol: m.breaks(ids::DEVICE_HELLO_PROTOCOL)
                != m.breaks(ids::DEVICE_INITIALIZE_PROTOCOL),
            no_agent_info: m.breaks(ids::DEVICE_INITIALIZE_RESULT),
            protocol_version: m.breaks_way(ids::DEVICE_INITIALIZE_RESULT, "protocol_version"),
            capability_object: m.breaks_way(ids::DEVICE_INITIALIZE_CAPABILITIES, "not_string"),
            extra_root: m.breaks_way(ids::DEVICE_INITIALIZE_MATCHES_HELLO, "extra_root"),
            other_max_mode: m.breaks(ids::DEVICE_INITIALIZE_MATCHES_HELLO),
            deletes_kept: m.breaks(ids::DEVICE_DELETED_PENDING),
            deletes_late: m.breaks_way(ids::DEVICE_DELETED_PENDING, "one_link_late"),
        }
    }
}

/// The capabilities listed in initialize: the spec's, less the terminal ones unless remote
/// terminals are on (`shell` comes only with `terminal`), reduced to `only` when given.
pub(crate) fn capabilities(
    spec: Spec,
    only: Option<&[String]>,
    terminal: bool,
    faults: &CapabilityFaults,
) -> Vec<&'static str> {
    // The spec's own names, not copies: a fleet keeps this list twice a device.
    let mut list: Vec<&'static str> = spec
        .capabilities()
        .into_iter()
        // Misbehaving: the terminal capabilities though `remote.terminal` is off.
        .filter(|c| terminal || faults.terminal_unasked || !TERMINAL_ONLY.contains(c))
        .filter(|c| only.is_none_or(|only| only.iter().any(|o| o == c)))
        .collect();
    if faults.no_commands {
        // Misbehaving: `commands` left out of the list (its updates are still sent).
        list.retain(|c| *c != "commands");
    }
    if faults.foreign {
        list.push(if spec == Spec::V1_0_0 {
            "rewind"
        } else {
            "shell"
        });
    }
    list
}

/// What the client said of itself in initialize.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClientSaid {
    /// It speaks LLeMbas.
    pub lembas: bool,
    /// The protocol it says it speaks (1 when it names none).
    pub protocol: u8,
}

/// Reads `clientCapabilities._meta.lembas`: `true` is protocol 1, `{protocol: N}` says N; false
/// or null is no LLeMbas. On stdio the client is an editor whatever it says: plain ACP only.
pub(crate) fn client_said(params: &Value, stdio: bool, faults: &Faults) -> ClientSaid {
    let said = params.pointer("/clientCapabilities/_meta/lembas");
    // Misbehaving: an editor that says `_meta.lembas` is taken for LLeMbas on stdio too.
    let lembas = (!stdio || faults.stdio_lembas)
        && said.is_some_and(|l| l.as_bool() == Some(true) || l.is_object())
        // Misbehaving: a `_meta.lembas` naming no protocol is taken for no LLeMbas.
        && !(faults.unnamed_protocol_plain && said.is_some_and(|l| l.get("protocol").is_none()));
    // Misbehaving: a `_meta.lembas` naming no protocol is read as protocol 2.
    let unsaid = if faults.unnamed_protocol_two { 2 } else { 1 };
    let protocol = said
        .and_then(|l| l.get("protocol"))
        .and_then(Value::as_u64)
        .map_or(unsaid, |p| u8::try_from(p).unwrap_or(u8::MAX));
    ClientSaid { lembas, protocol }
}

/// Who the device is, for its answer.
pub(crate) struct Device<'a> {
    /// The harness spec it implements.
    pub spec: Spec,
    /// Its name for the instance.
    pub connection: &'a str,
    /// The capabilities it lists.
    pub capabilities: &'a [&'static str],
    /// Its limits, as the link says them.
    pub limits: Value,
}

/// The answer to initialize on a link whose hello said `protocol`.
pub(crate) fn result(device: Device, protocol: u8, faults: &Faults) -> Value {
    let protocol = if faults.other_protocol {
        3 - protocol
    } else {
        protocol
    };
    let spec = device.spec;
    let takes_attachments = device.capabilities.contains(&"attachments");
    let mut result = json!({
        "protocolVersion": 1,
        "agentCapabilities": {
            "loadSession": false,
            "promptCapabilities": { "image": takes_attachments, "audio": false, "embeddedContext": takes_attachments },
            "mcpCapabilities": { "http": false, "sse": false }
        },
        "authMethods": [],
        "agentInfo": { "name": "LLeMbas CLI", "version": spec.cli_version() },
        "_meta": { "lembas": {
            "protocol": protocol,
            "harness_spec": spec.as_str(),
            "limits": device.limits,
            "connection": device.connection,
            "capabilities": device.capabilities,
        }}
    });
    if faults.no_agent_info {
        result.as_object_mut().map(|o| o.remove("agentInfo"));
    }
    if faults.protocol_version {
        // Misbehaving: an ACP protocol version the spec does not say.
        result["protocolVersion"] = json!(2);
    }
    if faults.capability_object
        && let Some(list) = result
            .pointer_mut("/_meta/lembas/capabilities")
            .and_then(Value::as_array_mut)
    {
        // Misbehaving: a capability listed as an object, not a string.
        list.push(json!({ "name": "turns" }));
    }
    if faults.extra_root
        && let Some(roots) = result
            .pointer_mut("/_meta/lembas/limits/roots")
            .and_then(Value::as_array_mut)
    {
        // Misbehaving: initialize names one root more than hello did.
        roots.push(json!(
            std::env::temp_dir().join("elsewhere").display().to_string()
        ));
    }
    if faults.other_max_mode
        && let Some(limits) = result.pointer_mut("/_meta/lembas/limits")
        && limits.is_object()
    {
        // Misbehaving: initialize names another max_mode than hello did.
        let other = if limits["max_mode"] == "manual" {
            "auto"
        } else {
            "manual"
        };
        limits["max_mode"] = json!(other);
    }
    result
}

/// The link a follow-up goes on, as its initialize left it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Relink {
    /// The client speaks LLeMbas.
    pub lembas: bool,
    /// The link's protocol.
    pub protocol: u8,
    /// A shared session was announced on some link before this one.
    pub announced_before: bool,
}

/// What follows initialize's answer on a new link, to a LLeMbas client: the shared session's
/// announce (`announce` sends it), the `left`s kept from the last link, and the deletes made
/// while no link was up (then forgotten).
pub(crate) fn follow_up(
    peer: &Arc<Peer>,
    registry: &Registry,
    faults: (&Faults, &session_announce::Faults),
    link: Relink,
    announce: impl FnOnce(),
) {
    let (faults, announcing) = faults;
    let Relink {
        lembas,
        protocol,
        announced_before,
    } = link;
    if lembas
        && announced_before
        && announcing.other_id_again
        && let Some(cwd) = registry.terminal_session().and_then(|_| {
            let limits = registry.limits.read().ok()?;
            limits.roots.first().cloned()
        })
    {
        // Misbehaving: a new link hears of a made-up session in place of the shared one.
        peer.notify(
            methods::LEMBAS_SESSION_ANNOUNCE,
            session_announce::made_up(&cwd),
        );
    } else if lembas && !(announced_before && announcing.not_again) {
        announce();
    }
    // Misbehaving (device.left.shape/next_link): the `left`s kept from the last link.
    let kept: Vec<String> = registry
        .lefts_kept
        .lock()
        .map(|mut kept| std::mem::take(&mut *kept))
        .unwrap_or_default();
    for id in kept.into_iter().filter(|_| lembas) {
        peer.notify(
            methods::LEMBAS_SESSION_LEFT,
            json!({ "sessionId": id, "available": true }),
        );
    }
    match (
        lembas && registry.has("delete"),
        faults.deletes_kept,
        protocol,
    ) {
        // Misbehaving: the first link after the delete gets none of them; the next does.
        (true, false, _) if !announced_before && faults.deletes_late => {}
        (true, false, _) => registry.send_pending_deletes(peer, true),
        // Misbehaving: at protocol 1 it never sends them; at 2 it never forgets them.
        (true, true, 2) => registry.send_pending_deletes(peer, false),
        _ => {}
    }
}

/// The device's refusal of a request that came before initialize was answered, as the official
/// ACP SDKs refuse it.
pub(crate) fn refusal(method: &str) -> RpcError {
    RpcError::new(
        INVALID_REQUEST,
        format!("ACP connection must be initialized before '{method}'"),
    )
}

/// The instance sent a request (or notification) before initialize was answered.
pub(crate) fn came_early(what: &str, method: &str) -> Finding {
    Finding::new(
        ids::INSTANCE_INITIALIZE_FIRST,
        format!(
            "the {what} `{method}` came before the device had answered initialize; a device on the official ACP SDK refuses such a request with -32600"
        ),
    )
}

/// The instance sent no initialize within `patience` of hello.
pub(crate) fn never_came(patience: Duration) -> Finding {
    Finding::new(
        ids::INSTANCE_INITIALIZE_AFTER_HELLO,
        format!("no initialize within {patience:?} of hello"),
    )
}

/// An initialize came again on `link`, already initialized, while `waiting`'s hello still
/// waits for one: the answer to that hello went on the wrong link.
pub(crate) fn came_again(link: u32, waiting: u32) -> Finding {
    Finding::new(
        ids::INSTANCE_INITIALIZE_AFTER_HELLO,
        format!(
            "initialize came again on link {link}, already initialized, while link {waiting}'s hello still waits for one"
        ),
    )
    .on_link(waiting)
}
