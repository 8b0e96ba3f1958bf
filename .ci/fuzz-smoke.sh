#!/usr/bin/env bash
# Builds every fuzz target with libFuzzer + ASan/UBSan (clang) and runs each for a short while on a
# scratch copy of its corpus, one target per core at a time. A crash fails CI; the reproducer is
# printed by libFuzzer. FUZZ_SECONDS sets the time per target (default 15).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-15}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

CC=clang meson setup "$out/build" -Dfuzzing=true -Db_sanitize=address,undefined -Db_lundef=false \
        -Dtests=disabled -Dintegration-tests=false >/dev/null
ninja -C "$out/build" >/dev/null

run_one() {     # target binary
        local f=$1 name=${1##*/fuzz-}
        mkdir -p "$out/corpus-$name"
        cp -r tests/fuzz/corpus/"$name"/. "$out/corpus-$name/" 2>/dev/null || true
        if "$f" -max_total_time="$seconds" -print_final_stats=0 "$out/corpus-$name" >"$out/log-$name" 2>&1; then
                echo "fuzz-$name: ${seconds}s, no finding"
        else
                echo "fuzz-$name: FAILED"
                tail -40 "$out/log-$name"
                return 1
        fi
}
export -f run_one
export out seconds
find "$out/build/tests/fuzz" -maxdepth 1 -type f -name 'fuzz-*' -executable -print0 | sort -z |
        xargs -0 -n 1 -P "$(nproc)" bash -c 'run_one "$0"'
