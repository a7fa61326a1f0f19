#!/bin/sh
# scripts/release.sh [OUTDIR] — the release artifacts, in OUTDIR (default dist/):
#   mur-VERSION-TARGET.tar.gz  for x86_64 and aarch64 Linux (musl, static): the binary and one
#                              link per applet, as mur-VERSION-TARGET/bin/{mur,mur-run,...}, so
#                              `tar -xzf FILE --strip-components=1 -C ~/.local` installs it;
#   SHA256SUMS                 over the tarballs this run wrote (`sha256sum -c SHA256SUMS`).
#
# Each binary is built by `install.sh --target TARGET` into a staging PREFIX, so it passes the
# same static checks and gets the same links. A target install.sh cannot build here (exit 3: the
# target cannot be added, or there is no linker for it) is skipped and said so; the others are
# still built. Each binary is run once — natively, or through qemu-<arch>-static / qemu-<arch>
# when installed — and its `--version` must name its target; where it cannot run, that is said.
#
# The tarballs are byte-for-byte repeatable for one commit and toolchain: fixed order and owner,
# every mtime the commit's time (SOURCE_DATE_EPOCH if set), no gzip timestamp.

set -eu

prog=release.sh
targets="x86_64-unknown-linux-musl aarch64-unknown-linux-musl"

die() {
    printf '%s: %s\n' "$prog" "$*" >&2
    exit 1
}

case ${1:-} in
-h | --help)
    sed -n '2,15s/^# \{0,1\}//p' "$0"
    exit 0
    ;;
esac
[ $# -le 1 ] || die "usage: scripts/release.sh [OUTDIR]"
out=${1:-dist}
case $out in
/*) ;;
*) out=$(pwd)/$out ;;
esac

root=$(cd -- "$(dirname -- "$0")/.." && pwd)
cd -- "$root"
for tool in sha256sum gzip tar; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found on PATH"
done
version=$(sed -n 's/^version = "\([^"]*\)"$/\1/p' Cargo.toml | head -n 1)
[ -n "$version" ] || die "no version in Cargo.toml"
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    printf '%s: warning: uncommitted changes: the binaries name commit %s but hold more\n' \
        "$prog" "$(git rev-parse --short=12 HEAD)" >&2
fi

mkdir -p -- "$out"
stage=$(mktemp -d)
trap 'rm -rf -- "$stage"' EXIT

# Run `BINARY --version` natively or under qemu; its output, or nothing where it cannot run.
run_version() {
    "$1" --version 2>/dev/null && return 0
    for qemu in "qemu-$2-static" "qemu-$2"; do
        command -v "$qemu" >/dev/null 2>&1 && "$qemu" "$1" --version && return 0
    done
    return 0
}

built=
skipped=
for target in $targets; do
    name=mur-$version-$target
    printf '%s: == %s\n' "$prog" "$target" >&2
    status=0
    ./install.sh --target "$target" "$stage/$name" >&2 || status=$?
    case $status in
    0) ;;
    3)
        printf '%s: skipping %s: it cannot be built here (install.sh said why, above)\n' \
            "$prog" "$target" >&2
        skipped="$skipped $target"
        continue
        ;;
    *) die "install.sh --target $target failed (exit $status)" ;;
    esac
    arch=${target%%-*}
    said=$(run_version "$stage/$name/bin/mur" "$arch")
    case $said in
    '') printf '%s: %s not run: no %s machine or qemu-%s here\n' "$prog" "$target" "$arch" "$arch" >&2 ;;
    *"($target, commit "*) printf '%s: %s runs: %s\n' "$prog" "$target" "$said" >&2 ;;
    *) die "$name/bin/mur --version does not name $target: $said" ;;
    esac
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
        -C "$stage" -cf - "$name" | gzip -n -9 >"$out/$name.tar.gz"
    built="$built $name.tar.gz"
done

[ -n "$built" ] || die "no target could be built"
# shellcheck disable=SC2086 # one word per tarball name, none with spaces
(cd -- "$out" && sha256sum $built >SHA256SUMS)
printf '%s: wrote %s:\n' "$prog" "$out" >&2
(cd -- "$out" && cat SHA256SUMS)
[ -z "$skipped" ] || printf '%s: skipped (not buildable here):%s\n' "$prog" "$skipped" >&2
