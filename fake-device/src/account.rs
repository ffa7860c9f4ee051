//! The device's account on its instance, besides the model: the personalization it reads and
//! writes back, and the usage it shows (the spec's section on the HTTP API the CLI uses).
//!
//! Personalization, when the instance has it available and enabled, stands in for the device's
//! own personality and instructions; a change made at the device is written back with only the
//! field changed and `enabled: true`, so the instance keeps what it saved for the others.

use std::time::Duration;

use serde_json::{Value, json};

/// How long one account request may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The personality presets fake-device knows; the spec says a preset the CLI does not know is
/// none. `custom` means `personality_custom`'s text.
pub const PRESETS: &[&str] = &["concise", "friendly", "formal", "playful"];

/// The fields a person may change (and the device writes back).
pub const FIELDS: &[&str] = &["personality", "personality_custom", "instructions"];

/// The instance's account API, with the device token.
#[derive(Debug, Clone)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct Account {
    /// The instance's base URL.
    pub base: String,
    /// The device token.
    pub token: String,
    pub http: reqwest::Client,
    /// Misbehaving: a change writes back every field, not only the one changed.
    pub writes_whole: bool,
    /// Misbehaving: the account's personalization is used even when it is disabled.
    pub ignores_enabled: bool,
    /// Misbehaving: a personality it does not know is used as if it were a preset.
    pub invents_presets: bool,
    /// The device's local settings (`{personality, personality_custom, instructions}`), used
    /// when the instance does not have personalization available for the account.
    pub local: Option<Value>,
    /// The rules' further ways it misbehaves.
    pub ways: Ways,
}

/// How else a misbehaving device gets personalization wrong (all `false`: as the spec says).
#[derive(Debug, Clone, Copy, Default)]
pub struct Ways {
    /// A change is written back without `enabled: true`.
    pub no_enabled: bool,
    /// The account's personalization is not used, even enabled.
    pub unused_when_enabled: bool,
    /// Not available, the account's texts are used beside the local ones.
    pub account_too: bool,
    /// A personality it does not know is read as `custom`.
    pub unknown_as_custom: bool,
}

/// An answer of the account API: its status and body (`null` when it had none that parsed).
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    pub body: Value,
}

