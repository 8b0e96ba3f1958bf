"""Authorization and admission: what an identity may do.

Owns: the request's attributes (RI: verb, resource, namespace, name, subresource), the Forbidden messages in
the authorizer's format, ``authorize`` (system:masters, anonymous, the Node authorizer, RBAC's
system:node-bootstrapper, gardener-resource-manager's node-agent authorizer, everyone else allowed) and the
NodeRestriction admission plugin (``node_restriction``).
Implements docs/kube-api.md §6.1-§6.3 and §9 items 23, 24 and 33.

* Group system:masters: everything. User system:node:<n> + group system:nodes: Node authorizer (§6.1; get only
  own node, list/watch need fieldSelector metadata.name=<n>; secrets only when a Pod with spec.nodeName=<n>
  references them; leases only kube-node-lease/<n>; events create/update/patch; pods list/watch need
  spec.nodeName=<n>) and NodeRestriction (§6.2: other node, taints, forbidden label keys -> 403).
  Group gardener.cloud:node-agents: the gardener node-agent authorizer table (§6.3; machine name = node name or
  the node labelled node.gardener.cloud/machine-name=<machine>; the OSC Secret is the one the machine's node
  template names when POST /machine declared it, Node or not, else the Node's label); CSRs: create, get own
  (spec.username) only.
  Any other authenticated user: allowed.
"""

from .auth import ANONYMOUS
from .errors import ApiError, details, err_forbidden
from .util import go_quote, json_equal


KUBELET_LABELS = {"kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch", "beta.kubernetes.io/os",
                  "beta.kubernetes.io/arch", "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
                  "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
                  "node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type"}


def node_label_forbidden(key):
    ns = key.split("/", 1)[0] if "/" in key else ""
    if ns == "node-restriction.kubernetes.io" or ns.endswith(".node-restriction.kubernetes.io"):
        return True
    if ns in ("kubernetes.io", "k8s.io") or ns.endswith(".kubernetes.io") or ns.endswith(".k8s.io"):
        if key in KUBELET_LABELS:
            return False
        for allowed in ("kubelet.kubernetes.io", "node.kubernetes.io"):
            if ns == allowed or ns.endswith("." + allowed):
                return False
        return True
    return False


class RI:
    """Request info (apiserver/pkg/endpoints/request/requestinfo.go, reduced)."""

    def __init__(self, path, verb, kind=None, namespace="", name="", subresource=""):
        self.path, self.verb, self.kind = path, verb, kind
        self.namespace, self.name, self.subresource = namespace, name, subresource

    @property
    def resource(self):
        return self.kind.resource if self.kind else ""

    @property
    def group(self):
        return self.kind.group if self.kind else ""


def forbidden_message(ident, ri):
    if not ri.kind:
        return 'User %s cannot %s path %s' % (go_quote(ident.user), ri.verb, go_quote(ri.path))
    res = ri.resource + ("/" + ri.subresource if ri.subresource else "")
    if ri.namespace:
        return 'User %s cannot %s resource %s in API group %s in the namespace %s' % (
            go_quote(ident.user), ri.verb, go_quote(res), go_quote(ri.group), go_quote(ri.namespace))
    return 'User %s cannot %s resource %s in API group %s at the cluster scope' % (
        go_quote(ident.user), ri.verb, go_quote(res), go_quote(ri.group))


def deny(ident, ri, reason=""):
    msg = forbidden_message(ident, ri) + (": " + reason if reason else "")
    if not ri.kind:
        return ApiError(403, "Forbidden", "forbidden: " + msg, details())
    return err_forbidden(ri.resource, ri.group, ri.name, msg)


def selector_value(freqs, key):
    vals = [v for k, op, v in freqs if k == key and op == "="]
    return vals[0] if len(vals) == 1 else None


