"""Kubernetes API-server emulator for the inplace-agent integration tests, as a package of modules.

Runs as a program (``python3 -m kube_emulator --state-dir DIR --port 0 ...`` with tests/emulator on the module
path, or ``python3 tests/emulator/kube_emulator.py ...``; ready when the ready file appears, which holds the same
JSON that is printed on stdout) or is imported (``Emulator(...).start()``). Python 3 stdlib only; certificates
are made with the ``openssl`` CLI. Behaviour follows docs/kube-api.md (section numbers in the modules refer to
it: §9 is the emulator's checklist, §10 the faults the tests inject).

Transport limitation: the stdlib cannot speak HTTP/2, so the API port serves **HTTP/1.1 only** (ALPN selects
"http/1.1"), with keep-alive and ``Transfer-Encoding: chunked`` watch streams. HTTP/2-only behaviour (GOAWAY
frames, multiplexing, PING) is approximated by connection closes; see the ``close-connections`` route.

Modules, each owning one concern (a module uses only those above it):
  util         JSON as Go encodes it, Kubernetes times, the request/watch/TLS logs, the handlers' base
  errors       Status errors (apimachinery shapes), FieldError, ControlError
  config       runtime configuration (DEFAULT_CONFIG: every knob and its default)
  schema       the kinds' schemas; unknown fields, JSON types, time normalisation
  selectors    field and label selectors
  csr          the CertificateSigningRequest's validation and update strategies
  validation   names, labels, ObjectMeta, per-kind rules, ListOptions
  kinds        the served kinds, list merge keys, Event conversion, the Node template
  protobuf     protobuf request bodies (CSRs) and the OpenAPI v2 protobuf document
  discovery    discovery, OpenAPI, server-side tables (kubectl)
  patch        merge patch, strategic merge patch, JSON patch
  ssa          server-side apply and managedFields
  store        objects, the global resourceVersion, watch history, TTLs
  watch        watchers and the watch stream (WatchStream, mixed into the API handler)
  tls          CAs, server and client certificates, TLS contexts
  auth         authentication: tokens, bootstrap tokens, client certificates
  authz        authorization (Node and node-agent authorizers) and NodeRestriction
  faults       fault rules and their behaviour (FaultInjection, mixed into the API handler)
  api          get/list/create/update/patch/delete semantics, independent of HTTP
  controllers  the CSR approver and signer a cluster runs
  apiserver    the HTTPS listener, connections and request handler
  control      the control API (plain HTTP on loopback): every route
  emulator     Emulator: everything put together, the state directory
  cli          the command line
"""

from .cli import main
from .emulator import Emulator

__all__ = ["Emulator", "main"]
