#!/usr/bin/env bash
# The long fuzzing run (issue "Trust it"): each libFuzzer target (ASan+UBSan) runs until 10 million
# executions or 30 CPU-minutes (of its own CPU time), whichever comes first, starting from its checked-in corpus. The corpus
# grown by the run is minimised (-merge=1) and written back to tests/fuzz/corpus/<target>, and one
# row per target goes to tests/fuzz/LONG-RUNS.md. A crash stops that target and keeps the reproducer.
#
#   bash tests/fuzz/long-run.sh [-j N] [target...]      (default: every target, N=2 in parallel)
#   FUZZ_RUNS=10000000 FUZZ_SECONDS=1800 FUZZ_RSS_MB=4096 (the limits)
set -euo pipefail
cd "$(dirname "$0")/../.."
src=$PWD
jobs=2
if [ "${1:-}" = "-j" ]; then jobs=$2; shift 2; fi
runs=${FUZZ_RUNS:-10000000}
seconds=${FUZZ_SECONDS:-1800}
# Per input, wall clock: generous, because the run is meant to go niced on a busy machine; a real
# hang still shows up (the smoke run in CI keeps libFuzzer's default).
timeout=${FUZZ_TIMEOUT:-300}
out=${FUZZ_OUT:-/tmp/inplace-agent-fuzz}
mkdir -p "$out"

if [ ! -x "$out/build/tests/fuzz/fuzz-config" ]; then
        CC=clang meson setup "$out/build" -Dfuzzing=true -Db_sanitize=address,undefined -Db_lundef=false \
                -Dtests=disabled -Dintegration-tests=false >/dev/null
fi
ninja -C "$out/build" >/dev/null

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
        for f in "$out"/build/tests/fuzz/fuzz-*; do
                [ -x "$f" ] && [ -f "$f" ] && targets+=("${f##*/fuzz-}")
        done
fi

run_one() {
        local name=$1 bin="$out/build/tests/fuzz/fuzz-$1" work="$out/work-$1" log="$out/log-$1"
        local before after execs secs cpu cov rc=0 t0 t1 pid ticks limited st
        rm -rf "$work" "$work.min"
        mkdir -p "$work" "$work.min" "$out/crashes-$name"
        cp -r "$src/tests/fuzz/corpus/$name/." "$work/"
        before=$(ls "$work" | wc -l)
        t0=$(date +%s)
        # The 30 minutes are CPU time (a niced run on a busy machine gets less than its wall time):
        # libFuzzer only knows wall time, so a watcher interrupts it (SIGINT: final stats, exit 72).
        # -rss_limit_mb: under ASan a long run's RSS keeps growing (boot-entry: 1 GiB after 2.8 M
        # executions, ~150 bytes more per execution), which would cross libFuzzer's default 2 GiB
        # before 10 M. It is ASan's allocator, not the target: with quarantine_size_mb=0 a run of
        # 600 k executions stays under 70 MiB, and valgrind over the corpus ends with 0 bytes in use.
        "$bin" -runs="$runs" -max_total_time=$((seconds * 20)) -print_final_stats=1 -timeout="$timeout" \
                -rss_limit_mb="${FUZZ_RSS_MB:-4096}" \
                -artifact_prefix="$out/crashes-$name/" "$work" >"$log" 2>&1 &
        pid=$!
        ticks=0 limited=0
        while kill -0 "$pid" 2>/dev/null; do
                read -r -a st <"/proc/$pid/stat" 2>/dev/null && ticks=$((st[13] + st[14]))
                if [ "$limited" -eq 0 ] && [ "$ticks" -ge $((seconds * hz)) ]; then
                        kill -INT "$pid"
                        limited=1
                fi
                sleep 5
        done
        wait "$pid" || rc=$?
        [ "$limited" -eq 1 ] && [ "$rc" -eq 72 ] && rc=0
        t1=$(date +%s)
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
        secs=$((t1 - t0))
        cpu=$((ticks / hz))
        if [ "$rc" -ne 0 ]; then
                record_row "$name" "$(printf '| %s | %s | %s s | %s s | %s | — | **crash (exit %s), see %s** |' \
                        "$name" "${execs:-?}" "$secs" "$cpu" "${cov:-?}" "$rc" "$out/crashes-$name")"
                return 0
        fi
        # The named seeds stay; of the grown corpus only inputs that add coverage to them are kept.
        cp -r "$src/tests/fuzz/corpus/$name/." "$work.min/"
        "$bin" -merge=1 "$work.min" "$work" >"$log.merge" 2>&1
        after=$(ls "$work.min" | wc -l)
        rm -rf "$src/tests/fuzz/corpus/$name"
        mkdir -p "$src/tests/fuzz/corpus/$name"
        cp "$work.min"/. -r "$src/tests/fuzz/corpus/$name/"
        record_row "$name" "$(printf '| %s | %s | %s s | %s s | %s | %s → %s | no crash, no leak%s |' \
                "$name" "$execs" "$secs" "$cpu" "${cov:-?}" "$before" "$after" \
                "$([ "$limited" -eq 1 ] && echo " (stopped at the CPU limit)")")"
}

# tests/fuzz/LONG-RUNS.md keeps one row per target: a finished target's row replaces its older row at
# once (under a lock: targets finish in parallel), so an interrupted run keeps what it finished and
# targets can be run in separate sessions. Each row carries the date and machine it ran on.
record_row() {
        local name=$1 row=$2 rows
        rows=$(mktemp)
        exec {lock}>"$out/LONG-RUNS.lock"
        flock "$lock"
        [ -f "$table" ] && grep '^| [a-z]' "$table" | grep -v '^| target |' | grep -v "^| $name |" >"$rows" || true
        printf '%s %s, %s |\n' "$row" "$(date -u +%F)" "$machine" >>"$rows"
        {
                echo "# Long fuzzing runs"
                echo
                echo "Written by \`tests/fuzz/long-run.sh\` (ASan+UBSan, libFuzzer): each target until 10 million executions"
                echo "or 30 CPU-minutes of its own, whichever came first, from its checked-in corpus; the grown corpus,"
                echo "minimised with \`-merge=1\`, is checked in under \`tests/fuzz/corpus/<target>\`. Rerun one target with"
                echo "\`bash tests/fuzz/long-run.sh <target>\`."
                echo
                echo "| target | executions | wall time | CPU time | edges covered | corpus files (before → after merge) | result | when, where |"
                echo "|---|---|---|---|---|---|---|---|"
                sort "$rows"
        } >"$table.new"
        mv "$table.new" "$table"
        rm -f "$rows"
        exec {lock}>&-
}
export -f run_one record_row
hz=$(getconf CLK_TCK)
table=$src/tests/fuzz/LONG-RUNS.md
machine="$(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), kernel $(uname -r)"
export out src runs seconds timeout hz table machine

printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one {}'

cat "$table"
