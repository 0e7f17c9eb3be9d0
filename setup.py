"""Build of the optional compiled extensions (docs/development/native.md): the per-read stream path
(harness/_fastchunk.pyx) and the records scanner (harness/_fastrecords.pyx).

Everything else is declared in pyproject.toml. The extensions are optional: without Cython, a C compiler or Python's
headers the install still succeeds (with a warning) and the pure-Python paths run
(``harness.chunkpath.CLIENT_PATH == "python"``; the report parses records with polars alone).
"""

from __future__ import annotations

import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """``build_ext`` that never fails the install: a compiled module that cannot be built is left out."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # no compiler at all (DistutilsPlatformError), or anything else at set-up
            self._skipped(e)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as e:  # CompileError / LinkError / a missing compiler binary or Python.h
            self._skipped(e, ext.name)

    @staticmethod
    def _skipped(e: BaseException, name: str = "harness._fastchunk, harness._fastrecords") -> None:
        print(f"llmload: the compiled extension(s) {name} were not built ({e}); the pure-Python paths will run "
              "(docs/development/native.md)", file=sys.stderr)


try:
    from Cython.Build import cythonize
except ImportError:  # Cython is a build requirement; a build without it installs the pure-Python path
    ext_modules: list[Extension] = []
else:
    ext_modules = cythonize(
        [Extension("harness._fastchunk", ["harness/_fastchunk.pyx"], optional=True),
         Extension("harness._fastrecords", ["harness/_fastrecords.pyx"], optional=True)],
        compiler_directives={"language_level": "3"},
        quiet=True,
    )

setup(ext_modules=ext_modules, cmdclass={"build_ext": OptionalBuildExt})
