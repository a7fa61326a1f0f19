#!/usr/bin/env bash
# Make target/a2a-venv: a Python venv holding the official A2A Python SDK (a2a-sdk, pinned 0.3.x),
# which tests/a2a_sdk.rs drives against a real `mur run` door through tests/sdk/a2a_client.py.
#
# tests/a2a_sdk.rs runs it on first use (when target/a2a-venv does not work yet), so it need not
# be run by hand. Safe to run unconditionally: when Python, venv or PyPI is not available it
# prints a loud warning, leaves no half-made venv behind, and exits 0 -- the Rust test then
# records that it SKIPPED, and why (target/tmp/skipped.tsv). An existing venv that already holds
# the pinned SDK is kept as it is.
#
# a2a-sdk's base install already brings what its JSON-RPC client needs (httpx, httpx-sse,
# pydantic); no extras are needed for the JSONRPC transport.
set -uo pipefail
cd "$(dirname "$0")/../.."

A2A_SDK_VERSION=0.3.26
VENV=target/a2a-venv
PY="$VENV/bin/python"
PYTHON=${PYTHON:-python3}

warn() {
    echo "" >&2
    echo "*** WARNING: tests/sdk/setup.sh: $* ***" >&2
    echo "*** WARNING: the A2A SDK interop test (tests/a2a_sdk.rs) will be SKIPPED ***" >&2
    echo "" >&2
}

ready() {
    [ -x "$PY" ] && "$PY" - "$A2A_SDK_VERSION" >/dev/null 2>&1 <<'EOF'
import sys
from importlib.metadata import version
assert version("a2a-sdk") == sys.argv[1], version("a2a-sdk")
import httpx, httpx_sse  # noqa: F401  the JSON-RPC transport's own imports
from a2a.client import A2ACardResolver, AuthInterceptor, ClientFactory  # noqa: F401
from a2a.client import InMemoryContextCredentialStore  # noqa: F401
EOF
}

if ready; then
    echo "tests/sdk/setup.sh: $VENV already holds a2a-sdk $A2A_SDK_VERSION"
    exit 0
fi

if ! command -v "$PYTHON" >/dev/null 2>&1; then
    warn "no $PYTHON on PATH"
    exit 0
fi

rm -rf "$VENV"
mkdir -p target
if ! "$PYTHON" -m venv "$VENV" >/dev/null 2>&1; then
    rm -rf "$VENV"
    warn "'$PYTHON -m venv' failed (on Debian: apt-get install python3-venv)"
    exit 0
fi

if ! "$PY" -m pip install --quiet --disable-pip-version-check --no-input \
    --timeout 30 --retries 2 "a2a-sdk==$A2A_SDK_VERSION" >"$VENV.log" 2>&1; then
    tail -n 5 "$VENV.log" >&2
    rm -rf "$VENV"
    warn "could not install a2a-sdk==$A2A_SDK_VERSION from PyPI (unreachable?)"
    exit 0
fi
rm -f "$VENV.log"

if ! ready; then
    rm -rf "$VENV"
    warn "a2a-sdk==$A2A_SDK_VERSION installed but its client does not import"
    exit 0
fi
echo "tests/sdk/setup.sh: $VENV holds a2a-sdk $A2A_SDK_VERSION"
