"""The command line of the emulator (``python3 -m kube_emulator`` or ``python3 tests/emulator/kube_emulator.py``).

Prints the ready-file JSON on stdout once serving, runs until SIGTERM or SIGINT.

Command line
------------
--state-dir DIR (required)   --port N (0 = free port)   --control-port N   --bind 127.0.0.1
--server-host H        host written into the kubeconfigs (default --bind); added to the server cert SANs
--ready-file PATH      default DIR/ready
--token TOKEN[=USER[,GROUP...]]   repeatable; the first is the kubeconfig token. Default: one random token for
                       user "emulator-admin" in group system:masters. A bare TOKEN is an admin token.
--client-cert CN[,ORG...]  repeatable; the first writes client.crt/key + DIR/kubeconfig-cert
--server-cert good|wrong-ca|wrong-san|expired      --client-auth none|optional|required (default optional)
--san DNS:x|IP:y       extra server SANs       --node NAME   seed a kubelet-like Node (repeatable)
--seed FILE            JSON object or list to seed          --initial-rv N (default 100)
--server-version v1.32.4      --config KEY=VALUE (runtime config: config.py)      --debug-log FILE
"""

import argparse
import json
import threading

from .config import DEFAULT_CONFIG, SERVER_VERSION
from .emulator import Emulator
from .kinds import node_template
from .tls import TlsConfig


def parse_token_arg(s):
    """TOKEN[=USER[,GROUP...]]"""
    tok, _, rest = s.partition("=")
    if not rest:
        return tok, "emulator-admin", ["system:masters"]
    parts = rest.split(",")
    return tok, parts[0], parts[1:]


def parse_cert_arg(s):
    """CN[,ORG...]"""
    parts = s.split(",")
    return parts[0], parts[1:]


def main(argv=None):
    ap = argparse.ArgumentParser(description="Kubernetes API-server emulator for integration tests")
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--control-port", type=int, default=0)
    ap.add_argument("--bind", default="127.0.0.1")
    ap.add_argument("--server-host", default=None, help="host written into kubeconfigs (default: --bind)")
    ap.add_argument("--ready-file", default=None)
    ap.add_argument("--token", action="append", default=[], help="TOKEN[=USER[,GROUP...]]; first one is used in "
                    "the kubeconfig (default: random admin token)")
    ap.add_argument("--client-cert", action="append", default=[], help="CN[,ORG...]: also write client "
                    "cert/key and kubeconfig-cert (first one)")
    ap.add_argument("--server-cert", default="good", choices=TlsConfig.MODES)
    ap.add_argument("--client-auth", default="optional", choices=TlsConfig.CLIENT_MODES)
    ap.add_argument("--san", action="append", default=[], help="extra subjectAltName, e.g. DNS:foo or IP:10.96.0.1")
    ap.add_argument("--node", action="append", default=[], help="seed a kubelet-like Node with this name")
    ap.add_argument("--seed", action="append", default=[], help="JSON file with an object or a list of objects")
    ap.add_argument("--initial-rv", type=int, default=100)
    ap.add_argument("--server-version", default=SERVER_VERSION)
    ap.add_argument("--config", action="append", default=[], help="KEY=VALUE (see DEFAULT_CONFIG)")
    ap.add_argument("--debug-log", default=None)
    a = ap.parse_args(argv)
    cfg = {}
    for kv in a.config:
        k, _, v = kv.partition("=")
        cfg[k] = v if DEFAULT_CONFIG.get(k) is not True and DEFAULT_CONFIG.get(k) is not False else \
            v.lower() in ("1", "true", "yes")
    emu = Emulator(a.state_dir, a.bind, a.port, a.control_port, a.server_host,
                   [parse_token_arg(t) for t in a.token], [parse_cert_arg(c) for c in a.client_cert],
                   a.server_cert, a.client_auth, cfg, a.initial_rv, a.server_version, a.san, a.debug_log,
                   a.ready_file)
    for n in a.node:
        emu.seed(node_template(n), "kubelet", "kubelet")
    for path in a.seed:
        with open(path) as f:
            data = json.load(f)
        for o in data if isinstance(data, list) else [data]:
            emu.seed(o)
    import signal
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    emu.start()
    print(json.dumps(emu.info()), flush=True)
    stop.wait()
    emu.stop()
    return 0
