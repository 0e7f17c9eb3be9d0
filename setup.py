"""Build of the optional compiled per-read stream path (harness/_fastchunk.pyx; docs/development/native.md).

Everything else is declared in pyproject.toml. The extension is optional: without Cython or a C compiler the
install still succeeds and the pure-Python path runs (``harness.chunkpath.CLIENT_PATH == "python"``).
"""

from setuptools import Extension, setup

try:
    from Cython.Build import cythonize
except ImportError:  # Cython is a build requirement; a build without it installs the pure-Python path
    ext_modules: list[Extension] = []
else:
    ext_modules = cythonize(
        [Extension("harness._fastchunk", ["harness/_fastchunk.pyx"], optional=True)],
        compiler_directives={"language_level": "3"},
        quiet=True,
    )

setup(ext_modules=ext_modules)
