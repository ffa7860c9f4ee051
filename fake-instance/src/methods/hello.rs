//! `_lembas/hello`, the device's first word on a link: that it comes first (and in time, and
//! once), what the instance checks in it (its shape, the protocol the discovery allows, the spec
//! and the CLI's version), and the 4400 close of a link whose protocol this instance cannot
//! speak, with the redial that must not follow.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use harness::engine::Hub;
use harness::finding::Finding;
use harness::jsonrpc::Peer;
use harness::lembas::{CLOSE_PROTOCOL_MISMATCH, Spec, methods};
use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};

use crate::methods::links::{Links, OnLink, lock};
use crate::monitor::shape;

/// What the instance gets wrong about hello on purpose; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// Keeps a link whose hello says a protocol this instance cannot speak.
    pub keeps_unspoken_link: bool,
    /// Closes that link as a policy violation (1008), not with 4400.
    pub other_code: bool,
}

impl Faults {
    /// The hello faults among `misbehave`.
    pub(crate) fn of(misbehave: &Misbehaviours) -> Self {
        Self {
            keeps_unspoken_link: misbehave.breaks(ids::INSTANCE_LINK_CLOSE_4400),
            other_code: misbehave.breaks_way(ids::INSTANCE_LINK_CLOSE_4400, "other_code"),
        }
    }
}

/// How soon after a 4400 close a device's new link counts as a redial.
const REDIAL_WINDOW: Duration = Duration::from_secs(30);

/// When this instance last closed each device's link with 4400.
#[derive(Debug, Default)]
pub(crate) struct Closed4400(Mutex<HashMap<String, Instant>>);

/// On stdio (an editor's link) no hello comes, and no other `_lembas` message may; on a
/// device's link its first message is its hello.
pub(crate) fn first_message(link: &OnLink<'_>, method: &str, stdio: bool) {
    if stdio {
        if method.starts_with("_lembas/") {
            link.found(Finding::new(
                ids::DEVICE_STDIO_PLAIN_ACP,
                format!("`{method}` to an editor on serve --stdio"),
            ));
        }
        return;
    }
    let mut links = lock(link.links);
    let state = links.entry(link.peer.link()).or_default();
    let first = !state.spoke;
    state.spoke = true;
    if first && method != methods::LEMBAS_HELLO {
        link.found(Finding::new(
            ids::DEVICE_HELLO_FIRST,
            format!("the device's first message is `{method}`, not `_lembas/hello`"),
        ));
    }
}

/// A device that never says hello would leave the link silent forever: say so, and close it
/// (1008, a policy violation) rather than hold its socket for good.
pub(crate) fn watch_for_hello(hub: &Arc<Hub>, peer: &Arc<Peer>, links: &Links, patience: Duration) {
    let (links, link) = (links.clone(), peer.link());
    let finding = Finding::new(
        ids::DEVICE_HELLO_FIRST,
        format!("no hello within {patience:?} of the link opening"),
    );
    let close = Some((1008, "no hello in time"));
    hub.watchdog(peer, patience, finding, close, move || {
        links
            .lock()
            .map(|l| l.get(&link).is_some_and(|s| s.hello_protocol.is_some()))
            .unwrap_or(true)
    });
}

/// Judges the device's hello (`allowed`: the protocol the discovery served allows) and closes
/// a link whose protocol this instance cannot speak. The protocol to initialize the link at;
/// none when the link is done with (a second hello, a 4400 close).
pub(crate) fn on_hello(
    link: &OnLink<'_>,
    params: &Value,
    allowed: u8,
    spec: Spec,
    closed: &Closed4400,
    faults: Faults,
) -> Option<u8> {
    for finding in check_hello(params, allowed, spec) {
        link.found(finding);
    }
    let said = params
        .get("protocol")
        .and_then(Value::as_u64)
        .and_then(|p| u8::try_from(p).ok())
        .unwrap_or(1);
    let twice = {
        let mut links = lock(link.links);
        let state = links.entry(link.peer.link()).or_default();
        let twice = state.hello_protocol.is_some();
        state.hello_protocol.get_or_insert(said);
        twice
    };
    if twice {
        link.found(Finding::new(
            ids::DEVICE_HELLO_ONCE,
            "hello sent twice on one link",
        ));
        return None;
    }
    let device = link.chats.device_of(link.peer.link());
    check_redial(link, closed, &device);
    if said >= 2 && allowed < 2 && !faults.keeps_unspoken_link {
        if let Ok(mut closed) = closed.0.lock() {
            closed.insert(device, Instant::now());
        }
        // Misbehaving (close_4400/other_code): closed, but as a policy violation (1008).
        let code = match faults.other_code {
            true => 1008,
            false => CLOSE_PROTOCOL_MISMATCH,
        };
        link.peer
            .close(code, "this instance speaks link protocol 1 only");
        return None;
    }
    Some(said.min(allowed))
}

/// A device this instance closed with 4400 must not come back (it stops, saying why): one that
/// links again soon after is redialling. A CLI restarted by hand that soon would be reported
/// too, and the finding says how long after it came.
fn check_redial(link: &OnLink<'_>, closed: &Closed4400, device: &str) {
    if let Some(closed_at) = closed.0.lock().ok().and_then(|c| c.get(device).copied())
        && closed_at.elapsed() < REDIAL_WINDOW
    {
        link.found(Finding::new(
            ids::DEVICE_LINK_NO_REDIAL_4400,
            format!(
                "the device linked again {} ms after this instance closed its link with 4400",
                closed_at.elapsed().as_millis()
            ),
        ));
    }
}

