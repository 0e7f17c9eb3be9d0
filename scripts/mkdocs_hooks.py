"""mkdocs hook (mkdocs.yml ``hooks:``): fill the reference pages' ``<!-- generated: NAME -->`` lines from the code.

Every page's Markdown goes through :func:`harness.docs_ref.expand` before mkdocs renders it, so the CLI options,
profile keys, Prometheus metrics and report figures pages are built from the code's own definitions.
"""

from __future__ import annotations

from typing import Any

from harness.docs_ref import expand


def on_page_markdown(markdown: str, **_: Any) -> str:
    """The page's Markdown with its generated blocks filled in (mkdocs ``on_page_markdown`` event)."""
    return expand(markdown)
