//! Fuzzing the JSON-RPC decoder: [`classify`], which every text a peer sends goes through, and
//! a [`Peer`] fed arbitrary texts on a connection of channels.
//!
//! Inputs are arbitrary strings, messages shaped like JSON-RPC with every field of any type,
//! those messages with bytes cut or inserted, and JSON nested far past serde_json's limit. No
//! input may panic, hang or overflow the stack, and the peer must keep reading after each.
//!
//! The case count comes from `PROPTEST_CASES` (a short run by default, for CI); a long run:
//!
//! ```sh
//! PROPTEST_CASES=100000 cargo test --release -p harness --test fuzz_decoder
//! ```

mod fuzz_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fuzz_support::{config, within};
use harness::finding::Findings;
use harness::journal::Journal;
use harness::jsonrpc::peer::rules;
use harness::jsonrpc::{
    Dispatch, LinkEvent, Malformed, Message, PARSE_ERROR, Peer, PeerConfig, classify,
};
use harness::transport::{Connection, Incoming, Outgoing};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Any JSON value; strings and keys from the whole of Unicode.
fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((any::<String>(), inner), 0..4)
                .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A well-formed message of any kind, with ids, methods and payloads of every shape allowed.
fn arb_message() -> impl Strategy<Value = Value> {
    let id = prop_oneof![
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<String>().prop_map(Value::String),
    ];
    let method = prop_oneof![
        prop::sample::select(vec!["initialize", "session/prompt", "_lembas/hello", ""])
            .prop_map(str::to_owned),
        any::<String>(),
    ];
    let params = prop::option::of(prop_oneof![
        prop::collection::vec(arb_json(), 0..3).prop_map(Value::Array),
        prop::collection::vec((any::<String>(), arb_json()), 0..3)
            .prop_map(|f| Value::Object(f.into_iter().collect::<Map<_, _>>())),
    ]);
    let error = (any::<i64>(), any::<String>(), prop::option::of(arb_json())).prop_map(
        |(code, message, data)| match data {
            Some(data) => json!({"code": code, "message": message, "data": data}),
            None => json!({"code": code, "message": message}),
        },
    );
    let with_params = |mut map: Map<String, Value>, params: Option<Value>| {
        if let Some(params) = params {
            map.insert("params".into(), params);
        }
        Value::Object(map)
    };
    prop_oneof![
        (id.clone(), method.clone(), params.clone()).prop_map(move |(id, method, params)| {
            let map = json!({"jsonrpc": "2.0", "id": id, "method": method});
            with_params(map.as_object().cloned().unwrap_or_default(), params)
        }),
        (method, params).prop_map(move |(method, params)| {
            let map = json!({"jsonrpc": "2.0", "method": method});
            with_params(map.as_object().cloned().unwrap_or_default(), params)
        }),
        (id.clone(), arb_json())
            .prop_map(|(id, r)| json!({"jsonrpc": "2.0", "id": id, "result": r})),
        (id, error).prop_map(|(id, e)| json!({"jsonrpc": "2.0", "id": id, "error": e})),
    ]
}

