"""Addresses in the MLflow UI that ``ortho ui`` serves: an experiment's runs, one run.

MLflow 3's UI opens an experiment on its GenAI view (traces, evaluations) unless the address
asks for the model-training view (:data:`TRAINING_VIEW`) or the browser remembers that
choice (the "Model training" switch at its top left); a sweep's runs are training runs, so
every address this project prints or links asks for that view.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

DEFAULT_UI = "http://127.0.0.1:5000"
"""Where ``ortho ui`` serves the MLflow UI by default."""

TRAINING_VIEW = "workflowType=machine_learning"
"""The query that opens MLflow 3's model-training view (runs, their metrics and params)
rather than its GenAI view."""


def experiment_url(experiment_id: str, ui: str = DEFAULT_UI) -> str:
    """The runs table of experiment ``experiment_id`` (a spec's sweeps) on the UI at ``ui``."""
    return f"{ui}/#/experiments/{experiment_id}/runs?{TRAINING_VIEW}"


def run_url(experiment_id: str, run_id: str, ui: str = DEFAULT_UI) -> str:
    """The page of run ``run_id`` on the UI at ``ui``."""
    return f"{ui}/#/experiments/{experiment_id}/runs/{run_id}?{TRAINING_VIEW}"


def ui_for(tracking_uri: str | None) -> str:
    """Where a store's runs open in a browser: a tracking server (``http(s)://``) serves the
    UI itself at its own address, given here without its user info (a token or password must
    not reach a page); a database or file store is served by ``ortho ui``, at
    :data:`DEFAULT_UI`."""
    parts = urlsplit(tracking_uri or "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return DEFAULT_UI
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))
