#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""inplace-agent.service's sandbox against the paths Gardener's producers write
(tests/data/producer-paths.tsv, read from the producers' sources): every path's directory must be
writable under the unit (ProtectSystem=strict plus ReadWritePaths=, StateDirectory=), not hidden
by ProtectHome=, ReadOnlyPaths= or InaccessiblePaths=. Files are written as a temporary file
renamed in the same directory (an OS update command's `sed -i` too), so the directory, not only
the file, must be writable. No root needed: the unit file is parsed, not run (the machine tier
applies the same paths in a booted image: tests/machine/test_sandbox.py)."""

import unittest

from lib import itest
from producers import directory_written, producer_paths, unit_settings, writable


class UnitSandbox(unittest.TestCase):
    def test_every_producer_path_is_writable(self):
        settings = unit_settings()
        bad = []
        for path, kind, producer, source in producer_paths():
            ok, why = writable(settings, directory_written(path))
            if not ok:
                bad.append("%s (%s, %s: %s): %s is not writable: %s" % (path, kind, producer, source,
                                                                         directory_written(path), why))
        self.assertEqual(bad, [], "inplace-agent.service does not let the agent write:\n  " + "\n  ".join(bad))

    def test_the_checker_refuses(self):
        """The checker itself: what the unit does not open is reported."""
        settings = {"ProtectSystem": ["strict"], "ReadWritePaths": ["-/etc/systemd /var/lib"],
                    "ReadOnlyPaths": ["/var/lib/secret"], "ProtectHome": ["yes"]}
        self.assertTrue(writable(settings, "/etc/systemd/system")[0])
        self.assertFalse(writable(settings, "/etc")[0])
        self.assertFalse(writable(settings, "/etc/default")[0])
        self.assertFalse(writable(settings, "/var/lib/secret/x")[0])
        self.assertFalse(writable(dict(settings, ReadWritePaths=["/"]), "/root/.ssh")[0])
        self.assertEqual(directory_written("/etc/containerd/certs.d/<upstream>/hosts.toml"), "/etc/containerd/certs.d")
        self.assertEqual(directory_written("/etc/os-release"), "/etc")


if __name__ == "__main__":
    itest.main()
