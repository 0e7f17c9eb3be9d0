"""Schema validation of the shipped Grafana dashboard (grafana/dashboards/llmload.json), without Grafana.

The schema is Grafana's own, as generated into the official ``grafana-foundation-sdk`` (the build for Grafana
11.2.x, the version docker-compose.yml runs; see the pin in pyproject.toml). The validator

1. decodes the dashboard with the SDK's models: ``dashboard.Dashboard.from_json`` dispatches each panel's
   ``options`` and ``fieldConfig.defaults.custom`` to the panel plugin's models (cog's panelcfg variant registry,
   filled by ``cog.plugins.register_default_plugins``) and each target to the data source's query model (cog's
   dataquery variant registry: ``models.prometheus.Dataquery`` for ours);
2. re-encodes it with ``to_json`` (the SDK's ``cog.encoder.JSONEncoder``) and requires the round trip to keep
   every key and value of the original: a key the schema does not know is dropped by ``from_json`` and reported
   with its JSON path;
3. compensates explicitly for what the SDK's decoder lets through (it is a plain mapper, not a validator):

   - no type checks: ``from_json`` copies values as they are (``gridPos.w = "12"`` survives the round trip), so
     every value of the original is checked against the models' type hints (``typing.get_type_hints``: str,
     int, float, bool, enums, ``Literal``, lists, dicts, nested models, unions);
   - required fields: ``from_json`` fills a missing required field with its default (a target without
     ``expr`` is re-encoded with ``"expr": ""``), so the fields the schema requires (not ``Optional`` in the SDK,
     as in @grafana/schema's TypeScript types) must be in the file, for the dashboard's own models (panels, grid
     positions, variables, annotations, field config...) and the queries (``expr``, ``refId``);
   - unknown panel types and data sources: ``from_json`` keeps their options raw and decodes their targets as
     ``UnknownDataquery`` (a bag that round-trips anything), so the panel type must have a plugin model in the
     registry (or be ``row``) and every target must decode as a Prometheus query;
   - untyped slots: ``Panel.links`` and ``Panel.transformations`` are kept raw by ``Panel.from_json`` and the
     values of field overrides are typed ``object``: they are decoded here with the model their type hint (or,
     for an override, its property id) names, and round-tripped too;
   - Prometheus annotation fields: Grafana's Prometheus data source reads ``expr``, ``step``, ``titleFormat``,
     ``textFormat``, ``tagKeys`` and ``useValueForTime`` from the top level of an annotation (@grafana/prometheus
     11.2.0, datasource.ts and AnnotationQueryEditor.tsx), which the dashboard schema does not declare: they are
     allowed on Prometheus annotations only, with their types.

On top of the schema: units are Grafana unit ids, override matchers are Grafana matcher ids, and every data
source reference is the dashboard's ``${datasource}`` Prometheus variable.
"""

from __future__ import annotations

import copy
import enum
import functools
import inspect
import json
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from grafana_foundation_sdk.cog import plugins as cog_plugins
from grafana_foundation_sdk.cog import runtime as cog_runtime
from grafana_foundation_sdk.cog import variants as cog_variants
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as sdk_dashboard

DASHBOARD = Path(__file__).resolve().parents[1] / "grafana" / "dashboards" / "llmload.json"
PROMETHEUS_REF = {"type": "prometheus", "uid": "${datasource}"}
#: The one reference that is not to our Prometheus: the built-in "Annotations & Alerts" query of every dashboard.
GRAFANA_BUILTIN_REF = {"type": "grafana", "uid": "-- Grafana --"}

