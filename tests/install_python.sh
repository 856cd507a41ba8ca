#!/usr/bin/env bash
# The Python package as a user installs it: a copy of the source tree (what
# a clone of it holds) is pip-installed into a fresh venv
# (`python3 -m venv --system-site-packages`: numpy, torch, cloudpickle come
# from Debian), offline (`pip install --no-build-isolation --no-index .`,
# Debian's setuptools and wheel); then, from another directory and with an
# empty environment (no STEPRING_LIB, no STEPRING_WORKER, no PYTHONPATH):
#   - `import gymnasium` alone registers stepring/<id>, and the issue's line
#     gymnasium.make_vec('stepring/CartPole-v1', num_envs=4).reset(seed=0)
#     gives Gymnasium's own first obs of seed 0;
#   - the package loads the libstepring.so it carries, and a pool of C envs
#     in worker processes finds the stepring-worker it carries;
#   - a process pool of Python envs (the worker program in site-packages);
#   - the gymnasium.envs entry point is declared;
#   - pip uninstall removes it all (gymnasium imports without it after).
# Gymnasium itself is not installed system-wide: a .pth file puts GYM_DIR
# (../shared/thirdparty/python) on the venv's path, as an install would;
# without it those checks are skipped. Needs python3-venv (tools/dev).
# usage: install_python.sh SOURCE_DIR [GYM_DIR]
set -u
src=$(cd "$1" && pwd)
gym=${2:-$src/../shared/thirdparty/python}
# shellcheck source=cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"
PY=/usr/bin/python3

"$PY" -c 'import venv, ensurepip' 2>/dev/null || skip "python3-venv is not installed"

# 1. The source as a clone has it: tracked and untracked-but-not-ignored
# files (no build trees).
mkdir -p "$T/src"
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	(cd "$src" && git ls-files -z --cached --others --exclude-standard |
		tar --null -T - -cf - 2>/dev/null) | tar -x -C "$T/src" ||
		die "cannot copy the source tree"
else
	(cd "$src" && tar --exclude='./build*' -cf - .) | tar -x -C "$T/src" ||
		die "cannot copy the source tree"
fi

# 2. A fresh venv, and the package installed into it from the copy.
expect_rc 0 "make a venv" "$PY" -m venv --system-site-packages "$T/venv" ||
	die "no venv"
site=$("$T/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
have_gym=0
if [ -d "$gym/gymnasium" ]; then
	(cd "$gym" && pwd) >"$site/zz-gymnasium-for-tests.pth"
	have_gym=1
fi
expect_rc 0 "pip install --no-build-isolation --no-index ." \
	env -u STEPRING_LIB -u STEPRING_WORKER CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-2}" \
	sh -c "cd '$T/src' && '$T/venv/bin/python' -m pip install -q --no-build-isolation --no-index ." ||
	{ cat "$T/all"; die "pip could not install the package"; }
for f in stepring/libstepring.so stepring/stepring-worker stepring/_procworker.py \
	_stepring_hook.py stepring-gymnasium.pth; do
	[ -e "$site/$f" ] || fail "expected $f in site-packages, it is not there"
done
[ -x "$site/stepring/stepring-worker" ] || fail "stepring-worker is not executable"

# py SCRIPT: run the venv's Python on SCRIPT from an unrelated directory with
# nothing but PATH in its environment.
mkdir -p "$T/elsewhere"
py() {
	run env -i PATH=/usr/bin:/bin HOME="$T" sh -c "cd '$T/elsewhere' && '$T/venv/bin/python' -c \"\$0\"" "$1"
}

# 3. The package on its own: its library, its worker program (C envs in
# worker processes), and the entry point.
py '
import os, ctypes, importlib.metadata as md
import stepring
from stepring import _lib
pkg = os.path.dirname(stepring.__file__)
assert not any(k.startswith("STEPRING") for k in os.environ), os.environ
assert "site-packages" in pkg, pkg
assert stepring.library_path == os.path.join(pkg, "libstepring.so"), stepring.library_path
o = _lib.sr_pool_opts()
_lib.lib.sr_pool_opts_init(ctypes.byref(o))
o.env, o.num_envs, o.num_threads = b"CartPole-v1", 4, 2
o.flags = _lib.SR_POOL_F_PROCS | _lib.SR_POOL_F_SEED
p = ctypes.c_void_p()
_lib.check(_lib.lib.sr_pool_create(ctypes.byref(o), ctypes.byref(p)))
b = ctypes.POINTER(_lib.sr_batch)()
_lib.check(_lib.lib.sr_pool_reset(p, ctypes.byref(b)))
n = b.contents.n
_lib.lib.sr_pool_destroy(p)
eps = [e.value for e in md.entry_points(group="gymnasium.envs") if e.name == "stepring"]
assert eps == ["stepring.registration:register_envs"], eps
print("ok", stepring.version(), n)
'
expect_eq "installed package: its library, its worker program, its entry point" \
	"0" "$rc" || cat "$T/all"
expect_line -x "installed package: version and rows" "ok 0\.1\.0 4" "$T/out" &&
	ok "installed package: its own libstepring.so, stepring-worker and entry point"

if [ $have_gym = 1 ]; then
	# 4. The issue's line, without `import stepring`; the obs are
	# Gymnasium's own for seed 0 (rng=numpy).
	py '
import sys
import gymnasium as g
e = g.make_vec("stepring/CartPole-v1", num_envs=4)
obs, info = e.reset(seed=0)
ref = g.make("CartPole-v1").reset(seed=0)[0]
assert type(e).__module__ == "stepring.vector", type(e)
assert (obs[0] == ref).all(), (obs[0], ref)
print("make_vec ok", obs.shape, e.np_random_seed)
'
	expect_eq "gymnasium.make_vec('stepring/CartPole-v1') with no import of stepring" \
		"0" "$rc" || cat "$T/all"
	expect_line -x "its output" 'make_vec ok (4, 4) (0, 1, 2, 3)' "$T/out" &&
		ok "gymnasium.make_vec('stepring/CartPole-v1') in a fresh interpreter, no import of stepring, no variable"

	# 5. Python envs in worker processes, from the installed package.
	py '
import gymnasium as g
e = g.make_vec("stepring/Procs-v0", num_envs=4, env_id="Acrobot-v1", num_workers=2, seed=1)
e.reset()
for _ in range(5):
    out = e.step(e.action_space.sample())
print("procs ok", out[0].shape, e.fault_stats()["restarts"])
e.close()
'
	expect_eq "a process pool of Python envs" "0" "$rc" || cat "$T/all"
	expect_line -x "its output" 'procs ok (4, 6) 0' "$T/out" &&
		ok "a process pool of Python envs from the installed package"
fi

# 6. pip uninstall takes everything away, the start-up hook included.
expect_rc 0 "pip uninstall" env -i PATH=/usr/bin:/bin "$T/venv/bin/python" -m pip uninstall -y -q stepring
for f in stepring _stepring_hook.py stepring-gymnasium.pth; do
	[ -e "$site/$f" ] && fail "pip uninstall left $f in site-packages"
done
if [ $have_gym = 1 ]; then
	py 'import gymnasium as g; assert "stepring/CartPole-v1" not in g.registry; print("gone")'
	expect_line -x "gymnasium without the package" gone "$T/out" &&
		ok "uninstalled: gymnasium imports without stepring" || cat "$T/all"
fi
finish
