//! `_lembas/files/search`: the `@` picker over a session's directory (or over a `cwd` that
//! `session/new` would accept), bounded in count and leaving out what git ignores.

use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};

use super::call::Call;
use crate::answers::{Answer, param_str, refuse};
use crate::files::{DEFAULT_LIMIT, Entry, MAX_LIMIT};

/// What a misbehaving device's file search gets wrong; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// The picker's first, empty query is refused as a mistake.
    pub empty_refused: bool,
    /// An empty query is answered with no list at all.
    pub empty_null: bool,
    /// As many as asked, and gitignored files too.
    pub careless: bool,
    /// Each path absolute, not relative to `root`.
    pub absolute: bool,
    /// The first root is named, whatever directory the session works in.
    pub first_root: bool,
    /// The working directory is named relative to the first root.
    pub relative_root: bool,
}

impl Faults {
    /// The faults `m` asks for.
    pub(crate) fn of(m: &Misbehaviours) -> Faults {
        Faults {
            empty_refused: m.breaks(ids::DEVICE_FILES_EMPTY_QUERY),
            empty_null: m.breaks_way(ids::DEVICE_FILES_EMPTY_QUERY, "null_files"),
            careless: m.breaks(ids::DEVICE_FILES_SEARCH),
            absolute: m.breaks_way(ids::DEVICE_FILES_SEARCH, "absolute"),
            first_root: m.breaks(ids::DEVICE_FILES_ROOT),
            relative_root: m.breaks_way(ids::DEVICE_FILES_ROOT, "relative"),
        }
    }
}

/// Answers `_lembas/files/search`.
pub(crate) async fn answer(call: Call<'_>, faults: &Faults) -> Answer {
    let (sessions, params) = (call.sessions, call.params);
    let registry = sessions.registry();
    let root = if params.get("sessionId").is_some() {
        let live = sessions.session(params).await?;
        live.state.lock().await.stored.cwd.clone()
    } else if let Some(cwd) = params.get("cwd") {
        let cwd = cwd
            .as_str()
            .ok_or_else(|| refuse("`cwd` must be a string"))?;
        registry.limits().check_cwd(cwd).map_err(refuse)?
    } else {
        return Err(refuse("say `sessionId` or `cwd`"));
    };
    let query = param_str(params, "query")?;
    if query.trim().is_empty() && faults.empty_refused {
        // Misbehaving: the picker's first, empty query is taken for a mistake.
        return Err(refuse("say what to search for"));
    }
    if query.trim().is_empty() && faults.empty_null {
        // Misbehaving: an empty query is answered with no list at all.
        return Ok(json!({ "root": root.display().to_string(), "files": null }));
    }
    let limit = match params.get("limit") {
        None | Some(Value::Null) => DEFAULT_LIMIT,
        Some(limit) => limit
            .as_u64()
            .filter(|l| *l >= 1)
            .and_then(|l| usize::try_from(l).ok())
            .ok_or_else(|| refuse("`limit` must be a whole number from 1"))?,
    };
    // Misbehaving: as many as asked, and gitignored files too.
    let careless = faults.careless;
    let limit = if careless {
        limit
    } else {
        limit.min(MAX_LIMIT)
    };
    let (frecency_root, query_owned) = (root.clone(), query.to_string());
    let walker = registry.clone();
    // The walk reads directories: off the async threads.
    let found = tokio::task::spawn_blocking(move || {
        crate::files::search(
            &frecency_root,
            &query_owned,
            limit,
            &walker.frecency,
            careless,
        )
    })
    .await
    .map_err(|e| refuse(format!("the search failed: {e}")))?;
    let mut files: Vec<Value> = found.iter().map(Entry::to_value).collect();
    if faults.absolute {
        // Misbehaving: each path absolute, not relative to `root`.
        for file in &mut files {
            if let Some(path) = file["path"].as_str() {
                file["path"] = json!(root.join(path).display().to_string());
            }
        }
    }
    let root = match registry.limits().roots.first() {
        // Misbehaving: the first root is named whatever directory the session works in.
        Some(first) if faults.first_root => first.clone(),
        // Misbehaving: the working directory named relative to the first root.
        Some(first) if root != *first && faults.relative_root => root
            .strip_prefix(first)
            .map_or(root.clone(), |r| r.to_path_buf()),
        _ => root,
    };
    Ok(json!({ "root": root.display().to_string(), "files": files }))
}
