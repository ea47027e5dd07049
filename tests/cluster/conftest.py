"""The cluster tests' servers: the session fixtures of :mod:`tests.servers`."""

from tests.servers import mlflow_server, postgres, ray_cluster

__all__ = ["mlflow_server", "postgres", "ray_cluster"]
