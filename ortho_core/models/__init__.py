"""Networks, packed: every parameter carries a leading dimension K over independent members."""

from ortho_core.models.srnn import PackedSRNN, SRNNInit, init_srnn

__all__ = ["PackedSRNN", "SRNNInit", "init_srnn"]
