#!/usr/bin/env python3
# Keeps the architecture the folders promise (run on every build by agent/meson.build):
#   - core/ is pure: no sd-*, curl or libarchive header, directly or through a header (it includes
#     only core/ and util/ headers, and util/ headers include none of them either);
#   - each layer includes only the layers below it (LAYERS);
#   - no include cycle between modules (foo.c/foo.h form module foo);
#   - a family's private header (agent/<layer>/foo-internal.h, shared by foo.c and foo-*.c beside it)
#     is included only by its own files, by its bare name; every other include names its folder.
import os, re, sys

top, stamp = sys.argv[1], sys.argv[2]
LAYERS = {
    'util':    {'util'},
    'core':    {'core', 'util'},
    'net':     {'net', 'util'},
    'systemd': {'systemd', 'util', 'core'},
    'kube':    {'kube', 'net', 'util', 'core'},
    'identity': {'identity', 'kube', 'net', 'util', 'core'},
    'oci':     {'oci', 'net', 'util', 'core'},
    'kubelet': {'kubelet', 'oci', 'net', 'util', 'core'},
    'os':      {'os', 'oci', 'net', 'util', 'core'},
    'apply':   {'apply', 'core', 'util', 'systemd', 'net', 'kube', 'oci'},
    # Every write to the Node and the world, for the update run and the duties alike.
    'report':  {'report', 'core', 'util', 'kube', 'net'},
    # The periodic duties: each alone on the loop, none knows the update run or the process.
    'duties':  {'duties', 'report', 'apply', 'core', 'util', 'systemd', 'net', 'kube', 'kubelet'},
    # The update run: carries out the core's actions through every edge layer; no duty, no process.
    'update':  {'update', 'report', 'apply', 'core', 'util', 'systemd', 'net', 'kube', 'identity', 'oci', 'kubelet', 'os'},
    'daemon':  None,  # the process, the owner: may include every layer
}
PURE = {'core'}
PURE_HEADERS = {'util'}   # util/log.c talks to the journal; its header does not
IMPURE_SYSTEM = re.compile(r'^(systemd/|curl/|archive)')
INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]', re.M)
PRIVATE = re.compile(r'^(.+)-internal\.h$')
GENERATED = {'build-config.h'}   # meson's configuration header, in the build directory


def check_bare_include(root, layer, name, path, inc):
    """An include without a folder: the generated configuration, or the private header of the
    family `name` belongs to. Returns the module it adds to the include graph, or None."""
    if inc in GENERATED:
        return None
    m = PRIVATE.match(inc)
    if not m:
        errors.append(f'{path}: "{inc}" must name its folder ("<layer>/{inc}")')
        return None
    family = m.group(1)
    if root != 'agent' or not os.path.isfile(os.path.join(top, 'agent', layer, inc)):
        errors.append(f'{path}: "{inc}" is not a private header beside it in agent/{layer}/')
    elif name != family + '.c' and not (name.startswith(family + '-') and name.endswith('.c')):
        errors.append(f'{path}: "{inc}" is private to agent/{layer}/{family}.c and {family}-*.c')
    return layer + '/' + family

errors, edges = [], {}
for root in ('agent', 'include'):
    for layer in LAYERS:
        d = os.path.join(top, root, layer)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if not name.endswith(('.c', '.h')):
                continue
            path = os.path.join(root, layer, name)
            module = layer + '/' + re.sub(r'(-internal)?\.[ch]$', '', name)
            if root == 'include' and PRIVATE.match(name):
                errors.append(f'{path}: a private header lives beside its family in agent/{layer}/')
            with open(os.path.join(top, path), encoding='utf-8') as f:
                text = f.read()
            for kind, inc in INCLUDE.findall(text):
                if kind == '<':
                    if (layer in PURE or (layer in PURE_HEADERS and root == 'include')) and IMPURE_SYSTEM.match(inc):
                        errors.append(f'{path}: pure layer {layer}/ includes <{inc}>')
                    continue
                if '/' not in inc:
                    # A family member depends on its family's insides: an edge for the cycle check.
                    dep = check_bare_include(root, layer, name, path, inc)
                    if dep and dep != module:
                        edges.setdefault(module, set()).add(dep)
                    continue
                if PRIVATE.match(os.path.basename(inc)):
                    errors.append(f'{path}: "{inc}" is a private header: only its family includes it, '
                                  'by its bare name')
                    continue
                dep_layer = inc.split('/')[0]
                allowed = LAYERS.get(layer)
                if allowed is not None and dep_layer not in allowed:
                    errors.append(f'{path}: layer {layer}/ must not include "{inc}"')
                dep = re.sub(r'\.h$', '', inc)
                if dep != module:
                    edges.setdefault(module, set()).add(dep)

# Cycle search (iterative DFS with colours).
WHITE, GREY, BLACK = 0, 1, 2
colour = {}
def visit(start):
    stack = [(start, iter(sorted(edges.get(start, ()))))]
    path = [start]
    colour[start] = GREY
    while stack:
        node, it = stack[-1]
        nxt = next(it, None)
        if nxt is None:
            colour[node] = BLACK
            stack.pop()
            path.pop()
            continue
        c = colour.get(nxt, WHITE)
        if c == GREY:
            errors.append('include cycle: ' + ' -> '.join(path[path.index(nxt):] + [nxt]))
        elif c == WHITE:
            colour[nxt] = GREY
            path.append(nxt)
            stack.append((nxt, iter(sorted(edges.get(nxt, ())))))
for m in sorted(edges):
    if colour.get(m, WHITE) == WHITE:
        visit(m)

if errors:
    sys.stderr.write('\n'.join(errors) + '\n')
    sys.exit(1)
open(stamp, 'w').close()
