//! JSON-RPC 2.0, one layer above the transports: classifying what arrives, correlating requests
//! with responses, and answering what nobody else takes with `-32601`.
//!
//! Nothing here knows LLeMbas or ACP; the protocol models plug in through [`peer::Dispatch`].

pub mod message;
pub mod peer;

pub use message::{Malformed, Message, RpcError, classify};
pub use peer::{Dispatch, IncomingRequest, LinkEvent, Peer, PeerConfig, RequestError};

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