#: Unit ids of Grafana 11.2.0's unit picker: every ``id`` of ``getCategories()`` in @grafana/data 11.2.0
#: (dist/esm/valueFormats/categories.js), plus the alias ``buildFormats()`` adds. Not in the SDK: its
#: ``FieldConfig.unit`` is a plain ``str`` whose comment points at that file.
GRAFANA_UNITS = frozenset(
    """
    none string short sishort percent percentunit humidity dB candela hex0x hex sci locale pixel accMS2 accFS2 accG
    degree radian grad arcmin arcsec areaM2 areaF2 areaMI2 acres hectares flops mflops gflops tflops pflops eflops
    zflops yflops ppm conppb conngm3 conngNm3 con\u03bcgm3 con\u03bcgNm3 conmgm3 conmgNm3 congm3 congNm3 conmgdL
    conmmolL currencyUSD currencyGBP currencyEUR currencyJPY currencyRUB currencyUAH currencyBRL currencyDKK
    currencyISK currencyNOK currencySEK currencyCZK currencyCHF currencyPLN currencyBTC currencymBTC
    currency\u03bcBTC currencyZAR currencyINR currencyKRW currencyIDR currencyPHP currencyVND currencyTRY currencyMYR
    currencyXPF currencyBGN currencyPYG currencyUYU bytes decbytes bits decbits kbytes deckbytes mbytes decmbytes
    gbytes decgbytes tbytes dectbytes pbytes decpbytes pps binBps Bps binbps bps KiBs Kibits KBs Kbits MiBs Mibits
    MBs Mbits GiBs Gibits GBs Gbits TiBs Tibits TBs Tbits PiBs Pibits PBs Pbits dateTimeAsIso
    dateTimeAsIsoNoDateIfToday dateTimeAsUS dateTimeAsUSNoDateIfToday dateTimeAsLocal dateTimeAsLocalNoDateIfToday
    dateTimeAsSystem dateTimeFromNow watt kwatt megwatt gwatt mwatt Wm2 voltamp kvoltamp voltampreact kvoltampreact
    watth watthperkg kwatth kwattm mwatth amph kamph mamph joule ev amp kamp mamp volt kvolt mvolt dBm mohm ohm
    kohm Mohm farad \u00b5farad nfarad pfarad ffarad henry mhenry \u00b5henry lumens flowgpm flowcms flowcfs flowcfm
    litreh flowlpm flowmlpm lux forceNm forcekNm forceN forcekN Hs KHs MHs GHs THs PHs EHs massmg massg masslb
    masskg masst lengthmm lengthin lengthft lengthm lengthkm lengthmi pressurembar pressurebar pressurekbar
    pressurepa pressurehpa pressurekpa pressurehg pressurepsi radbq radci radgy radrad radsv radmsv radusv radrem
    radexpckg radr radsvh radmsvh radusvh rotrpm rothz rotkhz rotmhz rotghz rotrads rotdegs celsius fahrenheit
    kelvin hertz ns \u00b5s ms s m h d dtdurationms dtdurations dthms dtdhms timeticks clockms clocks cps ops reqps
    rps wps iops eps mps recps rowsps cpm opm reqpm rpm wpm epm mpm recpm rowspm velocityms velocitykmh velocitymph
    velocityknot mlitre litre m3 Nm3 dm3 gallons bool bool_yes_no bool_on_off
    farenheit
    """.split()
)
#: Custom units ``getValueFormat`` (@grafana/data 11.2.0, valueFormats.ts) parses: ``prefix:$``, ``suffix:tok``...
CUSTOM_UNIT = re.compile(r"^(prefix|suffix|time|si|count|currency|bool):.")
#: ``FieldMatcherID`` of @grafana/data 11.2.0 (transformations/matchers/ids.ts): what an override may match by.
FIELD_MATCHERS = frozenset(
    "numeric time first firstTimeField byType byTypes byName byNames byRegexp byRegexpOrNames byFrameRefID "
    "byValue".split()
)
#: Top-level annotation fields Grafana 11.2's Prometheus data source reads (see the module docstring).
PROMETHEUS_ANNOTATION_FIELDS: dict[str, Any] = {
    "expr": str,
    "step": str,
    "titleFormat": str,
    "textFormat": str,
    "tagKeys": str,
    "useValueForTime": bool,
}
#: ``definition``: the text Grafana shows for a query variable's query; ``QueryVariableModel.definition: string``
#: in @grafana/data 11.2.0 (types/templateVars.ts), written by Grafana's variable editor, not in the schema.
QUERY_VARIABLE_FIELDS: dict[str, Any] = {"definition": str}


def _is_prometheus(raw: dict[str, Any]) -> bool:
    ds = raw.get("datasource")
    return isinstance(ds, dict) and ds.get("type") == "prometheus"


#: Keys the SDK models lack but Grafana 11.2 reads and writes: (model, when, key -> type hint).
EXTENSIONS: list[tuple[type, Callable[[dict[str, Any]], bool], dict[str, Any]]] = [
    (sdk_dashboard.AnnotationQuery, _is_prometheus, PROMETHEUS_ANNOTATION_FIELDS),
    (sdk_dashboard.VariableModel, lambda raw: raw.get("type") == "query", QUERY_VARIABLE_FIELDS),
]


