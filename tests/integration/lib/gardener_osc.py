# SPDX-License-Identifier: Apache-2.0
"""The OSC gardenlet writes, for both test tiers (issue 29 item 5): the sandbox (lib/sandbox.py, units
under a real `systemd --user`, files below a scratch osc.rootDirectory) and the machine tier
(tests/machine/lib/world.py, a booted Debian image, root `/`).

    p = gardener_osc.Params(registry=reg.host, kubelet_image=ref, kubelet_unit=text, kubelet_config=cfg,
                            cluster_ca=ca, component_config=gna_cfg, os_version="1592.6",
                            os_update_command="/opt/gardener/bin/inplace-update.sh")
    osc = gardener_osc.build(p)        # {"files", "units", "extensionFiles", "extensionUnits", "inPlaceUpdates"}
    gardener_osc.push_stand_in_images(reg)      # every imageRef but the kubelet's, before the first apply

Each piece follows one upstream file (named above it): gardener/gardener's
pkg/component/extensions/operatingsystemconfig/original/components/<component> (abbreviated
`components/` below), what gardener-extension-os-gardenlinux's actuator adds
(pkg/controller/operatingsystemconfig/actuator.go) and what a provider extension's webhook adds
(gardener-extension-provider-aws pkg/webhook/controlplane/ensurer.go). The STRUCTURE is upstream's:
the set of files and units, their paths, modes, encodings, `enable`/`command`, `filePaths`, drop-ins,
`imageRef`s, the replaced unit gardener-node-agent.service. Content is shortened, and what a unit
executes is a harmless stand-in that stays active in both tiers (a script of the OSC that sleeps or
exits 0, a oneshot with RemainAfterExit=yes): the tests judge the agent, not logrotate or sshd.

Upstream components with nothing left to model: the kubelet health monitor and containerd-initializer
are gone from gardener/gardener; var-lib-kubelet.mount exists only for a worker with a kubelet data
volume (Params.kubelet_data_volume, off: neither tier has the KUBEDEV disk to mount); valitail and the
OpenTelemetry collector are alternatives (Params.log_shipper).

Paths of OSC files are node paths (the agent puts them below osc.rootDirectory); paths a unit or script
*executes or reads* are `Params.root` + node path, since systemd knows nothing of the scratch root.

Stdlib only.
"""

import base64
import dataclasses
import json

import registry

GNA_UNIT = "gardener-node-agent.service"
GNA_DIR = "/var/lib/gardener-node-agent"
GNA_VERSION = "v1.120.0"
GNA_CONFIG = GNA_DIR + "/config-%s.yaml" % GNA_VERSION     # nodeagent helper.GetDefaultConfigFilePath()
GNA_BINARY = "/opt/bin/gardener-node-agent"
KUBELET_UNIT = "kubelet.service"
KUBELET_PATH = "/opt/bin/kubelet"
KUBELET_CONFIG = "/var/lib/kubelet/config/kubelet"
KUBELET_CA = "/var/lib/kubelet/ca.crt"
ROOT_CERTS = "/var/lib/ca-certificates-local/ROOTcerts.crt"
OS_UPDATE_SCRIPT = "/opt/gardener/bin/inplace-update.sh"

# Stand-in images for every imageRef but the kubelet's: repository:tag -> filePathInImage. The file
# sleeps whatever it is called with (valitail's unit runs it; GNA's never runs).
STAND_IN_IMAGES = {
    "gardener-node-agent:" + GNA_VERSION: "/gardener-node-agent",
    "valitail:v2.2.21": "/usr/bin/valitail",
    "opentelemetry-collector:v0.120.0": "/bin/otelcol",
    "ecr-credential-provider:v1.31.1": "/bin/ecr-credential-provider",
}


@dataclasses.dataclass
class Params:
    """What differs between the tiers and between a test's OSCs."""
    registry: str                   # host[:port] of the registry the imageRefs name
    kubelet_image: str              # the kubelet's imageRef (hyperkube)
    kubelet_unit: str               # kubelet.service's content: each tier's stand-in kubelet
    kubelet_config: str             # the KubeletConfiguration text
    cluster_ca: str                 # the cluster CA bundle (kubelet CA, GNA's cluster-ca.crt, ROOTcerts)
    component_config: str           # GNA's NodeAgentConfiguration text
    os_version: str                 # spec.inPlaceUpdates.operatingSystemVersion (the update script's arg)
    os_update_command: str          # status.inPlaceUpdates.osUpdate.command, as the agent runs it
    os_update_script: str = None    # inplace-update.sh's content (None: a stand-in that changes nothing)
    root: str = ""                  # osc.rootDirectory for paths units execute ("" on a real node)
    kubelet_dropin: tuple = None    # (name, content) of a kubelet.service drop-in
    log_shipper: str = "valitail"   # "valitail" or "opentelemetry-collector"
    provider: str = "aws"           # the provider extension's additions ("aws" or None)
    kubelet_data_volume: bool = False
    ssh_keys: str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGardenerTestKeyStandIn gardener\n"


