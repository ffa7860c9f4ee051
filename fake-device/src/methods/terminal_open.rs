//! `_lembas/terminal/open`: a remote terminal started in a directory inside the device's roots
//! (the one asked, or the first root), refused with -32602 when it may not start there.

use std::path::PathBuf;
use std::sync::Arc;

use harness::jsonrpc::{INTERNAL_ERROR, INVALID_PARAMS, Peer, RpcError};
use harness::rules::{Misbehaviours, ids};
use serde_json::Value;

use crate::registry::Registry;
use crate::terminals::Terminals;

/// What a misbehaving device's terminal opening gets wrong; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// A terminal is opened though `terminal` was not listed.
    pub opens_unlisted: bool,
    /// `cwd: null` is taken for a wrong path, not for no `cwd`.
    pub null_refused: bool,
    /// Without `cwd` and with no roots, the user's home.
    pub home_without_roots: bool,
    /// Without `cwd`, the user's home rather than the first root.
    pub home_with_roots: bool,
    /// Any directory, inside the roots or not.
    pub any_directory: bool,
    /// With no root, refused as an internal error.
    pub rootless_internal_error: bool,
    /// A cwd outside the roots refused as an internal error.
    pub outside_internal_error: bool,
}

impl Faults {
    /// The faults `m` asks for.
    pub(crate) fn of(m: &Misbehaviours) -> Faults {
        Faults {
            opens_unlisted: m
                .breaks_way(ids::DEVICE_CAPABILITIES_TERMINAL_CONFIG, "opens_unlisted"),
            null_refused: m.breaks_way(ids::DEVICE_TERMINAL_DEFAULT_CWD, "null_refused"),
            home_without_roots: m.breaks(ids::DEVICE_TERMINAL_NO_ROOTS),
            home_with_roots: m.breaks(ids::DEVICE_TERMINAL_DEFAULT_CWD),
            any_directory: m.breaks(ids::DEVICE_TERMINAL_CWD_ROOTS),
            rootless_internal_error: m.breaks_way(ids::DEVICE_TERMINAL_NO_ROOTS, "other_code"),
            outside_internal_error: m.breaks_way(ids::DEVICE_TERMINAL_CWD_ROOTS, "other_code"),
        }
    }
}

/// Where the device's terminals start and what they say.
pub(crate) struct Desk<'a> {
    /// The device's terminals.
    pub terminals: &'a Arc<Terminals>,
    /// Its sessions' registry, for the limits.
    pub registry: &'a Registry,
    /// The shell's home instead of the user's.
    pub home: Option<&'a PathBuf>,
    /// Capability `shell` listed: the answer has the shell's fields.
    pub shell: bool,
}

/// Answers `_lembas/terminal/open` from `peer`.
pub(crate) fn answer(
    desk: &Desk,
    faults: &Faults,
    peer: &Arc<Peer>,
    params: &Value,
) -> Result<Value, RpcError> {
    cwd(desk, faults, params)
        .and_then(|cwd| desk.terminals.open(peer, params, cwd, desk.shell))
        .map_err(|why| {
            // Misbehaving: with no root, refused as an internal error.
            let rootless = faults.rootless_internal_error
                && desk
                    .registry
                    .limits
                    .read()
                    .is_ok_and(|l| l.roots.is_empty());
            // Misbehaving: a cwd outside the roots refused with another code.
            let code = match rootless
                || (faults.outside_internal_error && why.contains("inside the device's roots"))
            {
                true => INTERNAL_ERROR,
                false => INVALID_PARAMS,
            };
            RpcError::new(code, why)
        })
}

/// A terminal's directory: the one asked for, inside the roots, or the first root.
fn cwd(desk: &Desk, faults: &Faults, params: &Value) -> Result<PathBuf, String> {
    let limits = desk
        .registry
        .limits
        .read()
        .map(|l| l.clone())
        .map_err(|_| "the limits are unavailable".to_string())?;
    // Misbehaving: `cwd: null` is taken for a wrong path, not for no `cwd`.
    if params.get("cwd").is_some_and(Value::is_null) && faults.null_refused {
        return Err("`cwd` must be a path".into());
    }
    let unasked = matches!(params.get("cwd"), None | Some(Value::Null));
    // Misbehaving: a terminal without `cwd` starts in the user's home, whatever the roots
    // (none at all, or a first one it should have started in).
    let homeward = if limits.roots.is_empty() {
        faults.home_without_roots
    } else {
        faults.home_with_roots
    };
    if unasked && homeward {
        return desk
            .home
            .cloned()
            .or_else(|| std::env::var_os("HOME").map(PathBuf::from))
            .ok_or_else(|| "no home".to_string());
    }
    let asked = match params.get("cwd") {
        None | Some(Value::Null) => limits
            .roots
            .first()
            .cloned()
            .ok_or("this device has no root to open a terminal in")?,
        Some(Value::String(cwd)) => PathBuf::from(cwd),
        Some(_) => return Err("`cwd` must be a path".into()),
    };
    let resolved = std::fs::canonicalize(&asked)
        .map_err(|_| format!("`{}` is not a directory here", asked.display()))?;
    // Misbehaving: any directory, inside the roots or not.
    let outside = !limits.inside_roots(&resolved) && !faults.any_directory;
    if !resolved.is_dir() || outside {
        return Err(format!(
            "`{}` is not a directory inside the device's roots",
            asked.display()
        ));
    }
    Ok(resolved)
}
