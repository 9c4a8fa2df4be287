"""The platform wheel (make wheel); pyproject.toml says the rest.

make wheel builds a staged copy of this directory with STOKER_WHEEL_PLATFORM
(manylinux_2_17_x86_64.manylinux2014_x86_64, say) and STOKER_WHEEL_BINARY
(make static's binary) set: the binary goes in as stoker/_bin/stoker, and
the wheel is py3-none-<platform>, not pure (its root is platlib): one
machine architecture, any Python 3. Without them (pip install ./python,
the editable install of .venv) the package stays a pure wheel that serves
nothing by itself.
"""

import os

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

PLATFORM = os.environ.get("STOKER_WHEEL_PLATFORM", "")
BINARY = os.environ.get("STOKER_WHEEL_BINARY", "")


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return bool(PLATFORM)


class BuildPy(build_py):
    def run(self):
        super().run()
        if not PLATFORM:
            return
        if not BINARY or not os.access(BINARY, os.X_OK):
            raise SystemExit(f"STOKER_WHEEL_PLATFORM={PLATFORM} needs STOKER_WHEEL_BINARY, the server binary; "
                             f"got {BINARY!r}")
        dst = os.path.join(self.build_lib, "stoker", "_bin")
        self.mkpath(dst)
        self.copy_file(BINARY, os.path.join(dst, "stoker"))  # mode kept: executable


class PlatformWheel(bdist_wheel):
    def get_tag(self):
        if not PLATFORM:
            return super().get_tag()
        return "py3", "none", PLATFORM


setup(distclass=BinaryDistribution, cmdclass={"build_py": BuildPy, "bdist_wheel": PlatformWheel})
