"""Builds foxhunt's hot path with mypyc (the modules listed in foxhunt/compiled.py); the rest is Python.

Everything else about the package is in pyproject.toml. `FOXHUNT_COMPILE=0` builds without compiling.
"""

import os
import runpy

from setuptools import setup
from setuptools.command.build_ext import build_ext

# read, not imported: importing it would run foxhunt/__init__.py
compiled = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "foxhunt", "compiled.py"))


class build_ext_and_record(build_ext):  # noqa: N801 - setuptools' naming
    """Once the modules are built, record which sources they were built from (foxhunt/compiled.py checks
    it at import); not before, so that a failed build never vouches for an older one."""

    def run(self):
        super().run()
        if self.extensions:  # with FOXHUNT_COMPILE=0 nothing was built, and nothing may be vouched for
            compiled["write_record"]()


ext_modules = []
if os.environ.get("FOXHUNT_COMPILE", "1") != "0":
    from mypyc.build import mypycify

    sources = [str(compiled["source_path"](m).relative_to(compiled["ROOT"])) for m in compiled["MODULES"]]
    ext_modules = mypycify(sources, group_name="foxhunt_native")
else:
    compiled["remove_compiled"]()  # installed without compiling: all of it runs as Python

setup(ext_modules=ext_modules, cmdclass={"build_ext": build_ext_and_record})
