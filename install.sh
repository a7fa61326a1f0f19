#!/bin/sh
# install.sh [--target TRIPLE] [PREFIX] — build mur as a statically linked release binary and
# install it.
#
# Installs PREFIX/bin/mur (PREFIX defaults to ~/.local) and one relative symlink per applet
# (mur-run, mur-ps, ...) pointing at it; the man page as PREFIX/share/man/man1/mur.1 and the
# bash, zsh and fish completions under PREFIX/share (bash-completion/completions/mur,
# zsh/site-functions/_mur, fish/vendor_completions.d/mur.fish). The binary is static so it runs on any Linux host,
# container or CI runner, even in an empty chroot:
#   - with the musl target (<arch>-unknown-linux-musl), added with `rustup target add` when
#     rustup is here and the target is not: smaller and faster to start than glibc's;
#   - only if that fails, with glibc and `-C target-feature=+crt-static` (stderr says why). The
#     build then names the host triple explicitly (--target), so the flag applies only to mur
#     itself and not to build scripts or proc-macros, which must stay dynamic.
# --target TRIPLE builds for another machine. A Linux target of another architecture needs a
# linker for it: CARGO_TARGET_<TRIPLE>_LINKER if set; else, for a musl target, rust-lld, which
# ships with the Rust toolchain and links musl's self-contained libc (no package needed); else
# <arch>-linux-gnu-gcc (Debian: gcc-aarch64-linux-gnu). A musl build also compiles C (its
# allocator, mimalloc), so it needs a C compiler for the target too: see "compiling C" below.
# The result is checked with `file` and `ldd` before anything is installed.
#
# Bad input costs no build where it can be seen before one: a PREFIX that cannot be written, a
# file where PREFIX/bin should be, a directory where PREFIX/bin/mur should be. An existing
# PREFIX/bin/mur-APPLET that is not a link to mur is refused before anything is installed.
# Everything is staged under PREFIX/bin and renamed into place, so nothing is left half-written.
#
# Exit: 0 installed; 1 failed; 2 usage; 3 the target cannot be built here (it cannot be added,
# or there is no linker or C compiler for it) — scripts/release.sh skips such a target and says so.
#
# Honours CARGO_TARGET_DIR (and cargo's build.target-dir) for the build output, and RUSTFLAGS
# (the static flag is appended to it). Runnable from any directory.

set -eu

prog=install.sh

die() {
    printf '%s: %s\n' "$prog" "$*" >&2
    exit 1
}

cannot_build() {
    printf '%s: %s\n' "$prog" "$*" >&2
    exit 3
}

usage() {
    cat <<'EOF'
Usage: install.sh [--target TRIPLE] [PREFIX]

Build mur as a static release binary and install PREFIX/bin/mur plus one
symlink per applet (mur-run, mur-ps, mur-stop, mur-token, mur-logs,
mur-cancel, mur-control, mur-watch, mur-formation, mur-completions), the
man page (PREFIX/share/man/man1/mur.1) and bash, zsh and fish completions.
PREFIX defaults to ~/.local. Needs cargo (https://rustup.rs).

  --target TRIPLE  build for that target, e.g. aarch64-unknown-linux-musl
                   (default: the musl target of this machine's architecture)
EOF
}

usage_error() {
    printf '%s: %s\n' "$prog" "$*" >&2
    usage >&2
    exit 2
}

prefix=
target=
while [ $# -gt 0 ]; do
    case $1 in
    -h | --help) usage; exit 0 ;;
    --target)
        [ $# -ge 2 ] || usage_error "--target needs a TRIPLE"
        target=$2
        shift 2
        ;;
    --target=*) target=${1#--target=}; shift ;;
    -*) usage_error "unknown option $1" ;;
    *)
        [ -z "$prefix" ] || usage_error "more than one PREFIX: $prefix and $1"
        [ -n "$1" ] || usage_error "PREFIX is empty"
        prefix=$1
        shift
        ;;
    esac