@dataclass(frozen=True)
class Problem:
    """One validation failure: where (a JSON path such as ``$.panels[3].gridPos.w``) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def _registry() -> cog_runtime.Runtime:
    """The SDK's variant registry with Grafana's core panel plugins and data sources registered."""
    cog_plugins.register_default_plugins()
    return cog_runtime.Runtime()


def _get(node: Any, *keys: str) -> Any:
    """``node[k1][k2]...``, or None where a level is missing or not an object."""
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def _requires_fields(cls: type) -> bool:
    """Whether a model's required fields (not ``Optional`` in the SDK, nor ``?`` in @grafana/schema's types)
    must be in the file: for the dashboard's own models and the queries, not for the panel plugins' options and
    custom field config, which Grafana merges with the plugin's defaults when it loads a panel (the schema marks
    e.g. ``legend.calcs`` and stat's ``wideLayout`` required, and Grafana's own exports leave them out)."""
    return cls.__module__ == sdk_dashboard.__name__ or issubclass(cls, cog_variants.Dataquery)


def _is_model(cls: Any) -> bool:
    return inspect.isclass(cls) and callable(getattr(cls, "from_json", None)) and hasattr(cls, "to_json")


@functools.cache
def model_fields(cls: Any) -> dict[str, tuple[str, Any]]:
    """JSON key -> (attribute, type hint) of an SDK model class.

    The SDK keeps this mapping only in the code of ``to_json``/``from_json``; every generated ``to_json`` copies
    each attribute to one key as it is, so setting each attribute to a distinct sentinel and encoding recovers it.
    """
    hints = typing.get_type_hints(cls)
    obj = cls.__new__(cls)
    sentinels: dict[int, str] = {}
    for attr in hints:
        marker = object()
        sentinels[id(marker)] = attr
        setattr(obj, attr, marker)
    out: dict[str, tuple[str, Any]] = {}
    for key, value in obj.to_json().items():
        attr = sentinels[id(value)]
        out[key] = (attr, hints[attr])
    assert len(out) == len(hints), (cls, set(hints) - {a for a, _ in out.values()})
    return out


def _optional(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)


def _type_name(hint: Any) -> str:
    """A type hint for a message: ``int``, ``VariableRefresh (one of [0, 1, 2])``, ``str | list[str]``."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(h) for h in typing.get_args(hint) if h is not type(None))
    if origin is typing.Literal:
        return f"one of {list(typing.get_args(hint))}"
    if inspect.isclass(hint) and issubclass(hint, enum.Enum):
        return f"{hint.__name__} (one of {[m.value for m in hint]})"
    if origin in (list, dict):
        return f"{origin.__name__}[{', '.join(_type_name(h) for h in typing.get_args(hint))}]"
    if inspect.isclass(hint) and origin is None:
        return hint.__name__
    return str(hint).replace("typing.", "").replace("grafana_foundation_sdk.models.", "")


def _json_path(path: str, key: str) -> str:
    return f"{path}.{key}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) else f"{path}[{json.dumps(key)}]"


def _matches(raw: Any, hint: Any) -> bool:
    """Whether a JSON value has the shape of a type hint, without looking inside lists, dicts or models."""
    if hint is Any or hint is object:
        return True
    if hint is type(None):
        return raw is None
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return any(raw == v and type(raw) is type(v) for v in typing.get_args(hint))
    if origin in (typing.Union, types.UnionType):
        return any(_matches(raw, h) for h in typing.get_args(hint))
    if origin is list:
        return isinstance(raw, list)
    if origin is dict:
        return isinstance(raw, dict)
    if inspect.isclass(hint) and issubclass(hint, enum.Enum):
        return any(raw == m.value and type(raw) is type(m.value) for m in hint)  # StrEnum / IntEnum
    if hint is bool:
        return isinstance(raw, bool)
    if hint is int:
        return isinstance(raw, int) and not isinstance(raw, bool)
    if hint is float:
        return isinstance(raw, int | float) and not isinstance(raw, bool)
    if hint is str:
        return isinstance(raw, str)
    if hint is cog_variants.Dataquery or _is_model(hint):
        return isinstance(raw, dict)
    raise AssertionError(f"type hint the validator does not know: {hint!r}")  # pragma: no cover


def _discriminate(raw: dict[str, Any], models: list[Any]) -> Any:
    """The member of a union of models a JSON object is, as the SDK's decoders pick it: by its ``type`` when a
    member's ``type`` is a ``Literal`` (``RowPanel``: ``"row"``), else the member with a free ``type``
    (``Panel``); None when that does not decide."""
    free, claims = [], []
    for cls in models:
        hint = model_fields(cls).get("type", (None, None))[1]
        if typing.get_origin(hint) is typing.Literal:
            if raw.get("type") in typing.get_args(hint):
                claims.append(cls)
        else:
            free.append(cls)
    if len(claims) == 1:
        return claims[0]
    return free[0] if not claims and len(free) == 1 else None


