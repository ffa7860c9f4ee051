# fake-device's shell integration for bash (the LLeMbas link spec's).
# The user's own login files first, as a login shell reads them (PS1 unset for /etc/profile, so
# /etc/bash.bashrc is read once, from there).
if [ -r /etc/profile ]; then __lembas_ps1=$PS1; unset PS1; . /etc/profile; PS1=${PS1:-$__lembas_ps1}; fi
for __lembas_f in ~/.bash_profile ~/.bash_login ~/.profile; do
  if [ -r "$__lembas_f" ]; then . "$__lembas_f"; break; fi
done
unset __lembas_f __lembas_ps1
# `logout` and ~/.bash_logout, as in a login shell.
logout() { exit "$@"; }
# (Only when the user's files set no EXIT trap of their own: theirs stays.)
if [ -z "$(trap -p EXIT)" ]; then trap '[ -r ~/.bash_logout ] && . ~/.bash_logout' EXIT; fi
__lembas_enc() {
  local LC_ALL=C s=$1 out= c i
  for ((i = 0; i < ${#s}; i++)); do
    c=${s:i:1}
    case $c in
      [a-zA-Z0-9/._~-]) out+=$c ;;
      *) printf -v c '%%%02X' "'$c"; out+=$c ;;
    esac
  done
  printf '%s' "$out"
}
__lembas_seen=
__lembas_status() {
  local status=$? n='\#'
  # The command number (`\#`, expanded as a prompt: bash 4.4 and later); older bashes count
  # history entries instead.
  if (( BASH_VERSINFO[0] > 4 || (BASH_VERSINFO[0] == 4 && BASH_VERSINFO[1] >= 4) )); then
    n=${n@P}
  else
    n=$HISTCMD
  fi
  # A command ran only when the command number moved: an empty line ends no command.
  if [ -n "$__lembas_seen" ] && [ "$n" != "$__lembas_seen" ]; then
    printf '\033]133;D;%s\007' "$status"
  fi
  __lembas_seen=$n
  printf '\033]7;file://%s%s\007' "${HOSTNAME:-localhost}" "$(__lembas_enc "$PWD")"
  printf '\033]133;A\007'
}
__lembas_prompt() {
  # Put B back after any hook that rebuilt the prompt.
  case $PS1 in *'133;B'*) ;; *) PS1="$PS1"'\[\033]133;B\007\]' ;; esac
}
# The user's own prompt hooks run between the two (bash 5.1 takes a list; older ones a string,
# whose trailing `;` would make `;;`).
if (( BASH_VERSINFO[0] > 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] >= 1) )); then
  PROMPT_COMMAND=(__lembas_status "${PROMPT_COMMAND[@]}" __lembas_prompt)
else
  __lembas_pc=$PROMPT_COMMAND
  while [[ $__lembas_pc == *[\;[:space:]] ]]; do __lembas_pc=${__lembas_pc%?}; done
  PROMPT_COMMAND="__lembas_status${__lembas_pc:+;$__lembas_pc};__lembas_prompt"
  unset __lembas_pc
fi
# PS0 is printed as is (no readline brackets): the output starts here.
PS0="${PS0}"$'\e]133;C\a'
