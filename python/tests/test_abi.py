"""The ctypes structs mirror the C headers byte for byte: compile a probe
against include/ that prints sizeof and offsetof, and compare."""
import ctypes
import os
import shutil
import subprocess

import pytest

from stepring import _lib

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
STRUCTS = {
    "sr_env_spec": _lib.sr_env_spec,
    "sr_env_param": _lib.sr_env_param,
    "sr_pool_opts": _lib.sr_pool_opts,
    "sr_batch": _lib.sr_batch,
    "sr_pool_reset_opts": _lib.sr_pool_reset_opts,
    "sr_pool_stats": _lib.sr_pool_stats,
    "sr_pool_info": _lib.sr_pool_info,
    "sr_pool_worker_stats": _lib.sr_pool_worker_stats,
    "sr_replay_opts": _lib.sr_replay_opts,
    "sr_replay_batch": _lib.sr_replay_batch,
    "sr_replay_seq_batch": _lib.sr_replay_seq_batch,
    "sr_replay_info": _lib.sr_replay_info,
    "sr_ckpt_opts": _lib.sr_ckpt_opts,
    "sr_ckpt_status": _lib.sr_ckpt_status,
    "sr_ckpt_info": _lib.sr_ckpt_info,
    "sr_device_opts": _lib.sr_device_opts,
    "sr_device_batch": _lib.sr_device_batch,
    "sr_ring_info": _lib.sr_ring_info,
    "sr_proc_info": _lib.sr_proc_info,
    "sr_proc_cmd": _lib.sr_proc_cmd,
}
# Every SR_* integer constant the binding mirrors.
# (stepring/mpi.h needs <mpi.h>: its SR_MPI_* constants are left out.)
CONSTANTS = sorted(k for k, v in vars(_lib).items()
                   if k.startswith("SR_") and not k.startswith("SR_MPI_")
                   and isinstance(v, int) and not isinstance(v, bool))


def probe_source():
    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include \"stepring.h\"",
             "#include \"stepring/replay.h\"", "#include \"stepring/checkpoint.h\"",
             "#include \"stepring/device.h\"", "#include \"stepring/stats.h\"",
             "#include \"stepring/proc.h\"",
             "int main(void) {"]
    for name, cls in STRUCTS.items():
        lines.append('printf("%s sizeof %%zu\\n", sizeof(%s));' % (name, name))
        for field, _ in cls._fields_:
            lines.append('printf("%s %s %%zu\\n", offsetof(%s, %s));' % (name, field, name, field))
    for name in CONSTANTS:
        lines.append('printf("const %s %%lld\\n", (long long)(%s));' % (name, name))
    lines += ["return 0; }"]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    assert cc, "a C compiler is needed to check the struct layouts"
    d = tmp_path_factory.mktemp("abi")
    src, exe = d / "probe.c", d / "probe"
    src.write_text(probe_source())
    # config.h is generated into the build directory next to the library.
    build_inc = os.path.join(os.path.dirname(os.path.abspath(_lib.path)), "include")
    subprocess.run([cc, "-std=c11", "-I", os.path.join(ROOT, "include"), "-I", build_inc,
                    str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    layout = {}
    for line in out.splitlines():
        name, field, value = line.split()
        layout[(name, field)] = int(value)
    return layout


@pytest.mark.parametrize("name", sorted(STRUCTS))
def test_struct_layout_matches_the_header(c_layout, name):
    cls = STRUCTS[name]
    assert ctypes.sizeof(cls) == c_layout[(name, "sizeof")]
    for field, _ in cls._fields_:
        assert getattr(cls, field).offset == c_layout[(name, field)], field


def test_constants_match_the_headers(c_layout):
    """Each SR_* constant of the binding has the C header's value (a name
    the headers do not define fails the probe's compilation)."""
    assert CONSTANTS
    wrong = {k: (getattr(_lib, k), c_layout[("const", k)]) for k in CONSTANTS
             if getattr(_lib, k) % 2**64 != c_layout[("const", k)] % 2**64}
    assert not wrong


def test_process_worker_constants_match_the_headers(c_layout):
    """The Python process worker keeps its own copies of the ring's flags,
    the command kinds and the autoreset modes (it writes rows in a loop):
    they are the headers' values."""
    from stepring import _procworker as pw
    mirror = {"NO_PREV": "SR_RING_NO_PREV", "FIRST": "SR_SLOT_FIRST", "PAD": "SR_SLOT_PAD",
              "FINAL": "SR_SLOT_FINAL", "CMD_STEP": "SR_PROC_CMD_STEP",
              "NEXT_STEP": "SR_AUTORESET_NEXT_STEP", "SAME_STEP": "SR_AUTORESET_SAME_STEP",
              "DISABLED": "SR_AUTORESET_DISABLED"}
    wrong = {k: (getattr(pw, k), c_layout[("const", c)]) for k, c in mirror.items()
             if getattr(pw, k) % 2**64 != c_layout[("const", c)] % 2**64}
    assert not wrong


def test_version_handshake(monkeypatch):
    """The loaded library passes the check; another major version, or an
    older minor one, is refused with both versions named."""
    _lib._handshake()

    class Fake:
        def __init__(self, v):
            self.sr_version = lambda: v

    for v, ok in ((0x000100, True), (0x000105, True), (0x000200, True),
                  (0x010100, False), (0x000000, False)):
        monkeypatch.setattr(_lib, "lib", Fake(v))
        if ok:
            _lib._handshake()
        else:
            with pytest.raises(ImportError, match="this binding needs 0.1"):
                _lib._handshake()
