# fish completion for mur (installed by install.sh as share/fish/vendor_completions.d/mur.fish).
set -l applets run ps stop token logs rm prune cancel control watch formation help
function __mur_addresses
    mur ps --format '{{.name}}' 2>/dev/null
    mur ps --format '{{.capsule_name}}' 2>/dev/null
    mur ps -q 2>/dev/null
end
complete -c mur -f
complete -c mur -n "not __fish_seen_subcommand_from $applets" -a "$applets"
complete -c mur -n "not __fish_seen_subcommand_from $applets" -l list -l version -l help
complete -c mur -n "__fish_seen_subcommand_from run" -F
complete -c mur -n "__fish_seen_subcommand_from run" -l task -r -d 'run one task'
complete -c mur -n "__fish_seen_subcommand_from run" -s d -l detach -d 'serve in the background'
complete -c mur -n "__fish_seen_subcommand_from run" -l name -r -d 'instance name'
complete -c mur -n "__fish_seen_subcommand_from run" -l json -l workdir -l bind -l port -l advertise-url -l capsule-sha256
complete -c mur -n "__fish_seen_subcommand_from ps" -s a -l all -l no-trunc
complete -c mur -n "__fish_seen_subcommand_from ps" -s q -l quiet -l json -l format -l capsule -l formation -s v
complete -c mur -n "__fish_seen_subcommand_from ps" -l status -r -a 'running unreachable exited killed gone'
complete -c mur -n "__fish_seen_subcommand_from stop token logs cancel watch control" -a '(__mur_addresses)'
complete -c mur -n "__fish_seen_subcommand_from rm" -a '(mur ps -a -q 2>/dev/null)'
complete -c mur -n "__fish_seen_subcommand_from stop" -l timeout -l all
complete -c mur -n "__fish_seen_subcommand_from token" -l control
complete -c mur -n "__fish_seen_subcommand_from logs" -s f -l follow -l task -s n
complete -c mur -n "__fish_seen_subcommand_from cancel watch" -l url -l json
complete -c mur -n "__fish_seen_subcommand_from control" -a 'show set secret forget'
complete -c mur -n "__fish_seen_subcommand_from formation" -F
complete -c mur -n "__fish_seen_subcommand_from formation" -a call -l task -l json -l ready-timeout
