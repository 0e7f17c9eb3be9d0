"""The typed report (:mod:`harness.report.model`): report.json is its serialisation, one reader loads this version's
and earlier versions' files, and a built report declares every key it holds."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from harness.report import build_report, write_report
from harness.report.build import DEFINITIONS
from harness.report.model import (
    SCHEMA,
    HoursEntry,
    Report,
    ReportError,
    StepRow,
    as_report,
    load_report,
    parse_report,
    undeclared_keys,
)
from harness.report.selfcert import VERDICTS
from harness.report.until import UNTIL_ROW_KEYS
from tests.report.rundir import T0, phase, rec, run_end, write_run
from tests.report.test_frame import demo_run

DATA = Path(__file__).resolve().parents[1] / "data"
#: report.json of the demo run written by the version before the typed models (run_dir replaced by "demo-run").
V1_DEMO = DATA / "report-v1" / "demo.report.json"
#: report.json files of real runs of earlier versions (rendered into the docs' excerpts).
EXCERPTS = sorted((DATA / "excerpts").glob("*.report.json"))


def _every_field_set(model: Any, where: str = "$") -> list[str]:
    """Paths of fields left at their default (not set by the builder) in ``model`` and its nested models."""
    out = [f"{where}.{k}" for k in type(model).model_fields if k not in model.model_fields_set]
    for k in type(model).model_fields:
        v = getattr(model, k)
        for i, x in enumerate(v if isinstance(v, list) else [v]):
            if isinstance(x, StepRow | Report):
                out += _every_field_set(x, f"{where}.{k}[{i}]")
    return out


def _priced_compressed_slo_run(root: Path) -> Path:
    """Single stream and C=2 against the simulator at time_scale 0.5, with a price and SLOs (every optional
    section of a row: real_time, cost, goodput, US$ per hours entry)."""
    records = [rec("u1", 0, 10.0 * i, 10.0) for i in range(4)]
    for u in ("u1", "u2"):
        records += [rec(u, 1, 40.0 + 10.0 * i, 10.0, concurrency=2) for i in range(6)]
    meta = {"profile": {"name": "typed", "cost": {"hour_usd": 10.0}, "slo": {"ttft_s": 2.0}},
            "simulator": {"preset": "demo", "time_scale": 0.5}}
    return write_run(root, records, [phase("single", 0, 1, 0, 40), phase("step", 1, 2, 40, 60), run_end(100)], meta)


def _axes_turns_rate_search_run(root: Path) -> Path:
    """A sweep-axes step per setting, conversation turns, a rate step and a search event: every list section."""
    recs = [rec(f"u{i}", 1, 1.0 + i, 2.0, setting="effort=low", turn=i % 2, conversation=f"c{i}") for i in range(4)]
    recs += [rec(f"u{i}", 2, 11.0 + i, 2.0, setting="effort=high") for i in range(4)]
    recs += [rec(f"u{i % 2}", 3, 21.0 + 0.25 * i, 0.4, concurrency=2, scheduled_wall=T0 + 21.0 + 0.25 * i)
             for i in range(20)]
    result = {"axis": "rate", "low": 1.0, "high": 8.0, "tolerance": 0.5, "highest_pass": None,
              "lowest_fail": None, "converged": False, "verdict": "v", "inconclusive": [], "probes": []}
    events = [{**phase("step", 1, 4, 0.0), "setting": "effort=low"}, {**phase("step", 2, 4, 10.0),
              "setting": "effort=high"}, {**phase("step", 3, 2, 20.0), "rate": 4.0, "arrival": "constant",
              "burstiness": 1.0, "max_concurrency": 2}, {"event": "search", "wall": T0 + 29.0, "result": result},
              run_end(30.0)]
    return write_run(root, recs, events)


def test_every_section_of_a_built_report_is_declared(tmp_path: Path) -> None:
    rep = build_report(_axes_turns_rate_search_run(tmp_path / "run"))
    assert rep.settings and rep.turns and rep.search is not None and rep.steps[2].rate is not None
    assert undeclared_keys(rep) == []
    for row in (*rep.settings, *rep.turns, rep.steps[2].rate, rep.search):
        assert set(type(row).model_fields) <= row.model_fields_set, type(row).__name__  # the builder sets each


def test_previous_versions_report_json_loads_with_the_values_of_a_new_build(tmp_path: Path) -> None:
    old = load_report(V1_DEMO)
    assert isinstance(old, Report) and old.schema_ == SCHEMA == "llmload-report/1"
    assert old.as_dict() == json.loads(V1_DEMO.read_text())  # read back key for key, absent keys stay absent
    new = build_report(demo_run(tmp_path / "demo"))
    assert new.run_dir != old.run_dir
    new.run_dir = old.run_dir  # where the run was
    # and what the figure catalogue added since: each figure's display metadata, and definitions (a new 'turns'
    # topic; goodput / SLO capacity in the new SLO spelling; the search's percentile interval now the exact binomial
    # one; by_finish_reason names its suspect_truncation group). Every figure value is the same.
    new_d, old_d = new.as_dict(), old.as_dict()
    for row in new_d["steps"]:  # steps.until's keys (issue 16), None without it
        assert all(row.pop(k) is None for k in UNTIL_ROW_KEYS)
        # issue 17: the failures explained (the demo run has none), absent from the old file
        assert row.pop("failures") == [] and "failures" not in old_d["steps"][0]
        # issue 19: the self-certification (harness.report.selfcert), absent from the old file; the demo run's
        # records carry read lags, its phases.jsonl no CPU samples
        selfcert = {k: row.pop(k) for k in SELFCERT_ROW_KEYS}
        assert selfcert["client_cpu_share_max"] is None and selfcert["client_processes"] == 1
        assert selfcert["client_selfcert"] in VERDICTS and "client_selfcert" not in old_d["steps"][0]
    assert "figures" not in old_d and set(new_d.pop("figures")) >= {"output_tps", "ttft_p50_s", "hours"}
    new_defs, old_defs = new_d.pop("definitions"), old_d.pop("definitions")
    assert set(new_defs) >= set(old_defs) and "client_selfcert" in new_defs
    # (drift: TTFT p50's absolute floor, harness.report.soak.DRIFT_MIN_ABS_CHANGE, beside the 5 % rule; sample: its
    # text now says (ws, e) as the code always took it, the request ending at ws excluded)
    assert {k for k in old_defs if new_defs[k] != old_defs[k]} <= {"goodput", "slo_capacity", "slo_search",
                                                                             "by_finish_reason", "hours", "drift",
                                                                             "sample"}
    # issue 16: THE hours interval is now renewal-reward (batch means its cross-check): the interval keys, the
    # bounds derived from it and the notes about it differ; every point estimate is the same
    assert all(s["hours_interval"]["method"] == "batch_means" for s in old_d["steps"])
    assert {s["hours_interval"]["method"] for s in new_d["steps"]} == {"renewal_reward"}
    # the run directory's own notes, now also apart (the terminal shows them): none for the demo run
    assert new_d.pop("input_notes") == [] and "input_notes" not in old_d
    assert _without_interval(new_d) == _without_interval(old_d)
    assert new.steps[1].output_tps == old.steps[1].output_tps and isinstance(old.steps[1], StepRow)


#: A step row's self-certification keys (issue 19).
SELFCERT_ROW_KEYS = ("client_processes", "client_cpu_share_max", "client_chunks_per_s_proc",
                     "client_ttft_error_bound_s", "client_itl_error_bound_s", "client_selfcert",
                     "client_selfcert_range")
#: The keys that follow from the hours interval (its figures, the bounds computed from them, the notes).
_INTERVAL_KEYS = {"hours_interval", "hours_low", "hours_high", "rate_low", "rate_high", "token_check", "usd_low",
                  "usd_high", "usd_per_1k_usable_low", "usd_per_1k_usable_high", "notes"}


def _without_interval(d: Any) -> Any:
    """``d`` without the keys of the hours interval (:data:`_INTERVAL_KEYS`), recursively."""
    if isinstance(d, dict):
        return {k: _without_interval(v) for k, v in d.items() if k not in _INTERVAL_KEYS}
    if isinstance(d, list):
        return [_without_interval(v) for v in d]
    return d


@pytest.mark.parametrize("path", EXCERPTS, ids=lambda p: p.name.split(".")[0])
def test_earlier_report_json_files_round_trip_exactly(path: Path) -> None:
    rep = load_report(path)
    assert json.dumps(rep.as_dict(), indent=1, ensure_ascii=False) == path.read_text().rstrip("\n")
    assert undeclared_keys(rep) == []  # every key of these files is a declared field


def test_a_built_report_sets_and_declares_every_key(tmp_path: Path) -> None:
    for rep in (build_report(demo_run(tmp_path / "demo")), build_report(_priced_compressed_slo_run(tmp_path / "p"))):
        assert undeclared_keys(rep) == []
        assert _every_field_set(rep) == []
    rep = build_report(_priced_compressed_slo_run(tmp_path / "p2"), n=[1000])
    c2 = rep.steps[1]
    assert c2.real_time is not None and c2.real_time.cost is not None and c2.cost is not None
    assert isinstance(c2.hours[0], HoursEntry) and c2.hours[0].usd is not None
    assert rep.slo is not None and rep.slo.ttft_s == 2.0 and rep.slo_capacity is not None
    assert c2.slo_sample_n is not None and c2.goodput_rps is not None


def test_write_report_writes_the_models_serialisation(tmp_path: Path) -> None:
    root = _priced_compressed_slo_run(tmp_path / "run")
    written, md = write_report(root)
    data = written.as_dict()
    text = (root / "report.json").read_text()
    assert text.isascii() and json.loads(text) == data  # strict JSON, as before the models
    rep = load_report(root)  # a run directory or its report.json
    assert rep.as_dict() == data == build_report(root).as_dict()
    assert rep.definitions == DEFINITIONS and md.startswith("# ")


def test_non_finite_figures_become_null() -> None:
    raw = json.loads(V1_DEMO.read_text())
    rep = parse_report(raw)
    rep.steps[0].output_tps = math.nan  # as a figure of an empty window would be before the _finite rule
    rep.steps[0].hours[0].hours = math.inf
    # to_json never writes NaN or Infinity (strict JSON); the builder's own _finite rule makes them None earlier
    data = json.loads(rep.model_dump_json())
    assert data["steps"][0]["output_tps"] is None and data["steps"][0]["hours"][0]["hours"] is None
    with pytest.raises(ValueError):
        rep.to_json()  # allow_nan=False: a non-finite value must be None before writing, never "NaN"


def test_load_report_errors_name_the_file_and_the_problem(tmp_path: Path) -> None:
    bad = tmp_path / "report.json"
    bad.write_text("{not json")
    with pytest.raises(ReportError, match="unreadable report"):
        load_report(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(ReportError, match="top level is not an object"):
        load_report(tmp_path)
    bad.write_text(json.dumps({"schema": "llmload-report/0", "steps": []}))
    with pytest.raises(ReportError, match="unknown report schema 'llmload-report/0'"):
        load_report(bad)
    bad.write_text(json.dumps({"schema": SCHEMA}))
    with pytest.raises(ReportError, match="no 'steps' list"):
        load_report(bad)
    bad.write_text(json.dumps({"schema": SCHEMA, "steps": [{"label": "C=2", "requests": "many"}]}))
    with pytest.raises(ReportError, match=r"first at steps\.0\.requests"):
        load_report(bad)
    with pytest.raises(ReportError, match="unreadable report"):
        load_report(tmp_path / "missing")


def test_unknown_keys_are_kept_and_listed() -> None:
    raw = json.loads(V1_DEMO.read_text())
    raw["steps"][0]["future_figure"] = 1.5
    raw["brand_new_block"] = {"x": 1}
    rep = parse_report(raw)
    assert undeclared_keys(rep) == ["$.brand_new_block", "$.steps[0].future_figure"]
    assert rep.as_dict() == raw


def test_as_report_validates_a_dict_at_the_boundary_and_keeps_a_report() -> None:
    raw = json.loads(V1_DEMO.read_text())
    rep = as_report(raw)
    assert isinstance(rep, Report) and rep.as_dict() == raw and as_report(rep) is rep
    with pytest.raises(ReportError, match="unknown report schema"):
        as_report({"steps": []})  # a dict that is not a report.json
    bad = {**raw, "steps": [{"label": "C=2", "requests": "many"}]}
    with pytest.raises(ReportError, match=r"steps\.0\.requests"):
        as_report(bad)


def test_pick_gives_the_json_values_in_order_and_none_when_unset() -> None:
    raw = json.loads(V1_DEMO.read_text())
    del raw["steps"][1]["completed"]  # as an older report.json lacking a key added since
    row = parse_report(raw).steps[1]
    keys = ("output_tps", "label", "hours", "completed")
    got = row.pick(keys)
    assert list(got) == list(keys) and got["completed"] is None and row.completed == 0  # absent: None, not 0
    assert got["output_tps"] == raw["steps"][1]["output_tps"] and got["label"] == raw["steps"][1]["label"]
    assert got["hours"] == raw["steps"][1]["hours"] and isinstance(got["hours"][0], dict)  # nested: as JSON
    assert StepRow().pick(("completed", "steady")) == {"completed": None, "steady": None}  # defaults are not set


def test_transitional_mapping_access_reads_like_the_dict() -> None:
    raw = json.loads(V1_DEMO.read_text())
    rep = parse_report(raw)
    row = rep["steps"][1]
    assert row is rep.steps[1] and row["output_tps"] == raw["steps"][1]["output_tps"] == rep.steps[1].output_tps
    assert rep["schema"] == SCHEMA and "schema" in rep and rep["totals"]["requests"] == raw["totals"]["requests"]
    assert row.get("no_such_key", "dflt") == "dflt" and row.get("rate") is None
    assert list(row.keys()) == list(raw["steps"][1])
    with pytest.raises(KeyError):
        row["no_such_key"]
    h = row["hours"][0]
    assert "usd" not in h and h.get("usd", "absent") == "absent"  # the demo has no price: no US$ keys, as in JSON
    with pytest.raises(KeyError):
        h["usd"]


def test_compare_reads_the_previous_versions_report_json(tmp_path: Path) -> None:
    from harness.report.compare import build_comparison, load_run_input

    root = demo_run(tmp_path / "demo")
    (root / "report.json").write_text(V1_DEMO.read_text())
    run = load_run_input(root)
    assert run.source == "report.json" and isinstance(run.report, Report)
    assert run.report.as_dict() == json.loads(V1_DEMO.read_text())
    cmp = build_comparison([root, root])
    assert not [n for n in cmp["notes"] if "do not reproduce" in n]  # the records give the old report's figures
    c8 = next(s for s in cmp["steps"] if s["key"] == "C=8")
    assert c8["metrics"]["output_tps"]["values"][0]["value"] == run.report.steps[1].output_tps
