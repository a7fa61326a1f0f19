#!/usr/bin/env bash
# Run the A2A conformance kit (a2a-tck) against mur's door, both A2A generations, public and
# authenticated, and compare the failures with each door's list of known failures
# (tests/tck/known-failures.txt, tests/tck/known-failures-auth.txt).
#
#   git clone https://github.com/a2aproject/a2a-tck /path/to/a2a-tck   # once; branches 0.3.x, main
#   scripts/tck.sh /path/to/a2a-tck          # or: TCK_DIR=/path/to/a2a-tck scripts/tck.sh
#
# Options:
#   --gen 0.3|1.0|both     which generation(s) to run (default both)
#   --sut mur|reference    mur (default), or the a2a-sdk reference echo server
#                          (scripts/tck-reference.py; a2a-sdk 0.3.x for 0.3, 1.x for 1.0), which
#                          is checked against tests/tck/reference-failures.txt instead
#   --door public|authenticated|both
#                          which door (default both): mur's public echo door, and/or an
#                          authenticated one (see "Authenticated door" below)
#   --skip-known           do not run the listed tests at all (deselected by exact node id, not
#                          pytest's --deselect, which drops every id starting with the one given):
#                          much faster for A2A 1.0, whose listed ListTasks tests each wait 5 s for
#                          a state an echo task never shows, but a listed test that now passes
#                          goes unnoticed
#
# Generations: A2A 0.3 = the TCK's branch 0.3.x, A2A 1.0 = its branch main, run with
# A2A_AUTH_HEADERS='{"A2A-Version":"1.0"}' (TCK main sends no A2A-Version header itself, and a
# missing header means 0.3). Each is checked out at the commit pinned below (override with
# TCK_REF_03 / TCK_REF_10: any commit-ish of the clone) into target/tck/src-<gen>; TCK_DIR_03 /
# TCK_DIR_10 instead name ready checkouts to use as they are. Categories: TCK_CATEGORIES
# (default "mandatory capabilities"), selected as run_tck.py --category C --transports jsonrpc
# does, but run through pytest directly to get a JSON report per category; the category
# transport-equivalence runs with --transports jsonrpc,rest and --enable-equivalence-testing
# (the door serves both bindings at one URL).
#
# mur: `cargo build --release` (a no-op when up to date), then `mur run --json` (the embedded
# echo capsule) with HOME a fresh directory under target/tck; MUR=/path/to/mur skips the build.
# One session per generation and door, stopped with SIGTERM at the end (also on error or Ctrl-C).
# Python: venv target/tck/venv from tests/tck/requirements.txt (pinned; PyPI on first run).
#
# Authenticated door: mur runs a capsule declaring network.authentication (one credential,
# scope tasks/get) and push notifications (network.push, webhooks on this host allowed: the
# kit's receiver listens on localhost) whose handler is `cat` -- the embedded echo cannot
# declare either --
# and the kit gets the operator token from `mur token SESSION` (never argv): TCK main (1.0)
# through its own A2A_AUTH_TYPE=bearer / A2A_AUTH_TOKEN, TCK 0.3.x (which has no auth setting)
# through a pytest plugin that adds the header to every request without one, except in the tests
# meant to go without credentials (see tck_bearer.py below).
# The reference server runs the same way (TCK_BEARER: scripts/tck-reference.py). Its lists are
# tests/tck/known-failures-auth.txt and tests/tck/reference-failures-auth.txt.
#
# Exit 0 when every failure is listed in the known-failures file; 1 when a test failed that is not
# listed (each printed with its reason), 2 on a usage or setup error. Known failures that now pass
# are printed too, to be taken off the list (TCK_KNOWN=FILE names another list, for every door).
# Reports: target/tck/results/<sut>-<door>-<gen>-<category>.*
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/target/tck

