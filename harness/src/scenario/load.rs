//! Loading a scenario: YAML to the model, then the checks YAML cannot express, every error
//! naming the file, line, column and key path at fault.

use std::cell::RefCell;
use std::path::Path;

use serde_saphyr::Spanned;

use super::model::{Scenario, Step};
use crate::pattern::Pattern;

/// Which double runs a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// fake-instance runs it (it checks a device).
    Instance,
    /// fake-device runs it (it checks an instance).
    Device,
}

impl Side {
    /// The double's name.
    pub fn double(self) -> &'static str {
        match self {
            Side::Instance => "fake-instance",
            Side::Device => "fake-device",
        }
    }

    /// The scenario folder this double's scenarios live in.
    pub fn folder(self) -> &'static str {
        match self {
            Side::Instance => "instance",
            Side::Device => "device",
        }
    }

    /// Guesses the side from a path (`scenarios/instance/x.yaml`).
    pub fn from_path(path: &Path) -> Option<Side> {
        let parent = path.parent()?.file_name()?.to_str()?;
        match parent {
            "instance" => Some(Side::Instance),
            "device" => Some(Side::Device),
            _ => None,
        }
    }
}

/// A scenario that could not be loaded, with where and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.render())]
pub struct LoadError {
    /// The file (or the embedded name).
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<u32>,
    /// 1-based column, when known.
    pub column: Option<u32>,
    /// The key path at fault (`steps[2].expect.bogus`), when known.
    pub key_path: Option<String>,
    /// What is wrong.
    pub message: String,
    /// The YAML around the fault, when the parser gave it.
    pub snippet: Option<String>,
}

impl LoadError {
    /// An error of `file` that no line can be given for (a section read after loading).
    pub fn unlocated(file: impl Into<String>, message: impl Into<String>) -> LoadError {
        LoadError {
            file: file.into(),
            line: None,
            column: None,
            key_path: None,
            message: message.into(),
            snippet: None,
        }
    }

    fn render(&self) -> String {
        let mut out = self.file.clone();
        if let Some(line) = self.line {
            out.push_str(&format!(":{line}"));
            if let Some(col) = self.column {
                out.push_str(&format!(":{col}"));
            }
        }
        out.push_str(": ");
        if let Some(path) = &self.key_path {
            out.push_str(&format!("at `{path}`: "));
        }
        out.push_str(&self.message);
        if let Some(snippet) = &self.snippet {
            out.push('\n');
            out.push_str(snippet);
        }
        out
    }
}

/// A file's text and the name errors give it.
fn read(path: &Path) -> Result<(String, String), LoadError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| LoadError {
        file: file.clone(),
        line: None,
        column: None,
        key_path: None,
        message: format!("cannot read it: {e}"),
        snippet: None,
    })?;
    Ok((text, file))
}

/// Reads and checks a scenario file.
pub fn load_file(path: &Path, side: Option<Side>) -> Result<Scenario, LoadError> {
    let (text, file) = read(path)?;
    load_str(&text, &file, side.or_else(|| Side::from_path(path)))
}

/// Reads a YAML file as a `T` of a double's own (fake-device's `--scripts`), with the same
/// located errors as a scenario and the same reading of YAML (only `true`/`false` are booleans).
pub fn load_yaml_file<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, LoadError> {
    let (text, file) = read(path)?;
    parse(&text, &file)
}

/// Parses and checks a scenario from text; `file` names it in errors.
pub fn load_str(text: &str, file: &str, side: Option<Side>) -> Result<Scenario, LoadError> {
    load_str_for(text, file, side, Reader::Peer)
}

/// Who a scenario is loaded for, which decides the values of its variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// A run against a peer: the variables as `vars:` gives them.
    Peer,
    /// `harness selftest`: `selftest.vars` over `vars:`.
    Selftest,
}

