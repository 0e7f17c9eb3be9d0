"""The documentation site's reference pages, generated from the code's own definitions.

Each generator returns Markdown (newline-terminated) built from the definition it documents, never from a copy:

* :func:`locust_options_markdown`: llmload's Locust command-line options (the arguments the package adds to
  Locust's parser through ``init_command_line_parser``, with their help text and defaults);
* :func:`cli_markdown`: the ``llmload`` command and its subcommands, as their own argparse ``--help`` prints them;
* :func:`profile_keys_markdown`: every profile key, from the pydantic models of :mod:`harness.config` (key path,
  type, default, ``Field(description=...)``);
* :func:`record_fields_markdown`: the request record's fields (:func:`harness.result.records_markdown`);
* :func:`prometheus_metrics_markdown`: the exporter's metric families (:func:`harness.catalogue.markdown_table`);
* :func:`report_figures_markdown`: the report's figure definitions (today :data:`harness.report.build.DEFINITIONS`
  and :data:`harness.report.compare.DEFINITIONS`; the one place to switch to a figure catalogue);
* :func:`terms_markdown`: the field's terms (TTFT, TPOT, steady state, goodput, ...), from
  :data:`harness.terms.TERMS`, each linked to the report-figure topics that define the figures built on it.

A page of ``docs/`` asks for one with a line ``<!-- generated: NAME -->`` (NAME a key of :data:`GENERATORS`);
:func:`expand` replaces those lines, and the mkdocs hook ``scripts/mkdocs_hooks.py`` calls it on every page at
build time. ``python -m harness.docs_ref NAME`` prints one generator's Markdown.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import io
import os
import re
import sys
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

__all__ = [
    "GENERATORS",
    "MARKER",
    "REPORT_FIGURES_PAGE",
    "cli_help_texts",
    "cli_markdown",
    "expand",
    "llmload_locust_actions",
    "locust_options_markdown",
    "profile_keys",
    "profile_keys_markdown",
    "prometheus_metrics_markdown",
    "record_fields_markdown",
    "report_figures_markdown",
    "terms_markdown",
]

#: A line of a docs page that the generator NAME replaces: ``<!-- generated: NAME -->``.
MARKER = re.compile(r"^<!-- generated: ([\w-]+) -->[ \t]*$", re.M)

#: Width of the captured ``--help`` texts (argparse wraps to ``$COLUMNS``).
_HELP_COLUMNS = "110"


def _cell(text: str) -> str:
    """``text`` fit for one Markdown table cell: one line, ``|`` escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


# --- Locust options ---------------------------------------------------------------------------------------------


def llmload_locust_actions() -> list[argparse.Action]:
    """The arguments llmload adds to Locust's parser, in the order they are added.

    Imports :mod:`harness.locust` (which registers llmload's ``init_command_line_parser`` listeners), builds
    Locust's full parser (:func:`locust.argument_parser.get_parser`) and keeps the actions that Locust's own parser
    (:func:`locust.argument_parser.setup_parser_arguments`) does not have.
    """
    from locust.argument_parser import get_empty_argument_parser, get_parser, setup_parser_arguments

    import harness.locust  # noqa: F401  (registers the listeners that add the options)

    base = get_empty_argument_parser(add_help=True)
    setup_parser_arguments(base)
    own = {s for a in base._actions for s in a.option_strings}
    return [a for a in get_parser()._actions if a.option_strings and not own & set(a.option_strings)]


def _default(action: argparse.Action) -> str:
    if isinstance(action, argparse._StoreTrueAction):
        return "off"
    if action.default in (None, "", argparse.SUPPRESS):
        return "-"
    return f"`{action.default}`"


def locust_options_markdown() -> str:
    """llmload's Locust options as a Markdown table: option (with its metavar or choices), default, help."""
    rows = ["| option | default | web UI | meaning |", "|---|---|---|---|"]
    for a in llmload_locust_actions():
        name = ", ".join(a.option_strings)
        if a.choices:
            name += " {" + ",".join(str(c) for c in a.choices) + "}"
        elif a.nargs != 0:
            name += f" {a.metavar or a.dest.upper()}"
        in_ui = "yes" if getattr(a, "include_in_web_ui", True) else "no"
        rows.append(f"| `{_cell(name)}` | {_cell(_default(a))} | {in_ui} | {_cell(a.help or '')} |")
    return "\n".join(rows) + "\n"


# --- llmload subcommands ----------------------------------------------------------------------------------------

#: The ``llmload`` invocations whose ``--help`` the CLI page shows (argv after ``llmload``).
CLI_COMMANDS: tuple[tuple[str, ...], ...] = (
    (),
    ("report",),
    ("compare",),
    ("sim", "serve"),
    ("fidelity",),
    ("panels",),
)


