# SPDX-License-Identifier: Apache-2.0
"""torch._foreach_* on kiln (torch_kiln/csrc/ops_foreach.cpp -> kiln_kernel_foreach_*) vs PyTorch CPU.

Every overload kiln registers runs in place and out of place on the same lists as on CPU: mixed shapes
(incl. 0-size and 0-dim entries) and a non-contiguous (transposed) entry, for f32 / f64 / f16 / bf16.
Tolerance: f32 / f64 rtol 1.3e-6 / 1e-7 (torch.testing defaults; each entry is the eager kiln kernel,
itself tested against torch), f16 / bf16 the dtype's default. Lists kiln does not take natively (integers,
partial overlap, complex scalars) must still be right through ATen's per-tensor loop, and malformed
lists raise torch's errors. The default (foreach) AdamW / SGD run on kiln match CPU over several steps.
"""
import pytest
import torch

import torch_kiln  # noqa: F401

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
SHAPES = [(5, 7), (0, 3), (), (33,), (4, 3, 2)]


def make_lists(dtype, n_lists, seed=0, positive=False):
    g = torch.Generator().manual_seed(seed)
    lists = []
    for k in range(n_lists):
        ts = []
        for s in SHAPES:
            t = torch.randn(s, generator=g, dtype=torch.float64)
            if positive:
                t = t.abs() + 0.5
            ts.append(t.to(dtype))
        # a transposed (non-contiguous) entry of the same shape in every list
        t = torch.randn(6, 4, generator=g, dtype=torch.float64)
        ts.append((t.abs() + 0.5 if positive else t).to(dtype).t())
        lists.append(ts)
    return lists


def to_kiln(ts):
    out = []
    for t in ts:
        k = t.to("kiln")
        if not t.is_contiguous() and t.dim() == 2:  # keep the layout: transpose of a contiguous kiln tensor
            k = t.t().contiguous().to("kiln").t()
        out.append(k)
    return out


def check(got, want, dtype):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.device.type == "kiln" and a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a.cpu(), b)


# (op name, number of tensor lists, extra args builder, positive inputs?)
CASES = [
    ("_foreach_add", 1, lambda n: (0.75,), False),
    ("_foreach_add", 1, lambda n: ([0.5 + i for i in range(n)],), False),
    ("_foreach_add", 2, lambda n: (), False),
    ("_foreach_sub", 1, lambda n: (1.25,), False),
    ("_foreach_sub", 1, lambda n: ([float(i) for i in range(n)],), False),
    ("_foreach_sub", 2, lambda n: (), False),
    ("_foreach_mul", 1, lambda n: (-1.5,), False),
    ("_foreach_mul", 1, lambda n: ([0.25 * i for i in range(n)],), False),
    ("_foreach_mul", 2, lambda n: (), False),
    ("_foreach_div", 1, lambda n: (3.0,), False),
    ("_foreach_div", 1, lambda n: ([1.0 + i for i in range(n)],), False),
    ("_foreach_div", 2, lambda n: (), True),
    ("_foreach_lerp", 2, lambda n: (0.3,), False),
    ("_foreach_lerp", 2, lambda n: (0.8,), False),
    ("_foreach_lerp", 2, lambda n: ([0.1 * i for i in range(n)],), False),
    ("_foreach_addcmul", 3, lambda n: (0.5,), False),
    ("_foreach_addcmul", 3, lambda n: ([0.5 * i for i in range(n)],), False),
    ("_foreach_addcdiv", 3, lambda n: (-0.7,), True),
    ("_foreach_addcdiv", 3, lambda n: ([0.3 * i - 1 for i in range(n)],), True),
    ("_foreach_sqrt", 1, lambda n: (), True),
]


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}lists-{type(c[2](1)[0]).__name__ if c[2](1) else ''}")
def test_foreach_matches_cpu(case, inplace, dtype):
    name, n_lists, extra, positive = case
    lists = make_lists(dtype, n_lists, positive=positive)
    n = len(lists[0])
    args = extra(n)
    fn = getattr(torch, name + ("_" if inplace else ""))
    cpu = [[t.clone() for t in ts] for ts in lists]
    kil = [to_kiln(ts) for ts in lists]
    r_cpu = fn(*cpu, *args)
    r_kil = fn(*kil, *args)
    if inplace:
        check(kil[0], cpu[0], dtype)
    else:
        check(r_kil, r_cpu, dtype)
        check(kil[0], lists[0], dtype)  # inputs untouched
    for k in range(1, n_lists):
        check(kil[k], cpu[k], dtype)


