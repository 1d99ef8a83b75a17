# SPDX-License-Identifier: Apache-2.0
"""torch.autocast("kiln") and torch.amp.GradScaler("kiln") against the same code on the CPU."""
import copy

import pytest
import torch
import torch.nn.functional as F

import torch_kiln

# Output dtype under autocast(bf16) for ops of each policy (torch's CUDA lists, which kiln uses).
LOWER = {
    "mm": lambda a, b, v: torch.mm(a, b),
    "matmul": lambda a, b, v: torch.matmul(a, b),
    "linear": lambda a, b, v: F.linear(a, b),
    "addmm": lambda a, b, v: torch.addmm(v, a, b),
    "bmm": lambda a, b, v: torch.bmm(a[None], b[None]),
    "baddbmm": lambda a, b, v: torch.baddbmm(v[None], a[None], b[None]),
    "conv2d": lambda a, b, v: F.conv2d(a[None, None], b[None, None]),
    "sdpa": lambda a, b, v: F.scaled_dot_product_attention(a[None], b[None], b[None]),
}
FP32 = {
    "softmax": lambda x: torch.softmax(x, -1),
    "log_softmax": lambda x: torch.log_softmax(x, -1),
    "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:]),
    "exp": lambda x: torch.exp(x),
    "log": lambda x: torch.log(x.abs() + 1),
    "pow": lambda x: torch.pow(x, 2),
    "sum": lambda x: x.sum(),
    "mse_loss": lambda x: F.mse_loss(x, x.detach() * 0.5),
    "cross_entropy": lambda x: F.cross_entropy(x, torch.zeros(x.shape[0], dtype=torch.long,
                                                                 device=x.device)),
}
PASSTHROUGH = {
    "relu": lambda x: x.relu(),
    "add": lambda x: x + 1,
    "gelu": lambda x: F.gelu(x),
    "view": lambda x: x.view(-1),
}


def _inputs(device, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    a, b, v = (torch.randn(8, 8, generator=g) for _ in range(3))
    return [t.to(device=device, dtype=dtype) for t in (a, b, v)]


@pytest.mark.parametrize("name", sorted(LOWER))
def test_lower_precision_ops(name):
    fn = LOWER[name]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = fn(*_inputs("cpu"))
    with torch.autocast("kiln", dtype=torch.bfloat16):
        out = fn(*_inputs("kiln"))
    assert out.device.type == "kiln"
    assert out.dtype == ref.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu().float(), ref.float(), atol=0.1, rtol=0.05)


@pytest.mark.parametrize("name", sorted(FP32))
def test_fp32_ops(name):
    fn = FP32[name]
    x_cpu = _inputs("cpu", torch.bfloat16)[0]
    with torch.autocast("kiln", dtype=torch.bfloat16):
        out = fn(x_cpu.to("kiln"))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = fn(x_cpu)
    assert out.dtype == torch.float32  # bf16 input, computed in float32 as on CUDA
    torch.testing.assert_close(out.cpu(), ref.float(), atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("name", sorted(PASSTHROUGH))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_passthrough_ops_keep_dtype(name, dtype):
    x = _inputs("kiln", dtype)[0]
    with torch.autocast("kiln", dtype=torch.bfloat16):
        out = PASSTHROUGH[name](x)
    assert out.dtype == dtype
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = PASSTHROUGH[name](x.cpu())
    torch.testing.assert_close(out.cpu(), ref, atol=1e-2, rtol=1e-2)


def test_promote_and_float16():
    a, b, _ = _inputs("kiln")
    with torch.autocast("kiln", dtype=torch.float16):
        mm = a @ b
        assert mm.dtype == torch.float16
        # promote: the widest input type
        assert torch.addcmul(a, mm, mm).dtype == torch.float32
    assert (a @ b).dtype == torch.float32  # outside the region
    with torch.autocast("kiln", enabled=False):
        assert (a @ b).dtype == torch.float32


def test_binary_cross_entropy_refused_under_autocast():
    x = torch.rand(4, device="kiln")
    with torch.autocast("kiln", dtype=torch.bfloat16):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(x, x)


def test_amp_dtypes():
    assert torch.kiln.get_amp_supported_dtype() == [torch.float16, torch.bfloat16, torch.float32]
    assert torch.kiln.is_bf16_supported()
    assert torch.amp.is_autocast_available("kiln")


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                               torch.nn.Linear(32, 4))


def _data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(64, 16, generator=g), torch.randint(0, 4, (64,), generator=g)


def _train_bf16(device, steps=8):
    model = _mlp().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = (t.to(device) for t in _data())
    losses = []
    for _ in range(steps):
        with torch.autocast(device, dtype=torch.bfloat16):
            h = model[0](x)
            assert h.dtype == torch.bfloat16
            logits = model[3](model[2](model[1](h)))
            assert logits.dtype == torch.bfloat16
            loss = F.cross_entropy(logits, y)
            assert loss.dtype == torch.float32
        opt.zero_grad()
        loss.backward()
        assert model[0].weight.grad.dtype == torch.float32
        opt.step()
        losses.append(loss.item())
    return losses


def test_bf16_autocast_training_matches_cpu():
    cpu = _train_bf16("cpu")
    kiln = _train_bf16("kiln")
    assert kiln[-1] < kiln[0]  # it learns
    # bf16 matmuls (8-bit mantissa), accumulated over 8 steps
    torch.testing.assert_close(torch.tensor(kiln), torch.tensor(cpu), atol=2e-2, rtol=2e-2)


