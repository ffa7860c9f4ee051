//! The rule catalogue (`conformance/rules.yaml`), compiled in.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The catalogue's text, as shipped.
pub const CATALOGUE_YAML: &str = include_str!("../../conformance/rules.yaml");

/// The side a rule binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Binds {
    /// The device (LLeMbas CLI, the ACP agent): fake-instance checks it.
    Device,
    /// The instance (LLeMbas, the ACP client): fake-device checks it.
    Instance,
    /// Both sides.
    Both,
}

/// Cells where a misbehaviour shows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cells {
    /// Link protocols; empty: all.
    #[serde(default)]
    pub protocol: Vec<u8>,
    /// Harness specs; empty: all.
    #[serde(default)]
    pub spec: Vec<String>,
}

impl Cells {
    /// Whether the cell is one of these.
    pub fn contains(&self, protocol: u8, spec: &str) -> bool {
        (self.protocol.is_empty() || self.protocol.contains(&protocol))
            && (self.spec.is_empty() || self.spec.iter().any(|s| s == spec))
    }
}

/// One rule of the catalogue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The stable id (`device.hello.protocol`).
    pub id: String,
    /// The protocol family it belongs to (`lembas` unless it says `lvmh`): lvmh's plugin rules
    /// bind `device` (the side that dials), its daemon's bind `instance` (the side that serves).
    #[serde(default, skip_serializing_if = "is_lembas")]
    pub family: crate::family::Family,
    /// The spec section it comes from.
    pub section: String,
    /// The side it binds.
    pub binds: Binds,
    /// The rule in one line, in our words.
    pub says: String,
    /// Where the spec leaves room: every reading the check accepts, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readings: Option<String>,
    /// What the other double does when told `--misbehave ID`; absent: no misbehaviour yet.
    #[serde(default)]
    pub misbehaviour: Option<String>,
    /// Where that misbehaviour shows; absent: every cell.
    #[serde(default)]
    pub cells: Option<Cells>,
    /// More ways the other double breaks the rule, each different from `misbehaviour` (absent
    /// where that broke it, a wrong value, a wrong type, late, on the wrong session or link,
    /// one too many): each asked for as `RULE/NAME`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ways: Vec<Way>,
    /// Whether its misbehaviours are acted by the self-test's reduced peer (a device listing
    /// few capabilities): a rule about what a device does with what it did not list.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub on_reduced_peer: bool,
    /// Why the rule can be broken in one way only (so it needs no `ways`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_way: Option<String>,
    /// Where the rule holds at all; absent: everywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applies: Option<Applies>,
    /// How a check can see it: on every message, or only in a scripted situation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckKind>,
    /// Tests that prove a monitor-only check fails on a message that breaks the rule (for the
    /// rules of both sides, which no one double can act out): `path::test_name`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proven_by: Vec<String>,
    /// Why the rule has no scenario or misbehaviour yet, and what it would take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_yet: Option<String>,
    /// Why nothing outside the peer's process can see whether it keeps the rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unobservable: Option<String>,
    /// The shape of one message the rule is about, which every link checks (see
    /// [`crate::shapes`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Shape>,
}

fn is_lembas(family: &crate::family::Family) -> bool {
    *family == crate::family::Family::Lembas
}

/// The shape a message must have, checked on every link whatever the scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    /// Which part of which message: the params of the method's requests and notifications,
    /// the result of its successful answers, or the body of an HTTP answer.
    pub of: ShapeOf,
    /// The method.
    pub method: String,
    /// A pattern (the scenarios' matching language) the part must match.
    pub pattern: serde_json::Value,
    /// What the other double does to that part with `--misbehave` (a shape rule's
    /// misbehaviour is always this mutation).
    #[serde(rename = "break")]
    pub breaks: Mutation,
}

/// The part of a message a shape is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShapeOf {
    /// The params of a request or notification.
    Params,
    /// The result of a successful answer.
    Result,
    /// The JSON body of a successful HTTP answer; `method` is then `VERB /path`
    /// (`GET /v1/usage`).
    Response,
}

/// A change made to a message, to break its shape: fields dropped, fields set. Paths are
/// dotted, with numbers for array elements (`modes.availableModes.0.id`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mutation {
    /// Fields to remove.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drop: Vec<String>,
    /// Fields to set (made where missing, inside existing objects).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set: BTreeMap<String, serde_json::Value>,
}

/// One more way to break a rule (see [`Rule::ways`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Way {
    /// Its name, after the rule's id and a `/` (`wrong_type`).
    pub name: String,
    /// What the other double does.
    pub misbehaviour: String,
    /// For a shape rule: the mutation this way makes instead of the shape's `break` (a way of
    /// a shape rule without one is acted out in the double's code).
    #[serde(rename = "break", default, skip_serializing_if = "Option::is_none")]
    pub breaks: Option<Mutation>,
    /// Where it shows; absent: where the rule's misbehaviour does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cells: Option<Cells>,
}

