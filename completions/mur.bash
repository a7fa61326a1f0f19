# bash completion for mur, written by 'mur completions SHELL' from the table the applets parse with
# (installed by install.sh as share/bash-completion/completions/mur): applets, their options and
# what each takes, and the running sessions (by capsule name and id) where an address goes.

_mur_addresses() {
    mur ps --format '{{.capsule_name}}' 2>/dev/null
    mur ps -q 2>/dev/null
}

_mur() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local cmd=${COMP_WORDS[0]##*/} first=1 i n=0 skip= opts= takes=
    cmd=${cmd#mur}
    cmd=${cmd#-}
    if [ -z "$cmd" ]; then
        if [ "$COMP_CWORD" -eq 1 ]; then
            COMPREPLY=($(compgen -W "run ps stop token logs rm prune cancel control watch formation completions help --list --version --help" -- "$cur"))
            return
        fi
        cmd=${COMP_WORDS[1]}
        first=2
    fi
    if [ "$cmd" = help ]; then
        [ "$COMP_CWORD" -eq "$first" ] && COMPREPLY=($(compgen -W "run ps stop token logs rm prune cancel control watch formation completions" -- "$cur"))
        return
    fi
    if [ "$COMP_CWORD" -gt "$first" ]; then
        case "$cmd ${COMP_WORDS[first]}" in
            "formation call"|"formation ready") cmd="$cmd ${COMP_WORDS[first]}"; first=$((first + 1)) ;;
        esac
    fi
    case $cmd in
        "run") opts="--task -d --detach --json --workdir --bind --port --advertise-url --capsule-sha256 --formation-dir --name --listen-fd --out --help"; takes=" --task --workdir --bind --port --advertise-url --capsule-sha256 --formation-dir --name --listen-fd --out " ;;
        "ps") opts="--json -q --quiet -a --all --no-trunc --format --filter --capsule --formation --status -v --verbose --help"; takes=" --format --filter --capsule --formation --status " ;;
        "stop") opts="-t --timeout --all --help"; takes=" -t --timeout " ;;
        "token") opts="--control --help"; takes="  " ;;
        "logs") opts="-f --follow --task -n --lines --tail --since -t --timestamps --help"; takes=" --task -n --lines --tail --since " ;;
        "rm") opts="--help"; takes="  " ;;
        "prune") opts="--help"; takes="  " ;;
        "cancel") opts="--url --json --help"; takes=" --url " ;;
        "control") opts="--json --help"; takes="  " ;;
        "watch") opts="--url --json --help"; takes=" --url " ;;
        "formation") opts="--task -d --detach --json --ready-timeout --emit --image --namespace --advertise-domain --help"; takes=" --task --ready-timeout --emit --image --namespace --advertise-domain " ;;
        "formation call") opts="--help"; takes="  " ;;
        "formation ready") opts="--formation-dir --door --help"; takes=" --formation-dir --door " ;;
        "completions") opts="--help"; takes="  " ;;
        *) return ;;
    esac
    if [ "$COMP_CWORD" -gt "$first" ] && [[ $takes == *" $prev "* ]]; then
        case "$cmd $prev" in
            "run --workdir") COMPREPLY=($(compgen -d -- "$cur")) ;;
            "run --formation-dir") COMPREPLY=($(compgen -d -- "$cur")) ;;
            "run --out") COMPREPLY=($(compgen -d -- "$cur")) ;;
            "ps --format") COMPREPLY=($(compgen -W "json table" -- "$cur")) ;;
            "ps --filter") COMPREPLY=($(compgen -W "name= capsule= id= formation= status=" -- "$cur")) ;;
            "ps --status") COMPREPLY=($(compgen -W "running unreachable exited killed gone" -- "$cur")) ;;
            "formation --emit") COMPREPLY=($(compgen -W "kubernetes" -- "$cur")) ;;
            "formation ready --formation-dir") COMPREPLY=($(compgen -d -- "$cur")) ;;
        esac
        return
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        return
    fi
    for ((i = first; i < COMP_CWORD; i++)); do
        if [ -n "$skip" ]; then
            skip=
        elif [[ ${COMP_WORDS[i]} == -* ]]; then
            [[ $takes == *" ${COMP_WORDS[i]} "* ]] && skip=1
        else
            n=$((n + 1))
        fi
    done
    case "$cmd $n" in
        "run 0") COMPREPLY=($(compgen -f -- "$cur")) ;;
        "stop "*) COMPREPLY=($(compgen -W "$(_mur_addresses)" -- "$cur")) ;;
        "token 0") COMPREPLY=($(compgen -W "$(_mur_addresses)" -- "$cur")) ;;
        "logs 0") COMPREPLY=($(compgen -W "$(_mur_addresses)" -- "$cur")) ;;
        "rm "*) COMPREPLY=($(compgen -W "$(_mur_addresses)" -- "$cur")) ;;
        "cancel 0") COMPREPLY=($(compgen -W "$(_mur_addresses)" -- "$cur")) ;;
        "control 0") COMPREPLY=($(compgen -W "$(_mur_addresses)" -- "$cur")) ;;
        "control 1") COMPREPLY=($(compgen -W "show set secret forget" -- "$cur")) ;;
        "watch 0") COMPREPLY=($(compgen -W "$(_mur_addresses)" -- "$cur")) ;;
        "formation 0") COMPREPLY=($(compgen -W "call ready" -- "$cur")); COMPREPLY+=($(compgen -f -- "$cur")) ;;
        "completions 0") COMPREPLY=($(compgen -W "bash zsh fish" -- "$cur")) ;;
    esac
}

complete -F _mur mur mur-run mur-ps mur-stop mur-token mur-logs mur-rm mur-prune mur-cancel mur-control mur-watch mur-formation mur-completions
