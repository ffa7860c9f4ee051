//! The session's commands (capability `commands`), as the spec's `available_commands_update`
//! paragraph orders them: the built-ins, then custom commands (`.agent/commands/<name>.md` in the
//! project, then the device's own commands directory), then skills (`.agent/skills/<name>/SKILL.md`,
//! then the device's own). A custom command or skill named like a built-in or a TUI command is
//! not a command. `/name` at the start of a prompt is read as the TUI reads it: `compact`, `undo`
//! and `plan` without a task are actions; the others send their expanded text to the agent; a
//! `/name` not in the set is plain text.

use std::path::Path;

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

/// Whether `name` is one of the built-in commands.
pub fn is_builtin(name: &str) -> bool {
    BUILTINS.iter().any(|(builtin, _, _)| *builtin == name)
}

/// Commands that need the TUI's own screens: never listed, and a custom command or skill of
/// one of these names is not a command (the TUI's wins).
pub const TUI_COMMANDS: [&str; 20] = [
    "sessions", "settings", "theme", "login", "logout", "quit", "exit", "help", "model", "effort",
    "usage", "clear", "new", "resume", "config", "copy", "export", "status", "keys", "doctor",
];

/// Where a command comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One of the seven built-ins.
    Builtin,
    /// A command file.
    Custom,
    /// A skill.
    Skill,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Builtin => "builtin",
            Kind::Custom => "custom",
            Kind::Skill => "skill",
        }
    }
}

/// One command of the set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// Its name (`/name`).
    pub name: String,
    /// What it does.
    pub description: String,
    /// What to type after it.
    pub hint: Option<String>,
    /// Where it comes from.
    pub kind: Kind,
    /// A custom command's or skill's text (`$ARGUMENTS` is replaced with what follows the
    /// name).
    pub body: String,
    /// The mode a custom command runs in (its front matter's `mode`).
    pub mode: Option<String>,
    /// The model a custom command runs its prompt on (its front matter's `model`, a ref).
    pub model: Option<String>,
}

impl Command {
    /// As `availableCommands` lists it.
    pub fn to_value(&self) -> Value {
        let mut command = json!({ "name": self.name, "description": self.description, "_meta": { "lembas": { "kind": self.kind.as_str() } } });
        if let Some(hint) = &self.hint {
            command["input"] = json!({ "hint": hint });
        }
        command
    }
}

/// Where custom commands and skills are found.
#[derive(Debug, Clone, Copy)]
pub struct Sources<'a> {
    /// The session's project (`.agent/commands`, `.agent/skills`).
    pub project: &'a Path,
    /// The device's own configuration directory (`commands/`, `skills/`).
    pub own: &'a Path,
    /// Misbehaving: a custom command named like a TUI command is listed too.
    pub keeps_tui_names: bool,
}

/// The command set for a session in `sources.project`.
pub fn command_set(sources: Sources<'_>) -> Vec<Command> {
    let mut set: Vec<Command> = BUILTINS
        .iter()
        .map(|(name, description, hint)| Command {
            name: (*name).into(),
            description: (*description).into(),
            hint: hint.map(String::from),
            kind: Kind::Builtin,
            body: String::new(),
            mode: None,
            model: None,
        })
        .collect();
    let commands = [
        sources.project.join(".agent").join("commands"),
        sources.own.join("commands"),
    ];
    let skills = [
        sources.project.join(".agent").join("skills"),
        sources.own.join("skills"),
    ];
    let mut found: Vec<Command> = Vec::new();
    for dir in &commands {
        found.extend(sorted(read_commands(dir)));
    }
    for dir in &skills {
        found.extend(sorted(read_skills(dir)));
    }
    for command in found {
        let taken = set.iter().any(|c| c.name == command.name)
            || (TUI_COMMANDS.contains(&command.name.as_str()) && !sources.keeps_tui_names);
        if !taken {
            set.push(command);
        }
    }
    set
}

fn sorted(mut commands: Vec<Command>) -> Vec<Command> {
    commands.sort_by(|a, b| a.name.cmp(&b.name));
    commands
}

/// A name a command may have: lower-case letters, digits, `-` and `_`.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Splits `---` front matter (`key: value` lines) from the text after it.
fn front_matter(text: &str) -> (Vec<(String, String)>, String) {
    let Some(rest) = text.strip_prefix("---\n") else {
        return (Vec::new(), text.to_string());
    };
    let Some(end) = rest.find("\n---") else {
        return (Vec::new(), text.to_string());
    };
    let fields = rest[..end]
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
        .collect();
    let body = rest[end + 4..].trim_start_matches('\n').to_string();
    (fields, body)
}

fn field(fields: &[(String, String)], key: &str) -> Option<String> {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
}

/// `<dir>/<name>.md` files.
fn read_commands(dir: &Path) -> Vec<Command> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let path = entry.path();
            let name = path.file_stem()?.to_str()?.to_string();
            if path.extension()? != "md" || !valid_name(&name) {
                return None;
            }
            let text = std::fs::read_to_string(&path).ok()?;
            let (fields, body) = front_matter(&text);
            Some(Command {
                description: field(&fields, "description")
                    .unwrap_or_else(|| format!("Run the `{name}` command")),
                hint: field(&fields, "hint").or_else(|| field(&fields, "argument-hint")),
                mode: field(&fields, "mode"),
                model: field(&fields, "model"),
                name,
                kind: Kind::Custom,
                body,
            })
        })
        .collect()
}

