"""llmload: a Locust-based load and benchmark harness for OpenAI-compatible LLM servers (reasoning models).

``__version__`` is the installed distribution's version (``pyproject.toml`` ``project.version``, the one source
of the version), read from the package metadata; ``"0+unknown"`` when the ``llmload`` distribution is not
installed (the package imported from a bare source tree).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]


def _installed_version(dist: str = "llmload") -> str:
    """The version string of the installed distribution ``dist``, or ``"0+unknown"`` when it is not installed."""
    try:
        return version(dist)
    except PackageNotFoundError:
        return "0+unknown"


__version__: str = _installed_version()