def b64(data):
    return base64.b64encode(data if isinstance(data, bytes) else data.encode()).decode()


def inline(path, data, mode, encoding="b64"):
    content = {"data": b64(data) if encoding == "b64" else data}
    if encoding:
        content["encoding"] = encoding
    return {"path": path, "permissions": mode, "content": {"inline": content}}


def image_ref(path, image, file_in_image, mode=0o755):
    return {"path": path, "permissions": mode, "content": {"imageRef": {"image": image, "filePathInImage": file_in_image}}}


def unit(name, content=None, enable=None, command=None, file_paths=(), dropins=()):
    u = {"name": name}
    if enable is not None:
        u["enable"] = enable
    if command:
        u["command"] = command
    if content is not None:
        u["content"] = content
    if dropins:
        u["dropIns"] = [{"name": n, "content": c} for n, c in dropins]
    if file_paths:
        u["filePaths"] = list(file_paths)
    return u


def script(what, body="exit 0"):
    """A stand-in for one of the OSC's scripts: says what it stands for, does `body`."""
    return "#!/bin/sh\n# Stand-in for %s (tests/integration/lib/gardener_osc.py)\n%s\n" % (what, body)


SLEEP = "exec sleep infinity"


def image(p, repo_tag):
    return "%s/%s" % (p.registry, repo_tag)


def _stand_in_ref(p, path, repo_tag, mode=0o755):
    return image_ref(path, image(p, repo_tag), STAND_IN_IMAGES[repo_tag], mode)


# ------------------------------------------------------------------------------ gardener/gardener

def kubelet(p):
    """components/kubelet/component.go: CA, config (b64), the binary as imageRef, the unit with
    command start listing them and the root certificates."""
    files = [inline(KUBELET_CA, p.cluster_ca, 0o644),
             inline(KUBELET_CONFIG, p.kubelet_config, 0o600),
             image_ref(KUBELET_PATH, p.kubelet_image, "/kubelet")]
    return ([unit(KUBELET_UNIT, p.kubelet_unit, enable=True, command="start",
                  file_paths=[f["path"] for f in files] + [ROOT_CERTS],
                  dropins=[p.kubelet_dropin] if p.kubelet_dropin else ())], files)


def containerd(p):
    """components/containerd/component.go and containerd/logrotate/logrotate.go: the logrotate
    service (its config in filePaths) and timer, and containerd.service without content, restarted
    when the root certificates change."""
    conf = "/etc/systemd/containerd.conf"
    files = [inline(conf, "/var/log/pods/*/*/*.log {\n    rotate 14\n    copytruncate\n    missingok\n"
                          "    compress\n    daily\n}\n", 0o644, encoding="")]
    service = ("[Unit]\nDescription=Rotate and Compress System Logs\nStartLimitBurst=5\nStartLimitIntervalSec=30\n"
               "[Service]\n# Stand-in for: ExecStart=/usr/sbin/logrotate -s /var/lib/containerd-logrotate.status %s\n"
               "Type=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target" % conf)
    timer = ("[Unit]\nDescription=Log Rotation once a day\n[Timer]\nOnCalendar=daily\nAccuracySec=1min\n"
             "RandomizedDelaySec=4h\nPersistent=true\n[Install]\nWantedBy=multi-user.target")
    return ([unit("containerd-logrotate.service", service, enable=True, file_paths=[conf]),
             unit("containerd-logrotate.timer", timer, enable=True, command="start"),
             unit("containerd.service", file_paths=[ROOT_CERTS])], files)


def nodeagent(p):
    """components/nodeagent/component.go: the component config (b64), cluster-ca.crt, the binary as
    imageRef, and gardener-node-agent.service listing all three (the unit the agent replaces)."""
    files = [inline(GNA_CONFIG, p.component_config, 0o600),
             inline(GNA_DIR + "/cluster-ca.crt", p.cluster_ca, 0o640),
             _stand_in_ref(p, GNA_BINARY, "gardener-node-agent:" + GNA_VERSION)]
    content = ("[Unit]\nDescription=Gardener Node Agent\nAfter=network-online.target\n\n[Service]\n"
               "LimitMEMLOCK=infinity\nExecStart=%s --config-dir=%s\nRestart=always\nRestartSec=5\n"
               "StandardOutput=journal+console\nStandardError=journal\n\n[Install]\nWantedBy=multi-user.target"
               % (GNA_BINARY, GNA_DIR))
    return [unit(GNA_UNIT, content, enable=True, file_paths=[f["path"] for f in files])], files


