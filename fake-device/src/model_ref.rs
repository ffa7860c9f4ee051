//! How the device names a session's model (spec, "How the device names an instance's models"):
//! a model the instance serves is `<connection>/<served id>`, one of the device's own is
//! `<its connection>/<id>`; and what the `model` event says of such a ref.

use serde_json::{Value, json};

/// The connection of the device's own model: the echo agent's, which no instance serves.
pub const OWN_CONNECTION: &str = "local";

/// The device's own model, run by the echo agent.
pub const OWN_MODEL: &str = "local/echo";

/// The device's ref for a model the instance (known as `connection`) serves as `served`. The
/// spec allows the served id itself at protocol 2 too; session/new's `<connection>/<name>` is
/// the form kept here, at either protocol.
pub fn of_served(connection: &str, served: &str) -> String {
    format!("{connection}/{served}")
}

/// The id the instance serves a ref's model under; `None` for a model of the device's own.
pub fn served_id<'a>(connection: &str, reference: &'a str) -> Option<&'a str> {
    reference
        .strip_prefix(connection)
        .and_then(|rest| rest.strip_prefix('/'))
        .filter(|served| !served.is_empty())
}

/// The ref a session runs on for `reference`, a ref of the device's own, given the ids the
/// instance serves: one of the instance's, in any of its forms (the served id after the login,
/// or at protocol 2 the old `<login>/<model>` without the provider), becomes
/// `<connection>/<served id>`; any other ref stays as it is.
pub fn canonical(connection: &str, reference: &str, served: &[String]) -> String {
    let Some(rest) = served_id(connection, reference) else {
        return reference.to_string();
    };
    if served.iter().any(|s| s == rest) {
        return reference.to_string();
    }
    // The old form without the provider: the one served id that is `<provider>/<rest>`.
    let mut matching = served
        .iter()
        .filter(|s| s.split_once('/').is_some_and(|(_, model)| model == rest));
    match (matching.next(), matching.next()) {
        (Some(only), None) => of_served(connection, only),
        _ => reference.to_string(),
    }
}

/// The `model` event for a session now on `reference` at `effort`: spoken to through the
/// instance's login when the instance serves it (`instance: true`), else through the device's
/// own connection the ref names.
pub fn event(connection: &str, reference: &str, effort: &str) -> Value {
    let instance = served_id(connection, reference).is_some();
    let through = if instance {
        connection
    } else {
        reference.split('/').next().unwrap_or(OWN_CONNECTION)
    };
    json!({ "type": "model", "ref": reference, "effort": effort, "connection": through, "instance": instance })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_model_is_named_through_its_login() {
        let reference = of_served("lembas", "fake/deep");
        assert_eq!(reference, "lembas/fake/deep");
        assert_eq!(served_id("lembas", &reference), Some("fake/deep"));
        assert_eq!(
            event("lembas", &reference, "off"),
            json!({ "type": "model", "ref": "lembas/fake/deep", "effort": "off", "connection": "lembas", "instance": true })
        );
    }

    #[test]
    fn the_old_forms_name_the_same_model() {
        let served = ["fake/echo".to_string(), "fake/deep".to_string()];
        assert_eq!(
            canonical("lembas", "lembas/deep", &served),
            "lembas/fake/deep"
        );
        assert_eq!(
            canonical("lembas", "lembas/fake/deep", &served),
            "lembas/fake/deep"
        );
        assert_eq!(canonical("lembas", "local/echo", &served), "local/echo");
        assert_eq!(canonical("lembas", "lembas/none", &served), "lembas/none");
    }

    #[test]
    fn the_devices_own_model_is_not_the_instances() {
        assert_eq!(served_id("lembas", OWN_MODEL), None);
        assert_eq!(served_id("lembas", "lembasx/echo"), None);
        assert_eq!(served_id("lembas", "lembas/"), None);
        let said = event("lembas", OWN_MODEL, "high");
        assert_eq!(said["instance"], json!(false));
        assert_eq!(said["connection"], json!(OWN_CONNECTION));
    }
}
