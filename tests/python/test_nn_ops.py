# SPDX-License-Identifier: Apache-2.0
"""NN ops on kiln vs PyTorch CPU, forward and backward, with the ops checked to run natively."""
import pytest
import torch
import torch.nn.functional as F

import torch_kiln

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-10, atol=1e-10),
       torch.bfloat16: dict(rtol=2e-2, atol=2e-2), torch.float16: dict(rtol=2e-3, atol=2e-3)}


def check(fn, inputs, dtype, native_ops=(), grad=True):
    """Runs fn on CPU and on kiln copies of `inputs`; compares outputs and input gradients."""
    cpu_in = [t.detach().clone().requires_grad_(grad and t.is_floating_point()) for t in inputs]
    k_in = [t.detach().to("kiln").requires_grad_(grad and t.is_floating_point()) for t in inputs]
    want = fn(*cpu_in)
    torch_kiln.fallback_reset()
    got = fn(*k_in)
    assert got.device.type == "kiln"
    torch.testing.assert_close(got.cpu(), want, **TOL[dtype])
    if grad:
        g = torch.randn_like(want)
        want.backward(g)
        got.backward(g.to("kiln"))
        if dtype in (torch.float16, torch.bfloat16):
            # 16-bit gradients are sums of rounded products: judge kiln against a float64 reference,
            # allowing as much error as PyTorch CPU itself makes (plus the dtype tolerance).
            ref_in = [t.detach().double().requires_grad_(t.is_floating_point()) for t in inputs]
            fn(*ref_in).backward(g.double())
            for c, k, r in zip(cpu_in, k_in, ref_in):
                if c.grad is not None:
                    cpu_err = (c.grad.double() - r.grad).abs().max().item()
                    kiln_err = (k.grad.cpu().double() - r.grad).abs().max().item()
                    assert kiln_err <= 1.5 * cpu_err + TOL[dtype]["atol"], (kiln_err, cpu_err)
        else:
            for c, k in zip(cpu_in, k_in):
                if c.grad is not None:
                    torch.testing.assert_close(k.grad.cpu(), c.grad, **TOL[dtype])
    report = torch_kiln.fallback_report()
    for op in native_ops:
        assert op not in report, (op, report)


DTYPES = [torch.float32, torch.float64, torch.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax(dtype, dim):
    x = torch.randn(5, 7, 3).to(dtype)
    check(lambda t: torch.softmax(t, dim), [x], dtype, ["aten::_softmax.out", "aten::_softmax_backward_data.out"])
    check(lambda t: torch.log_softmax(t, dim), [x], dtype, ["aten::_log_softmax.out"])
    check(lambda t: torch.softmax(t.transpose(0, 1), dim), [x], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm(dtype):
    x, w, b = torch.randn(4, 6, 32).to(dtype), torch.randn(32).to(dtype), torch.randn(32).to(dtype)
    check(lambda t, w, b: F.layer_norm(t, (32,), w, b), [x, w, b], dtype,
          ["aten::native_layer_norm", "aten::native_layer_norm_backward"])
    check(lambda t: F.layer_norm(t, (6, 32)), [x], dtype, ["aten::native_layer_norm"])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy(dtype, reduction):
    logits = torch.randn(9, 5).to(dtype)
    target = torch.randint(0, 5, (9,))
    target[2] = -100
    w = torch.rand(5).to(dtype)
    check(lambda x: F.cross_entropy(x, target.to(x.device), reduction=reduction).sum(), [logits], dtype,
          ["aten::nll_loss_forward.output", "aten::nll_loss_backward.grad_input"])
    check(lambda x: F.cross_entropy(x, target.to(x.device), weight=w.to(x.device), reduction=reduction).sum(),
          [logits], dtype)


def test_cross_entropy_bad_target_raises():
    logits = torch.randn(3, 5, device="kiln")
    with pytest.raises((IndexError, RuntimeError, ValueError)):
        F.cross_entropy(logits, torch.tensor([0, 7, 1], device="kiln"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_embedding(dtype):
    w = torch.randn(20, 8).to(dtype)
    idx = torch.randint(0, 20, (3, 5))
    check(lambda w: F.embedding(idx.to(w.device), w), [w], dtype, ["aten::embedding", "aten::embedding_dense_backward"])
    with pytest.raises((IndexError, RuntimeError)):
        F.embedding(torch.tensor([25], device="kiln"), w.to("kiln"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", ["plain", "causal", "bool_mask", "float_mask", "transposed", "cross"])
def test_sdpa(dtype, case):
    B, H, L, S, E = 2, 3, 37, 37, 16
    if case == "cross":
        S = 21
    q, k, v = torch.randn(B, H, L, E).to(dtype), torch.randn(B, H, S, E).to(dtype), torch.randn(B, H, S, E).to(dtype)
    mask = None
    if case == "bool_mask":
        mask = torch.rand(L, S) > 0.3
    if case == "float_mask":
        mask = torch.randn(B, 1, L, S).to(dtype)

    def fn(q, k, v):
        if case == "transposed":
            q = q.transpose(1, 2).contiguous().transpose(1, 2)
        m = None if mask is None else mask.to(q.device)
        if m is not None and m.is_floating_point():
            m = m.to(q.dtype)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=case == "causal")
    check(fn, [q, k, v], dtype, ["aten::bmm.out", "aten::_softmax.out"])


@pytest.mark.parametrize("cls", [torch.optim.AdamW, torch.optim.Adam])
@pytest.mark.parametrize("amsgrad", [False, True])
def test_fused_adam_matches_cpu(cls, amsgrad):
    torch.manual_seed(0)
    params = [torch.randn(33, 7), torch.randn(5), torch.randn(1000)]
    grads = [[torch.randn_like(p) for p in params] for _ in range(3)]
    cpu = [p.clone().requires_grad_() for p in params]
    kil = [p.to("kiln").requires_grad_() for p in params]
    o1 = cls(cpu, lr=1e-2, weight_decay=0.1, amsgrad=amsgrad, fused=True)
    o2 = cls(kil, lr=1e-2, weight_decay=0.1, amsgrad=amsgrad, fused=True)
    torch_kiln.fallback_reset()
    for gs in grads:
        for p, k, g in zip(cpu, kil, gs):
            p.grad, k.grad = g.clone(), g.to("kiln")
        o1.step()
        o2.step()
    assert not any("fused_adam" in k for k in torch_kiln.fallback_report()), torch_kiln.fallback_report()
    for p, k in zip(cpu, kil):
        torch.testing.assert_close(k.detach().cpu(), p.detach(), rtol=1e-6, atol=1e-7)
