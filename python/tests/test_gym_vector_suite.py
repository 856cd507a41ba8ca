"""Gymnasium's own vector tests with their vector envs built by stepring
(tools/gym_vector_tests.py): every failure among the tests that built a
stepring env is a known one (the table in the tool, docs/python.md). Runs
when a Gymnasium source tree's tests/ is at hand: ../shared/thirdparty/python/tests
or $GYMNASIUM_TESTS; skipped otherwise. Slow (the whole suite, ~2 minutes)."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TOOL = os.path.join(ROOT, "tools", "gym_vector_tests.py")


def _tests_dir():
    cand = os.path.join(ROOT, "..", "shared", "thirdparty", "python", "tests")
    for d in (cand, os.environ.get("GYMNASIUM_TESTS")):
        if d and os.path.isdir(os.path.join(d, "vector")):
            return d
    return None


@pytest.mark.slow
@pytest.mark.skipif(_tests_dir() is None, reason="no Gymnasium tests/ folder (set "
                    "GYMNASIUM_TESTS to the tests/ of a Gymnasium 1.3.0 source tree)")
def test_gymnasium_vector_suite_through_stepring(tmp_path):
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, TOOL, "--tests", _tests_dir(), "--json", str(out)],
                       capture_output=True, text=True, timeout=3000)
    tail = p.stdout[-4000:]
    r = json.loads(out.read_text())
    assert r["unexplained"] == [], tail
    assert p.returncode == 0, tail
    assert len(r["passed"]) >= 100, tail
