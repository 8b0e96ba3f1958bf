# SPDX-License-Identifier: Apache-2.0
"""The cluster around a machine-tier node, all on the host's 127.0.0.1 (the booted machine shares
the host's network namespace): the API-server emulator (CSRs auto-approved, as
gardener-resource-manager's approver does), Debian's docker-registry with TLS serving stand-in
kubelet images, gardenlet and MCM (tests/integration/lib/gardener.py), what gardener-node-init
leaves on a new node, and Gardener-shaped OSCs with osc.rootDirectory `/`.

    with world.World("node-a") as w:
        with machine.Machine(layers, w.node) as m:
            w.provision(m)                        # the Machine declared; gardener-node-init's files, the
                                                  # test's config drop-in, the kubelet stand-in's helper
            checksum = w.publish(w.osc("1.31.4"))
            m.boot()                              # the OSC's kubelet.service registers the Node
            w.g.wait_node(lambda n: annotation(n, NODE_CHECKSUM) == checksum, 120, "the checksum")

Stdlib only.
"""

import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "..", "integration", "lib")))
import gardener  # noqa: E402
import gardener_osc  # noqa: E402
import kubeemu  # noqa: E402
import registry  # noqa: E402
import sandbox  # noqa: E402
from gardener import SECRET_NAME_LABEL  # noqa: E402
from sandbox import MACHINE_LABEL  # noqa: E402

POOL = "machine"
SECRET = "gardener-node-agent-" + POOL
IMAGE_REPO = "hyperkube"
FILE_IN_IMAGE = sandbox.FILE_IN_IMAGE
BOOTSTRAP_TOKEN_ID, BOOTSTRAP_TOKEN_SECRET = "mch0ne", "0123456789abcdef"
GNA_DIR = gardener_osc.GNA_DIR
GNA_CONFIG = gardener_osc.GNA_CONFIG               # config-<gardener version>.yaml, as provisioned
KUBELET_CONFIG = gardener_osc.KUBELET_CONFIG
KUBELET_PATH = gardener_osc.KUBELET_PATH
TEST_CONFIG = "/etc/inplace-agent/config.d/90-machine-test.yaml"
TEST_DROPIN = "/etc/systemd/system/inplace-agent.service.d/90-machine-test.conf"
TUNING = {"units-check": "5s"}
# osc.replacedUnits' default: the OSC's unit the agent replaces, and never writes.
REPLACED_UNITS = (gardener_osc.GNA_UNIT,)
REGISTRY_CA = "/etc/inplace-agent/machine-test-registry-ca.crt"
OS_UPDATE_SCRIPT = gardener_osc.OS_UPDATE_SCRIPT
# The stand-in kubelet's registration of its Node (a real kubelet's --register-node; the stand-in
# cannot reach the API server): the sandbox's kubelet-report, run as kubelet.service's
# ExecStartPost=, posts the Node through the emulator's control API. Part of the image, not of the
# OSC (outside /etc: a wipe of /etc leaves it).
STAND_IN_DIR = "/usr/local/libexec/kubelet-stand-in"
KUBELET_REPORT = STAND_IN_DIR + "/kubelet-report"
REGISTRATION = STAND_IN_DIR + "/registration.json"


def inline(path, data, mode=0o644, encoding=None):
    """An OSC file with inline content (base64 when encoding="b64")."""
    return gardener_osc.inline(path, data, mode, encoding or "")


KUBELET_UNIT = """[Unit]
Description=kubelet daemon
Documentation=https://kubernetes.io/docs/admin/kubelet
After=containerd.service
[Install]
WantedBy=multi-user.target
[Service]
Restart=always
RestartSec=5
EnvironmentFile=-/etc/environment
EnvironmentFile=-/var/lib/kubelet/extra_args
ExecStart=/opt/bin/kubelet --config=/var/lib/kubelet/config/kubelet --healthz-bind-address=127.0.0.1 --healthz-port=%(port)d $KUBELET_EXTRA_ARGS
ExecStartPost=-/usr/bin/python3 %(report)s http://127.0.0.1:%(control)d %(node)s /opt/bin/kubelet %(registration)s
"""

KUBELET_CONFIGURATION = """apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
healthzBindAddress: 127.0.0.1
healthzPort: %(port)d
evictionHard:
  memory.available: %(eviction)s
kubeReserved:
  cpu: 80m
  memory: 1Gi
"""