@contextlib.contextmanager
def _columns(n: str) -> Iterator[None]:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = n
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def cli_help_texts() -> dict[str, str]:
    """``llmload [...] --help`` of each of :data:`CLI_COMMANDS`, as :func:`harness.cli.main` prints it
    (command line, e.g. ``"llmload report"`` -> help text, wrapped at 110 columns).

    Raises:
        RuntimeError: a command's ``--help`` printed nothing.
    """
    from harness.cli import main

    out: dict[str, str] = {}
    for argv in CLI_COMMANDS:
        buf = io.StringIO()
        with _columns(_HELP_COLUMNS), contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):
            main([*argv, "--help"])
        text = buf.getvalue().rstrip()
        if not text:
            raise RuntimeError(f"llmload {' '.join(argv)} --help printed nothing")
        out[" ".join(("llmload", *argv))] = text
    return out


def cli_markdown() -> str:
    """The ``llmload`` command's reference: one section per subcommand holding its ``--help`` text."""
    parts = []
    for command, text in cli_help_texts().items():
        parts += [f"### `{command}`", "", "```text", text, "```", ""]
    return "\n".join(parts)


# --- profile keys -----------------------------------------------------------------------------------------------


def _type_name(tp: Any) -> str:
    """A readable name of a type annotation (``int | None``, ``list[float]``, ``'a' | 'b'``)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(_type_name(a) for a in args)}]"
    if tp is type(None):
        return "None"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "mapping"
    return getattr(tp, "__name__", str(tp))


def _models_in(tp: Any) -> tuple[type[BaseModel] | None, bool]:
    """The pydantic model an annotation holds (directly, optional, or as list items) and whether it is a list."""
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp, False
    if origin in (typing.Union, types.UnionType):
        for a in typing.get_args(tp):
            m, is_list = _models_in(a)
            if m is not None:
                return m, is_list
    if origin is list:
        m, _ = _models_in(typing.get_args(tp)[0])
        return m, m is not None
    return None, False


def _field_default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
    elif info.default is PydanticUndefined:
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        return str(extra.get("doc_default", "required"))  # a default the loader fills in (name: the file's stem)
    else:
        value = info.default
    if isinstance(value, BaseModel):
        return "(section defaults)"
    if value == "":
        return "empty"
    if value is None or value == {} or value == []:
        return "-" if value is None else f"`{value!r}`"
    return f"`{value!r}`" if not isinstance(value, str) else f"`{value}`"


def profile_keys(model: type[BaseModel] | None = None, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """Every key of a profile (default :class:`harness.config.Profile`), depth first in declaration order:
    (dotted key path, type, default, description). A list of sections is written ``key[].sub``; a key's name is
    its YAML name (the field's alias when it has one). A model whose written keys are not its fields (the ``slo``
    section: ``<metric>_p<q>_s`` keys, read into ``ttft_s`` ... + ``target_share``) declares them as
    ``WRITTEN_KEYS``: (key, type, default, description) rows, documented instead of its fields."""
    if model is None:
        from harness.config import Profile

        model = Profile
    written = getattr(model, "WRITTEN_KEYS", None)
    if written is not None:
        return [(prefix + k, tp, default, _cell(desc)) for k, tp, default, desc in written]
    rows: list[tuple[str, str, str, str]] = []
    for name, info in model.model_fields.items():
        key = prefix + (info.alias or name)
        sub, is_list = _models_in(info.annotation)
        desc = info.description or ""
        if sub is not None and not desc:
            desc = (sub.__doc__ or "").strip().split("\n\n")[0]
        type_name = f"list of {sub.__name__}" if is_list and sub is not None else _type_name(info.annotation)
        rows.append((key, type_name, _field_default(info), _cell(desc)))
        if sub is not None:
            rows += profile_keys(sub, key + ("[]." if is_list else "."))
    return rows


def profile_keys_markdown() -> str:
    """Every profile key as a Markdown table: key, type, default, meaning (from :func:`profile_keys`)."""
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for key, tp, default, desc in profile_keys():
        rows.append(f"| `{key}` | `{_cell(tp)}` | {_cell(default)} | {desc} |")
    return "\n".join(rows) + "\n"


# --- records, Prometheus, report figures -----------------------------------------------------------------------


def record_fields_markdown() -> str:
    """The record fields table page (:func:`harness.result.records_markdown`, also ``docs/records.md``)."""
    from harness.result import records_markdown

    return records_markdown()


def prometheus_metrics_markdown() -> str:
    """The exporter's metric families as a Markdown table (:func:`harness.catalogue.markdown_table`)."""
    from harness.catalogue import markdown_table

    return markdown_table()


def report_figures_markdown() -> str:
    """The report's figures as Markdown: the figure catalogue's reference
    (:func:`harness.report.catalogue.markdown_reference`: every figure's key, header, units and what computes it, the
    flags, each definition) without its page title, then the table of ``llmload compare``'s own definitions.

    The one function the report-figures page is generated from.
    """
    from harness.report.catalogue import markdown_reference
    from harness.report.compare import DEFINITIONS as COMPARE_DEFINITIONS

    body = markdown_reference().split("\n")
    if body and body[0].startswith("# "):
        body = body[1:]
    out = [*body, "", "## Compare (`compare.json` `definitions`)", "", "| key | definition |", "|---|---|"]
    out += [f"| `{k}` | {_cell(v)} |" for k, v in COMPARE_DEFINITIONS.items()]
    return "\n".join(out) + "\n"


