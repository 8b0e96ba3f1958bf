#!/usr/bin/env bash
# The compiler- and analyzer-side checks of CI, each failing CI on any finding:
#   1. clang-format 14 with the checked-in .clang-format over every C file (docs/architecture.md
#      "House style"), first, as it takes seconds: a file the formatter would change fails, with the diff;
#   2. a release build of the daemon as the packages ship it, -O2 -D_FORTIFY_SOURCE=3, with -Werror;
#   3. scan-build (clang's static analyzer) with --status-bugs over the daemon and its library, a
#      clang -Werror build at the same time;
#   4. clang-tidy (bugprone checks) with the checked-in .clang-tidy over every agent/ source;
#   5. agent/check-bool-args.py (libclang): a literal true/false for a bool parameter names it,
#      foo(x, /* force= */ true), and every /* name= */ names the parameter it stands before.
# The analyzer runs once (scan-build), not again inside clang-tidy. unix.Malloc and
# deadcode.DeadStores are off: clang 14 does not model __attribute__((cleanup)), so every _cleanup_
# variable reads as a leak; LeakSanitizer and valgrind check leaks for real in CI. The tests are not
# built here: they are built and run with -Werror by the gate.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
missing=()
for p in clang clang-tools-14 clang-tidy-14 clang-format-14 python3-clang-14; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
        apt-get install -y --no-install-recommends "${missing[@]}"
fi
[ "${1:-}" != --deps-only ] || exit 0   # CI's set-up stage: install only
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "== clang-format =="
git ls-files -z 'agent/*.[ch]' 'include/*.h' 'tests/*.[ch]' >"$out/c-files"
if ! xargs -0 clang-format-14 --dry-run --Werror <"$out/c-files" >"$out/format.log" 2>&1; then
        head -60 "$out/format.log"
        echo "clang-format: files above differ from .clang-format (fix: git ls-files -z 'agent/*.[ch]'" \
             "'include/*.h' 'tests/*.[ch]' | xargs -0 clang-format-14 -i)"
        exit 1
fi
echo "clang-format: $(tr -cd '\0' <"$out/c-files" | wc -c) files as .clang-format says"

# The tracker is not in the repository: code cites the docs/ section or says the reason.
echo "== no tracker references in agent/ and include/ =="
if git grep -n -i -E '\bissues? [0-9]+' -- agent include; then
        echo "the lines above cite an issue number: cite docs/<file>.md §N or say the reason instead"
        exit 1
fi

echo "== release build: -O2 -D_FORTIFY_SOURCE=3 -Werror =="
CFLAGS="-O2 -D_FORTIFY_SOURCE=3" meson setup "$out/fortify" --buildtype=plain -Dwerror=true >/dev/null
ninja -C "$out/fortify" inplace-agent >/dev/null

echo "== scan-build --status-bugs =="
CC=clang scan-build-14 meson setup "$out/scan" -Dwerror=true >/dev/null
scan-build-14 --status-bugs -disable-checker unix.Malloc -disable-checker deadcode.DeadStores -o "$out/scan-report" ninja -C "$out/scan" inplace-agent >"$out/scan.log" 2>&1 ||
        { grep -E 'warning:|bugs? found|scan-build:' "$out/scan.log" | tail -40; exit 1; }
grep -E 'scan-build: (No bugs found|[0-9]+ bugs? found)' "$out/scan.log" || true

echo "== clang-tidy =="
CC=clang meson setup "$out/tidy" >/dev/null
run-clang-tidy-14 -quiet -p "$out/tidy" "$(pwd)/agent/" >"$out/tidy.log" 2>&1 || true
if grep -E '(warning|error): .*\[[a-z]' "$out/tidy.log" | grep -v '^Suppressed'; then
        echo "clang-tidy: findings above"
        exit 1
fi
echo "clang-tidy: no findings"

echo "== named flag arguments =="
python3 agent/check-bool-args.py "$out/tidy" agent/ include/ tests/unit/ tests/helpers/
