#!/usr/bin/env bash
# Interoperability with the original runtime (murmur-cli 0.8.0, the `mur` of capsule-runtime):
# its host commands against mur's sessions, and mur's host commands against a door that answers
# as the original's does. Documented, not CI (it needs the original's binary, a 20-minute build).
#
#   scripts/interop-original.sh                      # finds or builds both binaries, runs every check
#   ORIGINAL=/path/to/original/mur MUR=/path/to/mur scripts/interop-original.sh
#
# Options:
#   --tries N          how many times the original's `mur stop` ends a fresh mur session (default 20)
#   --only DIRECTION   original (its commands against mur) or mur (mur's against the door); both
#                      by default
#   -h, --help         this text
#
# The original: ORIGINAL=/path/to/its/mur, else target/original/bin/mur, else built there with
#   cargo install murmur-cli --version 0.8.0 --locked --root target/original
# (it needs Debian's libseccomp-dev and takes about 20 minutes on 2 cores). mur: MUR=/path, else
# `cargo build --release` (a no-op when up to date). Both run with HOME a fresh directory under
# target/interop (MURMUR_HOME unset), so they share ~/.murmur/running and nothing else.
#
# original -> mur: a mur session of a capsule declaring network.authentication and a control block
# (settings MODE, secrets API_KEY), whose handler streams "line 1".."line N" 0.4 s apart for the
# task "lines N" and sleeps 30 s for "sleep". Tasks are started with a non-blocking message/send
# through curl, the operator token from `mur token` passed only in a variable and curl's --config
# on stdin, never argv. Checked:
#   ps       the original's `ps --json` lists the session as running
#   cancel   `cancel SESSION TASK` of a running task: exit 0, canceled; the session still runs and
#            tasks/get says canceled
#   control  show lists MODE and API_KEY; set MODE fast, set MODE 5 (which the original sends as a
#            JSON number), secret API_KEY (from stdin), forget API_KEY, each read back through
#            mur's own `control show --json`
#   watch    `watch SESSION` connects, prints a task's streamed lines, and ends with exit 0
#            (capsule-closed) when the session is stopped; and the first event mur's door sends
#            is a connection-ack the original's reader recognises (message carrier, role observer)
#   stop     `stop SESSION` of a fresh session, --tries times (every other one with a running task,
#            which the stop's account must name as canceled): exit 0, the process gone, its record
#            removed; every failure is printed (the issue's old one was E-RUN-024, "start time
#            could not be read", in about 1 of 12)
#
# mur -> original: NOT a real original session -- running one needs the original's wasm drivers
# and artifacts, which a trivial process capsule cannot do without network -- but
# scripts/interop/original_door.py, a door that answers the methods mur's applets call exactly as
# capsule-runtime 0.8.0's source does (A2A 1.0 only, CancelTask, murmur.StopSession's account and
# A2A-Extensions header, murmur.WatchSession's frames, the /control plane and its listing) and
# writes the running record the original would. Its fidelity is checked first with the original's
# own applets (original -> door: ps, cancel --url, watch --url, control show, stop), then mur's:
# ps, cancel --url and cancel ADDR (through the record), watch --url, control show / set / secret /
# forget, and stop (exit 0, the process gone, its record removed).
#
# Prints one row per check (check, direction, pass/fail, detail) and exits 1 if any failed, 2 on
# a setup error. Logs of every command: target/interop/log/.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/target/interop
TRIES=20
ONLY=both

die() { echo "interop-original.sh: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-0}"; }

while [ $# -gt 0 ]; do
    case $1 in
    --tries) [ $# -ge 2 ] && [ "$2" -ge 1 ] 2>/dev/null || die "--tries needs a number >= 1"
        TRIES=$2; shift 2 ;;
    --only) [ $# -ge 2 ] || die "--only needs original or mur"
        case $2 in original | mur) ONLY=$2 ;; *) die "--only: original or mur" ;; esac
        shift 2 ;;
    -h | --help) usage 0 ;;
    *) die "unknown argument $1 (try --help)" ;;
    esac
done
for tool in curl python3 timeout; do
    command -v "$tool" >/dev/null || die "$tool is needed"
