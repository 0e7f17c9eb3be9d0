"""The start form in a real browser (Debian's chromium, Playwright): it shows what runs.

Locust's web UI on the built-in simulator, launched without ``--profile``. Each shipped profile the picker lists is
picked in turn and the form's profile fields must show that profile's resolved values
(:func:`harness.locust.form.form_defaults` of the checked profile); sweep mode hides Number of users and Ramp up,
fixed mode shows them; a cleared prompt mix, zero users and an Output Dir that is a file are refused in one line;
then one short run of ``thinking-sweep`` with two fields changed (steps, step duration) and an Output Dir is
started, and its ``run.json`` must hold the picked profile with exactly those two knobs, under that directory;
after Stop the LLM view's headline strip and per-step table must equal the ``report.json`` the run wrote.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.config import PROFILES_DIR
from harness.locust.form import KNOBS, form_defaults, profile_choices, source_notes, steps_note
from harness.profile_check import load_checked_profile
from harness.report.model import load_report
from tests.procs import free_port
from tests.webui.browser import CHROMIUM_ARGS, get_json, locust, require_browser, set_form_field, wait_until
from tests.webui.test_browser import check_dashboard

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _name(dest: str) -> str:
    """The form's name of a field (Locust's camelCase of the option's dest: ``prompt_mix`` -> ``promptMix``)."""
    head, *rest = dest.split("_")
    return head + "".join(w.capitalize() for w in rest)


def _set(page: Any, dest: str, value: str) -> None:
    assert set_form_field(page, _name(dest), value), f"no field {dest}"


def _shown(page: Any) -> dict[str, str]:
    """The profile fields as the form shows them (dest -> text)."""
    return {k: str(page.locator(f'form [name="{_name(k)}"]').first.input_value()) for k in KNOBS}


def _expected(name: str) -> dict[str, str]:
    path = PROFILES_DIR / f"{name}.yaml"
    want = form_defaults(load_checked_profile(path), path)
    return {k: want[k] for k in KNOBS}


def _alert(page: Any, text: str) -> bool:
    return bool(page.locator('form [role="alert"]', has_text=text).count())


def _start(page: Any) -> None:
    page.get_by_role("button", name="Start").first.click()


def _users_visible(page: Any) -> bool:
    return bool(page.locator('form [name="userCount"]').first.is_visible())


