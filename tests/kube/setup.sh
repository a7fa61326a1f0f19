#!/usr/bin/env bash
# Install kubernetes-validate (PyPI), the Kubernetes schema validator tests/kubernetes.rs checks
# the emitted manifests with, into the venv target/kubernetes-validate. .ci/run runs it, and the
# test runs it on first use, so it need not be run by hand. Safe to run unconditionally: when
# Python, venv or PyPI is not available it prints a loud warning, leaves nothing half-made
# behind, and exits 0 -- the test then records that it SKIPPED, and why.
set -uo pipefail
cd "$(dirname "$0")/../.."

PYTHON=${PYTHON:-python3}
PKG=kubernetes-validate VERSION=1.37.0 DIR=target/kubernetes-validate

give_up() {
    rm -rf "$DIR"
    echo "" >&2
    echo "*** WARNING: tests/kube/setup.sh: $* ***" >&2
    echo "*** WARNING: the schema checks of tests/kubernetes.rs will be SKIPPED ***" >&2
    exit 0
}

if [ -x "$DIR/bin/kubernetes-validate" ] &&
    "$DIR/bin/python" -c "from importlib.metadata import version; assert version('$PKG') == '$VERSION'" 2>/dev/null; then
    echo "tests/kube/setup.sh: $DIR already holds $PKG $VERSION"
    exit 0
fi
mkdir -p target
rm -rf "$DIR"
command -v "$PYTHON" >/dev/null 2>&1 || give_up "no $PYTHON on PATH"
"$PYTHON" -m venv "$DIR" >/dev/null 2>&1 ||
    give_up "'$PYTHON -m venv' failed (on Debian: apt-get install python3-venv)"
if ! "$DIR/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
    --timeout 30 --retries 2 "$PKG==$VERSION" >"$DIR.log" 2>&1; then
    tail -n 5 "$DIR.log" >&2
    give_up "could not install $PKG==$VERSION from PyPI (unreachable?)"
fi
rm -f "$DIR.log"
echo "tests/kube/setup.sh: installed $PKG $VERSION in $DIR"
