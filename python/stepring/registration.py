"""make_vec and the Gymnasium registration, in one place (as
gymnasium/envs/registration.py): stepring.make_vec(env_id | env_fns) picks
the env class (VectorEnv: C envs on threads; ProcVectorEnv: Python envs
in worker processes), and register_envs() makes every built-in env (and
each env plugin given) "stepring/<id>" for gymnasium.make_vec, plus
"stepring/Procs-v0" for any Gymnasium env in worker processes.

The only module that imports both env classes; neither imports it.
"""
import ctypes
import functools
import os

import numpy as _np

from . import _lib
from ._lib import lib, check
from ._utils import _gym
from .procs import ProcVectorEnv
from .vector import VectorEnv


def make_vec(env_id=None, num_envs=1, *, mode="sync", batch_size=None, num_threads=None,
             seed=None, autoreset_mode="next_step", device="cpu", replay_capacity=None,
             copy=True, env_fns=None, rng="numpy", **kw):
    """Create a VectorEnv of num_envs instances of env_id ("CartPole-v1",
    or the path of an env plugin's shared object).

    env_fns=[callable, ...] instead of env_id: Python envs (Gymnasium API,
    Box observations, Discrete or Box actions) stepped in worker processes
    attached to the ring (stepring.procs.ProcVectorEnv, whose docstring
    has its keywords: num_workers=2, step_timeout (s), max_restarts,
    inline, info_bytes, bind_caller ...; see docs/procs.md).

    mode: 'sync' (step all envs) or 'async' (recv returns the first
    batch_size envs done). num_threads: workers (None: chosen from the work,
    num_envs x the env's step cost: small cheap pools run on the calling
    thread; the same default as the C library's). seed: env i is seeded
    from (seed, i). autoreset_mode: 'next_step' (Gymnasium default),
    'same_step' (final obs in info['final_obs']) or 'disabled', or a
    gymnasium.vector.AutoresetMode. device: 'cpu' or 'cuda'.
    replay_capacity: ring slots (a power of two). copy: True (default)
    returns arrays of the caller's own, as SyncVectorEnv; False returns
    zero-copy read-only views of the ring (float32 rewards). Extra keywords:
    output='numpy'|'torch', bind, cpuset, ring_name, max_episode_steps (None: no time limit), check_finite
    (None: the library's default, on unless STEPRING_CHECK_FINITE=0; True /
    False: on / off. On, a row whose obs or reward holds a NaN or an
    infinity is flagged: info['nonfinite'], a bool per row, is there when
    a batch has one, and stats() counts them in 'nonfinite_rows' and names
    the first one's env in 'nonfinite_env'; see docs/envs.md), comm (an mpi4py
    communicator: num_envs, and an async batch_size, are global; every
    rank calls make_vec with the same options and gets its block of envs,
    [first_env, first_env + num_envs), seeded from (seed, global index), so
    the run is the same for any number of ranks; see docs/scale.md).
    rng: the built-in env's RNG, 'numpy' (default: env i seeded with s
    draws what Gymnasium's env.reset(seed=s + i) draws, as SyncVectorEnv;
    docs/envs.md) or 'stepring' (the C library's default); None or an
    env_id that names rng= itself leaves env_id as it is.
    Keywords that name a parameter of a built-in env (the keywords of
    gymnasium.make for its env: Pendulum's g, MountainCar's goal_velocity,
    LunarLander's gravity, enable_wind ...; and every other parameter
    get_attr lists, CartPole's gravity ...) set it for every env, as
    "id:name=value" does (docs/python.md).
    Raises LookupError (UnknownEnvError) for an unknown env, ValueError for
    bad options (OutOfRangeError for integers beyond their C field),
    RuntimeError for other failures, with the C message.
    """
    builtin = (isinstance(env_id, str) and not env_id.endswith(".so")
               and os.sep not in env_id)
    if builtin:
        env_id = _env_kwargs(env_id, kw)
    if rng is not None and builtin and "rng=" not in env_id:
        env_id += ("," if ":" in env_id else ":") + "rng=" + str(rng)
    if env_fns is not None:
        if env_id is not None:
            raise ValueError("give env_id or env_fns, not both")
        return ProcVectorEnv(env_fns, seed=seed, copy=copy, autoreset_mode=autoreset_mode, **kw)
    if env_id is None:
        raise TypeError("make_vec needs env_id (or env_fns)")
    return VectorEnv(env_id, num_envs, mode=mode, batch_size=batch_size, num_threads=num_threads,
                     seed=seed, autoreset_mode=autoreset_mode, device=device,
                     replay_capacity=replay_capacity, copy=copy, **kw)


