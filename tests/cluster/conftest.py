"""The cluster tests' servers: the session fixtures of :mod:`tests.servers` (PostgreSQL and
the MLflow server come from the root ``conftest.py``, shared with the store fixture)."""

from tests.servers import ray_cluster

__all__ = ["ray_cluster"]
