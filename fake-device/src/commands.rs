//! The session's commands (capability `commands`): the built-ins, in the spec's order, listed
//! in `available_commands_update` and `_lembas/commands`; and `/name` at the start of a prompt,
//! read as the TUI reads it. `compact`, `undo` and `plan` without a task are actions; the others
//! send their expanded text to the agent; a `/name` not in the set is plain text.

use serde_json::{Value, json};

/// The built-in commands: name, description, input hint.
const BUILTINS: [(&str, &str, Option<&str>); 7] = [
    ("compact", "Fold the conversation into a summary", None),
    ("plan", "Plan before changing anything", Some("task")),
    ("undo", "Undo the last turn's changes", None),
    ("review", "Review the changes", Some("head | <branch>")),
    ("changelog", "Write a changelog entry", None),
    ("init", "Write the project's agent file", None),
    ("continue", "Continue where the last turn stopped", None),
];

/// The command set, as `availableCommands` lists it.
pub fn builtin_commands() -> Vec<Value> {
    BUILTINS
        .iter()
        .map(|(name, description, hint)| {
            let mut command = json!({ "name": name, "description": description, "_meta": { "lembas": { "kind": "builtin" } } });
            if let Some(hint) = hint {
                command["input"] = json!({ "hint": hint });
            }
            command
        })
        .collect()
}

/// A prompt that is a command.
#[derive(Debug, Clone, PartialEq)]
pub enum Slash {
    /// `/compact`: fold the conversation into a summary.
    Compact,
    /// `/undo`: take the last turn back.
    Undo,
    /// `/plan` without a task: the session goes to plan mode.
    PlanMode,
    /// A prompt command: its expanded text goes to the agent.
    Prompt {
        /// The command's name.
        name: &'static str,
        /// What the agent is given.
        text: String,
        /// The mode the command puts the session in first (`/plan <task>`).
        mode: Option<&'static str>,
    },
}

impl Slash {
    /// The command's name, for `_meta.lembas.command` in the prompt's answer.
    pub fn name(&self) -> &'static str {
        match self {
            Slash::Compact => "compact",
            Slash::Undo => "undo",
            Slash::PlanMode => "plan",
            Slash::Prompt { name, .. } => name,
        }
    }
}

/// Reads a prompt's text as the TUI does: `/name rest`, where `name` is in the command set.
/// Anything else (a path, a regex, a TUI-only command) is not a command.
pub fn parse(text: &str) -> Option<Slash> {
    let rest = text.strip_prefix('/')?;
    let (name, args) = match rest.split_once(char::is_whitespace) {
        Some((name, args)) => (name, args.trim()),
        None => (rest, ""),
    };
    let name = BUILTINS.iter().map(|(n, _, _)| *n).find(|n| *n == name)?;
    let prompt = |text: String, mode: Option<&'static str>| Slash::Prompt { name, text, mode };
    Some(match name {
        "compact" => Slash::Compact,
        "undo" => Slash::Undo,
        "plan" if args.is_empty() => Slash::PlanMode,
        "plan" => prompt(
            format!("Make a plan, changing nothing yet: {args}"),
            Some("plan"),
        ),
        "review" => prompt(
            format!(
                "Review the changes against {}.",
                if args.is_empty() { "head" } else { args }
            ),
            None,
        ),
        "changelog" => prompt(
            "Write a changelog entry for the recent changes.".into(),
            None,
        ),
        "init" => prompt("Write the project's agent file.".into(), None),
        _ => prompt("Continue where the last turn stopped.".into(), None),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_in_the_set_are_commands() {
        assert_eq!(parse("/compact"), Some(Slash::Compact));
        assert_eq!(parse("/undo"), Some(Slash::Undo));
        assert_eq!(parse("/plan"), Some(Slash::PlanMode));
        assert!(matches!(
            parse("/plan add a cache"),
            Some(Slash::Prompt {
                name: "plan",
                mode: Some("plan"),
                ..
            })
        ));
        assert!(matches!(
            parse("/review main"),
            Some(Slash::Prompt { name: "review", ref text, .. }) if text.contains("main")
        ));
        assert_eq!(parse("/usr/bin/env"), None, "a path");
        assert_eq!(parse("/settings"), None, "a TUI-only command");
        assert_eq!(parse("compact"), None);
        assert_eq!(builtin_commands().len(), 7);
        assert_eq!(builtin_commands()[0]["name"], "compact");
    }
}