/// [`load_str`] for `reader`: the variables it sees are set before anything else is read, so
/// a duration written `${name}` takes their value.
pub fn load_str_for(
    text: &str,
    file: &str,
    side: Option<Side>,
    reader: Reader,
) -> Result<Scenario, LoadError> {
    let variables = variables_of(text, file, reader)?;
    let mut scenario: Scenario =
        crate::duration::with_variables(variables.clone(), || parse(text, file))?;
    scenario.vars = variables;
    scenario.source = file.to_string();
    check(&scenario, file, side, text)?;
    if scenario.family == crate::family::Family::Lvmh {
        check_lvmh(&scenario, file, text)?;
        // lvmh has one version (the envelope's `v: 1`): one cell, whose protocol is that `v`.
        scenario.matrix = super::model::Matrix {
            protocol: vec![1],
            spec: vec![crate::lembas::Spec::V1_1_0.as_str().to_string()],
        };
    }
    Ok(scenario)
}

/// The scenario's variables for `reader`, read ahead of the rest; a file whose variables do
/// not read gets its error from the whole parse that follows, which says more.
fn variables_of(
    text: &str,
    file: &str,
    reader: Reader,
) -> Result<std::collections::BTreeMap<String, serde_json::Value>, LoadError> {
    #[derive(serde::Deserialize, Default)]
    struct Variables {
        #[serde(default)]
        vars: std::collections::BTreeMap<String, serde_json::Value>,
        #[serde(default)]
        selftest: Option<super::model::SelftestSettings>,
    }
    let Ok(Variables { mut vars, selftest }) = parse::<Variables>(text, file) else {
        return Ok(Default::default());
    };
    for (name, value) in selftest.map(|s| s.vars).unwrap_or_default() {
        if !vars.contains_key(&name) {
            // The line it is written on: the first mention of the name after `selftest:`.
            // Else (the name written with escapes, `selftest` quoted) the line of `selftest`.
            let line = text
                .find("selftest:")
                .and_then(|at| {
                    let found = at + text[at..].find(name.as_str())?;
                    u32::try_from(text[..found].matches('\n').count() + 1).ok()
                })
                .or_else(|| top_key_at(text, "selftest").map(|(line, _)| line));
            return Err(LoadError {
                file: file.to_string(),
                line,
                column: None,
                key_path: Some(format!("selftest.vars.{name}")),
                message: format!(
                    "`{name}` is no variable of `vars:`; the self-test only gives those another value"
                ),
                snippet: None,
            });
        }
        if reader == Reader::Selftest {
            vars.insert(name, value);
        }
    }
    Ok(vars)
}

/// Reads a section the engine kept as written (`instance:`, `device:`, the peer's set-up) as a
/// double's own type `T`; an error names the file, the line `at` was written on, and the key at
/// fault under `name` (`instance.http.scripts[0].reply.colour`).
pub fn read_section<T: serde::de::DeserializeOwned, S>(
    value: serde_json::Value,
    name: &str,
    file: &str,
    at: &Spanned<S>,
) -> Result<T, LoadError> {
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let path = e.path().to_string();
        LoadError {
            file: file.to_string(),
            line: u32::try_from(at.referenced.line()).ok(),
            column: u32::try_from(at.referenced.column()).ok(),
            key_path: Some(if path == "." {
                name.to_string()
            } else {
                format!("{name}.{path}")
            }),
            message: e.into_inner().to_string(),
            snippet: None,
        }
    })
}

/// Checks every `act` of `steps` (nested ones too) against `A`, the action type of the double
/// that does them: the engine knows no double's actions, the double's type does. The first
/// action that does not read as an `A` is an error with its step's line and the key at fault
/// (`steps[3].act.open_chat.bogus`). `base` names the list (`steps`, `peer.steps`).
pub fn check_actions<A: serde::de::DeserializeOwned>(
    steps: &[Spanned<Step>],
    base: &str,
    file: &str,
) -> Result<(), LoadError> {
    for (i, step) in steps.iter().enumerate() {
        let path = format!("{base}[{i}]");
        match &step.value {
            Step::Act(act) => {
                if let Err(e) = serde_path_to_error::deserialize::<_, A>(act.action()) {
                    let at = e.path().to_string();
                    return Err(LoadError {
                        file: file.to_string(),
                        line: u32::try_from(step.referenced.line()).ok(),
                        column: u32::try_from(step.referenced.column()).ok(),
                        key_path: Some(if at == "." {
                            format!("{path}.act")
                        } else {
                            format!("{path}.act.{at}")
                        }),
                        message: e.into_inner().to_string(),
                        snippet: None,
                    });
                }
            }
            Step::When(when) => {
                check_actions::<A>(&when.steps, &format!("{path}.when.steps"), file)?
            }
            Step::AnyOrder(inner) => check_actions::<A>(inner, &format!("{path}.any_order"), file)?,
            _ => {}
        }
    }
    Ok(())
}

