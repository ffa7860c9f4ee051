//! What one text message is, as JSON-RPC 2.0 sees it.

use serde_json::{Map, Value, json};

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RpcError {
    /// The error code (`-32601`, `-32602`, ...).
    pub code: i64,
    /// A short sentence.
    pub message: String,
    /// Anything else the sender attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with a code and a message and no data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The error as the JSON object that goes on the wire.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self)
            .unwrap_or_else(|_| json!({"code": self.code, "message": self.message}))
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.code, self.message)
    }
}

/// One well-formed JSON-RPC 2.0 message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A call that wants an answer.
    Request {
        /// The sender's id (a number or a string), echoed in the response.
        id: Value,
        /// The method name.
        method: String,
        /// The params, when present.
        params: Option<Value>,
    },
    /// A call that wants no answer.
    Notification {
        /// The method name.
        method: String,
        /// The params, when present.
        params: Option<Value>,
    },
    /// The answer to an earlier request.
    Response {
        /// The id of the request it answers.
        id: Value,
        /// The result, or the error object.
        outcome: Result<Value, RpcError>,
    },
}

impl Message {
    /// The message as it goes on the wire.
    pub fn to_value(&self) -> Value {
        self.clone().into_value()
    }

    /// The message as JSON, taking its parts rather than copying them (a big request's params
    /// are not copied on their way out).
    pub fn into_value(self) -> Value {
        let mut map = Map::new();
        map.insert("jsonrpc".into(), json!("2.0"));
        match self {
            Message::Request { id, method, params } => {
                map.insert("id".into(), id);
                map.insert("method".into(), Value::String(method));
                if let Some(p) = params {
                    map.insert("params".into(), p);
                }
            }
            Message::Notification { method, params } => {
                map.insert("method".into(), Value::String(method));
                if let Some(p) = params {
                    map.insert("params".into(), p);
                }
            }
            Message::Response { id, outcome } => {
                map.insert("id".into(), id);
                match outcome {
                    Ok(result) => map.insert("result".into(), result),
                    Err(error) => map.insert("error".into(), error.to_value()),
                };
            }
        }
        Value::Object(map)
    }

    /// The method, for requests and notifications.
    pub fn method(&self) -> Option<&str> {
        match self {
            Message::Request { method, .. } | Message::Notification { method, .. } => Some(method),
            Message::Response { .. } => None,
        }
    }

    /// The params, for requests and notifications.
    pub fn params(&self) -> Option<&Value> {
        match self {
            Message::Request { params, .. } | Message::Notification { params, .. } => {
                params.as_ref()
            }
            Message::Response { .. } => None,
        }
    }
}

/// Why a text is not a JSON-RPC 2.0 message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Malformed {
    /// Not JSON at all.
    #[error("not JSON: {0}")]
    NotJson(String),
    /// JSON, but not a JSON-RPC 2.0 message.
    #[error("not a JSON-RPC 2.0 message: {0}")]
    NotJsonRpc(String),
}

/// Parses and classifies one text message. The parsed JSON is returned beside the message so
/// that journals and matchers see exactly what the peer sent, extra fields included.
pub fn classify(raw: &str) -> Result<(Value, Message), Malformed> {
    let value: Value = serde_json::from_str(raw).map_err(|e| Malformed::NotJson(e.to_string()))?;
    let message = classify_value(&value)?;
    Ok((value, message))
}

fn classify_value(value: &Value) -> Result<Message, Malformed> {
    let bad = |why: &str| Malformed::NotJsonRpc(why.to_string());
    let obj = match value {
        Value::Object(obj) => obj,
        Value::Array(_) => {
            return Err(bad(
                "a batch (an array); ACP links send one message at a time",
            ));
        }
        _ => return Err(bad("not an object")),
    };
    if obj.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(bad("`jsonrpc` is not \"2.0\""));
    }
    let id = obj.get("id");
    if let Some(id) = id
        && !(id.is_string() || id.is_i64() || id.is_u64() || id.is_null())
    {
        return Err(bad("`id` is neither a string nor an integer"));
    }
    if let Some(method) = obj.get("method") {
        let Some(method) = method.as_str() else {
            return Err(bad("`method` is not a string"));
        };
        let params = obj.get("params").cloned();
        if let Some(p) = &params
            && !(p.is_object() || p.is_array())
        {
            return Err(bad("`params` is neither an object nor an array"));
        }
        if obj.contains_key("result") || obj.contains_key("error") {
            return Err(bad("has both `method` and `result`/`error`"));
        }
        return Ok(match id {
            Some(id) if !id.is_null() => Message::Request {
                id: id.clone(),
                method: method.to_string(),
                params,
            },
            Some(_) => return Err(bad("a request's `id` is null")),
            None => Message::Notification {
                method: method.to_string(),
                params,
            },
        });
    }
    let Some(id) = id else {
        return Err(bad("no `method` and no `id`"));
    };
    match (obj.get("result"), obj.get("error")) {
        (Some(result), None) => Ok(Message::Response {
            id: id.clone(),
            outcome: Ok(result.clone()),
        }),
        (None, Some(error)) => {
            let error: RpcError = serde_json::from_value(error.clone())
                .map_err(|e| bad(&format!("`error` is not a JSON-RPC error object ({e})")))?;
            Ok(Message::Response {
                id: id.clone(),
                outcome: Err(error),
            })
        }
        (Some(_), Some(_)) => Err(bad("a response with both `result` and `error`")),
        (None, None) => Err(bad("a response with neither `result` nor `error`")),
    }
}

/// `-32700`: the text was not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// `-32600`: JSON, but not a JSON-RPC 2.0 message.
pub const INVALID_REQUEST: i64 = -32600;
/// `-32601`: no such method here.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// `-32602`: the method exists but the params are wrong (LLeMbas also uses it for refusals).
pub const INVALID_PARAMS: i64 = -32602;
/// `-32603`: the answering side failed.
pub const INTERNAL_ERROR: i64 = -32603;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_the_three_kinds() {
        let (_, m) =
            classify(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#).unwrap();
        assert!(matches!(m, Message::Request { .. }));
        let (_, m) = classify(r#"{"jsonrpc":"2.0","method":"_lembas/hello","params":{}}"#).unwrap();
        assert!(matches!(m, Message::Notification { .. }));
        let (_, m) = classify(r#"{"jsonrpc":"2.0","id":"a","result":null}"#).unwrap();
        assert!(matches!(
            m,
            Message::Response {
                outcome: Ok(Value::Null),
                ..
            }
        ));
        let (_, m) =
            classify(r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"no"}}"#).unwrap();
        assert!(matches!(
            m,
            Message::Response {
                outcome: Err(RpcError { code: -32601, .. }),
                ..
            }
        ));
    }

    #[test]
    fn rejects_what_is_not_json_rpc() {
        for raw in [
            "not json",
            "[]",
            "3",
            r#"{"id":1,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":"boom"}"#,
            r#"{"jsonrpc":"2.0","method":"x","params":3}"#,
        ] {
            assert!(classify(raw).is_err(), "accepted {raw}");
        }
    }

    #[test]
    fn round_trips_through_to_value() {
        let m = Message::Request {
            id: json!(7),
            method: "m".into(),
            params: Some(json!({"a": 1})),
        };
        let (_, back) = classify(&m.to_value().to_string()).unwrap();
        assert_eq!(back, m);
    }
}
