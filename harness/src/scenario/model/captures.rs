//! What a step keeps of the message it matched, for later steps: a name and where in the message
//! its value is.

use std::collections::BTreeMap;

/// What to capture: variable name → path in the matched message (`result.sessionId`,
/// `params.questions[0]`; `$` for the whole message).
pub type Captures = BTreeMap<String, String>;