PIN_03=eb1f804c27ea25db8805264d9ed2d7ca077a7776 # a2a-tck 0.3.x, 2026-04-27
PIN_10=410ba92e1b264df895e1fe6eccfe22db7aeaab06 # a2a-tck main, 2026-03-13
BRANCH_03=0.3.x
BRANCH_10=main
: "$PIN_03 $PIN_10 $BRANCH_03 $BRANCH_10" # read indirectly, as ${!pin} and ${!branch}

GENS="0.3 1.0"
DOORS="public authenticated"
SUT=mur
SKIP_KNOWN=0
TCK_DIR=${TCK_DIR:-}
CATEGORIES=${TCK_CATEGORIES:-mandatory capabilities}
PYTHON=${PYTHON:-python3}

die() { echo "tck.sh: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-0}"; }

while [ $# -gt 0 ]; do
    case $1 in
    --gen) [ $# -ge 2 ] || die "--gen needs 0.3, 1.0 or both"
        case $2 in 0.3 | 1.0) GENS=$2 ;; both) GENS="0.3 1.0" ;; *) die "--gen: 0.3, 1.0 or both" ;; esac
        shift 2 ;;
    --sut) [ $# -ge 2 ] || die "--sut needs mur or reference"
        case $2 in mur | reference) SUT=$2 ;; *) die "--sut: mur or reference" ;; esac
        shift 2 ;;
    --door) [ $# -ge 2 ] || die "--door needs public, authenticated or both"
        case $2 in public | authenticated) DOORS=$2 ;; both) DOORS="public authenticated" ;; *) die "--door: public, authenticated or both" ;; esac
        shift 2 ;;
    --skip-known) SKIP_KNOWN=1; shift ;;
    -h | --help) usage 0 ;;
    -*) die "unknown option $1 (try --help)" ;;
    *) TCK_DIR=$1; shift ;;
    esac
done

mkdir -p "$OUT/results"

# ---- the TCK sources, one tree per generation ---------------------------------------------------
tck_tree() { # gen -> prints the directory holding that generation's TCK
    local gen=$1 tag=${1/./} dir_var ref_var pin branch ref commit dest
    dir_var=TCK_DIR_$tag ref_var=TCK_REF_$tag pin=PIN_$tag branch=BRANCH_$tag
    if [ -n "${!dir_var:-}" ]; then
        [ -f "${!dir_var}/run_tck.py" ] || die "$dir_var=${!dir_var} is not an a2a-tck checkout"
        echo "${!dir_var}"
        return
    fi
    [ -n "$TCK_DIR" ] || die "no TCK: give a clone of https://github.com/a2aproject/a2a-tck as the argument or TCK_DIR (see --help)"
    git -C "$TCK_DIR" rev-parse --git-dir >/dev/null 2>&1 || die "$TCK_DIR is not a git clone of a2a-tck"
    ref=${!ref_var:-${!pin}}
    if ! commit=$(git -C "$TCK_DIR" rev-parse --verify -q "$ref^{commit}"); then
        [ -z "${!ref_var:-}" ] || die "$ref_var=$ref: no such commit in $TCK_DIR"
        for ref in "${!branch}" "origin/${!branch}"; do
            commit=$(git -C "$TCK_DIR" rev-parse --verify -q "$ref^{commit}") && break
        done
        [ -n "$commit" ] || die "$TCK_DIR has neither commit ${!pin} nor branch ${!branch} (git fetch?)"
        echo "tck.sh: warning: pinned TCK commit ${!pin:0:10} not in $TCK_DIR; using $ref ($commit)" >&2
    fi
    dest=$OUT/src-$gen
    if [ "$(cat "$dest/.commit" 2>/dev/null)" != "$commit" ]; then
        rm -rf "$dest"
        mkdir -p "$dest"
        git -C "$TCK_DIR" archive "$commit" | tar -x -C "$dest"
        echo "$commit" >"$dest/.commit"
    fi
    echo "$dest"
}

