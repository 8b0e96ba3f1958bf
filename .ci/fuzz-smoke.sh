#!/usr/bin/env bash
# Builds every fuzz target with libFuzzer + ASan/UBSan (clang) and runs each for a short while
# on a scratch copy of its corpus. A crash fails CI; the reproducer is printed by libFuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-15}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

CC=clang meson setup "$out/build" -Dfuzzing=true -Db_sanitize=address,undefined -Db_lundef=false \
        -Dtests=disabled -Dintegration-tests=false >/dev/null
ninja -C "$out/build" >/dev/null
for f in "$out"/build/tests/fuzz/fuzz-*; do
        [ -x "$f" ] && [ -f "$f" ] || continue
        name=${f##*/fuzz-}
        mkdir -p "$out/corpus-$name"
        cp -r tests/fuzz/corpus/"$name"/. "$out/corpus-$name/" 2>/dev/null || true
        echo "fuzz-$name: ${seconds}s"
        "$f" -max_total_time="$seconds" -print_final_stats=0 "$out/corpus-$name" >"$out/log-$name" 2>&1 || {
                tail -40 "$out/log-$name"
                exit 1
        }
done
