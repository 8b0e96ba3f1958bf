#!/usr/bin/python3
# Keeps literal flags readable at the call (docs/architecture.md "House style"), the way systemd writes them:
#   - a literal true or false passed to a bool parameter of one of our functions (or of a function
#     pointer type of ours) carries the parameter's name, as declared: foo(x, /* force= */ true);
#     a setter x_set_y(obj, bool), whose name says it already, may stay bare;
#   - a literal 0 or 1 passed to a bool parameter is an error: write false or true;
#   - every /* name= */ comment before an argument names the parameter it stands before, for the
#     library's functions too (sd_notify(/* unset_environment= */ false, ...)).
# Uses libclang (Debian's python3-clang-14) on the build directory's compile_commands.json, so the
# names are the declaration's. Usage: check-bool-args.py BUILDDIR [--fix] [PATH-PREFIX...]
# (prefixes relative to the source tree, default agent/ and include/). --fix adds the missing names.
import json, multiprocessing, os, re, shlex, sys

sys.path.append('/usr/lib/python3/dist-packages')   # the Debian package, under any python3
import clang.cindex as ci
from clang.cindex import CursorKind as K, TypeKind as T

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
NAMED = re.compile(rb'/\*\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*\*/$')


def rel(path):
    return os.path.relpath(os.path.abspath(path), TOP)


def compile_args(entry):
    out, skip = [], False
    for a in shlex.split(entry['command'])[1:]:
        if skip:
            skip = False
        elif a in ('-o', '-MF', '-MQ', '-c'):
            skip = True
        elif a.startswith(('-I', '-D', '-U', '-std', '-include', '-isystem')):
            out.append(a)
    return out


def split_args(src, i):
    """The top-level arguments of the call whose '(' is at src[i]: a list of (start, end) offsets,
    or None when the text does not look like a call."""
    if src[i:i + 1] != b'(':
        return None
    spans, depth, start, i = [], 0, i + 1, i + 1
    while i < len(src):
        ch = src[i:i + 1]
        if src.startswith(b'/*', i):
            i = src.find(b'*/', i + 2) + 2
            if i == 1:
                return None
            continue
        if src.startswith(b'//', i):
            i = src.find(b'\n', i)
            continue
        if ch in (b'"', b"'"):
            i += 1
            while i < len(src) and src[i:i + 1] != ch:
                i += 2 if src[i:i + 1] == b'\\' else 1
        elif ch in (b'(', b'[', b'{'):
            depth += 1
        elif ch in (b')', b']', b'}'):
            if depth == 0:
                spans.append((start, i))
                return spans
            depth -= 1
        elif ch == b',' and depth == 0:
            spans.append((start, i))
            start = i + 1
        i += 1
    return None


def strip_arg(src, start, end):
    """The argument's text without surrounding blanks and comments, its offset, and the comment
    right before it (or None)."""
    comment = None
    while True:
        while start < end and src[start:start + 1] in b' \t\n':
            start += 1
        if src.startswith(b'/*', start):
            close = src.find(b'*/', start) + 2
            comment = src[start:close]
            start = close
            continue
        break
    while end > start and src[end - 1:end] in b' \t\n':
        end -= 1
    return src[start:end], start, comment


def params(callee):
    """(parameter types, parameter names, declared in our tree) of a call's callee, or None."""
    if callee.kind == K.FUNCTION_DECL:
        ft = callee.type
        decls = [d for d in (callee, callee.canonical, callee.get_definition()) if d is not None]
        names = [[p.spelling for p in d.get_arguments()] for d in decls]
        where = callee.location.file
    else:
        # A call through a pointer: the names are those of its function type's typedef.
        ft = callee.type.get_canonical()
        if ft.kind == T.POINTER:
            ft = ft.get_pointee()
        td = callee.type.get_declaration()
        if td.kind != K.TYPEDEF_DECL:
            return None
        names = [[p.spelling for p in td.get_children() if p.kind == K.PARM_DECL]]
        where = td.location.file
    if ft.kind != T.FUNCTIONPROTO:
        return None
    types = list(ft.argument_types())
    merged = []
    for i in range(len(types)):
        seen = {n[i] for n in names if i < len(n) and n[i]}
        merged.append(seen.pop() if len(seen) == 1 else None)   # no name, or two names: unknown
    ours = bool(where) and rel(where.name).split(os.sep)[0] in ('agent', 'include', 'tests')
    return types, merged, ours