# ---- Python venvs (made once, remade when their requirements file changes) ----------------------
venv() { # dir requirements-file
    local dir=$1 req=$2 stamp
    stamp=$(sha256sum "$req" | cut -c1-64)
    if [ "$(cat "$dir/.stamp" 2>/dev/null)" != "$stamp" ]; then
        echo "tck.sh: making $dir from ${req#"$ROOT"/}" >&2
        rm -rf "$dir"
        "$PYTHON" -m venv "$dir" || die "'$PYTHON -m venv $dir' failed"
        "$dir/bin/pip" install --quiet --disable-pip-version-check --no-input --timeout 30 \
            --retries 2 -r "$req" >&2 || { rm -rf "$dir"; die "pip install -r $req failed"; }
        echo "$stamp" >"$dir/.stamp"
    fi
}

# ---- the system under test ----------------------------------------------------------------------
SUT_PID='' SUT_HOME='' SUT_URL='' SUT_TOKEN=''
stop_sut() {
    [ -n "$SUT_PID" ] || return 0
    if kill -0 "$SUT_PID" 2>/dev/null; then
        kill -TERM "$SUT_PID" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$SUT_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$SUT_PID" 2>/dev/null || true
    fi
    wait "$SUT_PID" 2>/dev/null || true
    if [ "$SUT" = mur ] && [ -n "$SUT_HOME" ]; then
        # mur removes its record when it ends; one left behind means the session did not end.
        if [ -n "$(ls -A "$SUT_HOME/.murmur/running" 2>/dev/null)" ]; then
            echo "tck.sh: warning: mur left a record in $SUT_HOME/.murmur/running" >&2
        fi
    fi
    [ -z "$SUT_HOME" ] || rm -rf "$SUT_HOME"
    SUT_PID='' SUT_HOME='' SUT_URL='' SUT_TOKEN=''
}
trap 'stop_sut' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start_mur() { # gen door
    local ready capsule=()
    SUT_HOME=$(mktemp -d "$OUT/home.XXXXXX")
    mkdir -p "$SUT_HOME/work"
    ready=$SUT_HOME/ready
    if [ "$2" = authenticated ]; then
        mkdir -p "$SUT_HOME/capsule"
        cat >"$SUT_HOME/capsule/murmur.json" <<'JSON'
{"name": "echo", "version": "1.0.0", "run": ["/bin/cat"],
 "network": {"authentication": {"credentials": [{"name": "tck", "scopes": ["tasks/get"]}]},
             "push": {"allow": ["localhost", "127.0.0.1"]}}}
JSON
        capsule=("$SUT_HOME/capsule")
    fi
    HOME=$SUT_HOME "$MUR" run --json --workdir "$SUT_HOME/work" "${capsule[@]}" >"$ready" \
        2>"$OUT/results/mur-$2-$1.stderr" </dev/null &
    SUT_PID=$!
    for _ in $(seq 100); do
        [ -s "$ready" ] && break
        kill -0 "$SUT_PID" 2>/dev/null || break
        sleep 0.1
    done
    [ -s "$ready" ] || die "mur run gave no readiness line (stderr: results/mur-$2-$1.stderr)"
    SUT_URL=http://$("$VPY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["url"])' "$ready")/
    if [ "$2" = authenticated ]; then
        local sid
        sid=$("$VPY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["session_id"])' "$ready")
        SUT_TOKEN=$(HOME=$SUT_HOME "$MUR" token "$sid") || die "mur token $sid failed"
        [ -n "$SUT_TOKEN" ] || die "mur token $sid printed nothing"
    fi
}

start_reference() { # gen door
    local tag=${1/./} py port
    venv "$OUT/ref$tag" "$ROOT/tests/tck/requirements-ref$tag.txt"
    py=$OUT/ref$tag/bin/python
    port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    SUT_TOKEN=''
    [ "$2" = public ] || SUT_TOKEN=$("$py" -c 'import secrets; print(secrets.token_urlsafe(32))')
    TCK_BEARER=$SUT_TOKEN "$py" "$ROOT/scripts/tck-reference.py" "$port" \
        >"$OUT/results/reference-$2-$1.stderr" 2>&1 </dev/null &
    SUT_PID=$!
    SUT_URL=http://127.0.0.1:$port/
    "$py" - "$SUT_URL" <<'EOF' || die "reference server did not come up (results/reference-$2-$1.stderr)"
import sys, time, urllib.request
for _ in range(200):
    try:
        urllib.request.urlopen(sys.argv[1] + ".well-known/agent-card.json", timeout=1).read()
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)
EOF
}