#: The page of ``docs/reference/`` that holds the report figures' definitions (``### <topic>`` headings).
REPORT_FIGURES_PAGE = "report-figures.md"


def terms_markdown() -> str:
    """The metric-definitions page's body: :data:`harness.terms.INTRO`, then one table row per term of
    :data:`harness.terms.TERMS` (term, definition, record fields, links to the report-figure topics that define the
    figures built on it).

    Raises:
        KeyError: a term names a topic that :data:`harness.report.catalogue.TOPICS` does not have.
    """
    from harness.report.catalogue import TOPICS
    from harness.terms import INTRO, TERMS

    out = [INTRO, "",
           "Declared once in `harness/terms.py` (this table is generated from it). Where a report figure is computed "
           "from a term, the last column links that figure's exact rule in [Report figures](report-figures.md) "
           "(declared once in `harness/report/catalogue.py`); the term's text does not repeat it.", "",
           "| term | definition | record field(s) | report figures |", "|---|---|---|---|"]
    for t in TERMS:
        unknown = [k for k in t.topics if k not in TOPICS]
        if unknown:
            raise KeyError(f"term {t.name!r}: no report topic {unknown} (harness/report/catalogue.py TOPICS)")
        fields = ", ".join(f"`{f}`" for f in t.fields) or "-"
        topics = ", ".join(f"[{k}]({REPORT_FIGURES_PAGE}#{k})" for k in t.topics) or "-"
        out.append(f"| {_cell(t.title)} | {_cell(t.definition)} | {fields} | {topics} |")
    return "\n".join(out) + "\n"


#: The generators a docs page can ask for by name (``<!-- generated: NAME -->``).
GENERATORS: dict[str, Callable[[], str]] = {
    "locust-options": locust_options_markdown,
    "cli": cli_markdown,
    "profile-keys": profile_keys_markdown,
    "record-fields": record_fields_markdown,
    "prometheus-metrics": prometheus_metrics_markdown,
    "report-figures": report_figures_markdown,
    "metric-terms": terms_markdown,
}


#: A Sphinx role in a docstring-derived text: ``:mod:`harness.x``` or ``:class:`~harness.x.Y```.
_ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|exc|obj):`~?([^`]+)`")
#: A code span (single backticks, or double backticks around text that holds one).
_CODE_SPAN = re.compile(r"(``.+?``|`[^`]+`)")


def _safe_code(span: str) -> str:
    """A code span as HTML ``<code>`` when it holds a ``|`` (escaped ``\\|`` in a table cell would show its backslash
    inside a Markdown code span), else unchanged."""
    inner = span.strip("`").strip()
    if "|" not in inner:
        return span
    inner = inner.replace("\\|", "|")
    return "<code>" + html.escape(inner, quote=False).replace("|", "&#124;") + "</code>"


def md_safe(markdown: str) -> str:
    """Generated Markdown made safe to render: outside code spans and fenced blocks, ``<`` and ``>`` are escaped
    (placeholders such as ``<metric>_p<q>_s`` or ``'<tokens> <count>'`` would otherwise be read as HTML tags and
    vanish), Sphinx roles (``:mod:`x```) become code spans, and code spans holding ``|`` become ``<code>`` elements.
    HTML comments (a line starting ``<!--``) and fenced code blocks are left as they are."""
    out: list[str] = []
    fenced = False
    for line in markdown.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append(line)
            continue
        if fenced or line.lstrip().startswith("<!--"):
            out.append(line)
            continue
        line = _ROLE.sub(lambda m: f"`{m.group(1)}`", line)
        parts = _CODE_SPAN.split(line)
        for i, part in enumerate(parts):
            if i % 2:  # a code span
                parts[i] = _safe_code(part)
            else:
                parts[i] = part.replace("<", "&lt;").replace(">", "&gt;")
        out.append("".join(parts))
    return "\n".join(out)


def expand(markdown: str) -> str:
    """``markdown`` with every ``<!-- generated: NAME -->`` line replaced by ``GENERATORS[NAME]()``.

    Raises:
        KeyError: a marker names no generator.
    """

    def one(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in GENERATORS:
            raise KeyError(f"<!-- generated: {name} -->: no such generator (known: {', '.join(GENERATORS)})")
        return md_safe(GENERATORS[name]()).rstrip("\n")

    return MARKER.sub(one, markdown)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m harness.docs_ref NAME``: print one generator's Markdown; exit 0, or 2 for an unknown NAME."""
    ap = argparse.ArgumentParser(prog="python -m harness.docs_ref", description="Print a generated reference page.")
    ap.add_argument("name", choices=sorted(GENERATORS))
    args = ap.parse_args(list(sys.argv[1:] if argv is None else argv))
    sys.stdout.write(GENERATORS[args.name]())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
