//! JSON-RPC 2.0, one layer above the transports: classifying what arrives, correlating requests
//! with responses, and answering what nobody else takes with `-32601`.
//!
//! Nothing here knows LLeMbas or ACP; the protocol models plug in through [`peer::Dispatch`].

pub mod framing;
mod gate;
pub mod message;
pub mod peer;
pub mod watch;

pub use framing::{Framing, TypedFrames};
pub use message::{Malformed, Message, RpcError, classify};
pub use peer::{Dispatch, IncomingRequest, LinkEvent, Peer, PeerConfig, RequestError};
pub use watch::{MessageWatch, Part};

pub use message::{INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR};
