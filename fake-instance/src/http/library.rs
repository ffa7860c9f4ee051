//! The account's library: knowledge bases of documents, and which of them a call may search.
//!
//! The scope rules are the spec's paragraph on the library in the HTTP API section: a call made
//! for a session names it in `_meta.lembas.scope`, and is answered within that chat's knowledge
//! bases (the `library.bases` of its `Context`; an empty list is the whole library); a session
//! that is not one of the calling device's chats is refused; a call without a scope searches the
//! account's default data group. [`mcp`](super::mcp) serves this over MCP.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A scenario's library (`instance.http.library`). Default: one base, `handbook`, with two
/// documents, so a library call answers something without configuration.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LibraryConfig {
    /// The account's knowledge bases.
    pub bases: Vec<KnowledgeBase>,
    /// The ids of the bases in the account's default data group, which a call without a scope
    /// searches. Default: every base.
    pub default_group: Option<Vec<String>>,
}

impl Default for LibraryConfig {
    fn default() -> Self {
        Self {
            bases: vec![KnowledgeBase {
                id: "handbook".into(),
                name: "Handbook".into(),
                documents: vec![
                    Document {
                        title: "Onboarding".into(),
                        text: "New engineers pair with a mentor for their first two weeks.".into(),
                    },
                    Document {
                        title: "Releases".into(),
                        text: "Releases go out on Tuesdays after the test suite passes.".into(),
                    },
                ],
            }],
            default_group: None,
        }
    }
}

/// One knowledge base.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KnowledgeBase {
    /// Its id (what a chat's `Context.library.bases[].id` names).
    pub id: String,
    /// Its name, as the web UI shows it.
    pub name: String,
    /// What it holds.
    #[serde(default)]
    pub documents: Vec<Document>,
}

/// One document of a knowledge base.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Document {
    /// Its title.
    pub title: String,
    /// Its text.
    pub text: String,
}

/// Where a call may look, once its scope is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// No scope: the default data group.
    DefaultGroup,
    /// A chat's scope: these base ids; empty: the whole library.
    Chat {
        /// The chat's session id.
        session_id: String,
        /// The base ids its `Context` named.
        bases: Vec<String>,
    },
}

/// Why a call's scope is refused (answered with -32602, invalid params).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    /// `scope` is there but is not a string.
    #[error("`_meta.lembas.scope` must be a session id (a string)")]
    NotASessionId,
    /// `scope` names a session that is not one of this device's chats.
    #[error("session `{0}` is not one of this device's chats")]
    Foreign(String),
}

/// Why a search cannot look in the base it names (the tool call fails with it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SearchError {
    /// The base is in the library, outside the call's reach.
    #[error("knowledge base `{0}` is outside this scope")]
    OutOfScope(String),
    /// No base has this id or name.
    #[error("no knowledge base `{0}`")]
    Unknown(String),
}

/// The chats a scope may name: which device each belongs to and which bases it may search.
pub trait ChatScopes: Send + Sync {
    /// The base ids the device's chat with this session id names (empty: the whole library), or
    /// `None` when the session is not one of that device's chats.
    fn bases_of(&self, device: &str, session_id: &str) -> Option<Vec<String>>;
}

/// No chats at all: every scope is foreign (an HTTP API served without a link side).
#[derive(Debug, Default)]
pub struct NoChats;

impl ChatScopes for NoChats {
    fn bases_of(&self, _device: &str, _session_id: &str) -> Option<Vec<String>> {
        None
    }
}

/// A fixed table of chats, device → session → bases (for tests and embedders).
impl ChatScopes for BTreeMap<String, BTreeMap<String, Vec<String>>> {
    fn bases_of(&self, device: &str, session_id: &str) -> Option<Vec<String>> {
        self.get(device)?.get(session_id).cloned()
    }
}

/// Reads a `tools/call`'s `_meta` (the whole `_meta` object, or none) for the caller `device`.
pub fn reach(
    meta: Option<&Value>,
    device: &str,
    chats: &dyn ChatScopes,
) -> Result<Reach, ScopeError> {
    let scope = meta
        .and_then(|m| m.get("lembas"))
        .and_then(|l| l.get("scope"));
    match scope {
        None | Some(Value::Null) => Ok(Reach::DefaultGroup),
        Some(Value::String(session_id)) => chats
            .bases_of(device, session_id)
            .map(|bases| Reach::Chat {
                session_id: session_id.clone(),
                bases,
            })
            .ok_or_else(|| ScopeError::Foreign(session_id.clone())),
        Some(_) => Err(ScopeError::NotASessionId),
    }
}

/// One document found, with the base it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    /// The base's id.
    pub base: String,
    /// The document's title.
    pub title: String,
    /// The document's text.
    pub text: String,
}

impl LibraryConfig {
    /// The bases a reach covers, in the library's order.
    pub fn bases_within(&self, reach: &Reach) -> Vec<&KnowledgeBase> {
        let named: Option<&[String]> = match reach {
            Reach::DefaultGroup => self.default_group.as_deref(),
            Reach::Chat { bases, .. } if bases.is_empty() => None,
            Reach::Chat { bases, .. } => Some(bases),
        };
        self.bases
            .iter()
            .filter(|b| named.is_none_or(|ids| ids.contains(&b.id)))
            .collect()
    }

