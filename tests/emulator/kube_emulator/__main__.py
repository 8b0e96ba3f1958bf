"""``python3 -m kube_emulator ...``: the emulator's command line (cli.py)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
