//! `{name}` placeholders in the commands, requests and environments a user writes for the
//! system under test and its hooks: `{url}`, `{token}`, `{tmp}`, `{root}`, an action's fields.
//! A command is run by `sh -c`, so a value goes into it shell-quoted: a path with a space or a
//! text a scenario types stays one argument and is never run.

use std::collections::BTreeMap;

use serde_json::Value;

/// The placeholders whose values are JSON texts, written as a JSON body's whole string.
const JSON_PLACEHOLDERS: [&str; 2] = ["{json}", "{action}"];

/// The values placeholders stand for, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placeholders(BTreeMap<String, String>);

/// Why a template cannot be expanded: the user's command, request or environment is written
/// wrong, or a value would break the line it goes on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// A `}` that closes nothing.
    #[error("`{template}`: a lone `}}` (write `}}}}`)")]
    LoneClose {
        /// The template as written.
        template: String,
    },
    /// A `{` with no `}` after it.
    #[error("`{template}`: a `{{` that is never closed")]
    Unclosed {
        /// The template as written.
        template: String,
    },
    /// A name no placeholder has.
    #[error("`{template}`: no placeholder `{{{name}}}` here (there are: {})", braced(.known))]
    Unknown {
        /// The template as written.
        template: String,
        /// The name it asked for.
        name: String,
        /// The names there are.
        known: Vec<String>,
    },
    /// A value with a line break, where a line break would end the line.
    #[error(
        "`{{{name}}}` holds a line break, which would end the line: write `{{action}}` or `{{json}}`, whose JSON keeps it escaped"
    )]
    LineBreak {
        /// The placeholder whose value it is.
        name: String,
    },
}

