"""Every wrapper of gymnasium.wrappers.vector that applies to stepring's
spaces (float32 Box observations, Discrete or Box actions) runs on a
stepring env and gives what it gives on SyncVectorEnv, both started from the
same states (reset options low == high) with the same actions, up to and
including the first step where an episode ends (after it the two libraries'
RNGs draw different initial states). The rest (images, dicts, rendering,
jax) is listed in NOT_APPLICABLE with the reason. Needs Gymnasium.
"""
import warnings

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium", reason="Gymnasium is not importable (put "
                          "../shared/thirdparty/python on PYTHONPATH)")
import stepring  # noqa: E402,F401
from stepring.vector import _gym  # noqa: E402

if _gym is None:
    pytest.skip("stepring was imported without Gymnasium support", allow_module_level=True)

import gymnasium.wrappers.vector as W  # noqa: E402
from gymnasium.spaces import Box  # noqa: E402

N = 8
START = {"CartPole-v1": {"low": 0.02, "high": 0.02},
         "MountainCar-v0": {"low": -0.5, "high": -0.5},
         "Pendulum-v1": {"x_init": 0.0, "y_init": 0.0}}


def _double(x):
    return x * 2.0


# name: (env id, wrap(env) -> wrapped env)
CASES = {
    "RecordEpisodeStatistics": ("CartPole-v1", lambda e: W.RecordEpisodeStatistics(e)),
    "DictInfoToList": ("CartPole-v1",
                       lambda e: W.DictInfoToList(W.RecordEpisodeStatistics(e))),
    "TransformObservation": ("CartPole-v1", lambda e: W.TransformObservation(e, _double)),
    "FlattenObservation": ("CartPole-v1", lambda e: W.FlattenObservation(e)),
    "ReshapeObservation": ("CartPole-v1", lambda e: W.ReshapeObservation(e, (2, 2))),
    "RescaleObservation": ("MountainCar-v0",
                           lambda e: W.RescaleObservation(e, np.float32(-1), np.float32(1))),
    "DtypeObservation": ("CartPole-v1", lambda e: W.DtypeObservation(e, np.float64)),
    "NormalizeObservation": ("CartPole-v1", lambda e: W.NormalizeObservation(e)),
    "VectorizeTransformObservation": (
        "CartPole-v1", lambda e: W.VectorizeTransformObservation(
            e, gym.wrappers.TransformObservation, func=_double,
            observation_space=Box(-np.inf, np.inf, (4,), np.float32))),
    "TransformAction": ("Pendulum-v1", lambda e: W.TransformAction(
        e, lambda a: a * 0.5, Box(-4.0, 4.0, (N, 1), np.float32))),
    "ClipAction": ("Pendulum-v1", lambda e: W.ClipAction(e)),
    "RescaleAction": ("Pendulum-v1", lambda e: W.RescaleAction(e, -1.0, 1.0)),
    "VectorizeTransformAction": ("Pendulum-v1", lambda e: W.VectorizeTransformAction(
        e, gym.wrappers.ClipAction)),
    "TransformReward": ("CartPole-v1", lambda e: W.TransformReward(e, lambda r: r * 0.5)),
    "ClipReward": ("Pendulum-v1", lambda e: W.ClipReward(e, -1.0, 0.0)),
    "NormalizeReward": ("Pendulum-v1", lambda e: W.NormalizeReward(e)),
    "VectorizeTransformReward": ("CartPole-v1", lambda e: W.VectorizeTransformReward(
        e, gym.wrappers.TransformReward, func=lambda r: r - 1.0)),
    "NumpyToTorch": ("CartPole-v1", lambda e: W.NumpyToTorch(e)),
}

NOT_APPLICABLE = {
    "FilterObservation": "Dict/Tuple observations only",
    "GrayscaleObservation": "RGB image observations only",
    "ResizeObservation": "image observations only",
    "RecordVideo": "needs render_mode='rgb_array' (stepring envs do not render)",
    "HumanRendering": "needs rgb_array frames (stepring envs do not render)",
    "JaxToNumpy": "needs jax", "JaxToTorch": "needs jax",
    "ArrayConversion": "the generic base of NumpyToTorch/JaxTo*, covered by NumpyToTorch",
}


def test_every_vector_wrapper_is_covered():
    names = {n for n in W.__all__ if n[0].isupper()}
    assert names == set(CASES) | set(NOT_APPLICABLE), sorted(names ^ (set(CASES) |
                                                                      set(NOT_APPLICABLE)))


def to_np(x):
    if type(x).__module__.startswith("torch"):
        return x.numpy()
    return x


def compare(a, b, what):
    if isinstance(a, dict) or isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), what
        items = a.items() if isinstance(a, dict) else enumerate(a)
        for k, v in items:
            if isinstance(a, dict):
                assert k in b, (what, k)
            if k == "t" and isinstance(a, dict):  # RecordEpisodeStatistics' wall time
                continue
            compare(v, b[k], "%s[%r]" % (what, k))
        return
    a, b = to_np(a), to_np(b)
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape, \
            (what, a.dtype, b.dtype, a.shape, b.shape)
        if a.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=what)
        elif a.dtype == object:
            for x, y in zip(a, b):
                compare(x, y, what)
        else:
            np.testing.assert_array_equal(a, b, err_msg=what)
    elif isinstance(a, float):
        assert abs(a - b) <= 1e-6 * max(1.0, abs(a)), (what, a, b)
    else:
        assert a == b, (what, a, b)


@pytest.mark.parametrize("name", sorted(CASES))
def test_wrapper_runs_on_stepring_like_on_sync_vector_env(name):
    env_id, wrap = CASES[name]
    if name == "NumpyToTorch":
        pytest.importorskip("array_api_compat", reason="Gymnasium's NumpyToTorch needs "
                            "array_api_compat (not packaged by Debian 12)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = wrap(gym.make_vec(env_id, num_envs=N, vectorization_mode="sync"))
    ours = wrap(gym.make_vec("stepring/" + env_id, num_envs=N, seed=0))
    try:
        assert ours.single_observation_space == ref.single_observation_space
        assert ours.observation_space == ref.observation_space
        assert ours.single_action_space == ref.single_action_space
        assert ours.action_space == ref.action_space
        o1, i1 = ref.reset(seed=0, options=dict(START[env_id]))
        o2, i2 = ours.reset(seed=0, options=dict(START[env_id]))
        compare(o2, o1, "reset obs")
        compare(i2, i1, "reset info")
        space = ours.action_space
        space.seed(5)
        ended = False
        steps = 0
        while not ended and steps < 300:
            a = space.sample()
            if isinstance(space, Box) and steps % 5 == 2:
                a = a * np.float32(1.5)  # out of bounds: wrappers and envs clip
            r1 = ref.step(a)
            r2 = ours.step(a)
            for x, y, what in zip(r2, r1, ("obs", "reward", "terminated", "truncated",
                                           "info")):
                compare(x, y, "%s at step %d" % (what, steps))
            steps += 1
            ended = bool(np.any(to_np(r1[2]) | to_np(r1[3])))
        assert ended, "no episode ended in 300 steps"
        # The wrapper's view of the episode end, e.g. RecordEpisodeStatistics
        if name == "RecordEpisodeStatistics":
            assert "episode" in r2[4] and r2[4]["_episode"].any()
            assert len(ours.return_queue) == len(ref.return_queue) > 0
    finally:
        ref.close()
        ours.close()
