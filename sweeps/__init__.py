"""Sweeps: spec schema and validation, search spaces, the Ray Tune runner, MLflow tracking and
the ``ortho`` command line (DESIGN.md, layer 2)."""
