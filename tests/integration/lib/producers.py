# SPDX-License-Identifier: Apache-2.0
"""The paths Gardener's producers make the agent write (tests/data/producer-paths.tsv) and a reader
of inplace-agent.service's sandbox that says whether a directory is writable under it. Used by
tests/integration/test_unit_sandbox.py (the unit file, parsed) and tests/machine/test_sandbox.py
(the same paths in a booted image). Stdlib only."""

import os

SRCDIR = os.environ.get("SRCDIR") or os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                   "..", "..", ".."))
UNIT = os.path.join(SRCDIR, "units", "inplace-agent.service")
PATHS = os.path.join(SRCDIR, "tests", "data", "producer-paths.tsv")
KINDS = ("file", "unit", "cri", "token", "os-update")


def producer_paths():
    """[(path, kind, producer, source)] of the data file."""
    rows = []
    with open(PATHS) as f:
        for n, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            cols = line.rstrip("\n").split("\t")
            if len(cols) != 4 or not cols[0].startswith("/") or cols[1] not in KINDS:
                raise ValueError("%s:%d: not 'path<TAB>kind<TAB>producer<TAB>source' with a known kind: %r"
                                 % (PATHS, n, line))
            rows.append(tuple(cols))
    return rows


def unit_settings(path=UNIT):
    """[Service] assignments as {key: [value, ...]} in order (an empty assignment resets the list)."""
    out, section = {}, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("["):
                section = line
                continue
            if section != "[Service]" or "=" not in line:
                continue
            k, _, v = line.partition("=")
            if v == "":
                out[k] = []
            else:
                out.setdefault(k, []).append(v)
    return out


def path_list(settings, key):
    return [p.lstrip("-+") for v in settings.get(key, []) for p in v.split()]


def below(path, top):
    return path == top or path.startswith(top.rstrip("/") + "/")


def directory_written(path):
    """The directory a write of `path` renames into: the parent, cut before a <placeholder>."""
    parts = path.split("/")
    for i, p in enumerate(parts):
        if "<" in p:
            return "/".join(parts[:i]) or "/"
    return os.path.dirname(path)


def writable(settings, directory):
    """Why `directory` is or is not writable under the unit: (bool, reason)."""
    if settings.get("ProtectSystem", ["no"])[-1] != "strict":
        return False, "ProtectSystem= is not strict: this check assumes it"
    rw = path_list(settings, "ReadWritePaths") + ["/var/lib/" + d for d in path_list(settings, "StateDirectory")]
    ro = path_list(settings, "ReadOnlyPaths") + path_list(settings, "InaccessiblePaths")
    if settings.get("ProtectHome", ["no"])[-1] in ("yes", "read-only", "tmpfs"):
        ro += ["/home", "/root", "/run/user"]
    grant = max((p for p in rw if below(directory, p)), key=len, default=None)
    deny = max((p for p in ro if below(directory, p)), key=len, default=None)
    if grant is None:
        return False, "no ReadWritePaths= covers it"
    if deny is not None and len(deny) >= len(grant):
        return False, "%s hides or protects it" % deny
    return True, "ReadWritePaths=%s" % grant
