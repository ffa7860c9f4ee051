//! The link's method names, each once (spec: the method tables of the ACP section and of the
//! `_lembas/*` extension), so a misspelt method is a compile error rather than a check that never
//! matches. Requests, notifications and the device's own calls alike.

/// `_lembas/commands`.
pub const LEMBAS_COMMANDS: &str = "_lembas/commands";
/// `_lembas/configure`.
pub const LEMBAS_CONFIGURE: &str = "_lembas/configure";
/// `_lembas/directories`.
pub const LEMBAS_DIRECTORIES: &str = "_lembas/directories";
/// `_lembas/event`.
pub const LEMBAS_EVENT: &str = "_lembas/event";
/// `_lembas/files/search`.
pub const LEMBAS_FILES_SEARCH: &str = "_lembas/files/search";
/// `_lembas/hello`.
pub const LEMBAS_HELLO: &str = "_lembas/hello";
/// `_lembas/permission/settled`.
pub const LEMBAS_PERMISSION_SETTLED: &str = "_lembas/permission/settled";
/// `_lembas/plan`.
pub const LEMBAS_PLAN: &str = "_lembas/plan";
/// `_lembas/question`.
pub const LEMBAS_QUESTION: &str = "_lembas/question";
/// `_lembas/session/announce`.
pub const LEMBAS_SESSION_ANNOUNCE: &str = "_lembas/session/announce";
/// `_lembas/session/compact`.
pub const LEMBAS_SESSION_COMPACT: &str = "_lembas/session/compact";
/// `_lembas/session/delete`.
pub const LEMBAS_SESSION_DELETE: &str = "_lembas/session/delete";
/// `_lembas/session/deleted`.
pub const LEMBAS_SESSION_DELETED: &str = "_lembas/session/deleted";
/// `_lembas/session/history`.
pub const LEMBAS_SESSION_HISTORY: &str = "_lembas/session/history";
/// `_lembas/session/left`.
pub const LEMBAS_SESSION_LEFT: &str = "_lembas/session/left";
/// `_lembas/session/rewind`.
pub const LEMBAS_SESSION_REWIND: &str = "_lembas/session/rewind";
/// `_lembas/session/status`.
pub const LEMBAS_SESSION_STATUS: &str = "_lembas/session/status";
/// `_lembas/session/title`.
pub const LEMBAS_SESSION_TITLE: &str = "_lembas/session/title";
/// `_lembas/steer`.
pub const LEMBAS_STEER: &str = "_lembas/steer";
/// `_lembas/terminal/close`.
pub const LEMBAS_TERMINAL_CLOSE: &str = "_lembas/terminal/close";
/// `_lembas/terminal/exit`.
pub const LEMBAS_TERMINAL_EXIT: &str = "_lembas/terminal/exit";
/// `_lembas/terminal/input`.
pub const LEMBAS_TERMINAL_INPUT: &str = "_lembas/terminal/input";
/// `_lembas/terminal/open`.
pub const LEMBAS_TERMINAL_OPEN: &str = "_lembas/terminal/open";
/// `_lembas/terminal/output`.
pub const LEMBAS_TERMINAL_OUTPUT: &str = "_lembas/terminal/output";
/// `_lembas/terminal/resize`.
pub const LEMBAS_TERMINAL_RESIZE: &str = "_lembas/terminal/resize";
/// `initialize`.
pub const INITIALIZE: &str = "initialize";
/// `session/cancel`.
pub const SESSION_CANCEL: &str = "session/cancel";
/// `session/new`.
pub const SESSION_NEW: &str = "session/new";
/// `session/prompt`.
pub const SESSION_PROMPT: &str = "session/prompt";
/// `session/request_permission`.
pub const SESSION_REQUEST_PERMISSION: &str = "session/request_permission";
/// `session/set_mode`.
pub const SESSION_SET_MODE: &str = "session/set_mode";
/// `session/update`.
pub const SESSION_UPDATE: &str = "session/update";
