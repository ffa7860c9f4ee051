//! `session/new`: a chat opened in the web UI on a device, and the session the device's answer
//! gives it.

use harness::lembas::methods;
use serde_json::Value;

use crate::chats::Chats;

/// The device answered a `session/new` (`request`: what was asked): the chats learn the
/// session it made.
pub(crate) fn answered(chats: &Chats, link: u32, request: &Value, result: &Value) {
    chats.learn(link, methods::SESSION_NEW, request, result);
}
