#!/usr/bin/env bash
# Install one official A2A SDK client under target/, for the interop tests (tests/it/a2a_sdk*.rs)
# that drive it against a real `mur run` door:
#
#   tests/sdk/setup.sh [py03]   target/a2a-venv    a2a-sdk (PyPI) 0.3.x   tests/sdk/a2a_client.py
#   tests/sdk/setup.sh py1      target/a2a1-venv   a2a-sdk (PyPI) 1.x     tests/sdk/a2a_client_v1.py
#   tests/sdk/setup.sh js03     target/a2a-js03    @a2a-js/sdk (npm) 0.3.x  tests/sdk/a2a_client.mjs
#   tests/sdk/setup.sh js1      target/a2a-js1     @a2a-js/sdk (npm) 1.x    tests/sdk/a2a_client.mjs
#
# Each version is pinned here (the latest of its line when pinned). The Rust tests run this on
# first use (when the client's directory does not work yet), so it need not be run by hand. Safe
# to run unconditionally: when Python, venv, node, npm or the registry is not available it prints
# a loud warning, leaves nothing half-made behind, and exits 0 -- the Rust test then records that
# it SKIPPED, and why (target/tmp/skipped.tsv). A directory that already holds the pinned SDK is
# kept as it is.
#
# a2a-sdk's base install already brings what its JSON-RPC client needs (httpx, httpx-sse,
# pydantic or protobuf); @a2a-js/sdk's client needs nothing beyond the package (fetch is Node's).
set -uo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tests/venv.sh
. tests/venv.sh

WHICH=${1:-py03}
PYTHON=${PYTHON:-python3}
NODE=${NODE:-node}
NPM=${NPM:-npm}

case "$WHICH" in
py03)
    KIND=py PKG=a2a-sdk VERSION=0.3.26 DIR=target/a2a-venv
    IMPORTS='import httpx_sse  # noqa: F401  the 0.3 JSON-RPC transport imports it
from a2a.client import A2ACardResolver, AuthInterceptor, ClientFactory  # noqa: F401
from a2a.client import InMemoryContextCredentialStore  # noqa: F401'
    ;;
py1)
    KIND=py PKG=a2a-sdk VERSION=1.3.0 DIR=target/a2a1-venv
    IMPORTS='from a2a.client import A2ACardResolver, AuthInterceptor, ClientFactory  # noqa: F401
from a2a.client import InMemoryContextCredentialStore  # noqa: F401
from a2a.client.transports.jsonrpc import JsonRpcTransport  # noqa: F401  the 1.0 transport'
    ;;
js03)
    KIND=js PKG=@a2a-js/sdk VERSION=0.3.14 DIR=target/a2a-js03
    ;;
js1)
    KIND=js PKG=@a2a-js/sdk VERSION=1.3.0 DIR=target/a2a-js1
    ;;
*)
    echo "usage: tests/sdk/setup.sh [py03|py1|js03|js1]" >&2
    exit 2
    ;;
esac

warn() {
    echo "" >&2
    echo "*** WARNING: tests/sdk/setup.sh: $* ***" >&2
    echo "*** WARNING: the A2A SDK interop test ($PKG $VERSION, tests/it/a2a_sdk*.rs) will be SKIPPED ***" >&2
    echo "" >&2
}

# Give up on this SDK: nothing half-made stays behind.
give_up() {
    rm -rf "$DIR"
    warn "$@"
    exit 0
}

ready() {
    if [ "$KIND" = py ]; then
        [ -x "$DIR/bin/python" ] && "$DIR/bin/python" - "$VERSION" >/dev/null 2>&1 <<EOF
import sys
from importlib.metadata import version
assert version("$PKG") == sys.argv[1], version("$PKG")
import httpx  # noqa: F401  the JSON-RPC transport's own import
$IMPORTS
EOF
    else
        [ -f "$DIR/package.json" ] && "$NODE" - "$DIR" "$VERSION" >/dev/null 2>&1 <<'EOF'
const { createRequire } = require("node:module");
const path = require("node:path");
const [dir, want] = process.argv.slice(2);
const req = createRequire(path.resolve(dir, "package.json"));
// The package's exports map hides its package.json from require(); read it by path.
const main = req.resolve("@a2a-js/sdk/client");
const root = main.slice(0, main.lastIndexOf("/dist/"));
const got = JSON.parse(require("node:fs").readFileSync(`${root}/package.json`, "utf8")).version;
if (got !== want) throw new Error(`@a2a-js/sdk ${got}, not ${want}`);
req("@a2a-js/sdk/client");
EOF
    fi
}

if ready; then
    echo "tests/sdk/setup.sh: $DIR already holds $PKG $VERSION"
    exit 0
fi

mkdir -p target
rm -rf "$DIR"
if [ "$KIND" = py ]; then
    pip_venv "$DIR" "$PKG" "$VERSION"
else
    command -v "$NODE" >/dev/null 2>&1 || give_up "no $NODE on PATH"
    command -v "$NPM" >/dev/null 2>&1 || give_up "no $NPM on PATH"
    mkdir -p "$DIR"
    echo '{"name": "mur-a2a-interop", "private": true}' >"$DIR/package.json"
    if ! "$NPM" install --prefix "$DIR" --no-audit --no-fund --no-update-notifier \
        --fetch-timeout=30000 --fetch-retries=2 \
        --fetch-retry-mintimeout=2000 --fetch-retry-maxtimeout=10000 "$PKG@$VERSION" >"$DIR.log" 2>&1; then
        tail -n 5 "$DIR.log" >&2
        give_up "could not install $PKG@$VERSION from the npm registry (unreachable?)"
    fi
fi
rm -f "$DIR.log"

ready || give_up "$PKG $VERSION installed but its client does not load"
echo "tests/sdk/setup.sh: $DIR holds $PKG $VERSION"