def check_tu(job):
    entry, prefixes = job
    os.chdir(entry['directory'])
    tu = ci.Index.create().parse(os.path.abspath(entry['file']), args=compile_args(entry))
    texts, found = {}, []
    for d in tu.diagnostics:
        # Unresolved names would hide calls: a file that does not parse is a finding itself.
        if d.severity >= ci.Diagnostic.Error and d.location.file:
            found.append(((rel(d.location.file.name), d.location.offset), 'parse', f'does not parse: {d.spelling}'))
    for c in tu.cursor.walk_preorder():
        if c.kind != K.CALL_EXPR or not c.location.file or not rel(c.location.file.name).startswith(prefixes):
            continue
        callee, kids = c.referenced, list(c.get_children())
        if callee is None or not kids or not kids[0].extent.end.file:
            continue
        path = os.path.abspath(kids[0].extent.end.file.name)
        if path not in texts:
            with open(path, 'rb') as f:
                texts[path] = f.read()
        src = texts[path]
        i = kids[0].extent.end.offset
        while src[i:i + 1] in (b' ', b'\t', b'\n'):
            i += 1
        spans = split_args(src, i)
        nargs = len(list(c.get_arguments()))
        if spans is None or len(spans) != max(nargs, 1) or (nargs == 0 and src[spans[0][0]:spans[0][1]].strip()):
            continue   # a call spelt by a macro: not the text we see
        p = params(callee)
        if p is None:
            continue
        types, names, ours = p
        for k, (start, end) in enumerate(spans[:nargs]):
            text, at, comment = strip_arg(src, start, end)
            if k >= len(types):
                continue
            name = names[k]
            is_bool = types[k].get_canonical().kind == T.BOOL
            where = (rel(path), at)
            m = NAMED.match(comment or b'')
            if m and name and m.group(1).decode() != name:
                found.append((where, 'name', f'/* {m.group(1).decode()}= */ names parameter "{name}" '
                                              f'of {callee.spelling}()'))
            if not is_bool or text not in (b'true', b'false', b'0', b'1'):
                continue
            if text in (b'0', b'1'):
                found.append((where, 'int', f'{text.decode()} passed to bool "{name}" of {callee.spelling}(): '
                                            'write false or true'))
                continue
            setter = '_set_' in callee.spelling and len(types) == 2
            if not ours or setter or m or not name:
                continue
            found.append((where, 'bare', f'bare {text.decode()} for "{name}" of {callee.spelling}(): '
                                         f'write /* {name}= */ {text.decode()}', name))
    return found


def main():
    argv = sys.argv[1:]
    fix = '--fix' in argv
    argv = [a for a in argv if a != '--fix']
    if not argv:
        sys.exit('usage: check-bool-args.py BUILDDIR [--fix] [PATH-PREFIX...]')
    build, prefixes = os.path.abspath(argv[0]), tuple(argv[1:] or ('agent/', 'include/'))
    with open(os.path.join(build, 'compile_commands.json')) as f:
        db = json.load(f)
    jobs, seen = [], set()
    for e in db:
        path = os.path.normpath(os.path.join(e['directory'], e['file']))
        if rel(path).startswith(prefixes) and path.endswith('.c') and path not in seen:
            seen.add(path)
            jobs.append((e, prefixes))
    with multiprocessing.Pool(os.cpu_count()) as pool:
        results = pool.map(check_tu, jobs, chunksize=4)
    found = sorted({f[:2]: f for r in results for f in r}.values())
    if fix:
        edits = {}
        for (path, at), kind, _msg, *name in found:
            if kind == 'bare':
                edits.setdefault(path, []).append((at, name[0]))
        for path, es in edits.items():
            with open(os.path.join(TOP, path), 'rb') as f:
                src = f.read()
            for at, name in sorted(es, reverse=True):
                src = src[:at] + f'/* {name}= */ '.encode() + src[at:]
            with open(os.path.join(TOP, path), 'wb') as f:
                f.write(src)
        found = [f for f in found if f[1] != 'bare']
        print(f'check-bool-args: named {sum(len(e) for e in edits.values())} arguments')
    for (path, at), _kind, msg, *_ in found:
        with open(os.path.join(TOP, path), 'rb') as f:
            line = f.read(at).count(b'\n') + 1
        print(f'{path}:{line}: {msg}')
    print(f'check-bool-args: {len(jobs)} files, {len(found)} findings')
    sys.exit(1 if found else 0)


if __name__ == '__main__':
    main()
