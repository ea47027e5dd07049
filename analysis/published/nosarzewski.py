"""Paper N (Nosarzewski, deep orthogonal neural networks): the published claims the report of
``deep-orthogonal`` sets beside the measured values. N prints figures, not tables; the numbers
here are the ones its text states.

- :data:`F1_RELU_MIN_ERROR`, :data:`F1_RELU_VANISH_DEPTH`, :data:`F1_ORTH_ERROR`,
  :data:`F1_ORTH_DEPTH`, :data:`F1_HIDDEN`, :data:`F1_POINTS`: §6.1, Fig. 1.
- :data:`F3_SPREAD_LIMIT`, :data:`F3_WEIGHT_DECAY`: §6.2, Fig. 3.
- :data:`F4_HIDDEN`, :data:`F4_INTERNAL`: §6.3, Fig. 4.
- :data:`PAPER_PROTOCOL`: §5.

Pure data: no imports beyond the standard library.
"""

from __future__ import annotations

F1_POINTS = 200
"""N §6.1: points of the two-dimensional two-class set."""
F1_HIDDEN = 2
"""N §6.1: hidden units of every net of Fig. 1."""
F1_RELU_VANISH_DEPTH = 10
"""N §6.1: ReLU nets' activation gradients vanish from this depth on ("as soon as the depth
increase to 10 layers or more")."""
F1_RELU_MIN_ERROR = 10.0
"""N §6.1: ReLU nets of 2 hidden units err on more than this many % at any depth."""
F1_ORTH_DEPTH = 20
"""N §6.1: layers of the orthogonal net of Fig. 1b-e."""
F1_ORTH_ERROR = 1.0
"""N §6.1: classification error of that net, in %."""

F3_SPREAD_LIMIT = (2.0, 3.0)
"""N §6.2: an Orth/ReLU net trains reliably while its gradients vary by no more than "roughly
two or three orders of magnitude" across the layers (beyond 3, training became unstable)."""
F3_WEIGHT_DECAY = 0.001
"""N Fig. 3: λ of the L2 regularisation on the ReLU layers."""

F4_HIDDEN = 4
"""N §6.3: hidden units of the MNIST nets."""
F4_INTERNAL = 50
"""N §6.3: internal orthogonal layers (plus a first and a last matrix with sign-flip); the
standard net of "a depth of 50" cannot be trained."""

PAPER_PROTOCOL: dict[str, float] = {"momentum": 0.9, "lr": 0.001}
"""N §5: β = 0.9 and "a learning rate of around 10⁻³" (to flag a different protocol)."""
