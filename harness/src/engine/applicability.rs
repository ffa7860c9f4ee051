//! Whether a run applies to the peer under test.
//!
//! A real peer implements only some of the protocol, and says which part: a device lists its
//! capabilities, and its test can arrange only some set-up. A step that needs what the peer
//! never claimed cannot judge it, so the run ends **not applicable**, naming the need, instead
//! of failing. The engine does not know what a capability is: before a step sends or waits, it
//! tells the double's [`Behaviour`](super::Behaviour) what the step is about to do, and the
//! double answers from its protocol model.

use serde_json::Value;

/// What a step is about to do, for the double to judge against what its peer claimed.
#[derive(Debug, Clone, Copy)]
pub enum Intent<'a> {
    /// Any step is about to run: what the whole scenario relies on (its `needs`, the peer's
    /// set-up it can see).
    Step,
    /// The step sends this message (`request`, `start`, `notify`).
    Send {
        /// Its method.
        method: &'a str,
        /// Its params, substituted.
        params: &'a Value,
    },
    /// The step judges the answer to a request of this method against a result pattern.
    Answer {
        /// The request's method.
        method: &'a str,
        /// The pattern the result must match.
        result: &'a Value,
    },
    /// The step waits for a message matching this pattern (`expect`).
    Await {
        /// The whole-message pattern.
        pattern: &'a Value,
    },
    /// A `when` runs its steps only if the peer claimed these (the scenario's words for what the
    /// double checks: fake-instance reads them as capabilities).
    Claims {
        /// What the steps need.
        needs: &'a [String],
    },
    /// The step waited for a message matching this pattern and none came: whether the peer
    /// ever did what would produce it.
    Missed {
        /// The whole-message pattern.
        pattern: &'a Value,
    },
}

/// The double's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applies {
    /// The peer claimed what the step needs (or the step needs nothing).
    Yes,
    /// Not known yet (the peer has not said its capabilities): a step that sends waits a little
    /// for the answer, one that waits goes on and asks again at its deadline.
    NotYet,
    /// The peer did not claim it: the run is not applicable, for this reason.
    No(String),
}

/// An action a double could not do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActError {
    /// The peer did not claim what the action needs (the run is not applicable).
    #[error("not applicable: {0}")]
    NotApplicable(String),
    /// The action went wrong: the scenario asked for something impossible, or the peer did not
    /// answer.
    #[error("{0}")]
    Failed(String),
    /// Not an action of this double (an unknown key, a field of the wrong type).
    #[error("{0}")]
    Unknown(String),
}

impl From<String> for ActError {
    fn from(why: String) -> Self {
        ActError::Failed(why)
    }
}

impl From<&str> for ActError {
    fn from(why: &str) -> Self {
        ActError::Failed(why.to_string())
    }
}

/// What a run needs of the peer's set-up that nothing arranged: the run is not applicable
/// before it starts. `needs` are the set-up actions the scenario's `peer:` asks for; `arranged`
/// says which of them something does (the other double in the self-test, the user's own test).
pub fn unarranged(needs: &[String], arranged: &Arranged) -> Option<String> {
    unarranged_but(needs, arranged, &[])
}

/// As [`unarranged`], where the double itself does `by_the_double` for a peer it starts (no
/// hook does them): their names are said with how to get them done instead.
pub fn unarranged_but(
    needs: &[String],
    arranged: &Arranged,
    by_the_double: &[&str],
) -> Option<String> {
    let missing: Vec<&str> = needs
        .iter()
        .filter(|n| !arranged.covers(n))
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        return None;
    }
    let (own, hooked): (Vec<&str>, Vec<&str>) =
        missing.iter().partition(|m| by_the_double.contains(m));
    let quoted = |names: &[&str]| {
        names
            .iter()
            .map(|m| format!("`{m}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut said = Vec::new();
    if !hooked.is_empty() {
        said.push(format!(
            "needs hook {} (map it to a command or a request with --hooks FILE, or arrange it in the peer's own test and say so with --arranged {})",
            quoted(&hooked),
            hooked.join(",")
        ));
    }
    if !own.is_empty() {
        said.push(format!(
            "needs {} (the double does it for a peer it starts with --exec; else arrange it in the peer's own test and say so with --arranged {})",
            quoted(&own),
            own.join(",")
        ));
    }
    Some(said.join("; "))
}

/// Which set-up actions something arranges for the peer under test.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Arranged {
    /// None: a real peer that only links and talks.
    #[default]
    Nothing,
    /// These, by name.
    Only(Vec<String>),
    /// Every one (the self-test's other double does them all).
    Everything,
}

impl Arranged {
    /// Reads `--arranged` values: names, or `all`.
    pub fn from_names(names: &[String]) -> Arranged {
        if names.iter().any(|n| n == "all") {
            Arranged::Everything
        } else if names.is_empty() {
            Arranged::Nothing
        } else {
            Arranged::Only(names.to_vec())
        }
    }

    /// These and `more`: what the double itself arranges for a peer it started (the files of
    /// its root) joins what the user's test does.
    pub fn and(self, more: impl IntoIterator<Item = String>) -> Arranged {
        let more: Vec<String> = more.into_iter().collect();
        match self {
            Arranged::Everything => Arranged::Everything,
            Arranged::Nothing if more.is_empty() => Arranged::Nothing,
            Arranged::Nothing => Arranged::Only(more),
            Arranged::Only(mut names) => {
                names.extend(more);
                Arranged::Only(names)
            }
        }
    }

    /// Whether this set-up action is arranged.
    pub fn covers(&self, need: &str) -> bool {
        match self {
            Arranged::Nothing => false,
            Arranged::Only(names) => names.iter().any(|n| n == need),
            Arranged::Everything => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unarranged_set_up_is_named_with_how_to_arrange_it() {
        let needs = vec!["share_session".to_string(), "restart".to_string()];
        let why = unarranged(&needs, &Arranged::Nothing).expect("nothing is arranged");
        assert!(why.contains("`share_session`, `restart`"), "{why}");
        assert!(why.contains("--arranged share_session,restart"), "{why}");
        assert!(why.starts_with("needs hook `share_session`"), "{why}");
        let some = Arranged::from_names(&["restart".into()]);
        assert!(
            unarranged(&needs, &some)
                .expect("one is missing")
                .contains("`share_session`")
        );
        assert_eq!(
            unarranged(&needs, &Arranged::from_names(&["all".into()])),
            None
        );
        assert_eq!(unarranged(&[], &Arranged::Nothing), None);
    }
}
