//! `_lembas/session/rewind`: an edit or a regeneration from a turn, as the web UI asks it. The
//! chat is rewound to before that turn (the device reverts it and every later one, and they
//! leave the transcript), then the new text goes as a new turn, with an id never used.

use std::sync::Arc;
use std::time::Duration;

use harness::jsonrpc::Peer;
use harness::lembas::methods;
use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};

use crate::actions::{Acted, InstanceActor, RewindChat};
use crate::chats::{Chats, LinkFacts};

/// What the instance gets wrong about rewinding on purpose; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// The rewind names a turn this chat never sent (rewind.known_turn).
    pub made_up_turn: bool,
    /// The rewind names the new message's id, made now (rewind.known_turn/next_turn).
    pub next_turn: bool,
    /// The new message goes without a rewind before it (rewind.new_turn/no_rewind).
    pub no_rewind: bool,
    /// The new message reuses the rewound turn's id (rewind.new_turn).
    pub same_turn: bool,
}

impl Faults {
    /// The rewind faults among `misbehave`.
    pub(crate) fn of(misbehave: &Misbehaviours) -> Self {
        Self {
            made_up_turn: misbehave.breaks(ids::INSTANCE_REWIND_KNOWN_TURN),
            next_turn: misbehave.breaks_way(ids::INSTANCE_REWIND_KNOWN_TURN, "next_turn"),
            no_rewind: misbehave.breaks_way(ids::INSTANCE_REWIND_NEW_TURN, "no_rewind"),
            same_turn: misbehave.breaks(ids::INSTANCE_REWIND_NEW_TURN),
        }
    }
}

impl InstanceActor {
    /// Rewinds a chat to before a turn, and sends the new text when there is one.
    pub(crate) async fn rewind(&self, rewind: RewindChat, timeout: Duration) -> Acted {
        let (peer, facts) = self.ready_for(timeout, "rewind", "a rewind").await?;
        let faults = Faults::of(self.chats.misbehaviours());
        Ok(rewind_chat(&self.chats, (&peer, &facts), &rewind, &faults).await?)
    }
}

/// Edits or regenerates from a turn over a ready link: `_lembas/session/rewind`, then the
/// text (when there is one) as a new turn.
async fn rewind_chat(
    chats: &Arc<Chats>,
    (peer, facts): (&Arc<Peer>, &LinkFacts),
    rewind: &RewindChat,
    faults: &Faults,
) -> Result<Value, String> {
    let (chat, turn, text) = (
        rewind.chat.as_str(),
        rewind.turn.as_str(),
        rewind.text.as_deref(),
    );
    if !facts.capabilities.iter().any(|c| c == "rewind") {
        return Err("the device did not list `rewind`".into());
    }
    // Misbehaving: the rewind names a turn this chat never sent.
    let turn = if faults.made_up_turn {
        "msg_made_up"
    } else {
        turn
    };
    // Misbehaving: the new message's id, made now, is the turn the rewind names.
    let next = chats.fresh_message_id();
    let turn = if faults.next_turn {
        next.as_str()
    } else {
        turn
    };
    // Misbehaving: the new message goes without a rewind before it.
    if faults.no_rewind
        && let Some(text) = text
    {
        chats.prompt(peer, facts, chat, &next, text);
        return Ok(json!({ "reverted": 0, "turnId": next }));
    }
    let answer = peer
        .request(
            methods::LEMBAS_SESSION_REWIND,
            json!({ "sessionId": chat, "turnId": turn }),
            chats.patience(),
        )
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("the device refused the rewind: {}", e.message))?;
    // The rewound turns leave the transcript.
    chats.rewound(chat, turn);
    let mut result = json!({ "reverted": answer.get("reverted").cloned().unwrap_or(Value::Null) });
    if let Some(text) = text {
        // A new turn: a turn id never used, or the device would answer the old one.
        let turn_id = if faults.same_turn {
            turn.to_string()
        } else {
            next
        };
        chats.prompt(peer, facts, chat, &turn_id, text);
        result["turnId"] = json!(turn_id);
    }
    Ok(result)
}