impl Account {
    /// The account API at `base` with `token`, used as the spec says (no misbehaviour, no
    /// local settings): what a test of another part needs of it.
    #[cfg(test)]
    pub fn well_behaved(base: impl Into<String>, token: impl Into<String>) -> Account {
        Account {
            base: base.into(),
            token: token.into(),
            http: harness::transport::http_client(),
            writes_whole: false,
            ignores_enabled: false,
            invents_presets: false,
            local: None,
            ways: Ways::default(),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base.trim_end_matches('/'))
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Answer, String> {
        Self::answer(
            request
                .bearer_auth(&self.token)
                .timeout(CALL_TIMEOUT)
                .send()
                .await,
        )
        .await
    }

    /// Any call of the API: `verb` on `path`, with a JSON body, with the device token or
    /// without it (to see the instance refuse).
    pub async fn call(
        &self,
        verb: &str,
        path: &str,
        body: Option<&Value>,
        with_token: bool,
    ) -> Result<Answer, String> {
        let verb = reqwest::Method::from_bytes(verb.to_ascii_uppercase().as_bytes())
            .map_err(|_| format!("`{verb}` is not an HTTP method"))?;
        let mut request = self.http.request(verb, self.url(path));
        if let Some(body) = body {
            request = request.json(body);
        }
        if !with_token {
            return Self::answer(request.timeout(CALL_TIMEOUT).send().await).await;
        }
        self.send(request).await
    }

    async fn answer(sent: Result<reqwest::Response, reqwest::Error>) -> Result<Answer, String> {
        let response = sent.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let body = response.json::<Value>().await.unwrap_or(Value::Null);
        Ok(Answer { status, body })
    }

    /// `GET /v1/me/personalization`.
    pub async fn personalization(&self) -> Result<Answer, String> {
        self.send(self.http.get(self.url("/v1/me/personalization")))
            .await
    }

    /// The text the device's model is given for its personalization: the account's when the
    /// instance has it available (none when it is not enabled), else the device's local
    /// settings; `None` when there is nothing to use.
    pub async fn personal_prompt(&self) -> Option<String> {
        // Not available (or no answer): the device's local settings apply (spec, HTTP API).
        let local = || {
            let mut saved = self.local.clone()?;
            saved["enabled"] = json!(true);
            saved["available"] = json!(true);
            personal_prompt(&saved, false)
        };
        let Ok(mut answer) = self.personalization().await else {
            return local();
        };
        if answer.status != 200
            || answer.body.get("available").and_then(Value::as_bool) != Some(true)
        {
            if self.ways.account_too && answer.status == 200 {
                // Misbehaving: the account's texts as well, though not available.
                let mut theirs = answer.body.clone();
                theirs["available"] = json!(true);
                let theirs = personal_prompt(&theirs, false);
                return match (local(), theirs) {
                    (Some(own), Some(theirs)) => Some(format!("{own}\n\n{theirs}")),
                    (own, theirs) => own.or(theirs),
                };
            }
            return local();
        }
        if self.ways.unused_when_enabled {
            // Misbehaving: the account's personalization is never used.
            return None;
        }
        if self.ways.unknown_as_custom
            && answer
                .body
                .get("personality")
                .and_then(Value::as_str)
                .is_some_and(|p| !p.is_empty() && p != "custom" && !PRESETS.contains(&p))
        {
            // Misbehaving: a preset it does not know is read as the custom personality.
            answer.body["personality"] = json!("custom");
        }
        if self.invents_presets
            && let Some(unknown) = answer
                .body
                .get("personality")
                .and_then(Value::as_str)
                .filter(|p| !p.is_empty() && *p != "custom" && !PRESETS.contains(p))
                .map(String::from)
        {
            // Misbehaving: an unknown preset is used by its name.
            answer.body["personality"] = json!("custom");
            answer.body["personality_custom"] = json!(format!("Be {unknown}."));
        }
        (answer.status == 200)
            .then(|| personal_prompt(&answer.body, self.ignores_enabled))
            .flatten()
    }

    /// A person changes one field at the device (`/settings`): written back alone, with
    /// `enabled: true`. `current` is the device's copy of the other fields, which a whole write
    /// (the misbehaviour) sends too.
    pub async fn change(&self, field: &str, value: &str) -> Result<Answer, String> {
        if !FIELDS.contains(&field) {
            return Err(format!(
                "`{field}` is not a personalization field ({})",
                FIELDS.join(", ")
            ));
        }
        let mut body = json!({ field: value, "enabled": true });
        if self.ways.no_enabled {
            // Misbehaving: the field alone, not said to be enabled.
            body = json!({ field: value });
        }
        if self.writes_whole {
            // The session's copy of the others, blanked as a careless client keeps them.
            for other in FIELDS.iter().filter(|f| **f != field) {
                body[*other] = json!("");
            }
        }
        let answer = self
            .send(
                self.http
                    .put(self.url("/v1/me/personalization"))
                    .json(&body),
            )
            .await?;
        if answer.status != 200 {
            // The instance's `detail` says why; the CLI shows it, else "not allowed".
            let why = answer
                .body
                .get("detail")
                .and_then(Value::as_str)
                .unwrap_or("not allowed");
            tracing::info!(status = answer.status, "personalization not saved: {why}");
        }
        Ok(answer)
    }

    /// `GET /v1/usage`, as `/usage` shows it; `None` for an instance without it (404).
    pub async fn usage(&self) -> Result<Option<UsageView>, String> {
        let answer = self.send(self.http.get(self.url("/v1/usage"))).await?;
        match answer.status {
            404 => Ok(None),
            200 => Ok(Some(render_usage(&answer.body))),
            status => Err(format!("/v1/usage answered {status}")),
        }
    }
}

/// The personalization's text for the model: the personality (a known preset, or the custom
/// text) and the instructions, when available and enabled.
pub fn personal_prompt(saved: &Value, ignores_enabled: bool) -> Option<String> {
    let text = |key: &str| saved.get(key).and_then(Value::as_str).unwrap_or_default();
    let enabled = saved.get("enabled").and_then(Value::as_bool) == Some(true);
    let available = saved.get("available").and_then(Value::as_bool) == Some(true);
    if !available || !(enabled || ignores_enabled) {
        return None;
    }
    let personality = match text("personality") {
        "custom" => text("personality_custom").to_string(),
        preset if PRESETS.contains(&preset) => format!("Be {preset}."),
        _ => String::new(),
    };
    let mut parts = Vec::new();
    if !personality.is_empty() {
        parts.push(format!("## Personality\n\n{personality}"));
    }
    if !text("instructions").is_empty() {
        parts.push(format!("## Instructions\n\n{}", text("instructions")));
    }
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// Usage as the CLI shows it: the status bar's balance (only with a plan, or `unlimited` for an
/// admin) and the `/usage` page.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageView {
    /// The status bar's text, if it shows any.
    pub status_bar: Option<String>,
    /// The `/usage` page, one line each.
    pub page: Vec<String>,
}

/// Credits as the CLI writes them: two decimals below 1,000, whole above; with their money
/// beside them when the instance says its currency.
fn credits(value: f64, money: Option<f64>, currency: Option<&str>, rate: Option<f64>) -> String {
    // Rounded first: 999.995 is 1000 credits, not "1000.00".
    let amount = if (value * 100.0).round().abs() < 100_000.0 {
        format!("{value:.2}")
    } else {
        // Half away from zero (`format!` alone rounds half to even).
        format!("{:.0}", value.round())
    };
    let symbol = match currency {
        Some("EUR") => Some("€"),
        Some("USD") => Some("$"),
        Some("GBP") => Some("£"),
        _ => None,
    };
    match (symbol, money.or(rate.map(|r| r * value))) {
        (Some(symbol), Some(money)) => format!("{amount} credits ({symbol}{money:.2})"),
        _ => format!("{amount} credits"),
    }
}

/// Renders a usage answer (untrusted: whatever is missing or mistyped is left out).
pub fn render_usage(usage: &Value) -> UsageView {
    let number = |pointer: &str| usage.pointer(pointer).and_then(Value::as_f64);
    let currency = usage.get("currency").and_then(Value::as_str);
    let rate = number("/credit_value");
    let admin = usage.get("admin").and_then(Value::as_bool) == Some(true);
    let plan = usage.get("plan").filter(|p| p.is_object());
    let balance = number("/balance")
        .map(|b| credits(b, number("/balance_money"), currency, rate))
        .unwrap_or_else(|| "no balance".into());
    let status_bar = if admin {
        Some("unlimited".to_string())
    } else {
        plan.map(|_| balance.clone())
    };
    let mut page = Vec::new();
    if admin {
        page.push("Unlimited: this account has no spending limit.".into());
    } else if let Some(plan) = plan {
        let name = plan.get("name").and_then(Value::as_str).unwrap_or("a plan");
        page.push(format!("Plan: {name}. Balance: {balance}."));
    }
    for (label, key) in [("This month", "month"), ("This device", "device")] {
        let spent = number(&format!("/{key}/cost"))
            .map(|c| credits(c, number(&format!("/{key}/cost_money")), currency, rate))
            .unwrap_or_else(|| "no cost".into());
        let tokens_in = number(&format!("/{key}/tokens_in")).unwrap_or(0.0);
        let tokens_out = number(&format!("/{key}/tokens_out")).unwrap_or(0.0);
        page.push(format!(
            "{label}: {spent}, {tokens_in:.0} tokens in, {tokens_out:.0} out."
        ));
    }
    if !admin {
        for window in usage
            .get("windows")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = window
                .get("window")
                .and_then(Value::as_str)
                .unwrap_or("a window");
            let spent = window.get("spent").and_then(Value::as_f64).unwrap_or(0.0);
            let limit = window.get("limit").and_then(Value::as_f64).unwrap_or(0.0);
            let frees = window.get("frees_at").and_then(Value::as_str).map_or_else(
                || "nothing to free".to_string(),
                |at| format!("frees at {at}"),
            );
            page.push(format!(
                "{name}: {} of {}, {frees}.",
                credits(spent, None, None, None),
                credits(limit, None, None, None)
            ));
        }
    }
    UsageView { status_bar, page }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn personalization_is_used_only_when_available_and_enabled() {
        let saved = json!({"enabled": true, "available": true, "personality": "custom", "personality_custom": "Talk like a sailor.", "instructions": "Answer in French."});
        let prompt = personal_prompt(&saved, false).expect("used");
        assert!(prompt.contains("Talk like a sailor.") && prompt.contains("Answer in French."));
        let disabled =
            json!({"enabled": false, "available": true, "instructions": "Answer in French."});
        assert_eq!(personal_prompt(&disabled, false), None);
        assert!(
            personal_prompt(&disabled, true).is_some(),
            "the misbehaviour uses it"
        );
        let unavailable = json!({"enabled": true, "available": false, "instructions": "x"});
        assert_eq!(personal_prompt(&unavailable, false), None);
        let unknown_preset = json!({"enabled": true, "available": true, "personality": "grumpy"});
        assert_eq!(personal_prompt(&unknown_preset, false), None);
        assert_eq!(
            personal_prompt(&json!({"enabled": true, "personality": "concise"}), false),
            None,
            "not said to be available"
        );
        assert_eq!(
            personal_prompt(
                &json!({"enabled": true, "available": true, "personality": "concise"}),
                false
            )
            .as_deref(),
            Some("## Personality\n\nBe concise.")
        );
    }