def _scaler_run(device, inf_step=2, steps=5):
    model = _mlp().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler(device, init_scale=2.0 ** 10, growth_interval=2)
    x, y = (t.to(device) for t in _data())
    scales, skipped = [], []
    for step in range(steps):
        with torch.autocast(device, dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        if step == inf_step:
            model[0].weight.grad[0, 0] = float("inf")
        before = [p.detach().clone() for p in model.parameters()]
        scaler.step(opt)
        scaler.update()
        skipped.append(all(torch.equal(a, p.detach()) for a, p in zip(before, model.parameters())))
        scales.append(scaler.get_scale())
    return scales, skipped, [p.detach().cpu() for p in model.parameters()]


def test_grad_scaler_f16_matches_cpu_and_skips_inf():
    torch_kiln.fallback_reset()
    k_scales, k_skipped, k_params = _scaler_run("kiln")
    report = torch_kiln.fallback_report()
    assert not any(k.startswith("aten::_amp") for k in report), report
    c_scales, c_skipped, c_params = _scaler_run("cpu")
    assert k_skipped == c_skipped == [False, False, True, False, False]
    # growth after 2 clean steps, backoff on the inf step, growth again after 2 more
    assert k_scales == c_scales == [1024.0, 2048.0, 1024.0, 1024.0, 2048.0]
    for a, b in zip(k_params, c_params):
        torch.testing.assert_close(a, b, atol=5e-3, rtol=5e-3)


def _grads(dev, bad):
    g = torch.Generator().manual_seed(2)
    a, b, base = torch.randn(5, 7, generator=g), torch.randn(3, generator=g), torch.randn(4, 4, generator=g)
    if bad is not None:
        base[1, 2] = bad
    base = base.to(dev)
    return [a.to(dev), b.half().to(dev), base[:, ::2], torch.empty(0, device=dev)]


@pytest.mark.parametrize("bad", [None, float("inf"), float("-inf"), float("nan")])
def test_non_finite_check_and_unscale_matches_cpu(bad):
    outs = {}
    for dev in ("cpu", "kiln"):
        grads = _grads(dev, bad)
        found = torch.zeros(1, device=dev)
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found, torch.tensor([0.25], device=dev))
        outs[dev] = ([t.cpu() for t in grads], found.cpu())
    assert outs["kiln"][1].item() == (0.0 if bad is None else 1.0) == outs["cpu"][1].item()
    for a, b in zip(outs["kiln"][0], outs["cpu"][0]):
        assert a.dtype == b.dtype
        torch.testing.assert_close(a, b, equal_nan=True)


def test_found_inf_stays_set():
    found = torch.ones(1, device="kiln")
    grads = [torch.ones(3, device="kiln")]
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found, torch.tensor([0.5], device="kiln"))
    assert found.item() == 1.0 and torch.equal(grads[0].cpu(), torch.full((3,), 0.5))


def test_unscale_writes_non_contiguous_grads_in_place():
    base = torch.arange(16.0, device="kiln").view(4, 4)
    view = base[:, ::2]
    found = torch.zeros(1, device="kiln")
    torch._amp_foreach_non_finite_check_and_unscale_([view], found, torch.tensor([0.5], device="kiln"))
    expect = torch.arange(16.0).view(4, 4)
    expect[:, ::2] *= 0.5
    assert torch.equal(base.cpu(), expect)


CASES = [  # (scale, tracker, found_inf, growth_interval)
    (1024.0, 0, 0.0, 3), (1024.0, 2, 0.0, 3), (1024.0, 2, 1.0, 3), (1024.0, 0, 1.0, 1),
    (3e38, 1, 0.0, 2),  # growth overflows: scale kept, tracker restarts
]


@pytest.mark.parametrize("scale,tracker,found,interval", CASES)
def test_update_scale_matches_cpu(scale, tracker, found, interval):
    res = {}
    for dev in ("cpu", "kiln"):
        s = torch.tensor([scale], device=dev)
        t = torch.tensor([tracker], dtype=torch.int32, device=dev)
        out = torch._amp_update_scale_(s, t, torch.tensor([found], device=dev), 2.0, 0.5, interval)
        assert out.data_ptr() == s.data_ptr()
        res[dev] = (s.cpu(), t.cpu())
    assert torch.equal(res["kiln"][0], res["cpu"][0]) and torch.equal(res["kiln"][1], res["cpu"][1])


def test_amp_ops_reject_bad_input():
    k = dict(device="kiln")
    with pytest.raises(RuntimeError, match="inv_scale"):
        torch._amp_foreach_non_finite_check_and_unscale_(
            [torch.ones(2, **k)], torch.zeros(1, **k), torch.ones(2, **k))
    with pytest.raises(RuntimeError, match="floating point"):
        torch._amp_foreach_non_finite_check_and_unscale_(
            [torch.ones(2, dtype=torch.int32, **k)], torch.zeros(1, **k), torch.ones(1, **k))
    with pytest.raises(RuntimeError, match="growth_tracker"):
        torch._amp_update_scale_(torch.ones(1, **k), torch.zeros(1, **k), torch.zeros(1, **k),
                                 2.0, 0.5, 2)
