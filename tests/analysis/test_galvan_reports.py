"""Reports of G's synthetic specs (``spectral-temporal-gradients``, ``spectral-init-success``,
``simplex-direction``) and the penalty-form table of ``synthetic-max-length`` on hand-built
sweeps: published beside measured, the verdicts, partial cells and the plotted data; one
sweep goes through a real store built by ``sweeps.testing`` (steps as time indices)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from analysis.load import Histories, load_sweep
from analysis.published.galvan import FIG_4_1, TABLE_4_1
from analysis.report import builder
from analysis.reports import max_length, simplex_direction, spectral_init, temporal_gradients
from ortho_core.reporting import Outcome, Result
from sweeps import tracking
from sweeps.testing import sqlite_store, start_sweep, track
from tests.analysis.conftest import frame_runs


def runs_frame(rows: list[dict[str, object]]) -> pd.DataFrame:
    """A loaded frame: ``run_id`` and ``outcome`` plus ``params.*``/``metrics.*`` columns."""
    frame = pd.DataFrame.from_records(rows)
    frame["trial_key"] = frame["run_id"]
    frame["status"] = "FINISHED"
    return frame


def test_the_three_specs_have_their_reports():
    assert builder("spectral-temporal-gradients") is temporal_gradients.temporal_gradients_report
    assert builder("spectral-init-success") is spectral_init.spectral_init_report
    assert builder("simplex-direction") is simplex_direction.simplex_report


# --- spectral-temporal-gradients --------------------------------------------------------

TG_SPEC = """\
name: spectral-temporal-gradients
fixed: {seq_len: 4, samples: 10}
space:
  spectral_radius: [0.8, 1.2]
repeats: 3
seed: 0
"""
TG_RATIOS = {0.8: [-3.0, -2.5, -4.0], 1.2: [-0.2, -1.5, 0.1]}
"""ρ -> the seeds' log10 ratios: ρ = 0.8 decays (median −3), ρ = 1.2 is flat (median −0.2)."""


def tg_frame(drop: str | None = None) -> pd.DataFrame:
    rows = [{"run_id": f"r{rho}-{s}", "outcome": "solved", "params.spectral_radius": rho,
             "params.seed": s, "params.seq_len": 4, "params.samples": 10,
             "params.task": "temporal_order_galvan", "metrics.log10_ratio": v}
            for rho, values in TG_RATIOS.items() for s, v in enumerate(values)]
    return runs_frame([r for r in rows if r["run_id"] != drop])


def test_temporal_gradient_table_sets_the_median_beside_g_s_claim():
    table = temporal_gradients.ratio_table(frame_runs(tg_frame(), "x", TG_SPEC))
    rows = {row[0].text(): [c.marked() for c in row] for row in table.rows}
    assert rows["0.8"] == ["0.8", "-3.00", "-4.00", "-2.50", "decays", "decays", "as G", "3/3"]
    assert rows["1.2"] == ["1.2", "-0.20", "-1.50", "0.10", "flat", "flat", "as G", "3/3"]
    # ρ G describes but the sweep did not run: G's claim only; ρ = 1, which G's text does
    # not describe: no claim either
    assert rows["1.1"][1:] == ["–", "–", "–", "–", "flat", "–", "0/0"]
    assert rows["1"][1:] == ["–", "–", "–", "–", "–", "–", "0/0"]
    assert table.notes[0] == "Verdict: 2 of 2 ρ behave as G describes them."


def test_a_missing_seed_makes_its_row_partial_and_a_wrong_shape_differs():
    frame = tg_frame(drop="r0.8-2")
    frame.loc[frame["run_id"] == "r1.2-0", "metrics.log10_ratio"] = -3.0
    frame.loc[frame["run_id"] == "r1.2-2", "metrics.log10_ratio"] = -2.5
    cells = temporal_gradients.ratio_cells(frame_runs(frame, "x", TG_SPEC))
    row = cells.set_index("rho")
    assert bool(row.loc[0.8, "partial"]) and row.loc[0.8, "count"] == "2/3"
    assert row.loc[0.8, "median"] == pytest.approx(-2.75)
    assert row.loc[1.2, "shape"] == "decays" and row.loc[1.2, "agrees"] is False


