#!/usr/bin/env bash
# Run every fuzz target for SECONDS each (default 30), one after another, and fail if any finds a
# crash. Needs the nightly toolchain and cargo-fuzz (installed here if missing).
#   fuzz/run.sh 600        # the ten-minute campaign
#   fuzz/run.sh 30         # what CI runs
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
targets=$(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^mur-fuzz$')
cargo +nightly fuzz build -O
failed=0
clean=0
for target in $targets; do
    log=$(mktemp)
    # A copy of the committed seeds grows into the working corpus, so runs leave git clean.
    work=fuzz/target/corpus/$target
    mkdir -p "$work"
    cp -n fuzz/corpus/"$target"/* "$work"/ 2>/dev/null || true
    if cargo +nightly fuzz run -O "$target" "$work" -- -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1; then
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        echo "fuzz $target: ${seconds}s, ${execs:-?} execs, no crash"
        clean=$((clean + 1))
    else
        echo "fuzz $target: FAILED"
        grep -E "panicked|ERROR|SUMMARY|Test unit written" "$log" | head -5
        failed=$((failed + 1))
    fi
    rm -f "$log"
done
echo "fuzz: ${clean} passed, ${failed} failed"
[ "$failed" -eq 0 ]