/// The separator of a rule id and a way's name in a misbehaviour's id (`RULE/NAME`).
pub const WAY_SEPARATOR: char = '/';

/// The rule a misbehaviour id (`RULE` or `RULE/NAME`) breaks.
pub fn rule_of(misbehaviour: &str) -> &str {
    misbehaviour
        .split_once(WAY_SEPARATOR)
        .map_or(misbehaviour, |(rule, _)| rule)
}

impl Rule {
    /// Whether a check from outside the peer could see the rule kept or broken.
    pub fn observable(&self) -> bool {
        self.unobservable.is_none()
    }

    /// Every misbehaviour of the rule by id: `RULE` for its first, `RULE/NAME` for each way,
    /// with the cells each shows in and what it does. None when the rule has no misbehaviour.
    pub fn misbehaviour_ids(&self) -> Vec<(String, Option<&Cells>, &str)> {
        let Some(first) = &self.misbehaviour else {
            return Vec::new();
        };
        let mut ids = vec![(self.id.clone(), self.cells.as_ref(), first.as_str())];
        for way in &self.ways {
            ids.push((
                format!("{}{WAY_SEPARATOR}{}", self.id, way.name),
                way.cells.as_ref().or(self.cells.as_ref()),
                way.misbehaviour.as_str(),
            ));
        }
        ids
    }
}

/// Where a rule holds: the capability the device must list, the client kind, the protocols and
/// the spec versions (each absent or empty: no restriction).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Applies {
    /// The device capabilities the rule is about (one, or a list).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "one_or_many"
    )]
    pub capability: Vec<String>,
    /// The kind of client (`lembas`: one that said `_meta.lembas` in initialize).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// Link protocols; empty: all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protocol: Vec<u8>,
    /// Harness specs; empty: all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spec: Vec<String>,
}

impl std::fmt::Display for Applies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if !self.capability.is_empty() {
            parts.push(format!("capability {}", self.capability.join(" + ")));
        }
        if let Some(c) = &self.client {
            parts.push(format!("{c} client"));
        }
        if !self.protocol.is_empty() {
            let list: Vec<String> = self.protocol.iter().map(u8::to_string).collect();
            parts.push(format!("protocol {}", list.join("/")));
        }
        if !self.spec.is_empty() {
            parts.push(format!("spec {}", self.spec.join("/")));
        }
        if parts.is_empty() {
            f.write_str("everywhere")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

/// A string or a list of strings, as a list.
fn one_or_many<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(de)? {
        OneOrMany::One(one) => vec![one],
        OneOrMany::Many(many) => many,
    })
}

/// How a rule can be checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckKind {
    /// On every message, whatever the scenario: a shape, a type, an ordering.
    Monitor,
    /// Only in a scripted situation.
    Scenario,
    /// Both: an always-on monitor finding and a scenario step.
    Both,
}

/// The whole catalogue, by id.
#[derive(Debug, Clone)]
pub struct Catalogue {
    rules: BTreeMap<String, Rule>,
}

impl Catalogue {
    /// Parses a catalogue text.
    pub fn parse(text: &str) -> Result<Catalogue, String> {
        let list: Vec<Rule> = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        let mut rules = BTreeMap::new();
        for rule in list {
            if rule.unobservable.is_some()
                && (rule.not_yet.is_some() || rule.misbehaviour.is_some())
            {
                return Err(format!(
                    "rule `{}` is marked unobservable, so it can have neither `not_yet` nor a \
                     misbehaviour",
                    rule.id
                ));
            }
            if let Some(shape) = &rule.shape {
                if let Err(e) = crate::pattern::Pattern::compile(&shape.pattern) {
                    return Err(format!(
                        "rule `{}`: its shape does not compile: {e}",
                        rule.id
                    ));
                }
                if rule.misbehaviour.is_none() {
                    return Err(format!(
                        "rule `{}` has a shape, so it needs a `misbehaviour` saying what its \
                         `break` does",
                        rule.id
                    ));
                }
            }
            check_ways(&rule)?;
            if let Some(old) = rules.insert(rule.id.clone(), rule) {
                return Err(format!("rule `{}` is in the catalogue twice", old.id));
            }
        }
        Ok(Catalogue { rules })
    }

    /// A rule by id.
    pub fn get(&self, id: &str) -> Option<&Rule> {
        self.rules.get(id)
    }

    /// Every rule, by id.
    pub fn iter(&self) -> impl Iterator<Item = &Rule> {
        self.rules.values()
    }

