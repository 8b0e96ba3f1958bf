#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Keeps the shipped documentation and default configuration in step with the real binary.

The source of truth is `inplace-agent check-config` (every key with its effective default) and
`inplace-agent --help` (every option):

* packaging/config.yaml validates as shipped (everything commented out), and, uncommented, names
  exactly the keys check-config prints, with exactly the default values;
* inplace-agent.yaml(5) documents exactly those keys, each with the right default;
* inplace-agent(8) documents every long option of --help and every verb, and every failure code of
  agent/core/node-update.c's table with its class (update_failure_is_retriable());
* the unit's sandbox comments explain every writable path it opens.
"""

import json
import os
import re
import subprocess
import tempfile
import unittest

from lib import itest

SRCDIR = itest.SRCDIR
AGENT = os.environ.get("AGENT", "")
CONFIG_YAML = os.path.join(SRCDIR, "packaging", "config.yaml")
MAN5 = os.path.join(SRCDIR, "packaging", "man", "inplace-agent.yaml.5")
MAN8 = os.path.join(SRCDIR, "packaging", "man", "inplace-agent.8")
NODE_UPDATE_C = os.path.join(SRCDIR, "agent", "core", "node-update.c")
OSC_DIFF_C = os.path.join(SRCDIR, "agent", "core", "osc-diff.c")
UNIT = os.path.join(SRCDIR, "units", "inplace-agent.service")
NODE = "docs-test-node"
# Documented as "" and derived at start-up; check-config prints the derived value.
DERIVED = {"nodeName": NODE, "lease.name": "gardener-node-agent-" + NODE}
UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def agent(*args):
    env = dict(os.environ, NODE_NAME=NODE)
    env.pop("KUBECONFIG", None)
    return subprocess.run([AGENT, *args], capture_output=True, text=True, timeout=30, env=env)


def flatten(obj, prefix=""):
    """Leaf key paths of check-config's JSON; registry.mirrors is a map value, not a section."""
    out = {}
    for k, v in obj.items():
        path = prefix + k
        if isinstance(v, dict) and path != "registry.mirrors":
            out.update(flatten(v, path + "."))
        else:
            out[path] = v
    return out


def uncomment(text):
    """Config lines in packaging/config.yaml are '#' directly followed by YAML ('#key:' or
    '#  key:'); prose comments are '# text'. Strip one '#' from config lines only."""
    lines = []
    for line in text.splitlines():
        if re.match(r"#(\S|  )", line) and not line.startswith("##"):
            lines.append(line[1:])
        elif line.startswith("#"):
            continue
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


def yaml_key_paths(text):
    """Key paths of a simple block-style YAML map (indentation by two spaces, no lists)."""
    paths, stack = [], []
    for line in text.splitlines():
        m = re.match(r"^( *)([A-Za-z][A-Za-z0-9]*):(.*)$", line)
        if not m or line.lstrip().startswith("#"):
            continue
        indent, key, rest = len(m.group(1)), m.group(2), m.group(3).split(" #")[0].strip()
        depth = indent // 2
        stack = stack[:depth] + [key]
        if rest != "":
            paths.append(".".join(stack))
    return paths


def duration_ms(s):
    parts = re.findall(r"(\d+)(ms|s|m|h)", s)
    if not parts or "".join(n + u for n, u in parts) != s:
        return None
    return sum(int(n) * UNITS[u] for n, u in parts)


def same_value(documented, actual):
    if isinstance(actual, bool):
        return documented == ("true" if actual else "false")
    if isinstance(actual, int):
        return documented == str(actual)
    if isinstance(actual, dict):
        return documented == json.dumps(actual)
    if isinstance(actual, list):  # documented as a YAML flow list: [a, b]
        return documented == "[" + ", ".join(actual) + "]"
    if duration_ms(documented) is not None and duration_ms(actual) is not None:
        return duration_ms(documented) == duration_ms(actual)
    return documented == actual


def man_unescape(s):
    return s.replace("\\-", "-").replace("\\(dq", '"').replace("\\(aq", "'")