def _round_trip_losses(original: Any, encoded: Any, path: str, out: list[Problem]) -> None:
    """Report every key or value of ``original`` that ``encoded`` (its SDK round trip) does not keep."""
    if isinstance(original, dict):
        if not isinstance(encoded, dict):
            out.append(Problem(path, f"re-encoded as {encoded!r}"))
            return
        for key, value in original.items():
            sub = _json_path(path, key)
            if key not in encoded:
                what = "null where the schema has no null" if value is None else "unknown key (not in the schema)"
                out.append(Problem(sub, f"{what}: lost on the SDK round trip"))
            else:
                _round_trip_losses(value, encoded[key], sub, out)
    elif isinstance(original, list):
        if not isinstance(encoded, list) or len(encoded) != len(original):
            out.append(Problem(path, f"re-encoded as {encoded!r}"))
            return
        for i, (a, b) in enumerate(zip(original, encoded, strict=True)):
            _round_trip_losses(a, b, f"{path}[{i}]", out)
    elif original != encoded or type(original) is not type(encoded):
        out.append(Problem(path, f"{original!r} re-encoded as {encoded!r}"))


def _encode(obj: Any) -> Any:
    return json.loads(json.dumps(obj, cls=JSONEncoder))


class _Validator:
    """Walks the original JSON next to its SDK decoding, checking each value against the models' type hints."""

    def __init__(self) -> None:
        self.registry = _registry()
        self.problems: list[Problem] = []
        self.losses: list[Problem] = []  # round-trip losses, reported but for :attr:`extensions`
        self.extensions: set[str] = set()  # paths of keys the schema lacks but Grafana reads (see module doc)

    def report(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def decode(self, cls: Any, raw: dict[str, Any], path: str) -> tuple[Any, Exception | None]:
        """``cls.from_json(raw)`` with its round trip checked, or (None, the decoder's exception)."""
        try:
            obj = cls.from_json(raw)
            encoded = _encode(obj)
        except Exception as exc:
            return None, exc
        _round_trip_losses(raw, encoded, path, self.losses)
        return obj, None

    def check(self, raw: Any, decoded: Any, hint: Any, path: str) -> None:
        """Check a JSON value against a type hint; ``decoded`` is the SDK's decoding of it (or None, or raw)."""
        if (hint is object or hint is Any) and _is_model(type(decoded)):
            hint = type(decoded)  # Panel.options / FieldConfig.custom: the plugin model the registry chose
        if not _matches(raw, hint):
            self.report(path, f"expected {_type_name(hint)}, got {type(raw).__name__} {raw!r}")
            return
        origin = typing.get_origin(hint)
        if origin in (typing.Union, types.UnionType):
            members = [h for h in typing.get_args(hint) if _matches(raw, h)]
            models = [h for h in members if _is_model(h)]
            chosen = next((h for h in models if isinstance(decoded, h)), None)
            if chosen is None and len(models) > 1:
                chosen = _discriminate(raw, models)
                if chosen is None:
                    self.report(path, f"none of {_type_name(hint)} fits")
                    return
            self.check(raw, decoded, chosen or members[0], path)
        elif origin is list:
            (item,) = typing.get_args(hint)
            items: list[Any] = decoded if isinstance(decoded, list) and len(decoded) == len(raw) else [None] * len(raw)
            for i, (r, d) in enumerate(zip(raw, items, strict=True)):
                self.check(r, d, item, f"{path}[{i}]")
        elif origin is dict:
            _, item = typing.get_args(hint)
            values: dict[str, Any] = decoded if isinstance(decoded, dict) else {}
            for k, r in raw.items():
                self.check(r, values.get(k), item, _json_path(path, k))
        elif hint is cog_variants.Dataquery:
            self.dataquery(raw, decoded, path)
        elif _is_model(hint):
            self.model(raw, decoded, hint, path)

    def dataquery(self, raw: dict[str, Any], decoded: Any, path: str) -> None:
        """A target: decoded by the registry as its data source's query model (by the panel's data source type
        when the panel decoded it, else by the target's own)."""
        own = None
        if decoded is None:  # the panel did not decode: decode the target alone (and round-trip it)
            try:
                own = self.registry.dataquery_from_json(raw, "")
            except Exception as exc:
                self.report(path, f"the SDK cannot decode this query: {exc!r}")
                return
        query = decoded if decoded is not None else own
        # Compensation: a target of an unknown data source decodes as UnknownDataquery, which keeps anything.
        if not isinstance(query, cog_variants.Dataquery) or isinstance(query, cog_runtime.UnknownDataquery):
            self.report(path, "not a query of a known data source (UnknownDataquery): no datasource.type?")
            return
        self.model(raw, decoded, type(query), path)

    def model(self, raw: dict[str, Any], decoded: Any, cls: Any, path: str) -> None:
        error, before = None, len(self.problems) + len(self.losses)
        if not isinstance(decoded, cls):  # kept raw by the parent's from_json (links, transformations, ...)
            decoded, error = self.decode(cls, raw, path)
        fields = model_fields(cls)
        if _requires_fields(cls):
            for key, (_, hint) in fields.items():
                if not _optional(hint) and key not in raw:
                    self.report(_json_path(path, key), f"required field missing from {cls.__name__}")
        for key, value in raw.items():
            sub = _json_path(path, key)
            if key not in fields:
                self.extension(raw, key, cls, sub)
                continue
            attr, hint = fields[key]
            self.check(value, getattr(decoded, attr, None) if decoded is not None else None, hint, sub)
        hook = getattr(self, f"hook_{cls.__name__}", None)
        if hook is not None:
            hook(raw, decoded, path)
        if error is not None and len(self.problems) + len(self.losses) == before:  # else the walk found the cause
            self.report(path, f"the SDK cannot decode this as {cls.__name__}: {error!r}")

    def extension(self, raw: dict[str, Any], key: str, cls: Any, path: str) -> None:
        """A key the model lacks: reported by the round trip, unless Grafana reads it (:data:`EXTENSIONS`)."""
        for owner, applies, extra in EXTENSIONS:
            if cls is owner and key in extra and applies(raw):
                self.extensions.add(path)
                self.check(raw[key], None, extra[key], path)

    # -- compensations tied to one model ---------------------------------------------------------------------
    def hook_Panel(self, raw: dict[str, Any], decoded: Any, path: str) -> None:
        ptype = raw.get("type")
        config = self.registry.panelcfg_config(ptype) if isinstance(ptype, str) else None
        if config is None:
            self.report(_json_path(path, "type"), f"unknown panel type {ptype!r}: not a core Grafana panel plugin")
            return
        # Compensation: without a custom field config model, Panel.from_json keeps ``custom`` raw.
        if _get(raw, "fieldConfig", "defaults", "custom") and config.field_config_from_json_hook is None:
            self.report(f"{path}.fieldConfig.defaults.custom", f"panel type {ptype!r} has no custom field config")
        overrides = _get(raw, "fieldConfig", "overrides")
        if isinstance(overrides, list):
            for i, override in enumerate(overrides):
                if isinstance(override, dict):
                    self.override(override, config, f"{path}.fieldConfig.overrides[{i}]")

    def override(self, raw: dict[str, Any], config: cog_runtime.PanelCfgConfig, path: str) -> None:
        """Compensation: ``DynamicConfigValue.value`` is typed ``object``; type it by the property id."""
        matcher = _get(raw, "matcher", "id")
        if matcher not in FIELD_MATCHERS:
            self.report(f"{path}.matcher.id", f"unknown field matcher {matcher!r}")
        properties = raw.get("properties")
        for j, prop in enumerate(properties if isinstance(properties, list) else []):
            if not isinstance(prop, dict) or not isinstance(prop.get("id"), str) or "value" not in prop:
                continue
            sub = f"{path}.properties[{j}]"
            prop_id: str = prop["id"]
            if prop_id.startswith("custom."):
                hook = config.field_config_from_json_hook
                owner = getattr(hook, "__self__", None)  # the bound classmethod's class
                fields = model_fields(owner) if owner is not None else {}
                key = prop_id.removeprefix("custom.")
            else:
                fields, key = model_fields(sdk_dashboard.FieldConfig), prop_id
            if key not in fields:
                self.report(f"{sub}.id", f"unknown field config property {prop_id!r}")
                continue
            self.check(prop["value"], None, fields[key][1], f"{sub}.value")


def validate_dashboard(dash: Any) -> list[Problem]:
    """Every schema problem of a dashboard JSON document (parsed), each with its JSON path; [] when valid."""
    v = _Validator()
    v.check(dash, None, sdk_dashboard.Dashboard, "$")
    typed = {p.path for p in v.problems}  # a value of a wrong type is also lost on the round trip: said once
    problems = [p for p in v.losses if p.path not in v.extensions and p.path not in typed] + v.problems
    problems += check_units(dash) + check_datasource_refs(dash)
    return list(dict.fromkeys(problems))  # a problem found twice (round trip at two levels) once


def _walk(node: Any, path: str = "$") -> typing.Iterator[tuple[str, Any]]:
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _walk(v, _json_path(path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, f"{path}[{i}]")


def known_unit(unit: str) -> bool:
    """Whether Grafana 11.2 knows a unit id (a picker unit or a ``prefix:``/``suffix:``/... custom unit)."""
    return unit in GRAFANA_UNITS or bool(CUSTOM_UNIT.match(unit))


def check_units(dash: Any) -> list[Problem]:
    """Every ``fieldConfig.defaults.unit`` and ``unit`` override of the dashboard is a Grafana unit id."""
    out = []
    for path, node in _walk(dash):
        if not isinstance(node, dict):
            continue
        if path.endswith(".fieldConfig.defaults") and "unit" in node:
            unit, where = node["unit"], f"{path}.unit"
        elif node.get("id") == "unit" and "value" in node and re.search(r"\.properties\[\d+\]$", path):
            unit, where = node["value"], f"{path}.value"
        else:
            continue
        if not isinstance(unit, str) or not known_unit(unit):
            out.append(Problem(where, f"unknown Grafana unit {unit!r}"))
    return out


def check_datasource_refs(dash: Any) -> list[Problem]:
    """Every ``datasource`` reference is the ``${datasource}`` Prometheus variable (but Grafana's built-in
    annotation); the ``datasource`` variable offers Prometheus data sources."""
    out = []
    for path, node in _walk(dash):
        if path.endswith(".datasource") and node != PROMETHEUS_REF:
            builtin = re.fullmatch(r"\$\.annotations\.list\[\d+\]\.datasource", path) and node == GRAFANA_BUILTIN_REF
            if not builtin:
                out.append(Problem(path, f"datasource ref {node!r} is not {PROMETHEUS_REF}"))
    variables = _get(dash, "templating", "list")
    if not any(
        _get(v, "name") == "datasource" and _get(v, "type") == "datasource" and _get(v, "query") == "prometheus"
        for v in (variables if isinstance(variables, list) else [])
    ):
        out.append(Problem("$.templating.list", "no variable 'datasource' of type datasource, query prometheus"))
    return out


# -- tests ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dash() -> dict[str, Any]:
    """The shipped dashboard, parsed."""
    return dict(json.loads(DASHBOARD.read_text()))


def test_dashboard_matches_grafana_schema(dash: dict[str, Any]) -> None:
    """The shipped dashboard has no schema, unit or datasource problem."""
    problems = validate_dashboard(dash)
    assert not problems, "\n".join(map(str, problems))


def test_validator_sees_every_panel_and_query(dash: dict[str, Any]) -> None:
    """The walk reaches the panels' plugin options and the targets as Prometheus queries, not raw bags."""
    from grafana_foundation_sdk.models import common, prometheus, stat, statetimeline, timeseries

    _registry()
    decoded = sdk_dashboard.Dashboard.from_json(copy.deepcopy(dash))
    panels = [p for p in decoded.panels or [] if isinstance(p, sdk_dashboard.Panel)]
    assert len(decoded.panels or []) == len(dash["panels"]) and len(panels) >= 15
    for p in panels:
        options = {"timeseries": timeseries.Options, "stat": stat.Options,
                   "state-timeline": statetimeline.Options}[p.type_val]  # fmt: skip
        assert isinstance(p.options, options), p.title
        assert p.field_config is not None and p.field_config.defaults is not None
        if p.type_val == "timeseries":
            assert isinstance(p.field_config.defaults.custom, common.GraphFieldConfig), p.title
        if p.type_val == "state-timeline":  # the firing-alerts panel (prometheus/alerts.yml)
            assert isinstance(p.field_config.defaults.custom, statetimeline.FieldConfig), p.title
    targets = [t for p in panels for t in p.targets or []]
    assert len(targets) == sum(len(p.get("targets", [])) for p in dash["panels"]) >= 40
    assert all(isinstance(t, prometheus.Dataquery) for t in targets)


Mutation = Callable[[dict[str, Any]], None]
PANEL = "Requests/s by outcome"  # a timeseries panel with one target
OVERRIDES = "Users and requests in flight"  # its overrides: custom.lineStyle, custom.lineInterpolation


def _in_panel(title: str, fn: Callable[[dict[str, Any]], Any]) -> Mutation:
    """A mutation of the panel with this title."""

    def mutate(dash: dict[str, Any]) -> None:
        fn(next(p for p in dash["panels"] if p["title"] == title))

    return mutate


def _panel_path(dash: dict[str, Any], title: str) -> str:
    """JSON path of the panel with this title."""
    return f"$.panels[{next(i for i, p in enumerate(dash['panels']) if p['title'] == title)}]"


def _target(fn: Callable[[dict[str, Any]], Any]) -> Mutation:
    """A mutation of the first target of :data:`PANEL`."""
    return _in_panel(PANEL, lambda p: fn(p["targets"][0]))


#: name -> (mutation, where the problem must be reported: a JSON path, "{panel}" standing for PANEL's and
#: "{overrides}" for OVERRIDES', and a part of its message).
CASES: dict[str, tuple[Mutation, str, str]] = {
    # the four of the brief
    "unknown panel key": (_in_panel(PANEL, lambda p: p.update(gridpos=p["gridPos"])), "{panel}.gridpos", "unknown key"),
    "gridPos.w as a string": (
        _in_panel(PANEL, lambda p: p["gridPos"].update(w="12")),
        "{panel}.gridPos.w",
        "expected int",
    ),
    "unknown panel type": (
        _in_panel(PANEL, lambda p: p.update(type="timeseriez")),
        "{panel}.type",
        "unknown panel type",
    ),
    "target without expr": (_target(lambda t: t.pop("expr")), "{panel}.targets[0].expr", "required field missing"),
    # more shapes
    "gridPos missing h": (_in_panel(PANEL, lambda p: p["gridPos"].pop("h")), "{panel}.gridPos.h", "required field"),
    "gridPos as a list": (
        _in_panel(PANEL, lambda p: p.update(gridPos=[0, 1, 12, 8])),
        "{panel}.gridPos",
        "expected GridPos",
    ),
    "target without refId": (_target(lambda t: t.pop("refId")), "{panel}.targets[0].refId", "required field missing"),
    "misspelled target key": (
        _target(lambda t: t.update(legend_format="x")),
        "{panel}.targets[0].legend_format",
        "unknown key",
    ),
    "target expr not a string": (_target(lambda t: t.update(expr=["up"])), "{panel}.targets[0].expr", "expected str"),
    "target range as a string": (
        _target(lambda t: t.update(range="true")),
        "{panel}.targets[0].range",
        "expected bool",
    ),
    "bad editorMode": (
        _target(lambda t: t.update(editorMode="text")),
        "{panel}.targets[0].editorMode",
        "QueryEditorMode",
    ),
    "targets not a list": (
        _in_panel(PANEL, lambda p: p.update(targets=p["targets"][0])),
        "{panel}.targets",
        "expected list",
    ),
    "target of an unknown data source": (
        _in_panel(PANEL, lambda p: (p.pop("datasource"), p["targets"][0].update(datasource={"type": "x", "uid": "y"}))),
        "{panel}.targets[0]",
        "UnknownDataquery",
    ),
    "unknown key in plugin options": (
        _in_panel(PANEL, lambda p: p["options"]["legend"].update(show=True)),
        "{panel}.options.legend.show",
        "unknown key",
    ),
    "bad legend placement": (
        _in_panel(PANEL, lambda p: p["options"]["legend"].update(placement="left")),
        "{panel}.options.legend.placement",
        "LegendPlacement",
    ),
    "unknown key in custom field config": (
        _in_panel(PANEL, lambda p: p["fieldConfig"]["defaults"]["custom"].update(linewidth=2)),
        "{panel}.fieldConfig.defaults.custom.linewidth",
        "unknown key",
    ),
    "unknown unit": (
        _in_panel(PANEL, lambda p: p["fieldConfig"]["defaults"].update(unit="req/s")),
        "{panel}.fieldConfig.defaults.unit",
        "unknown Grafana unit",
    ),
    "wrong datasource ref": (
        _target(lambda t: t.update(datasource={"type": "prometheus", "uid": "prom"})),
        "{panel}.targets[0].datasource",
        "is not",
    ),
    "bad panel link": (
        _in_panel(PANEL, lambda p: p.update(links=[{"title": "x", "url": "/", "type": "link", "targetblank": True}])),
        "{panel}.links[0].targetblank",
        "unknown key",
    ),
    "bad override value": (
        _in_panel(OVERRIDES, lambda p: p["fieldConfig"]["overrides"][0]["properties"][1].update(value="stepafter")),
        "{overrides}.fieldConfig.overrides[0].properties[1].value",
        "LineInterpolation",
    ),
    "unknown override key in a value": (
        _in_panel(OVERRIDES, lambda p: p["fieldConfig"]["overrides"][0]["properties"][0]["value"].update(width=2)),
        "{overrides}.fieldConfig.overrides[0].properties[0].value.width",
        "unknown key",
    ),
    "unknown override property": (
        _in_panel(OVERRIDES, lambda p: p["fieldConfig"]["overrides"][0]["properties"][0].update(id="custom.dashes")),
        "{overrides}.fieldConfig.overrides[0].properties[0].id",
        "unknown field config property",
    ),
    "unknown override matcher": (
        _in_panel(OVERRIDES, lambda p: p["fieldConfig"]["overrides"][0]["matcher"].update(id="byTitle")),
        "{overrides}.fieldConfig.overrides[0].matcher.id",
        "unknown field matcher",
    ),
    "unknown top-level key": (lambda d: d.update(refresh_rate="10s"), "$.refresh_rate", "unknown key"),
    "schemaVersion missing": (lambda d: d.pop("schemaVersion"), "$.schemaVersion", "required field missing"),
    "graphTooltip out of range": (lambda d: d.update(graphTooltip=3), "$.graphTooltip", "DashboardCursorSync"),
    "misspelled Prometheus annotation key": (
        lambda d: d["annotations"]["list"][1].update(titleFromat="x"),
        "$.annotations.list[1].titleFromat",
        "unknown key",
    ),
    "Prometheus annotation field of a wrong type": (
        lambda d: d["annotations"]["list"][1].update(useValueForTime="yes"),
        "$.annotations.list[1].useValueForTime",
        "expected bool",
    ),
    "variable refresh as a string": (
        lambda d: d["templating"]["list"][1].update(refresh="2"),
        "$.templating.list[1].refresh",
        "VariableRefresh",
    ),
    "definition on a non-query variable": (
        lambda d: d["templating"]["list"][2].update(definition="x"),
        "$.templating.list[2].definition",
        "unknown key",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_validator_reports_mutation(dash: dict[str, Any], case: str) -> None:
    """Each mutation of the dashboard is reported at its JSON path (so the check above can fail)."""
    mutate, where, message = CASES[case]
    path = where.format(panel=_panel_path(dash, PANEL), overrides=_panel_path(dash, OVERRIDES))
    bad = copy.deepcopy(dash)
    mutate(bad)
    problems = validate_dashboard(bad)
    assert any(p.path == path and message in p.message for p in problems), "\n".join(map(str, problems))


def test_validator_reports_every_problem_once(dash: dict[str, Any]) -> None:
    """Several mutations at once: each reported, none twice, and the original dashboard left as it was."""
    bad = copy.deepcopy(dash)
    for name in ("unknown panel key", "gridPos.w as a string", "target without expr", "unknown unit"):
        CASES[name][0](bad)
    before = copy.deepcopy(bad)
    problems = validate_dashboard(bad)
    assert bad == before
    panel = _panel_path(dash, PANEL)
    assert sorted(p.path for p in problems) == sorted(
        f"{panel}.{s}" for s in ("gridpos", "gridPos.w", "targets[0].expr", "fieldConfig.defaults.unit")
    ), "\n".join(map(str, problems))


def test_units() -> None:
    """Picker ids, custom units, and the typos the unit check is for."""
    assert all(known_unit(u) for u in ("s", "reqps", "percentunit", "short", "h", "\u00b5s", "suffix:tok/s", "si:mF"))
    assert not any(known_unit(u) for u in ("sec", "req/s", "percent_unit", "", "suffix:", "Short"))
    assert len(GRAFANA_UNITS) == 272


def test_latency_percentiles_come_from_the_percentile_gauges(dash: dict[str, Any]) -> None:
    """The $window options are the exporter's percentile windows; every TTFT, TTFAT, inter-chunk, TPOT and E2E
    percentile the dashboard shows reads its percentile gauge at ``window="$window"`` (a percentile the gauge
    has, the legend naming it), never ``histogram_quantile()`` over the time histograms (up to ~25 % off)."""
    from harness.catalogue import HISTOGRAMS, PERCENTILE_GAUGES, PERCENTILE_WINDOWS, PERCENTILES, TIME_BUCKETS

    (window,) = [v for v in dash["templating"]["list"] if v["name"] == "window"]
    assert window["query"].split(",") == [o["value"] for o in window["options"]] == list(PERCENTILE_WINDOWS)
    assert window["current"]["value"] in PERCENTILE_WINDOWS
    timed = [n for n, h in HISTOGRAMS.items() if h[1] == TIME_BUCKETS]
    targets = [(p["title"], t) for p in dash["panels"] for t in p.get("targets", [])]
    seen: set[str] = set()
    for title, t in targets:
        expr = t["expr"]
        assert not any("histogram_quantile" in expr and f"{n}_bucket" in expr for n in timed), (title, expr)
        m = re.fullmatch(r'(\w+)\{model=~"\$model",window="\$window",percentile="(\d+)"\}', expr)
        if any(g in expr for g in PERCENTILE_GAUGES):
            assert m and m.group(1) in PERCENTILE_GAUGES and int(m.group(2)) in PERCENTILES, (title, expr)
            assert t["legendFormat"].endswith(f"p{m.group(2)}"), (title, t["legendFormat"])
            seen.add(m.group(1))
    assert seen == set(PERCENTILE_GAUGES)
