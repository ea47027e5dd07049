"""The science of ortho-sweeps: data, models, initialisations, penalties, optimisers, training
loops and metrics, as plain functions over packs of configurations (DESIGN.md, layer 1).

``ortho_core`` imports only torch, numpy, the standard library and, to read the MATLAB files
of SVHN and of the polyphonic music sets, ``scipy.io``; it knows nothing of Ray, Optuna or
MLflow.
"""