done
case $target in
*[!a-z0-9_.-]*) usage_error "not a target triple: $target" ;;
esac
[ -n "$prefix" ] || prefix=${HOME:?HOME is not set; pass PREFIX explicitly}/.local

# A relative PREFIX means relative to where we were called from, not to the source tree.
case $prefix in
/*) ;;
*) prefix=$(pwd)/$prefix ;;
esac
bindir=${prefix%/}/bin

# PREFIX/bin must be a directory this user may write, or one that can be created: the nearest
# part of it that exists must be a writable directory.
if [ -e "$bindir" ] || [ -L "$bindir" ]; then
    [ -d "$bindir" ] || die "$bindir exists and is not a directory; move it away or choose another PREFIX"
    [ -w "$bindir" ] || die "$bindir is not writable by uid $(id -u); choose another PREFIX"
else
    nearest=$bindir
    while [ ! -e "$nearest" ] && [ ! -L "$nearest" ]; do
        nearest=$(dirname -- "$nearest")
    done
    [ -d "$nearest" ] || die "cannot create $bindir: $nearest is not a directory"
    [ -w "$nearest" ] || die "cannot create $bindir: $nearest is not writable by uid $(id -u); choose another PREFIX"
fi
[ ! -d "$bindir/mur" ] || die "$bindir/mur is a directory; not replacing it"

command -v cargo >/dev/null 2>&1 ||
    die "cargo not found on PATH; install Rust (https://rustup.rs) and run this again"

# Build from the source tree this script lives in, wherever we were called from.
here=$(dirname -- "$0")
cd -- "$here" || die "cannot enter the source directory $here"
[ -f Cargo.toml ] || die "no Cargo.toml beside $0; run install.sh from a mur source tree"

rustc=${RUSTC:-rustc}
host=$("$rustc" -vV | sed -n 's/^host: //p')
[ -n "$host" ] || die "cannot tell the host triple from '$rustc -vV'"
sysroot=$("$rustc" --print sysroot)
user_rustflags=${RUSTFLAGS:-}

# Whether the standard library for target $1 is installed. With rustup, one that is not is added
# (said on stderr); `why` holds the reason when it cannot be had.
why=
have_target() {
    if command -v rustup >/dev/null 2>&1; then
        rustup target list --installed 2>/dev/null | grep -qx "$1" && return 0
        printf '%s: the %s target is not installed; adding it: rustup target add %s\n' \
            "$prog" "$1" "$1" >&2
        # No backtrace: its numbered frames would read as rustup's numbered causes.
        if added=$(RUST_BACKTRACE=0 rustup target add "$1" 2>&1); then
            return 0
        fi
        error=$(printf '%s\n' "$added" | sed -n 's/^error: //p' | head -n 1)
        cause=$(printf '%s\n' "$added" | sed -n 's/^ *[0-9][0-9]*: //p' | tail -n 1)
        why="rustup target add $1 failed: ${error:-no reason given}${cause:+ ($cause)}"
        return 1
    fi
    [ -d "$sysroot/lib/rustlib/$1/lib" ] && return 0
    why="the $1 target is not in $sysroot and there is no rustup to add it"
    return 1
}

# Static glibc: the flag goes to mur alone because the build names its --target.
crt_static() {
    RUSTFLAGS="${user_rustflags:+$user_rustflags }-C target-feature=+crt-static"
    export RUSTFLAGS
}

static=yes
if [ -z "$target" ]; then
    case $host in
    *-linux-gnu*)
        musl=$(printf '%s\n' "$host" | sed 's/-gnu/-musl/')
        if have_target "$musl"; then
            target=$musl
        else
            printf '%s: falling back to glibc, +crt-static (a larger, slower-starting binary): %s\n' \
                "$prog" "$why" >&2
            target=$host
            crt_static
        fi
        ;;
    *-linux-musl*) target=$host ;;
    *)
        target=$host
        static=no
        printf '%s: warning: %s is not Linux; building an ordinary dynamic binary\n' \
            "$prog" "$host" >&2
        ;;
    esac
else
    case $target in
    *-linux-*) ;;
    "$host") static=no ;;
    *) cannot_build "$target is neither Linux nor this machine ($host): no linker for it here" ;;
    esac
    [ "$target" = "$host" ] || have_target "$target" || cannot_build "$why"
    case $target in
    *-linux-gnu*) crt_static ;;
    esac
fi
case $target in
*-linux-musl*) how="musl ($target)" ;;
*-linux-gnu*) how="glibc, +crt-static ($target)" ;;
*) how="$target (not Linux: a static binary is not possible here)" ;;
esac

# A target of another architecture needs its linker (see the top of this file).
cross=no
[ "${target%%-*}" = "${host%%-*}" ] || cross=yes
if [ "$cross" = yes ]; then
    linker_var=CARGO_TARGET_$(printf '%s' "$target" | tr 'a-z.-' 'A-Z__')_LINKER
    eval "linker=\${$linker_var:-}"
    lld=$sysroot/lib/rustlib/$host/bin/rust-lld
    gcc=${target%%-*}-linux-gnu-gcc
    if [ -z "$linker" ]; then
        case $target in
        *-linux-musl*) [ -x "$lld" ] && linker=$lld ;;
        esac
    fi
    if [ -z "$linker" ] && command -v "$gcc" >/dev/null 2>&1; then
        linker=$gcc
    fi
    [ -n "$linker" ] || cannot_build "no linker for $target: set $linker_var, or install $gcc"
    eval "$linker_var=\$linker"
    export "${linker_var?}"
    printf '%s: linking %s with %s\n' "$prog" "$target" "$linker" >&2
fi

# A musl target's build compiles C: mimalloc, its allocator (README: Dependencies). The cc crate
# asks for <arch>-linux-musl-gcc, which Debian does not ship; unless CC_<triple> or TARGET_CC
# names one, take the first of: <arch>-linux-musl-gcc; musl-gcc (Debian: musl-tools) on this
# machine's architecture; <arch>-linux-gnu-gcc (Debian: gcc-aarch64-linux-gnu for aarch64),
# then cc on this machine's. A glibc compiler only compiles here (mimalloc needs no more of libc
# than musl has, and rust-lld or cc links it against musl), so _FORTIFY_SOURCE, which would
# call glibc's checked functions, is turned off for it.
case $target in
*-linux-musl*)
    cc_var=CC_$(printf '%s' "$target" | tr 'a-z.-' 'a-z__')
    cflags_var=CFLAGS_$(printf '%s' "$target" | tr 'a-z.-' 'a-z__')
    eval "cc=\${$cc_var:-\${TARGET_CC:-}}"
    if [ -z "$cc" ]; then
        arch=${target%%-*}
        candidates="$arch-linux-musl-gcc"
        [ "$cross" = yes ] || candidates="$candidates musl-gcc"
        candidates="$candidates $arch-linux-gnu-gcc"
        [ "$cross" = yes ] || candidates="$candidates cc gcc"
        for candidate in $candidates; do
            if command -v "$candidate" >/dev/null 2>&1; then
                cc=$candidate
                break
            fi
        done
        if [ -z "$cc" ]; then
            package="musl-tools or gcc"
            [ "$cross" = no ] || package=gcc-$arch-linux-gnu
            cannot_build "no C compiler for $target (mimalloc, its allocator, is C): install $package (Debian), or set $cc_var"
        fi
        eval "$cc_var=\$cc"
        export "${cc_var?}"
        case $cc in
        *-linux-gnu-gcc | cc | gcc)
            eval "cflags=\${$cflags_var:-}"
            eval "$cflags_var=\"\${cflags:+\$cflags }-U_FORTIFY_SOURCE\""
            export "${cflags_var?}"
            ;;
        esac
    fi
    # mimalloc with 4 MiB segments rather than 32 MiB (the least mimalloc 2 allows with its
    # 64 KiB slices): every thread that allocates maps at least one, which under an
    # address-space limit (ulimit -v) is what runs out first (src/sys/alloc.rs).
    eval "cflags=\${$cflags_var:-}"
    eval "$cflags_var=\"\${cflags:+\$cflags }-DMI_SEGMENT_SHIFT=22\""
    export "${cflags_var?}"
    printf '%s: compiling C for %s with %s\n' "$prog" "$target" "$cc" >&2
    ;;
esac

if [ -n "${CARGO_ENCODED_RUSTFLAGS:-}" ] && [ "$static" = yes ]; then
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

# The applets to link, from the binary itself, so the list never drifts. A binary for another
# architecture may not run here: then the same source built for this machine says instead.
if applets=$("$built" --list 2>/dev/null); then
    :
elif [ "$cross" = yes ]; then
    printf '%s: %s does not run here; asking a build for this machine for the applet list\n' \
        "$prog" "$built" >&2
    applets=$(RUSTFLAGS=$user_rustflags cargo run --quiet --locked --bin mur -- --list) ||
        die "mur --list failed"
else
    die "$built --list failed"
fi
[ -n "$applets" ] || die "$built --list printed no applets"
for applet in $applets; do
    case $applet in
    *[!a-z0-9-]* | '' | -*) die "unexpected applet name from --list: '$applet'" ;;
    esac
    # Replaced only if it is ours already: a link to mur.
    link=$bindir/mur-$applet
    if [ -L "$link" ]; then
        points=$(readlink -- "$link")
        [ "$points" = mur ] || [ "$points" = "$bindir/mur" ] ||
            die "$link is a link to $points, not to mur; move it away or choose another PREFIX (nothing was installed)"
    elif [ -e "$link" ]; then
        die "$link exists and is not a link to mur; move it away or choose another PREFIX (nothing was installed)"
    fi
done

# Stage everything beside its target, then rename each onto it: replacing a running mur is
# safe, and a half-written file is never visible under a real name.
mkdir -p -- "$bindir" || die "cannot create $bindir"
stage=$(mktemp -d "$bindir/.mur-install.XXXXXX") || die "cannot create a staging directory in $bindir"
trap 'rm -rf -- "$stage"' EXIT
cp -- "$built" "$stage/mur"
chmod 755 "$stage/mur"
for applet in $applets; do
    ln -s mur "$stage/mur-$applet"
done
mv -f -- "$stage/mur" "$bindir/mur"
for applet in $applets; do
    mv -f -- "$stage/mur-$applet" "$bindir/mur-$applet"
done

# The man page and shell completions: data files (0644), each copied to a staging name beside
# its place and renamed onto it, as the binary was.
datadir=${prefix%/}/share
install_data() { # SOURCE DESTINATION
    dest_dir=$(dirname -- "$2")
    mkdir -p -- "$dest_dir" || die "cannot create $dest_dir"
    staged="$dest_dir/.$(basename -- "$2").mur-install.$$"
    if ! { cp -- "$1" "$staged" && chmod 644 "$staged" && mv -f -- "$staged" "$2"; }; then
        rm -f -- "$staged"
        die "cannot install $2"
    fi
    installed_data="$installed_data $2"
}
installed_data=
install_data man/mur.1 "$datadir/man/man1/mur.1"
install_data completions/mur.bash "$datadir/bash-completion/completions/mur"
install_data completions/_mur "$datadir/zsh/site-functions/_mur"
install_data completions/mur.fish "$datadir/fish/vendor_completions.d/mur.fish"

size=$(wc -c <"$bindir/mur" | tr -d ' ')
printf 'installed %s (%s bytes, %s)\n' "$bindir/mur" "$size" "$how"
if version=$("$bindir/mur" --version 2>/dev/null); then
    printf '  %s\n' "$version"
fi
for applet in $applets; do
    printf 'installed %s -> mur\n' "$bindir/mur-$applet"
done
for file in $installed_data; do
    printf 'installed %s\n' "$file"
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