def failure_codes():
    """{code string: retriable (bool, or None when it depends on the message)} from node-update.c:
    the failure_names table and the cases of update_failure_is_retriable()."""
    text = read(NODE_UPDATE_C)
    table = re.search(r"failure_names\[[^]]*\] = \{(.*?)\n\};", text, re.S).group(1)
    codes = dict(re.findall(r"\[(UPDATE_FAILURE_[A-Z_]+)\] = \"([A-Za-z]+)\"", table))
    body = re.search(r"bool update_failure_is_retriable\(.*?\n\}", text, re.S).group(0)
    always, conditional, pending = set(), set(), []
    for line in body.splitlines():
        m = re.match(r"\s*case (UPDATE_FAILURE_[A-Z_]+):", line)
        if m:
            pending.append(m.group(1))
        elif "return true" in line:
            always.update(pending)
            pending = []
        elif "return" in line and pending:
            conditional.update(pending)
            pending = []
    return {name: (None if sym in conditional else sym in always) for sym, name in codes.items()}


def failure_table_rows(man):
    """{code: class cell} from the FAILURE CODES table of inplace-agent(8)."""
    section = man[man.index(".SH FAILURE CODES"):]
    section = section[:section.index("\n.SH ", 1)]
    table = section[section.index(".TS"):section.index(".TE")]
    rows = {}
    for m in re.finditer(r"(?m)^([A-Z][A-Za-z]+)\t(T\{\n(.*?)\nT\}|[a-z]+)\t", table, re.S):
        rows[m.group(1)] = m.group(3) if m.group(3) is not None else m.group(2)
    return rows


def unit_writable_paths(unit):
    """ReadWritePaths= entries of the unit (without the "-" prefix)."""
    paths = []
    for m in re.finditer(r"(?m)^ReadWritePaths=(.*)$", unit):
        paths += [p.lstrip("-") for p in m.group(1).split()]
    return paths


class TestPackagingDocs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not AGENT or not os.access(AGENT, os.X_OK):
            raise unittest.SkipTest("AGENT (the built inplace-agent) is not set")
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as empty:
            r = agent("check-config", "--config", empty.name)
        if r.returncode != 0:
            raise AssertionError("check-config with an empty file failed: " + r.stderr)
        cls.defaults = flatten(json.loads(r.stdout))

    def test_shipped_config_validates(self):
        r = agent("check-config", "--config", CONFIG_YAML)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(flatten(json.loads(r.stdout)), self.defaults)

    def test_shipped_config_has_every_key_commented_out(self):
        text = read(CONFIG_YAML)
        active = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
        self.assertEqual(active, [], "config.yaml must not set anything")
        uncommented = uncomment(text)
        self.assertEqual(sorted(yaml_key_paths(uncommented)), sorted(self.defaults))
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write(uncommented)
            f.flush()
            r = agent("check-config", "--config", f.name)
        self.assertEqual(r.returncode, 0, r.stderr + "\n" + uncommented)
        self.assertEqual(flatten(json.loads(r.stdout)), self.defaults,
                         "an uncommented value in config.yaml is not the built-in default")

    def test_man5_documents_every_key_with_its_default(self):
        documented = {}
        for m in re.finditer(r'^\.BR (\S+) " \((.*)\)"$', read(MAN5), re.M):
            key, spec = man_unescape(m.group(1)), man_unescape(m.group(2))
            d = re.search(r'default (?:\\f[BI](.*?)\\fR|(""))', spec)
            self.assertIsNotNone(d, f"{key}: no default in {spec!r}")
            documented[key] = d.group(1) if d.group(1) is not None else ""
        self.assertEqual(sorted(documented), sorted(self.defaults))
        for key, value in documented.items():
            actual = self.defaults[key]
            if key in DERIVED:
                self.assertEqual(value, "", f"{key} is derived; document the default as \"\"")
                self.assertEqual(actual, DERIVED[key])
            else:
                self.assertTrue(same_value(value, actual),
                                f"{key}: man page says {value!r}, binary says {actual!r}")

    def test_man8_documents_cli(self):
        man = man_unescape(read(MAN8))
        r = agent("--help")
        self.assertEqual(r.returncode, 0)
        options = set(re.findall(r"--([a-z][a-z-]+)", r.stdout))
        self.assertTrue({"config", "node-name", "kubeconfig", "state-dir", "log-level", "json",
                         "help", "version"} <= options, options)
        for opt in options:
            self.assertIn("--" + opt, man, f"inplace-agent(8) does not document --{opt}")
        for verb in ("run", "status", "check-config"):
            self.assertRegex(man, r"(?m)^\.B " + re.escape(verb) + "$", f"verb {verb} not documented")
        for var in ("KUBECONFIG", "NODE_NAME", "DBUS_SYSTEM_BUS_ADDRESS"):
            self.assertIn(".B " + var, man)