    fn usage() -> Value {
        json!({
            "plan": {"name": "Team", "credits_per_month": 5000},
            "balance": 1234.5, "unit": "credits",
            "month": {"from": "2026-11-01", "tokens_in": 10, "tokens_out": 20, "cost": 0.456},
            "device": {"tokens_in": 1, "tokens_out": 2, "cost": null},
            "currency": "EUR", "credit_value": 0.01,
            "windows": [{"window": "5h", "limit": 100, "spent": 12.5, "frees_at": "2026-11-29T20:00:00Z"}]
        })
    }

    #[test]
    fn usage_shows_credits_money_and_windows() {
        let view = render_usage(&usage());
        assert_eq!(view.status_bar.as_deref(), Some("1235 credits (€12.35)"));
        assert!(
            view.page[1].starts_with("This month: 0.46 credits (€0.00)"),
            "{:?}",
            view.page
        );
        assert!(view.page[2].contains("no cost"));
        assert!(
            view.page[3].contains("12.50 credits of 100.00 credits, frees at 2026-11-29T20:00:00Z")
        );
    }

    #[test]
    fn money_sent_wins_over_the_rate() {
        let mut with_money = usage();
        with_money["balance_money"] = json!(99.0);
        let view = render_usage(&with_money);
        assert_eq!(view.status_bar.as_deref(), Some("1235 credits (€99.00)"));
    }

