#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# Builds the .deb from the current tree: a clean copy (.ci/copy-tree.sh) with packaging/debian as
# debian/, then `dpkg-buildpackage -us -uc -b`. The one way the package is built, for
# .ci/packages.sh and the machine tier (tests/machine/).
#
# Usage: .ci/build-deb.sh OUTDIR      (OUTDIR receives inplace-agent_*.deb and the build log;
#                                      the path of the .deb is the last line printed)
# DEB_BUILD_OPTIONS is passed on (the machine tier builds with "nocheck": no unit tests compiled
# or run). Needs debhelper and the Build-Depends of packaging/debian/control.
set -euo pipefail

srcdir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
outdir=$1
version=$(dpkg-parsechangelog -l "$srcdir/packaging/debian/changelog" -S Version)
upstream=${version%-*}

work=$(mktemp -d /tmp/inplace-agent-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT
tree="$work/inplace-agent-$upstream"
bash "$srcdir/.ci/copy-tree.sh" "$srcdir" "$tree"
cp -a "$srcdir/packaging/debian" "$tree/debian"
mkdir -p "$outdir"
if ! (cd "$tree" && dpkg-buildpackage -us -uc -b) >"$outdir/deb-build.log" 2>&1; then
        tail -n 60 "$outdir/deb-build.log" >&2
        echo "build-deb.sh: dpkg-buildpackage failed (log: $outdir/deb-build.log)" >&2
        exit 1
fi
deb=$(ls "$work"/inplace-agent_*.deb)
cp "$deb" "$outdir/"
echo "$outdir/$(basename "$deb")"