def test_temporal_gradient_curves_read_back_from_a_store(tmp_path: Path):
    """Stepwise norms tracked with the time index as the MLflow step come back per ρ as the
    median over seeds at each step."""
    uri = sqlite_store(tmp_path)
    t = tracking.Tracker(uri)
    ref = start_sweep(t, "spectral-temporal-gradients", "tg-1", profile="cpu",
                      resolved_text=TG_SPEC, metric="log10_ratio")
    norms = {(0.8, 0): [1e-6, 1e-4, 1e-2, 1.0], (0.8, 1): [1e-5, 1e-3, 1e-1, 2.0],
             (0.8, 2): [1e-7, 1e-5, 1e-3, 3.0], (1.2, 0): [0.5, 0.4, 0.6, 1.0],
             (1.2, 1): [0.3, 0.3, 0.3, 0.3], (1.2, 2): [0.1, 0.2, 0.9, 1.0]}
    for (rho, seed), values in norms.items():
        rows = [(step, {"temporal_grad_norm": v}) for step, v in enumerate(values, start=1)]
        track(t, ref, f"k{rho}-{seed}", {"spectral_radius": rho, "seed": seed, "seq_len": 4,
                                          "samples": 10}, rows=rows,
              result=Result(Outcome.SOLVED, {"log10_ratio": -1.0}))
    t.end_sweep(ref, "FINISHED", {})
    client = MlflowClient(tracking_uri=uri)
    runs = load_sweep(client, "spectral-temporal-gradients")
    figure = temporal_gradients.norm_curves(runs, Histories(client, runs))
    got = {rho: s.sort_values("step")["norm"].tolist() for rho, s in figure.data.groupby("rho")}
    assert got[0.8] == pytest.approx([1e-6, 1e-4, 1e-2, 2.0])
    assert got[1.2] == pytest.approx([0.3, 0.3, 0.6, 1.0])
    assert set(figure.data["seeds"]) == {3}
    assert figure.save(tmp_path / "out").read_bytes().startswith(b"\x89PNG")


# --- spectral-init-success --------------------------------------------------------------

SI_SPEC = """\
name: spectral-init-success
fixed: {protocol: fixed}
space:
  seq_len: [10, 20, 30]
groups:
  - fixed: {spectral_radius: null}
  - fixed: {spectral_radius: 1.2}
repeats: 2
seed: 0
"""
SI_OUTCOMES = {  # (T, ρ) -> outcomes of seeds 0 and 1
    (10, None): ["solved", "solved"], (10, 1.2): ["solved", "solved"],
    (20, None): ["solved", "unsolved"], (20, 1.2): ["solved", "solved"],
    (30, None): ["unsolved", "unsolved"], (30, 1.2): ["unsolved", "solved"],
}


def si_runs(drop: str | None = None):
    rows = [{"run_id": f"T{t}-{rho}-{s}", "outcome": o, "params.seq_len": t,
             "params.spectral_radius": rho, "params.seed": s, "params.lr": 0.01,
             "params.hidden": 50, "params.batch_size": 100, "params.clip": 1.0,
             "params.val_size": 1000, "params.max_iters": 5000, "params.patience": None}
            for (t, rho), outcomes in SI_OUTCOMES.items() for s, o in enumerate(outcomes)]
    frame = runs_frame([r for r in rows if r["run_id"] != drop])
    frame["params.spectral_radius"] = frame["params.spectral_radius"].astype("float64")
    return frame_runs(frame, "spectral-init-success", SI_SPEC)