/// How a message may be spoilt: a field taken away, given a value of any type, or added.
#[derive(Debug, Clone)]
enum Spoil {
    Remove(&'static str),
    Set(&'static str, Value),
}

const FIELDS: [&str; 7] = [
    "jsonrpc", "id", "method", "params", "result", "error", "extra",
];

fn arb_spoil() -> impl Strategy<Value = Spoil> {
    let name = prop::sample::select(FIELDS.to_vec());
    let odd = prop_oneof![
        arb_json(),
        Just(Value::Null),
        Just(json!(1.5)),
        Just(json!("1.0")),
        Just(json!({"code": 1.5, "message": "x"})),
        Just(json!({"message": "no code"})),
    ];
    prop_oneof![
        name.clone().prop_map(Spoil::Remove),
        (name, odd).prop_map(|(n, v)| Spoil::Set(n, v)),
    ]
}

/// Messages, mostly well-formed and some spoilt in a few places: every branch of the decoder,
/// and the mistakes real peers make, which a wholly random object rarely reaches.
fn arb_envelope() -> impl Strategy<Value = Value> {
    (arb_message(), prop::collection::vec(arb_spoil(), 0..3)).prop_map(|(message, spoils)| {
        let mut map = message.as_object().cloned().unwrap_or_default();
        for spoil in spoils {
            match spoil {
                Spoil::Remove(name) => {
                    map.remove(name);
                }
                Spoil::Set(name, value) => {
                    map.insert(name.into(), value);
                }
            }
        }
        Value::Object(map)
    })
}

/// One edit of a text, at a place given as a fraction of its length.
#[derive(Debug, Clone)]
enum Edit {
    Delete(prop::sample::Index, usize),
    Insert(prop::sample::Index, char),
    Truncate(prop::sample::Index),
}

fn arb_edit() -> impl Strategy<Value = Edit> {
    let punct = prop::sample::select(vec![
        '{', '}', '[', ']', '"', ',', ':', '\\', '-', '.', 'e', '0', '9', ' ', '\u{0}', 'é',
    ]);
    prop_oneof![
        (any::<prop::sample::Index>(), 1..4usize).prop_map(|(at, n)| Edit::Delete(at, n)),
        (any::<prop::sample::Index>(), punct).prop_map(|(at, c)| Edit::Insert(at, c)),
        any::<prop::sample::Index>().prop_map(Edit::Truncate),
    ]
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for edit in edits {
        let len = chars.len().max(1);
        match edit {
            Edit::Delete(at, n) => {
                let at = at.index(len).min(chars.len());
                let end = (at + n).min(chars.len());
                chars.drain(at..end);
            }
            Edit::Insert(at, c) => chars.insert(at.index(len + 1).min(chars.len()), *c),
            Edit::Truncate(at) => chars.truncate(at.index(len)),
        }
    }
    chars.into_iter().collect()
}

/// What a peer may send: text of any kind, envelopes, envelopes broken by a few edits, and
/// text past the 2,000 bytes a finding quotes, cut wherever a character ends.
fn arb_text() -> impl Strategy<Value = String> {
    let long = prop::collection::vec(
        prop::sample::select(vec!['a', 'é', '\u{800}', '😀']),
        500..2100,
    )
    .prop_map(String::from_iter);
    prop_oneof![
        long,
        any::<String>(),
        "[\\[\\]{}\",:0-9a-z .\\\\-]{0,40}",
        arb_envelope().prop_map(|v| v.to_string()),
        (arb_envelope(), prop::collection::vec(arb_edit(), 1..4))
            .prop_map(|(v, edits)| apply(&v.to_string(), &edits)),
    ]
}

/// Equality up to the last bit of a float: serde_json, without its `float_roundtrip` feature,
/// may read a float it printed one unit in the last place off.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) => (x - y).abs() <= f64::EPSILON * x.abs().max(y.abs()),
                _ => false,
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// What [`classify`] promises about one text, checked on the text's own thread.
fn check_classify(text: String) -> Result<(), String> {
    let parsed = serde_json::from_str::<Value>(&text).ok();
    match classify(&text) {
        Ok((raw, message)) => {
            if Some(&raw) != parsed.as_ref() {
                return Err(format!(
                    "the raw value {raw} is not what the text parses to"
                ));
            }
            // The peer routes on these: they must come from the fields the text has.
            if message.method() != raw.get("method").and_then(Value::as_str) {
                return Err(format!("{message:?} has not the method of {raw}"));
            }
            // What we would send for it reads back as the same message.
            let again = message.to_value().to_string();
            match classify(&again) {
                Ok((_, back)) if same(&back.to_value(), &message.to_value()) => Ok(()),
                other => Err(format!(
                    "{message:?} re-encoded as {again} reads as {other:?}"
                )),
            }
        }
        // The peer answers -32700 to one and -32600 to the other: the split must be JSON's.
        Err(Malformed::NotJson(_)) if parsed.is_none() => Ok(()),
        Err(Malformed::NotJsonRpc(_)) if parsed.is_some() => Ok(()),
        Err(other) => Err(format!(
            "{other} for a text that parses: {}",
            parsed.is_some()
        )),
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn classify_never_panics_and_keeps_its_promises(text in arb_text()) {
        within("classify", move || check_classify(text))?.map_err(TestCaseError::fail)?;
    }

    #[test]
    fn classify_reads_every_json_value_without_panicking(value in arb_json()) {
        within("classify", move || check_classify(value.to_string()))?
            .map_err(TestCaseError::fail)?;
    }
}

/// Nested arrays, objects or both `depth` deep, closed or left open, alone or as params.
fn nested(depth: usize, shape: &str) -> String {
    match shape {
        "arrays" => format!("{}{}", "[".repeat(depth), "]".repeat(depth)),
        "objects" => format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth)),
        "mixed" => format!("{}0{}", "[{\"a\":".repeat(depth), "}]".repeat(depth)),
        "open" => "[".repeat(depth),
        "params" => format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{}{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        ),
        other => unreachable!("no shape {other}"),
    }
}

const SHAPES: [&str; 5] = ["arrays", "objects", "mixed", "open", "params"];

#[test]
fn deeply_nested_json_is_refused_not_a_stack_overflow() {
    // serde_json stops at 128 levels unless its `unbounded_depth` is on; an overflow would
    // abort the whole test binary, which fails it too.
    for depth in [129, 1_000, 10_000, 100_000] {
        for shape in SHAPES {
            let text = nested(depth, shape);
            let outcome = within("classify", move || classify(&text).map(|_| ()))
                .unwrap_or_else(|e| panic!("{shape} {depth} deep: {e}"));
            assert!(
                matches!(outcome, Err(Malformed::NotJson(_))),
                "{shape} {depth} deep: {outcome:?}"
            );
        }
    }
    // Below the limit it is JSON, and the params shape a request.
    let text = nested(100, "params");
    let outcome = within("classify", move || classify(&text).map(|(_, m)| m)).unwrap();
    assert!(
        matches!(outcome, Ok(Message::Request { .. })),
        "{outcome:?}"
    );
}

/// Keeps every event the peer hands on.
#[derive(Default)]
struct Collect(Mutex<Vec<LinkEvent>>);

impl Dispatch for Collect {
    fn on_event(&self, _: &Arc<Peer>, event: LinkEvent) {
        if let Ok(mut events) = self.0.lock() {
            events.push(event);
        }
    }
}

/// The method of the notification sent last: once it is handed on, every text before it was.
const LAST: &str = "fuzz/last";

/// Feeds `texts` and then a well-formed notification to a peer; the peer must hand that
/// notification on (its reader, a spawned task, would die silently on a panic), answer each
/// text that is not JSON with -32700, and say only well-formed JSON-RPC.
fn feed_peer(texts: Vec<String>) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let (outgoing, mut sent) = harness::transport::outbox();
        let (to_peer, incoming) = tokio::sync::mpsc::channel(texts.len() + 2);
        let findings = Arc::new(Findings::default());
        let collect = Arc::new(Collect::default());
        let _peer = Peer::start(
            Connection {
                outgoing,
                incoming,
                peer: "fuzz".into(),
            },
            PeerConfig {
                link: 1,
                watch: None,
                framing: Default::default(),
                opener: None,
            },
            Arc::new(Journal::in_memory()),
            Arc::clone(&findings),
            Arc::clone(&collect) as Arc<dyn Dispatch>,
        );
        let not_json = texts
            .iter()
            .filter(|t| serde_json::from_str::<Value>(t).is_err())
            .count();
        for text in texts {
            to_peer
                .send(Incoming::Text(text))
                .await
                .map_err(|_| "the peer stopped reading".to_string())?;
        }
        let last = json!({"jsonrpc": "2.0", "method": LAST}).to_string();
        // A reader that died leaves the channel open but never drains it: wait for the
        // event, not for the send.
        let _ = to_peer.send(Incoming::Text(last)).await;
        let arrived = || {
            collect.0.lock().is_ok_and(|events| {
                events
                    .iter()
                    .any(|e| matches!(e, LinkEvent::Notification { method, .. } if method == LAST))
            })
        };
        let waited = tokio::time::timeout(Duration::from_secs(10), async {
            while !arrived() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await;
        if waited.is_err() {
            return Err("the peer's reader stopped before the last notification".to_string());
        }
        let mut parse_errors = 0;
        while let Ok(Outgoing::Text(answer)) = sent.try_recv() {
            let (_, message) =
                classify(&answer).map_err(|e| format!("the peer sent {answer}: {e}"))?;
            if let Message::Response {
                id: Value::Null,
                outcome: Err(e),
            } = &message
                && e.code == PARSE_ERROR
            {
                parse_errors += 1;
            }
        }
        let found = findings
            .all()
            .iter()
            .filter(|f| f.rule == rules::NOT_JSON)
            .count();
        if parse_errors != not_json || found != not_json {
            return Err(format!(
                "{not_json} texts were not JSON: {parse_errors} -32700 answers, {found} findings"
            ));
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn a_peer_reads_on_after_any_text(texts in prop::collection::vec(arb_text(), 1..8)) {
        within("the peer", move || feed_peer(texts))?.map_err(TestCaseError::fail)?;
    }
}

#[test]
fn a_peer_answers_deeply_nested_json_as_a_parse_error_and_reads_on() {
    let texts: Vec<String> = SHAPES.iter().map(|s| nested(10_000, s)).collect();
    within("the peer", move || feed_peer(texts))
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("{e}"));
}