/// `<dir>/<name>/SKILL.md` skills.
fn read_skills(dir: &Path) -> Vec<Command> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_str()?.to_string();
            let text = std::fs::read_to_string(entry.path().join("SKILL.md")).ok()?;
            if !valid_name(&name) {
                return None;
            }
            let (fields, body) = front_matter(&text);
            Some(Command {
                description: field(&fields, "description")
                    .unwrap_or_else(|| format!("Use the `{name}` skill")),
                hint: None,
                name,
                kind: Kind::Skill,
                body,
                mode: None,
                model: None,
            })
        })
        .collect()
}

/// The command set as `availableCommands` lists it.
pub fn to_values(set: &[Command]) -> Vec<Value> {
    set.iter().map(Command::to_value).collect()
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
        name: String,
        /// What the agent is given.
        text: String,
        /// The mode the command puts the session in first (`/plan <task>`, a custom
        /// command's `mode`).
        mode: Option<String>,
        /// The model its prompt runs on, the session's coming back after (a custom command's
        /// `model`).
        model: Option<String>,
    },
}

impl Slash {
    /// The command's name, for `_meta.lembas.command` in the prompt's answer.
    pub fn name(&self) -> &str {
        match self {
            Slash::Compact => "compact",
            Slash::Undo => "undo",
            Slash::PlanMode => "plan",
            Slash::Prompt { name, .. } => name,
        }
    }
}

/// Reads a prompt's text as the TUI does: `/name rest`, where `name` is in `set`. Anything else
/// (a path, a regex, a TUI-only command) is not a command.
pub fn parse(text: &str, set: &[Command]) -> Option<Slash> {
    let rest = text.strip_prefix('/')?;
    let (name, args) = match rest.split_once(char::is_whitespace) {
        Some((name, args)) => (name, args.trim()),
        None => (rest, ""),
    };
    let command = set.iter().find(|c| c.name == name)?;
    let prompt = |text: String, mode: Option<&str>| Slash::Prompt {
        name: command.name.clone(),
        text,
        mode: mode.map(String::from).or_else(|| command.mode.clone()),
        model: command.model.clone(),
    };
    if command.kind != Kind::Builtin {
        let text = if command.body.contains("$ARGUMENTS") {
            command.body.replace("$ARGUMENTS", args)
        } else if args.is_empty() {
            command.body.clone()
        } else {
            format!("{}\n\n{args}", command.body.trim_end())
        };
        let text = match command.kind {
            Kind::Skill => format!("Use the skill `{}`:\n\n{text}", command.name),
            _ => text,
        };
        return Some(prompt(text, None));
    }
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

    fn empty() -> Vec<Command> {
        let nowhere = Path::new("/nonexistent-fake-device");
        command_set(Sources {
            project: nowhere,
            own: nowhere,
            keeps_tui_names: false,
        })
    }

    #[test]
    fn only_names_in_the_set_are_commands() {
        let set = empty();
        assert_eq!(parse("/compact", &set), Some(Slash::Compact));
        assert_eq!(parse("/undo", &set), Some(Slash::Undo));
        assert_eq!(parse("/plan", &set), Some(Slash::PlanMode));
        assert!(matches!(
            parse("/plan add a cache", &set),
            Some(Slash::Prompt { ref name, mode: Some(ref mode), .. }) if name == "plan" && mode == "plan"
        ));
        assert!(matches!(
            parse("/review main", &set),
            Some(Slash::Prompt { ref name, ref text, .. }) if name == "review" && text.contains("main")
        ));
        assert_eq!(parse("/usr/bin/env", &set), None, "a path");
        assert_eq!(parse("/settings", &set), None, "a TUI-only command");
        assert_eq!(parse("compact", &set), None);
        assert_eq!(set.len(), 7);
        assert_eq!(to_values(&set)[0]["name"], "compact");
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    #[test]
    fn custom_commands_then_skills_follow_the_builtins_and_tui_names_are_not_commands() {
        let dir = tempfile::tempdir().expect("dir");
        let (project, own) = (dir.path().join("p"), dir.path().join("own"));
        write(
            &project.join(".agent/commands/deploy.md"),
            "---\ndescription: Deploy the site\nhint: env\n---\nDeploy to $ARGUMENTS now.\n",
        );
        write(
            &project.join(".agent/commands/settings.md"),
            "not a command",
        );
        write(
            &project.join(".agent/commands/review.md"),
            "the built-in wins",
        );
        write(&own.join("commands/audit.md"), "Audit the code.");
        write(&own.join("commands/deploy.md"), "the project's wins");
        write(
            &project.join(".agent/skills/release/SKILL.md"),
            "---\nname: release\ndescription: Cut a release\n---\nTag and publish.",
        );
        let sources = Sources {
            project: &project,
            own: &own,
            keeps_tui_names: false,
        };
        let set = command_set(sources);
        let names: Vec<&str> = set.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "compact",
                "plan",
                "undo",
                "review",
                "changelog",
                "init",
                "continue",
                "deploy",
                "audit",
                "release"
            ]
        );
        let values = to_values(&set);
        assert_eq!(values[7]["_meta"]["lembas"]["kind"], "custom");
        assert_eq!(values[7]["description"], "Deploy the site");
        assert_eq!(values[7]["input"]["hint"], "env");
        assert_eq!(values[9]["_meta"]["lembas"]["kind"], "skill");
        assert_eq!(
            parse("/deploy staging", &set),
            Some(Slash::Prompt {
                name: "deploy".into(),
                text: "Deploy to staging now.\n".into(),
                mode: None,
                model: None,
            })
        );
        assert!(
            matches!(parse("/release", &set), Some(Slash::Prompt { ref text, .. }) if text.contains("Tag and publish"))
        );
        assert_eq!(parse("/settings", &set), None);
        let careless = command_set(Sources {
            keeps_tui_names: true,
            ..sources
        });
        assert!(careless.iter().any(|c| c.name == "settings"));
    }
}
