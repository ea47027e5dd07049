"""Published values, one pure-data module per paper (dataclasses and constants only).

Every number a report sets beside a measured one comes from here and is stated nowhere else
in the tree: :mod:`analysis.published.manchev` (paper M, Manchev & Spratling),
:mod:`analysis.published.galvan` (paper G, Galvan's thesis),
:mod:`analysis.published.kutsuna` (paper K, Kutsuna) and
:mod:`analysis.published.nosarzewski` (paper N, Nosarzewski). Measured results live in
``RESULTS.md``.
"""
