"""The science of ortho-sweeps: data, models, initialisations, penalties, optimisers, training
loops and metrics, as plain functions over packs of configurations (DESIGN.md, layer 1).

``ortho_core`` imports only torch, numpy and the standard library; it knows nothing of Ray,
Optuna or MLflow.
"""
