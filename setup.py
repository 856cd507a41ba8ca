"""The stepring Python package: `pip install --no-build-isolation .` (pyproject.toml).

build_py also builds the C core with CMake (the library and the
stepring-worker program only: -DSR_BUILD_TESTS=OFF -DSR_BUILD_TOOLS=OFF,
plus $CMAKE_ARGS; $CMAKE_BUILD_PARALLEL_LEVEL jobs, default one per CPU) in
build-pip/cmake, and puts into the wheel:

  stepring/libstepring.so     the binding loads it first (_lib.py; STEPRING_LIB
                              still overrides)
  stepring/stepring-worker    the library finds it next to itself
                              (process workers of C envs; STEPRING_WORKER overrides)
  _stepring_hook.py, stepring-gymnasium.pth
                              `import gymnasium` registers stepring/<id>
                              without `import stepring` (Gymnasium 1.x reads no
                              plugin entry points)

The wheel is platform-specific (it carries a shared library). Built files go
to build-pip/ (setuptools' build_base), not build/, where a CMake
development build usually lives.
"""
import os
import re
import shlex
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))


def version():
    with open(os.path.join(ROOT, "include", "stepring", "version.h")) as f:
        text = f.read()
    parts = [re.search(r"#define SR_VERSION_%s (\d+)" % k, text).group(1)
             for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True  # libstepring.so: a platform wheel, installed into platlib


class BuildPyWithCMake(build_py):
    """build_py, then the C core with CMake into the package."""

    def run(self):
        super().run()
        base = os.path.abspath(self.get_finalized_command("build").build_base)
        tree = os.path.join(base, "cmake")
        subprocess.check_call(["cmake", "-S", ROOT, "-B", tree, "-DSR_BUILD_TESTS=OFF",
                               "-DSR_BUILD_TOOLS=OFF"] +
                              shlex.split(os.environ.get("CMAKE_ARGS", "")))
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.check_call(["cmake", "--build", tree, "-j", jobs, "--target", "stepring",
                               "stepring_worker"])
        pkg = os.path.join(self.build_lib, "stepring")
        # the real file, not the soname links (the binding loads it by path)
        self.copy_file(os.path.realpath(os.path.join(tree, "libstepring.so")),
                       os.path.join(pkg, "libstepring.so"))
        self.copy_file(os.path.join(tree, "stepring-worker"),
                       os.path.join(pkg, "stepring-worker"))  # keeps its mode (0755)
        self.copy_file(os.path.join(ROOT, "python", "stepring-gymnasium.pth"),
                       os.path.join(self.build_lib, "stepring-gymnasium.pth"))


setup(
    version=version(),
    distclass=BinaryDistribution,
    cmdclass={"build_py": BuildPyWithCMake},
    options={"build": {"build_base": "build-pip"}},
)
