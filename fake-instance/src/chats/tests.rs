//! The chats' own tests: what they follow, keep and redeliver.

use super::reattach::import;
use super::*;
use harness::lembas::methods;

fn chats() -> Arc<Chats> {
    Chats::new(ChatsConfig {
        patience: Duration::from_secs(1),
        misbehave: Misbehaviours::default(),
        state_dir: None,
    })
}

#[tokio::test]
async fn announce_left_and_deleted_are_followed_and_unknown_deletes_ignored() {
    let chats = chats();
    chats.notified(
        1,
        methods::LEMBAS_SESSION_ANNOUNCE,
        &json!({"sessionId": "ses_t", "origin": "terminal"}),
    );
    assert!(
        chats
            .chat("ses_t")
            .is_some_and(|c| c.from_terminal && !c.left)
    );
    chats.notified(
        1,
        methods::LEMBAS_SESSION_LEFT,
        &json!({"sessionId": "ses_t", "available": true}),
    );
    assert!(chats.chat("ses_t").is_some_and(|c| c.left));
    chats.notified(
        1,
        methods::LEMBAS_SESSION_DELETED,
        &json!({"sessionId": "ses_never"}),
    );
    assert!(
        chats.chat("ses_t").is_some(),
        "a delete of another session changes nothing"
    );
    chats.notified(
        1,
        methods::LEMBAS_SESSION_DELETED,
        &json!({"sessionId": "ses_t"}),
    );
    assert!(chats.chat("ses_t").is_none());

    // A chat deleted here but not yet delivered is not made a chat again by an announce.
    chats.delete(None, "ses_gone").await.expect("kept");
    assert_eq!(
        chats.pending_deletes().get("ses_gone").map(|p| p.refusals),
        Some(0)
    );
    chats.notified(
        1,
        methods::LEMBAS_SESSION_ANNOUNCE,
        &json!({"sessionId": "ses_gone"}),
    );
    assert!(chats.chat("ses_gone").is_none());
}

#[tokio::test]
async fn pending_deletes_outlive_a_restart_in_the_state_directory() {
    let dir = tempfile::tempdir().expect("dir");
    let config = ChatsConfig {
        patience: Duration::from_secs(1),
        misbehave: Misbehaviours::default(),
        state_dir: Some(dir.path().to_path_buf()),
    };
    Chats::new(config.clone())
        .delete(None, "ses_x")
        .await
        .expect("kept");
    assert_eq!(
        Chats::new(config)
            .pending_deletes()
            .get("ses_x")
            .map(|p| p.refusals),
        Some(0)
    );
}

#[test]
fn chats_and_their_turns_in_flight_outlive_a_restart() {
    let dir = tempfile::tempdir().expect("dir");
    let config = ChatsConfig {
        patience: Duration::from_secs(1),
        misbehave: Misbehaviours::default(),
        state_dir: Some(dir.path().to_path_buf()),
    };
    let before = Chats::new(config.clone());
    before.lock().book.insert_unless_gone(
        "ses_a".into(),
        Chat {
            session_id: "ses_a".into(),
            in_flight: vec![("msg_0001".into(), "hello".into())],
            sent: vec!["msg_0001".into()],
            ..Chat::default()
        },
    );
    before.save_chats();
    let after = Chats::new(config);
    let chat = after.chat("ses_a").expect("kept");
    assert_eq!(
        chat.in_flight,
        vec![("msg_0001".to_string(), "hello".to_string())]
    );
}

#[tokio::test]
async fn a_kept_delete_goes_to_the_device_its_chat_lived_on() {
    let chats = chats();
    chats.set_device(1, "device-1");
    chats.notified(
        1,
        methods::LEMBAS_SESSION_ANNOUNCE,
        &json!({"sessionId": "ses_one"}),
    );
    assert_eq!(
        chats.chat("ses_one").map(|c| c.device).as_deref(),
        Some("device-1")
    );
    chats.delete(None, "ses_one").await.expect("kept");
    assert_eq!(chats.deletes_for("device-1"), ["ses_one"]);
    assert!(
        chats.deletes_for("device-2").is_empty(),
        "not another device's"
    );
}

#[test]
fn a_done_turn_is_imported_from_history() {
    let turns = vec![
        json!({"role": "user", "text": "a", "turnId": "t1"}),
        json!({"role": "assistant", "text": "done"}),
        json!({"role": "user", "text": "b", "turnId": "t2"}),
    ];
    assert_eq!(import(&turns, "t1").as_deref(), Some("done"));
    assert_eq!(import(&turns, "t2").as_deref(), Some(""));
    assert_eq!(import(&turns, "t3"), None);
}
