# SPDX-License-Identifier: Apache-2.0
"""What every integration test (tests/integration/test_*.py) and every machine-tier test (tests/machine/test_*.py)
shares: the import path, the skip when a prerequisite is missing, the module's fixture (one sandbox, one
emulator or one machine-tier Harness for all its tests), the diagnostics of a failure and the runner. Each test
is a unittest module, run by meson as a script:

    from lib import itest                   # first: puts lib/ on sys.path for the imports below
    import sandbox

    setUpModule, tearDownModule = itest.sandbox_fixture(globals(), versions=("1.31.4",))   # global SB

    class Thing(unittest.TestCase):
        def test_1_first(self): ...         # unittest runs a class's tests in alphabetical order:
        def test_2_then(self): ...          # where the order matters, the names number them

    if __name__ == "__main__":
        itest.main(missing=sandbox.missing_prerequisites())

A machine-tier test puts tests/machine/lib on sys.path and imports `machine` or `harness` (either puts this
folder there too), then `itest`; a scenario module's tests share one Harness, the module's H
(harness.module_fixture, built on module_fixture()); each ends with
`itest.main(missing=machine.missing_prerequisites())`.

main() exits 0 when every test passed, 1 when one failed (or none ran) and 77, which meson counts as
skipped, when a prerequisite is missing or every test skipped itself. A failing test is followed by the
tails of the agent's and the kubelet's logs of the test's `sb`, else by what the module's fixture shows (the
module's SB's log tails; the machine's journal and units for H); an agent run by lib/agentrun.py prints its
own log. `python3 test_x.py -k name` runs only the matching tests.
"""

import os
import shutil
import sys
import time
import unittest
from unittest.case import _SubTest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
SRCDIR = os.environ.get("SRCDIR") or os.path.normpath(os.path.join(HERE, "..", "..", ".."))


# ------------------------------------------------------------------------------------------ prerequisites

def unbuilt(*names):
    """What is missing of the built binaries the environment variables `names` point at (meson sets them:
    tests/integration/meson.build)."""
    return ["$%s not set or not executable" % n for n in names
            if not os.environ.get(n) or not os.access(os.environ[n], os.X_OK)]


def programs(*names):
    """The programs of `names` not on PATH."""
    return [n for n in names if shutil.which(n) is None]


# ------------------------------------------------------------------------------------------ checks

def check(cond, msg, *args):
    if not cond:
        raise AssertionError(msg % args if args else msg)


def eq(got, want, what):
    if got != want:
        raise AssertionError("%s: got %r, want %r" % (what, got, want))


# ------------------------------------------------------------------------------------------ fixtures

_FIXTURES = []          # (module globals, name, diagnose) of every module_fixture(), for the runner


def module_fixture(module_globals, name, make, stop, setup=None, diagnose=None):
    """setUpModule and tearDownModule for a module whose tests share one object: make() builds it, kept in the
    module's global `name`, then setup(obj) runs; stop(obj, failed) ends it after the module's tests, or at
    once when setup fails (tearDownModule does not run then). diagnose(obj) shows what to look at after each
    failing test while the object is up (the runner calls it)."""
    _FIXTURES.append((module_globals, name, diagnose))

    def set_up():
        obj = module_globals[name] = make()
        try:
            if setup:
                setup(obj)
        except BaseException:
            module_globals[name] = None
            stop(obj, failed=True)
            raise

    def tear_down():
        obj = module_globals.get(name)
        if obj is not None:
            stop(obj, failed=False)
    return set_up, tear_down


def sandbox_fixture(module_globals, factory=None, setup=None, **kw):
    """For a module whose tests share one Sandbox (lib/sandbox.py; `factory`, a subclass, makes it), kept
    in the module's global SB: `setUpModule, tearDownModule = itest.sandbox_fixture(globals(),
    setup=prepare, versions=("1.31.4",))`. prepare(sb) runs once it is up, with SB already set."""
    return module_fixture(module_globals, "SB", lambda: start_sandbox(factory, **kw), stop_sandbox, setup=setup,
                          diagnose=diagnostics)


