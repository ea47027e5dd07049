"""The sign-flip nonlinearity (N eq. 2), layer plans and the norm-preserving orthogonal stack."""

from __future__ import annotations

import torch

from ortho_core.experiments.deep_orthogonal import gradient_profile
from ortho_core.models.orthogonal_net import OrthogonalNet, layer_plan, sign_flip


def test_sign_flip_flips_the_second_half_where_the_first_is_negative():
    z = torch.tensor([[-1.0, 2.0, 3.0, 4.0], [1.0, -2.0, -3.0, 5.0]])
    assert torch.equal(sign_flip(z), torch.tensor([[-1.0, 2.0, -3.0, 4.0],
                                                   [1.0, -2.0, -3.0, -5.0]]))
    assert torch.equal(sign_flip(sign_flip(z)), z)


def test_sign_flip_preserves_norms_of_activations_and_gradients_exactly():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(64, 10, generator=g, requires_grad=True)
    upstream = torch.randn(64, 10, generator=g)
    a = sign_flip(z)
    (grad,) = torch.autograd.grad(a, z, upstream)
    assert torch.equal(a.detach().norm(dim=1), z.detach().norm(dim=1))
    assert torch.equal(grad.norm(dim=1), upstream.norm(dim=1))
    assert not torch.equal(grad, upstream)


def test_layer_plans():
    mnist = layer_plan("orth", 52, 784, 4, 10)
    assert mnist[0] == ("flip", 784, 4) and mnist[-1] == ("flip", 4, 10)
    assert [kind for kind, _, _ in mnist[1:-1]] == ["orth"] * 50
    assert {kind for kind, _, _ in layer_plan("orth", 20, 2, 2, 2)} == {"orth"}
    blocks = [kind for kind, _, _ in layer_plan("orth_relu", 8, 2, 4, 2, block=2)]
    assert blocks == ["relu", "orth", "orth", "relu", "orth", "orth", "relu", "linear"]
    assert [kind for kind, _, _ in layer_plan("relu", 3, 2, 2, 2)] == ["relu", "relu", "linear"]


def test_activation_gradients_are_equal_through_the_orthogonal_stack_at_init():
    plan = layer_plan("orth", 12, 6, 6, 6)
    model = OrthogonalNet(plan, [torch.Generator().manual_seed(s) for s in range(3)],
                          torch.float64)
    g = torch.Generator().manual_seed(9)
    x, y = torch.randn(50, 6, generator=g, dtype=torch.float64), torch.randint(6, (50,),
                                                                               generator=g)
    act, _ = gradient_profile(model, x, y)
    assert act.shape == (3, 12)
    assert torch.allclose(act, act[:, :1].expand_as(act), rtol=1e-12)
    relu = OrthogonalNet(layer_plan("relu", 12, 6, 6, 6), [torch.Generator().manual_seed(0)],
                         torch.float64)
    relu_act, _ = gradient_profile(relu, x, y)
    assert float(relu_act.max() / relu_act.min()) > 1.5
