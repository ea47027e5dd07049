"""What a researcher sees, checked in a real browser (issue 15): headless Chromium
(:mod:`tests.browser`).

- ``ortho ui``'s runs page of a sweep shows its runs by their readable names: the parent as
  ``profile · <id>`` with its description, and, expanded, every configuration's name.
- ``ortho report SPEC --format html`` renders every table and every figure visibly: each
  image decoded (``naturalWidth`` > 0) and laid out with a non-empty box inside the page.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from analysis.report import build_report
from ortho_core.reporting import Outcome, Result
from sweeps import contract, naming, tracking
from sweeps.cli import main
from sweeps.plan import build_plan
from sweeps.spec import load_spec, resolve
from sweeps.testing import sqlite_store
from tests.analysis.conftest import SPEC, Store, copy_store
from tests.browser import WAIT_MS
from tests.servers import START_TIMEOUT, _http_ok, _wait_until, free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SWEEP_ID = "20260101-120000-ab12"


_BOX = """el => {
  const r = el.getBoundingClientRect(), d = document.documentElement;
  return [r.left + scrollX, r.top + scrollY, r.width, r.height, d.scrollWidth, d.scrollHeight];
}"""
"""An element's box in page coordinates, and the page's size."""


def _inside_page(locator: Any) -> None:
    """``locator`` is visible with a non-empty box that lies within the page."""
    from playwright.sync_api import expect

    expect(locator).to_be_visible(timeout=WAIT_MS)
    x, y, width, height, page_width, page_height = locator.evaluate(_BOX)
    assert width > 0 and height > 0
    assert x >= 0 and x + width <= page_width and y >= 0 and y + height <= page_height


def _smoke_sweep(home: Path) -> tuple[str, list[str]]:
    """A store holding the smoke sweep of synthetic-max-length as the runner names it (its
    plan's names, passed with each claim), every configuration finished; its experiment id
    and the configurations' names."""
    spec = resolve(load_spec(SPEC), "smoke")
    plan = build_plan(spec)
    tracker = tracking.tracker(sqlite_store(home))
    tags = tracking.sweep_tags(
        spec=SPEC, profile="smoke", code={}, metric=spec.metric, mode=spec.mode,
        note=naming.sweep_note(spec.description, "smoke", SWEEP_ID),
        name=naming.sweep_name("smoke", SWEEP_ID))
    ref = tracker.start_sweep(tracker.experiment_id(SPEC), SWEEP_ID, tags, {})
    members = [m for pack in plan.packs for m in pack]
    for m in members:
        claim = tracker.claim(ref, m.key, m.params, {contract.RUN_NAME: m.name})
        tracker.finish(claim.run_id, Result(Outcome.SOLVED, {spec.metric: 20}), 0, [])
    tracker.end_sweep(ref, "FINISHED", {})
    return ref.experiment_id, [m.name for m in members]


def test_the_mlflow_ui_shows_a_sweep_by_readable_run_names(browser, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    home = tmp_path / "home"
    experiment_id, names = _smoke_sweep(home)
    assert len(names) == 8 and "OPEN α=0.01 λ=0.1" in names
    port = free_port()
    log = tmp_path / "ui.log"
    with log.open("w") as out:
        ui = subprocess.Popen([sys.executable, "-m", "sweeps.cli", "ui", "--home", str(home),
                               "--port", str(port)], cwd=ROOT, stdout=out,
                              stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_until(lambda: _http_ok(f"{url}/health"), "ortho ui", lambda: ui.poll() is None,
                    log, START_TIMEOUT)
        # the address `ortho ui` prints for the spec's runs opens MLflow's model-training
        # view, not the GenAI view a fresh browser gets (its "Evaluation runs")
        printed = re.search(rf"^  {SPEC}: (\S+)$", log.read_text(), re.MULTILINE)
        assert printed is not None and printed[1].startswith(
            f"{url}/#/experiments/{experiment_id}/runs?"), log.read_text()
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(printed[1])
        parent = page.get_by_role("link", name="smoke · ab12", exact=True)
        _inside_page(parent)
        expect(page.get_by_text("Evaluation runs", exact=True)).to_have_count(0)
        # the configurations are nested under their parent: expand it as a reader would
        page.get_by_role("row").filter(has=parent).locator(
            "button[data-component-id*=runnamecellrenderer]").click(timeout=WAIT_MS)
        for name in names:
            _inside_page(page.get_by_role("link", name=name, exact=True))
        parent.click()
        expect(page.get_by_text("M Table I — maximal sequence length solved by SRNN",
                                exact=False).first).to_be_visible(timeout=WAIT_MS)
        expect(page.get_by_text(SWEEP_ID).first).to_be_visible(timeout=WAIT_MS)
        page.close()
    finally:
        ui.terminate()  # `ortho ui` stops its MLflow server on SIGTERM
        ui.wait(timeout=60)


def test_the_html_report_shows_every_table_and_figure(browser, store: Store,
                                                      tmp_path: Path) -> None:
    uri = copy_store(store, tmp_path / "store")
    out = tmp_path / "out"
    assert main(["report", SPEC, "--tracking-uri", uri, "--format", "html",
                 "--out", str(out)]) == 0
    report = build_report(SPEC, tracking_uri=uri, figures=True, use_cache=False)
    assert report.tables and report.figures
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto((out / f"{SPEC}.html").as_uri())
    for table in report.tables:
        shown = page.locator(f"#table-{table.name} table")
        _inside_page(shown)
        text = shown.inner_text()
        assert all(column in text for column in table.columns)
        assert len(shown.locator("tbody tr").all()) == len(table.rows)
    for figure in report.figures:
        image = page.locator(f"#figure-{figure.name} img")
        image.scroll_into_view_if_needed()
        _inside_page(image)
        assert image.evaluate("img => img.complete && img.naturalWidth") > 0
    assert page.locator("img").count() == len(report.figures)
    page.close()
    # a narrow window: the page does not scroll sideways; a table too wide for it scrolls
    # within itself, every column still there
    narrow = browser.new_page(viewport={"width": 480, "height": 900})
    narrow.goto((out / f"{SPEC}.html").as_uri())
    assert narrow.evaluate("document.documentElement.scrollWidth") <= 480
    widths = narrow.locator("table").evaluate_all(
        "ts => ts.map(t => [t.scrollWidth, t.clientWidth])")
    assert any(scroll > client for scroll, client in widths)
    for table in report.tables:
        _inside_page(narrow.locator(f"#table-{table.name} table"))
    narrow.close()
