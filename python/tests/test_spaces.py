import numpy as np
import pytest

from stepring.spaces import Box, Discrete, MultiDiscrete, batch_space


def test_box_attributes_and_sample():
    b = Box(-1.0, 2.0, shape=(3,), dtype=np.float32, seed=0)
    assert b.shape == (3,) and b.dtype == np.float32
    assert b.low.shape == (3,) and b.high.dtype == np.float32
    for _ in range(100):
        x = b.sample()
        assert x.shape == (3,) and x.dtype == np.float32
        assert b.contains(x) and x in b
    assert not b.contains(np.full(3, 3.0, np.float32))
    assert not b.contains(np.zeros(4, np.float32))
    assert b.is_bounded()


def test_box_unbounded_sample_is_finite():
    b = Box(-np.inf, np.inf, shape=(2, 2), seed=1)
    x = b.sample()
    assert x.shape == (2, 2) and np.all(np.isfinite(x))
    assert not b.is_bounded()


def test_box_rejects_low_above_high():
    with pytest.raises(ValueError):
        Box(1.0, 0.0, shape=(1,))


def test_discrete():
    d = Discrete(3, seed=0)
    assert d.n == 3 and d.shape == () and d.dtype == np.int64
    seen = {int(d.sample()) for _ in range(200)}
    assert seen == {0, 1, 2}
    assert d.contains(2) and not d.contains(3) and not d.contains(-1)
    assert d.contains(np.int32(1)) and not d.contains(1.0)
    with pytest.raises(ValueError):
        Discrete(0)


def test_seed_is_deterministic():
    a, b = Discrete(5, seed=7), Discrete(5, seed=7)
    assert [a.sample() for _ in range(20)] == [b.sample() for _ in range(20)]
    m1, m2 = MultiDiscrete([2] * 6), MultiDiscrete([2] * 6)
    m1.seed(3)
    m2.seed(3)
    assert np.array_equal(m1.sample(), m2.sample())


def test_multidiscrete():
    m = MultiDiscrete([2, 3, 4], seed=0)
    assert m.shape == (3,) and m.dtype == np.int64
    for _ in range(50):
        x = m.sample()
        assert x.shape == (3,) and m.contains(x)
    assert not m.contains(np.array([2, 0, 0]))
    assert not m.contains(np.array([0.0, 0.0, 0.0]))


def test_batch_space():
    assert batch_space(Discrete(2), 4) == MultiDiscrete([2, 2, 2, 2])
    b = batch_space(Box(-1.0, 1.0, shape=(3,)), 5)
    assert b.shape == (5, 3) and b.dtype == np.float32
    assert np.all(b.low == -1.0)
