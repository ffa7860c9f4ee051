//! The system text the device gives its model for a session: its own shared text, then the
//! pieces of the client's `Context` (spec, `session/new`, the `_meta.lembas` table) — the chat's
//! authored prompt under a heading naming the instance, the knowledge bases the chat may search,
//! the prototypes bullet with its sources sentence — and the personality and instructions in use.

use serde_json::{Value, json};

/// The device's own system prompt, before anything the client adds.
pub const SHARED_PROMPT: &str =
    "You are the coding agent of LLeMbas CLI, working in the person's project on their device.";

/// How a misbehaving device composes the text (all `false`: as the spec says).
#[derive(Debug, Clone, Copy, Default)]
pub struct Misreads {
    /// The authored prompt goes in bare, with no `## Instructions from` heading.
    pub no_heading: bool,
    /// The Context's personalization is ignored: the device's own stays.
    pub own_personalization: bool,
    /// The Context's library is not named to the model.
    pub no_library: bool,
    /// The prototypes bullet is there whether or not they are offered.
    pub prototypes_always: bool,
    /// An empty authored prompt still gets its `## Instructions from` heading.
    pub empty_heading: bool,
    /// The prototypes block goes in without its sources sentence.
    pub no_sources: bool,
}

/// What goes into one session's system text besides the Context.
#[derive(Debug, Clone, Copy)]
pub struct Composing<'a> {
    /// The session's `Context`, as last read (an object, or null).
    pub context: &'a Value,
    /// The device's name for the instance (its connection).
    pub instance: &'a str,
    /// The device's own personalization text (the account's, or its local one), if any.
    pub own_personal: Option<&'a str>,
    /// Whether nobody can be asked questions or approve a plan in this session.
    pub nobody_to_ask: bool,
    /// How it misbehaves.
    pub misreads: Misreads,
}

impl Composing<'_> {
    /// The system text.
    pub fn text(&self) -> String {
        let mut system = String::from(SHARED_PROMPT);
        let field = |name: &str| self.context.get(name).filter(|v| !v.is_null());
        // The chat's authored prompt follows the shared text under a heading naming the
        // instance; an empty one adds nothing.
        if let Some(authored) = field("system_prompt")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            if self.misreads.no_heading {
                system.push_str(&format!("\n\n{authored}"));
            } else {
                system.push_str(&format!(
                    "\n\n## Instructions from {}\n\n{authored}",
                    self.instance
                ));
            }
        } else if self.misreads.empty_heading
            && field("system_prompt").and_then(Value::as_str) == Some("")
        {
            // Misbehaving: an empty authored prompt gets a heading over nothing.
            system.push_str(&format!("\n\n## Instructions from {}\n", self.instance));
        }
        if let Some(library) = field("library").filter(|_| !self.misreads.no_library) {
            system.push_str("\n\n");
            system.push_str(&library_block(library));
        }
        if let Some(prototypes) = field("prototypes") {
            let offered = prototypes.get("offered").and_then(Value::as_bool) == Some(true);
            if offered || self.misreads.prototypes_always {
                system.push_str("\n\n");
                // Misbehaving: the block without the client's sentence on what a page may load.
                let without = json!({ "offered": offered });
                let shown = if self.misreads.no_sources {
                    &without
                } else {
                    prototypes
                };
                system.push_str(&prototypes_block(shown));
            }
        }
        if self.nobody_to_ask {
            system.push_str(
                "\n\nNobody can be asked questions or approve a plan in this session: decide \
                 for yourself, and stop once a plan is submitted.",
            );
        }
        // The chat's own personalization stands in for the device's for its session; `null`
        // or none: the device's own.
        let chat_personal = field("personalization")
            .filter(|p| p.is_object() && !self.misreads.own_personalization)
            .map(|p| {
                let mut saved = p.clone();
                saved["enabled"] = json!(true);
                saved["available"] = json!(true);
                crate::account::personal_prompt(&saved, false).unwrap_or_default()
            });
        let personal = match &chat_personal {
            Some(text) => Some(text.as_str()),
            None => self.own_personal,
        };
        if let Some(personal) = personal.filter(|p| !p.is_empty()) {
            system.push_str("\n\n");
            system.push_str(personal);
        }
        system
    }
}

/// The library block: the bases the chat may search, by name; an empty list is the account's
/// whole library, and no restriction is named.
fn library_block(library: &Value) -> String {
    let names: Vec<String> = library
        .get("bases")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|b| {
            let name = b.get("name").and_then(Value::as_str)?;
            let id = b.get("id").and_then(Value::as_str).unwrap_or_default();
            Some(format!("- {name} ({id})"))
        })
        .collect();
    let scope = if names.is_empty() {
        "You may search the person's whole library.".to_string()
    } else {
        format!(
            "You may search only these knowledge bases:\n{}",
            names.join("\n")
        )
    };
    format!(
        "## Library\n\nUse the library tools to look things up in the person's documents. {scope}"
    )
}

/// The prototypes block, with the client's sentence on what a page may load.
fn prototypes_block(prototypes: &Value) -> String {
    let sources = prototypes
        .get("sources")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut block = String::from(
        "## Prototypes\n\nYou may write a prototype: a single self-contained HTML page the person can open.",
    );
    if !sources.is_empty() {
        block.push_str(&format!("\n- {sources}"));
    }
    block
}

#[cfg(test)]
mod tests {
    use super::*;

    fn composed(context: Value, misreads: Misreads) -> String {
        Composing {
            context: &context,
            instance: "example",
            own_personal: Some("## Instructions\n\nOwn words."),
            nobody_to_ask: false,
            misreads,
        }
        .text()
    }

    #[test]
    fn the_context_pieces_follow_the_shared_text() {
        let text = composed(
            json!({
                "system_prompt": "Be a pirate.",
                "library": { "bases": [{ "id": "kb1", "name": "Handbook" }] },
                "prototypes": { "offered": true, "sources": "SRC" },
                "personalization": { "personality": "", "personality_custom": "", "instructions": "Banana." }
            }),
            Misreads::default(),
        );
        assert!(text.starts_with(SHARED_PROMPT));
        assert!(text.contains("## Instructions from example\n\nBe a pirate."));
        assert!(text.contains("Handbook"));
        assert!(text.contains("SRC"));
        assert!(text.contains("Banana.") && !text.contains("Own words."));
    }

    #[test]
    fn empty_or_null_pieces_add_nothing_of_theirs() {
        let text = composed(
            json!({
                "system_prompt": "",
                "library": { "bases": [] },
                "prototypes": { "offered": false, "sources": "SRC" },
                "personalization": null
            }),
            Misreads::default(),
        );
        assert!(!text.contains("## Instructions from"));
        assert!(text.contains("whole library"));
        assert!(!text.contains("SRC"));
        assert!(text.contains("Own words."));
    }
}