    /// The rules with a misbehaviour that `double` can act out (it breaks the rules binding
    /// its own side).
    pub fn misbehaviours_of(&self, side: Binds) -> impl Iterator<Item = &Rule> {
        self.rules
            .values()
            .filter(move |r| r.binds == side && r.misbehaviour.is_some())
    }
}

/// A rule's `ways`: each needs the rule's own misbehaviour first, a name of its own made of
/// lowercase letters, digits and `_`, and a `break` only where the rule has a shape.
fn check_ways(rule: &Rule) -> Result<(), String> {
    if rule.ways.is_empty() {
        return Ok(());
    }
    if rule.misbehaviour.is_none() {
        return Err(format!(
            "rule `{}` has `ways` but no `misbehaviour`: write the first way there",
            rule.id
        ));
    }
    if rule.one_way.is_some() {
        return Err(format!(
            "rule `{}` says it breaks `one_way` yet lists `ways`",
            rule.id
        ));
    }
    let mut names = std::collections::BTreeSet::new();
    for way in &rule.ways {
        let well_named = !way.name.is_empty()
            && way
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !well_named {
            return Err(format!(
                "rule `{}`: the way `{}` needs a name of lowercase letters, digits and `_`",
                rule.id, way.name
            ));
        }
        if !names.insert(way.name.as_str()) {
            return Err(format!(
                "rule `{}` lists the way `{}` twice",
                rule.id, way.name
            ));
        }
        if way.breaks.is_some() && rule.shape.is_none() {
            return Err(format!(
                "rule `{}`: the way `{}` has a `break`, which only a shape rule's way can have",
                rule.id, way.name
            ));
        }
    }
    Ok(())
}

/// Declares rule-id constants and the list of them all.
macro_rules! rule_ids {
    ($($name:ident = $id:literal,)*) => {
        $(
            #[doc = concat!("`", $id, "`")]
            pub const $name: &str = $id;
        )*
        /// Every id declared here; a test checks each is in the catalogue.
        pub const ALL: &[&str] = &[$($id),*];
    };
}

