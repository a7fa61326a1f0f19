# bash completion for mur (installed by install.sh as share/bash-completion/completions/mur).
# Applets, their options, and running sessions (by capsule name and id) where an address goes.

_mur_addresses() {
    mur ps --format '{{.name}}' 2>/dev/null
    mur ps --format '{{.capsule_name}}' 2>/dev/null
    mur ps -q 2>/dev/null
}

_mur_ended() {
    mur ps -a --status exited --format '{{.name}}' 2>/dev/null
    mur ps -a -q 2>/dev/null
}

_mur() {
    local cur applet
    cur=${COMP_WORDS[COMP_CWORD]}
    applet=${COMP_WORDS[0]##*/}
    applet=${applet#mur}
    applet=${applet#-}
    if [ -z "$applet" ]; then
        if [ "$COMP_CWORD" -eq 1 ]; then
            COMPREPLY=($(compgen -W "run ps stop token logs rm prune cancel control watch formation help --list --version --help" -- "$cur"))
            return
        fi
        applet=${COMP_WORDS[1]}
    fi
    local opts="--help"
    case $applet in
        run) opts="--task -d --detach --name --json --workdir --bind --port --advertise-url --capsule-sha256 --help" ;;
        ps) opts="-a --all --no-trunc --json -q --quiet --format -v --capsule --formation --status --help" ;;
        stop) opts="--timeout --all --help" ;;
        token) opts="--control --help" ;;
        logs) opts="-f --follow --task -n --help" ;;
        cancel) opts="--url --json --help" ;;
        watch) opts="--url --json --help" ;;
        control) opts="show set secret forget --json --help" ;;
        formation) opts="call --task --json --ready-timeout --help" ;;
        help) COMPREPLY=($(compgen -W "run ps stop token logs rm prune cancel control watch formation" -- "$cur")); return ;;
    esac
    case ${COMP_WORDS[COMP_CWORD-1]} in
        --workdir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
        --status) COMPREPLY=($(compgen -W "running unreachable exited killed gone" -- "$cur")); return ;;
        --task|--name|--bind|--port|--advertise-url|--capsule-sha256|--format|--timeout|-n|--url|--ready-timeout|--capsule|--formation) return ;;
    esac
    case $cur in
        -*) COMPREPLY=($(compgen -W "$opts" -- "$cur")) ;;
        *)
            case $applet in
                run|formation) COMPREPLY=($(compgen -f -- "$cur")) ;;
                stop|token|logs|cancel|watch|control) COMPREPLY=($(compgen -W "$(_mur_addresses)" -- "$cur")) ;;
                rm) COMPREPLY=($(compgen -W "$(_mur_ended)" -- "$cur")) ;;
            esac
            ;;
    esac
}

complete -F _mur mur mur-run mur-ps mur-stop mur-token mur-logs mur-rm mur-prune mur-cancel mur-control mur-watch mur-formation
