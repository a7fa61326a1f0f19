#!/usr/bin/env bash
# Install kubernetes-validate (PyPI), the Kubernetes schema validator tests/it/kubernetes.rs checks
# the emitted manifests with, into the venv target/kubernetes-validate. .ci/run runs it, and the
# test runs it on first use, so it need not be run by hand. Safe to run unconditionally: when
# Python, venv or PyPI is not available it prints a loud warning, leaves nothing half-made
# behind, and exits 0 -- the test then records that it SKIPPED, and why.
set -uo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tests/venv.sh
. tests/venv.sh

PYTHON=${PYTHON:-python3}
PKG=kubernetes-validate VERSION=1.37.0 DIR=target/kubernetes-validate

give_up() {
    rm -rf "$DIR"
    echo "" >&2
    echo "*** WARNING: tests/kube/setup.sh: $* ***" >&2
    echo "*** WARNING: the schema checks of tests/it/kubernetes.rs will be SKIPPED ***" >&2
    exit 0
}

if [ -x "$DIR/bin/kubernetes-validate" ] &&
    "$DIR/bin/python" -c "from importlib.metadata import version; assert version('$PKG') == '$VERSION'" 2>/dev/null; then
    echo "tests/kube/setup.sh: $DIR already holds $PKG $VERSION"
    exit 0
fi
mkdir -p target
rm -rf "$DIR"
pip_venv "$DIR" "$PKG" "$VERSION"
echo "tests/kube/setup.sh: installed $PKG $VERSION in $DIR"