def test_the_form_shows_the_picked_profile_and_runs_it(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    chromium = require_browser()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    out = tmp_path / "elsewhere" / "runs"
    log = tmp_path / "locust.log"
    args = ["--web-host", "127.0.0.1", "--web-port", str(port)]
    with locust(args, tmp_path, log), sync_playwright() as pw:
        wait_until(lambda: get_json(base + "/llm/data.json"), 60, "the web UI")
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1400})
        page.goto(base + "/")
        page.wait_for_selector("form")
        page.get_by_role("button", name="Custom parameters").first.click()
        page.get_by_role("button", name="Advanced options").first.click()
        page.wait_for_timeout(400)
        # sweep mode hides the fields it does not use; fixed mode shows them
        wait_until(lambda: not _users_visible(page), 5, "Number of users hidden in sweep mode")
        assert not page.locator('form [name="spawnRate"]').first.is_visible()
        _set(page, "mode", "fixed")
        wait_until(lambda: _users_visible(page), 5, "Number of users shown in fixed mode")
        # every shipped profile the picker lists: the form shows its values
        names = profile_choices()
        assert {"demo", "thinking-sweep", "synthetic-data", "slo-search"} <= set(names)
        seen = {}
        for name in names:
            want = _expected(name)
            _set(page, "web_profile", name)
            wait_until(lambda w=want: _shown(page) == w, 15, f"the form showing {name}'s values")  # type: ignore[misc]
            seen[name] = _shown(page)
            placeholder = page.locator('form [name="steps"]').first.get_attribute("placeholder") or ""
            assert placeholder == steps_note(load_checked_profile(PROFILES_DIR / f"{name}.yaml")), (name, placeholder)
            notes = source_notes(load_checked_profile(PROFILES_DIR / f"{name}.yaml"))
            for dest in ("prompt_mix", "max_tokens"):  # a dataset's fields: empty, saying where the prompts come from
                got = page.locator(f'form [name="{_name(dest)}"]').first.get_attribute("placeholder") or ""
                assert got == notes.get(dest, ""), (name, dest, got)
            if name == "synthetic-data":
                assert notes["prompt_mix"].startswith("the dataset's rows: seed-prompts.jsonl")
            if name == "slo-search":
                assert placeholder.startswith("the SLO search picks the steps") and seen[name]["steps"] == ""
        # a typed Profile path that does not load: its one line in the banner, cleared once a profile loads again
        nope = tmp_path / "nope.yaml"
        assert set_form_field(page, "profile", str(nope))
        wait_until(lambda: page.locator("#llmload-refused").count(), 10, "the banner naming the bad profile")
        assert "nope.yaml" in page.locator("#llmload-refused").inner_text()
        assert set_form_field(page, "profile", "")
        wait_until(lambda: page.locator("#llmload-refused").count() == 0, 10, "the banner cleared")
        # Start pressed at once after picking: the script fills the picked profile's values first and sends those
        # (else the server would refuse: "the form shows the values of demo.yaml ..."); refused here only for the
        # Output Dir, a file
        _set(page, "web_profile", "demo")
        wait_until(lambda: _shown(page) == _expected("demo"), 15, "demo's values")
        a_file = tmp_path / "a-file"
        a_file.write_text("x")
        _set(page, "output_dir", str(a_file))
        _set(page, "web_profile", "thinking-sweep")
        _start(page)
        wait_until(lambda: _alert(page, f"Output Dir '{a_file}': not a directory"), 15, "the Output Dir refusal")
        assert _shown(page) == _expected("thinking-sweep") and not _alert(page, "the form shows the values")
        # refused in one line, nothing started: zero users (fixed), a cleared prompt mix
        _set(page, "mode", "fixed")
        wait_until(lambda: _users_visible(page), 5, "Number of users shown in fixed mode")
        _set(page, "user_count", "0")
        _start(page)
        wait_until(lambda: _alert(page, "Number of users must be at least 1"), 10, "the zero-users refusal")
        _set(page, "mode", "sweep")
        wait_until(lambda: not _users_visible(page), 5, "Number of users hidden again")
        _set(page, "prompt_mix", "")
        _start(page)
        wait_until(lambda: _alert(page, "prompt_mix: empty"), 10, "the blank prompt mix refusal")
        _set(page, "prompt_mix", _expected("thinking-sweep")["prompt_mix"])
        assert not out.exists() and not (tmp_path / "runs").exists()
        # one short run: the picked profile with the two changed fields, under the Output Dir
        _set(page, "output_dir", str(out))
        _set(page, "steps", "2")
        _set(page, "step_duration", "2")
        _start(page)
        run_json = wait_until(lambda: out.is_dir() and next(iter(out.glob("*/run.json")), None), 60,
                              "the run directory under the Output Dir")
        run_dir = run_json.parent
        meta = json.loads((run_dir / "run.json").read_text())
        view = browser.new_page(viewport={"width": 1366, "height": 768})
        view.goto(base + "/llm/")
        wait_until(lambda: view.locator('#step-rows tr[data-step]').count(), 60, "the first step's row")
        page.get_by_role("button", name="Stop").first.click()
        wait_until(lambda: json.loads((run_dir / "run.json").read_text()).get("status") != "running", 120,
                   "the run closed after Stop", every=0.5)
        # the dashboard after Stop: its headline strip and per-step table = the report the run wrote
        wait_until(lambda: (run_dir / "report.json").exists(), 60, "report.json")
        wait_until(lambda: view.locator('#headline .card[data-key="status"] .v').text_content()
                   == load_report(run_dir / "report.json").status, 30, "the headline's final status")
        head = check_dashboard(view, run_dir, details=None)
        browser.close()
    ts = load_checked_profile(PROFILES_DIR / "thinking-sweep.yaml")
    assert meta["profile_path"].endswith("thinking-sweep.yaml")
    assert meta["knobs"] == {"steps": "2", "step_duration": "2"}, meta["knobs"]
    assert meta["profile"]["steps"]["concurrency"] == [2] and meta["profile"]["steps"]["duration"] == 2
    assert [p["id"] for p in meta["profile"]["prompts"]] == [p.id for p in ts.prompts]
    assert meta["profile"]["axes"] == ts.public_dict()["axes"] and meta["profile"]["name"] == "thinking-sweep"
    assert meta["form"]["output_dir"] == str(out) and meta["mode"] == "sweep"
    assert "Traceback" not in log.read_text()
    print("form per profile:", json.dumps(seen), "dashboard after Stop:", json.dumps(head))
