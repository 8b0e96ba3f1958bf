#!/usr/bin/env bash
# Installs every package needed to build inplace-agent and run its tests and demo on Debian 12.
# Idempotent: does nothing when everything is present. Needs root (or sudo).
set -euo pipefail

packages=(
        # build
        meson ninja-build pkg-config gcc clang
        libsystemd-dev libcurl4-openssl-dev libjansson-dev libarchive-dev libyaml-dev libssl-dev
        libcmocka-dev libclang-rt-14-dev
        # tests: real systemd user manager, private bus, registry, TLS tooling
        systemd dbus dbus-user-session util-linux docker-registry openssl python3 curl
        zstd apache2-utils valgrind strace
        # the sandbox's stand-in containerd answers the Version call (gRPC over HTTP/2) with it
        python3-h2
        # the machine tier (tests/machine): the .deb built and installed with apt into a Debian 12
        # image made by mmdebstrap (debootstrap where it is missing), booted under systemd-nspawn
        mmdebstrap debootstrap systemd-container build-essential debhelper dpkg-dev
        # benchmarks (bench/run): ISA-L inflate, GNU time for peak RSS, the skopeo+umoci baseline
        libisal-dev time skopeo umoci
)

missing=()
for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# kubectl drives the API-server emulator in the faithfulness test; Debian ships it as kubernetes-client.
command -v kubectl >/dev/null 2>&1 || missing+=(kubernetes-client)

if [ ${#missing[@]} -gt 0 ]; then
        SUDO=""
        [ "$(id -u)" -eq 0 ] || SUDO=sudo
        echo "Installing: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        $SUDO apt-get update
        $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
