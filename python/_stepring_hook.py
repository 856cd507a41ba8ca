"""Registers stepring's envs with Gymnasium when Gymnasium is imported, so
that gymnasium.make_vec("stepring/CartPole-v1", ...) works without
`import stepring` (Gymnasium 1.x loads no plugins by itself: its
registration module reads no entry points).

The installed package's stepring-gymnasium.pth imports this module at
interpreter start-up (site.py runs a .pth line that starts with "import").
It costs one small finder on sys.meta_path, which looks at each import's
name until `gymnasium` is imported: then it wraps that import so that,
once the gymnasium package has run, `import stepring` registers every
built-in env as stepring/<id> (stepring/__init__.py calls register_envs),
and removes itself. Nothing is imported before that: not numpy, not the
library. STEPRING_NO_GYMNASIUM=1 turns it off (and stepring's Gymnasium
support with it). A failure to import stepring is a warning, never an
error of `import gymnasium`.

Not part of the stepring package (importing a module of it would run
stepring/__init__.py at every start-up); only the installed package has it.
"""
import os
import sys


def _register():
    try:
        import stepring  # noqa: F401  (its import registers stepring/<id>)
    except Exception as e:  # noqa: BLE001 - gymnasium must import regardless
        import warnings
        warnings.warn("stepring: its envs are not registered with Gymnasium: %s: %s"
                      % (type(e).__name__, e), RuntimeWarning)


class _GymnasiumFinder:
    """One shot: on the import of the top-level `gymnasium` package, find it
    with the other finders and run _register after its module has run."""

    def find_spec(self, name, path=None, target=None):
        if name != "gymnasium":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        import importlib.util
        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):
            run(module)
            _register()

        loader.exec_module = exec_module
        return spec


def install():
    if os.environ.get("STEPRING_NO_GYMNASIUM") or "gymnasium" in sys.modules:
        return
    if not any(isinstance(f, _GymnasiumFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _GymnasiumFinder())


install()