/// The ids of the rules the doubles check and break, as constants: a typo is a compile error,
/// and the catalogue test checks each is a rule. (The JSON-RPC layer keeps its own, in
/// [`crate::jsonrpc::peer::rules`], being below the protocol.)
pub mod ids {
    rule_ids! {
    DEVICE_HELLO_FIRST = "device.hello.first",
    DEVICE_LINK_DIAL = "device.link.dial",
    DEVICE_SESSION_UNKNOWN = "device.session.unknown",
    DEVICE_PROMPT_ANSWER = "device.prompt.answer",
    DEVICE_TURN_STREAM = "device.turn.stream",
    DEVICE_PERMISSION_ASK = "device.permission.ask",
    INSTANCE_PROMPT_SEND = "instance.prompt.send",
    INSTANCE_CHAT_OPEN = "instance.chat.open",
    DEVICE_HELLO_ONCE = "device.hello.once",
    DEVICE_HELLO_PROTOCOL = "device.hello.protocol",
    DEVICE_HELLO_SHAPE = "device.hello.shape",
    DEVICE_HELLO_SPEC = "device.hello.spec",
    DEVICE_INITIALIZE_RESULT = "device.initialize.result",
    DEVICE_INITIALIZE_PROTOCOL = "device.initialize.protocol",
    DEVICE_INITIALIZE_CAPABILITIES = "device.initialize.capabilities",
    DEVICE_LINK_REDIAL = "device.link.redial",
    DEVICE_LINK_NO_REDIAL_4400 = "device.link.no_redial_4400",
    DEVICE_SESSION_NEW_ROOTS = "device.session_new.roots",
    DEVICE_SESSION_NEW_RESULT = "device.session_new.result",
    DEVICE_PROMPT_TURN_ID = "device.prompt.turn_id",
    DEVICE_TURNS_DEDUP = "device.turns.dedup",
    DEVICE_STEER_IDLE = "device.steer.idle",
    DEVICE_STATUS_TURNS = "device.status.turns",
    DEVICE_STATUS_BUSY = "device.status.busy",
    DEVICE_STATUS_HELD = "device.status.held",
    DEVICE_COMPACT_RESULT = "device.compact.result",
    DEVICE_COMPACT_WORKING = "device.compact.working",
    DEVICE_HISTORY_TURN_ID = "device.history.turn_id",
    DEVICE_HISTORY_ORDER = "device.history.order",
    DEVICE_CANCEL_IDLE = "device.cancel.idle",
    DEVICE_CONFIGURE_APPLIES = "device.configure.applies",
    DEVICE_CONFIGURE_PARTIAL = "device.configure.partial",
    DEVICE_CONFIGURE_MODEL_EVENT = "device.configure.model_event",
    DEVICE_CONFIGURE_RESULT = "device.configure.result",
    DEVICE_SESSION_NEW_MODE = "device.session_new.mode",
    DEVICE_SET_MODE_LOWERED = "device.set_mode.lowered",
    DEVICE_MODE_UPDATE = "device.mode.update",
    DEVICE_DELETE_RESULT = "device.delete.result",
    DEVICE_REWIND_UNKNOWN = "device.rewind.unknown",
    DEVICE_REWIND_REVERTS = "device.rewind.reverts",
    DEVICE_TITLE_LIMIT = "device.title.limit",
    DEVICE_EVENT_LEMBAS_ONLY = "device.event.lembas_only",
    DEVICE_PERMISSION_SHAPE = "device.permission.shape",
    DEVICE_QUESTION_PROTOCOL = "device.question.protocol",
    DEVICE_QUESTION_SHAPE = "device.question.shape",
    DEVICE_STEER_RUNNING = "device.steer.running",
    DEVICE_REWIND_WORKING = "device.rewind.working",
    DEVICE_LIMITS_NO_ROOTS = "device.limits.no_roots",
    DEVICE_UPDATE_SESSION = "device.update.session",
    DEVICE_DELETED_PENDING = "device.deleted.pending",
    DEVICE_LIMITS_RELINK = "device.limits.relink",
    DEVICE_ANNOUNCE_SHAPE = "device.announce.shape",
    DEVICE_ANNOUNCE_RELINK = "device.announce.relink",
    DEVICE_LEFT_SHAPE = "device.left.shape",
    DEVICE_PLAN_UPDATE = "device.plan.update",
    DEVICE_EVENT_TODOS = "device.event.todos",
    DEVICE_DISCOVERY_EVERY_DIAL = "device.discovery.every_dial",
    DEVICE_QUESTION_DOWNGRADE = "device.question.downgrade",
    DEVICE_TURNS_PERSIST = "device.turns.persist",
    DEVICE_DIRECTORIES_ROOTS = "device.directories.roots",
    DEVICE_COMMANDS_ACTIONS = "device.commands.actions",
    DEVICE_CONTEXT_READ = "device.context.read",
    DEVICE_CANCEL_TURN = "device.cancel.turn",
    DEVICE_TURNS_RELINK = "device.turns.relink",
    INSTANCE_DELETE_REDELIVER = "instance.delete.redeliver",
    INSTANCE_CONTEXT_SENT = "instance.context.sent",
    INSTANCE_DELETED_IGNORE = "instance.deleted.ignore",
    INSTANCE_REATTACH_STATUS = "instance.reattach.status",
    INSTANCE_REATTACH_KNOWN = "instance.reattach.known",
    INSTANCE_REATTACH_UNKNOWN = "instance.reattach.unknown",
    INSTANCE_DELETE_GIVE_UP = "instance.delete.give_up",
    INSTANCE_STEER_RUNNING = "instance.steer.running",
    INSTANCE_CANCEL_STOP = "instance.cancel.stop",
    INSTANCE_CONFIGURE_BETWEEN = "instance.configure.between",
    INSTANCE_CONFIGURE_SHAPE = "instance.configure.shape",
    INSTANCE_SET_MODE_KNOWN = "instance.set_mode.known",
    INSTANCE_STEER_FALLBACK = "instance.steer.fallback",
    INSTANCE_STEER_UNSENT = "instance.steer.unsent",
    INSTANCE_REWIND_NEW_TURN = "instance.rewind.new_turn",
    INSTANCE_CARD_ANSWER = "instance.card.answer",
    INSTANCE_CARD_PATIENT = "instance.card.patient",
    INSTANCE_CARD_SETTLED = "instance.card.settled",
    DEVICE_SESSION_TAKEOVER = "device.session.takeover",
    DEVICE_LIMITS_WAIT = "device.limits.wait",
    DEVICE_DELETE_SCOPE = "device.delete.scope",
    DEVICE_CARD_PATIENT = "device.card.patient",
    DEVICE_CARD_SETTLED_TERMINAL = "device.card.settled_terminal",
    DEVICE_CARD_TIMEOUT = "device.card.timeout",
    DEVICE_TASK_TERMINAL_TURN = "device.task.terminal_turn",
    DEVICE_TURNS_RESTART = "device.turns.restart",
    DEVICE_MODEL_TOOLCALL_INDEX = "device.model.toolcall_index",
    DEVICE_MODEL_SERVED_ID = "device.model.served_id",
    DEVICE_USAGE_ABSENT = "device.usage.absent",
    DEVICE_ATTACHMENTS_NAMED = "device.attachments.named",
    DEVICE_FILES_SEARCH = "device.files.search",
    DEVICE_TERMINAL_OPEN = "device.terminal.open",
    DEVICE_TERMINAL_IO = "device.terminal.io",
    DEVICE_TERMINAL_INTEGRATION = "device.terminal.integration",
    DEVICE_COMMANDS_CUSTOM = "device.commands.custom",
    DEVICE_FILES_MENTION = "device.files.mention",
    INSTANCE_PROMPT_BLOCKS = "instance.prompt.blocks",
    INSTANCE_COMPOSER_CAPABILITIES = "instance.composer.capabilities",
    DEVICE_ATTACHMENTS_LIMITS = "device.attachments.limits",
    DEVICE_LIBRARY_SCOPE = "device.library.scope",
    DEVICE_PERSONALIZATION_PARTIAL = "device.personalization.partial",
    DEVICE_PERSONALIZATION_USE = "device.personalization.use",
    INSTANCE_DISCOVERY_SHAPE = "instance.discovery.shape",
    INSTANCE_LINK_TOKEN = "instance.link.token",
    INSTANCE_LINK_CLOSE_4400 = "instance.link.close_4400",
    INSTANCE_INITIALIZE_AFTER_HELLO = "instance.initialize.after_hello",
    INSTANCE_INITIALIZE_FIRST = "instance.initialize.first",
    INSTANCE_INITIALIZE_PROTOCOL = "instance.initialize.protocol",
    INSTANCE_INITIALIZE_SHAPE = "instance.initialize.shape",
    INSTANCE_CAPABILITIES_RESPECT = "instance.capabilities.respect",
    INSTANCE_HTTP_DEVICE_TOKEN = "instance.http.device_token",
    DEVICE_DELETE_GONE = "device.delete.gone",
    DEVICE_TITLE_APPLIES = "device.title.applies",
    DEVICE_FILES_EMPTY_QUERY = "device.files.empty_query",
    DEVICE_COMMANDS_BUILTINS = "device.commands.builtins",
    INSTANCE_DELETE_ON_CHAT = "instance.delete.on_chat",
    INSTANCE_PERSONALIZATION_VALIDATION = "instance.personalization.validation",
    INSTANCE_PERSONALIZATION_PARTIAL_PUT = "instance.personalization.partial_put",
    INSTANCE_PERSONALIZATION_FORBIDDEN = "instance.personalization.forbidden",
    INSTANCE_LIBRARY_SCOPED = "instance.library.scoped",
    INSTANCE_LIBRARY_UNSCOPED = "instance.library.unscoped",
    DEVICE_LIBRARY_LOCAL_KEPT = "device.library.local_kept",
    DEVICE_LIMITS_TRUST_DEFAULT = "device.limits.trust_default",
    DEVICE_DELETE_UNTRUSTED = "device.delete.untrusted",
    // Issue 15, the prompt's text and the Context (helper h15-ctx).
    DEVICE_PROMPT_TEXT_JOIN = "device.prompt.text_join",
    DEVICE_PROMPT_RESOURCE_LINK = "device.prompt.resource_link",
    DEVICE_ATTACHMENTS_BLOB = "device.attachments.blob",
    DEVICE_CONTEXT_INSTRUCTIONS_HEADING = "device.context.instructions_heading",
    DEVICE_CONTEXT_PERSONALIZATION = "device.context.personalization",
    DEVICE_CONTEXT_LIBRARY = "device.context.library",
    DEVICE_CONTEXT_PROTOTYPES = "device.context.prototypes",
    DEVICE_PERSONALIZATION_UNKNOWN_PRESET = "device.personalization.unknown_preset",
    DEVICE_SESSION_NEW_EFFORT = "device.session_new.effort",
    DEVICE_SESSION_NEW_LEMBAS_MODEL = "device.session_new.lembas_model",
    DEVICE_SESSION_NEW_OWN_MODEL = "device.session_new.own_model",
    DEVICE_MODEL_OLD_FORMS = "device.model.old_forms",
    DEVICE_MODEL_REF_BARE = "device.model.ref_bare",
    DEVICE_MODEL_REF_FORM = "device.model.ref_form",
    DEVICE_METHOD_UNKNOWN = "device.method.unknown",
    INSTANCE_METHOD_UNKNOWN = "instance.method.unknown",
    DEVICE_TERMINAL_CWD_ROOTS = "device.terminal.cwd_roots",
    DEVICE_MODELS_CHAT_ONLY = "device.models.chat_only",
    DEVICE_FILES_HASH_ESCAPE = "device.files.hash_escape",
    DEVICE_FILES_DIR_LISTING = "device.files.dir_listing",
    DEVICE_COMMANDS_PROMPT_BUILTIN = "device.commands.prompt_builtin",
    DEVICE_EVENT_PROMPT_TEXT = "device.event.prompt_text",
    DEVICE_PROMPT_COMMAND_NAMED = "device.prompt.command_named",
    DEVICE_COMMANDS_UNDO_NOTHING = "device.commands.undo_nothing",
    DEVICE_COMMANDS_NOTHING_MESSAGE = "device.commands.nothing_message",
    DEVICE_COMMANDS_PLAN_TASK = "device.commands.plan_task",
    DEVICE_COMMANDS_MODEL_RESTORED = "device.commands.model_restored",
    DEVICE_COMMANDS_MODE_LOWERED = "device.commands.mode_lowered",
    DEVICE_FILES_NOT_FROM_COMMAND = "device.files.not_from_command",
    DEVICE_COMPACT_EVENT = "device.compact.event",
    // Cards, plans and history (issue 15, helper h15-cards).
    DEVICE_QUESTION_ANSWERS = "device.question.answers",
    DEVICE_QUESTION_CUT_LABEL = "device.question.cut_label",
    DEVICE_QUESTION_MALFORMED = "device.question.malformed",
    DEVICE_QUESTION_TIMEOUT = "device.question.timeout",
    DEVICE_PLAN_CARD_REVISE = "device.plan_card.revise",
    DEVICE_PLAN_CARD_APPROVE = "device.plan_card.approve",
    DEVICE_PLAN_CARD_BEYOND = "device.plan_card.beyond",
    DEVICE_PLAN_CARD_PLAIN_CLIENT = "device.plan_card.plain_client",
    DEVICE_PLAN_CARD_FILE = "device.plan_card.file",
    DEVICE_CARD_FIRST_WINS = "device.card.first_wins",
    DEVICE_PERMISSION_CORRECTED = "device.permission.corrected",
    DEVICE_PERMISSION_FEEDBACK = "device.permission.feedback",
    DEVICE_PLAN_DROPPED_COMPLETED = "device.plan.dropped_completed",
    DEVICE_PLAN_ENTRIES_MATCH = "device.plan.entries_match",
    DEVICE_PLAN_CLEARED = "device.plan.cleared",
    DEVICE_PLAN_AFTER_NEW = "device.plan.after_new",
    DEVICE_PLAN_UPDATE_1_0 = "device.plan.update_1_0",
    DEVICE_EVENT_PLAN_MATCHES = "device.event.plan_matches",
    DEVICE_HISTORY_FIELDS = "device.history.fields",
    DEVICE_HISTORY_TEXT = "device.history.text",
    DEVICE_HISTORY_TOOLS = "device.history.tools",
    DEVICE_HISTORY_REASONING = "device.history.reasoning",
    DEVICE_REWIND_FILES_KEPT = "device.rewind.files_kept",
    // The device's sessions, turns, deletes, commands and directories (issue 15, h15-life).
    DEVICE_TURNS_MADE_ID = "device.turns.made_id",
    DEVICE_PROMPT_QUEUED = "device.prompt.queued",
    DEVICE_STATUS_QUEUED = "device.status.queued",
    DEVICE_DELETE_STOPS = "device.delete.stops",
    DEVICE_DELETE_GONE_LATER = "device.delete.gone_later",
    DEVICE_LEFT_AVAILABLE = "device.left.available",
    DEVICE_ANNOUNCE_ON_SHARE = "device.announce.on_share",
    DEVICE_COMMANDS_BUILTINS_FIRST = "device.commands.builtins_first",
    DEVICE_COMMANDS_CAPABILITY = "device.commands.capability",
    DEVICE_COMMANDS_AFTER_NEW = "device.commands.after_new",
    DEVICE_DIRECTORIES_LISTING = "device.directories.listing",
    DEVICE_DIRECTORIES_ACCEPTED = "device.directories.accepted",
    DEVICE_FILES_ROOT = "device.files.root",
    DEVICE_INITIALIZE_MATCHES_HELLO = "device.initialize.matches_hello",
    DEVICE_EVENT_TASK_PAIRED = "device.event.task_paired",
    DEVICE_CAPABILITIES_KEPT = "device.capabilities.kept",
    DEVICE_SESSIONS_REOPEN = "device.sessions.reopen",
    DEVICE_SESSIONS_REOPEN_RULES = "device.sessions.reopen_rules",
    DEVICE_DELETE_GIVEN = "device.delete.given",
    DEVICE_LIMITS_CURRENT = "device.limits.current",
    DEVICE_CLIENT_PROTOCOL_ABSENT = "device.client.protocol_absent",
    DEVICE_DELETED_LIVE = "device.deleted.live",
    DEVICE_DELETE_TERMINAL_NEW = "device.delete.terminal_new",
    DEVICE_TURNS_SHARED_LOG = "device.turns.shared_log",
    // Remote terminals (issue 15, h15-term).
    DEVICE_TERMINAL_NO_ROOTS = "device.terminal.no_roots",
    DEVICE_TERMINAL_DEFAULT_CWD = "device.terminal.default_cwd",
    DEVICE_TERMINAL_NOTIFY_SHAPE = "device.terminal.notify_shape",
    DEVICE_CAPABILITIES_TERMINAL_CONFIG = "device.capabilities.terminal_config",
    DEVICE_TERMINAL_LOGIN_SHELL = "device.terminal.login_shell",
    DEVICE_TERMINAL_EMPTY_LINE = "device.terminal.empty_line",
    DEVICE_TERMINAL_OSC7_ENCODING = "device.terminal.osc7_encoding",
    DEVICE_TERMINAL_INTEGRATION_OFF = "device.terminal.integration_off",
    DEVICE_TERMINAL_ENV_UNCHANGED = "device.terminal.env_unchanged",
    DEVICE_TERMINAL_USER_RC = "device.terminal.user_rc",
    DEVICE_TERMINAL_B_AFTER_HOOK = "device.terminal.b_after_hook",
    DEVICE_TERMINAL_CLOSE_WITH_LINK = "device.terminal.close_with_link",
    DEVICE_TERMINAL_BASH_LOGIN = "device.terminal.bash_login",
    DEVICE_LINK_4400_MESSAGE = "device.link.4400_message",
    DEVICE_STDIO_FRAMING = "device.stdio.framing",
    DEVICE_STDIO_PLAIN_ACP = "device.stdio.plain_acp",
    DEVICE_STDIO_LIMITS_NULL = "device.stdio.limits_null",
    DEVICE_STDIO_NO_DIRECTORIES = "device.stdio.no_directories",
    DEVICE_PERSONALIZATION_LOCAL_OTHERWISE = "device.personalization.local_otherwise",
    DEVICE_EVENT_MODEL_INSTANCE = "device.event.model_instance",
    // The instance's rules proven by the web UI's actions (issue 15, group inst).
    INSTANCE_TERMINAL_OPEN_SHAPE = "instance.terminal.open_shape",
    INSTANCE_TERMINAL_NOTIFY_SHAPE = "instance.terminal.notify_shape",
    INSTANCE_TERMINAL_WITHOUT_SHELL = "instance.terminal.without_shell",
    DEVICE_CONTEXT_UNLISTED_IGNORED = "device.context.unlisted_ignored",
    INSTANCE_REATTACH_NO_TURNS = "instance.reattach.no_turns",
    INSTANCE_SESSIONS_UNLISTED = "instance.sessions.unlisted",
    INSTANCE_CANCEL_IS_NOTIFICATION = "instance.cancel.is_notification",
    INSTANCE_REWIND_KNOWN_TURN = "instance.rewind.known_turn",
    INSTANCE_SESSION_KNOWN = "instance.session.known",
    INSTANCE_CARD_KEYED = "instance.card.keyed",
    INSTANCE_CARD_TIMEOUT_DISMISSED = "instance.card.timeout_dismissed",
    INSTANCE_DELETED_REMOVES_CHAT = "instance.deleted.removes_chat",
    INSTANCE_DELETE_PENDING_ANNOUNCE = "instance.delete.pending_announce",
    INSTANCE_LIBRARY_FOREIGN_SCOPE = "instance.library.foreign_scope",
    INSTANCE_MODELS_PROVIDER_IDS = "instance.models.provider_ids",
    INSTANCE_MODEL_SERVED_NAME = "instance.model.served_name",
    INSTANCE_CONTEXT_PERSONALIZATION_SOURCE = "instance.context.personalization_source",
    INSTANCE_FILES_MENTION_TEXT = "instance.files.mention_text",
    // Issue 15, the lead: the commands method and the default library.
    DEVICE_COMMANDS_METHOD = "device.commands.method",
    DEVICE_LIBRARY_DEFAULT = "device.library.default",
    }
}