done

# ---- the two binaries ---------------------------------------------------------------------------
if [ -z "${ORIGINAL:-}" ]; then
    ORIGINAL=$ROOT/target/original/bin/mur
    if [ ! -x "$ORIGINAL" ]; then
        echo "interop-original.sh: building the original (needs libseccomp-dev; about 20 minutes):" >&2
        echo "  cargo install murmur-cli --version 0.8.0 --locked --root target/original" >&2
        cargo install murmur-cli --version 0.8.0 --locked --root "$ROOT/target/original" >&2 ||
            die "cargo install murmur-cli 0.8.0 failed (is libseccomp-dev installed?)"
    fi
fi
[ -x "$ORIGINAL" ] || die "ORIGINAL=$ORIGINAL is not an executable"
if [ -z "${MUR:-}" ]; then
    echo "interop-original.sh: cargo build --release" >&2
    cargo build --release --locked --quiet >&2 || die "cargo build --release failed"
    MUR=$ROOT/target/release/mur
fi
[ -x "$MUR" ] || die "MUR=$MUR is not an executable"

# ---- the shared home, the capsule, cleanup --------------------------------------------------------
unset MURMUR_HOME MURMUR_DOOR_TOKEN
rm -rf "$OUT"
mkdir -p "$OUT/log" "$OUT/work" "$OUT/capsule"
H=$OUT/home
mkdir -m 700 "$H"
LOG=$OUT/log

cat >"$OUT/capsule/murmur.json" <<'EOF'
{"name": "interop", "version": "1.0.0", "run": ["./handler.sh"],
 "lifecycle": {"concurrency": 4},
 "network": {"authentication": {"credentials": []}},
 "control": {"settings": ["MODE"], "secrets": ["API_KEY"]}}
EOF
cat >"$OUT/capsule/handler.sh" <<'EOF'
#!/bin/sh
# "lines N": N lines, 0.4 s apart (a watcher sees them as they come); "sleep": 30 s; else echo.
read -r what
case "$what" in
lines\ *) n=${what#lines }; i=1
    while [ "$i" -le "$n" ]; do echo "line $i"; sleep 0.4; i=$((i + 1)); done ;;
sleep*) sleep 30; echo slept ;;
*) echo "$what" ;;
esac
EOF
chmod +x "$OUT/capsule/handler.sh"

