//! `_lembas/directories`: the folder picker of the web UI. Without a path, the places a session
//! may start in (the roots and the trusted directories inside them); with one, that directory
//! and its subdirectories, each saying whether `session/new` would accept it and why not.

use std::path::Path;

use harness::jsonrpc::RpcError;
use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};

use crate::answers::refuse;
use crate::limits::Limits;

/// The most entries one listing gives (a huge directory must not make a huge message).
pub const MAX_ENTRIES: usize = 500;

/// A `Dir`: the path, its name, and whether a session may start there.
fn dir(limits: &Limits, path: &Path) -> Value {
    let text = path.display().to_string();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| text.clone());
    let mut entry = json!({ "path": text, "name": name, "accepted": true });
    if let Err(reason) = limits.check_cwd(&text) {
        entry["accepted"] = json!(false);
        entry["reason"] = json!(reason);
    }
    entry
}

/// What the picker gets wrong on purpose (a misbehaving device); all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub struct Faults {
    /// Lists whatever path is asked.
    pub any_path: bool,
    /// Lists no subfolders.
    pub no_subfolders: bool,
    /// Marks every subfolder not accepted, whatever session/new would do.
    pub refuses_entries: bool,
    /// Refuses a path outside the roots with -32603, not -32602.
    pub other_code: bool,
    /// Lists the parent's subfolders in place of the folder's own.
    pub parent_entries: bool,
}

impl Faults {
    /// The faults `m` asks for.
    pub(crate) fn of(m: &Misbehaviours) -> Faults {
        Faults {
            any_path: m.breaks(ids::DEVICE_DIRECTORIES_ROOTS),
            no_subfolders: m.breaks(ids::DEVICE_DIRECTORIES_LISTING),
            refuses_entries: m.breaks(ids::DEVICE_DIRECTORIES_ACCEPTED),
            other_code: m.breaks_way(ids::DEVICE_DIRECTORIES_ROOTS, "other_code"),
            parent_entries: m.breaks_way(ids::DEVICE_DIRECTORIES_LISTING, "siblings"),
        }
    }
}

/// Answers `_lembas/directories` under the limits as they are now.
pub fn answer(limits: &Limits, params: &Value, faults: Faults) -> Result<Value, RpcError> {
    let Some(path) = params
        .get("path")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
    else {
        let mut places: Vec<&Path> = Vec::new();
        if limits.remote {
            for place in limits.roots.iter().chain(
                limits
                    .trusted
                    .iter()
                    .filter(|t| limits.inside_roots(t.as_path())),
            ) {
                if !places.contains(&place.as_path()) {
                    places.push(place);
                }
            }
        }
        let places: Vec<Value> = places.into_iter().map(|p| dir(limits, p)).collect();
        return Ok(json!({ "path": "", "places": places }));
    };
    // A listing is refused as session/new refuses a folder: no roots, remote work off, not
    // absolute, outside the roots. Trust is not needed to look.
    if faults.any_path {
        let asked = Path::new(path);
        let mut result = dir(limits, asked);
        result["parent"] = Value::Null;
        result["entries"] = json!([]);
        return Ok(result);
    }
    if !limits.remote {
        return Err(refuse("remote work is off on this device"));
    }
    // Misbehaving: a path outside the roots (any, with none) refused as an internal error.
    let refuse = |reason: String| match faults.other_code {
        true => RpcError::new(-32603, reason),
        false => refuse(reason),
    };
    if limits.roots.is_empty() {
        return Err(refuse(
            "this device allows no folder yet (no remote roots)".into(),
        ));
    }
    let asked = Path::new(path);
    if !asked.is_absolute() {
        return Err(refuse(format!("`{path}` is not an absolute path")));
    }
    let resolved = std::fs::canonicalize(asked).unwrap_or_else(|_| asked.to_path_buf());
    if !limits.inside_roots(&resolved) {
        return Err(refuse(format!(
            "`{path}` is outside the device's remote roots"
        )));
    }
    let mut result = dir(limits, &resolved);
    result["parent"] = match resolved.parent() {
        Some(parent) if limits.inside_roots(parent) => json!(parent.display().to_string()),
        _ => Value::Null,
    };
    // Misbehaving: the parent's subfolders listed as the folder's.
    let listed = match resolved.parent() {
        Some(parent) if faults.parent_entries => parent.to_path_buf(),
        _ => resolved.clone(),
    };
    match std::fs::read_dir(&listed) {
        Ok(read) => {
            let mut subdirs: Vec<_> = read
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect();
            subdirs.sort();
            subdirs.truncate(MAX_ENTRIES);
            if faults.no_subfolders {
                subdirs.clear();
            }
            let entries: Vec<Value> = subdirs
                .iter()
                .map(|p| dir(limits, p))
                .map(|mut entry| {
                    if faults.refuses_entries {
                        entry["accepted"] = json!(false);
                    }
                    entry
                })
                .collect();
            result["entries"] = json!(entries);
        }
        Err(e) => {
            result["entries"] = json!([]);
            result["error"] = json!(format!("cannot list it: {e}"));
        }
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_and_listings_say_what_session_new_would_accept() {
        let root = tempfile::tempdir().expect("root");
        std::fs::create_dir(root.path().join("b")).expect("dir");
        std::fs::create_dir(root.path().join("a")).expect("dir");
        std::fs::write(root.path().join("file.txt"), "x").expect("file");
        let mut limits = Limits::new(&[root.path().display().to_string()]);
        let places = answer(&limits, &json!({}), Faults::default()).expect("places");
        assert_eq!(places["path"], "");
        assert_eq!(places["places"].as_array().map(Vec::len), Some(1));
        assert_eq!(places["places"][0]["accepted"], true);

        let root_path = limits.roots[0].display().to_string();
        let listing =
            answer(&limits, &json!({"path": root_path}), Faults::default()).expect("listing");
        let names: Vec<&str> = listing["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .filter_map(|e| e["name"].as_str())
            .collect();
        assert_eq!(names, ["a", "b"], "directories only, sorted");
        assert_eq!(listing["parent"], Value::Null, "nothing above a root");

        limits.trusted.clear();
        let untrusted =
            answer(&limits, &json!({"path": root_path}), Faults::default()).expect("listing");
        assert_eq!(untrusted["accepted"], false);
        assert!(
            untrusted["reason"]
                .as_str()
                .is_some_and(|r| r.contains("trusted"))
        );

        assert!(
            answer(&limits, &json!({"path": "/"}), Faults::default()).is_err(),
            "outside the roots"
        );
        assert!(answer(&limits, &json!({"path": "relative"}), Faults::default()).is_err());
        assert!(
            answer(
                &Limits::new(&[]),
                &json!({"path": "/tmp"}),
                Faults::default()
            )
            .is_err(),
            "no roots"
        );
        assert_eq!(
            answer(&Limits::new(&[]), &json!({}), Faults::default()).expect("places")["places"],
            json!([])
        );
    }
}