/// The misbehaviours a double was told to act out (`--misbehave RULE` for a rule's first way
/// of breaking, `--misbehave RULE/NAME` for one of its `ways`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Misbehaviours {
    rules: std::collections::BTreeSet<String>,
}

impl Misbehaviours {
    /// Checks each id: it must be a misbehaviour of a catalogue rule that binds `side`.
    pub fn parse(ids: &[String], side: Binds) -> Result<Misbehaviours, String> {
        let mut rules = std::collections::BTreeSet::new();
        for id in ids {
            let known = catalogue().misbehaviours_of(side).any(|rule| {
                rule.misbehaviour_ids()
                    .iter()
                    .any(|(known, _, _)| known == id)
            });
            if !known {
                let listed: Vec<String> = catalogue()
                    .misbehaviours_of(side)
                    .flat_map(|r| r.misbehaviour_ids().into_iter().map(|(id, _, _)| id))
                    .collect();
                return Err(format!(
                    "`{id}` is not a misbehaviour of this double; it knows: {}",
                    listed.join(", ")
                ));
            }
            rules.insert(id.clone());
        }
        Ok(Misbehaviours { rules })
    }

    /// The misbehaviours `ids`, taken as they are (for a catalogue of a test's own).
    #[cfg(test)]
    pub(crate) fn unchecked(ids: &[&str]) -> Misbehaviours {
        Misbehaviours {
            rules: ids.iter().map(|id| id.to_string()).collect(),
        }
    }

