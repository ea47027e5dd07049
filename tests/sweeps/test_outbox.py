"""The writer's outbox against a tracking server that goes away (no Ray, no server: the
writer in this process, over a fake server that refuses connections or loses answers on
demand and, unlike MLflow's SQL stores, applies a batch sent twice twice).

What is held during an outage arrives in order and once; a request whose answer was lost is
not applied again; a claim waits for the server; beyond the outage limit the runs that lost
writes are marked failed and waiting claims fail.
"""

from __future__ import annotations

import time
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

import pytest
import requests
from mlflow.exceptions import MlflowException, RestException
from urllib3.exceptions import NewConnectionError, ProtocolError

from ortho_core.errors import ConfigError
from ortho_core.reporting import Outcome, Result
from sweeps import contract, tracking
from sweeps.tracking import outbox
from sweeps.tracking.outbox import Limits, TrackingOutage
from sweeps.tracking.records import Claim, SweepRef
from sweeps.tracking.retry import maybe_applied, unreachable
from sweeps.writer import TrackerActor

URI = "http://tracking.invalid:5000"
REF = SweepRef("1", "s", "parent")


def _refused() -> MlflowException:
    """What MLflow raises when the server's port is closed (the request never left)."""
    err = MlflowException(f"API request to {URI} failed with exception ... refused")
    err.__context__ = requests.ConnectionError("Max retries exceeded")
    err.__context__.__context__ = NewConnectionError(None, "[Errno 111] Connection refused")
    return err


def _answer_lost() -> MlflowException:
    """What MLflow raises when the server went away after reading the request."""
    err = MlflowException(f"API request to {URI} failed with exception ... aborted")
    err.__context__ = requests.ConnectionError("Connection aborted.")
    err.__context__.__context__ = ProtocolError("Connection aborted.", ConnectionResetError())
    return err