def _env_kwargs(env_id, kw):
    """@env_id with the keywords of @kw that are parameters of that built-in
    env moved into it ("Pendulum-v1:g=9.81"); an unknown id is left for the
    pool to refuse."""
    s = _lib.sr_env_spec()
    if lib.sr_env_find(env_id.encode(), ctypes.byref(s)) < 0:
        return env_id
    params = _lib.env_params(s)
    parts = []
    for k in [k for k in kw if k in params]:
        v = kw.pop(k)
        if isinstance(v, (bool, _np.bool_)) or params[k][1] & _lib.SR_ENV_PARAM_BOOL:
            parts.append("%s=%d" % (k, bool(v)))
        elif isinstance(v, (int, float, _np.integer, _np.floating)):
            parts.append("%s=%r" % (k, float(v)))
        else:
            raise _lib.InvalidTypeError("env parameter %s: a number, not %r" % (k, v))
    if not parts:
        return env_id
    return env_id + ("," if ":" in env_id else ":") + ",".join(parts)


NAMESPACE = "stepring"


def make_vec_procs(num_envs=1, *, env_id=None, env_kwargs=None, max_episode_steps=None,
                   **kw):
    """num_envs instances of the Gymnasium env env_id (a registered id, its
    env_kwargs and max_episode_steps passed to gymnasium.make) stepped in
    worker processes: make_vec(env_fns=...), whose keywords (num_workers,
    seed, step_timeout, max_restarts, inline, copy) pass through. The vector entry point of "stepring/Procs-v0":
    gymnasium.make_vec("stepring/Procs-v0", num_envs=64, env_id="Acrobot-v1")."""
    if _gym is None:
        raise _lib.UnsupportedError(-38, "stepring/Procs-v0 needs gymnasium")
    if not env_id:
        raise ValueError("stepring/Procs-v0 needs env_id= (a Gymnasium env id)")
    gym_kw = dict(env_kwargs or {})
    if max_episode_steps is not None:
        gym_kw["max_episode_steps"] = max_episode_steps
    _gym.spec(env_id)  # an unknown id fails here, not in the workers
    fn = functools.partial(_gym.make, env_id, **gym_kw)
    return ProcVectorEnv([fn] * int(num_envs), **kw)


def register_envs(*plugins):
    """Register every built-in env (and each env plugin path given) with
    Gymnasium as "stepring/<id>", with a vector_entry_point, so that
    gymnasium.make_vec("stepring/CartPole-v1", num_envs=64, ...) returns a
    stepring VectorEnv (keywords pass through to make_vec). Called by
    `import stepring` when gymnasium is importable. Returns the ids
    registered (empty without gymnasium)."""
    if _gym is None:
        return []
    specs = []
    for i in range(lib.sr_env_count()):
        s = lib.sr_env_at(i)
        if s:
            specs.append((s.contents.id.decode(), s.contents.id.decode(),
                          s.contents.max_episode_steps))
    for path in plugins:
        s = _lib.sr_env_spec()
        check(lib.sr_env_load_plugin(os.fsencode(path), ctypes.byref(s)))
        specs.append((s.id.decode(), os.fspath(path), s.max_episode_steps))
    out = []
    # Any Gymnasium env in worker processes: gymnasium.make_vec(
    # "stepring/Procs-v0", num_envs=64, env_id="Acrobot-v1").
    full = "%s/Procs-v0" % NAMESPACE
    if full in _gym.envs.registry:
        del _gym.envs.registry[full]
    _gym.register(id=full, entry_point=None, vector_entry_point=make_vec_procs)
    out.append(full)
    for gid, target, steps in specs:
        full = "%s/%s" % (NAMESPACE, gid)
        if full in _gym.envs.registry:
            del _gym.envs.registry[full]  # re-registering: the latest path wins
        _gym.register(id=full, entry_point=None,
                      vector_entry_point=functools.partial(make_vec, target),
                      max_episode_steps=steps or None)
        out.append(full)
    return out
