"""The HTML report (``ortho report SPEC --format html``) and the claims' verdicts: one
self-contained page holding every table and published value, one embedded PNG per figure, a
verdict line per claim, the provenance and run links, and nothing fetched from the network;
verdicts computed from the runs, so that they flip when the runs say the opposite."""

from __future__ import annotations

import base64
import html
import re
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from analysis import claims as cl
from analysis.html import _duration, claims_html, prose, render_page, render_section, runs_html
from analysis.mlflow_ui import DEFAULT_UI, run_url
from analysis.published.manchev import TABLE_I, TABLE_II
from analysis.report import build_report
from analysis.reports import max_length, pixel_mnist
from sweeps.cli import main
from tests.analysis.conftest import SPEC, Store, copy_store, frame_runs


class Page(HTMLParser):
    """The parts of a page the tests look at: table rows, images, verdict items, links and
    every attribute that names an address."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.images: list[str] = []
        self.verdicts: list[tuple[str, str]] = []
        self.links: list[str] = []
        self.sources: list[tuple[str, str, str]] = []
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self._verdict: tuple[str, list[str]] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.sources += [(tag, k, v) for k, v in a.items() if k in ("href", "src")]
        if tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "img":
            self.images.append(a["src"])
        elif tag == "a":
            self.links.append(a["href"])
        elif tag == "li" and a.get("class") in ("holds", "fails", "not-measured"):
            self._verdict = (a["class"], [])

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None
        elif tag == "li" and self._verdict is not None:
            self.verdicts.append((self._verdict[0], "".join(self._verdict[1])))
            self._verdict = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._verdict is not None:
            self._verdict[1].append(data)


@pytest.fixture(scope="module")
def html_report(store: Store, tmp_path_factory: pytest.TempPathFactory):
    """``ortho report synthetic-max-length --format html`` on a copy of the built store: the
    page, the printed text and the report it was built from."""
    tmp = tmp_path_factory.mktemp("html")
    uri = copy_store(store, tmp / "store")
    assert main(["report", SPEC, "--tracking-uri", uri, "--format", "html",
                 "--out", str(tmp / "out")]) == 0
    page = (tmp / "out" / f"{SPEC}.html").read_text(encoding="utf-8")
    return page, build_report(SPEC, tracking_uri=uri, figures=True, use_cache=False)


def test_page_holds_every_table_and_every_published_value(html_report) -> None:
    page, report = html_report
    parsed = Page(page)
    for table in report.tables:
        assert table.title in page
        assert list(table.columns) in parsed.rows
        for row in table.rows:
            assert [c.marked() for c in row] in parsed.rows
    published = {(r[0], r[1]): r[3] for r in parsed.rows if len(r) == 9 and r[3].isdigit()}
    for (task, variant), pub in TABLE_I.items():  # the whole of Table I, in or out of profile
        assert published[max_length.PROBLEMS[task], max_length.MODELS[variant]] == \
            str(pub.max_len)
    assert ["Random Permutation", "SRNN+OINIT", "not in profile", "240", "not in profile",
            "0.1", "–", "–", "not in profile"] in parsed.rows
    # every "not in profile" is set apart the same way, the configurations column's included
    cells = re.findall(r'<td(?: class="([^"]*)")?>not in profile</td>', page)
    assert len(cells) > 3 and all("outside" in c.split() for c in cells), cells


def test_page_embeds_one_png_per_figure_and_fetches_nothing(html_report) -> None:
    page, report = html_report
    parsed = Page(page)
    assert len(report.figures) == 2 and len(parsed.images) == 2
    for src in parsed.images:
        prefix = "data:image/png;base64,"
        assert src.startswith(prefix)
        assert base64.b64decode(src[len(prefix):])[:8] == b"\x89PNG\r\n\x1a\n"
    # every address is a link to a run in `ortho ui`; nothing is loaded from anywhere
    assert all((tag == "a" and key == "href") or value.startswith("data:image/png;base64,")
               for tag, key, value in parsed.sources)
    addresses = re.findall(r"https?://[^\s\"'<>)]+", page)
    assert addresses and len(addresses) == len(parsed.links)
    run_page = re.compile(re.escape(DEFAULT_UI) + r"/#/experiments/\d+/runs/[0-9a-f]{32}"
                          r"\?workflowType=machine_learning")  # MLflow's training view
    assert all(run_page.fullmatch(a) for a in addresses)
    assert "<script" not in page and "@import" not in page and "url(" not in page


def test_page_has_the_verdicts_and_the_provenance(html_report, store: Store) -> None:
    page, report = html_report
    parsed = Page(page)
    by_text = {text: status for status, text in parsed.verdicts}
    assert len(parsed.verdicts) == len(report.claims) == 5  # 4 problems of Table I, Fig. 2
    order = next(t for t in by_text if "M-T1 · holds" in t and t.count("Temporal Order:"))
    assert "SRNN 30, SRNN+OPEN 60, SRNN+OINIT 70" in order and by_text[order] == "holds"
    adding = next(t for t in by_text if "Adding:" in t)
    assert by_text[adding] == "not-measured" and "SRNN+OINIT not measured" in adding
    assert [s for t, s in by_text.items() if "Random Permutation" in t] == ["not-measured"]
    fig2 = next(t for t in by_text if t.startswith("M-F2"))
    assert by_text[fig2] == "fails"  # the built runs' ρ stay below 1
    sweep = report.runs.sweep
    for text in ("sw-1", "cpu", "0" * 40, sweep.spec_sha256, "16 MLflow runs → 14 "
                 "configurations", "<dt>search</dt><dd>grid</dd>"):
        assert text in page
    for _trial, run_id in store.runs["sw-1"]:
        assert run_url(sweep.experiment_id, run_id) in parsed.links or \
            run_id not in set(report.runs.runs["run_id"])  # a superseded repeat
    assert run_url(sweep.experiment_id, sweep.parent_run_id) in parsed.links


def test_markdown_prints_the_verdicts_after_the_tables(store: Store, tmp_path: Path,
                                                       capsys) -> None:
    uri = copy_store(store, tmp_path / "store")
    assert main(["report", SPEC, "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    tables, _, verdicts = out.partition("### Verdicts\n")
    assert "### M Table I" in tables and "### M Table I" not in verdicts
    assert "- M-T1 · holds — Temporal Order: maximal T of SRNN ≤ SRNN+OPEN ≤ SRNN+OINIT, " \
           "SRNN+OINIT's above SRNN's (paper 50 / 80 / 120): SRNN 30, SRNN+OPEN 60, " \
           "SRNN+OINIT 70" in verdicts


def _max_length_runs(lengths: dict[str, int]) -> pd.DataFrame:
    variants = list(lengths)
    return pd.DataFrame({
        "run_id": [f"r{i}" for i in range(len(variants))], "status": "FINISHED",
        "outcome": "solved", "params.task": "temporal_order", "params.variant": variants,
        "params.lr": 0.1, "params.penalty": 0.1,
        f"metrics.{max_length.MAX_LEN}": [float(lengths[v]) for v in variants],
        f"metrics.{max_length.ITERS}": 100.0})


@pytest.mark.parametrize(("lengths", "status"), [
    ({"plain": 20, "open": 40, "oinit": 60}, cl.HOLDS),
    ({"plain": 60, "open": 40, "oinit": 20}, cl.FAILS),  # SRNN outlasts both
    ({"plain": 20, "open": 60, "oinit": 40}, cl.FAILS)])  # OPEN above OINIT
def test_table_i_verdict_follows_the_runs(lengths: dict[str, int], status: str) -> None:
    runs = frame_runs(_max_length_runs(lengths), SPEC, None)
    claims = max_length.table_i_claims(runs, max_length.max_length_cells(runs))
    order = claims[0]
    assert order.source == "M-T1" and order.text.startswith("Temporal Order")
    assert order.status == status
    assert order.evidence == (f"SRNN {lengths['plain']}, SRNN+OPEN {lengths['open']}, "
                              f"SRNN+OINIT {lengths['oinit']}")
    assert [c.status for c in claims[1:]] == [cl.NOT_MEASURED] * 3


def test_pixel_verdict_flips_when_srnn_beats_oinit() -> None:
    def runs(acc: dict[str, float]):
        frame = pd.DataFrame({"run_id": list(acc), "status": "FINISHED", "outcome": "solved",
                              "params.variant": list(acc), "params.lr": 1e-4,
                              "metrics.best_test_accuracy": list(acc.values())})
        return frame_runs(frame, "pixel-mnist", None)

    good = pixel_mnist.pixel_claims(runs({"plain": 0.11, "oinit": 0.8, "open": 0.9}))
    bad = pixel_mnist.pixel_claims(runs({"plain": 0.85, "oinit": 0.8, "open": 0.9}))
    assert [c.status for c in good] == [cl.HOLDS, cl.HOLDS]
    assert [c.status for c in bad] == [cl.FAILS, cl.HOLDS]
    assert bad[0].evidence == "SRNN+OINIT 80.00 %, SRNN+OPEN 90.00 %, SRNN 85.00 %"
    assert f"paper {TABLE_II['oinit'].accuracy}" in bad[0].text


def test_claim_helpers_judge_orders_and_missing_values() -> None:
    values = {"a": 1.0, "b": 2.0, "c": None}
    assert cl.beats("X", "b beats a", values, ["b"], ["a"]).status == cl.HOLDS
    assert cl.beats("X", "a beats b", values, ["a"], ["b"]).status == cl.FAILS
    assert cl.beats("X", "a below b", values, ["a"], ["b"], higher=False).status == cl.HOLDS
    assert cl.beats("X", "b beats c", values, ["b"], ["c"]).status == cl.NOT_MEASURED
    assert cl.ordered("X", "a ≤ b", values, ["a", "b"]).status == cl.HOLDS
    assert cl.ordered("X", "b ≤ a", values, ["b", "a"]).status == cl.FAILS
    ties = {"a": 10.0, "b": 10.0, "d": 20.0}
    assert cl.ordered("X", "a ≤ b", ties, ["a", "b"]).status == cl.HOLDS
    tie = cl.ordered("X", "a ≤ b", ties, ["a", "b"], rising=True)
    assert (tie.status, tie.evidence) == (cl.FAILS, "a 10.00, b 10.00 (a tie: no model went "
                                                    "further)")
    assert cl.ordered("X", "a ≤ b ≤ d", ties, ["a", "b", "d"], rising=True).status == cl.HOLDS
    back = cl.ordered("X", "a ≤ d ≤ b", ties, ["a", "d", "b"], rising=True)
    assert (back.status, back.evidence) == (cl.FAILS, "a 10.00, d 20.00, b 10.00")  # no tie
    claim = cl.from_verdict("N-F4", "claim", "Verdict: differs from N — ReLU 3.0 %.")
    assert (claim.status, claim.evidence) == (cl.FAILS, "ReLU 3.0 %")
    assert cl.from_verdict("N-F4", "c", "Verdict: none — no run.").status == cl.NOT_MEASURED
    with pytest.raises(ValueError):
        cl.from_verdict("N-F4", "c", "no verdict here")
    partial = cl.judge("X", "t", True, "1", partial=True)
    assert partial.line() == "X · holds (partial sweep) — t: 1"


def test_a_page_gathers_several_sections(html_report) -> None:
    _page, report = html_report
    section = render_section(report)
    assert section.startswith(f'<section id="{SPEC}">') and section.endswith("</section>")
    page = render_page("Manchev & Spratling", [section, section.replace(SPEC, "other")],
                       {"paper": "M", "profile": "cpu"})
    assert page.startswith("<!DOCTYPE html>") and page.count("<section ") == 2
    assert "<dt>paper</dt><dd>M</dd>" in page
    assert f"spec {SPEC} · profile cpu · sweep sw-1" in page


def test_a_profile_caveat_explains_every_failure_no_claim_caveat_explains() -> None:
    from analysis.caveats import profile_caveat

    claims = [cl.judge("M-T1", "SRNN ≤ OINIT", False, "10, 10"),
              cl.judge("M-T3", "OPEN beats FF", False, "10 %, 10 %"),
              cl.judge("M-T3", "OINIT beats FF", True, "57 %, 10 %"),
              cl.judge("M-T2", "OPEN beats SRNN", None, "not run")]
    smoke = cl.explain(claims, {("M-T3", "OPEN beats"): "fewer epochs"},
                       profile_caveat("smoke"))
    assert smoke[0].caveat.startswith("the smoke profile only checks that the whole path runs")
    assert smoke[1].caveat == "fewer epochs"
    assert [c.caveat for c in smoke[2:]] == ["", ""]  # a result, and nothing measured
    assert profile_caveat("cpu") == profile_caveat("paper") == ""
    assert cl.explain(claims, {}, profile_caveat("cpu"))[0].caveat == ""


def test_run_labels_are_run_names_else_the_params_that_vary(html_report) -> None:
    _page, report = html_report
    frame = report.runs.runs.copy()
    frame["run_name"] = [f"OPEN α={lr:g}" for lr in frame["params.lr"]]
    named = runs_html(replace(report.runs, runs=frame))
    assert all(f"<td>OPEN α={lr:g}</td>" in named for lr in frame["params.lr"])
    unnamed = runs_html(replace(report.runs, runs=frame.drop(columns="run_name")))
    assert "<td>OPEN α=" not in unnamed and "variant=" in unnamed
    assert f"<summary>{len(frame)} configuration runs</summary>" in named
    one = runs_html(replace(report.runs, runs=frame.iloc[:1]))
    assert "<summary>1 configuration run</summary>" in one


def test_runs_are_listed_by_label_with_numbers_by_value(html_report) -> None:
    """MLflow returns runs newest first; the page lists them as a reader counts (T=20 before
    T=100, 1e-05 before 0.0001), whatever order the frame holds them in."""
    _page, report = html_report
    frame = report.runs.runs.copy()
    lrs = [1e-5 * 10 ** (i % 4) for i in range(len(frame))]
    names = [f"OPEN T={20 * 5 ** (i // 4)} α={lr:g}" for i, lr in enumerate(lrs)]
    frame["run_name"] = names[::-1]
    listed = re.findall(r"<td>(OPEN [^<]*)</td>", runs_html(replace(report.runs, runs=frame)))
    assert len(frame) >= 5 and listed == names  # built in order: T and α up


@pytest.mark.parametrize(("seconds", "text"), [(0.42, "0.4 s"), (59.9, "59.9 s"),
                                               (61, "1 min 01 s"), (3_725, "1 h 02 min")])
def test_durations_read_at_their_scale(seconds: float, text: str) -> None:
    assert _duration(seconds) == text


def test_a_caveat_shows_under_its_failure_and_is_counted() -> None:
    from collections import Counter
    from dataclasses import replace

    from analysis.reproduce import summary

    failing = replace(cl.judge("K-F12", "LCW beats BN", False, "LCW 92 %, BN 95 %"),
                      caveat="another dataset")
    text = claims_html([failing, cl.judge("K-F12", "BN trains", True, "BN 95 %")])
    assert ('<li class="fails"><span class="status">K-F12 · does not hold</span> — LCW beats '
            'BN: LCW 92 %, BN 95 %<div class="caveat">Why: another dataset</div></li>') in text
    assert text.count("caveat") == 1
    counts = Counter({"holds": 1, "does not hold": 1, "explained": 1})
    assert summary(counts) == "1 hold, 1 do not (1 explained), 0 not measured"


def test_backticked_commands_read_as_code_and_the_rest_stays_escaped() -> None:
    assert prose("run `ortho ui` on a < b & `x<y>`") == (
        "run <code>ortho ui</code> on a &lt; b &amp; <code>x&lt;y&gt;</code>")
    assert prose("an odd ` stays") == "an odd ` stays"
    failing = cl.judge("M-T1", "OPEN solves longer", False, "T = 10 vs 20")
    text = claims_html([replace(failing, caveat="the smoke profile (`--profile cpu` shows it)")])
    assert "Why: the smoke profile (<code>--profile cpu</code> shows it)" in text
    assert "`" not in text


@pytest.mark.parametrize(("tracking_uri", "ui", "base"), [
    ("sqlite:////runs/mlflow.db", None, DEFAULT_UI),
    ("http://tok:s3cret@mlflow.lab:5000/", None, "http://mlflow.lab:5000"),
    ("https://mlflow.lab/prefix", None, "https://mlflow.lab/prefix"),
    ("sqlite:////runs/mlflow.db", "http://127.0.0.1:5001", "http://127.0.0.1:5001"),
])
def test_run_links_open_the_ui_that_serves_the_store(html_report, tracking_uri: str,
                                                     ui: str | None, base: str) -> None:
    """A tracking server serves its own UI, so its page links there, without the user info;
    a database store's links go to `ortho ui`, on the port `--ui` names."""
    _page, report = html_report
    runs = replace(report.runs, tracking_uri=tracking_uri)
    links = Page(runs_html(runs, ui)).links
    assert len(links) == len(runs.runs) + 1
    assert all(link.startswith(f"{base}/#/experiments/{runs.sweep.experiment_id}/runs/")
               for link in links)
    section = render_section(replace(report, runs=runs), ui)
    assert "s3cret" not in section
    assert ("<code>ortho ui --home /runs</code>:" in section) == (base == DEFAULT_UI)


@pytest.mark.parametrize(("tracking_uri", "command"), [
    ("sqlite:////tmp/my runs/mlflow.db", "ortho ui --home '/tmp/my runs'"),
    ("postgresql://ortho:s3cret@db:5432/mlflow",
     "ortho ui --tracking-uri 'postgresql://ortho:***@db:5432/mlflow'"),
])
def test_the_page_names_the_ui_that_serves_its_store(html_report, tracking_uri: str,
                                                     command: str) -> None:
    """The links go to `ortho ui` on its default port: the page says which store to serve,
    since a plain `ortho ui` serves the home of the folder it runs in."""
    _page, report = html_report
    section = render_section(replace(report, runs=replace(report.runs,
                                                          tracking_uri=tracking_uri)))
    assert f"<code>{html.escape(command)}</code>:" in section


def test_the_store_s_password_stays_off_the_page(html_report) -> None:
    _page, report = html_report
    runs = replace(report.runs, tracking_uri="postgresql://ortho:s3cret@db:5432/mlflow")
    section = render_section(replace(report, runs=runs))
    assert "s3cret" not in section and "postgresql://ortho:***@db:5432/mlflow" in section