def valitail(p):
    """components/valitail/component.go and config.go: config and CA (b64), the binary as imageRef
    (runs: the stand-in image sleeps), the unit with command start. Left out: the resource limits
    and the ExecStartPre= lines (HOSTNAME, the auth token the token sync would write)."""
    config, ca, binary = "/var/lib/valitail/config/config", "/var/lib/valitail/ca.crt", "/opt/bin/valitail"
    files = [inline(config, "server:\n  disable: true\nclients:\n- url: https://valitail.invalid/vali/api/v1/push\n"
                            "  bearer_token_file: /var/lib/valitail/auth-token\n", 0o644),
             inline(ca, p.cluster_ca, 0o644),
             _stand_in_ref(p, binary, "valitail:v2.2.21")]
    content = ("[Unit]\nDescription=valitail daemon\nDocumentation=https://github.com/credativ/plutono\n"
               "[Install]\nWantedBy=multi-user.target\n[Service]\nRestart=always\nRestartSec=5\n"
               "EnvironmentFile=-/etc/environment\nExecStart=%s -config.file=%s" % (p.root + binary, p.root + config))
    return [unit("valitail.service", content, enable=True, command="start", file_paths=[config, ca, binary])], files


def opentelemetrycollector(p):
    """components/opentelemetrycollector/component.go and config.go: config, CA, kubeconfig, the
    binary as imageRef (0700), the collector (start), its health check (enable: false, start) and the
    timer that runs the check."""
    d = "/var/lib/opentelemetry-collector"
    config, ca, kubeconfig, binary = d + "/config/config", d + "/ca.crt", d + "/kubeconfig", "/opt/bin/opentelemetry-collector"
    files = [inline(config, "receivers: {}\nexporters: {}\n", 0o644), inline(ca, p.cluster_ca, 0o644),
             _stand_in_ref(p, binary, "opentelemetry-collector:v0.120.0", 0o700),
             inline(kubeconfig, json.dumps({"apiVersion": "v1", "kind": "Config", "users": [
                 {"name": "shoot", "user": {"tokenFile": d + "/auth-token"}}]}), 0o600, encoding="")]
    collector = ("[Unit]\nDescription=opentelemetry-collector daemon\n[Install]\nWantedBy=multi-user.target\n"
                 "[Service]\nRestart=always\nRestartSec=5\nEnvironment=KUBECONFIG=%s\nExecStart=%s --config=%s"
                 % (p.root + kubeconfig, p.root + binary, p.root + config))
    check = ("[Unit]\nDescription=Health check for opentelemetry-collector.service\n"
             "After=opentelemetry-collector.service\nRequisite=opentelemetry-collector.service\n[Service]\n"
             "Type=oneshot\n# Stand-in for: curl -fsS http://127.0.0.1:18888/metrics\nExecStart=/bin/true")
    timer = ("[Unit]\nDescription=Run opentelemetry-collector-healthcheck.service every 5 minutes\n[Timer]\n"
             "OnActiveSec=5min\nOnUnitActiveSec=5min\nUnit=opentelemetry-collector-healthcheck.service")
    return ([unit("opentelemetry-collector.service", collector, enable=True, command="start",
                  file_paths=[config, ca, binary, kubeconfig]),
             unit("opentelemetry-collector-healthcheck.service", check, enable=False, command="start"),
             unit("opentelemetry-collector-healthcheck.timer", timer, enable=True, command="start")], files)


def journald(p):
    """components/journald/component.go: one file, no unit."""
    return [], [inline("/etc/systemd/journald.conf", "[Journal]\nMaxFileSec=24h\nMaxRetentionSec=14day\n", 0o644,
                       encoding="")]


SYSCTL = ("fs.inotify.max_user_instances = 8192\nfs.inotify.max_user_watches = 524288\n"
          "net.ipv4.conf.all.forwarding = 1\nvm.max_map_count = 135217728\n")


def kernelconfig(p):
    """components/kernelconfig/component.go: the kernel settings (abridged; the provider's line
    appended as provider-aws's EnsureKubernetesGeneralConfiguration does) and systemd-sysctl.service
    without content, enabled and restarted."""
    data = SYSCTL + ("# AWS specific settings\nnet.ipv4.neigh.default.gc_thresh1 = 0\n" if p.provider == "aws" else "")
    path = "/etc/sysctl.d/99-k8s-general.conf"
    return ([unit("systemd-sysctl.service", enable=True, command="restart", file_paths=[path])],
            [inline(path, data, 0o644, encoding="")])


