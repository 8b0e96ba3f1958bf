#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Cross-checks the journal message catalog against the code.

* every MESSAGE_ID_* macro in include/update/catalog-ids.h has exactly one entry in
  units/inplace-agent.catalog, and every entry has a macro;
* every log_struct_id() call in agent/<layer>/*.c names a macro from catalog-ids.h (or a literal ID
  with an entry), and every entry is used by one;
* the catalog parses under a strict reading of the systemd catalog format (header line,
  Subject/Defined-By/Support/Documentation, one blank line, body, no stray text), uses only
  @FIELD@ substitutions the agent attaches, and lifecycle entries do not refer to the
  transaction fields they never carry;
* journalctl itself compiles it (`journalctl --root=<tmp> --update-catalog`) and lists every ID
  with its Subject, when journalctl is installed.

The parser is also run against broken samples, so the strictness itself is tested.
"""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

from lib import itest

SRCDIR = itest.SRCDIR
HEADER = os.path.join(SRCDIR, "include", "update", "catalog-ids.h")
CATALOG = os.path.join(SRCDIR, "units", "inplace-agent.catalog")
AGENT_DIR = os.path.join(SRCDIR, "agent")

ID_RE = r"[0-9a-f]{32}"
REQUIRED_KEYS = ("Subject", "Defined-By", "Support", "Documentation")
# Fields log.c attaches to lines logged inside a transaction (docs/contract.md §1, journald row).
SUBSTITUTABLE_FIELDS = {"INPLACE_TRANSACTION", "INPLACE_PHASE"}
# Logged outside any transaction: must not refer to the transaction fields.
LIFECYCLE_MACROS = {"MESSAGE_ID_AGENT_STARTED", "MESSAGE_ID_AGENT_STOPPED", "MESSAGE_ID_CONFIG_ERROR"}
MAX_BODY_LINE = 80


class CatalogError(Exception):
    pass


def parse_header(text):
    """Returns {macro: id}. Every MESSAGE_ID_* define must be a quoted 128-bit lower-case hex ID."""
    ids = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not re.match(r"\s*#\s*define\s+MESSAGE_ID_", line):
            continue
        m = re.fullmatch(r'#define (MESSAGE_ID_[A-Z0-9_]+)\s+"(' + ID_RE + r')"\s*', line)
        if not m:
            raise CatalogError(f"catalog-ids.h:{lineno}: malformed MESSAGE_ID define: {line!r}")
        macro, mid = m.groups()
        if macro in ids:
            raise CatalogError(f"catalog-ids.h:{lineno}: {macro} defined twice")
        if mid in ids.values():
            raise CatalogError(f"catalog-ids.h:{lineno}: ID {mid} used by two macros")
        ids[macro] = mid
    if not ids:
        raise CatalogError("catalog-ids.h: no MESSAGE_ID_* defines")
    return ids


def parse_catalog(text):
    """Strict parser. Returns {id: {"keys": {key: value}, "body": [lines]}}."""
    entries = {}
    lines = text.split("\n")
    if not text.endswith("\n") or text.endswith("\n\n"):
        raise CatalogError("catalog: must end with exactly one newline")
    lines.pop()  # the empty string after the final newline
    i = 0
    # Comments and blank lines only before the first entry.
    while i < len(lines) and (lines[i].startswith("#") or lines[i] == ""):
        i += 1
    if i == len(lines):
        raise CatalogError("catalog: no entries")
    while i < len(lines):
        where = f"catalog:{i + 1}"
        m = re.fullmatch(r"-- (" + ID_RE + r")", lines[i])
        if not m:
            raise CatalogError(f"{where}: expected '-- <32 lower-case hex digits>', got {lines[i]!r}")
        mid = m.group(1)
        if mid in entries:
            raise CatalogError(f"{where}: duplicate entry {mid}")
        i += 1
        keys = {}
        while i < len(lines) and lines[i] != "":
            km = re.fullmatch(r"([A-Za-z][A-Za-z-]*): (\S.*)", lines[i])
            if not km:
                raise CatalogError(f"catalog:{i + 1}: malformed header field {lines[i]!r}")
            key, value = km.groups()
            if key not in REQUIRED_KEYS:
                raise CatalogError(f"catalog:{i + 1}: unknown header field {key!r}")
            if key in keys:
                raise CatalogError(f"catalog:{i + 1}: duplicate header field {key!r}")
            keys[key] = value
            i += 1
        missing = [k for k in REQUIRED_KEYS if k not in keys]
        if missing:
            raise CatalogError(f"{where}: entry {mid} lacks {', '.join(missing)}")
        if i >= len(lines):
            raise CatalogError(f"{where}: entry {mid} has no body")
        i += 1  # the blank line after the header fields
        body = []
        while i < len(lines) and not lines[i].startswith("-- "):
            body.append(lines[i])
            i += 1
        if body and body[-1] == "" and i < len(lines):
            body.pop()  # the blank line separating entries
        elif i < len(lines):
            raise CatalogError(f"catalog:{i + 1}: entries must be separated by a blank line")
        if not body or body[0] == "":
            raise CatalogError(f"{where}: entry {mid} needs exactly one blank line, then a body")
        for n, b in enumerate(body):
            if b.startswith("#"):
                raise CatalogError(f"{where}: entry {mid}: body line starts with '#': {b!r}")
            if b != b.rstrip() or "\t" in b:
                raise CatalogError(f"{where}: entry {mid}: trailing whitespace or tab in {b!r}")
            if len(b) > MAX_BODY_LINE:
                raise CatalogError(f"{where}: entry {mid}: body line longer than {MAX_BODY_LINE}: {b!r}")
            if b == "" and n > 0 and body[n - 1] == "":
                raise CatalogError(f"{where}: entry {mid}: two blank lines in the body")
        entries[mid] = {"keys": keys, "body": body}
    return entries


def check_entry_fields(mid, entry):
    if entry["keys"]["Defined-By"] != "inplace-agent":
        raise CatalogError(f"entry {mid}: Defined-By must be inplace-agent")
    for uri in entry["keys"]["Documentation"].split() + [entry["keys"]["Support"]]:
        if not re.fullmatch(r"(man:[A-Za-z0-9_.:-]+\([0-9]\)|https?://\S+|file:/\S+)", uri):
            raise CatalogError(f"entry {mid}: not a documentation URI: {uri!r}")
    text = "\n".join([entry["keys"]["Subject"]] + entry["body"])
    for field in re.findall(r"@([A-Za-z0-9_]*)@", text):
        if field not in SUBSTITUTABLE_FIELDS:
            raise CatalogError(f"entry {mid}: @{field}@ is not a field the agent attaches")


def log_struct_id_uses(sources):
    """[(file, line, id-expression)] for every log_struct_id( call; unparseable calls are errors."""
    uses = []
    call = re.compile(r"\blog_struct_id\s*\(")
    arg3 = re.compile(r"\blog_struct_id\s*\(\s*[^,()]+(?:\([^()]*\))?\s*,\s*[^,()]+(?:\([^()]*\))?\s*,"
                      r"\s*(MESSAGE_ID_[A-Z0-9_]+|\"" + ID_RE + r"\")\s*,", re.S)
    for path, text in sources:
        for m in call.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            a = arg3.match(text, m.start())
            if not a:
                raise CatalogError(f"{path}:{line}: log_struct_id() whose MESSAGE_ID argument is not "
                                   "a MESSAGE_ID_* macro or a literal ID")
            uses.append((path, line, a.group(1).strip('"')))
    return uses


def agent_sources():
    out = []
    for root, dirs, files in sorted(os.walk(AGENT_DIR)):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".c"):
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as f:
                    out.append((os.path.relpath(path, SRCDIR), f.read()))
    return out


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


class TestCatalog(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ids = parse_header(read(HEADER))
        cls.entries = parse_catalog(read(CATALOG))

    def test_every_macro_has_an_entry_and_vice_versa(self):
        by_id = {v: k for k, v in self.ids.items()}
        self.assertEqual(sorted(set(self.ids.values()) - set(self.entries)), [],
                         "MESSAGE_IDs without a catalog entry")
        self.assertEqual(sorted(set(self.entries) - set(by_id)), [],
                         "catalog entries without a macro in catalog-ids.h")

    def test_required_messages_exist(self):
        for suffix in ("UPDATE_PLANNED", "UPDATE_STAGED", "UPDATE_APPLIED", "UPDATE_SUCCEEDED",
                       "UPDATE_FAILED", "UPDATE_ROLLED_BACK", "UNIT_RESTARTED", "UNIT_RESTART_FAILED",
                       "AGENT_STARTED", "AGENT_STOPPED", "CONFIG_ERROR"):
            self.assertIn("MESSAGE_ID_" + suffix, self.ids)

    def test_entry_fields(self):
        for mid, entry in self.entries.items():
            check_entry_fields(mid, entry)

    def test_lifecycle_entries_do_not_use_transaction_fields(self):
        for macro in LIFECYCLE_MACROS:
            e = self.entries[self.ids[macro]]
            text = "\n".join([e["keys"]["Subject"]] + e["body"])
            self.assertNotRegex(text, r"@INPLACE_", f"{macro} is logged outside a transaction")

    def test_code_uses_only_cataloged_ids(self):
        for path, line, expr in log_struct_id_uses(agent_sources()):
            mid = self.ids.get(expr, expr)
            self.assertTrue(mid in self.entries, f"{path}:{line}: {expr} has no catalog entry")
        for path, text in agent_sources():
            for macro in set(re.findall(r"\bMESSAGE_ID_[A-Z0-9_]+\b", text)):
                self.assertTrue(macro in self.ids, f"{path}: {macro} is not defined in catalog-ids.h")

    def test_every_cataloged_id_is_logged(self):
        """An entry nobody logs is a promise the journal does not keep: `journalctl -x` never shows
        it (found on a booted node: agent started, stopped and configuration error had none)."""
        used = {self.ids.get(expr, expr) for _, _, expr in log_struct_id_uses(agent_sources())}
        by_id = {v: k for k, v in self.ids.items()}
        self.assertEqual(sorted(by_id[mid] for mid in set(self.entries) - used), [],
                         "catalog entries no log_struct_id() call uses")

    def test_journalctl_compiles_catalog(self):
        journalctl = shutil.which("journalctl")
        if not journalctl:
            self.skipTest("journalctl not installed")
        with tempfile.TemporaryDirectory() as root:
            catdir = os.path.join(root, "usr", "lib", "systemd", "catalog")
            os.makedirs(catdir)
            shutil.copy(CATALOG, catdir)
            r = subprocess.run([journalctl, "--root", root, "--update-catalog"],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stderr.strip(), "", "journalctl complained about the catalog")
            r = subprocess.run([journalctl, "--root", root, "--list-catalog"] + sorted(self.entries),
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            listed = dict(line.split(" ", 1) for line in r.stdout.splitlines())
            for mid, entry in self.entries.items():
                self.assertEqual(listed.get(mid), "inplace-agent: " + entry["keys"]["Subject"])


GOOD = """# comment
-- 0123456789abcdef0123456789abcdef
Subject: Something @INPLACE_TRANSACTION@
Defined-By: inplace-agent
Support: man:inplace-agent(8)
Documentation: man:inplace-agent(8) https://example.org/doc

Body line one.

Second paragraph.

-- fedcba9876543210fedcba9876543210
Subject: Other
Defined-By: inplace-agent
Support: man:inplace-agent(8)
Documentation: man:inplace-agent(8)

Body.
"""


class TestParserIsStrict(unittest.TestCase):
    def test_good_sample_parses(self):
        e = parse_catalog(GOOD)
        self.assertEqual(len(e), 2)
        self.assertEqual(e["0123456789abcdef0123456789abcdef"]["body"],
                         ["Body line one.", "", "Second paragraph."])
        for mid, entry in e.items():
            check_entry_fields(mid, entry)

    def assertRejected(self, text, fields=False):
        with self.assertRaises(CatalogError):
            for mid, entry in parse_catalog(text).items():
                if fields:
                    check_entry_fields(mid, entry)

    def test_broken_samples_are_rejected(self):
        self.assertRejected(GOOD.replace("Subject: Other\n", ""))                    # missing key
        self.assertRejected(GOOD.replace("fedcba9876543210fedcba9876543210",
                                         "0123456789abcdef0123456789abcdef"))        # duplicate ID
        self.assertRejected(GOOD.replace("-- fedcba98", "-- FEDCBA98"))               # upper case
        self.assertRejected(GOOD.replace("-- fedcba9876543210fedcba9876543210",
                                         "-- fedcba9876543210"))                     # short ID
        self.assertRejected(GOOD.replace("Documentation: man:inplace-agent(8)\n\nBody.",
                                         "Documentation: man:inplace-agent(8)\nBody."))  # no blank
        self.assertRejected(GOOD.replace("Body.\n", "Body.\n\n"))                    # trailing blank
        self.assertRejected(GOOD.replace("Second paragraph.\n\n", "Second paragraph.\n"))  # no separator
        self.assertRejected(GOOD.replace("Defined-By: inplace-agent\nSupport",
                                         "Defined-By: inplace-agent\nX-Foo: bar\nSupport"))  # unknown key
        self.assertRejected(GOOD.replace("Body.", "# not a comment here"))
        self.assertRejected(GOOD.replace("Body.", "x" * 81))
        self.assertRejected(GOOD.replace("Other", "Other @UNIT@"), fields=True)      # unknown field
        self.assertRejected(GOOD.replace("Defined-By: inplace-agent\nSupport: man:inplace-agent(8)\n"
                                         "Documentation: man:inplace-agent(8)\n",
                                         "Defined-By: systemd\nSupport: man:inplace-agent(8)\n"
                                         "Documentation: man:inplace-agent(8)\n"), fields=True)

    def test_header_parser(self):
        ok = '#define MESSAGE_ID_A "0123456789abcdef0123456789abcdef"\n'
        self.assertEqual(parse_header(ok), {"MESSAGE_ID_A": "0123456789abcdef0123456789abcdef"})
        for bad in ('#define MESSAGE_ID_A "0123"\n',
                    '#define MESSAGE_ID_A 0123456789abcdef0123456789abcdef\n',
                    ok + ok,
                    ok + ok.replace("_A ", "_B "),
                    "/* nothing */\n"):
            with self.assertRaises(CatalogError):
                parse_header(bad)

    def test_use_scanner(self):
        src = ('int f(void) {\n'
               '        return log_struct_id(LOG_INFO, 0, MESSAGE_ID_AGENT_STARTED, "x %s", y);\n'
               '        log_struct_id(LOG_ERR, r,\n'
               '                      "0123456789abcdef0123456789abcdef", "y");\n'
               '        log_struct_id(LOG_ERR, abs(r), MESSAGE_ID_UPDATE_FAILED, "z");\n'
               '}\n')
        self.assertEqual([(u[1], u[2]) for u in log_struct_id_uses([("t.c", src)])],
                         [(2, "MESSAGE_ID_AGENT_STARTED"), (3, "0123456789abcdef0123456789abcdef"),
                          (5, "MESSAGE_ID_UPDATE_FAILED")])
        with self.assertRaises(CatalogError):
            log_struct_id_uses([("t.c", "log_struct_id(LOG_INFO, 0, id_variable, \"x\");\n")])


if __name__ == "__main__":
    itest.main()
