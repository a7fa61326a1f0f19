# fish completion for mur, written by 'mur completions SHELL' from the table the applets parse with
# (installed by install.sh as share/fish/vendor_completions.d/mur.fish).

function __mur_addresses
    mur ps --format '{{.capsule_name}}' 2>/dev/null
    mur ps -q 2>/dev/null
end

# The command being completed ('ps', 'formation call') on one line, and on the next how many
# operands come before the cursor; false while an option's value is being completed.
function __mur_where
    set -l words (commandline -opc)
    set -l cmd (string replace -r '^(.*/)?mur-?' '' -- $words[1])
    set -e words[1]
    if test -z "$cmd"
        test (count $words) -ge 1; or return 1
        set cmd $words[1]
        set -e words[1]
    end
    if test (count $words) -ge 1; and contains -- "$cmd $words[1]" 'formation call' 'formation ready'
        set cmd "$cmd $words[1]"
        set -e words[1]
    end
    set -l takes
    switch $cmd
        case 'run'
            set takes --task --workdir --bind --port --advertise-url --capsule-sha256 --formation-dir --name --listen-fd --out
        case 'ps'
            set takes --format --filter --capsule --formation --status
        case 'stop'
            set takes -t --timeout
        case 'token'
            set takes 
        case 'logs'
            set takes --task -n --lines --tail --since
        case 'rm'
            set takes 
        case 'prune'
            set takes 
        case 'cancel'
            set takes --url
        case 'control'
            set takes 
        case 'watch'
            set takes --url
        case 'formation'
            set takes --task --ready-timeout --emit --image --namespace --advertise-domain
        case 'formation call'
            set takes 
        case 'formation ready'
            set takes --formation-dir --door
        case 'completions'
            set takes 
    end
    set -l n 0
    set -l skip 0
    for w in $words
        if test $skip = 1
            set skip 0
        else if string match -q -- '-*' $w
            contains -- $w $takes; and set skip 1
        else
            set n (math $n + 1)
        end
    end
    echo $cmd
    echo $n
    test $skip = 0
end

function __mur_top
    set -l words (commandline -opc)
    test (count $words) -eq 1; and string match -qr '^(.*/)?mur$' -- $words[1]
end

# __mur_is COMMAND: completing COMMAND's options or one of their values.
function __mur_is
    set -l where (__mur_where)
    test "$where[1]" = "$argv[1]"
end

# __mur_operand COMMAND N [more]: completing COMMAND's operand N (from 0), or any after it.
function __mur_operand
    set -l where (__mur_where); or return 1
    test "$where[1]" = "$argv[1]"; or return 1
    if test "$argv[3]" = more
        test $where[2] -ge $argv[2]
    else
        test $where[2] -eq $argv[2]
    end
end

