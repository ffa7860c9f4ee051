//! The account on its instance (personalization and usage), against fake-instance's
//! HTTP API over real loopback HTTP: the shapes of usage the spec lists, and what a write-back
//! sends and is told.

use std::net::SocketAddr;
use std::time::Duration;

use super::Account;
use fake_instance::http::HttpConfig;
use fake_instance::{DEFAULT_TOKEN, Options};
use serde_json::{Value, json};
use tokio::sync::oneshot;

const PATIENCE: Duration = Duration::from_secs(10);

/// fake-instance with this HTTP configuration; the account of the device that uses it, and the
/// switch that stops it (dropped: stopped).
async fn account_on(http: Value) -> (Account, oneshot::Sender<()>) {
    let http: HttpConfig = serde_json::from_value(http).expect("a valid configuration");
    let (addr_tx, addr_rx) = oneshot::channel::<SocketAddr>();
    let (stop, stop_rx) = oneshot::channel::<()>();
    let options = Options {
        http,
        ..Options::default()
    };
    tokio::spawn(fake_instance::run(
        options,
        None,
        move |addr| {
            let _ = addr_tx.send(addr);
        },
        async {
            let _ = stop_rx.await;
        },
    ));
    let addr = tokio::time::timeout(PATIENCE, addr_rx)
        .await
        .expect("ready in time")
        .expect("started");
    let account = Account::well_behaved(format!("http://{addr}"), DEFAULT_TOKEN);
    (account, stop)
}

#[tokio::test]
async fn usage_with_a_plan_shows_the_balance_without_one_nothing_and_an_admin_unlimited() {
    let (with_plan, _stop1) =
        account_on(json!({"usage": {"balance": 12.345, "currency": "USD", "credit_value": 0.5}}))
            .await;
    let view = with_plan.usage().await.expect("read").expect("usage");
    assert_eq!(view.status_bar.as_deref(), Some("12.35 credits ($6.17)"));
    assert!(
        view.page[0].starts_with("Plan: Fake plan."),
        "{:?}",
        view.page
    );

    let (no_plan, _stop2) = account_on(json!({"usage": {"plan": null}})).await;
    let view = no_plan.usage().await.expect("read").expect("usage");
    assert_eq!(view.status_bar, None);
    assert!(view.page[0].starts_with("This month"), "{:?}", view.page);

    let (admin, _stop3) = account_on(json!({"usage": {"admin": true, "windows": [{"window": "day", "limit": 10, "spent": 1, "frees_at": null}]}})).await;
    let view = admin.usage().await.expect("read").expect("usage");
    assert_eq!(view.status_bar.as_deref(), Some("unlimited"));
    assert!(
        view.page.iter().all(|l| !l.starts_with("day")),
        "{:?}",
        view.page
    );

    let (absent, _stop4) = account_on(json!({"usage": {"absent": true}})).await;
    assert_eq!(absent.usage().await.expect("read"), None);
}

#[tokio::test]
async fn a_change_writes_back_only_its_field_and_a_refusal_says_why() {
    let (account, _stop) =
        account_on(json!({"personalization": {"instructions": "old", "personality": "concise"}}))
            .await;
    let answer = account.change("instructions", "new").await.expect("sent");
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body["instructions"], "new");
    assert_eq!(
        answer.body["personality"], "concise",
        "the instance kept the other field"
    );
    assert!(
        account.change("theme", "dark").await.is_err(),
        "not a field"
    );

    let (unavailable, _stop2) = account_on(json!({"personalization": {"available": false}})).await;
    let refused = unavailable.change("instructions", "x").await.expect("sent");
    assert_eq!(refused.status, 403);
    assert!(
        refused.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("not available"))
    );
}

#[tokio::test]
async fn the_personal_prompt_follows_what_the_instance_saved() {
    let (account, _stop) =
        account_on(json!({"personalization": {"enabled": true, "instructions": "Be brief."}}))
            .await;
    assert_eq!(
        account.personal_prompt().await.as_deref(),
        Some("## Instructions\n\nBe brief.")
    );
    let (disabled, _stop2) =
        account_on(json!({"personalization": {"enabled": false, "instructions": "Be brief."}}))
            .await;
    assert_eq!(disabled.personal_prompt().await, None);
}