    /// Searches the bases within reach, or only the one `base` names (by id or name, any
    /// case). `Err` says why `base` cannot be searched: it is outside the reach, or unknown.
    pub fn search(
        &self,
        reach: &Reach,
        query: &str,
        base: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Hit>, SearchError> {
        let within = self.bases_within(reach);
        let searched: Vec<&KnowledgeBase> = match base {
            None => within,
            Some(wanted) => {
                let names = |b: &&KnowledgeBase| {
                    b.id.eq_ignore_ascii_case(wanted) || b.name.eq_ignore_ascii_case(wanted)
                };
                match within.iter().copied().find(names) {
                    Some(found) => vec![found],
                    None if self.bases.iter().any(|b| names(&b)) => {
                        return Err(SearchError::OutOfScope(wanted.to_string()));
                    }
                    None => return Err(SearchError::Unknown(wanted.to_string())),
                }
            }
        };
        let terms: Vec<String> = query
            .split_whitespace()
            .map(str::to_lowercase)
            .filter(|t| !t.is_empty())
            .collect();
        let mut scored: Vec<(usize, Hit)> = searched
            .iter()
            .flat_map(|b| b.documents.iter().map(move |d| (b, d)))
            .filter_map(|(b, d)| {
                let haystack = format!("{} {}", d.title, d.text).to_lowercase();
                let score = terms
                    .iter()
                    .filter(|t| haystack.contains(t.as_str()))
                    .count();
                (score > 0 || terms.is_empty()).then(|| {
                    (
                        score,
                        Hit {
                            base: b.id.clone(),
                            title: d.title.clone(),
                            text: d.text.clone(),
                        },
                    )
                })
            })
            .collect();
        // Stable: equal scores keep the library's order.
        scored.sort_by_key(|s| std::cmp::Reverse(s.0));
        Ok(scored.into_iter().take(limit).map(|(_, hit)| hit).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn library() -> LibraryConfig {
        serde_json::from_value(json!({
            "bases": [
                {"id": "kb-a", "name": "Alpha", "documents": [{"title": "Teal", "text": "The brand colour is teal."}]},
                {"id": "kb-b", "name": "Beta", "documents": [{"title": "Rust", "text": "We write the doubles in Rust."}]},
            ],
            "default_group": ["kb-b"]
        }))
        .expect("valid")
    }

    fn chats() -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
        let mut device = BTreeMap::new();
        device.insert("s-scoped".to_string(), vec!["kb-a".to_string()]);
        device.insert("s-all".to_string(), vec![]);
        BTreeMap::from([("device-1".to_string(), device)])
    }

    #[test]
    fn a_scope_names_one_of_the_devices_chats_or_is_refused() {
        let meta = json!({"lembas": {"scope": "s-scoped"}});
        assert_eq!(
            reach(Some(&meta), "device-1", &chats()),
            Ok(Reach::Chat {
                session_id: "s-scoped".into(),
                bases: vec!["kb-a".into()]
            })
        );
        assert_eq!(
            reach(Some(&meta), "device-2", &chats()),
            Err(ScopeError::Foreign("s-scoped".into()))
        );
        let wrong = json!({"lembas": {"scope": 7}});
        assert_eq!(
            reach(Some(&wrong), "device-1", &chats()),
            Err(ScopeError::NotASessionId)
        );
        assert_eq!(reach(None, "device-1", &chats()), Ok(Reach::DefaultGroup));
        let other_meta = json!({"progressToken": 1});
        assert_eq!(
            reach(Some(&other_meta), "device-1", &chats()),
            Ok(Reach::DefaultGroup)
        );
    }

    #[test]
    fn each_reach_searches_its_own_bases() {
        let library = library();
        let ids = |reach: &Reach| -> Vec<String> {
            library
                .bases_within(reach)
                .iter()
                .map(|b| b.id.clone())
                .collect()
        };
        assert_eq!(ids(&Reach::DefaultGroup), ["kb-b"]);
        let scoped = Reach::Chat {
            session_id: "s".into(),
            bases: vec!["kb-a".into()],
        };
        assert_eq!(ids(&scoped), ["kb-a"]);
        let whole = Reach::Chat {
            session_id: "s".into(),
            bases: vec![],
        };
        assert_eq!(ids(&whole), ["kb-a", "kb-b"]);
    }

    #[test]
    fn search_matches_terms_and_refuses_a_base_out_of_reach() {
        let library = library();
        let scoped = Reach::Chat {
            session_id: "s".into(),
            bases: vec!["kb-a".into()],
        };
        let hits = library
            .search(&scoped, "brand colour", None, 10)
            .expect("ok");
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].base, "kb-a");
        assert!(
            library
                .search(&scoped, "rust", None, 10)
                .expect("ok")
                .is_empty()
        );
        assert_eq!(
            library
                .search(&scoped, "rust", Some("beta"), 10)
                .map_err(|e| e.to_string()),
            Err("knowledge base `beta` is outside this scope".into())
        );
        assert_eq!(
            library
                .search(&scoped, "x", Some("gamma"), 10)
                .map_err(|e| e.to_string()),
            Err("no knowledge base `gamma`".into())
        );
        assert_eq!(
            library
                .search(&scoped, "teal", Some("ALPHA"), 10)
                .expect("by name")
                .len(),
            1
        );
    }
}
