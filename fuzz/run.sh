#!/usr/bin/env bash
# Run every fuzz target for SECONDS each (default 30), two at a time (FUZZ_JOBS), and fail if any
# finds a crash. Needs the nightly toolchain and cargo-fuzz (installed here if missing).
#   fuzz/run.sh 600        # the ten-minute campaign
#   fuzz/run.sh 30         # what CI runs
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
jobs=${FUZZ_JOBS:-2}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
targets=$(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^mur-fuzz$')
cargo +nightly fuzz build -O

# One target: a copy of the committed seeds grows into the working corpus (so runs leave git
# clean); prints one line and fails on a crash.
fuzz_one() {
    local target=$1 seconds=$2 log work execs
    log=$(mktemp)
    work=fuzz/target/corpus/$target
    mkdir -p "$work"
    cp -n fuzz/corpus/"$target"/* "$work"/ 2>/dev/null || true
    if cargo +nightly fuzz run -O "$target" "$work" -- -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1; then
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        echo "fuzz $target: ${seconds}s, ${execs:-?} execs, no crash"
        rm -f "$log"
    else
        echo "fuzz $target: FAILED"
        grep -E "panicked|ERROR|SUMMARY|Test unit written" "$log" | head -5
        rm -f "$log"
        return 1
    fi
}
export -f fuzz_one

results=$(printf '%s\n' $targets | xargs -P "$jobs" -I{} bash -c 'fuzz_one "$1" "$2" || true' _ {} "$seconds")
printf '%s\n' "$results"
clean=$(grep -c ', no crash$' <<<"$results" || true)
failed=$(grep -c ': FAILED$' <<<"$results" || true)
echo "fuzz: ${clean} passed, ${failed} failed"
[ "$failed" -eq 0 ] && [ "$clean" -eq "$(wc -w <<<"$targets")" ]
