//! Our requests waiting for their answers: the table the peer keeps, each with what its answer
//! is judged against and who waits for it.

use std::collections::HashMap;

use serde_json::Value;
use tokio::sync::oneshot;

use crate::jsonrpc::message::RpcError;

/// One of our requests waiting for its answer: what the answer is judged against, and
/// who waits for it.
pub(super) struct Pending {
    pub(super) method: String,
    pub(super) params: Value,
    pub(super) reply: oneshot::Sender<Result<Value, RpcError>>,
}

/// How many timed-out request ids are remembered, so a late answer is not taken for a stray one.
pub(super) const EXPIRED_KEPT: usize = 1024;

/// Our requests waiting for answers, and what the table knows besides.
#[derive(Default)]
pub(super) struct PendingTable {
    pub(super) waiting: HashMap<String, Pending>,
    /// Ids we stopped waiting for (timed out), newest last.
    pub(super) expired: std::collections::VecDeque<String>,
    /// The link ended: nothing will be answered any more.
    pub(super) closed: bool,
}