class TestFailureCodesAndSandbox(unittest.TestCase):
    """Source-only checks (no binary needed)."""

    def test_man8_documents_every_failure_code_with_its_class(self):
        codes = failure_codes()
        self.assertTrue({"FileApplyFailed", "UnitApplyFailed", "UnsupportedChange", "KubeletUnhealthy"} <= set(codes),
                        codes)
        rows = failure_table_rows(man_unescape(read(MAN8)))
        self.assertEqual(sorted(rows), sorted(codes), "FAILURE CODES table vs node-update.c failure_names")
        for code, retriable in codes.items():
            cell = rows[code]
            if retriable is None:
                self.assertIn("retriable", cell, code)
                self.assertIn("terminal", cell, code)
            else:
                self.assertEqual(cell, "retriable" if retriable else "terminal", code)

    def test_man8_documents_every_plan_entry(self):
        """The plan's actions (update_plan_json) and the applyOSC items' kinds (osc-diff.c's table)."""
        man = man_unescape(read(MAN8))
        plan_actions = set(re.findall(r'"action", "([A-Za-z]+)"', read(NODE_UPDATE_C)))
        self.assertIn("applyOSC", plan_actions)
        for action in plan_actions:
            self.assertTrue('{"action":"%s"' % action in man, f"plan action {action} not in inplace-agent(8)")
        table = re.search(r"work_kind_table\[[^]]*\] = \{(.*?)\n\};", read(OSC_DIFF_C), re.S).group(1)
        kinds = re.findall(r'\] = "([a-z-]+)"', table)
        self.assertIn("write-file", kinds)
        for kind in kinds:
            self.assertIsNotNone(re.search(r"(?m)^\.BR? .*\b" + re.escape(kind) + r"\b", man),
                                 f"work item {kind} not documented")

    def test_unit_explains_every_writable_path(self):
        unit = read(UNIT)
        paths = unit_writable_paths(unit)
        self.assertIn("/etc", paths)                    # systemd.unitDirectory's default, producers' /etc files
        self.assertIn("/var/lib", paths)                # the kubelet, GNA's files, token sync
        comments = "\n".join(line for line in unit.splitlines() if line.startswith("#"))
        for p in paths:
            self.assertIsNotNone(re.search(r"(?m)^#\s+(\S+\s+)*" + re.escape(p) + r"(\s|$)", comments),
                                 f"{p} is opened without a comment saying why")
        man = man_unescape(read(MAN8))
        sandbox = man[man.index(".SH SANDBOXING"):]
        for p in paths:
            if "EFI" not in p:
                self.assertIn(p, sandbox, f"inplace-agent(8) SANDBOXING does not name {p}")


# pkg-config name (meson dependency()) -> the Debian -dev package that provides it.
DEBIAN_DEV_PACKAGE = {
    "libsystemd": "libsystemd-dev", "libcurl": "libcurl4-openssl-dev", "jansson": "libjansson-dev",
    "libarchive": "libarchive-dev", "libisal": "libisal-dev", "yaml-0.1": "libyaml-dev", "libcrypto": "libssl-dev",
    "libssl": "libssl-dev",
    "cmocka": "libcmocka-dev", "systemd": "systemd",
}