def test_success_rates_per_length_and_the_verdict():
    runs = si_runs()
    table = spectral_init.success_table(runs)
    assert [[c.marked() for c in row] for row in table.rows] == [
        ["10", "100", "100", "2/2", "2/2", "4/4"],
        ["20", "50", "100", "1/2", "2/2", "4/4"],
        ["30", "0", "50", "0/2", "1/2", "4/4"]]
    assert table.notes[0] == ("Verdict: as G — ρ = 1.2 solves longer sequences than the plain "
                              "Gaussian (the plain one fails at T = 30).")
    assert any("lr = 0.01 (paper 0.001)" in n and "val_size = 1000 (paper 10000)" in n
               for n in table.notes)
    assert table.notes[-1] == ("Budget: at most 5,000 iterations per run, no failure rule (G: "
                               "no budget; failed after 3,000,000 iterations without a "
                               "decrease).")
    longest = spectral_init.longest_table(runs)
    assert [[c.marked() for c in row] for row in longest.rows] == [
        ["Gaussian", "20", str(FIG_4_1["gaussian"].max_solved_len), "30"],
        ["ρ = 1.2", "30", str(FIG_4_1["spectral"].max_solved_len), "30"]]
    figure = spectral_init.success_figure(runs)
    assert figure.data.set_index(["seq_len", "init"])["rate"].to_dict()[(20, "gaussian")] == 0.5


def test_a_missing_run_is_partial_and_a_reversed_result_differs():
    runs = si_runs(drop="T30-1.2-1")
    table = spectral_init.success_table(runs)
    assert [c.marked() for c in table.rows[2]] == ["30", "0", "0†", "0/2", "0/1", "3/4"]
    assert table.notes[0].startswith("Verdict: differs from G")


# --- simplex-direction ------------------------------------------------------------------

SD_SPEC = """\
name: simplex-direction
fixed: {seq_len: 10}
groups:
  - fixed: {direction: gradient}
  - fixed: {direction: simplex}
  - fixed: {direction: simplex_switch, switch_norm: 5.0}
repeats: 3
seed: 0
"""
SD_RUNS = [  # run_id, direction, seed, outcome, iterations; run ids do not follow seeds
    ("g0", "gradient", 2, "solved", 3000), ("g1", "gradient", 0, "solved", 5000),
    ("g2", "gradient", 1, "unsolved", None),
    ("s0", "simplex", 0, "solved", 4000), ("s1", "simplex", 1, "solved", 8000),
    ("s2", "simplex", 2, "solved", 6000),
    ("w0", "simplex_switch", 1, "solved", 2000), ("w1", "simplex_switch", 2, "solved", 3000),
]


def sd_runs():
    frame = runs_frame([
        {"run_id": r, "outcome": o, "params.direction": d, "params.seq_len": 10,
         "params.switch_norm": 5.0 if d == "simplex_switch" else None, "params.seed": seed,
         "metrics.iters_to_solve": i} for r, d, seed, o, i in SD_RUNS])
    return frame_runs(frame, "simplex-direction", SD_SPEC)


def test_mean_iterations_per_direction_beside_table_4_1():
    table = simplex_direction.simplex_table(sd_runs())
    rows = {row[0].text(): [c.marked() for c in row] for row in table.rows}
    pub = {d: format(v, ",d") for d, v in TABLE_4_1.items()}
    ratio = {d: format(v / TABLE_4_1["gradient"], ".2f") for d, v in TABLE_4_1.items()}
    # every run finished, one without converging: counted apart, not a partial entry
    assert rows["anti-gradient"] == ["anti-gradient", "4,000", pub["gradient"], "1.00",
                                     ratio["gradient"], "2", "1", "3/3"]
    assert rows["simplex"] == ["simplex", "6,000", pub["simplex"], "1.50", ratio["simplex"],
                               "3", "0", "3/3"]
    assert rows["simplex with switching"] == [
        "simplex with switching", "2,500†", pub["simplex_switch"], "0.62†",
        ratio["simplex_switch"], "2", "0", "2/3"]
    assert table.notes[0] == ("Verdict: as G — the simplex direction with switching converges "
                              "first.")
    assert table.notes[1].startswith("Measured order (fastest first): simplex with switching, "
                                     "anti-gradient, simplex;")
    assert any("seq_len = 10 (paper 100)" in n for n in table.notes)
    assert "T = 10; ψ = 5 (G's code: 5; the thesis gives none)." in table.notes