for c in mur mur-run mur-ps mur-stop mur-token mur-logs mur-rm mur-prune mur-cancel mur-control mur-watch mur-formation mur-completions
    complete -c $c -f
    complete -c $c -n __mur_top -a 'run ps stop token logs rm prune cancel control watch formation completions help'
    complete -c $c -n __mur_top -l list -l version -l help
    complete -c $c -n '__mur_operand help 0' -a 'run ps stop token logs rm prune cancel control watch formation completions'
    complete -c $c -n "__mur_is 'run'" -l task -x -d 'run one task, print its answer'
    complete -c $c -n "__mur_is 'run'" -l detach -s d -d 'serve in the background'
    complete -c $c -n "__mur_is 'run'" -l json -d 'print the readiness line'
    complete -c $c -n "__mur_is 'run'" -l workdir -x -a '(__fish_complete_directories)' -d 'the handler\'s working directory'
    complete -c $c -n "__mur_is 'run'" -l bind -x -d 'the door\'s listening address'
    complete -c $c -n "__mur_is 'run'" -l port -x -d 'the door\'s port'
    complete -c $c -n "__mur_is 'run'" -l advertise-url -x -d 'the URL the card advertises'
    complete -c $c -n "__mur_is 'run'" -l capsule-sha256 -x -d 'refuse another manifest'
    complete -c $c -n "__mur_is 'run'" -l formation-dir -x -a '(__fish_complete_directories)' -d 'join a formation from its mounted Secret'
    complete -c $c -n "__mur_is 'run'" -l name -x -d 'a name for the session, unique among running ones'
    complete -c $c -n "__mur_is 'run'" -l listen-fd -x -d 'serve the listening socket inherited as descriptor N'
    complete -c $c -n "__mur_is 'run'" -l out -x -a '(__fish_complete_directories)' -d 'with --task: write the answer\'s files into DIR'
    complete -c $c -n "__mur_is 'run'" -s h -l help -d 'this text'
    complete -c $c -n "__mur_operand 'run' 0" -F
    complete -c $c -n "__mur_is 'ps'" -l json -d 'one JSON document'
    complete -c $c -n "__mur_is 'ps'" -l quiet -s q -d 'session ids only'
    complete -c $c -n "__mur_is 'ps'" -l all -s a -d 'the ended sessions too'
    complete -c $c -n "__mur_is 'ps'" -l no-trunc -d 'whole ids in the table'
    complete -c $c -n "__mur_is 'ps'" -l format -x -a 'json table' -d 'one line per session from TEMPLATE'
    complete -c $c -n "__mur_is 'ps'" -l filter -x -a 'name= capsule= id= formation= status=' -d 'only the sessions matching (repeatable)'
    complete -c $c -n "__mur_is 'ps'" -l capsule -x -d 'only that capsule\'s sessions'
    complete -c $c -n "__mur_is 'ps'" -l formation -x -d 'only that formation\'s members'
    complete -c $c -n "__mur_is 'ps'" -l status -x -a 'running unreachable exited killed gone' -d 'only the sessions in that state'
    complete -c $c -n "__mur_is 'ps'" -l verbose -s v -d 'name what was pruned, unsandboxed, dropped'
    complete -c $c -n "__mur_is 'ps'" -s h -l help -d 'this text'
    complete -c $c -n "__mur_is 'stop'" -l timeout -s t -x -d 'grace before SIGKILL'
    complete -c $c -n "__mur_is 'stop'" -l all -d 'stop every session and formation'
    complete -c $c -n "__mur_is 'stop'" -s h -l help -d 'this text'
    complete -c $c -n "__mur_operand 'stop' 0 more" -a '(__mur_addresses)'
    complete -c $c -n "__mur_is 'token'" -l control -d 'the control token'
    complete -c $c -n "__mur_is 'token'" -s h -l help -d 'this text'
    complete -c $c -n "__mur_operand 'token' 0" -a '(__mur_addresses)'
    complete -c $c -n "__mur_is 'logs'" -l follow -s f -d 'keep printing lines as they are written'
    complete -c $c -n "__mur_is 'logs'" -l task -x -d 'one task\'s lines'
    complete -c $c -n "__mur_is 'logs'" -l lines -s n -x -d 'the last N lines'
    complete -c $c -n "__mur_is 'logs'" -l tail -x -d 'the last N lines (as -n)'
    complete -c $c -n "__mur_is 'logs'" -l since -x -d 'only lines from then on: a duration ago (10m) or a time'
    complete -c $c -n "__mur_is 'logs'" -l timestamps -s t -d 'each line\'s time too'
    complete -c $c -n "__mur_is 'logs'" -s h -l help -d 'this text'
    complete -c $c -n "__mur_operand 'logs' 0" -a '(__mur_addresses)'
    complete -c $c -n "__mur_is 'rm'" -s h -l help -d 'this text'
    complete -c $c -n "__mur_operand 'rm' 0 more" -a '(__mur_addresses)'
    complete -c $c -n "__mur_is 'prune'" -s h -l help -d 'this text'
    complete -c $c -n "__mur_is 'cancel'" -l url -x -d 'ask this door, without a token'
    complete -c $c -n "__mur_is 'cancel'" -l json -d 'the door\'s answer as JSON'
    complete -c $c -n "__mur_is 'cancel'" -s h -l help -d 'this text'
    complete -c $c -n "__mur_operand 'cancel' 0" -a '(__mur_addresses)'
    complete -c $c -n "__mur_is 'control'" -l json -d 'show: the door\'s listing as JSON'
    complete -c $c -n "__mur_is 'control'" -s h -l help -d 'this text'
    complete -c $c -n "__mur_operand 'control' 0" -a '(__mur_addresses)'
    complete -c $c -n "__mur_operand 'control' 1" -a 'show set secret forget'
    complete -c $c -n "__mur_is 'watch'" -l url -x -d 'ask this door, without a token'
    complete -c $c -n "__mur_is 'watch'" -l json -d 'the door\'s answer as JSON'
    complete -c $c -n "__mur_is 'watch'" -s h -l help -d 'this text'
    complete -c $c -n "__mur_operand 'watch' 0" -a '(__mur_addresses)'
    complete -c $c -n "__mur_is 'formation'" -l task -x -d 'give the entry member one task'
    complete -c $c -n "__mur_is 'formation'" -l detach -s d -d 'launch in the background'
    complete -c $c -n "__mur_is 'formation'" -l json -d 'print one line once the formation is ready'
    complete -c $c -n "__mur_is 'formation'" -l ready-timeout -x -d 'how long each member has to come up'
    complete -c $c -n "__mur_is 'formation'" -l emit -x -a 'kubernetes' -d 'write manifests instead of launching'
    complete -c $c -n "__mur_is 'formation'" -l image -x -d 'the image the manifests run'
    complete -c $c -n "__mur_is 'formation'" -l namespace -x -d 'the manifests\' namespace'
    complete -c $c -n "__mur_is 'formation'" -l advertise-domain -x -d 'members reach each other under DOMAIN'
    complete -c $c -n "__mur_is 'formation'" -s h -l help -d 'this text'
    complete -c $c -n "__mur_operand 'formation' 0" -a 'call'
    complete -c $c -n "__mur_operand 'formation' 0" -a 'ready'
    complete -c $c -n "__mur_operand 'formation' 0" -F
    complete -c $c -n "__mur_is 'formation call'" -s h -l help -d 'this text'
    complete -c $c -n "__mur_is 'formation ready'" -l formation-dir -x -a '(__fish_complete_directories)' -d 'the member\'s mounted Secret'
    complete -c $c -n "__mur_is 'formation ready'" -l door -x -d 'its own door'
    complete -c $c -n "__mur_is 'formation ready'" -s h -l help -d 'this text'
    complete -c $c -n "__mur_is 'completions'" -s h -l help -d 'this text'
    complete -c $c -n "__mur_operand 'completions' 0" -a 'bash zsh fish'
end