pub(crate) fn parse<T: serde::de::DeserializeOwned>(
    text: &str,
    file: &str,
) -> Result<T, LoadError> {
    // YAML 1.1 reads `NO`, `yes`, `on` as booleans inside free-form JSON values; a protocol
    // double must send what the author wrote, so only `true` and `false` are booleans.
    let options = serde_saphyr::options! { strict_booleans: true };
    let key_path: RefCell<Option<String>> = RefCell::new(None);
    let parsed = serde_saphyr::with_deserializer_from_str_with_options(text, options, |de| {
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = without_span_segments(&e.path().to_string());
            if path != "." && !path.is_empty() {
                *key_path.borrow_mut() = Some(path);
            }
            e.into_inner()
        })
    });
    parsed.map_err(|e| {
        let location = e.location();
        let rendered = e.to_string().replace("<input>", file);
        let (message, snippet) = split_rendered(&rendered);
        LoadError {
            file: file.to_string(),
            line: location.and_then(|l| u32::try_from(l.line()).ok()),
            column: location.and_then(|l| u32::try_from(l.column()).ok()),
            key_path: key_path.borrow().clone(),
            message,
            snippet,
        }
    })
}

/// Steps and handlers are wrapped in serde-saphyr's `Spanned` (for their line numbers), which
/// serde_path_to_error sees as a field `value`; the author never wrote it, so it leaves the path.
fn without_span_segments(path: &str) -> String {
    let mut out = path.replace("].value.", "].");
    if let Some(stripped) = out.strip_suffix("].value") {
        out = format!("{stripped}]");
    }
    out
}

/// serde-saphyr renders `error: line L column C: MESSAGE` and then a snippet; we keep the
/// message and the snippet, and say the location our own way.
fn split_rendered(rendered: &str) -> (String, Option<String>) {
    let mut lines = rendered.lines();
    let first = lines.next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let message = match first.find(": ") {
        Some(i) if first.starts_with("line ") => first[i + 2..].to_string(),
        _ => first.to_string(),
    };
    let snippet: Vec<&str> = lines.collect();
    let snippet = (!snippet.is_empty()).then(|| snippet.join("\n"));
    (message, snippet)
}

struct Checker<'a> {
    file: &'a str,
}

