"""The package's module graph: acyclic, with no import of a stepring module
hidden inside a function, and every module importable on its own.

The graph is read from the sources (ast), every import counted wherever it
is (module level or in a function), so a cycle cannot hide behind a lazy
import. The layering it checks (docs/python.md, "Modules"):

    _lib, _placement, spaces          import nothing of stepring but _lib
    _utils                            helpers: _lib, spaces; no env class
    replay                            _lib, _utils
    vector, procs                     the env classes: each imports neither
    registration                      make_vec, register_envs: both classes
    __init__                          the public names

`/usr/bin/python3 python/tests/test_imports.py` prints the graph.
"""
import ast
import os
import subprocess
import sys

import pytest

PKG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "stepring")
PKG = os.path.normpath(PKG)

# The worker program runs as a script: it puts the package on sys.path,
# then imports _lib, so that one import has to sit in its main function.
LAZY_OK = {("_procworker", "_main", "_lib")}


def _modules():
    return sorted(f[:-3] for f in os.listdir(PKG) if f.endswith(".py"))


def _imports(mod):
    """[(imported stepring module, enclosing function or None)] of @mod."""
    names = set(_modules())
    tree = ast.parse(open(os.path.join(PKG, mod + ".py")).read(), mod + ".py")
    out = []

    def visit(node, fn):
        for child in ast.iter_child_nodes(node):
            f = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                else fn
            if isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level == 1 or base.split(".")[0] == "stepring":
                    sub = base.split(".", 1)[1] if base.startswith("stepring.") else \
                        ("" if base == "stepring" else base)
                    if sub:
                        out.append((sub.split(".")[0], fn))
                    else:  # from . import x, y: the submodules among them
                        out.extend((a.name, fn) for a in child.names if a.name in names)
            elif isinstance(child, ast.Import):
                for a in child.names:
                    p = a.name.split(".")
                    if p[0] == "stepring":
                        out.append((p[1] if len(p) > 1 else "__init__", fn))
            visit(child, f)

    visit(tree, None)
    return [(m, fn) for m, fn in out if m != mod]


def graph(module_level=False):
    """{module: [stepring modules it imports]}; module_level: only the
    imports that run when the module is imported."""
    return {m: sorted({i for i, fn in _imports(m) if fn is None or not module_level})
            for m in _modules()}


def _cycle(g):
    """A cycle of @g as a list of modules, or None."""
    state = {}

    def dfs(m, path):
        state[m] = 1
        for n in g.get(m, ()):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state:
                c = dfs(n, path + [n])
                if c:
                    return c
        state[m] = 2
        return None

    for m in g:
        if m not in state:
            c = dfs(m, [m])
            if c:
                return c
    return None


def _closure(g, m):
    seen, todo = set(), [m]
    while todo:
        for n in g[todo.pop()]:
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return seen


def test_cycle_finder_finds_cycles():
    # The check itself must be able to fail.
    assert _cycle({"a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c", "a"]
    assert _cycle({"a": ["b"], "b": [], "c": ["a", "b"]}) is None


def test_graph_is_acyclic():
    g = graph()
    # __init__ names its modules through relative imports: the scan sees them.
    assert {"_lib", "vector", "replay", "registration"} <= set(g["__init__"]), g["__init__"]
    assert _cycle(g) is None, "import cycle: %s" % " -> ".join(_cycle(g))


def test_no_lazy_imports_inside_the_package():
    lazy = sorted((m, fn, i) for m in _modules() for i, fn in _imports(m)
                  if fn is not None and (m, fn, i) not in LAZY_OK)
    assert lazy == [], "stepring modules imported inside functions: %r" % (lazy,)


def test_layers():
    g = graph()
    classes = {"vector", "procs", "replay", "registration"}
    assert g["_placement"] == [], g["_placement"]
    assert set(g["_lib"]) == set(), g["_lib"]
    assert not (_closure(g, "_utils") & classes), g["_utils"]
    assert not (_closure(g, "replay") & {"vector", "procs", "registration"}), g["replay"]
    assert "procs" not in _closure(g, "vector") and "vector" not in _closure(g, "procs")
    importers = {m for m in g if "registration" in g[m]}
    assert importers == {"__init__"}, importers
    both = {m for m in g if {"vector", "procs"} <= set(g[m])}
    assert both == {"registration"}, both


@pytest.mark.parametrize("mod", [m for m in _modules() if m != "__init__"])
def test_module_imports_alone(mod):
    """Each module in a fresh interpreter, with the package's __init__ not
    run first (its imports would otherwise load the rest in a fixed order,
    which hides a cycle that a different first import would hit)."""
    code = (
        "import importlib, sys, types\n"
        "pkg = types.ModuleType('stepring'); pkg.__path__ = [%r]\n"
        "sys.modules['stepring'] = pkg\n"
        "importlib.import_module('stepring.%s')\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('stepring.'))))\n"
    ) % (PKG, mod)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, "importing stepring.%s alone failed:\n%s" % (mod, r.stderr)
    loaded = {m.split(".", 1)[1] for m in r.stdout.split()}
    # What it loaded is what the graph says it needs, nothing more.
    assert loaded == {mod} | _closure(graph(module_level=True), mod), (mod, sorted(loaded))


def test_package_imports_fresh():
    code = ("import stepring, gymnasium\n"
            "assert 'stepring/CartPole-v1' in gymnasium.envs.registry\n"
            "assert stepring.procs.ProcVectorEnv and stepring.make_vec\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(PKG)] + sys.path))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env=env)
    if "No module named 'gymnasium'" in r.stderr:
        pytest.skip("gymnasium is not importable")
    assert r.returncode == 0, r.stderr


if __name__ == "__main__":
    for m, deps in graph().items():
        print("%-13s -> %s" % (m, ", ".join(deps) or "-"))
    c = _cycle(graph())
    print("cycle: %s" % (" -> ".join(c) if c else "none"))
