import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long tests (the PPO trainer)")


@pytest.fixture
def cartpole():
    import stepring
    envs = stepring.make_vec("CartPole-v1", 8, seed=3, num_threads=2)
    yield envs
    envs.close()