/// Checks a hello's params, given the protocol the discovery served allows and the spec the
/// device is expected to implement.
pub(crate) fn check_hello(params: &Value, allowed_protocol: u8, spec: Spec) -> Vec<Finding> {
    let mut found = Vec::new();
    found.extend(shape(
        ids::DEVICE_HELLO_SHAPE,
        "`_lembas/hello`",
        json!({
            "protocol": "$integer",
            "version": "$string",
            "harness_spec": "$string",
            "device": { "host": "$string", "platform": "$string" },
            "limits": { "roots": "$array", "max_mode": "$string", "require_trust": "$boolean" }
        }),
        params,
    ));
    // Any number but the allowed one is wrong, -1 and 1e308 too (the shape rule takes text).
    match params.get("protocol") {
        Some(said) if said.as_u64() == Some(u64::from(allowed_protocol)) => {}
        Some(said) if said.is_number() => found.push(
            Finding::new(
                ids::DEVICE_HELLO_PROTOCOL,
                format!(
                    "hello says protocol {said}, but the discovery served allows {allowed_protocol}"
                ),
            )
            .with_detail(format!(
                "expected protocol {allowed_protocol}; received: {params}"
            )),
        ),
        Some(_) | None => {}
    }
    // `version` is the CLI's own version: any release from the first that implemented the spec
    // (a CLI 1.3.1 of spec 1.1.0 is as right as 1.3.0), not one particular one.
    let spec_said = params.get("harness_spec").and_then(Value::as_str);
    let version_said = params.get("version").and_then(Value::as_str);
    if spec_said.is_some_and(|s| s != spec.as_str())
        || version_said.is_some_and(|v| !is_version_from(v, spec.cli_version()))
    {
        found.push(Finding::new(
            ids::DEVICE_HELLO_SPEC,
            format!(
                "hello says harness_spec {} and version {}, but a device of spec {} says harness_spec {} and a version from {} on",
                spec_said.unwrap_or("?"),
                version_said.unwrap_or("?"),
                spec,
                spec.as_str(),
                spec.cli_version()
            ),
        ));
    }
    found
}

/// A version as the CLI writes its own: `1.3.0`, `1.3.1-beta.2`, `2.0.0+build.5` (what
/// [`release`] reads).
pub(crate) const VERSION_PATTERN: &str = r"^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]*)?$";

/// Whether `text` is a version no older than `first` (compared by major, minor and patch).
pub(crate) fn is_version_from(text: &str, first: &str) -> bool {
    matches!((release(text), release(first)), (Some(said), Some(first)) if said >= first)
}

/// A version's major, minor and patch, when it is one.
fn release(text: &str) -> Option<(u64, u64, u64)> {
    let core = text.split(['-', '+']).next().unwrap_or("");
    let rest = &text[core.len()..];
    if !(rest.is_empty() || rest.len() > 1) {
        return None;
    }
    let mut parts = core.split('.').map(|p| {
        (!p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
            .then(|| p.parse::<u64>().ok())
            .flatten()
    });
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(Some(major)), Some(Some(minor)), Some(Some(patch)), None) => {
            Some((major, minor, patch))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness::finding::rules_of;

    fn hello(protocol: u8) -> Value {
        json!({"protocol": protocol, "version": "1.3.0", "harness_spec": "1.1.0",
               "device": {"host": "h", "platform": "linux"},
               "limits": {"roots": [], "max_mode": "edit", "require_trust": true}})
    }

    #[test]
    fn any_release_of_the_cli_is_a_version() {
        for good in ["1.3.0", "1.3.1", "2.0.0-beta.2", "1.3.0+build.7"] {
            assert!(release(good).is_some(), "{good}");
        }
        for bad in ["1.3", "latest", "1.3.x", "", "1.3.0-"] {
            assert!(release(bad).is_none(), "{bad}");
        }
        let mut newer = hello(2);
        newer["version"] = json!("1.3.1");
        assert!(check_hello(&newer, 2, Spec::V1_1_0).is_empty());
        newer["version"] = json!("1.2.9");
        assert_eq!(
            rules_of(&check_hello(&newer, 2, Spec::V1_1_0)),
            [ids::DEVICE_HELLO_SPEC],
            "older than the first CLI of spec 1.1.0"
        );
        newer["version"] = json!("one point three");
        assert_eq!(
            rules_of(&check_hello(&newer, 2, Spec::V1_1_0)),
            [ids::DEVICE_HELLO_SPEC]
        );
    }

    #[test]
    fn a_right_hello_passes_and_each_fault_names_its_rule() {
        assert!(check_hello(&hello(2), 2, Spec::V1_1_0).is_empty());
        assert_eq!(
            rules_of(&check_hello(&hello(2), 1, Spec::V1_1_0)),
            [ids::DEVICE_HELLO_PROTOCOL]
        );
        assert_eq!(
            rules_of(&check_hello(&hello(1), 1, Spec::V1_0_0)),
            [ids::DEVICE_HELLO_SPEC]
        );
        let mut no_device = hello(1);
        no_device.as_object_mut().map(|o| o.remove("device"));
        assert_eq!(
            rules_of(&check_hello(&no_device, 1, Spec::V1_1_0)),
            [ids::DEVICE_HELLO_SHAPE]
        );
    }

    #[test]
    fn a_protocol_out_of_every_range_is_a_wrong_protocol_not_no_protocol() {
        // -1 is an integer no u8 holds, 1e308 an integral float: neither may pass unjudged.
        for said in [json!(-1), json!(1e308), json!(2.5)] {
            let mut odd = hello(2);
            odd["protocol"] = said.clone();
            let found = check_hello(&odd, 2, Spec::V1_1_0);
            assert!(
                rules_of(&found).contains(&ids::DEVICE_HELLO_PROTOCOL),
                "{said}: {found:?}"
            );
        }
    }
}