    /// Whether to break this rule in its first way (its `misbehaviour`).
    pub fn breaks(&self, id: &str) -> bool {
        self.rules.contains(id)
    }

    /// Whether to break rule `id` in its way `name` (one of its `ways`).
    pub fn breaks_way(&self, id: &str, name: &str) -> bool {
        self.rules
            .iter()
            .any(|m| m.split_once(WAY_SEPARATOR) == Some((id, name)))
    }

    /// The rules to break.
    pub fn iter(&self) -> impl Iterator<Item = &String> {
        self.rules.iter()
    }
}

/// The shipped catalogue. It is checked by a test, so a broken file never reaches a user.
pub fn catalogue() -> &'static Catalogue {
    static CATALOGUE: OnceLock<Catalogue> = OnceLock::new();
    CATALOGUE.get_or_init(|| {
        Catalogue::parse(CATALOGUE_YAML).unwrap_or_else(|e| {
            tracing::error!("the compiled-in rule catalogue is broken: {e}");
            Catalogue {
                rules: BTreeMap::new(),
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_catalogue_parses() {
        let c = Catalogue::parse(CATALOGUE_YAML).expect("catalogue parses");
        assert!(c.get("device.hello.protocol").is_some());
        assert!(c.misbehaviours_of(Binds::Device).count() >= 2);
        assert!(c.misbehaviours_of(Binds::Instance).count() >= 2);
    }

    #[test]
    fn every_id_constant_is_a_catalogue_rule() {
        let c = Catalogue::parse(CATALOGUE_YAML).expect("catalogue parses");
        for id in ids::ALL.iter().chain(
            [
                crate::jsonrpc::peer::rules::NOT_JSON,
                crate::jsonrpc::peer::rules::ENVELOPE,
                crate::jsonrpc::peer::rules::UNKNOWN_RESPONSE,
                crate::jsonrpc::peer::rules::BINARY,
            ]
            .iter(),
        ) {
            assert!(c.get(id).is_some(), "{id} is not in conformance/rules.yaml");
        }
    }

    #[test]
    fn a_way_is_asked_for_by_rule_and_name_and_is_not_the_first_way() {
        let rule = catalogue()
            .iter()
            .find(|r| !r.ways.is_empty())
            .expect("a rule with ways");
        let way = format!("{}/{}", rule.id, rule.ways[0].name);
        let m = Misbehaviours::parse(std::slice::from_ref(&way), rule.binds).expect("a way parses");
        assert!(m.breaks_way(&rule.id, &rule.ways[0].name));
        assert!(
            !m.breaks(&rule.id),
            "a way is not the rule's first misbehaviour"
        );
        assert_eq!(rule_of(&way), rule.id);
        let unknown = format!("{}/no_such_way", rule.id);
        assert!(Misbehaviours::parse(&[unknown], rule.binds).is_err());
    }

    #[test]
    fn ways_are_checked_when_the_catalogue_is_read() {
        let no_first = "- {id: a, section: s, binds: device, says: x, ways: [{name: late, misbehaviour: m}]}\n";
        assert!(
            Catalogue::parse(no_first)
                .unwrap_err()
                .contains("no `misbehaviour`")
        );
        let twice = "- {id: a, section: s, binds: device, says: x, misbehaviour: m, ways: [{name: late, misbehaviour: m}, {name: late, misbehaviour: n}]}\n";
        assert!(Catalogue::parse(twice).unwrap_err().contains("twice"));
        let bad_name = "- {id: a, section: s, binds: device, says: x, misbehaviour: m, ways: [{name: Late, misbehaviour: m}]}\n";
        assert!(
            Catalogue::parse(bad_name)
                .unwrap_err()
                .contains("lowercase")
        );
        let stray_break = "- {id: a, section: s, binds: device, says: x, misbehaviour: m, ways: [{name: late, misbehaviour: m, break: {drop: [x]}}]}\n";
        assert!(
            Catalogue::parse(stray_break)
                .unwrap_err()
                .contains("shape rule")
        );
    }

    #[test]
    fn duplicate_ids_are_refused() {
        let text = "- {id: a, section: s, binds: both, says: x}\n- {id: a, section: s, binds: both, says: y}\n";
        assert!(Catalogue::parse(text).unwrap_err().contains("twice"));
    }
}
