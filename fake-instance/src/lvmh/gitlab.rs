//! The GitLab endpoints (spec, "GitLab"): the daemon validates a personal access token, keeps
//! it in its settings, and lists the projects of its user. The fake daemon's GitLab is the
//! scenario's (`instance.gitlab`): the token it accepts, the user, the repos. The token goes
//! into the store and never into an answer.

use serde::Deserialize;
use serde_json::{Value, json};

/// The settings key the token is kept under.
pub const TOKEN_KEY: &str = "gitlab.token";

/// The GitLab a scenario describes (`instance.gitlab`).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GitLab {
    /// The GitLab's address.
    #[serde(default = "GitLab::default_base")]
    pub base_url: String,
    /// The personal access token it accepts.
    #[serde(default = "GitLab::default_token")]
    pub token: String,
    /// Whose token it is.
    #[serde(default = "GitLab::default_user")]
    pub username: String,
    /// The user's projects: `{path, name, namespace, lastActivityAt, webUrl, defaultBranch}`
    /// (missing fields are made from `path`).
    #[serde(default)]
    pub repos: Vec<Value>,
}

impl Default for GitLab {
    fn default() -> Self {
        Self {
            base_url: Self::default_base(),
            token: Self::default_token(),
            username: Self::default_user(),
            // The same GitLab a daemon under test is pointed at (its member projects).
            repos: harness::lvmh::gitlab::member_repos(&Self::default_base()),
        }
    }
}

impl GitLab {
    fn default_base() -> String {
        "https://gitlab.example.com".into()
    }

    fn default_token() -> String {
        harness::lvmh::gitlab::TOKEN.into()
    }

    fn default_user() -> String {
        harness::lvmh::gitlab::USERNAME.into()
    }

    /// The repos as the API lists them: every field there, most recent activity first.
    pub fn listed(&self) -> Vec<Value> {
        let mut repos: Vec<Value> = self
            .repos
            .iter()
            .filter_map(|r| {
                let path = r.get("path")?.as_str()?.to_string();
                let (namespace, name) = path.rsplit_once('/').unwrap_or(("", path.as_str()));
                let field = |key: &str, default: Value| r.get(key).cloned().unwrap_or(default);
                Some(json!({
                    "path": path,
                    "name": field("name", json!(name)),
                    "namespace": field("namespace", json!(namespace)),
                    "lastActivityAt": field("lastActivityAt", Value::Null),
                    "webUrl": field("webUrl", json!(format!("{}/{path}", self.base_url))),
                    "defaultBranch": field("defaultBranch", json!("main")),
                }))
            })
            .collect();
        repos.sort_by(|a, b| {
            let at = |v: &Value| v["lastActivityAt"].as_str().unwrap_or_default().to_string();
            at(b).cmp(&at(a))
        });
        repos
    }
}
