#!/usr/bin/env bash
# CI's set-up and gate stages in a bare Debian 12 container (README, "How long each stage takes"):
# mmdebstrap makes a minbase root (git and ca-certificates only), systemd-nspawn runs the stages in it
# from a fresh clone of this checkout's HEAD, so `apt-get` fetches every package CI needs. The later
# stages are not run: the machine tier's own systemd-nspawn does not nest in the container.
# Usage (root): .ci/bare-container.sh [ROOT]   ROOT defaults to a temporary directory, removed after.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
root=${1:-$(mktemp -d /var/tmp/inplace-agent-bare.XXXXXX)}
[ -n "${1:-}" ] || trap 'rm -rf "$root"' EXIT
mirror=$(apt-get indextargets --format '$(REPO_URI)' 'Identifier: Packages' 2>/dev/null | head -1)
[ -d "$root/usr" ] || mmdebstrap --variant=minbase --include=git,ca-certificates bookworm "$root" "${mirror:-http://deb.debian.org/debian}"
rm -rf "$root/src"
git clone -q --no-hardlinks "$src" "$root/src"
cat >"$root/src/.ci-bare-stages" <<'EOS'
set -euo pipefail
cd /src
export DEBIAN_FRONTEND=noninteractive
t=$SECONDS
apt-get update >/dev/null
apt-get install -y --no-install-recommends sudo git ca-certificates >/dev/null
bash tests/install-deps.sh >/tmp/deps.log 2>&1 || { tail -30 /tmp/deps.log; exit 1; }
bash .ci/static-checks.sh --deps-only >/dev/null
bash .ci/packages.sh --deps-only >/dev/null
echo "== set-up: $((SECONDS - t)) s =="
t=$SECONDS
meson setup build -Dwerror=true >/dev/null
ninja -C build >/dev/null
meson test -C build --num-processes 2 --suite unit --suite fuzz
echo "== gate: $((SECONDS - t)) s =="
EOS
# No systemd runs this host as PID 1: --keep-unit (nspawn cannot ask for a scope), not registered.
systemd-nspawn -q -D "$root" --register=no --keep-unit --link-journal=no --timezone=off --as-pid2 \
        bash /src/.ci-bare-stages
