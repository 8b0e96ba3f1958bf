#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The machine tier's preparation, first in its suite so its time is its own: the cached Debian 12
image (mmdebstrap or debootstrap, built when missing), the .deb of this tree (.ci/build-deb.sh, nocheck, built
when the package's inputs changed) and the layer with the .deb installed by `apt-get install
./inplace-agent_*.deb` (tests/machine/lib/machine.py). It checks what only apt proves: the
package's Depends: were resolved and pulled from the mirror (none of them is in the image), and
the unit is enabled as installed. Exits 77 where the tier cannot run."""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
import machine  # noqa: E402   (first: puts tests/integration/lib on sys.path)
import itest  # noqa: E402

# Libraries the agent links that a Gardener image need not have: apt must have installed them.
DEPENDS = ("libcurl4", "libjansson4", "libarchive13", "libyaml-0-2", "libisal2")


def installed_packages(root):
    """Package names dpkg's status file marks installed below root."""
    names, name = set(), None
    with open(os.path.join(root, "var/lib/dpkg/status")) as f:
        for line in f:
            if line.startswith("Package: "):
                name = line.split()[1]
            elif line.startswith("Status: ") and line.rstrip().endswith(" installed"):
                names.add(name)
    return names


class Prepare(unittest.TestCase):
    def test_apt_installs_the_package_and_its_depends(self):
        layers = machine.prepare(log=print)
        print("prepare: %s" % ", ".join("%s %.1fs" % kv for kv in layers.timings.items()))
        base = installed_packages(layers.image_root)
        after = installed_packages(layers.installed)
        missing = [p for p in ("inplace-agent",) + DEPENDS if p not in after]
        preinstalled = [p for p in DEPENDS if p in base]
        self.assertEqual(missing, [], "not installed by apt-get: %s" % ", ".join(missing))
        self.assertEqual(preinstalled, [], "the image already holds %s: apt would not prove the package's Depends:"
                         % ", ".join(preinstalled))
        print("apt installed inplace-agent with %s from its Depends: (none in the image)" % ", ".join(DEPENDS))


if __name__ == "__main__":
    itest.main(missing=machine.missing_prerequisites())