/// `names` each in braces, listed.
fn braced(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("{{{n}}}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How a value goes into the text around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quoting {
    /// As it is (a URL's base, an environment variable, a header, a request body's string).
    Plain,
    /// As shell text for a command run by `sh -c`: one word where the template has no quotes,
    /// escaped for the quotes it is in otherwise (`"{text}"`, `'{text}'`), so no value is run.
    Shell,
    /// Percent-encoded, for a value inside a URL (a captured id cannot change the path).
    Url,
    /// On one line (a `stdin` hook): a value holding a line break is refused.
    Line,
}

impl Placeholders {
    /// No values.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `name`.
    pub fn set(&mut self, name: &str, value: impl Into<String>) -> &mut Self {
        self.0.insert(name.to_string(), value.into());
        self
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// These values and then `more`'s (which win).
    pub fn with(&self, more: &Placeholders) -> Placeholders {
        let mut all = self.clone();
        all.0
            .extend(more.0.iter().map(|(k, v)| (k.clone(), v.clone())));
        all
    }

    /// The names, for an error that lists them.
    pub fn names(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }

    /// Every name and value, for the environment.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// `template` with each `{name}` replaced (`{{` and `}}` are a literal brace); an unknown
    /// name is an error that lists the known ones.
    pub fn expand(&self, template: &str, quoting: Quoting) -> Result<String, TemplateError> {
        self.expand_each(template, |_| quoting)
    }

    /// As [`expand`](Self::expand), with each name's quoting chosen by `quoting_of` (a URL
    /// whose base is a placeholder and whose path holds an action's fields).
    pub fn expand_each(
        &self,
        template: &str,
        quoting_of: impl Fn(&str) -> Quoting,
    ) -> Result<String, TemplateError> {
        let mut out = String::with_capacity(template.len());
        let mut rest = template;
        // The shell's quoting around each placeholder, from the literal text before it.
        let mut shell = ShellState::default();
        while let Some(at) = rest.find(['{', '}']) {
            out.push_str(&rest[..at]);
            shell.read(&rest[..at]);
            let tail = &rest[at..];
            if tail.starts_with("{{") || tail.starts_with("}}") {
                out.push_str(&tail[..1]);
                shell.read(&tail[..1]);
                rest = &tail[2..];
                continue;
            }
            if tail.starts_with('}') {
                return Err(TemplateError::LoneClose {
                    template: template.to_string(),
                });
            }
            let Some(end) = tail.find('}') else {
                return Err(TemplateError::Unclosed {
                    template: template.to_string(),
                });
            };
            let name = &tail[1..end];
            let Some(value) = self.get(name) else {
                return Err(TemplateError::Unknown {
                    template: template.to_string(),
                    name: name.to_string(),
                    known: self.names().into_iter().map(str::to_string).collect(),
                });
            };
            match quoting_of(name) {
                Quoting::Plain => out.push_str(value),
                Quoting::Shell => out.push_str(&shell.quote(value)),
                Quoting::Url => out.push_str(&percent_encode(value)),
                Quoting::Line if value.contains(['\n', '\r']) => {
                    return Err(TemplateError::LineBreak {
                        name: name.to_string(),
                    });
                }
                Quoting::Line => out.push_str(value),
            }
            rest = &tail[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// `value` with every string in it expanded as [`Quoting::Plain`] (a JSON request body).
    ///
    /// `{json}` and `{action}` hold JSON: a string that is exactly one of them becomes that JSON
    /// value itself (`json: "{json}"` sends the action's value, an object stays an object).
    pub fn expand_json(&self, value: &Value) -> Result<Value, TemplateError> {
        Ok(match value {
            Value::String(s) if JSON_PLACEHOLDERS.contains(&s.as_str()) => {
                let name = &s[1..s.len() - 1];
                match self.get(name).map(serde_json::from_str::<Value>) {
                    Some(Ok(json)) => json,
                    _ => Value::String(self.expand(s, Quoting::Plain)?),
                }
            }
            Value::String(s) => Value::String(self.expand(s, Quoting::Plain)?),
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|v| self.expand_json(v))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| Ok((k.clone(), self.expand_json(v)?)))
                    .collect::<Result<_, TemplateError>>()?,
            ),
            other => other.clone(),
        })
    }

    /// An action's fields as placeholders: each key of an object (a string as it is, anything
    /// else as JSON), `{value}` for a scalar, and `{json}` for the whole value.
    pub fn of_fields(value: &Value) -> Placeholders {
        let mut fields = Placeholders::new();
        let text = |v: &Value| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match value {
            Value::Object(map) => {
                for (key, v) in map {
                    fields.set(key, text(v));
                }
            }
            Value::Null => {}
            scalar => {
                fields.set("value", text(scalar));
            }
        }
        fields.set("json", value.to_string());
        fields
    }
}

/// Where a shell command's text stands: outside quotes, or inside single or double ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum ShellState {
    #[default]
    Bare,
    Single,
    Double,
}

impl ShellState {
    /// Follows the quotes of literal text (a backslash escapes the next character outside
    /// single quotes).
    fn read(&mut self, text: &str) {
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            *self = match (*self, c) {
                (ShellState::Bare, '\\') | (ShellState::Double, '\\') => {
                    chars.next();
                    *self
                }
                (ShellState::Bare, '\'') => ShellState::Single,
                (ShellState::Single, '\'') => ShellState::Bare,
                (ShellState::Bare, '"') => ShellState::Double,
                (ShellState::Double, '"') => ShellState::Bare,
                (state, _) => state,
            };
        }
    }

    /// `value` as literal text where the command stands.
    fn quote(self, value: &str) -> String {
        match self {
            ShellState::Bare => shell_quote(value),
            // Ends the single quotes, gives a quote escaped, and opens them again.
            ShellState::Single => value.replace('\'', r"'\''"),
            ShellState::Double => {
                let mut out = String::with_capacity(value.len());
                for c in value.chars() {
                    if matches!(c, '\\' | '"' | '$' | '`') {
                        out.push('\\');
                    }
                    out.push(c);
                }
                out
            }
        }
    }
}