def test_a_whole_sweep_with_unconverged_runs_is_not_partial():
    """Runs that trained to their budget without converging are counted apart: the table of
    a sweep that ran every configuration is complete and its claim is not a partial one."""
    runs = sd_runs()
    extra = runs.runs.iloc[[-1]].assign(run_id="w2", outcome="unsolved")
    extra["metrics.iters_to_solve"] = None
    runs.runs = pd.concat([runs.runs, extra], ignore_index=True)
    cells = simplex_direction.direction_cells(runs)
    table = simplex_direction.simplex_table(runs, cells)
    assert table.incomplete() == [] and "Partial sweep" not in table.to_markdown()
    claim = simplex_direction.simplex_claim(cells)
    assert (claim.status, claim.partial) == ("holds", False)


@pytest.mark.parametrize(("unconverged", "status", "said"), [
    ("simplex", "holds", "simplex with switching 2,500, anti-gradient 4,000, "
                         "simplex none converged"),
    ("simplex_switch", "does not hold", "simplex with switching none converged, "
                                        "anti-gradient 4,000, simplex 6,000"),
])
def test_a_direction_none_of_whose_runs_converged_ranks_last(unconverged, status, said):
    """Runs that ran out of their budget are slower than any that converged within it: the
    verdict is decided, not left unmeasured, when every run of a direction is unsolved."""
    runs = sd_runs()
    mine = runs.runs["params.direction"] == unconverged
    runs.runs.loc[mine, "outcome"] = "unsolved"
    runs.runs.loc[mine, "metrics.iters_to_solve"] = None
    cells = simplex_direction.direction_cells(runs)
    claim = simplex_direction.simplex_claim(cells)
    assert (claim.status, claim.evidence) == (status, said)
    first = "as G" if status == "holds" else "differs from G"
    assert simplex_direction.verdict(cells)[0].startswith(f"Verdict: {first}")
    order = simplex_direction.verdict(cells)[1].split(";")[0]
    assert order.endswith(f"{simplex_direction.DIRECTIONS[unconverged]} (none converged)")


def test_no_direction_converging_orders_nothing():
    """Every run of every direction out of its budget: nothing says which is fastest, so G-T41
    is not measured and the measured order is none (not the three in the table's order)."""
    runs = sd_runs()
    runs.runs["outcome"] = "unsolved"
    runs.runs["metrics.iters_to_solve"] = None
    cells = simplex_direction.direction_cells(runs)
    claim = simplex_direction.simplex_claim(cells)
    assert (claim.status, claim.evidence) == ("not measured", "simplex with switching none "
                                              "converged, anti-gradient none converged, "
                                              "simplex none converged")
    result, order = simplex_direction.verdict(cells)
    assert result == "Verdict: none — no run of any direction converged within its budget."
    assert order.startswith("Measured order (fastest first): none converged;")


class SDHistories:
    """``val_loss`` halves every 500 iterations from the run's index."""

    def get(self, run_id: str, key: str) -> pd.DataFrame:
        start = 1.0 + [r[0] for r in SD_RUNS].index(run_id)
        return pd.DataFrame({"step": [500, 1000], "value": [start, start / 2]})


def test_fig_4_2_compares_the_directions_on_the_same_seeds(tmp_path: Path):
    """Every direction is drawn on the seeds all of them finished, the same seed bold for
    each: the anti-gradient's median one by iterations (seed 2: 3,000; seed 1 unconverged),
    whichever run ids the runs have; seed 0, which the switching variant lacks, is left out
    rather than compared with another seed."""
    figure = simplex_direction.loss_curves(sd_runs(), SDHistories())
    bold = figure.data[figure.data["shown"]].groupby("direction")["run_id"].first().to_dict()
    assert bold == {"gradient": "g0", "simplex": "s2", "simplex_switch": "w1"}
    faint = figure.data[~figure.data["shown"]].groupby("direction")["run_id"].first().to_dict()
    assert faint == {"gradient": "g2", "simplex": "s1", "simplex_switch": "w0"}
    assert set(figure.data["seed"]) == {1, 2}
    assert figure.data[figure.data["run_id"] == "s2"]["loss"].tolist() == [6.0, 3.0]
    assert figure.notes[0].startswith("Bold: seed 2 for every direction, the seed whose "
                                      "anti-gradient run is the median")
    assert "faint: seed 1." in figure.notes[0]
    assert "Seed 0 left out: not every direction finished it." in figure.notes
    legend = figure.render().axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [
        "anti-gradient (seed 2)", "simplex (seed 2)", "simplex with switching (seed 2)"]
    assert figure.save(tmp_path).read_bytes().startswith(b"\x89PNG")


