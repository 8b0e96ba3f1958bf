#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# Builds the .deb and the .rpm from the current tree and checks them:
#   - exact file lists, conffile / %config(noreplace) marking, maintainer scripts present
#   - lintian on the .deb (fails on errors; warnings are printed)
#   - installs the .deb on this machine (dpkg -i; a CI/dev machine), checks that the unit is enabled,
#     the man pages and the journal catalog are found, runs `systemd-analyze verify` on the
#     installed unit, and purges the package again
#   - `systemd-analyze security --offline=true` exposure of the installed unit, fails above 3.5
#
# Usage: .ci/packages.sh [OUTDIR]      (OUTDIR receives the .deb and .rpm; default: none kept)
#        .ci/packages.sh --deps-only  (installs what the checks need, then stops: CI's set-up stage)
# Needs root (apt-get, dpkg -i). KEEP_WORKDIR=1 keeps the temporary build directory;
# MAX_EXPOSURE overrides the 3.5 limit (e.g. to see the check fail).
set -euo pipefail

MAX_EXPOSURE=${MAX_EXPOSURE:-3.5}
srcdir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
outdir=${1:-}

say() { printf '\n=== %s\n' "$*"; }
die() { printf 'packages.sh: FAILED: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (apt-get, dpkg -i)"

# --- Tools and build dependencies ------------------------------------------------------------
tools=(build-essential debhelper dpkg-dev lintian rpm rpmlint file man-db python3
       meson ninja-build pkg-config systemd
       libsystemd-dev libcurl4-openssl-dev libjansson-dev libarchive-dev libisal-dev libyaml-dev libssl-dev
       libcmocka-dev)
missing=()
for p in "${tools[@]}"; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
        say "apt-get install ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y --no-install-recommends "${missing[@]}" ||
                { apt-get update && apt-get install -y --no-install-recommends "${missing[@]}"; }
fi
[ "$outdir" != --deps-only ] || exit 0

work=$(mktemp -d /tmp/inplace-agent-packages.XXXXXX)
installed=0
runtime_mask=""
cleanup() {
        if [ "$installed" = 1 ]; then
                dpkg --purge inplace-agent >/dev/null 2>&1 || true
        fi
        if [ -n "$runtime_mask" ]; then
                rm -f "$runtime_mask"
                systemctl daemon-reload >/dev/null 2>&1 || true
        fi
        if [ "${KEEP_WORKDIR:-0}" = 1 ]; then
                echo "work directory kept: $work"
        else
                rm -rf "$work"
        fi
}
trap cleanup EXIT

# --- Version: meson.build is the source of truth ---------------------------------------------
version=$(meson introspect --projectinfo "$srcdir/meson.build" |
          python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
deb_version=$(dpkg-parsechangelog -l "$srcdir/packaging/debian/changelog" -S Version)
rpm_version=$(sed -n 's/^Version:[[:space:]]*//p' "$srcdir/packaging/rpm/inplace-agent.spec")
[ "${deb_version%-*}" = "$version" ] || die "debian/changelog version $deb_version does not match meson $version"
[ "$rpm_version" = "$version" ] || die "inplace-agent.spec Version $rpm_version does not match meson $version"
echo "version $version (deb $deb_version)"

# --- A clean copy of the tree (for the .rpm's source tarball; build-deb.sh makes its own) ------
tree="$work/src/inplace-agent-$version"
bash "$srcdir/.ci/copy-tree.sh" "$srcdir" "$tree"

unitdir=$(pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null || true)
unitdir=${unitdir:-/usr/lib/systemd/system}

compare_list() {        # name expected-file actual-file
        if ! diff -u "$2" "$3"; then
                die "$1 file list differs from the expected list (- expected, + actual)"
        fi
        echo "$1 file list: OK ($(wc -l <"$3") files)"
}

# --- .deb --------------------------------------------------------------------------------------
say "dpkg-buildpackage -us -uc -b"
deb=$(bash "$srcdir/.ci/build-deb.sh" "$work/deb" | tail -n 1) || die "dpkg-buildpackage"
echo "built $(basename "$deb")"

sort >"$work/deb-expected" <<EOF
/etc/inplace-agent/config.yaml
$unitdir/gardener-node-agent.service.d/50-inplace-agent-replaced.conf
$unitdir/inplace-agent.service
/usr/lib/systemd/catalog/inplace-agent.catalog
/usr/sbin/inplace-agent
/usr/share/doc/inplace-agent/changelog.Debian.gz
/usr/share/doc/inplace-agent/copyright
/usr/share/doc/inplace-agent/examples/os-update-unconfined.conf
/usr/share/lintian/overrides/inplace-agent
/usr/share/man/man5/inplace-agent.yaml.5.gz
/usr/share/man/man8/inplace-agent.8.gz
EOF
dpkg-deb --fsys-tarfile "$deb" | tar -t | sed 's|^\./|/|' | grep -v '/$' | sort >"$work/deb-actual"
compare_list deb "$work/deb-expected" "$work/deb-actual"

[ "$(dpkg-deb -I "$deb" conffiles)" = "/etc/inplace-agent/config.yaml" ] ||
        die "deb conffiles is not exactly /etc/inplace-agent/config.yaml"
for s in postinst prerm postrm; do
        dpkg-deb -I "$deb" "$s" >/dev/null 2>&1 || die "deb has no $s maintainer script"
done
dpkg-deb -I "$deb" postinst | grep -q 'deb-systemd-helper' || die "postinst does not enable the unit"
echo "deb conffiles and maintainer scripts: OK"
dpkg-deb -I "$deb" | sed -n '/Package:/,$p'

say "lintian"
lintian --fail-on error --display-info "$deb" | tee "$work/lintian.log" || die "lintian reported errors"
echo "lintian: $(grep -c '^E:' "$work/lintian.log" || true) errors, $(grep -c '^W:' "$work/lintian.log" || true) warnings, $(grep -c '^I:' "$work/lintian.log" || true) info"

# --- .rpm --------------------------------------------------------------------------------------
say "rpmbuild --nodeps -bb"
rpmtop="$work/rpm"
mkdir -p "$rpmtop"/{SOURCES,SPECS,BUILD,RPMS,SRPMS}
tar -C "$work/src" -czf "$rpmtop/SOURCES/inplace-agent-$version.tar.gz" "inplace-agent-$version"
cp "$srcdir/packaging/rpm/inplace-agent.spec" "$rpmtop/SPECS/"
# Debian's rpm runs brp-compress (a bash script) with /bin/sh, which leaves man pages uncompressed;
# run it with bash so the package looks as it does on Fedora.
rpmbuild --nodeps -bb --define "_topdir $rpmtop" --define "packager inplace-agent CI" \
        --define '__brp_compress bash %{_rpmconfigdir}/brp-compress %{?_prefix}' \
        "$rpmtop/SPECS/inplace-agent.spec" \
        >"$work/rpm-build.log" 2>&1 || { tail -n 60 "$work/rpm-build.log"; die "rpmbuild"; }
rpmfile=$(find "$rpmtop/RPMS" -name "inplace-agent-$version-*.rpm" ! -name '*debug*' | head -n 1)
[ -n "$rpmfile" ] || die "rpmbuild produced no package"
echo "built $(basename "$rpmfile")"

licensedir=$(rpm --eval '%{_defaultlicensedir}')
sort >"$work/rpm-expected" <<EOF
/etc/inplace-agent
/etc/inplace-agent/config.yaml
/usr/lib/systemd/catalog/inplace-agent.catalog
/usr/lib/systemd/system/gardener-node-agent.service.d
/usr/lib/systemd/system/gardener-node-agent.service.d/50-inplace-agent-replaced.conf
/usr/lib/systemd/system/inplace-agent.service
/usr/sbin/inplace-agent
/usr/share/doc/inplace-agent/examples/os-update-unconfined.conf
$licensedir/inplace-agent
$licensedir/inplace-agent/LICENSE
/usr/share/man/man5/inplace-agent.yaml.5.gz
/usr/share/man/man8/inplace-agent.8.gz
EOF
# /usr/lib/.build-id/ links are generated by rpmbuild from the binary's build ID (as on Fedora).
rpm -qlp "$rpmfile" 2>/dev/null | grep -v '^/usr/lib/\.build-id' | sort >"$work/rpm-actual"
compare_list rpm "$work/rpm-expected" "$work/rpm-actual"

rpm -qp --qf '[%{FILENAMES} %{FILEFLAGS:fflags}\n]' "$rpmfile" 2>/dev/null |
        grep -qx '/etc/inplace-agent/config.yaml cn' || die "config.yaml is not %config(noreplace)"
rpm -qp --scripts "$rpmfile" 2>/dev/null >"$work/rpm-scripts"
grep -q 'preset' "$work/rpm-scripts" || die "rpm %post does not preset the unit"
grep -q 'disable' "$work/rpm-scripts" || die "rpm %preun does not disable the unit"
grep -q 'try-restart\|mark-restart' "$work/rpm-scripts" || die "rpm %postun does not restart the unit"
echo "rpm %config(noreplace) and scriptlets: OK"
rpm -qpR "$rpmfile" 2>/dev/null | sed 's/^/  requires: /'

say "rpmlint"
# brp-strip needs file(1) to find the ELF files; without it the binary ships unstripped.
rpmlint -c "$srcdir/packaging/rpm/rpmlint.toml" "$rpmfile" | tee "$work/rpmlint.log" ||
        die "rpmlint reported errors"
grep -q ' 0 errors, 0 warnings' "$work/rpmlint.log" || die "rpmlint reported warnings"

# --- Install the .deb and check the installed unit ---------------------------------------------
say "dpkg -i"
# On a machine where systemd runs, postinst would start the agent (which has no kubeconfig here);
# a runtime mask, removed again on exit, keeps it from starting. Never create /run/systemd/system
# itself: maintainer scripts take its existence to mean "systemd is running".
if [ -d /run/systemd/system ] && [ ! -e /run/systemd/system/inplace-agent.service ]; then
        runtime_mask=/run/systemd/system/inplace-agent.service
        ln -s /dev/null "$runtime_mask"
        systemctl daemon-reload >/dev/null 2>&1 || true
fi
installed=1
dpkg -i "$deb" >/dev/null
# Twice: the second run takes the upgrade path of the maintainer scripts.
dpkg -i "$deb" >/dev/null
unit="$unitdir/inplace-agent.service"
[ -x /usr/sbin/inplace-agent ] || die "/usr/sbin/inplace-agent missing after install"
[ -L /etc/systemd/system/multi-user.target.wants/inplace-agent.service ] ||
        die "unit not enabled (no multi-user.target.wants symlink)"
/usr/sbin/inplace-agent --version
/usr/sbin/inplace-agent check-config >/dev/null || die "the packaged default config does not validate"
man -w inplace-agent >/dev/null && man -w 5 inplace-agent.yaml >/dev/null || die "man pages not found by man"
journalctl --update-catalog
mapfile -t ids < <(sed -n 's/^#define MESSAGE_ID_[A-Z0-9_]*[[:space:]]*"\([0-9a-f]\{32\}\)".*/\1/p' "$srcdir/include/update/catalog-ids.h")
[ ${#ids[@]} -gt 0 ] || die "no MESSAGE_IDs found in include/update/catalog-ids.h"
journalctl --list-catalog "${ids[@]}" >"$work/catalog.log" || die "journal catalog entries missing after install"
[ "$(grep -c ' inplace-agent: ' "$work/catalog.log")" = ${#ids[@]} ] || die "not every MESSAGE_ID is in the installed catalog"
echo "installed: binary, enabled unit, man pages, catalog: OK"

say "systemd-analyze verify $unit"
SYSTEMD_LOG_LEVEL=notice systemd-analyze verify "$unit" || die "systemd-analyze verify"
echo "verify: OK (exit 0)"

say "systemd-analyze security --offline=true $unit"
systemd-analyze security --offline=true "$unit" >"$work/security.log" 2>&1 || true
exposure=$(sed -n 's/.*Overall exposure level for inplace-agent.service: \([0-9.]*\).*/\1/p' "$work/security.log")
[ -n "$exposure" ] || { cat "$work/security.log"; die "no exposure level in systemd-analyze output"; }
grep '✗' "$work/security.log" || true
echo "exposure: $exposure (limit $MAX_EXPOSURE)"
awk -v e="$exposure" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(e <= m) }' ||
        die "exposure $exposure is above $MAX_EXPOSURE"

say "dpkg --purge"
dpkg --purge inplace-agent >/dev/null
installed=0
[ ! -e /etc/inplace-agent/config.yaml ] || die "purge left /etc/inplace-agent/config.yaml"
[ ! -e /etc/systemd/system/multi-user.target.wants/inplace-agent.service ] || die "purge left the unit enabled"
echo "purge: OK"

if [ -n "$outdir" ]; then
        mkdir -p "$outdir"
        cp "$deb" "$rpmfile" "$outdir"/
        echo "packages copied to $outdir"
fi
say "packages: all checks passed (exposure $exposure)"