def rootcertificates(p):
    """components/rootcertificates/component.go: the update script (0744), the CA bundle for Debian
    and for RedHat/SUSE, and updatecacerts.service (command start, no `enable`) listing them. The
    stand-in script changes no certificate store, so the unit has no conditions on one."""
    update = "/var/lib/ssl/update-local-ca-certificates.sh"
    files = [inline(update, script("update-local-ca-certificates.tpl.sh (update-ca-certificates --fresh "
                                   "--localcertsdir /var/lib/ca-certificates-local)"), 0o744),
             inline(ROOT_CERTS, p.cluster_ca, 0o644),
             inline("/etc/pki/trust/anchors/ROOTcerts.pem", p.cluster_ca, 0o644)]
    content = ("[Unit]\nDescription=Update local certificate authorities\nDefaultDependencies=no\n"
               "Before=sysinit.target kubelet.service\n[Service]\nType=oneshot\nRemainAfterExit=yes\n"
               "ExecStart=%s\n[Install]\nWantedBy=multi-user.target" % (p.root + update))
    return [unit("updatecacerts.service", content, command="start", file_paths=[f["path"] for f in files])], files


def sshdensurer(p):
    """components/sshdensurer/component.go: the script (b64, upstream's loops for ever) and
    sshd-ensurer.service (command start, Restart=always)."""
    path = "/var/lib/sshd-ensurer/run.sh"
    content = ("[Unit]\nDescription=Ensure SSHD service is enabled or disabled\nDefaultDependencies=no\n"
               "[Service]\nType=simple\nRestart=always\nRestartSec=5\nExecStart=%s\n[Install]\nWantedBy=multi-user.target"
               % (p.root + path))
    return ([unit("sshd-ensurer.service", content, command="start", file_paths=[path])],
            [inline(path, script("sshdensurer/templates/scripts/disable-sshd.tpl.sh", SLEEP), 0o755)])


def gardeneruser(p):
    """components/gardeneruser/component.go: the authorized keys and the script (b64),
    gardener-user.service (enabled, no [Install], no filePaths) and gardener-user.path watching the
    keys."""
    keys, path = "/var/lib/gardener-user-authorized-keys", "/var/lib/gardener-user/run.sh"
    service = ("[Unit]\nDescription=Configure gardener user\nAfter=sshd.service\n[Service]\nType=oneshot\n"
               "RemainAfterExit=yes\nEnvironmentFile=-/etc/environment\nExecStart=%s\n" % (p.root + path))
    watch = "[Path]\nPathChanged=%s\n[Install]\nWantedBy=multi-user.target\n" % (p.root + keys)
    return ([unit("gardener-user.service", service, enable=True), unit("gardener-user.path", watch, enable=True)],
            [inline(keys, p.ssh_keys, 0o644),
             inline(path, script("gardeneruser/templates/scripts/reconcile.tpl.sh"), 0o755)])


def varlibkubeletmount(p):
    """components/varlibkubeletmount/component.go: only with a kubelet data volume."""
    if not p.kubelet_data_volume:
        return [], []
    content = ("[Unit]\nDescription=mount /var/lib/kubelet on kubelet data device\nBefore=kubelet.service\n"
               "[Mount]\nWhat=/dev/disk/by-label/KUBEDEV\nWhere=/var/lib/kubelet\nType=ext4\n"
               "Options=defaults,prjquota,errors=remount-ro\n[Install]\nWantedBy=local-fs.target")
    return [unit("var-lib-kubelet.mount", content)], []


# ------------------------------------------------------------------------------ the extensions

def provider_aws(p):
    """gardener-extension-provider-aws pkg/webhook/controlplane/ensurer.go (EnsureAdditionalUnits,
    EnsureAdditionalFiles): custom-mtu.service with its script, the ECR credential provider as
    imageRef and its config."""
    if p.provider != "aws":
        return [], []
    mtu = "/opt/bin/mtu-customizer.sh"
    content = ("[Unit]\nDescription=Apply a custom MTU to network interfaces\nAfter=network.target\n"
               "Wants=network.target\n\n[Install]\nWantedBy=kubelet.service\n\n[Service]\nType=oneshot\n"
               "RemainAfterExit=yes\nExecStart=%s\n" % (p.root + mtu))
    config = {"apiVersion": "kubelet.config.k8s.io/v1", "kind": "CredentialProviderConfig", "providers": [
        {"name": "ecr-credential-provider", "matchImages": ["*.dkr.ecr.*.amazonaws.com"],
         "defaultCacheDuration": "1h0m0s", "apiVersion": "credentialprovider.kubelet.k8s.io/v1"}]}
    return ([unit("custom-mtu.service", content, enable=True, command="start")],
            [inline(mtu, script("provider-aws's mtu-customizer.sh (ip link set dev <if> mtu 1460)"), 0o755,
                    encoding=""),
             _stand_in_ref(p, "/opt/bin/ecr-credential-provider", "ecr-credential-provider:v1.31.1"),
             inline("/opt/gardener/ecr-credential-provider-config.json", json.dumps(config), 0o755, encoding="")])


