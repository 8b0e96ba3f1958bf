#!/usr/bin/env python3
"""Runs the API-server emulator by path: ``python3 tests/emulator/kube_emulator.py ARGS`` is
``python3 -m kube_emulator ARGS`` (tests/integration/lib/kubeemu.py starts it so). The emulator is the package
kube_emulator/ next to this file (its __init__.py says which module owns what); a package takes precedence
over a module of the same name, so ``import kube_emulator`` always finds the package, never this file."""

import sys

from kube_emulator.cli import main

if __name__ == "__main__":
    sys.exit(main())
