# SPDX-License-Identifier: Apache-2.0
"""f16/bf16 arithmetic with a Python scalar equals CPU PyTorch bit for bit, eagerly and compiled.

aten's add/sub round the scalar to the tensor's dtype before the float computation while
mul/div keep it in float; `x + 0.1` on f16 used to differ from CPU in ~500 of 4096 elements."""
import pytest
import torch

SCALARS = (0.1, 1 / 3, 2.7182818, -1e-3, 300.5)
OPS = {
    "add": lambda t, s: t + s,
    "radd": lambda t, s: s + t,
    "sub": lambda t, s: t - s,
    "rsub": lambda t, s: s - t,
    "add_alpha": lambda t, s: torch.add(t, s, alpha=0.3),
    "mul": lambda t, s: t * s,
    "div": lambda t, s: t / s,
    "add_0dim": lambda t, s: t + torch.tensor(s, dtype=torch.float64),
    "add_f32_0dim": lambda t, s: torch.tensor(s) + t,
}


def _bits_equal(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    same = (got == want) | (got.isnan() & want.isnan())
    assert bool(same.all()), f"{int((~same).sum())} of {want.numel()} elements differ"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("op", sorted(OPS))
def test_half_scalar_eager_bits(dtype, op):
    torch.manual_seed(0)
    x = (torch.randn(4096) * 3).to(dtype)
    for s in SCALARS:
        _bits_equal(OPS[op](x.to("kiln"), s).cpu(), OPS[op](x, s))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("op", ["add", "sub", "rsub", "mul"])
def test_half_scalar_compiled_bits(dtype, op):
    torch._dynamo.reset()
    torch.manual_seed(1)
    x = (torch.randn(1024) * 3).to(dtype)
    f = torch.compile(lambda t: OPS[op](t, 0.1), backend="kiln", fullgraph=True)
    _bits_equal(f(x.to("kiln")).cpu(), OPS[op](x, 0.1))