def os_gardenlinux(p):
    """gardener-extension-os-gardenlinux pkg/controller/operatingsystemconfig/actuator.go
    (handleReconcileOSC): containerd's limits as a drop-in of an extension unit, and, with
    spec.inPlaceUpdates, pkg/gardenlinux/scripts/inplace-update.sh as an extension file (0755, b64)
    that status.inPlaceUpdates.osUpdate runs with the version."""
    limits = unit("containerd.service", dropins=[("override.conf", "[Service]\nLimitMEMLOCK=67108864\nLimitNOFILE=1048576")])
    body = p.os_update_script or script("pkg/gardenlinux/scripts/inplace-update.sh (gardenlinux-update, then reboot)")
    return ([limits], [inline(OS_UPDATE_SCRIPT, body, 0o755)],
            {"osUpdate": {"command": p.os_update_command, "args": [p.os_version]}})


COMPONENTS = (kubelet, containerd, nodeagent, journald, kernelconfig, rootcertificates, sshdensurer, gardeneruser,
              varlibkubeletmount, provider_aws)


def build(p):
    """The OSC's pieces: spec.files/units (gardenlet's components, the provider's webhook additions)
    and status.extensionFiles/extensionUnits/inPlaceUpdates (the OS extension's)."""
    if p.log_shipper not in ("valitail", "opentelemetry-collector"):
        raise ValueError("log_shipper %r: valitail or opentelemetry-collector" % p.log_shipper)
    units, files = [], []
    for component in COMPONENTS + ((valitail,) if p.log_shipper == "valitail" else (opentelemetrycollector,)):
        u, f = component(p)
        units += u
        files += f
    ext_units, ext_files, in_place = os_gardenlinux(p)
    return {"files": files, "units": units, "extensionFiles": ext_files, "extensionUnits": ext_units,
            "inPlaceUpdates": in_place}


def started_units(osc, replaced=(GNA_UNIT,)):
    """Names of the units of build()'s `osc` that run once it is applied: every unit but the replaced
    ones and those `enable: false` (stopped by the agent), spec's and the extensions' merged."""
    names = []
    for u in osc["units"] + osc["extensionUnits"]:
        if u["name"] not in replaced and u.get("enable") is not False and u["name"] not in names:
            names.append(u["name"])
    return names


# ------------------------------------------------------------------------------ images and YAML

def stand_in_layers(repo_tag):
    path = STAND_IN_IMAGES[repo_tag]
    data = script(repo_tag.split(":")[0] + " (never runs the real thing)", SLEEP).encode()
    return [(registry.compress(registry.tar_bytes([{"name": path.lstrip("/"), "data": data, "mode": 0o755}]), "gzip"),
             "gzip")]


def push_stand_in_images(reg):
    """Push every stand-in image (tiny: one layer, one script) to `reg`."""
    for repo_tag in STAND_IN_IMAGES:
        repo, tag = repo_tag.split(":")
        reg.push_image(repo, tag, stand_in_layers(repo_tag))


def yaml_items(items, indent):
    """Block-style YAML for a list of dicts, in the sandbox templates' layout (`- ` at `indent`,
    the item's other keys at indent + 2); strings JSON-quoted, which YAML reads as double-quoted."""
    out = []
    for item in items:
        out.append(_yaml_map(item, indent + 2, first_prefix=" " * indent + "- "))
    return "".join(out)


def _yaml_map(obj, indent, first_prefix=None):
    out = []
    for i, (k, v) in enumerate(obj.items()):
        pad = first_prefix if (i == 0 and first_prefix is not None) else " " * indent
        if isinstance(v, dict):
            out.append("%s%s:\n%s" % (pad, k, _yaml_map(v, indent + 2)))
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            out.append("%s%s:\n%s" % (pad, k, yaml_items(v, indent)))
        else:
            out.append("%s%s: %s\n" % (pad, k, json.dumps(v)))
    return "".join(out)