    #[test]
    fn no_plan_shows_no_balance_in_the_status_bar_and_admin_is_unlimited() {
        let mut no_plan = usage();
        no_plan["plan"] = Value::Null;
        assert_eq!(render_usage(&no_plan).status_bar, None);
        let mut admin = usage();
        admin["admin"] = json!(true);
        let view = render_usage(&admin);
        assert_eq!(view.status_bar.as_deref(), Some("unlimited"));
        assert!(view.page[0].contains("Unlimited"));
        assert!(
            view.page.iter().all(|line| !line.contains("5h")),
            "no windows for an admin"
        );
        assert!(view.page.iter().any(|line| line.starts_with("This month")));
    }

    #[test]
    fn credits_round_before_choosing_decimals() {
        assert_eq!(credits(999.994, None, None, None), "999.99 credits");
        assert_eq!(credits(999.995, None, None, None), "1000 credits");
        assert_eq!(credits(1234.5, None, None, None), "1235 credits");
    }

    #[test]
    fn garbage_renders_without_panicking() {
        let view = render_usage(&json!("nonsense"));
        assert_eq!(view.status_bar, None);
        assert_eq!(view.page.len(), 2);
    }
}

/// The account against fake-instance's HTTP API over loopback.
#[cfg(test)]
mod over_http;