# ---- run ---------------------------------------------------------------------------------------
venv "$OUT/venv" "$ROOT/tests/tck/requirements.txt"
VPY=$OUT/venv/bin/python
if [ "$SUT" = mur ]; then
    if [ -z "${MUR:-}" ]; then
        echo "tck.sh: cargo build --release" >&2
        cargo build --release --locked --quiet >&2 || die "cargo build --release failed"
        MUR=$ROOT/target/release/mur
    fi
    [ -x "$MUR" ] || die "MUR=$MUR is not an executable"
fi
list_for() { # door -> the known-failures list of this SUT and door
    local suffix=''
    [ "$1" = public ] || suffix=-auth
    if [ "$SUT" = mur ]; then
        echo "${TCK_KNOWN:-$ROOT/tests/tck/known-failures$suffix.txt}"
    else
        echo "$ROOT/tests/tck/reference-failures$suffix.txt"
    fi
}

# --skip-known: a pytest plugin that deselects exactly the node ids in $TCK_SKIP_FILE
mkdir -p "$OUT/plugin"
cat >"$OUT/plugin/tck_skip_known.py" <<'PY'
import os


def pytest_collection_modifyitems(config, items):
    with open(os.environ["TCK_SKIP_FILE"]) as f:
        skip = set(f.read().split())
    drop = [item for item in items if item.nodeid in skip]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = [item for item in items if item.nodeid not in skip]
PY
# the authenticated door under TCK 0.3.x (no auth setting of its own): the bearer in $TCK_BEARER
# on every request that carries no Authorization header -- the kit's transport (httpx) and its raw
# JSON-RPC tests (requests) alike -- except in the tests that mean to go without credentials
# (named *without_auth*, *authentication_required*, *missing_auth*), as TCK main's own auth
# setting leaves them
cat >"$OUT/plugin/tck_bearer.py" <<'PY'
import os
import re

import httpx
import requests

BEARER = f"Bearer {os.environ['TCK_BEARER']}"
WITHOUT = re.compile(r"without_auth|authentication_required|missing_auth", re.I)
_on = {"bearer": True}


def pytest_runtest_setup(item):
    _on["bearer"] = not WITHOUT.search(item.name)


def _with_bearer(send):
    def wrapped(self, request, *args, **kwargs):
        if _on["bearer"] and "authorization" not in request.headers:
            request.headers["Authorization"] = BEARER
        return send(self, request, *args, **kwargs)
    return wrapped


httpx.Client.send = _with_bearer(httpx.Client.send)
httpx.AsyncClient.send = _with_bearer(httpx.AsyncClient.send)
requests.Session.send = _with_bearer(requests.Session.send)
PY