class FakeServer:
    """A tracking server: every call first takes the next word of :attr:`script` ("down":
    refused, nothing applied; "lost": applied, answer lost; "missing": refused on its merits
    (a run that does not exist, HTTP 404); "half", for a ``log_batch``:
    its metrics applied, then an error 500 as its tags fail), or refuses while :attr:`down`.
    Metric rows are kept as they arrive, doubles included."""

    def __init__(self) -> None:
        self.down = False
        self.script: list[str] = []
        self.metrics: dict[str, list[tuple[str, float, int, int]]] = defaultdict(list)
        self.status: dict[str, str] = {}
        self.tags: dict[str, dict[str, str]] = defaultdict(dict)
        self.texts: dict[str, dict[str, str]] = defaultdict(dict)

    def _gate(self, apply: Any) -> Any:
        word = self.script.pop(0) if self.script else ("down" if self.down else "ok")
        if word == "down":
            raise _refused()
        if word == "missing":
            raise RestException({"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "gone"})
        result = apply()
        if word == "lost":
            raise _answer_lost()
        return result

    # MlflowClient's calls the writer makes
    def log_batch(self, run_id: str, metrics: Any = (), tags: Any = ()) -> None:
        if self.script[:1] == ["half"]:  # MLflow's server: the metrics' transaction, then
            self.script.pop(0)  # the tags' failing (a 500)
            self.metrics[run_id] += [(m.key, m.value, m.timestamp, m.step) for m in metrics]
            raise RestException({"error_code": "INTERNAL_ERROR", "message": "tags failed"})

        def apply() -> None:
            self.metrics[run_id] += [(m.key, m.value, m.timestamp, m.step) for m in metrics]
            self.tags[run_id].update({t.key: t.value for t in tags})
        self._gate(apply)

    def get_metric_history(self, run_id: str, key: str) -> list[Any]:
        return self._gate(lambda: [SimpleNamespace(key=k, value=v, timestamp=t, step=s)
                                   for k, v, t, s in self.metrics[run_id] if k == key])

    def get_run(self, run_id: str) -> Any:
        return self._gate(lambda: SimpleNamespace(
            info=SimpleNamespace(status=self.status[run_id]),
            data=SimpleNamespace(tags=dict(self.tags[run_id]))))

    def set_terminated(self, run_id: str, status: str) -> None:
        self._gate(lambda: self.status.__setitem__(run_id, status))

    def set_tag(self, run_id: str, key: str, value: str) -> None:
        self._gate(lambda: self.tags[run_id].__setitem__(key, value))

    def log_text(self, run_id: str, text: str, path: str) -> None:
        self._gate(lambda: self.texts[run_id].__setitem__(path, text))


class FakeTracker:
    """The calls of :class:`~sweeps.tracking.Tracker` the writer makes, laid out as it lays
    them out (an ending's outcome and summaries in one batch, its status last)."""

    tables = None
    """A server's store is never written straight into its tables."""

    def __init__(self, server: FakeServer) -> None:
        self.client = server
        self.claims = 0

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    def claim(self, ref: SweepRef, key: str, params: Any, tags: Any) -> Claim:
        self.client.set_terminated(key, "RUNNING")
        self.claims += 1
        return Claim(key, None)

    def claim_all(self, ref: SweepRef, items: Any) -> list[Claim]:
        return [self.claim(ref, *item) for item in items]

    def finish(self, run_id: str, result: Result, step: int, rows: Any,
               at: int | None = None) -> None:
        from mlflow.entities import Metric, RunTag

        self.client.log_text(run_id, "csv", contract.METRICS_CSV)
        self.client.log_batch(run_id, metrics=[Metric("score", result.summary["score"],
                                                      at or int(time.time() * 1000), step)],
                              tags=[RunTag(contract.OUTCOME, result.outcome.value)])
        self.client.set_terminated(run_id, "FINISHED")

    def fail(self, run_id: str, error: str, rows: Any = ()) -> None:
        self.client.log_text(run_id, error, contract.TRACEBACK)
        self.client.set_tag(run_id, contract.OUTCOME, "failed")
        self.client.set_terminated(run_id, "FAILED")

    def kill(self, run_id: str) -> None:
        self.client.set_terminated(run_id, "KILLED")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> FakeServer:
    """A fake server that the writer of :data:`URI` reaches, retried every few ms."""
    fake = FakeServer()
    monkeypatch.setitem(tracking._TRACKERS, URI, FakeTracker(fake))
    monkeypatch.setattr(outbox, "RETRY_MIN_S", 0.005)
    monkeypatch.setattr(outbox, "RETRY_MAX_S", 0.02)
    return fake


def _rows(steps: range, ts: int = 1000) -> list[tuple[str, float, int, int]]:
    return [("loss", 1.0 / (s + 1), ts + s, s) for s in steps]


def _history(server: FakeServer, run_id: str) -> list[tuple[int, float]]:
    return [(s, v) for k, v, _, s in server.metrics[run_id] if k == "loss"]


def _until(condition: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_writes_held_through_an_outage_arrive_in_step_order_once(server: FakeServer) -> None:
    writer = TrackerActor(URI, Limits(outage_s=60))
    run = writer.claim(REF, "r1", {}, {}).run_id
    writer.log_metrics({run: _rows(range(0, 3))})
    server.down = True
    writer.log_metrics({run: _rows(range(3, 6))})  # held: the trial goes on training
    writer.log_metrics({run: _rows(range(6, 9))})
    writer.finish(run, Result(Outcome.SOLVED, {"score": 1.0}), 8, [])
    assert writer.outbox.outage_since is not None  # the calls returned during the outage
    assert _history(server, run) == [(s, 1.0 / (s + 1)) for s in range(3)]
    assert server.status[run] == "RUNNING"
    time.sleep(0.1)
    server.down = False
    lines = writer.drain(5.0)
    assert _history(server, run) == [(s, 1.0 / (s + 1)) for s in range(9)]
    assert server.status[run] == "FINISHED" and server.tags[run][contract.OUTCOME] == "solved"
    assert [line for line in lines if "rode out a tracking outage" in line] != []
    assert writer.outbox.longest_outage >= 0.1


def test_a_batch_whose_answer_was_lost_is_not_applied_twice(server: FakeServer) -> None:
    writer = TrackerActor(URI, Limits(outage_s=60))
    run = writer.claim(REF, "r1", {}, {}).run_id
    # applied, answer lost; the check then finds the server down; then it is up again
    server.script = ["lost", "down"]
    writer.log_metrics({run: _rows(range(4))})
    writer.log_metrics({run: _rows(range(4, 6))})
    assert writer.drain(5.0) != []
    assert _history(server, run) == [(s, 1.0 / (s + 1)) for s in range(6)]


def test_an_ending_that_got_part_way_is_completed_not_repeated(server: FakeServer) -> None:
    writer = TrackerActor(URI, Limits(outage_s=60))
    run = writer.claim(REF, "r1", {}, {}).run_id
    # the artifact and the outcome with its summary are written; the status is refused
    server.script = ["ok", "ok", "down"]
    writer.finish(run, Result(Outcome.SOLVED, {"score": 2.0}), 5, [])
    writer.drain(5.0)
    assert server.status[run] == "FINISHED"
    assert [m for m in server.metrics[run] if m[0] == "score"] != []
    assert len([m for m in server.metrics[run] if m[0] == "score"]) == 1


def test_summaries_stored_without_their_outcome_are_stored_once(
        server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow's server applies a ``log_batch``'s metrics and its tags in transactions of
    their own: the real ``Tracker``'s ending stores the summary, then fails (500) before the
    outcome. The ending is sent again with the first attempt's stamp, a row identical to the
    stored one, which MLflow keeps once (the fake keeps both; a later stamp made a second
    point at the run's last step)."""
    real = tracking.Tracker(URI)
    real.client = server
    monkeypatch.setitem(tracking._TRACKERS, URI, real)
    writer = TrackerActor(URI, Limits(outage_s=60))
    server.status["r1"] = "RUNNING"
    server.script = ["ok", "half"]  # the metrics CSV; the summary without the outcome
    writer.finish("r1", Result(Outcome.SOLVED, {"score": 2.0}), 5, [])
    writer.drain(5.0)
    assert server.status["r1"] == "FINISHED"
    assert server.tags["r1"][contract.OUTCOME] == "solved"
    scores = [m for m in server.metrics["r1"] if m[0] == "score"]
    assert len(scores) == 2 and len(set(scores)) == 1, scores


def test_an_outage_ends_when_the_server_answers_even_with_a_refusal(
        server: FakeServer) -> None:
    """The first answer after an outage refuses a held write (its run was deleted
    meanwhile): the outage is over all the same, so the next refusal reaches the trial that
    waits for it (a flag left set made every caller return at once and its error go
    unheard, and measured a later outage from the first one's start)."""
    writer = TrackerActor(URI, Limits(outage_s=60))
    run = writer.claim(REF, "r1", {}, {}).run_id
    server.script = ["down", "missing"]
    writer.kill(run)  # held: returns at once
    _until(lambda: not server.script)
    _until(lambda: writer.outbox.outage_since is None, timeout=5.0)
    server.script = ["missing"]
    with pytest.raises(RestException, match="gone"):
        writer.kill(run)
    assert any("failed after an outage" in line for line in writer.drain(5.0))


def test_a_claim_waits_for_the_server(server: FakeServer) -> None:
    """The server refuses the claim five times, then takes it: the claim returns only then."""
    writer = TrackerActor(URI, Limits(outage_s=60))
    server.script = ["down"] * 5
    assert writer.claim(REF, "r2", {}, {}).run_id == "r2"
    assert server.script == []
    assert server.status["r2"] == "RUNNING"


def test_a_pack_s_claims_through_a_server_refused_midway_repeat_only_the_refused_one(
        server: FakeServer) -> None:
    """A pack's claims through a server are a write each: the server refuses the third
    claim twice, and only that claim is sent again (a write for the whole pack would repeat
    all of them, and never get through a server that refuses now and then)."""
    writer = TrackerActor(URI, Limits(outage_s=60))
    server.script = ["ok", "ok", "down", "down"]
    claims = writer.claim_all(REF, [(f"r{i}", {}, {}) for i in range(5)])
    assert [c.run_id for c in claims] == [f"r{i}" for i in range(5)]
    assert writer.tracker.claims == 5
    assert server.status == {f"r{i}": "RUNNING" for i in range(5)}


def test_beyond_the_outage_limit_runs_are_marked_failed_and_claims_fail(
        server: FakeServer) -> None:
    writer = TrackerActor(URI, Limits(outage_s=0.2))
    run = writer.claim(REF, "r1", {}, {}).run_id
    writer.log_metrics({run: _rows(range(2))})
    server.down = True
    writer.log_metrics({run: _rows(range(2, 4))})  # held, then given up
    with pytest.raises(TrackingOutage, match=r"unreachable for more than 0\.2 s"):
        writer.claim(REF, "r2", {}, {})
    writer.log_metrics({run: _rows(range(4, 6))})  # the run is lost: dropped
    writer.finish(run, Result(Outcome.SOLVED, {"score": 1.0}), 5, [])
    server.down = False
    lines = writer.drain(5.0)
    assert _history(server, run) == [(0, 1.0), (1, 0.5)]  # nothing after the hole
    assert server.status[run] == "FAILED" and server.tags[run][contract.OUTCOME] == "failed"
    assert "TrackingOutage" in server.texts[run][contract.TRACEBACK]
    assert "r2" not in server.status
    assert any(line.startswith("1 runs lost writes") for line in lines)


def test_a_full_buffer_is_given_up_like_a_long_outage(server: FakeServer) -> None:
    writer = TrackerActor(URI, Limits(outage_s=60, values=3))
    run = writer.claim(REF, "r1", {}, {}).run_id
    server.down = True
    writer.log_metrics({run: _rows(range(5))})
    _until(lambda: run in writer.outbox.lost)
    assert "more than 3 metric values" in writer.outbox.lost[run]
    server.down = False
    writer.drain(5.0)
    assert server.status[run] == "FAILED" and _history(server, run) == []


def test_limits_from_the_environment() -> None:
    assert Limits.from_env({}) == Limits(600.0, 2_000_000)
    assert Limits.from_env({outbox.OUTAGE_ENV: "2.5", outbox.BUFFER_ENV: "10"}) == Limits(2.5, 10)
    with pytest.raises(ConfigError, match=outbox.OUTAGE_ENV):
        Limits.from_env({outbox.OUTAGE_ENV: "soon"})


def test_errors_of_a_server_are_told_apart() -> None:
    assert unreachable(_refused()) and not maybe_applied(_refused())
    assert unreachable(_answer_lost()) and maybe_applied(_answer_lost())
    busy = RestException({"error_code": "TEMPORARILY_UNAVAILABLE", "message": "busy"})
    assert unreachable(busy) and maybe_applied(busy)
    missing = RestException({"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "no run"})
    assert not unreachable(missing)
