"""Minimal Gymnasium-compatible spaces: Box, Discrete, MultiDiscrete.

Gymnasium is not a dependency; these classes use its attribute names
(shape, dtype, low, high, n, start, nvec, np_random) and methods (sample,
contains, seed, __eq__), so code written against gymnasium.spaces reads
them unchanged.
"""
import numpy as np


class Space:
    def __init__(self, shape, dtype, seed=None):
        self._shape = None if shape is None else tuple(int(s) for s in shape)
        self.dtype = None if dtype is None else np.dtype(dtype)
        self._np_random = None
        if seed is not None:
            self.seed(seed)

    @property
    def shape(self):
        return self._shape

    @property
    def np_random(self):
        if self._np_random is None:
            self.seed()
        return self._np_random

    def seed(self, seed=None):
        """Seed the space's sampler (numpy Generator); returns [seed]."""
        self._np_random = np.random.default_rng(seed)
        return [seed]

    def __contains__(self, x):
        return self.contains(x)

    def contains(self, x):  # pragma: no cover - overridden
        raise NotImplementedError


class Box(Space):
    """A box in R^shape: low <= x <= high elementwise."""

    def __init__(self, low, high, shape=None, dtype=np.float32, seed=None):
        dtype = np.dtype(dtype)
        if shape is None:
            shape = np.broadcast(np.asarray(low), np.asarray(high)).shape
        shape = tuple(int(s) for s in shape)
        self.low = np.broadcast_to(np.asarray(low, dtype=dtype), shape).copy()
        self.high = np.broadcast_to(np.asarray(high, dtype=dtype), shape).copy()
        if np.any(self.low > self.high):
            raise ValueError("Box: low must be <= high")
        super().__init__(shape, dtype, seed)

    def is_bounded(self, manner="both"):
        below = bool(np.all(np.isfinite(self.low)))
        above = bool(np.all(np.isfinite(self.high)))
        return {"both": below and above, "below": below, "above": above}[manner]

    def sample(self):
        """Uniform in bounded dims; normal/exponential where unbounded, as
        Gymnasium does."""
        rng = self.np_random
        low = self.low.astype(np.float64)
        high = self.high.astype(np.float64)
        lo_f, hi_f = np.isfinite(low), np.isfinite(high)
        out = np.empty(self.shape, dtype=np.float64)
        both = lo_f & hi_f
        out[both] = rng.uniform(low[both], high[both])
        none = ~lo_f & ~hi_f
        out[none] = rng.normal(size=int(none.sum()))
        lo_only = lo_f & ~hi_f
        out[lo_only] = low[lo_only] + rng.exponential(size=int(lo_only.sum()))
        hi_only = ~lo_f & hi_f
        out[hi_only] = high[hi_only] - rng.exponential(size=int(hi_only.sum()))
        return out.astype(self.dtype)

    def contains(self, x):
        if not isinstance(x, np.ndarray):
            try:
                x = np.asarray(x, dtype=self.dtype)
            except (ValueError, TypeError):
                return False
        return bool(np.can_cast(x.dtype, self.dtype) and x.shape == self.shape
                    and np.all(x >= self.low) and np.all(x <= self.high))

    def __repr__(self):
        return "Box(%s, %s, %s, %s)" % (self.low.min(), self.high.max(), self.shape,
                                        self.dtype)

    def __eq__(self, other):
        return (isinstance(other, Box) and self.shape == other.shape
                and self.dtype == other.dtype
                and np.array_equal(self.low, other.low)
                and np.array_equal(self.high, other.high))


class Discrete(Space):
    """{start, ..., start + n - 1}, as int64 (Gymnasium's dtype)."""

    def __init__(self, n, seed=None, start=0):
        if int(n) <= 0:
            raise ValueError("Discrete: n must be positive")
        self.n = np.int64(n)
        self.start = np.int64(start)
        super().__init__((), np.int64, seed)

    def sample(self):
        return np.int64(self.start + self.np_random.integers(self.n))

    def contains(self, x):
        if isinstance(x, int):
            v = x
        elif isinstance(x, (np.generic, np.ndarray)) and x.shape == () and \
                np.issubdtype(x.dtype, np.integer):
            v = int(x)
        else:
            return False
        return bool(self.start <= v < self.start + self.n)

    def __repr__(self):
        return "Discrete(%d)" % self.n if not self.start else \
            "Discrete(%d, start=%d)" % (self.n, self.start)

    def __eq__(self, other):
        return isinstance(other, Discrete) and self.n == other.n and self.start == other.start


class MultiDiscrete(Space):
    """A vector of discrete values, x[i] in [start[i], start[i] + nvec[i])."""

    def __init__(self, nvec, dtype=np.int64, seed=None, start=None):
        self.nvec = np.array(nvec, dtype=dtype, copy=True)
        if np.any(self.nvec <= 0):
            raise ValueError("MultiDiscrete: nvec must be positive")
        self.start = (np.zeros_like(self.nvec) if start is None
                      else np.array(start, dtype=dtype, copy=True))
        super().__init__(self.nvec.shape, dtype, seed)

    def sample(self):
        r = self.np_random.random(self.nvec.shape)
        return (self.start + (r * self.nvec).astype(self.dtype)).astype(self.dtype)

    def contains(self, x):
        if isinstance(x, (list, tuple)):
            x = np.asarray(x)
        if not isinstance(x, np.ndarray) or x.shape != self.shape or \
                not np.issubdtype(x.dtype, np.integer):
            return False
        return bool(np.all(x >= self.start) and np.all(x < self.start + self.nvec))

    def __repr__(self):
        return "MultiDiscrete(%s)" % self.nvec

    def __eq__(self, other):
        return (isinstance(other, MultiDiscrete) and np.array_equal(self.nvec, other.nvec)
                and np.array_equal(self.start, other.start))


def batch_space(space, n):
    """The space of @n stacked samples, as gymnasium.vector.utils.batch_space."""
    if isinstance(space, Box):
        reps = (n,) + (1,) * space.low.ndim
        return Box(np.tile(space.low, reps), np.tile(space.high, reps), dtype=space.dtype)
    if isinstance(space, Discrete):
        return MultiDiscrete(np.full((n,), space.n, dtype=space.dtype), dtype=space.dtype,
                             start=np.full((n,), space.start, dtype=space.dtype))
    if isinstance(space, MultiDiscrete):
        reps = (n,) + (1,) * space.nvec.ndim
        return MultiDiscrete(np.tile(space.nvec, reps), dtype=space.dtype,
                             start=np.tile(space.start, reps))
    raise TypeError("batch_space: unsupported space %r" % (space,))
