#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Benchmark (not a test): pull + verify + extract of a kubelet-sized layer from a local registry.

Pushes a ~100 MB gzip layer (real ELF data: shared libraries from this machine) to Debian's
docker-registry on loopback (TLS), then times, best of N runs each:
  agent     tests/helpers/pull: manifest, blob streamed to disk with SHA-256, extract one file, store
  curl      curl | tee >(sha256sum) | tar -xzf - <file>        (the same blob, streamed)
  skopeo    skopeo copy to an OCI layout + umoci unpack           (only if both are installed)
and prints seconds, MB/s of compressed layer, and ratios to curl.

  bench/kubelet-pull.py [--build build] [--size-mb 100] [--runs 3]
"""

import argparse
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(top, "tests/integration/lib"))
import registry  # noqa: E402


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


def best_of(runs, fn):
    times = []
    for _ in range(runs):
        t = fn()
        if t is None:
            return None
        times.append(t)
    return min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(top, "build"))
    ap.add_argument("--size-mb", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    pull = os.path.join(a.build, "tests/pull")
    if not os.access(pull, os.X_OK):
        sys.exit("build first: %s missing" % pull)
    registry.skip_if_missing()

    work = tempfile.mkdtemp(prefix="bench-pull-")
    try:
        with registry.Registry(work) as reg:
            kubelet = elf_payload(a.size_mb << 20)
            tar = registry.tar_bytes([{"name": "usr/local/bin/", "type": "dir"},
                                      {"name": "usr/local/bin/kubelet", "data": kubelet}])
            layer = registry.compress(tar, "gzip")
            ref = reg.push_kubelet_image("1.31.2", kubelet, repo="bench")
            status, headers, body = reg.request("GET", "/v2/bench/manifests/v1.31.2",
                                                headers={"Accept": registry.OCI_MANIFEST})
            import json
            ldesc = json.loads(body)["layers"][-1]
            want = "sha256:" + hashlib.sha256(kubelet).hexdigest()
            print("layer: %.1f MB compressed, %.1f MB file" % (ldesc["size"] / 1e6, len(kubelet) / 1e6))

            def run_agent():
                d = tempfile.mkdtemp(dir=work)
                t = time.monotonic()
                p = subprocess.run([pull, "--state-dir", d, "--image", ref, "--file", "/usr/local/bin/kubelet",
                                    "--binary-path", os.path.join(d, "bin/kubelet"), "--ca-file", reg.ca_file],
                                   capture_output=True, text=True)
                t = time.monotonic() - t
                assert p.returncode == 0 and want in p.stdout, p.stdout + p.stderr
                shutil.rmtree(d)
                return t

            url = "https://%s/v2/bench/blobs/%s" % (reg.host, ldesc["digest"])

            def run_curl():
                d = tempfile.mkdtemp(dir=work)
                t = time.monotonic()
                subprocess.run(["bash", "-c", "set -o pipefail; curl -sSf --cacert '%s' '%s' | "
                                "tee >(sha256sum > '%s/sum') | tar -xzf - -C '%s' usr/local/bin/kubelet"
                                % (reg.ca_file, url, d, d)], check=True)
                t = time.monotonic() - t
                assert open(os.path.join(d, "sum")).read().split()[0] == ldesc["digest"].split(":")[1]
                shutil.rmtree(d)
                return t

            def run_skopeo():
                if not (shutil.which("skopeo") and shutil.which("umoci")):
                    return None
                d = tempfile.mkdtemp(dir=work)
                certs = os.path.join(d, "certs")
                os.makedirs(certs)
                shutil.copy(reg.ca_file, os.path.join(certs, "ca.crt"))
                t = time.monotonic()
                subprocess.run(["skopeo", "copy", "--quiet", "--src-cert-dir", certs, "docker://" + ref,
                                "oci:%s/layout:bench" % d], check=True)
                subprocess.run(["umoci", "unpack", "--rootless", "--image", "%s/layout:bench" % d,
                                "%s/bundle" % d], check=True, capture_output=True)
                t = time.monotonic() - t
                shutil.rmtree(d)
                return t

            results = [("agent (pull+verify+extract+store)", best_of(a.runs, run_agent)),
                       ("curl | sha256sum + tar -xzf", best_of(a.runs, run_curl)),
                       ("skopeo copy + umoci unpack", best_of(a.runs, run_skopeo))]
            base = results[1][1]
            mb = ldesc["size"] / 1e6
            print("%-36s %8s %9s %8s" % ("method (best of %d)" % a.runs, "seconds", "MB/s", "vs curl"))
            for name, t in results:
                if t is None:
                    print("%-36s %8s" % (name, "n/a (not installed)"))
                    continue
                print("%-36s %8.2f %9.1f %7.2fx" % (name, t, mb / t, t / base))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