def test_fig_4_2_says_when_a_direction_s_curve_hides_under_another():
    """The switching variant whose switch never fired trains as the simplex direction: its
    curve covers the simplex one, and the notes say so (the anti-gradient's differs)."""
    same = {"s2": "w1"}

    class Hidden(SDHistories):
        def get(self, run_id: str, key: str) -> pd.DataFrame:
            return super().get(same.get(run_id, run_id), key)

    notes = simplex_direction.loss_curves(sd_runs(), Hidden()).notes
    assert [n for n in notes if "lies under" in n] == [
        "simplex's curve lies under simplex with switching's: their validation losses are "
        "equal at every evaluation."]
    assert not any("lies under" in n
                   for n in simplex_direction.loss_curves(sd_runs(), SDHistories()).notes)


def test_fig_4_2_s_seed_does_not_depend_on_run_ids():
    """With no run converged (the smoke profile), the bold seed is the lower median seed, the
    same under any naming of the runs."""
    runs = sd_runs()
    runs.runs["outcome"] = "unsolved"
    runs.runs["metrics.iters_to_solve"] = None
    shown = []
    for names in (list(runs.runs["run_id"]), [f"z{9 - i}" for i in range(len(runs.runs))]):
        renamed = runs.runs.assign(run_id=names, trial_key=names)
        histories = {n: pd.DataFrame({"step": [1], "value": [1.0]}) for n in names}
        figure = simplex_direction.loss_curves(
            frame_runs(renamed, "simplex-direction", SD_SPEC), _Fixed(histories))
        shown.append(set(figure.data.loc[figure.data["shown"], "seed"]))
    assert shown == [{1}, {1}]


class _Fixed:
    """Histories from a dict of run id -> frame."""

    def __init__(self, histories: dict[str, pd.DataFrame]):
        self.histories = histories

    def get(self, run_id: str, key: str) -> pd.DataFrame:
        return self.histories[run_id]


# --- synthetic-max-length: the two penalty forms ----------------------------------------

def test_penalty_form_table_pairs_the_forms_and_is_absent_with_one_form():
    rows = [("a", "plain", 0.01, 0.0, None, 30), ("b", "open", 0.01, 1.0, None, 40),
            ("c", "open", 0.01, 1.0, "unsquared", 60), ("d", "open", 0.01, 0.1, "squared", 20),
            ("e", "open", 0.01, 0.1, "unsquared", 10)]
    frame = runs_frame([{"run_id": r, "outcome": "solved", "params.task": "temporal_order",
                         "params.variant": v, "params.lr": lr, "params.penalty": lam,
                         "params.penalty_form": form, "metrics.max_seq_len_solved": t}
                        for r, v, lr, lam, form, t in rows])
    table = max_length.penalty_form_table(frame_runs(frame, "synthetic-max-length", None))
    assert [[c.marked() for c in row] for row in table.rows] == [
        ["Temporal Order", "0.01", "0.1", "20", "10"],
        ["Temporal Order", "0.01", "1", "40", "60"]]
    assert table.notes[-1] == "Temporal Order: best T 40 (squared) vs 60 (unsquared)."
    one_form = frame[frame["params.penalty_form"] != "unsquared"]
    assert max_length.penalty_form_table(
        frame_runs(one_form, "synthetic-max-length", None)) is None
