#!/bin/sh
# install.sh [PREFIX] — build mur as a statically linked release binary and install it.
#
# Installs PREFIX/bin/mur (PREFIX defaults to ~/.local) and one relative symlink per applet
# (mur-run, mur-ps, ...) pointing at it. The binary is static so it runs on any Linux host,
# container or CI runner, even in an empty chroot:
#   - with the musl target (<arch>-unknown-linux-musl) when it is installed;
#   - otherwise with glibc and `-C target-feature=+crt-static`. The build then names the host
#     triple explicitly (--target), so the flag applies only to mur itself and not to build
#     scripts or proc-macros, which must stay dynamic.
# The result is checked with `file` and `ldd` before anything is installed.
#
# Honours CARGO_TARGET_DIR (and cargo's build.target-dir) for the build output, and RUSTFLAGS
# (the static flag is appended to it). Runnable from any directory.

set -eu

prog=install.sh

die() {
    printf '%s: %s\n' "$prog" "$*" >&2
    exit 1
}

usage() {
    cat <<'EOF'
Usage: install.sh [PREFIX]

Build mur as a static release binary and install PREFIX/bin/mur plus one
symlink per applet (mur-run, mur-ps, mur-stop, mur-token, mur-formation).
PREFIX defaults to ~/.local. Needs cargo (https://rustup.rs).
EOF
}

case $# in
0) prefix=${HOME:?HOME is not set; pass PREFIX explicitly}/.local ;;
1)
    case $1 in
    -h | --help) usage; exit 0 ;;
    '') printf '%s: PREFIX is empty\n' "$prog" >&2; usage >&2; exit 2 ;;
    -*) printf '%s: unknown option %s\n' "$prog" "$1" >&2; usage >&2; exit 2 ;;
    esac
    prefix=$1
    ;;
*) usage >&2; exit 2 ;;
esac

# A relative PREFIX means relative to where we were called from, not to the source tree.
case $prefix in
/*) ;;
*) prefix=$(pwd)/$prefix ;;
esac
bindir=${prefix%/}/bin

command -v cargo >/dev/null 2>&1 ||
    die "cargo not found on PATH; install Rust (https://rustup.rs) and run this again"

# Build from the source tree this script lives in, wherever we were called from.
here=$(dirname -- "$0")
cd -- "$here" || die "cannot enter the source directory $here"
[ -f Cargo.toml ] || die "no Cargo.toml beside $0; run install.sh from a mur source tree"

rustc=${RUSTC:-rustc}
host=$("$rustc" -vV | sed -n 's/^host: //p')
[ -n "$host" ] || die "cannot tell the host triple from '$rustc -vV'"

static=yes
case $host in
*-linux-gnu*)
    musl=$(printf '%s\n' "$host" | sed 's/-gnu/-musl/')
    if command -v rustup >/dev/null 2>&1 &&
        rustup target list --installed 2>/dev/null | grep -qx "$musl"; then
        target=$musl
        how="musl ($target)"
    elif ! command -v rustup >/dev/null 2>&1 &&
        [ -d "$("$rustc" --print sysroot)/lib/rustlib/$musl/lib" ]; then
        target=$musl
        how="musl ($target)"
    else
        target=$host
        RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-C target-feature=+crt-static"
        export RUSTFLAGS
        how="glibc, +crt-static ($target)"
    fi
    ;;
*-linux-musl*)
    target=$host
    how="musl ($target)"
    ;;
*)
    target=$host
    static=no
    how="$target (not Linux: a static binary is not possible here)"
    printf '%s: warning: %s is not Linux; building an ordinary dynamic binary\n' \
        "$prog" "$host" >&2
    ;;
esac
if [ -n "${CARGO_ENCODED_RUSTFLAGS:-}" ] && [ "$target" = "$host" ] && [ "$static" = yes ]; then
    printf '%s: warning: CARGO_ENCODED_RUSTFLAGS is set and overrides RUSTFLAGS;' "$prog" >&2
    printf ' the static check below will tell if the build is still static\n' >&2
fi

printf '%s: building mur (release, %s)\n' "$prog" "$how" >&2
cargo build --release --locked --target "$target" --bin mur

# Where cargo put it: CARGO_TARGET_DIR, else whatever cargo itself says (build.target-dir).
if [ -n "${CARGO_TARGET_DIR:-}" ]; then
    target_dir=$CARGO_TARGET_DIR
else
    target_dir=$(cargo metadata --format-version 1 --no-deps --locked |
        sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
    [ -n "$target_dir" ] || target_dir=target
fi
built=$target_dir/$target/release/mur
[ -x "$built" ] || die "the build finished but $built is missing"

# Refuse to install anything that is not static.
if [ "$static" = yes ]; then
    if command -v file >/dev/null 2>&1; then
        kind=$(file -L -- "$built")
        case $kind in
        *'statically linked'* | *'static-pie linked'*) ;;
        *) die "NOT STATIC: file says: $kind" ;;
        esac
    fi
    if command -v ldd >/dev/null 2>&1; then
        # glibc's ldd says "not a dynamic executable" (exit 1) or "statically linked";
        # any shared object named in its output is a dynamic dependency.
        deps=$(ldd "$built" 2>&1 || true)
        case $deps in
        *'=>'* | *'.so'*) die "NOT STATIC: ldd reports dynamic dependencies:
$deps" ;;
        esac
    fi
fi

# The applets to link, from the binary itself, so the list never drifts.
applets=$("$built" --list) || die "$built --list failed"
[ -n "$applets" ] || die "$built --list printed no applets"
for applet in $applets; do
    case $applet in
    *[!a-z0-9-]* | '' | -*) die "unexpected applet name from --list: '$applet'" ;;
    esac
done

mkdir -p -- "$bindir" || die "cannot create $bindir"
# Copy beside the target, then rename onto it: replacing a running mur is safe, and a
# half-written binary is never visible under the real name.
staging=$bindir/.mur.install.$$
trap 'rm -f -- "$staging"' EXIT
cp -- "$built" "$staging"
chmod 755 "$staging"
mv -f -- "$staging" "$bindir/mur"
trap - EXIT

for applet in $applets; do
    link=$bindir/mur-$applet
    if [ -d "$link" ] && [ ! -L "$link" ]; then
        die "$link is a directory; not replacing it"
    fi
    rm -f -- "$link"
    ln -s mur "$link"
done

size=$(wc -c <"$bindir/mur" | tr -d ' ')
printf 'installed %s (%s bytes, %s)\n' "$bindir/mur" "$size" "$how"
"$bindir/mur" --version | sed 's/^/  /'
for applet in $applets; do
    printf 'installed %s -> mur\n' "$bindir/mur-$applet"
done

# A hint when the bin directory is not on PATH (compared as given and as resolved).
physical=$(cd -- "$bindir" && pwd -P)
case ":${PATH:-}:" in
*":$bindir:"* | *":$bindir/:"* | *":$physical:"*) ;;
*)
    printf '\nnote: %s is not on your PATH. Add it, e.g. in ~/.profile:\n' "$bindir"
    printf '  export PATH="%s:$PATH"\n' "$bindir"
    ;;
esac