runs=()
for door in $DOORS; do
LIST=$(list_for "$door")
for gen in $GENS; do
    src=$(tck_tree "$gen")
    echo "== A2A $gen: a2a-tck $(cat "$src/.commit" 2>/dev/null || echo "$src") against $SUT, $door door" >&2
    g0=$(date +%s%N)
    if [ "$SUT" = mur ]; then start_mur "$gen" "$door"; else start_reference "$gen" "$door"; fi
    for cat in $CATEGORIES; do
        case $cat in
        mandatory) sel=(tests/mandatory/ -m "mandatory or mandatory_protocol or mandatory_jsonrpc") ;;
        capabilities) sel=(tests/optional/capabilities/) ;;
        quality) sel=(tests/optional/quality/) ;;
        features) sel=(tests/optional/features/) ;;
        transport-equivalence) sel=(tests/optional/multi_transport/ -m transport_equivalence) ;;
        *) die "TCK_CATEGORIES: unknown category $cat" ;;
        esac
        base=$OUT/results/$SUT-$door-$gen-$cat
        skip=()
        if [ "$SKIP_KNOWN" = 1 ] && [ -f "$LIST" ]; then
            sed 's/#.*//' "$LIST" | awk -v g="$gen" '$1 == g { print $2 }' >"$OUT/skip-$gen.txt"
            skip=(-p tck_skip_known)
        fi
        hdr=()
        [ "$gen" = 1.0 ] && hdr=(A2A_AUTH_HEADERS='{"A2A-Version":"1.0"}')
        if [ -n "$SUT_TOKEN" ] && [ "$gen" = 1.0 ]; then
            hdr+=(A2A_AUTH_TYPE=bearer A2A_AUTH_TOKEN="$SUT_TOKEN")
        elif [ -n "$SUT_TOKEN" ]; then
            hdr+=(TCK_BEARER="$SUT_TOKEN")
            skip+=(-p tck_bearer)
        fi
        transports=(--transports jsonrpc)
        [ "$cat" = transport-equivalence ] && transports=(--transports jsonrpc,rest --enable-equivalence-testing)
        rm -f "$base.json" "$base.log"
        t0=$(date +%s%N)
        # exported in the subshell, not passed to env(1): the token stays out of every argv
        (cd "$src" && unset A2A_AUTH_TYPE A2A_AUTH_TOKEN A2A_AUTH_HEADER A2A_AUTH_HEADERS \
            A2A_AUTH_USERNAME A2A_AUTH_PASSWORD TCK_BEARER &&
            { [ ${#hdr[@]} -eq 0 ] || export "${hdr[@]}"; } &&
            PYTHONPATH="$OUT/plugin" TCK_SKIP_FILE="$OUT/skip-$gen.txt" \
            PYTHONDONTWRITEBYTECODE=1 "$VPY" -m pytest "${sel[@]}" "${skip[@]}" --sut-url="$SUT_URL" \
            --test-scope=all "${transports[@]}" --tb=short -q -p no:cacheprovider -o log_level=INFO \
            --json-report --json-report-file="$base.json" --json-report-omit=collectors \
            >"$base.log" 2>&1) || true
        t1=$(date +%s%N)
        [ -s "$base.json" ] || die "pytest wrote no report for $gen $cat (see ${base#"$ROOT"/}.log)"
        runs+=("$door $gen $cat $(((t1 - t0) / 1000000)) $LIST $base.json")
        echo "   $cat: $(tail -n 1 "$base.log") [$(((t1 - t0) / 1000000)) ms]" >&2
    done
    stop_sut
    echo "   A2A $gen took $((($(date +%s%N) - g0) / 1000000)) ms (server start, categories, stop)" >&2
done
done

# ---- compare with the list ----------------------------------------------------------------------
"$VPY" - "$SUT" "$ROOT/tests/tck" "$SKIP_KNOWN" "${runs[@]}" <<'EOF'
import json, re, sys

sut, lists, skip_known, runs = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4:]

def read_list(path):
    """'<gen> <test id>  # reason' per line -> {(gen, id): reason}."""
    entries = {}
    try:
        lines = open(path).read().splitlines()
    except FileNotFoundError:
        return entries
    for n, line in enumerate(lines, 1):
        body, _, reason = line.partition("#")
        if not body.strip():
            continue
        parts = body.split()
        if len(parts) != 2 or parts[0] not in ("0.3", "1.0"):
            sys.exit(f"tck.sh: {path}:{n}: expected '<0.3|1.0> <test id>  # reason', got {line!r}")
        if not reason.strip():
            sys.exit(f"tck.sh: {path}:{n}: {parts[1]} has no '# reason'")
        entries[(parts[0], parts[1])] = reason.strip()
    return entries

print()
print(f"A2A TCK against {sut} (known failures: tests/tck/, the list of each door)")
print(f"{'door':13} {'gen':4} {'category':13} {'passed':>6} {'failed':>6} {'known':>6} {'skipped':>7} {'xfail':>5} {'secs':>6}")
tot = dict(passed=0, new=0, skipped=0, known=0)
new, fixed, seen, doors = [], [], set(), {}
for run in runs:
    door, gen, cat, ms, list_path, path = run.split(" ", 5)
    known = read_list(list_path)
    doors[door] = (list_path, known)
    report = json.load(open(path))
    counts = dict(passed=0, failed=0, skipped=0, xfailed=0, xpassed=0)
    failed = {}
    for t in report.get("tests", []):
        o = t["outcome"]
        seen.add((door, gen, t["nodeid"]))
        if o in ("failed", "error"):
            why = ""
            for phase in ("setup", "call", "teardown"):
                c = t.get(phase) or {}
                if c.get("outcome") in ("failed", "error"):
                    crash = c.get("crash") or {}
                    why = (crash.get("message") or str(c.get("longrepr", ""))).strip()
                    break
            failed[t["nodeid"]] = why.splitlines()[0][:200] if why else o
            counts["failed"] += 1
        else:
            counts[o] = counts.get(o, 0) + 1
            if o == "passed" and (gen, t["nodeid"]) in known:
                fixed.append((door, gen, t["nodeid"], known[(gen, t["nodeid"])]))
    # a collection error (import failure) fails the whole run
    for c in report.get("collectors", []):
        if c.get("outcome") == "failed":
            failed[c["nodeid"] or "<collection>"] = "collection failed"
    n_known = sum(1 for k in failed if (gen, k) in known)
    print(f"{door:13} {gen:4} {cat:13} {counts['passed']:6} {len(failed) - n_known:6} {n_known:6} "
          f"{counts['skipped']:7} {counts['xfailed']:5} {int(ms) / 1000:6.1f}")
    tot["passed"] += counts["passed"]
    tot["skipped"] += counts["skipped"] + counts["xfailed"]
    tot["known"] += n_known
    for k, why in sorted(failed.items()):
        if (gen, k) not in known:
            new.append((door, gen, k, why))
    tot["new"] += len(failed) - n_known

if sut == "mur":
    # every 'ref:' entry must be one the reference server really fails in the same mode
    for door, (list_path, known) in doors.items():
        ref_name = "reference-failures" + ("" if door == "public" else "-auth") + ".txt"
        reference = read_list(f"{lists}/{ref_name}")
        for (gen, k), reason in sorted(known.items()):
            if reason.startswith("ref:") and (gen, k) not in reference:
                print(f"\nlist error: {door}: {gen} {k} says 'ref:' but is not in tests/tck/{ref_name}")
                tot["new"] += 1

if new:
    print(f"\nFAILED, not in the list ({len(new)}):")
    for door, gen, k, why in new:
        print(f"  {door} {gen} {k}\n      {why}")
if fixed:
    print(f"\nlisted as known failures but now PASS ({len(fixed)}) -- take them off the list:")
    for door, gen, k, reason in fixed:
        print(f"  {door} {gen} {k}  # {reason}")
ran = {(r.split(" ")[0], r.split(" ")[1]) for r in runs}
unseen = [] if skip_known else [(door, gen, k) for door, (_, known) in doors.items()
                                for gen, k in known if (door, gen) in ran and (door, gen, k) not in seen]
if unseen:
    print(f"\nlisted but not run ({len(unseen)}; renamed or deselected?):")
    for door, gen, k in sorted(unseen):
        print(f"  {door} {gen} {k}")
if skip_known:
    print(f"\nknown failures not run (--skip-known): "
          f"{sum(1 for door, (_, known) in doors.items() for gen, _k in known if (door, gen) in ran)}")
print(f"\n{tot['known']} known failures (listed with their reasons)")
print(f"tck: {tot['passed']} passed, {tot['new']} failed, {tot['skipped']} skipped")
sys.exit(1 if tot["new"] else 0)
EOF