def start_sandbox(factory=None, **kw):
    """A started Sandbox (made by `factory`, a subclass, if given); stopped again when it cannot start."""
    import sandbox
    sb = (factory or sandbox.Sandbox)(**kw)
    try:
        sb.start()
    except BaseException:
        stop_sandbox(sb, failed=True)
        raise
    return sb


def stop_sandbox(sb, failed=False):
    """Stop the Sandbox (after showing its logs when it `failed` to come up) and name what it left behind."""
    if failed:
        diagnostics(sb)
    left = sb.stop()
    if left:
        print("leftover processes: %s" % left, file=sys.stderr)


def emulator_fixture(module_globals, setup=None, **kw):
    """For a module whose tests share one API-server emulator (kubeemu.start(**kw)), kept in the module's
    global EMU; setup(emu) runs once it is up. Its tests are EmulatorTests."""
    import kubeemu
    return module_fixture(module_globals, "EMU", lambda: kubeemu.start(**kw), lambda emu, failed: emu.stop(),
                          setup=setup)


class EmulatorTest(unittest.TestCase):
    """A test against the module's emulator (emulator_fixture), self.emu, which is back to how it started
    before each test: no faults, its start configuration, serving normally with the good certificate."""

    def setUp(self):
        self.emu = sys.modules[type(self).__module__].EMU
        self.emu.reset()


# ------------------------------------------------------------------------------------------ the runner

def diagnostics(sb):
    """The tails of a sandbox's agent and kubelet logs, for a failure."""
    for unit, size in (("inplace-agent.service", 6000), ("kubelet.service", 2000)):
        try:
            text = sb.unit_log(unit)[-size:]
        except Exception as e:  # noqa: BLE001 - diagnostics never hide the failure itself
            text = "(unreadable: %s)" % e
        if text:
            print("---- %s log (tail) ----\n%s" % (unit, text), file=sys.stderr, flush=True)


class _Result(unittest.TextTestResult):
    """Each test's time after its verdict; after a failure the logs of the test's own sandbox (its `sb`), or
    what the module's fixtures show (module_fixture's diagnose)."""

    _t0 = None

    def startTest(self, test):
        self._t0 = time.monotonic()
        super().startTest(test)

    def _write_status(self, test, status):
        if self._t0 is not None and isinstance(test, unittest.TestCase) and not isinstance(test, _SubTest):
            status += " (%.1fs)" % (time.monotonic() - self._t0)
        super()._write_status(test, status)

    def _failed(self, test):
        sb = getattr(test, "sb", None)
        if sb is not None:
            diagnostics(sb)
            return
        for module_globals, name, diagnose in _FIXTURES:
            obj = module_globals.get(name)
            if diagnose and obj is not None:
                diagnose(obj)

    def addError(self, test, err):
        super().addError(test, err)
        self._failed(test)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._failed(test)


class _Runner(unittest.TextTestRunner):
    resultclass = _Result


def main(missing=(), failfast=False):
    """Run the __main__ module's tests; exit 77 without running them when anything is `missing` (a list of
    what, e.g. sandbox.missing_prerequisites() + itest.unbuilt("PULL"))."""
    if missing:
        print("SKIP: missing prerequisites: " + ", ".join(missing), file=sys.stderr)
        sys.exit(77)
    r = unittest.main(module="__main__", testRunner=_Runner, verbosity=2, failfast=failfast, exit=False).result
    if not r.wasSuccessful():
        sys.exit(1)
    if r.testsRun == 0 and not r.skipped:
        print("FAIL: no test ran", file=sys.stderr)
        sys.exit(1)
    sys.exit(77 if r.skipped and r.testsRun <= len(r.skipped) else 0)