def test_foreach_lerp_tensor_weights():
    a, b, w = make_lists(torch.float32, 3)
    want = torch._foreach_lerp(a, b, w)
    got = torch._foreach_lerp(to_kiln(a), to_kiln(b), to_kiln(w))
    check(got, want, torch.float32)
    ka = to_kiln(a)
    torch._foreach_lerp_(ka, to_kiln(b), to_kiln(w))
    check(ka, want, torch.float32)


def test_foreach_runs_one_native_call_per_list():
    # the native path: no per-tensor aten::mul_ dispatches under _foreach_mul_
    ts = [torch.randn(8, 8).to("kiln") for _ in range(5)]
    with torch.profiler.profile() as prof:
        torch._foreach_mul_(ts, 2.0)
    names = [e.name for e in prof.events()]
    assert "aten::_foreach_mul_" in names and "aten::mul_" not in names


def test_foreach_integer_and_overlap_fall_back_correctly():
    a = [torch.arange(6, dtype=torch.int64).reshape(2, 3), torch.arange(4, dtype=torch.int64)]
    ka = [t.to("kiln") for t in a]
    torch._foreach_add_(ka, 3)
    torch._foreach_add_(a, 3)
    for x, y in zip(ka, a):
        assert torch.equal(x.cpu(), y)
    out = torch._foreach_div([t.to("kiln") for t in a], 2)  # int / int -> float
    for x, y in zip(out, torch._foreach_div(a, 2)):
        assert x.dtype == y.dtype
        torch.testing.assert_close(x.cpu(), y)
    # mixed dtypes across lists -> per-tensor path with promotion
    f = [torch.randn(2, 3), torch.randn(4)]
    got = torch._foreach_mul([t.to("kiln") for t in f], [t.to("kiln") for t in a])
    for x, y in zip(got, torch._foreach_mul(f, a)):
        torch.testing.assert_close(x.cpu(), y)
    # a complex scalar on a float list: promotes (per-tensor path), like CPU
    got = torch._foreach_mul([t.to("kiln") for t in f], 1j)
    want = torch._foreach_mul(f, 1j)
    assert got[0].dtype == want[0].dtype
    # partial overlap between a written entry and an operand: torch's per-tensor error, on both devices
    for dev in ("cpu", "kiln"):
        base = torch.randn(10).to(dev)
        with pytest.raises(RuntimeError, match="single memory location"):
            torch._foreach_add_([base[0:6]], [base[3:9]])


def test_foreach_errors_match_torch():
    a = [torch.randn(3).to("kiln"), torch.randn(2).to("kiln")]
    with pytest.raises(RuntimeError, match="must have at least one tensor|non-empty"):
        torch._foreach_add_([], 1.0)
    with pytest.raises(RuntimeError):
        torch._foreach_add_(a, [torch.randn(3).to("kiln")])  # length mismatch
    with pytest.raises(RuntimeError):
        torch._foreach_mul_(a, [1.0])  # scalar list length mismatch
    with pytest.raises(RuntimeError):
        torch._foreach_add_(a, [torch.randn(3).to("kiln"), torch.randn(5).to("kiln")])  # shape mismatch
    # nothing was modified by the failing calls above (they are rejected before any write)
    assert a[0].shape == (3,) and a[1].shape == (2,)


@pytest.mark.parametrize("opt_name,kw", [("AdamW", dict(lr=1e-2, weight_decay=0.1)),
                                         ("Adam", dict(lr=1e-2, amsgrad=True)),
                                         ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3))])
def test_default_foreach_optimizer_matches_cpu(opt_name, kw):
    torch.manual_seed(0)
    params = [torch.randn(17, 5), torch.randn(5), torch.randn(3, 4, 2)]
    grads = [[torch.randn_like(p) for p in params] for _ in range(4)]
    results = {}
    for dev in ("cpu", "kiln"):
        ps = [p.clone().to(dev).requires_grad_() for p in params]
        opt = getattr(torch.optim, opt_name)(ps, **kw)  # foreach=None: the kiln default is foreach
        for step in grads:
            for p, g in zip(ps, step):
                p.grad = g.to(dev)
            opt.step()
        results[dev] = [p.detach().cpu() for p in ps]
    for a, b in zip(results["kiln"], results["cpu"]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