def meson_dependencies():
    """{pkg-config name: version constraint or ''} from every meson.build in the tree."""
    deps = {}
    for dirpath, dirnames, filenames in os.walk(SRCDIR):
        dirnames[:] = [d for d in dirnames if not d.startswith((".", "build"))]
        if "meson.build" not in filenames:
            continue
        text = read(os.path.join(dirpath, "meson.build"))
        for m in re.finditer(r"dependency\(\s*'([^']+)'([^)]*)\)", text):
            v = re.search(r"version\s*:\s*'([^']+)'", m.group(2))
            deps[m.group(1)] = v.group(1).replace(" ", "") if v else ""
    return deps


class TestBuildDependencies(unittest.TestCase):
    """Build-Depends (Debian) and BuildRequires (RPM) name every meson dependency with the same
    minimum version."""

    def test_debian_build_depends(self):
        control = read(os.path.join(SRCDIR, "packaging", "debian", "control"))
        field = re.search(r"^Build-Depends:(.*?)^\S", control, re.M | re.S).group(1)
        bd = {}
        for item in field.split(","):
            m = re.match(r"\s*([a-z0-9.+-]+)\s*(?:\(([^)]*)\))?", item)
            if m and m.group(1):
                bd[m.group(1)] = (m.group(2) or "").replace(" ", "")
        for dep, version in meson_dependencies().items():
            pkg = DEBIAN_DEV_PACKAGE.get(dep)
            self.assertIsNotNone(pkg, f"meson dependency {dep!r} has no Debian package mapping here")
            self.assertIn(pkg, bd, f"Build-Depends lacks {pkg} (meson: {dep})")
            if version:
                self.assertEqual(bd[pkg], version, f"Build-Depends {pkg}: meson wants {dep} {version}")

    def test_dlopened_library_is_a_runtime_dependency(self):
        """libarchive is dlopen()ed (agent/oci/libarchive-dl.c): no automatic shlibs/soname dependency
        sees it, so both packages must name it, or the first layer extraction fails on a bare image."""
        with open(os.path.join(SRCDIR, "meson.build")) as f:
            soname = re.search(r"'LIBARCHIVE_SONAME', '([^']+)'", f.read()).group(1)
        self.assertEqual(soname, "libarchive.so.13")
        control = read(os.path.join(SRCDIR, "packaging", "debian", "control"))
        depends = re.search(r"^Depends:(.*?)^\S", control, re.M | re.S).group(1)
        self.assertRegex(depends, r"\blibarchive13\b")
        spec = read(os.path.join(SRCDIR, "packaging", "rpm", "inplace-agent.spec"))
        self.assertRegex(spec, r"(?m)^Requires:\s+libarchive\b")

    def test_rpm_build_requires(self):
        spec = read(os.path.join(SRCDIR, "packaging", "rpm", "inplace-agent.spec"))
        br = {}
        for m in re.finditer(r"^BuildRequires:[ \t]*pkgconfig\(([^)]+)\)[ \t]*(.*)$", spec, re.M):
            br[m.group(1)] = m.group(2).replace(" ", "")
        for dep, version in meson_dependencies().items():
            self.assertIn(dep, br, f"spec lacks BuildRequires: pkgconfig({dep})")
            self.assertEqual(br[dep], version, f"spec pkgconfig({dep}): meson wants {version!r}")


class TestHelpers(unittest.TestCase):
    def test_failure_table_rows(self):
        man = (".SH FAILURE CODES\n.TS\nl l lx.\nCode\tClass\tMeaning\nAlpha\tterminal\tT{\nx\nT}\n"
               "Beta\tT{\nretriable when y,\nelse terminal\nT}\tT{\nz\nT}\n.TE\n.SH NEXT\n")
        self.assertEqual(failure_table_rows(man), {"Alpha": "terminal", "Beta": "retriable when y,\nelse terminal"})

    def test_uncomment_and_paths(self):
        text = "# prose\n#a: 1\n#b:\n#  # inner prose\n#  c: x\n#  #d: commented example\n"
        self.assertEqual(yaml_key_paths(uncomment(text)), ["a", "b.c"])

    def test_same_value(self):
        self.assertTrue(same_value("90s", "1m30s"))
        self.assertFalse(same_value("90s", "1m"))
        self.assertTrue(same_value("true", True))
        self.assertFalse(same_value("3", 2))
        self.assertTrue(same_value("{}", {}))


if __name__ == "__main__":
    itest.main()
