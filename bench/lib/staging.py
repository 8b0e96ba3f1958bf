# SPDX-License-Identifier: Apache-2.0
"""Staging throughput: pull + verify + extract of a kubelet-sized layer from Debian's docker-registry on
loopback (TLS), gzip and zstd. Three ways, best of N runs, wall time and peak RSS of each:
  agent   tests/helpers/pull (the kubelet staging path: manifest, blob streamed to disk with SHA-256,
          extract the one file, store)
  curl    curl | tee >(sha256sum) | tar -x<z|--zstd> <file>     (the same blob, streamed)
  skopeo  skopeo copy to an OCI layout + umoci unpack              (when both are installed)
The payload is real ELF data (this machine's shared libraries and binaries), so it compresses like a
kubelet does."""

import glob
import hashlib
import json
import os
import shutil
import subprocess
import tempfile

from common import Skip, row, run_timed, skipped
import registry  # noqa: E402  (tests/integration/lib)

GROUP = "staging"


def elf_payload(size):
    out, total = [], 0
    for p in sorted(glob.glob("/usr/lib/x86_64-linux-gnu/*.so*") + glob.glob("/usr/bin/*")):
        if total >= size:
            break
        try:
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            with open(p, "rb") as f:
                data = f.read(size - total)
        except OSError:
            continue
        out.append(data)
        total += len(data)
    return b"".join(out)


def best(runs, fn):
    """Best wall time of `runs` calls of fn() -> (seconds, peak MiB); the RSS of that best run."""
    results = [fn() for _ in range(runs)]
    return min(results)


class Bench:
    def __init__(self, ctx, reg, work, kubelet, compression):
        self.ctx, self.reg, self.work, self.compression = ctx, reg, work, compression
        self.ref = reg.push_kubelet_image("1.31.2", kubelet, repo="bench-" + compression, compression=compression)
        _, _, body = reg.request("GET", "/v2/bench-%s/manifests/v1.31.2" % compression,
                                 headers={"Accept": registry.OCI_MANIFEST})
        self.layer = json.loads(body)["layers"][-1]
        self.want = "sha256:" + hashlib.sha256(kubelet).hexdigest()
        self.url = "https://%s/v2/bench-%s/blobs/%s" % (reg.host, compression, self.layer["digest"])

    def agent(self, pull=None):
        d = tempfile.mkdtemp(dir=self.work)
        t, rss, (rc, out, err) = run_timed([pull or self.ctx.pull, "--state-dir", d, "--image", self.ref,
                                            "--file", "/usr/local/bin/kubelet",
                                            "--binary-path", os.path.join(d, "bin/kubelet"),
                                            "--ca-file", self.reg.ca_file])
        if rc != 0 or self.want not in out:
            raise RuntimeError("pull failed: %s %s" % (out, err))
        shutil.rmtree(d)
        return t, rss

    def curl(self):
        d = tempfile.mkdtemp(dir=self.work)
        flag = "-xzf" if self.compression == "gzip" else "--zstd -xf"
        t, rss, (rc, out, err) = run_timed(
            ["bash", "-c", "set -o pipefail; curl -sSf --cacert '%s' '%s' | tee >(sha256sum > '%s/sum') | "
             "tar %s - -C '%s' usr/local/bin/kubelet" % (self.reg.ca_file, self.url, d, flag, d)])
        if rc != 0 or open(os.path.join(d, "sum")).read().split()[0] != self.layer["digest"].split(":")[1]:
            raise RuntimeError("curl pipeline failed: %s" % err)
        shutil.rmtree(d)
        return t, rss

    def skopeo(self):
        d = tempfile.mkdtemp(dir=self.work)
        certs = os.path.join(d, "certs")
        os.makedirs(certs)
        shutil.copy(self.reg.ca_file, os.path.join(certs, "ca.crt"))
        t1, rss1, (rc, _, err) = run_timed(["skopeo", "copy", "--quiet", "--src-cert-dir", certs,
                                            "docker://" + self.ref, "oci:%s/layout:bench" % d])
        if rc != 0:
            raise RuntimeError("skopeo failed: " + err)
        t2, rss2, (rc, _, err) = run_timed(["umoci", "unpack", "--rootless", "--image", "%s/layout:bench" % d,
                                            "%s/bundle" % d])
        if rc != 0:
            raise RuntimeError("umoci failed: " + err)
        shutil.rmtree(d)
        return t1 + t2, max(rss1, rss2)


def umoci_version():
    out = subprocess.run(["umoci", "--version"], capture_output=True, text=True).stdout.split()
    return out[-1] if out else "?"


def umoci_has_zstd():
    """zstd layers came with umoci 0.4.8 (Debian 12 ships 0.4.7)."""
    try:
        return tuple(int(x) for x in umoci_version().split(".")[:3]) >= (0, 4, 8)
    except ValueError:
        return False


def run(ctx):
    missing = registry.missing_prerequisites()
    if missing:
        return [skipped(GROUP, "staging throughput", "missing " + ", ".join(missing))]
    rows = []
    work = tempfile.mkdtemp(prefix="bench-staging-", dir=ctx.tmp)
    try:
        with registry.Registry(work) as reg:
            kubelet = elf_payload(ctx.size_mb << 20)
            have_skopeo = shutil.which("skopeo") and shutil.which("umoci")
            for compression in ("gzip", "zstd"):
                b = Bench(ctx, reg, work, kubelet, compression)
                mb = b.layer["size"] / 1e6
                ctx.log("staging %s: %.1f MB layer, %.1f MB file" % (compression, mb, len(kubelet) / 1e6))
                agent_t, agent_rss = best(ctx.runs, b.agent)
                noisal_t = None
                if compression == "gzip" and os.access(ctx.pull_noisal, os.X_OK):
                    noisal_t, _ = best(ctx.runs, lambda: b.agent(ctx.pull_noisal))
                curl_t, curl_rss = best(ctx.runs, b.curl)
                name = "%s: %.0f MB layer -> %.0f MB file" % (compression, mb, len(kubelet) / 1e6)
                rows.append(row(GROUP, name + ", agent pull+verify+extract", agent_t, "s", curl_t,
                                "curl|sha256sum+tar", target=("<=", 0.5, "x") if compression == "gzip" else None,
                                note="%.0f MB/s compressed" % (mb / agent_t)))
                if noisal_t is not None:
                    rows.append(row(GROUP, name + ", agent with libarchive's gzip (no ISA-L)", noisal_t, "s", curl_t,
                                    "curl|sha256sum+tar", note="ISA-L saves %.2f s" % (noisal_t - agent_t)))
                if have_skopeo and compression == "zstd" and not umoci_has_zstd():
                    have_skopeo = False
                    rows.append(skipped(GROUP, name + ", skopeo+umoci", "umoci %s cannot unpack zstd layers"
                                        % umoci_version()))
                elif have_skopeo:
                    sk_t, sk_rss = best(ctx.runs, b.skopeo)
                    rows.append(row(GROUP, name + ", skopeo copy+umoci unpack", sk_t, "s", curl_t,
                                    "curl|sha256sum+tar"))
                else:
                    rows.append(skipped(GROUP, name + ", skopeo+umoci", "skopeo or umoci not installed"))
                rows.append(row(GROUP, compression + ": agent peak RSS", agent_rss, "MiB", curl_rss,
                                "curl pipeline (largest process)"))
                if have_skopeo:
                    rows.append(row(GROUP, compression + ": skopeo+umoci peak RSS", sk_rss, "MiB", curl_rss,
                                    "curl pipeline (largest process)"))
    except Skip as e:
        rows.append(skipped(GROUP, "staging throughput", str(e)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows
