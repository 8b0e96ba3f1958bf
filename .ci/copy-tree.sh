#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# Copies the source tree as a package build sees it: tracked and untracked (not ignored) files as
# they are in the work tree, without meson build directories (build*/ by convention). Outside a
# git checkout: everything but build*/ and .git.
#
# Usage: .ci/copy-tree.sh SRCDIR DESTDIR        (DESTDIR is created)
set -euo pipefail

srcdir=$1
dest=$2
mkdir -p "$dest"
if git -C "$srcdir" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        (cd "$srcdir" && git ls-files -z --cached --others --exclude-standard |
                while IFS= read -r -d '' f; do
                        case "$f" in build*/*) continue ;; esac
                        [ -e "$f" ] && printf '%s\0' "$f"
                done | tar --null -T - -cf -) | tar -xf - -C "$dest"
else
        tar -C "$srcdir" --exclude='./build*' --exclude=./.git -cf - . | tar -xf - -C "$dest"
fi