def pod_references_secret(pod, name):
    spec = pod.get("spec") or {}
    for v in spec.get("volumes") or []:
        if ((v.get("secret") or {}).get("secretName")) == name:
            return True
        for src in (v.get("projected") or {}).get("sources") or []:
            if (src.get("secret") or {}).get("name") == name:
                return True
    for ips in spec.get("imagePullSecrets") or []:
        if ips.get("name") == name:
            return True
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        for e in c.get("env") or []:
            if ((e.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name") == name:
                return True
        for ef in c.get("envFrom") or []:
            if (ef.get("secretRef") or {}).get("name") == name:
                return True
    return False


NONRESOURCE_PUBLIC = ("/version", "/healthz", "/livez", "/readyz")


def authorize(emu, ident, ri, freqs):
    """Raises ApiError 403 when the identity may not do this."""
    if "system:masters" in ident.groups:
        return
    if not ri.kind:
        if ident is ANONYMOUS and ri.path not in NONRESOURCE_PUBLIC:
            raise deny(ident, ri)
        return
    if ident is ANONYMOUS:
        raise deny(ident, ri)
    node = ident.node_name()
    if node is not None:
        return authorize_node(emu, ident, node, ri, freqs)
    if "system:bootstrappers" in ident.groups:
        # RBAC: ClusterRole system:node-bootstrapper, the only thing a bootstrap token is bound to.
        if ri.resource == "certificatesigningrequests" and not ri.subresource and \
                ri.verb in ("create", "get", "list", "watch"):
            return
        raise deny(ident, ri)
    if "gardener.cloud:node-agents" in ident.groups:
        return authorize_node_agent(emu, ident, ri, freqs)


def authorize_node(emu, ident, node, ri, freqs):
    res, verb = ri.resource, ri.verb
    if res == "nodes":
        if verb == "get" and ri.name != node:
            raise deny(ident, ri, "node '%s' cannot read '%s', only its own Node object" % (node, ri.name))
        if verb in ("list", "watch") and selector_value(freqs, "metadata.name") != node:
            raise deny(ident, ri, "node '%s' cannot read all nodes, only its own Node object" % node)
        if verb == "delete" and ri.name != node:
            raise deny(ident, ri, "node '%s' cannot delete '%s'" % (node, ri.name))
        if verb not in ("get", "list", "watch", "create", "update", "patch", "delete"):
            raise deny(ident, ri)
        return
    if res == "secrets":
        if verb not in ("get", "list", "watch"):
            raise deny(ident, ri)
        name = ri.name if verb == "get" else selector_value(freqs, "metadata.name")
        if not name:
            raise deny(ident, ri, "can only read individual secrets")
        pods = [p for p in emu.store.list("pods", ri.namespace)
                if (p.get("spec") or {}).get("nodeName") == node]
        if not any(pod_references_secret(p, name) for p in pods):
            raise deny(ident, ri, "no relationship found between node '%s' and this object" % node)
        return
    if res == "leases":
        if verb not in ("get", "create", "update", "patch", "delete"):
            raise deny(ident, ri, "can only get, create, update, patch, or delete a node lease")
        if ri.namespace != "kube-node-lease":
            raise deny(ident, ri, 'can only access leases in the "kube-node-lease" system namespace')
        if verb != "create" and ri.name != node:
            raise deny(ident, ri, "can only access node lease with the same name as the requesting node")
        return
    if res == "events":
        if verb not in ("create", "update", "patch"):
            raise deny(ident, ri)
        return
    if res == "pods":
        if verb in ("list", "watch") and selector_value(freqs, "spec.nodeName") != node:
            raise deny(ident, ri, "can only list/watch pods with spec.nodeName field selector")
        return
    raise deny(ident, ri)


def node_agent_node(emu, ident):
    machine = ident.user.rsplit(":", 1)[-1]
    for n in emu.store.list("nodes"):
        if (n["metadata"].get("labels") or {}).get("node.gardener.cloud/machine-name") == machine:
            return n
    return emu.store.get("nodes", "", machine)


def authorize_node_agent(emu, ident, ri, freqs):
    """gardener-resource-manager's node-agent-authorizer (explicit Deny outside its table)."""
    node = node_agent_node(emu, ident)
    nname = node["metadata"]["name"] if node else None
    res, verb = ri.resource, ri.verb
    why = "node-agent-authorizer: this request is not allowed for gardener-node-agent"
    if res == "nodes":
        if verb in ("list", "watch"):
            return
        if verb in ("get", "patch", "update") and ri.name and ri.name == nname:
            return
    elif res == "secrets" and ri.namespace == "kube-system" and verb in ("get", "list", "watch"):
        name = ri.name if verb == "get" else selector_value(freqs, "metadata.name")
        allowed = {"gardener-valitail", "gardener-opentelemetry-collector"}
        machine = emu.machines.get(ident.user.rsplit(":", 1)[-1])
        if machine is not None:
            # The seed's Machine names the OSC Secret in its node template, Node or not: a fresh node's agent
            # reads it before its kubelet registers the Node.
            allowed.add(machine.get("worker.gardener.cloud/gardener-node-agent-secret-name"))
        elif node:
            allowed.add((node["metadata"].get("labels") or {}).get(
                "worker.gardener.cloud/gardener-node-agent-secret-name"))
        if name in allowed:
            return
    elif res == "leases" and ri.namespace == "kube-system" and verb in ("get", "list", "watch", "create", "update"):
        name = ri.name or selector_value(freqs, "metadata.name")
        if verb == "create" or (nname and name == "gardener-node-agent-" + nname):
            return
    elif res == "events" and verb in ("create", "patch"):
        return
    elif res == "certificatesigningrequests" and not ri.subresource and verb in ("get", "create"):
        if verb == "create":
            return
        csr = emu.store.get("certificatesigningrequests", "", ri.name)
        if csr is not None and (csr.get("spec") or {}).get("username") == ident.user:
            return
        raise deny(ident, ri, "gardener-node-agent is only allowed to read or request CSRs for its own user %s"
                   % go_quote(ident.user))
    elif res == "pods" and verb in ("get", "list", "watch", "delete"):
        if verb in ("list", "watch") and selector_value(freqs, "spec.nodeName") != nname:
            raise deny(ident, ri, why)
        return
    raise deny(ident, ri, why)


def node_restriction(ident, kind, op, ns, name, old, new):
    """NodeRestriction admission for system:node:<n> identities."""
    node = ident.node_name() if ident else None
    if node is None:
        return
    if kind.storage == "nodes":
        if name != node:
            raise err_forbidden("nodes", "", name, 'node %s is not allowed to modify node %s' %
                                (go_quote(node), go_quote(name)))
        new_labels = (new.get("metadata") or {}).get("labels") or {}
        if op == "create":
            bad = sorted(k for k in new_labels if node_label_forbidden(k))
            if bad:
                raise err_forbidden("nodes", "", name, "is not allowed to set the following labels: %s" %
                                    ", ".join(bad))
            return
        if not json_equal((old.get("spec") or {}).get("taints") or [], (new.get("spec") or {}).get("taints") or []):
            raise err_forbidden("nodes", "", name, "node %s is not allowed to modify taints" % go_quote(node))
        if (new.get("spec") or {}).get("configSource") and not json_equal(
                (old.get("spec") or {}).get("configSource"), (new.get("spec") or {}).get("configSource")):
            raise err_forbidden("nodes", "", name, "node %s is not allowed to set spec.configSource" % go_quote(node))
        old_labels = (old.get("metadata") or {}).get("labels") or {}
        changed = {k for k in set(old_labels) | set(new_labels) if old_labels.get(k) != new_labels.get(k)}
        bad = sorted(k for k in changed if node_label_forbidden(k))
        if bad:
            raise err_forbidden("nodes", "", name, "is not allowed to modify labels: %s" % ", ".join(bad))
    elif kind.storage == "leases" and op == "create":
        if ns != "kube-node-lease" or name != node:
            raise err_forbidden("leases", "coordination.k8s.io", name,
                                "can only access node lease with the same name as the requesting node")