/// `value` percent-encoded: every byte but the unreserved ones (RFC 3986).
fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `value` as one POSIX shell word.
pub fn shell_quote(value: &str) -> String {
    if !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=@,+%".contains(&b))
    {
        return value.to_string();
    }
    format!("'{}'", value.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn values() -> Placeholders {
        let mut p = Placeholders::new();
        p.set("url", "http://127.0.0.1:9")
            .set("tmp", "/tmp/a dir")
            .set("text", "it's $(rm -rf /)");
        p
    }

    #[test]
    fn values_go_in_plain_or_as_one_shell_word() {
        let p = values();
        assert_eq!(
            p.expand("lembas --url {url} --dir {tmp}", Quoting::Shell),
            Ok("lembas --url http://127.0.0.1:9 --dir '/tmp/a dir'".into())
        );
        assert_eq!(
            p.expand("type {text}", Quoting::Shell),
            Ok(r"type 'it'\''s $(rm -rf /)'".into())
        );
        assert_eq!(
            p.expand("{url}/v1", Quoting::Plain),
            Ok("http://127.0.0.1:9/v1".into())
        );
        assert_eq!(
            p.expand("a {{literal}} brace", Quoting::Plain),
            Ok("a {literal} brace".into())
        );
    }

    #[test]
    fn a_value_inside_the_template_s_own_quotes_is_escaped_for_them() {
        let p = values();
        let run = |template: &str| {
            let command = p.expand(template, Quoting::Shell).expect("expands");
            let out = std::process::Command::new("sh")
                .args(["-c", &command])
                .output()
                .expect("sh runs");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        for template in [
            "printf %s {text}",
            "printf %s \"{text}\"",
            "printf %s '{text}'",
            "printf %s \"said: {text}!\"",
        ] {
            let printed = run(template);
            assert!(
                printed.contains("it's $(rm -rf /)"),
                "{template}: {printed}"
            );
        }
    }

    #[test]
    fn a_url_s_fields_are_percent_encoded_and_a_line_keeps_its_break_out() {
        let mut fields = Placeholders::new();
        fields.set("chat", "../admin?x=1 y");
        let all = values().with(&fields);
        let url = all
            .expand_each("{url}/chats/{chat}", |name| {
                if fields.get(name).is_some() {
                    Quoting::Url
                } else {
                    Quoting::Plain
                }
            })
            .expect("expands");
        assert_eq!(url, "http://127.0.0.1:9/chats/..%2Fadmin%3Fx%3D1%20y");
        let mut text = Placeholders::new();
        text.set("text", "one\ntwo");
        assert!(text.expand("say {text}", Quoting::Line).is_err());
    }

    #[test]
    fn an_unknown_or_unclosed_placeholder_is_an_error_that_lists_the_known_ones() {
        let p = values();
        let e = p
            .expand("--port {port}", Quoting::Shell)
            .expect_err("unknown");
        let e = e.to_string();
        assert!(e.contains("no placeholder `{port}`"), "{e}");
        assert!(e.contains("{tmp}, {url}"), "{e}");
        // The words reports and hooks' records show, as they were before the errors had types.
        assert_eq!(
            p.expand("{url", Quoting::Plain).map_err(|e| e.to_string()),
            Err("`{url`: a `{` that is never closed".to_string())
        );
        assert_eq!(
            p.expand("url}", Quoting::Plain).map_err(|e| e.to_string()),
            Err("`url}`: a lone `}` (write `}}`)".to_string())
        );
        let mut text = Placeholders::new();
        text.set("text", "one\ntwo");
        assert_eq!(
            text.expand("{text}", Quoting::Line).map_err(|e| e.to_string()),
            Err("`{text}` holds a line break, which would end the line: write `{action}` or `{json}`, whose JSON keeps it escaped".to_string())
        );
    }

    #[test]
    fn an_action_s_fields_and_a_json_body_are_placeholders_too() {
        let fields = Placeholders::of_fields(&json!({ "chat": "ses_1", "n": 2 }));
        assert_eq!(fields.get("chat"), Some("ses_1"));
        assert_eq!(fields.get("n"), Some("2"));
        assert_eq!(
            Placeholders::of_fields(&json!("ses_2")).get("value"),
            Some("ses_2")
        );
        let body = values()
            .with(&fields)
            .expand_json(&json!({ "session": "{chat}", "at": ["{url}"], "n": 1 }))
            .expect("expands");
        assert_eq!(
            body,
            json!({ "session": "ses_1", "at": ["http://127.0.0.1:9"], "n": 1 })
        );
    }

    #[test]
    fn json_and_action_alone_in_a_json_body_are_the_value_itself() {
        let value = json!({ "permission": "allow_once", "timeout": "300ms" });
        let mut fields = Placeholders::of_fields(&value);
        fields.set("action", json!({ "answer_cards": value }).to_string());
        let p = values().with(&fields);
        let body = p
            .expand_json(&json!({ "cards": "{json}", "as": "{action}", "text": "is {json}" }))
            .expect("expands");
        assert_eq!(body["cards"], value);
        assert_eq!(body["as"]["answer_cards"], value);
        assert!(
            body["text"].is_string(),
            "inside a longer string it stays text"
        );
        // A string field is never read as JSON: `{permission}` stays a string.
        assert_eq!(
            p.expand_json(&json!("{permission}")).expect("expands"),
            json!("allow_once")
        );
    }
}
