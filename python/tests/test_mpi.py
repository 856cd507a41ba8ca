"""make_vec(..., comm=) under mpirun: 1, 2 and 3 ranks step the same envs as
one process (examples/mpi_vec.py --check), bad input fails on every rank."""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "mpi_vec.py")

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")


def _env():
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.skip("no mpi4py (apt-get install python3-mpi4py)")
    import ctypes
    import errno
    import stepring._lib as L
    # A build without MPI answers -ENOSYS; with MPI, uninitialized: -EINVAL.
    if L.lib.sr_mpi_pool_create_f(0, None, None, ctypes.byref(ctypes.c_void_p())) == -errno.ENOSYS:
        pytest.skip("libstepring without the MPI part")
    e = dict(os.environ)
    e.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
             OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_btl="self,vader",
             OMPI_MCA_btl_vader_single_copy_mechanism="none",
             OMPI_MCA_mpi_yield_when_idle="1", OMPI_MCA_plm_rsh_agent="false",
             PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python")] +
                                        [p for p in [os.environ.get("PYTHONPATH")] if p]))
    return e


def _run(np_, *args):
    return subprocess.run(["mpirun", "-q", "-np", str(np_), sys.executable, EXAMPLE] +
                          list(args), env=_env(), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("np_", [1, 2, 3])
def test_ranks_step_like_one_process(np_):
    r = _run(np_, "--envs", "11", "--steps", "150", "--check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "check: ok" in r.stdout
    for k in range(np_):
        assert "rank %d: envs [" % k in r.stdout


def test_too_few_envs_fails_on_every_rank():
    r = _run(3, "--envs", "2", "--steps", "1")
    assert r.returncode != 0
    assert r.stderr.count("num_envs 2 < 3 ranks") == 3, r.stderr
