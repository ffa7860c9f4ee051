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

/// The rules' further ways the rc wrapper is wrong: (rule, way, text of the right wrapper, what
/// replaces it).
const RC_WAYS: [(&str, &str, &str, &str); 8] = [
    // The command number kept from the first command on, so every prompt after one has a `D`,
    // an empty line's too.
    (
        ids::DEVICE_TERMINAL_EMPTY_LINE,
        "stale",
        "  __lembas_seen=$n\n",
        "  [ -n \"$__lembas_seen\" ] && [ \"$n\" != \"$__lembas_seen\" ] && __lembas_ran=1\n  [ -n \"${__lembas_ran:-}\" ] || __lembas_seen=$n\n",
    ),
    // Prompts marked with OSC 133 only: no OSC 7 says the working directory.
    (
        ids::DEVICE_TERMINAL_INTEGRATION,
        "no_osc7",
        r#"printf '\033]7;file://%s%s\007'"#,
        r#": '\033]7;file://%s%s\007'"#,
    ),
    // OSC 7's path percent-encoded twice (a space as %2520).
    (
        ids::DEVICE_TERMINAL_OSC7_ENCODING,
        "twice",
        r#""$(__lembas_enc "$PWD")""#,
        r#""$(__lembas_enc "$(__lembas_enc "$PWD")")""#,
    ),
    // Every login file read, ~/.profile after ~/.bash_profile too.
    (
        ids::DEVICE_TERMINAL_USER_RC,
        "all_files",
        r#"if [ -r "$__lembas_f" ]; then . "$__lembas_f"; break; fi"#,
        r#"if [ -r "$__lembas_f" ]; then . "$__lembas_f"; fi"#,
    ),
    // `B` put back before the user's hooks, which then rebuild the prompt without it.
    (
        ids::DEVICE_TERMINAL_B_AFTER_HOOK,
        "before_hooks",
        r#"PROMPT_COMMAND=(__lembas_status "${PROMPT_COMMAND[@]}" __lembas_prompt)"#,
        r#"PROMPT_COMMAND=(__lembas_status __lembas_prompt "${PROMPT_COMMAND[@]}")"#,
    ),
    (
        ids::DEVICE_TERMINAL_B_AFTER_HOOK,
        "before_hooks",
        r#"PROMPT_COMMAND="__lembas_status${__lembas_pc:+;$__lembas_pc};__lembas_prompt""#,
        r#"PROMPT_COMMAND="__lembas_status;__lembas_prompt${__lembas_pc:+;$__lembas_pc}""#,
    ),
    // A variable of the user's changed: the wrapper's own folder added to PATH.
    (
        ids::DEVICE_TERMINAL_ENV_UNCHANGED,
        "path_changed",
        "__lembas_seen=\n",
        "__lembas_seen=\nexport PATH=\"$PATH:$HOME/.local/share/lembas/bin\"\n",
    ),
    // `logout` kept, but ~/.bash_logout never run.
    (
        ids::DEVICE_TERMINAL_BASH_LOGIN,
        "no_logout_file",
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
    // Misbehaving: the further ways, each a change of the right wrapper's text.
    for (rule, way, right, wrong) in RC_WAYS {
        if misbehave.breaks_way(rule, way) {
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
        for (rule, way, right, _) in RC_WAYS {
            assert!(
                BASH_RC.contains(right),
                "{rule}/{way}: `{right}` is not in the wrapper"
            );
        }
        assert_eq!(text(&Misbehaviours::default()), BASH_RC);
    }
}