impl Checker<'_> {
    /// Every `await` names a request a `start` step sent before it (in file order), and waits
    /// no longer than that `start` allows: its `timeout` (else `default`, the scenario's) bounds
    /// the whole wait, so a longer one on the `await` would be silently cut short.
    fn started(
        &self,
        steps: &[Spanned<Step>],
        base: &str,
        default: std::time::Duration,
        names: &mut Vec<(String, std::time::Duration)>,
    ) -> Result<(), LoadError> {
        for (i, step) in steps.iter().enumerate() {
            let path = format!("{base}[{i}]");
            let bound = |name: &str| {
                names
                    .iter()
                    .rev()
                    .find(|(n, _)| n == name)
                    .map(|(_, bound)| *bound)
            };
            match &step.value {
                Step::Start(st) => {
                    names.push((st.name.clone(), st.timeout.map_or(default, |t| t.0)));
                }
                Step::Await(a) if bound(&a.request).is_none() => {
                    return Err(self.error(
                        step,
                        format!("{path}.await.request"),
                        format!(
                            "no `start` step before this one sends a request `as: {}`",
                            a.request
                        ),
                    ));
                }
                Step::Await(a) if answer_patterns(&a.result, &a.error, &a.answer) > 1 => {
                    return Err(self.error(
                        step,
                        format!("{path}.await"),
                        "has more than one of `result`, `error` and `answer`: a response has one (`answer` with `$one_of` allows either)".into(),
                    ));
                }
                Step::Await(a)
                    if a.none_for.is_some()
                        && (answer_patterns(&a.result, &a.error, &a.answer) > 0
                            || !a.capture.is_empty()) =>
                {
                    return Err(self.error(
                        step,
                        format!("{path}.await.none_for"),
                        "expects no answer, so `result`, `error` and `capture` have nothing to match".into(),
                    ));
                }
                Step::Await(a)
                    if a.timeout
                        .is_some_and(|t| bound(&a.request).is_some_and(|b| t.0 > b)) =>
                {
                    let start = crate::duration::Dur(bound(&a.request).unwrap_or_default());
                    return Err(self.error(
                        step,
                        format!("{path}.await.timeout"),
                        format!(
                            "is longer than the {start} its `start` (`as: {}`) allows in all, which would cut it short: give the `start` step the longer `timeout`",
                            a.request
                        ),
                    ));
                }
                Step::When(w) => {
                    self.started(&w.steps, &format!("{path}.when.steps"), default, names)?
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn error<T>(&self, at: &Spanned<T>, key_path: String, message: String) -> LoadError {
        LoadError {
            file: self.file.to_string(),
            line: u32::try_from(at.referenced.line()).ok(),
            column: u32::try_from(at.referenced.column()).ok(),
            key_path: Some(key_path),
            message,
            snippet: None,
        }
    }

    fn pattern(
        &self,
        at: &Spanned<Step>,
        path: &str,
        value: Option<&serde_json::Value>,
    ) -> Result<(), LoadError> {
        if let Some(value) = value {
            Pattern::compile(value)
                .map_err(|e| self.error(at, path.to_string(), format!("bad pattern: {e}")))?;
        }
        Ok(())
    }

    /// The steps of an lvmh scenario: whole frames only (see [`check_lvmh`]).
    fn lvmh_steps(&self, steps: &[Spanned<Step>], base: &str) -> Result<(), LoadError> {
        for (i, step) in steps.iter().enumerate() {
            let key = step_key(&step.value);
            let path = format!("{base}[{i}].{key}");
            let refused = match &step.value {
                Step::Notify(_)
                | Step::Request(_)
                | Step::Start(_)
                | Step::Await(_)
                | Step::Reply(_) => Some(
                    "an lvmh link carries envelopes, not JSON-RPC: send one with `send: {message: {type: …}}`, or act",
                ),
                Step::Expect(e) if e.method.is_some() || e.params.is_some() => {
                    Some("an lvmh frame has no method or params: expect `message: {type: …, …}`")
                }
                Step::ExpectNone(e) if e.method.is_some() || e.params.is_some() => {
                    Some("an lvmh frame has no method or params: give `message: {type: …}`")
                }
                Step::When(w)
                    if w.protocol.is_some() || w.spec.is_some() || !w.needs.is_empty() =>
                {
                    Some("lvmh has one version and no capabilities: only `that` and `matches`")
                }
                Step::Dial(d) if d.protocol.is_some() => Some("lvmh has no protocol to choose"),
                _ => None,
            };
            if let Some(why) = refused {
                return Err(self.error(step, path, why.into()));
            }
            match &step.value {
                Step::AnyOrder(inner) => self.lvmh_steps(inner, &path)?,
                Step::When(w) => self.lvmh_steps(&w.steps, &format!("{path}.steps"))?,
                _ => {}
            }
        }
        Ok(())
    }

    fn steps(
        &self,
        steps: &[Spanned<Step>],
        base: &str,
        side: Option<Side>,
    ) -> Result<(), LoadError> {
        for (i, step) in steps.iter().enumerate() {
            let path = format!("{base}[{i}]");
            match &step.value {
                Step::Expect(e)
                    if e.message.as_ref().is_some_and(|m| !m.is_object())
                        && (e.method.is_some() || e.params.is_some()) =>
                {
                    return Err(self.error(step, format!("{path}.expect.message"), "must be a mapping when `method` or `params` is given (they are merged into it)".into()));
                }
                Step::Expect(e) => {
                    if e.method.is_none() && e.params.is_none() && e.message.is_none() {
                        return Err(self.error(
                            step,
                            format!("{path}.expect"),
                            "says nothing to expect: give `method`, `params` or `message`".into(),
                        ));
                    }
                    self.pattern(step, &format!("{path}.expect.params"), e.params.as_ref())?;
                    self.pattern(step, &format!("{path}.expect.message"), e.message.as_ref())?;
                }
                Step::Check(c) => {
                    self.pattern(step, &format!("{path}.check.matches"), Some(&c.matches))?;
                }
                Step::ExpectNone(e) => {
                    self.pattern(
                        step,
                        &format!("{path}.expect_none.params"),
                        e.params.as_ref(),
                    )?;
                    self.pattern(
                        step,
                        &format!("{path}.expect_none.message"),
                        e.message.as_ref(),
                    )?;
                }
                Step::Request(r) => {
                    if answer_patterns(&r.result, &r.error, &r.answer) > 1 {
                        return Err(self.error(
                            step,
                            format!("{path}.request"),
                            "has more than one of `result`, `error` and `answer`: a response has one (`answer` with `$one_of` allows either)".into(),
                        ));
                    }
                    self.pattern(step, &format!("{path}.request.result"), r.result.as_ref())?;
                    self.pattern(step, &format!("{path}.request.error"), r.error.as_ref())?;
                    self.pattern(step, &format!("{path}.request.answer"), r.answer.as_ref())?;
                }
                Step::Reply(r) if r.result.is_some() == r.error.is_some() => {
                    return Err(self.error(
                        step,
                        format!("{path}.reply"),
                        "needs exactly one of `result` and `error`".into(),
                    ));
                }
                Step::Send(s) if s.message.is_some() == s.text.is_some() => {
                    return Err(self.error(
                        step,
                        format!("{path}.send"),
                        "needs exactly one of `message` and `text`".into(),
                    ));
                }
                Step::AnyOrder(inner) => {
                    if let Some((j, bad)) = inner
                        .iter()
                        .enumerate()
                        .find(|(_, s)| !matches!(s.value, Step::Expect(_)))
                    {
                        return Err(self.error(
                            bad,
                            format!("{path}.any_order[{j}]"),
                            "only `expect` steps can be in `any_order`".into(),
                        ));
                    }
                    self.steps(inner, &format!("{path}.any_order"), side)?;
                }
                Step::When(w) => {
                    if w.that.is_some() != w.matches.is_some() {
                        return Err(self.error(
                            step,
                            format!("{path}.when"),
                            "needs both `that` and `matches`, or neither".into(),
                        ));
                    }
                    if w.protocol.is_none()
                        && w.spec.is_none()
                        && w.that.is_none()
                        && w.needs.is_empty()
                    {
                        return Err(self.error(
                            step,
                            format!("{path}.when"),
                            "needs `protocol`, `spec`, `needs` or `that` with `matches`: otherwise its steps always run".into(),
                        ));
                    }
                    if let Some((i, need)) = w
                        .needs
                        .iter()
                        .enumerate()
                        .find(|(_, n)| !crate::lembas::Spec::V1_1_0.defines(n))
                    {
                        return Err(self.error(
                            step,
                            format!("{path}.when.needs[{i}]"),
                            format!("`{need}` is not a capability of the spec"),
                        ));
                    }
                    self.pattern(step, &format!("{path}.when.matches"), w.matches.as_ref())?;
                    self.steps(&w.steps, &format!("{path}.when.steps"), side)?;
                }
                Step::Dial(_) if side == Some(Side::Instance) => {
                    return Err(self.error(
                        step,
                        format!("{path}.dial"),
                        "only fake-device dials; fake-instance accepts links".into(),
                    ));
                }
                Step::ExpectReconnect(_) | Step::ExpectNoReconnect(_)
                    if side == Some(Side::Device) =>
                {
                    return Err(self.error(
                        step,
                        format!("{path}.{}", step_key(&step.value)),
                        "only fake-instance can see a peer link again; the instance never dials"
                            .into(),
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The variables every run has from its start (fake-device adds `link_protocol` per dial).
const START_VARIABLES: [&str; 7] = [
    "protocol",
    "spec",
    "url",
    "token",
    "tmp",
    "link_url",
    "link_protocol",
];

/// The first `${name…}` in `value` that names no variable known at the start of a run.
fn unknown_start_variable(value: &serde_json::Value, scenario: &Scenario) -> Option<String> {
    match value {
        serde_json::Value::String(text) => {
            let mut rest = text.as_str();
            while let Some(at) = rest.find("${") {
                let after = &rest[at + 2..];
                let name: String = after
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-')
                    .collect();
                let escaped = at > 0 && rest[..at].ends_with('$');
                let made =
                    crate::pattern::generated(after.split('}').next().unwrap_or("")).is_some();
                if !escaped
                    && !made
                    && !START_VARIABLES.contains(&name.as_str())
                    && !scenario.vars.contains_key(&name)
                {
                    return Some(name);
                }
                rest = after;
            }
            None
        }
        serde_json::Value::Array(items) => items
            .iter()
            .find_map(|v| unknown_start_variable(v, scenario)),
        serde_json::Value::Object(map) => map
            .values()
            .find_map(|v| unknown_start_variable(v, scenario)),
        _ => None,
    }
}

/// Where a top-level key (`matrix:`) is written, as line and column, for errors about a whole
/// section. Read back by the parser, not searched for in the text: a key in flow style, quoted
/// (a scenario written as JSON) or after `? ` is found too.
///
/// Where the parser cannot read the keys back (the text reads as a scenario, but not as a map of
/// keys: a value no key type takes), the first line that starts with the key is taken, and
/// failing that the file's first line: an error always names a line.
fn top_key_at(text: &str, key: &str) -> Option<(u32, u32)> {
    let parsed = || {
        let keys: std::collections::HashMap<Spanned<String>, serde::de::IgnoredAny> =
            parse(text, "").ok()?;
        let (found, _) = keys.iter().find(|(k, _)| k.value == key)?;
        Some((
            u32::try_from(found.referenced.line()).ok()?,
            u32::try_from(found.referenced.column()).ok()?,
        ))
    };
    let searched = || {
        text.lines().enumerate().find_map(|(n, line)| {
            let indent = line.len() - line.trim_start().len();
            let rest = line.trim_start().trim_start_matches(['"', '\'']);
            let written = rest
                .strip_prefix(key)
                .is_some_and(|after| after.trim_start_matches(['"', '\'']).starts_with(':'));
            written.then(|| (u32::try_from(n + 1).ok(), u32::try_from(indent + 1).ok()))
        })
    };
    parsed()
        .or_else(|| match searched() {
            Some((Some(line), Some(column))) => Some((line, column)),
            _ => None,
        })
        .or(Some((1, 1)))
}

/// The YAML key a step is written with.
pub fn step_key(step: &Step) -> &'static str {
    match step {
        Step::Notify(_) => "notify",
        Step::Request(_) => "request",
        Step::Start(_) => "start",
        Step::Await(_) => "await",
        Step::Expect(_) => "expect",
        Step::ExpectNone(_) => "expect_none",
        Step::Check(_) => "check",
        Step::AnyOrder(_) => "any_order",
        Step::Reply(_) => "reply",
        Step::Send(_) => "send",
        Step::Wait(_) => "wait",
        Step::Close(_) => "close",
        Step::Stall(_) => "stall",
        Step::ExpectClose(_) => "expect_close",
        Step::ExpectLink(_) => "expect_link",
        Step::ExpectReconnect(_) => "expect_reconnect",
        Step::ExpectNoReconnect(_) => "expect_no_reconnect",
        Step::Dial(_) => "dial",
        Step::Act(_) => "act",
        Step::When(_) => "when",
        Step::ExpectExit(_) => "expect_exit",
        Step::ExpectOutput(_) => "expect_output",
        Step::RestartPeer(_) => "restart_peer",
        Step::WaitForSignal(_) => "wait_for_signal",
    }
}

/// How many of a request's answer patterns are given (at most one may be).
fn answer_patterns(
    result: &Option<serde_json::Value>,
    error: &Option<serde_json::Value>,
    answer: &Option<serde_json::Value>,
) -> usize {
    [result, error, answer]
        .iter()
        .filter(|p| p.is_some())
        .count()
}

fn check(scenario: &Scenario, file: &str, side: Option<Side>, text: &str) -> Result<(), LoadError> {
    let top = |key: &str, message: String| {
        let section = key.split(['.', '[']).next().unwrap_or(key);
        let at = top_key_at(text, section);
        LoadError {
            file: file.to_string(),
            line: at.map(|(line, _)| line),
            column: at.map(|(_, column)| column),
            key_path: Some(key.to_string()),
            message,
            snippet: None,
        }
    };
    match side {
        Some(Side::Instance) if scenario.device.is_some() => {
            return Err(top("device", "configures fake-device, but fake-instance runs this scenario (it is in instance/): use `instance:`".into()));
        }
        Some(Side::Device) if scenario.instance.is_some() => {
            return Err(top("instance", "configures fake-instance, but fake-device runs this scenario (it is in device/): use `device:`".into()));
        }
        _ => {}
    }
    if let Some(bad) = scenario
        .matrix
        .protocol
        .iter()
        .find(|p| !matches!(p, 1 | 2))
    {
        return Err(top(
            "matrix.protocol",
            format!("{bad} is not a link protocol (1 or 2)"),
        ));
    }
    if let Some(bad) = scenario
        .matrix
        .spec
        .iter()
        .find(|s| !matches!(s.as_str(), "1.0.0" | "1.1.0"))
    {
        return Err(top(
            "matrix.spec",
            format!("`{bad}` is not a harness spec version (1.0.0 or 1.1.0)"),
        ));
    }
    for (i, need) in scenario.needs.iter().enumerate() {
        for spec in &scenario.matrix.spec {
            let Some(version) = crate::lembas::Spec::parse(spec) else {
                continue;
            };
            if !version.defines(need) {
                return Err(top(
                    &format!("needs[{i}]"),
                    format!(
                        "`{need}` is not a capability of harness spec {spec}, which the matrix runs (capabilities: {})",
                        version.capabilities().join(", ")
                    ),
                ));
            }
        }
    }
    let checker = Checker { file };
    for (i, handler) in scenario.handlers.iter().enumerate() {
        let h = &handler.value;
        let answers =
            usize::from(h.result.is_some()) + usize::from(h.error.is_some()) + usize::from(h.hold);
        if answers != 1 {
            return Err(checker.error(
                handler,
                format!("handlers[{i}]"),
                "needs exactly one of `result`, `error` and `hold: true`".into(),
            ));
        }
        if let Some(params) = &h.params
            && let Some(unknown) = unknown_start_variable(params, scenario)
        {
            return Err(checker.error(
                handler,
                format!("handlers[{i}].params"),
                format!("`${{{unknown}}}` is not known when the run starts (a handler's params see the built-ins and `vars:`, not captures)"),
            ));
        }
        if let Some(params) = &h.params {
            Pattern::compile(params).map_err(|e| {
                checker.error(
                    handler,
                    format!("handlers[{i}].params"),
                    format!("bad pattern: {e}"),
                )
            })?;
        }
    }
    checker.steps(&scenario.steps, "steps", side)?;
    let default = scenario
        .timeout
        .map_or(super::model::DEFAULT_TIMEOUT, |t| t.0);
    checker.started(&scenario.steps, "steps", default, &mut Vec::new())?;
    // `peer.steps` are done by the other double, and are only its actions and pauses.
    for (i, step) in scenario.peer_steps().iter().enumerate() {
        if !matches!(step.value, Step::Act(_) | Step::Wait(_)) {
            return Err(checker.error(
                step,
                format!("peer.steps[{i}].{}", step_key(&step.value)),
                "the other double does only `act` and `wait` steps here".into(),
            ));
        }
    }
    let other = side.map(|s| match s {
        Side::Instance => Side::Device,
        Side::Device => Side::Instance,
    });
    checker.steps(scenario.peer_steps(), "peer.steps", other)?;
    check_rules(scenario, file, text)
}

/// What a scenario of the lvmh family cannot say: its links carry envelopes, not JSON-RPC, so
/// there is no request to send or answer, and it has one version, so no matrix and no
/// capabilities to need.
fn check_lvmh(scenario: &Scenario, file: &str, text: &str) -> Result<(), LoadError> {
    let top = |key: &str, message: &str| {
        let at = top_key_at(text, key);
        LoadError {
            file: file.to_string(),
            line: at.map(|(line, _)| line),
            column: at.map(|(_, column)| column),
            key_path: Some(key.to_string()),
            message: message.to_string(),
            snippet: None,
        }
    };
    if !scenario.handlers.is_empty() {
        return Err(top(
            "handlers",
            "an lvmh link has no requests to answer: the double's default behaviour and `send` steps speak",
        ));
    }
    if !scenario.needs.is_empty() {
        return Err(top("needs", "lvmh has no capabilities to need"));
    }
    let default = super::model::Matrix::default();
    if scenario.matrix.protocol != default.protocol || scenario.matrix.spec != default.spec {
        return Err(top(
            "matrix",
            "lvmh has one version (v 1): an lvmh scenario has no matrix",
        ));
    }
    let checker = Checker { file };
    checker.lvmh_steps(&scenario.steps, "steps")?;
    checker.lvmh_steps(scenario.peer_steps(), "peer.steps")
}

/// The first step of `scenario` (read from `file`) that can fail the peer yet names no rule,
/// as the error `harness check` gives: a failure there would name no rule, so it could be
/// neither looked up nor baselined as `scenario:rule`.
pub fn unruled(scenario: &Scenario, file: &str) -> Option<LoadError> {
    let step = judging_steps(&scenario.steps)
        .into_iter()
        .find(|step| step.rule.is_none())?;
    Some(LoadError {
        file: file.to_string(),
        line: step.line,
        column: step.column,
        key_path: Some(step.path),
        message: "this step can fail the peer, so it names the catalogue rule it checks \
                  (`rule: ID`, see `harness rules`): a failure then says which rule the peer \
                  broke, and a baseline can cite it"
            .into(),
        snippet: None,
    })
}

/// A step that can fail the peer, as the rule checks find it.
struct JudgingStep<'a> {
    /// Its key path (`steps[3].when.steps[0].expect.rule`).
    path: String,
    /// The rule it names, if any.
    rule: Option<&'a str>,
    line: Option<u32>,
    column: Option<u32>,
}

/// Every step of `steps` that can fail the peer, groups unfolded, in order.
fn judging_steps(steps: &[Spanned<Step>]) -> Vec<JudgingStep<'_>> {
    fn walk<'a>(steps: &'a [Spanned<Step>], base: &str, found: &mut Vec<JudgingStep<'a>>) {
        for (i, step) in steps.iter().enumerate() {
            let path = format!("{base}[{i}]");
            match &step.value {
                Step::AnyOrder(inner) => walk(inner, &format!("{path}.any_order"), found),
                Step::When(w) => walk(&w.steps, &format!("{path}.when.steps"), found),
                other => {
                    if let Some(rule) = other.judges() {
                        found.push(JudgingStep {
                            path: format!("{path}.{}.rule", step_key(other)),
                            rule,
                            line: u32::try_from(step.referenced.line()).ok(),
                            column: u32::try_from(step.referenced.column()).ok(),
                        });
                    }
                }
            }
        }
    }
    let mut found = Vec::new();
    walk(steps, "steps", &mut found);
    found
}

/// Every rule a scenario names must be in the catalogue: a typo would make a check that
/// cites nothing, and the self-test could not pair it with its misbehaviour.
fn check_rules(scenario: &Scenario, file: &str, text: &str) -> Result<(), LoadError> {
    let catalogue = crate::rules::catalogue();
    let unknown = |key_path: String, id: &str, line: Option<u32>, column: Option<u32>| LoadError {
        file: file.to_string(),
        line,
        column,
        key_path: Some(key_path),
        message: format!("`{id}` is not a rule of the catalogue (conformance/rules/)"),
        snippet: None,
    };
    for (i, id) in scenario.rules.iter().enumerate() {
        if catalogue.get(id).is_none() {
            let at = top_key_at(text, "rules");
            return Err(unknown(
                format!("rules[{i}]"),
                id,
                at.map(|(line, _)| line),
                at.map(|(_, column)| column),
            ));
        }
    }
    for step in judging_steps(&scenario.steps) {
        // A step naming no rule is loaded all the same (a quick scenario of one's own need not
        // cite the catalogue); `harness check` refuses it, see [`unruled`].
        if let Some(id) = step.rule
            && catalogue.get(id).is_none()
        {
            return Err(unknown(step.path, id, step.line, step.column));
        }
    }
    Ok(())
}