class World:
    """Emulator + registry + kubelet images + gardenlet/MCM for one node. A context manager."""

    def __init__(self, node, versions=("1.31.4", "1.32.1"), broken_versions=(), kubelet_size=1 << 20, log=None):
        self.node = node
        self.versions = tuple(versions)
        self.broken_versions = tuple(broken_versions)
        self.kubelet_size = kubelet_size
        self.log = log or (lambda msg: None)
        self.dir = None
        self.emu = self.reg = self.g = None
        self.images = {}                # (version, broken) -> reference
        self.healthz_port = None
        self.last = {}                  # the arguments of the last osc()

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        self.dir = tempfile.mkdtemp(prefix="ipa-machine-world-", dir="/tmp")
        self.healthz_port = registry.free_port()
        self.emu = kubeemu.start(state_dir=os.path.join(self.dir, "emulator"),
                                 config={"csr_auto_approve": True})
        self.g = gardener.Actors(self.emu, self.node, SECRET, POOL)
        self.emu.seed_bootstrap_token(BOOTSTRAP_TOKEN_ID, BOOTSTRAP_TOKEN_SECRET)
        self.reg = registry.Registry(self.dir)
        self.reg.start()
        for v in self.versions:
            self.push_kubelet(v)
        for v in self.broken_versions:
            self.push_kubelet(v, broken=True)
        gardener_osc.push_stand_in_images(self.reg)
        self.log("API-server emulator %s, registry %s, kubelet images %s" % (
            self.emu.server, self.reg.host, ", ".join(sorted("%s%s" % (v, " (broken)" if b else "")
                                                              for v, b in self.images))))
        return self

    def stop(self):
        if self.reg:
            self.reg.stop()
        if self.emu:
            self.emu.stop()
        if self.dir and not os.environ.get("MACHINE_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)

    def push_kubelet(self, version, broken=False):
        data = sandbox.stand_in_kubelet(version, healthy=not broken, size=self.kubelet_size)
        repo = IMAGE_REPO + ("-broken" if broken else "")
        self.reg.push_image(repo, "v" + version, sandbox.kubelet_image_layers(data))
        self.images[(version, broken)] = "%s/%s:v%s" % (self.reg.host, repo, version)
        return self.images[(version, broken)]

    # ---------------------------------------------------------------- the node before its first boot

    def component_config(self, token_syncs=()):
        """gardener-node-agent's component config (nodeagent.ComponentConfig upstream), as JSON (YAML).
        token_syncs: [(secret name, path)] for controllers.token.syncConfigs."""
        token = {"syncPeriod": "12h0m0s"}
        if token_syncs:
            token["syncConfigs"] = [{"secretName": n, "path": p} for n, p in token_syncs]
        return json.dumps({
            "apiVersion": "nodeagent.config.gardener.cloud/v1alpha1",
            "kind": "NodeAgentConfiguration",
            "apiServer": {"server": self.emu.server, "caFile": GNA_DIR + "/cluster-ca.crt"},
            "controllers": {"operatingSystemConfig": {"secretName": SECRET, "kubernetesVersion": self.versions[0]},
                            "token": token},
        }, indent=1) + "\n"

    def cluster_ca(self):
        with open(self.emu.ca) as f:
            return f.read()

    def registration(self):
        """The Node as the kubelet registers it: its --node-labels (the Machine's node template)."""
        return {"address": "127.0.0.1", "os_image": "Debian GNU/Linux 12 (bookworm)",
                "labels": {SECRET_NAME_LABEL: SECRET, "worker.gardener.cloud/pool": POOL,
                           MACHINE_LABEL: self.node, "node-role.kubernetes.io/worker": ""}}

    def provision(self, m, config_extra=None, tuning=None, log_level=None):
        """The seed's Machine declared (MCM creates it before the VM: gardener-resource-manager's
        node-agent authorizer lets the agent read the OSC Secret its node template names before any
        Node exists); what gardener-node-init leaves on a new machine (nodeinit.Config upstream: the
        bootstrap token, cluster-ca.crt, machine-name, the component config); the stand-in kubelet's
        registration helper; and the test's agent config drop-in: the registry's CA (a real registry
        has a public one) and the stand-in kubelet's healthz port (the host's loopback is shared); a
        unit drop-in with INPLACE_AGENT_KUBE_TUNING (and, with `log_level`, the agent's --log-level)."""
        self.emu.seed_machine(self.node, self.registration()["labels"])
        m.write(KUBELET_REPORT, sandbox.KUBELET_REPORT, 0o755)
        m.write(REGISTRATION, json.dumps(self.registration()))
        m.write(GNA_DIR + "/credentials/bootstrap-token", "%s.%s" % (BOOTSTRAP_TOKEN_ID, BOOTSTRAP_TOKEN_SECRET),
                0o640)
        m.write(GNA_DIR + "/cluster-ca.crt", self.cluster_ca(), 0o640)
        m.write(GNA_DIR + "/machine-name", self.node, 0o640)
        m.write(GNA_CONFIG, self.component_config(), 0o600)
        with open(self.reg.ca_file) as f:
            m.write(REGISTRY_CA, f.read())
        config = {"registry": {"caFile": REGISTRY_CA},
                  "kubelet": {"healthzURL": "http://127.0.0.1:%d/healthz" % self.healthz_port}}
        for k, v in (config_extra or {}).items():
            if isinstance(v, dict) and isinstance(config.get(k), dict):
                config[k].update(v)
            else:
                config[k] = v
        m.write(TEST_CONFIG, "# The machine tier's settings (tests/machine/lib/world.py)\n" + json.dumps(config, indent=1)
                + "\n")
        # The one timing a test cannot wait for: SystemdUnitsReady once a minute. Everything else
        # runs as shipped.
        dropin = "# tests/machine/lib/world.py\n[Service]\nEnvironment=INPLACE_AGENT_KUBE_TUNING=%s\n" % ",".join(
            "%s=%s" % kv for kv in sorted(dict(TUNING, **(tuning or {})).items()))
        if log_level:
            dropin += "ExecStart=\nExecStart=/usr/sbin/inplace-agent run --log-level %s\n" % log_level
        m.write(TEST_DROPIN, dropin)

    def seed_node(self, **kw):
        """The Node as the kubelet registered it, by hand: for a node whose kubelet registered it
        before (the OSC's kubelet.service registers it otherwise)."""
        reg = self.registration()
        labels = dict(reg["labels"], **kw.pop("labels", {}))
        return self.emu.seed_node(self.node, labels=labels, os_image=reg["os_image"], address=reg["address"], **kw)

    # ---------------------------------------------------------------- the OSC

    def osc(self, kubelet="1.31.4", eviction="100Mi", dropin=None, files=(), units=(), extension_files=(),
            extension_units=(), os_version=None, os_command=None, broken=False, token_syncs=(), os_script=None):
        """The OSC gardenlet writes (tests/integration/lib/gardener_osc.py: its original components,
        GNA's replaced unit, Garden Linux's and the provider's additions) for this node, as JSON
        (which is YAML), plus containerd's config with a registry mirror; the test's `files`, `units`,
        `extension_files`, `extension_units` appended. `dropin`: the content of
        kubelet.service.d/50-machine-test.conf. `os_version`: spec.inPlaceUpdates.operatingSystemVersion
        (default "12", the image's). `os_script`: the content of the OS extension's
        /opt/gardener/bin/inplace-update.sh; `os_command`: [command, args...] of
        status.inPlaceUpdates.osUpdate (default: that script with the version). `token_syncs`:
        [(Secret, path)] for the token sync."""
        self.last = dict(kubelet=kubelet, eviction=eviction, dropin=dropin, os_version=os_version)
        pieces = gardener_osc.build(self.osc_params(kubelet, eviction, dropin, os_version, broken, token_syncs,
                                                    os_script))
        spec = {
            "type": "debian", "purpose": "reconcile",
            "inPlaceUpdates": {"operatingSystemVersion": os_version or "12", "kubelet": kubelet},
            "criConfig": {"name": "containerd", "cgroupDriver": "systemd", "containerd": {
                "sandboxImage": "registry.k8s.io/pause:3.10",
                "registries": [{"upstream": "docker.io", "server": "https://registry-1.docker.io",
                                "hosts": [{"url": "https://mirror.gcr.io"}]}]}},
            "files": pieces["files"] + list(files),
            "units": pieces["units"] + list(units),
        }
        status = {"extensionUnits": pieces["extensionUnits"] + list(extension_units),
                  "extensionFiles": pieces["extensionFiles"] + list(extension_files),
                  "inPlaceUpdates": pieces["inPlaceUpdates"]}
        if os_command:
            status["inPlaceUpdates"] = {"osUpdate": {"command": os_command[0], "args": list(os_command[1:])}}
        osc = {"apiVersion": "extensions.gardener.cloud/v1alpha1", "kind": "OperatingSystemConfig",
               "metadata": {"name": SECRET, "namespace": "kube-system"}, "spec": spec, "status": status}
        return json.dumps(osc, indent=1) + "\n"

    def osc_params(self, kubelet="1.31.4", eviction="100Mi", dropin=None, os_version=None, broken=False,
                   token_syncs=(), os_script=None):
        """gardener_osc's parameters on this tier: root `/`, the stand-in kubelet's unit and healthz port."""
        return gardener_osc.Params(
            registry=self.reg.host, kubelet_image=self.images[(kubelet, broken)],
            kubelet_unit=KUBELET_UNIT % {"port": self.healthz_port, "report": KUBELET_REPORT,
                                         "control": self.emu.control_port, "node": self.node,
                                         "registration": REGISTRATION},
            kubelet_config=KUBELET_CONFIGURATION % {"port": self.healthz_port, "eviction": eviction},
            cluster_ca=self.cluster_ca(), component_config=self.component_config(token_syncs),
            os_version=os_version or "12", os_update_command=OS_UPDATE_SCRIPT, os_update_script=os_script,
            kubelet_dropin=("50-machine-test.conf", dropin) if dropin else None)

    def started_units(self, osc_text):
        """The units of `osc_text` (an osc() result) that should be active: gardener_osc.started_units()
        over its spec and extension units."""
        o = json.loads(osc_text)
        return gardener_osc.started_units({"units": o["spec"]["units"], "extensionUnits": o["status"]["extensionUnits"]},
                                          REPLACED_UNITS)

    def publish(self, text):
        """gardenlet writes the OSC Secret; returns its checksum."""
        return self.g.publish_osc_text(text)


def wait_for(predicate, timeout, what, interval=0.2):
    return kubeemu.wait_for(predicate, timeout, what, interval)


def now():
    return time.monotonic()
