# Sourced by tests/sdk/setup.sh and tests/kube/setup.sh (run from the repository's root): the one
# way they make a Python venv holding a pinned PyPI package.

# pip_venv DIR PKG VERSION: a fresh venv at DIR ($PYTHON's) holding PKG==VERSION. On any failure
# it calls the caller's give_up, which removes DIR, warns that the tests needing it will be
# SKIPPED, and exits 0; pip's log is kept in DIR.log only until the install succeeds.
pip_venv() {
    local dir=$1 pkg=$2 version=$3
    command -v "$PYTHON" >/dev/null 2>&1 || give_up "no $PYTHON on PATH"
    "$PYTHON" -m venv "$dir" >/dev/null 2>&1 ||
        give_up "'$PYTHON -m venv' failed (on Debian: apt-get install python3-venv)"
    if ! "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
        --timeout 30 --retries 2 "$pkg==$version" >"$dir.log" 2>&1; then
        tail -n 5 "$dir.log" >&2
        give_up "could not install $pkg==$version from PyPI (unreachable?)"
    fi
    rm -f "$dir.log"
}
