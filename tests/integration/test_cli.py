#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""CLI contract (docs/contract.md §2, §3): --version, --help, usage errors, check-config with drop-ins and every
kind of configuration error, status on an empty and on a populated state directory."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

from lib import itest

AGENT = os.environ.get("AGENT", "")


def run(*args, env=None):
    e = dict(os.environ)
    for k in ("NODE_NAME", "KUBECONFIG"):
        e.pop(k, None)
    e.update(env or {})
    return subprocess.run([AGENT] + list(args), capture_output=True, text=True, timeout=30, env=e)


VALID = """\
nodeName: node-a
kubeconfig: /nonexistent/kubeconfig
kubelet:
  healthTimeout: 2m
  keepVersions: 3
systemd:
  jobTimeout: 30s
"""


class Cli(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="test-cli-")
        self.config = os.path.join(self.dir, "config.yaml")
        self.dropins = os.path.join(self.dir, "config.d")
        os.mkdir(self.dropins)
        self.write(self.config, VALID)
        self.write(os.path.join(self.dropins, "10-a.yaml"),
                   "kubelet:\n  keepVersions: 4\nrestart:\n  selfUnit: my-agent\n")
        self.write(os.path.join(self.dropins, "20-b.yaml"),
                   "kubelet:\n  keepVersions: 5\nsystemd:\n  jobTimeout: 1m30s\n")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    @staticmethod
    def write(path, text):
        with open(path, "w") as f:
            f.write(text)

    def check_config(self):
        return run("check-config", "--config", self.config)

    # ---- generic CLI

    def test_version(self):
        r = run("--version")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^inplace-agent \d+\.\d+\.\d+")

    def test_help(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        for word in ("Usage:", "status", "check-config", "--config", "--node-name", "--kubeconfig",
                     "--state-dir", "--log-level", "--json", "--version"):
            self.assertIn(word, r.stdout)

    def test_unknown_verb(self):
        r = run("frobnicate")
        self.assertEqual(r.returncode, 2)
        self.assertIn("frobnicate", r.stderr)

    def test_unknown_option(self):
        self.assertEqual(run("--no-such-option").returncode, 2)

    def test_json_only_with_status(self):
        self.assertEqual(run("check-config", "--json", "--config", self.config).returncode, 2)

    # ---- check-config

    def test_check_config_merges_dropins_in_order(self):
        r = self.check_config()
        self.assertEqual(r.returncode, 0, r.stderr)
        cfg = json.loads(r.stdout)
        self.assertEqual(cfg["nodeName"], "node-a")
        self.assertEqual(cfg["kubelet"]["keepVersions"], 5)          # 20-b beats 10-a beats main
        self.assertEqual(cfg["kubelet"]["healthTimeout"], "2m")      # main file, untouched by drop-ins
        self.assertEqual(cfg["restart"]["selfUnit"], "my-agent.service")
        self.assertIn(cfg["systemd"]["jobTimeout"], ("1m30s", "90s"))
        self.assertEqual(cfg["lease"]["name"], "gardener-node-agent-node-a")
        self.assertEqual(cfg["kubelet"]["unit"], "kubelet.service")  # defaults are filled in

    def test_check_config_missing_explicit_file(self):
        r = run("check-config", "--config", os.path.join(self.dir, "nope.yaml"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("nope.yaml", r.stderr)

    def assert_config_error(self, text, needles, name="30-bad.yaml"):
        path = os.path.join(self.dropins, name)
        self.write(path, text)
        r = self.check_config()
        self.assertEqual(r.returncode, 2, "accepted %r: %s" % (text, r.stdout))
        self.assertIn(path, r.stderr)
        for n in needles:
            self.assertIn(n, r.stderr)
        self.assertEqual(r.stdout, "")

    def test_unknown_key(self):
        self.assert_config_error("kubelet:\n  bogusKey: 1\n", ["kubelet.bogusKey", "unknown key"])

    def test_unknown_top_level_key(self):
        self.assert_config_error("bogus: 1\n", ["bogus", "unknown key"])

    def test_negative_duration(self):
        self.assert_config_error("kubelet:\n  healthTimeout: -5s\n", ["kubelet.healthTimeout", "-5s"])

    def test_garbage_duration(self):
        self.assert_config_error("kubelet:\n  healthTimeout: banana\n", ["kubelet.healthTimeout", "banana"])

    def test_keep_versions_zero(self):
        self.assert_config_error("kubelet:\n  keepVersions: 0\n", ["kubelet.keepVersions"])

    def test_wrong_type(self):
        self.assert_config_error("lease:\n  enabled: maybe\n", ["lease.enabled"])

    def test_yaml_syntax_error(self):
        self.assert_config_error("kubelet: [unclosed\n", ["YAML"])

    def test_error_in_main_file(self):
        self.write(self.config, VALID + "systemd:\n  jobTimeout: banana\n")
        r = self.check_config()
        self.assertEqual(r.returncode, 2)
        self.assertIn(self.config, r.stderr)

    def test_unreadable_dropin(self):
        # chmod 000 does not stop root; a directory where a file is expected does.
        path = os.path.join(self.dropins, "40-dir.yaml")
        os.mkdir(path)
        r = self.check_config()
        self.assertEqual(r.returncode, 2)
        self.assertIn(path, r.stderr)

    def test_fifo_config_is_refused_not_waited_on(self):
        # A FIFO has no writer: opening it for reading would wait forever (issue 16, config file types).
        path = os.path.join(self.dropins, "50-fifo.yaml")
        os.mkfifo(path)
        r = self.check_config()
        self.assertEqual(r.returncode, 2)
        self.assertIn(path, r.stderr)
        self.assertIn("not a regular file", r.stderr)

    def test_unreadable_main_file(self):
        notdir = os.path.join(self.dir, "plainfile")
        self.write(notdir, "")
        path = os.path.join(notdir, "config.yaml")           # ENOTDIR
        r = run("check-config", "--config", path)
        self.assertEqual(r.returncode, 2)
        self.assertIn(path, r.stderr)

    def test_later_dropin_error_is_not_masked(self):
        # A broken drop-in after good ones still fails the whole configuration.
        self.assert_config_error("systemd:\n  jobTimeout: -1s\n", ["systemd.jobTimeout"], name="99-last.yaml")

    # ---- set-up failures of `run` (issue 12/16: manager_new freed the config that main freed again:
    # heap-use-after-free under ASan, SIGSEGV (139) in the release build, a crash loop under systemd)

    def run_agent(self, *extra, env=None):
        base = {"DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent/bus"}
        base.update(env or {})
        return run("run", "--config", self.config, *extra, env=base)

    def test_run_bad_kube_tuning(self):
        r = self.run_agent("--state-dir", os.path.join(self.dir, "state"),
                           env={"INPLACE_AGENT_KUBE_TUNING": "bogus=1"})
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("INPLACE_AGENT_KUBE_TUNING", r.stderr)
        self.assertIn("bogus", r.stderr)

    def test_run_state_directory_is_a_file(self):
        path = os.path.join(self.dir, "state-file")
        self.write(path, "")
        r = self.run_agent("--state-dir", path)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(path, r.stderr)
        self.assertNotIn("AddressSanitizer", r.stderr)

    def test_run_state_directory_below_a_file(self):
        path = os.path.join(self.dir, "state-file")
        self.write(path, "")
        r = self.run_agent("--state-dir", os.path.join(path, "sub"))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(os.path.join(path, "sub"), r.stderr)

    # ---- status

    def test_status_empty_state_dir(self):
        r = run("status", "--state-dir", self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(self.dir, r.stdout)
        r = run("status", "--json", "--state-dir", self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        st = json.loads(r.stdout)
        self.assertIsNone(st["transaction"])
        self.assertEqual(st["phase"], "Idle")

    def test_status_with_state(self):
        state = {"transaction": "tx-1234", "phase": "Applying", "step": "restart kubelet.service",
                 "attempt": 1}
        self.write(os.path.join(self.dir, "state.json"), json.dumps(state))
        r = run("status", "--json", "--state-dir", self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout)
        for k, v in state.items():
            self.assertEqual(got[k], v)
        r = run("status", "--state-dir", self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("tx-1234", r.stdout)
        self.assertIn("Applying", r.stdout)

    def test_status_corrupt_state(self):
        self.write(os.path.join(self.dir, "state.json"), "{not json")
        r = run("status", "--json", "--state-dir", self.dir)
        self.assertEqual(r.returncode, 1)
        self.assertIn("state.json", r.stderr)

    def test_status_rejects_config_options(self):
        self.assertEqual(run("status", "--config", self.config).returncode, 2)


if __name__ == "__main__":
    itest.main(missing=itest.unbuilt("AGENT"))
