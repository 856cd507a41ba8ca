"""The finite check from Python: make_vec(check_finite=...), the
info['nonfinite'] rows and the stats, with the Faulty-v0 test plugin
(tests/faulty_env.c) writing a NaN reward or NaN obs on command."""
import math
import os

import numpy as np
import pytest

import stepring
from stepring import _lib


def _plugin():
    p = os.path.join(os.path.dirname(os.path.abspath(_lib.path)), "tests", "faulty.so")
    if not os.path.exists(p):
        pytest.skip("the Faulty-v0 test plugin is not built next to the library")
    return p


@pytest.mark.parametrize("mode,output", [(6, "numpy"), (5, "numpy"), (6, "torch")])
def test_nonfinite_rows_flagged(monkeypatch, mode, output):
    if output == "torch":
        pytest.importorskip("torch")
    monkeypatch.setenv("FAULTY_MODE", str(mode))
    e = stepring.make_vec(_plugin(), 8, seed=1, num_threads=2, output=output)
    try:
        e.reset()
        a = np.zeros(8, np.int32)
        _, _, _, _, info = e.step(a)
        assert "nonfinite" not in info
        a[3] = 2
        obs, rew, _, _, info = e.step(a)
        bad = np.asarray(info["nonfinite"])
        assert bad.dtype == np.bool_ and bad.tolist() == [i == 3 for i in range(8)]
        if mode == 6:
            assert math.isnan(float(rew[3]))
        else:
            assert math.isnan(float(obs[3][0]))
        a[3] = 0
        for _ in range(60):
            _, rew, _, _, info = e.step(a)
            if "nonfinite" in info:  # mode 5: NaN until the episode ends
                assert np.asarray(info["nonfinite"]).tolist() == [i == 3 for i in range(8)]
        assert "nonfinite" not in info
        s = e.stats()
        assert s["check_finite"] == 1
        assert s["nonfinite_env"] == 3
        assert s["nonfinite_rows"] == 1 if mode == 6 else s["nonfinite_rows"] >= 2
        assert s["episodes"] > 0 and math.isfinite(s["mean_return"])
    finally:
        e.close()


def test_check_off(monkeypatch):
    monkeypatch.setenv("FAULTY_MODE", "6")
    e = stepring.make_vec(_plugin(), 4, seed=1, num_threads=1, check_finite=False)
    try:
        e.reset()
        a = np.zeros(4, np.int32)
        a[1] = 2
        _, rew, _, _, info = e.step(a)
        assert math.isnan(float(rew[1])) and "nonfinite" not in info
        for _ in range(60):
            e.step(np.zeros(4, np.int32))
        s = e.stats()
        assert s["check_finite"] == 0 and s["nonfinite_rows"] == 0 and s["nonfinite_env"] == -1
        assert math.isfinite(s["mean_return"])  # never a NaN return, check or not
    finally:
        e.close()


def test_check_finite_kwarg():
    with pytest.raises(TypeError):
        stepring.make_vec("CartPole-v1", 2, check_finite="yes")
    e = stepring.make_vec("CartPole-v1", 2, check_finite=True)
    assert e.stats()["check_finite"] == 1
    e.close()
