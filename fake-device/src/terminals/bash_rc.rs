//! fake-device's bash rc wrapper (the spec's shell integration, `bash_integration.sh`), as
//! written for a terminal: the right one, or with the faults of the rules the device was told to
//! break.

use harness::rules::{Misbehaviours, ids};

/// The bash rc wrapper: the login files as a login shell reads them, then the marks.
const BASH_RC: &str = include_str!("../bash_integration.sh");

/// What the rc wrapper gets wrong for each rule it is told to break: (rule, text of the right
/// wrapper, what replaces it).
const RC_FAULTS: [(&str, &str, &str); 7] = [
    // Spaces left as they are in OSC 7's path.
    (
        ids::DEVICE_TERMINAL_OSC7_ENCODING,
        "[a-zA-Z0-9/._~-]) out+=$c ;;",
        "[a-zA-Z0-9/._~-]|' ') out+=$c ;;",
    ),
    // A `D` on every prompt after the first, an empty line's too.
    (
        ids::DEVICE_TERMINAL_EMPTY_LINE,
        r#"[ -n "$__lembas_seen" ] && [ "$n" != "$__lembas_seen" ]"#,
        r#"[ -n "$__lembas_seen" ]"#,
    ),
    // The interactive shell's ~/.bashrc in place of the user's login files.
    (
        ids::DEVICE_TERMINAL_USER_RC,
        "for __lembas_f in ~/.bash_profile ~/.bash_login ~/.profile; do",
        "for __lembas_f in ~/.bashrc; do",
    ),
    // `B` put into PS1 once, where a hook that rebuilds the prompt drops it.
    (
        ids::DEVICE_TERMINAL_B_AFTER_HOOK,
        r#"case $PS1 in *'133;B'*) ;; *) PS1="$PS1"'\[\033]133;B\007\]' ;; esac"#,
        r#":"#,
    ),
    // A variable of the wrapper's own left in the user's environment.
    (
        ids::DEVICE_TERMINAL_ENV_UNCHANGED,
        "__lembas_seen=\n",
        "__lembas_seen=\nexport LEMBAS_SHELL_INTEGRATION=1\n",
    ),
    // Neither `logout` nor ~/.bash_logout, as in any non-login shell.
    (
        ids::DEVICE_TERMINAL_BASH_LOGIN,
        r#"logout() { exit "$@"; }"#,
        ":",
    ),
    (
        ids::DEVICE_TERMINAL_BASH_LOGIN,
        "trap '[ -r ~/.bash_logout ] && . ~/.bash_logout' EXIT",
        ":",
    ),
];

/// The rc wrapper this device writes: the spec's, with the faults of the rules it breaks.
pub(super) fn text(misbehave: &Misbehaviours) -> String {
    let mut rc = BASH_RC.to_string();
    for (rule, right, wrong) in RC_FAULTS {
        if misbehave.breaks(rule) {
            rc = rc.replace(right, wrong);
        }
    }
    if misbehave.breaks(ids::DEVICE_TERMINAL_B_AFTER_HOOK) {
        rc.push_str("PS1=\"$PS1\"'\\[\\033]133;B\\007\\]'\n");
    }
    rc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_fault_of_the_rc_wrapper_changes_it() {
        for (rule, right, _) in RC_FAULTS {
            assert!(
                BASH_RC.contains(right),
                "{rule}: `{right}` is not in the wrapper"
            );
            let faulty = text(
                &Misbehaviours::parse(&[rule.to_string()], harness::rules::Binds::Device)
                    .expect("a device rule"),
            );
            assert_ne!(faulty, BASH_RC, "{rule}");
        }
        assert_eq!(text(&Misbehaviours::default()), BASH_RC);
    }
}