BG=() # background processes this script started
cleanup() {
    local pid
    for pid in "${BG[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    HOME=$H timeout 30 "$MUR" stop --all >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

om() { HOME=$H timeout 60 "$ORIGINAL" "$@"; } # the original
mm() { HOME=$H timeout 60 "$MUR" "$@"; }      # mur
pj() { # JSON on stdin, python code on d
    python3 -c "import json,sys
try: d = json.load(sys.stdin)
except ValueError: sys.exit('not JSON')
$1"
}

# ---- results --------------------------------------------------------------------------------------
ROWS=()
FAILED=0
result() { # check direction pass|fail detail
    local detail=${4:-}
    detail=${detail//$'\n'/ }
    ROWS+=("$1"$'\t'"$2"$'\t'"$3"$'\t'"$detail")
    [ "$3" = pass ] || FAILED=$((FAILED + 1))
    printf '  %-4s  %-14s %s%s\n' "$3" "$2" "$1" "${detail:+  ($detail)}" >&2
}
check() { # check direction detail-on-failure condition...
    local name=$1 dir=$2 why=$3
    shift 3
    if "$@"; then result "$name" "$dir" pass; else result "$name" "$dir" fail "$why"; fi
}
has() { grep -q -- "$2" "$1"; } # file pattern

wait_until() { # seconds command...: poll every 0.1 s
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.1
    done
}

# ---- mur sessions and their door ----------------------------------------------------------------
start_mur() { # -> the readiness line in $LOG/ready-<n>; prints the session id
    local ready=$LOG/ready-$RANDOM$RANDOM
    (cd "$OUT/work" && HOME=$H "$MUR" run "$OUT/capsule" -d --json --workdir "$OUT/work") \
        >"$ready" 2>>"$LOG/mur-run.stderr" || die "mur run -d failed (log/mur-run.stderr)"
    pj 'print(d["session_id"])' <"$ready"
}
record() { # sid key: a field of the session's running record
    pj "print(d['$2'])" <"$H/.murmur/running/$1.json"
}
mur_rpc() { # sid method params-json: the JSON-RPC answer of mur's door, with the operator token
    local url token
    url=$(record "$1" url)
    token=$(mm token "$1") || return 1
    printf '{"jsonrpc":"2.0","id":1,"method":"%s","params":%s}' "$2" "$3" >"$LOG/rpc-body"
    # the token goes to curl through its config on stdin: never argv
    printf 'header = "Authorization: Bearer %s"\n' "$token" |
        curl -sS --max-time 30 --config - -H 'Content-Type: application/json' \
            --data-binary @"$LOG/rpc-body" "http://$url/"
}
mur_send() { # sid text: start a task without waiting for it; prints its id
    mur_rpc "$1" message/send "{\"message\":{\"role\":\"user\",\"messageId\":\"m$RANDOM$RANDOM\",\
\"parts\":[{\"kind\":\"text\",\"text\":\"$2\"}]},\"configuration\":{\"blocking\":false}}" |
        pj 'print(d["result"]["id"])'
}
mur_state() { # sid task: its state as tasks/get says
    mur_rpc "$1" tasks/get "{\"id\":\"$2\"}" | pj 'print(d["result"]["status"]["state"])'
}
state_is() { [ "$("$1" "$2" "$3" 2>/dev/null)" = "$4" ]; } # getter sid task state
gone() { # pid start-token: that process no longer runs
    [ ! -r "/proc/$1/stat" ] || [ "$(sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f20)" != "$2" ]
}
no_record() { [ ! -e "$H/.murmur/running/$1.json" ]; }

# ---- original -> mur ----------------------------------------------------------------------------
original_against_mur() {
    echo "== the original's commands against a mur session" >&2
    local s t w rc
    s=$(start_mur)

    om ps --json >"$LOG/o-ps.out" 2>"$LOG/o-ps.err" || true
    check "ps lists the session as running" "original→mur" "$(head -c 200 "$LOG/o-ps.err")" \
        pj "sys.exit(not any(c['session_id'] == '$s' and c['status'] == 'running' for c in d['capsules']))" \
        <"$LOG/o-ps.out"

    # cancel: a running task of a session that stays up
    t=$(mur_send "$s" sleep)
    wait_until 10 state_is mur_state "$s" "$t" working || true
    rc=0
    om cancel "$s" "$t" >"$LOG/o-cancel.out" 2>"$LOG/o-cancel.err" || rc=$?
    check "cancel SESSION TASK: exit 0, canceled" "original→mur" "exit $rc: $(tail -c 200 "$LOG/o-cancel.err")" \
        eval '[ $rc = 0 ] && has "$LOG/o-cancel.out" "state: *canceled"'
    check "cancel: the session still runs, the task ends canceled" "original→mur" \
        "tasks/get: $(mur_state "$s" "$t" 2>&1)" \
        eval 'state_is mur_state "$s" "$t" canceled && mm ps --json | pj "sys.exit(d[\"capsules\"][0][\"status\"] != \"running\")"'

    # control: show, set, secret (stdin), forget, each read back through mur
    rc=0
    om control show "$s" >"$LOG/o-control-show.out" 2>"$LOG/o-control-show.err" || rc=$?
    check "control show lists MODE and API_KEY" "original→mur" \
        "exit $rc, printed: $(tr '\n' '|' <"$LOG/o-control-show.out" | head -c 120)" \
        eval '[ $rc = 0 ] && has "$LOG/o-control-show.out" MODE && has "$LOG/o-control-show.out" API_KEY'
    rc=0
    om control set MODE fast "$s" >"$LOG/o-control-set.out" 2>"$LOG/o-control-set.err" || rc=$?
    check "control set MODE fast" "original→mur" "exit $rc: $(tail -c 200 "$LOG/o-control-set.err")" \
        eval '[ $rc = 0 ] && mm control "$s" show --json | pj "sys.exit(d[\"settings\"][0] != {\"name\": \"MODE\", \"value\": \"fast\"})"'
    check "control set: it prints the value the door answered" "original→mur" \
        "printed: $(tr '\n' '|' <"$LOG/o-control-set.out" | head -c 120)" \
        has "$LOG/o-control-set.out" "value: *fast"
    rc=0 # a value that parses as JSON goes as JSON: {"value": 5}
    om control set MODE 5 "$s" >"$LOG/o-control-set5.out" 2>"$LOG/o-control-set5.err" || rc=$?
    check "control set MODE 5 (sent as a JSON number)" "original→mur" \
        "exit $rc: $(tail -c 200 "$LOG/o-control-set5.err")" \
        eval '[ $rc = 0 ] && mm control "$s" show --json | pj "sys.exit(d[\"settings\"][0] != {\"name\": \"MODE\", \"value\": 5})"'
    rc=0
    printf 'not-a-real-key\n' | om control secret API_KEY "$s" >"$LOG/o-control-secret.out" \
        2>"$LOG/o-control-secret.err" || rc=$?
    check "control secret API_KEY (stdin)" "original→mur" "exit $rc: $(tail -c 200 "$LOG/o-control-secret.err")" \
        eval '[ $rc = 0 ] && ! grep -q not-a-real-key "$LOG"/o-control-secret.* &&
              mm control "$s" show --json | pj "sys.exit(d[\"secrets\"][0] != {\"name\": \"API_KEY\", \"set\": True})"'
    rc=0
    om control forget API_KEY "$s" >"$LOG/o-control-forget.out" 2>"$LOG/o-control-forget.err" || rc=$?
    check "control forget API_KEY" "original→mur" "exit $rc: $(tail -c 200 "$LOG/o-control-forget.err")" \
        eval '[ $rc = 0 ] && mm control "$s" show --json | pj "sys.exit(d[\"secrets\"][0] != {\"name\": \"API_KEY\", \"set\": False})"'

    # watch: on the wire, the first event is the original's connection-ack
    printf '{"jsonrpc":"2.0","id":1,"method":"murmur.WatchSession","params":{}}' >"$LOG/watch-body"
    printf 'header = "Authorization: Bearer %s"\n' "$(mm token "$s")" |
        curl -sS -N --max-time 2 --config - -H 'A2A-Version: 1.0' -H 'Content-Type: application/json' \
            --data-binary @"$LOG/watch-body" "http://$(record "$s" url)/" >"$LOG/watch-wire.out" 2>&1 || true
    check "watch: the first event is the original's connection-ack" "original→mur" \
        "first event: $(grep -m1 '^data:' "$LOG/watch-wire.out" | head -c 160)" \
        python3 -c '
import json, sys
try:
    line = next(l for l in open(sys.argv[1]) if l.startswith("data:"))
    frame = json.loads(line[5:])["result"]["message"]["metadata"][sys.argv[2]]
    sys.exit(not (frame["frame"] == "connection-ack" and frame["role"] == "observer"))
except (StopIteration, ValueError, KeyError, TypeError):
    sys.exit(1)' \
        "$LOG/watch-wire.out" "https://docs.murmur.nexus/reference/streaming-protocol/#murmur-stream-v1"

    # watch: the original follows a task's text and the session's end
    HOME=$H timeout 60 "$ORIGINAL" watch "$s" >"$LOG/o-watch.out" 2>"$LOG/o-watch.err" &
    w=$!
    BG+=("$w")
    wait_until 10 has "$LOG/o-watch.err" "watching" || true
    check "watch SESSION connects" "original→mur" "$(head -c 200 "$LOG/o-watch.err")" \
        has "$LOG/o-watch.err" "watching"
    t=$(mur_send "$s" "lines 3")
    wait_until 20 state_is mur_state "$s" "$t" completed || true
    wait_until 3 has "$LOG/o-watch.out" "line 3" || true
    check "watch: a task's streamed text" "original→mur" \
        "printed: $(tr '\n' '|' <"$LOG/o-watch.out" | head -c 120)" \
        eval 'has "$LOG/o-watch.out" "line 1" && has "$LOG/o-watch.out" "line 2" && has "$LOG/o-watch.out" "line 3"'
    mm stop "$s" >"$LOG/m-stop-watched.out" 2>&1 || true
    rc=0
    wait "$w" || rc=$?
    check "watch: ends with the session (capsule-closed, exit 0)" "original→mur" \
        "exit $rc: $(tail -n1 "$LOG/o-watch.err" | head -c 200)" \
        eval '[ $rc = 0 ] && has "$LOG/o-watch.err" "capsule closed"'

    # stop: a fresh session each try; every other try with a running task to be accounted for
    local i failures=0 pid start why=()
    for i in $(seq "$TRIES"); do
        s=$(start_mur)
        pid=$(record "$s" pid)
        start=$(record "$s" process_start)
        t=''
        if [ $((i % 2)) = 0 ]; then
            t=$(mur_send "$s" sleep)
            wait_until 10 state_is mur_state "$s" "$t" working || true
        fi
        rc=0
        om stop "$s" >"$LOG/o-stop-$i.out" 2>"$LOG/o-stop-$i.err" || rc=$?
        wait_until 5 gone "$pid" "$start" || true
        if [ $rc != 0 ]; then
            why+=("try $i: exit $rc: $(grep -m1 . "$LOG/o-stop-$i.err" | head -c 200)")
        elif ! gone "$pid" "$start"; then
            why+=("try $i: pid $pid still runs")
        elif ! no_record "$s"; then
            why+=("try $i: the record is still there")
        elif [ -n "$t" ] && ! has "$LOG/o-stop-$i.out" "canceled: $t"; then
            why+=("try $i: the account does not name $t as canceled")
        else
            continue
        fi
        failures=$((failures + 1))
        echo "    stop try $i failed: ${why[-1]}" >&2
    done
    if [ "$failures" = 0 ]; then
        result "stop SESSION ends it ($TRIES tries)" "original→mur" pass "0/$TRIES failed"
    else
        result "stop SESSION ends it ($TRIES tries)" "original→mur" fail "$failures/$TRIES failed; ${why[0]}"
    fi
}

# ---- mur -> the original's door -------------------------------------------------------------------
DOOR_URL='' DOOR_SID='' DOOR_PID=''
start_door() {
    local ready=$LOG/door-ready-$RANDOM
    (cd "$OUT/work" && HOME=$H exec python3 "$ROOT/scripts/interop/original_door.py" "$ready" \
        --settings inference.max_tokens --secrets API_KEY) >>"$LOG/door.log" 2>&1 &
    BG+=("$!")
    wait_until 10 test -s "$ready" || die "the original's door did not come up (log/door.log)"
    DOOR_URL=$(pj 'print(d["url"])' <"$ready")
    DOOR_SID=$(pj 'print(d["session_id"])' <"$ready")
    DOOR_PID=$(pj 'print(d["pid"])' <"$ready")
}
door_rpc() { # method params-json: the door's answer (public: no token)
    curl -sS --max-time 30 -H 'A2A-Version: 1.0' -H 'Content-Type: application/json' \
        --data-binary "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$1\",\"params\":$2}" "http://$DOOR_URL/"
}
door_send() { # text: start a task; prints its id
    door_rpc SendMessage "{\"message\":{\"role\":\"ROLE_USER\",\"messageId\":\"m$RANDOM\",\
\"parts\":[{\"text\":\"$1\"}]}}" | pj 'print(d["result"]["task"]["id"])'
}
door_state() { # _ task: its state, in the original's words (TASK_STATE_…)
    door_rpc GetTask "{\"id\":\"$2\"}" | pj 'print(d["result"]["status"]["state"])'
}
door_listing() { # python condition on d, the door's /control listing (token from its file)
    printf 'header = "Authorization: Bearer %s"\n' "$(cat "$H/.murmur/running/$DOOR_SID.control")" |
        curl -sS --max-time 10 --config - "http://$DOOR_URL/control" | pj "sys.exit(not ($1))"
}

original_against_door() { # the door's fidelity: the original's own applets read it as they should
    echo "== the original's commands against the door (its fidelity)" >&2
    local t rc pid start
    start_door
    om ps --json >"$LOG/od-ps.out" 2>&1 || true
    check "door fidelity: ps lists it as running" "original→door" "$(head -c 200 "$LOG/od-ps.out")" \
        pj "sys.exit(not any(c['session_id'] == '$DOOR_SID' and c['status'] == 'running' for c in d['capsules']))" \
        <"$LOG/od-ps.out"
    t=$(door_send sleep)
    rc=0
    om cancel --url "$DOOR_URL" "$t" >"$LOG/od-cancel.out" 2>&1 || rc=$?
    check "door fidelity: cancel --url" "original→door" "exit $rc: $(tail -c 200 "$LOG/od-cancel.out")" \
        eval '[ $rc = 0 ] && has "$LOG/od-cancel.out" "state: *canceled"'
    rc=0
    om control show "$DOOR_SID" >"$LOG/od-control.out" 2>&1 || rc=$?
    check "door fidelity: control show" "original→door" "exit $rc: $(tail -c 200 "$LOG/od-control.out")" \
        eval '[ $rc = 0 ] && has "$LOG/od-control.out" inference.max_tokens && has "$LOG/od-control.out" "API_KEY *not set"'
    HOME=$H timeout 60 "$ORIGINAL" watch --url "$DOOR_URL" >"$LOG/od-watch.out" 2>"$LOG/od-watch.err" &
    local w=$!
    BG+=("$w")
    wait_until 10 has "$LOG/od-watch.err" watching || true
    t=$(door_send "lines 3")
    wait_until 10 state_is door_state _ "$t" TASK_STATE_COMPLETED || true
    pid=$DOOR_PID start=$(sed 's/.*) //' "/proc/$DOOR_PID/stat" | cut -d' ' -f20)
    rc=0
    om stop "$DOOR_SID" >"$LOG/od-stop.out" 2>&1 || rc=$?
    check "door fidelity: stop" "original→door" "exit $rc: $(tail -c 200 "$LOG/od-stop.out")" \
        eval '[ $rc = 0 ] && wait_until 5 gone "$pid" "$start" && no_record "$DOOR_SID"'
    rc=0
    wait "$w" || rc=$?
    check "door fidelity: watch --url (text, capsule-closed)" "original→door" \
        "exit $rc: $(tr '\n' '|' <"$LOG/od-watch.out" | head -c 120)" \
        eval '[ $rc = 0 ] && has "$LOG/od-watch.out" "line 3" && has "$LOG/od-watch.err" "capsule closed"'
}

mur_against_door() {
    echo "== mur's commands against the original's door" >&2
    local t rc w pid start
    start_door
    mm ps --json >"$LOG/m-ps.out" 2>&1 || true
    check "ps lists it as running" "mur→original" "$(head -c 200 "$LOG/m-ps.out")" \
        pj "sys.exit(not any(c['session_id'] == '$DOOR_SID' and c['status'] == 'running' for c in d['capsules']))" \
        <"$LOG/m-ps.out"

    t=$(door_send sleep)
    rc=0
    mm cancel --url "$DOOR_URL" "$t" >"$LOG/m-cancel-url.out" 2>&1 || rc=$?
    check "cancel --url HOST:PORT TASK" "mur→original" "exit $rc: $(tail -c 200 "$LOG/m-cancel-url.out")" \
        eval '[ $rc = 0 ] && has "$LOG/m-cancel-url.out" canceled && state_is door_state _ "$t" TASK_STATE_CANCELED'
    t=$(door_send sleep)
    rc=0
    mm cancel "$DOOR_SID" "$t" >"$LOG/m-cancel.out" 2>&1 || rc=$?
    check "cancel ADDR TASK (through the record)" "mur→original" "exit $rc: $(tail -c 200 "$LOG/m-cancel.out")" \
        eval '[ $rc = 0 ] && has "$LOG/m-cancel.out" canceled && state_is door_state _ "$t" TASK_STATE_CANCELED'

    rc=0
    mm control "$DOOR_SID" show >"$LOG/m-control-show.out" 2>&1 || rc=$?
    check "control ADDR show" "mur→original" \
        "exit $rc, printed: $(tr '\n' '|' <"$LOG/m-control-show.out" | head -c 120)" \
        eval '[ $rc = 0 ] && has "$LOG/m-control-show.out" inference.max_tokens && has "$LOG/m-control-show.out" API_KEY'
    rc=0
    mm control "$DOOR_SID" set inference.max_tokens 1000 >"$LOG/m-control-set.out" 2>&1 || rc=$?
    check "control ADDR set inference.max_tokens 1000" "mur→original" \
        "exit $rc: $(tr '\n' ' ' <"$LOG/m-control-set.out" | head -c 160)" \
        eval '[ $rc = 0 ] && door_listing "d[\"settings\"][0][\"value\"] == 1000"'
    rc=0
    printf 'not-a-real-key\n' | mm control "$DOOR_SID" secret API_KEY >"$LOG/m-control-secret.out" 2>&1 || rc=$?
    check "control ADDR secret API_KEY (stdin)" "mur→original" \
        "exit $rc: $(tail -c 200 "$LOG/m-control-secret.out")" \
        eval '[ $rc = 0 ] && ! has "$LOG/m-control-secret.out" not-a-real-key && door_listing "d[\"secrets\"][0][\"set\"] is True"'
    rc=0
    mm control "$DOOR_SID" forget API_KEY >"$LOG/m-control-forget.out" 2>&1 || rc=$?
    check "control ADDR forget API_KEY" "mur→original" "exit $rc: $(tail -c 200 "$LOG/m-control-forget.out")" \
        eval '[ $rc = 0 ] && door_listing "d[\"secrets\"][0][\"set\"] is False"'

    HOME=$H timeout 60 "$MUR" watch --url "$DOOR_URL" >"$LOG/m-watch.out" 2>"$LOG/m-watch.err" &
    w=$!
    BG+=("$w")
    sleep 0.5
    t=$(door_send "lines 3")
    wait_until 10 state_is door_state _ "$t" TASK_STATE_COMPLETED || true
    wait_until 3 has "$LOG/m-watch.out" "line 3" || true
    check "watch --url: a task's streamed text" "mur→original" \
        "printed: $(tr '\n' '|' <"$LOG/m-watch.out" | head -c 120)" \
        eval 'has "$LOG/m-watch.out" "line 1" && has "$LOG/m-watch.out" "line 3"'

    # a task still running, for the stop's account
    t=$(door_send sleep)
    pid=$DOOR_PID start=$(sed 's/.*) //' "/proc/$DOOR_PID/stat" | cut -d' ' -f20)
    rc=0
    mm stop "$DOOR_SID" >"$LOG/m-stop.out" 2>&1 || rc=$?
    check "stop ADDR (murmur.StopSession, then SIGTERM)" "mur→original" \
        "exit $rc: $(tail -c 200 "$LOG/m-stop.out")" \
        eval '[ $rc = 0 ] && wait_until 5 gone "$pid" "$start" && no_record "$DOOR_SID"'
    rc=0
    wait "$w" || rc=$?
    check "watch --url: ends with the session (capsule-closed, exit 0)" "mur→original" \
        "exit $rc: $(tail -n1 "$LOG/m-watch.err" | head -c 200)" eval '[ $rc = 0 ]'
}

echo "original: $ORIGINAL ($(HOME=$H "$ORIGINAL" --version 2>&1 | head -1))" >&2
echo "mur:      $MUR ($(HOME=$H "$MUR" --version 2>&1 | head -1))" >&2
echo "home:     $H" >&2
if [ "$ONLY" != mur ]; then original_against_mur; fi
if [ "$ONLY" != original ]; then
    original_against_door
    mur_against_door
fi

# ---- the table ------------------------------------------------------------------------------------
echo
printf '%-72s %-14s %-6s %s\n' check direction result detail
for row in "${ROWS[@]}"; do
    IFS=$'\t' read -r name dir res detail <<<"$row"
    printf '%-72s %-14s %-6s %s\n' "$name" "$dir" "$res" "$detail"
done
echo
echo "interop: $((${#ROWS[@]} - FAILED)) passed, $FAILED failed (logs: ${LOG#"$ROOT"/})"
[ "$FAILED" = 0 ]
