#!/usr/bin/python3
"""Run Gymnasium's own vector tests with their vector envs built by stepring.

    /usr/bin/python3 tools/gym_vector_tests.py [--tests DIR] [--json OUT] [pytest args...]

DIR is the `tests/` folder of a Gymnasium source tree (tag v1.3.0 for the
Gymnasium this project tests against; default: ../shared/thirdparty/python/tests
when it is there, else `$GYMNASIUM_TESTS`). It runs `DIR/vector` and
`DIR/wrappers/vector`, unmodified, under pytest with this file loaded as a
plugin (`-p gym_vector_tests`) that sends their vector-env constructors to
stepring wherever stepring supports the env:

* `SyncVectorEnv(env_fns, ...)`: when every env_fns[i]() is `gymnasium.make`
  of an env id stepring has built in (CartPole-v1, Pendulum-v1, ...), with no
  wrapper beyond the registry's (TimeLimit, OrderEnforcing, PassiveEnvChecker),
  no render mode and keyword arguments stepring takes, a stepring thread pool
  (`stepring.make_vec(id, n, seed=...)`, the C env); otherwise, for envs with
  a Box observation and a Discrete or Box action space, a process pool of
  those Python envs (`stepring.make_vec(env_fns=...)`); otherwise Gymnasium's
  own SyncVectorEnv.
* `AsyncVectorEnv(env_fns, ...)`: a process pool of the Python envs when their
  spaces fit, else Gymnasium's AsyncVectorEnv.
* `gymnasium.make_vec(id, ...)` without `wrappers`: for a built-in id with no
  vectorization mode, "sync" (instead of Gymnasium's own numpy CartPole
  vector env), which the rules above then send to stepring.

The seeds of envs that were reset with a seed before the vector env was made
(the tests' `make_env(id, i)`) carry over: seeds s, s+1, ... make the pool with
seed=s. A test "applies" when it built at least one stepring env; the summary
counts passed and failed tests among those, and lists each failure with the
known reason from KNOWN below (docs/python.md has the same list), or "NEW".
Exit status: 0 when every failure is a known one, 1 otherwise.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Failures with their reasons: "file::test name prefix" (class::test for a
# test in a class). Keep docs/python.md ("Gymnasium's vector tests") in step.
_SPACES = ("a process pool takes its spaces from env_fns[0] and builds the other envs in "
           "its workers only: an env whose spaces differ is not detected")
_SPLIT = ("AsyncVectorEnv's split-phase API (reset_async/reset_wait, step_async/step_wait "
          "and their timeouts): a process pool is a plain VectorEnv (reset, step); "
          "step_timeout= restarts a hung worker instead")
KNOWN = {
    "test_async_vector_env.py::test_async_vector_subenv_error":
        "crash isolation: an exception in an env's step is a fault of its worker (restarted, "
        "its rows truncated with info['fault']), not an exception in the trainer",
    "test_async_vector_env.py::test_check_spaces_async_vector_env": _SPACES,
    "test_sync_vector_env.py::test_check_spaces_sync_vector_env": _SPACES,
    "test_observation_mode.py::TestVectorEnvObservationModes::test_mixed_observation_spaces":
        _SPACES,
    "test_observation_mode.py::TestVectorEnvObservationModes::"
    "test_obs_mode_same_different_spaces": _SPACES,
    "test_async_vector_env.py::test_reset_out_of_order_async_vector_env": _SPLIT,
    "test_async_vector_env.py::test_reset_timeout_async_vector_env": _SPLIT,
    "test_async_vector_env.py::test_step_out_of_order_async_vector_env": _SPLIT,
    "test_async_vector_env.py::test_step_timeout_async_vector_env": _SPLIT,
    "test_sync_vector_env.py::test_set_attr_sync_vector_env":
        "different values per env of a C env's parameter (gravity): the envs of a thread "
        "pool share their parameters (the pool's spec); a list of one value works",
    "test_normalize_reward.py::test_equivalence_with_wrapper":
        "it reads SyncVectorEnv's `envs` (the sub-env objects): a pool has no Python env "
        "objects in the trainer to hand out",
}

_state = {"built": 0, "kinds": set()}


def _note(kind):
    _state["built"] += 1
    _state["kinds"].add(kind)


def _install():
    """Replace Gymnasium's vector-env constructors (before the test modules
    import them)."""
    import gymnasium
    import gymnasium.vector
    import gymnasium.vector.async_vector_env as ave
    import gymnasium.vector.sync_vector_env as sve
    from gymnasium.envs import registration

    import stepring

    orig_sync, orig_async = sve.SyncVectorEnv, ave.AsyncVectorEnv
    orig_make_vec = registration.make_vec
    builtin = set(stepring.list_envs())
    passthrough_wrappers = {"TimeLimit", "OrderEnforcing", "PassiveEnvChecker"}

    def probe(env):
        """(id, kwargs for stepring.make_vec, seed) of a gymnasium.make of a
        built-in env, or None."""
        spec = getattr(env, "spec", None)
        if spec is None or spec.id not in builtin:
            return None
        e = env
        limit = None
        while hasattr(e, "env") and e is not e.unwrapped:
            name = type(e).__name__
            if name not in passthrough_wrappers:
                return None
            if name == "TimeLimit":
                limit = e._max_episode_steps
            e = e.env
        u = env.unwrapped
        if getattr(u, "render_mode", None) is not None:
            return None
        kw = dict(spec.kwargs or {})
        kw.pop("render_mode", None)
        ref = registration.registry[spec.id].kwargs or {}
        for k, v in list(kw.items()):
            if k in ref and ref[k] == v:
                del kw[k]
        if limit != (registration.registry[spec.id].max_episode_steps):
            kw["max_episode_steps"] = limit
        return spec.id, kw, getattr(u, "_np_random_seed", None)

    def renders(envs):
        return any(getattr(e, "render_mode", None) is not None for e in envs)

    def adopt_spaces(v, envs):
        """SyncVectorEnv's action spaces are env 0's (its RNG as the test left
        it) and batch_space of it (a copy of that RNG): the same for the
        stepring env."""
        import copy
        a = envs[0].action_space
        if a == v.single_action_space:
            v.single_action_space._np_random = copy.deepcopy(a.np_random)
            v.action_space._np_random = copy.deepcopy(a.np_random)
        return v

    def seed_of(envs):
        """s when the envs were seeded s, s+1, ... (make_env(id, i)), else None."""
        seeds = [getattr(e.unwrapped, "_np_random_seed", None) for e in envs]
        if seeds and all(isinstance(s, int) and s >= 0 for s in seeds) and \
                seeds == list(range(seeds[0], seeds[0] + len(seeds))):
            return seeds[0]
        return None

    def _as_thread_pool(envs, copy, autoreset_mode, seed):
        got = [probe(e) for e in envs]
        if not got or any(g is None for g in got):
            return None
        ids = {g[0] for g in got}
        kws = [g[1] for g in got]
        if len(ids) != 1 or any(k != kws[0] for k in kws):
            return None
        try:
            v = stepring.make_vec(ids.pop(), len(envs), seed=seed, copy=copy,
                                  autoreset_mode=autoreset_mode, **kws[0])
        except TypeError:
            return None  # a keyword stepring does not take
        _note("threads")
        return v

    def _as_proc_pool(env_fns, copy, autoreset_mode, seed):
        try:
            v = stepring.make_vec(env_fns=list(env_fns), copy=copy, seed=seed,
                                  autoreset_mode=autoreset_mode)
        except (ValueError, TypeError):
            return None  # spaces a process pool does not hold
        _note("procs")
        return v

    class _Meta(type):
        def __instancecheck__(cls, obj):
            return isinstance(obj, cls._orig)

        def __subclasscheck__(cls, sub):
            return issubclass(sub, cls._orig)

    class SyncVectorEnv(metaclass=_Meta):
        _orig = orig_sync

        def __new__(cls, env_fns, copy=True, observation_mode="same",
                    autoreset_mode=gymnasium.vector.AutoresetMode.NEXT_STEP):
            env_fns = list(env_fns)
            if observation_mode == "same" and env_fns:
                envs = [f() for f in env_fns]
                v = None
                try:
                    if not renders(envs):
                        seed = seed_of(envs)
                        v = _as_thread_pool(envs, copy, autoreset_mode, seed)
                        if v is None:
                            v = _as_proc_pool(env_fns, copy, autoreset_mode, seed)
                        if v is not None:
                            adopt_spaces(v, envs)
                finally:
                    for e in envs:
                        e.close()
                if v is not None:
                    return v
            return orig_sync(env_fns, copy=copy, observation_mode=observation_mode,
                             autoreset_mode=autoreset_mode)

    class AsyncVectorEnv(metaclass=_Meta):
        _orig = orig_async

        def __new__(cls, env_fns, shared_memory=True, copy=True, context=None, daemon=True,
                    worker=None, observation_mode="same",
                    autoreset_mode=gymnasium.vector.AutoresetMode.NEXT_STEP):
            env_fns = list(env_fns)
            if observation_mode == "same" and worker is None and context is None and env_fns:
                envs = [f() for f in env_fns]
                v = None
                try:
                    if not renders(envs):
                        v = _as_proc_pool(env_fns, copy, autoreset_mode, seed_of(envs))
                        if v is not None:
                            adopt_spaces(v, envs)
                finally:
                    for e in envs:
                        e.close()
                if v is not None:
                    return v
            return orig_async(env_fns, shared_memory=shared_memory, copy=copy,
                              context=context, daemon=daemon, worker=worker,
                              observation_mode=observation_mode,
                              autoreset_mode=autoreset_mode)

    def make_vec(id, num_envs=1, vectorization_mode=None, vector_kwargs=None, wrappers=None,
                 **kwargs):
        env_id = id.id if isinstance(id, registration.EnvSpec) else id
        if vectorization_mode is None and not wrappers and env_id in builtin:
            vectorization_mode = "sync"
        return orig_make_vec(id, num_envs=num_envs, vectorization_mode=vectorization_mode,
                             vector_kwargs=vector_kwargs, wrappers=wrappers, **kwargs)

    for mod in (gymnasium.vector, sve):
        mod.SyncVectorEnv = SyncVectorEnv
    for mod in (gymnasium.vector, ave):
        mod.AsyncVectorEnv = AsyncVectorEnv
    registration.make_vec = make_vec
    gymnasium.make_vec = make_vec


# --- pytest plugin -----------------------------------------------------------

_results = {}


def pytest_configure(config):
    _install()


def pytest_runtest_setup(item):
    _state["built"] = 0
    _state["kinds"] = set()


def pytest_runtest_logreport(report):
    r = _results.setdefault(report.nodeid, {"outcome": "passed", "applies": False,
                                            "kinds": [], "message": ""})
    if _state["built"]:
        r["applies"] = True
        r["kinds"] = sorted(set(r["kinds"]) | _state["kinds"])
    if report.failed:
        r["outcome"] = "failed"
        msg = getattr(report.longrepr, "reprcrash", None)
        r["message"] = msg.message.splitlines()[0][:200] if msg is not None else \
            str(report.longrepr).splitlines()[-1][:200]
    elif report.skipped and r["outcome"] != "failed":
        r["outcome"] = "skipped"


def _reason(nodeid):
    path, _, name = nodeid.partition("::")
    base = os.path.basename(path)
    for key, why in KNOWN.items():
        f, _, t = key.partition("::")
        if f == base and name.startswith(t):
            return why
    return None


def pytest_sessionfinish(session, exitstatus):
    app = {k: v for k, v in _results.items() if v["applies"]}
    passed = sorted(k for k, v in app.items() if v["outcome"] == "passed")
    failed = sorted(k for k, v in app.items() if v["outcome"] == "failed")
    skipped = sorted(k for k, v in app.items() if v["outcome"] == "skipped")
    na = len(_results) - len(app)
    new = [k for k in failed if _reason(k) is None]
    out = sys.stdout
    out.write("\n=== Gymnasium vector tests through stepring ===\n")
    out.write("applied (built a stepring env): %d: %d passed, %d failed, %d skipped; "
              "did not apply: %d\n" % (len(app), len(passed), len(failed), len(skipped), na))
    for k in failed:
        why = _reason(k)
        out.write("  FAIL %s [%s]\n      %s\n      reason: %s\n"
                  % (k, ",".join(app[k]["kinds"]), app[k]["message"], why or "NEW"))
    out.write("unexplained failures: %d\n" % len(new))
    dest = os.environ.get("GYM_VECTOR_TESTS_JSON")
    if dest:
        with open(dest, "w") as f:
            json.dump({"results": _results, "passed": passed, "failed": failed,
                       "skipped": skipped, "not_applicable": na,
                       "unexplained": new}, f, indent=1)
    if not new and session.exitstatus == 1:
        session.exitstatus = 0


def main(argv):
    import subprocess
    tests, dest, rest = None, None, []
    it = iter(argv)
    for a in it:
        if a == "--tests":
            tests = next(it)
        elif a == "--json":
            dest = next(it)
        else:
            rest.append(a)
    if tests is None:
        cand = os.path.join(ROOT, "..", "shared", "thirdparty", "python", "tests")
        tests = cand if os.path.isdir(cand) else os.environ.get("GYMNASIUM_TESTS")
    if not tests or not os.path.isdir(os.path.join(tests, "vector")):
        sys.stderr.write("gym_vector_tests: no Gymnasium tests folder (give --tests DIR, the "
                         "tests/ of a Gymnasium 1.3.0 source tree)\n")
        return 77
    tests = os.path.abspath(tests)
    env = dict(os.environ)
    paths = [HERE, os.path.dirname(tests), os.path.join(ROOT, "python")]
    gym_copy = os.path.join(ROOT, "..", "shared", "thirdparty", "python")
    if os.path.isdir(gym_copy):
        paths.append(gym_copy)
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if dest:
        env["GYM_VECTOR_TESTS_JSON"] = os.path.abspath(dest)
    cmd = [sys.executable, "-m", "pytest", "-p", "gym_vector_tests", "-q", "-p", "no:cacheprovider",
           "--rootdir", os.path.dirname(tests), os.path.join(tests, "vector"),
           os.path.join(tests, "wrappers", "vector")] + rest
    return subprocess.call(cmd, env=env, cwd=os.path.dirname(tests))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
