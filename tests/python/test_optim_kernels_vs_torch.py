# SPDX-License-Identifier: Apache-2.0
"""libkiln fused optimizer kernels (include/kiln/kernels/optim.h) vs PyTorch CPU, via ctypes.

The library comes from $KILN_LIB (default: torch_kiln/libkiln.so of this checkout). Parameters, grads
and state are torch CPU tensors passed as kiln_tensor_t descriptors (strides in elements).

References and tolerances:
  - torch._fused_adam_ / _fused_adamw_ (same dtype): f32 / f64 rtol 1e-6 (in practice bitwise),
    f16 / bf16 one unit in the last place of the stored dtype;
  - torch.optim.Adam / AdamW(foreach=False) on f32: rtol 1e-5, atol 1e-7;
  - torch._fused_sgd_ on f32 / f64: rtol 1e-6; bf16 / f16 SGD vs torch.optim.SGD(foreach=False)
    (torch 2.13's fused half SGD skips the update in its vector loop): 2 ulps of the dtype.
KILN_DISABLE_AVX2=1 in the environment selects the generic C path (read once per process).

Run: KILN_LIB=build-rng/libkiln.so .venv/bin/python -m pytest -q --noconftest \
         tests/python/test_optim_kernels_vs_torch.py
"""
import ctypes
import os

import pytest
import torch

LIB_PATH = os.environ.get("KILN_LIB", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "torch_kiln", "libkiln.so"))
MAX_DIMS = 8
DTYPES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float64: 3}
OK, INVALID_ARGUMENT = 0, 1


class KilnTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int32),
                ("shape", ctypes.c_int64 * MAX_DIMS), ("strides", ctypes.c_int64 * MAX_DIMS)]


P = ctypes.POINTER(KilnTensor)
PP = ctypes.POINTER(P)
I, D = ctypes.c_int, ctypes.c_double
PF = ctypes.POINTER(ctypes.c_float)
PD = ctypes.POINTER(ctypes.c_double)


@pytest.fixture(scope="module")
def lib():
    if not os.path.exists(LIB_PATH):
        pytest.fail(f"{LIB_PATH} not built: run `make build` (a missing library is a failure, not a skip)")
    lib = ctypes.CDLL(LIB_PATH)
    lib.kiln_kernel_fused_adamw.argtypes = [I, PP, PP, PP, PP, PP, PD, D, D, D, D, D, I, I, I,
                                            PF, PF]
    lib.kiln_kernel_fused_adamw.restype = I
    lib.kiln_kernel_fused_sgd.argtypes = [I, PP, PP, PP, D, D, D, D, I, I, I, PF, PF]
    lib.kiln_kernel_fused_sgd.restype = I
    lib.kiln_status_message.restype = ctypes.c_char_p
    return lib


def desc(t):
    d = KilnTensor()
    d.data = t.data_ptr()
    d.dtype = DTYPES[t.dtype]
    d.ndim = t.dim()
    for i in range(t.dim()):
        d.shape[i] = t.shape[i]
        d.strides[i] = t.stride(i)
    return d


class DescList:
    """Keeps descriptors alive and exposes a kiln_tensor_t* const* array."""

    def __init__(self, tensors):
        self.descs = [desc(t) for t in tensors]
        self.arr = (P * max(1, len(tensors)))(*[ctypes.pointer(d) for d in self.descs])

    @property
    def ptr(self):
        return ctypes.cast(self.arr, PP)


def fptr(x):
    return None if x is None else (ctypes.c_float * 1)(x)


def check(lib, rc):
    assert rc == OK, lib.kiln_status_message().decode()


def kiln_adam(lib, params, grads, ms, vs, vmaxs, steps, lr, b1, b2, wd, eps, amsgrad, maximize,
              adamw, grad_scale=None, found_inf=None):
    lists = [DescList(x) for x in (params, grads, ms, vs)]
    vm = DescList(vmaxs) if amsgrad else None
    st = (ctypes.c_double * len(steps))(*steps)
    return lib.kiln_kernel_fused_adamw(len(params), *[l.ptr for l in lists],
                                       vm.ptr if vm else None, st, lr, b1, b2, wd, eps,
                                       int(amsgrad), int(maximize), int(adamw),
                                       fptr(grad_scale), fptr(found_inf))


def kiln_sgd(lib, params, grads, bufs, wd, mom, lr, damp, nesterov, maximize, first,
             grad_scale=None, found_inf=None):
    lp, lg = DescList(params), DescList(grads)
    lb = DescList(bufs) if mom != 0 else None
    return lib.kiln_kernel_fused_sgd(len(params), lp.ptr, lg.ptr, lb.ptr if lb else None, wd, mom,
                                     lr, damp, int(nesterov), int(maximize), int(first),
                                     fptr(grad_scale), fptr(found_inf))


def make_views(shape, dtype, gen, strided):
    """A tensor of `shape`, optionally as a transposed (non-contiguous) view."""
    if strided and len(shape) == 2:
        return torch.randn(shape[::-1], generator=gen, dtype=torch.float64).to(dtype).t()
    return torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)


SHAPES = [(1003,), (8,), (33, 7), (20001,), (5,)]  # 20001: several 8192-element chunks


def assert_ulps(a, b, dtype, n_ulp):
    spacing = torch.finfo(dtype).eps * b.double().abs().clamp_min(torch.finfo(dtype).tiny)
    err = (a.double() - b.double()).abs()
    bad = err > n_ulp * spacing + 1e-30
    assert not bad.any(), f"{int(bad.sum())} elements off by more than {n_ulp} ulp; " \
                          f"max err {float(err.max())}"


@pytest.mark.parametrize("adamw", [1, 0])
@pytest.mark.parametrize("amsgrad,maximize,wd", [(False, False, 0.0), (False, False, 0.01),
                                                 (True, False, 0.1), (False, True, 0.05),
                                                 (True, True, 0.0)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_fused_adam_vs_torch_fused(lib, adamw, amsgrad, maximize, wd, dtype):
    gen = torch.Generator().manual_seed(1234)
    lr, b1, b2, eps = 1e-2, 0.9, 0.999, 1e-8
    params = [make_views(s, dtype, gen, i == 2) for i, s in enumerate(SHAPES)]
    ref_p = [p.clone() for p in params]
    ms = [torch.zeros_like(p) for p in params]
    vs = [torch.zeros_like(p) for p in params]
    vmaxs = [torch.zeros_like(p) for p in params]
    ref_m, ref_v, ref_vmax = ([x.clone() for x in l] for l in (ms, vs, vmaxs))
    fused = torch._fused_adamw_ if adamw else torch._fused_adam_
    for step in range(1, 6):
        grads = [torch.randn(p.shape, generator=gen, dtype=torch.float64).to(dtype)
                 for p in params]
        ref_g = [g.clone() for g in grads]
        steps = [float(step)] * len(params)
        check(lib, kiln_adam(lib, params, grads, ms, vs, vmaxs, steps, lr, b1, b2, wd, eps,
                             amsgrad, maximize, adamw))
        # torch's fused kernel indexes data linearly: give it contiguous copies
        cp = [x.contiguous() for x in ref_p]
        cm, cv, cvm = ([x.contiguous() for x in l] for l in (ref_m, ref_v, ref_vmax))
        fused(cp, [g.contiguous() for g in ref_g], cm, cv, cvm if amsgrad else [],
              [torch.tensor(float(step)) for _ in params], lr=lr, beta1=b1, beta2=b2,
              weight_decay=wd, eps=eps, amsgrad=amsgrad, maximize=maximize)
        for dst, src in ((ref_p, cp), (ref_m, cm), (ref_v, cv), (ref_vmax, cvm)):
            for a, b in zip(dst, src):
                a.copy_(b)
        for a, b in zip(params + ms + vs, ref_p + ref_m + ref_v):
            if dtype in (torch.float32, torch.float64):
                torch.testing.assert_close(a, b, rtol=1e-6, atol=0)
            else:
                assert_ulps(a, b, dtype, 1)


@pytest.mark.parametrize("adamw", [1, 0])
@pytest.mark.parametrize("amsgrad,maximize", [(False, False), (True, True)])
def test_fused_adam_vs_torch_optim(lib, adamw, amsgrad, maximize):
    gen = torch.Generator().manual_seed(7)
    lr, betas, wd, eps = 3e-3, (0.8, 0.99), 0.02, 1e-8
    shapes = [(257,), (16, 9), (4,)]
    params = [torch.randn(s, generator=gen) for s in shapes]
    ref = [torch.nn.Parameter(p.clone()) for p in params]
    Opt = torch.optim.AdamW if adamw else torch.optim.Adam
    opt = Opt(ref, lr=lr, betas=betas, weight_decay=wd, eps=eps, amsgrad=amsgrad,
              maximize=maximize, foreach=False)
    ms = [torch.zeros_like(p) for p in params]
    vs = [torch.zeros_like(p) for p in params]
    vmaxs = [torch.zeros_like(p) for p in params]
    for step in range(1, 11):
        grads = [torch.randn(p.shape, generator=gen) for p in params]
        for r, g in zip(ref, grads):
            r.grad = g.clone()
        opt.step()
        check(lib, kiln_adam(lib, params, grads, ms, vs, vmaxs, [float(step)] * 3, lr, betas[0],
                             betas[1], wd, eps, amsgrad, maximize, adamw))
    for p, r in zip(params, ref):
        torch.testing.assert_close(p, r.detach(), rtol=1e-5, atol=1e-7)


def test_fused_adam_grad_scale_found_inf(lib):
    gen = torch.Generator().manual_seed(3)
    p = torch.randn(1000, generator=gen)
    g = torch.randn(1000, generator=gen) * 1024
    m, v = torch.zeros_like(p), torch.zeros_like(p)
    rp, rg, rm, rv = p.clone(), g.clone(), m.clone(), v.clone()
    # found_inf == 1: nothing changes
    check(lib, kiln_adam(lib, [p], [g], [m], [v], [], [1.0], 1e-3, 0.9, 0.999, 0.01, 1e-8,
                         False, False, 1, grad_scale=1024.0, found_inf=1.0))
    assert torch.equal(p, rp) and torch.equal(g, rg)
    check(lib, kiln_adam(lib, [p], [g], [m], [v], [], [1.0], 1e-3, 0.9, 0.999, 0.01, 1e-8,
                         False, False, 1, grad_scale=1024.0, found_inf=0.0))
    torch._fused_adamw_([rp], [rg], [rm], [rv], [], [torch.tensor(1.0)], lr=1e-3, beta1=0.9,
                        beta2=0.999, weight_decay=0.01, eps=1e-8, amsgrad=False, maximize=False,
                        grad_scale=torch.tensor(1024.0), found_inf=torch.tensor(0.0))
    for a, b in ((p, rp), (g, rg), (m, rm), (v, rv)):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=0)


def test_fused_adam_errors(lib):
    p = torch.zeros(4)
    g, m, v = torch.zeros(4), torch.zeros(4), torch.zeros(5)
    assert kiln_adam(lib, [p], [g], [m], [v], [], [1.0], 1e-3, 0.9, 0.999, 0.0, 1e-8, False,
                     False, 1) == INVALID_ARGUMENT
    assert b"exp_avg_sqs[0]" in lib.kiln_status_message()
    v = torch.zeros(4, dtype=torch.float64)
    assert kiln_adam(lib, [p], [g], [m], [v], [], [1.0], 1e-3, 0.9, 0.999, 0.0, 1e-8, False,
                     False, 1) == INVALID_ARGUMENT
    v = torch.zeros(4)
    assert kiln_adam(lib, [p], [g], [m], [v], [], [1.0], 1e-3, 1.0, 0.999, 0.0, 1e-8, False,
                     False, 1) == INVALID_ARGUMENT
    assert kiln_adam(lib, [p], [g], [m], [v], [], [1.0], 1e-3, 0.9, 0.999, 0.0, 1e-8, True,
                     False, 1) == INVALID_ARGUMENT  # amsgrad without max_exp_avg_sqs


@pytest.mark.parametrize("mom,damp,nesterov,wd,maximize", [(0.0, 0.0, False, 0.0, False),
                                                           (0.9, 0.0, False, 0.01, False),
                                                           (0.9, 0.0, True, 0.01, True),
                                                           (0.5, 0.3, False, 0.0, False)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fused_sgd_vs_torch_fused(lib, mom, damp, nesterov, wd, maximize, dtype):
    gen = torch.Generator().manual_seed(11)
    lr = 0.05
    params = [make_views(s, dtype, gen, i == 2) for i, s in enumerate(SHAPES)]
    bufs = [torch.zeros_like(p) for p in params]
    ref_p = [p.contiguous().clone() for p in params]
    ref_b = [torch.zeros(p.shape, dtype=dtype) for p in params]  # dense, as torch's kernel needs
    for step in range(4):
        grads = [torch.randn(p.shape, generator=gen, dtype=dtype) for p in params]
        ref_g = [g.contiguous().clone() for g in grads]
        check(lib, kiln_sgd(lib, params, grads, bufs, wd, mom, lr, damp, nesterov, maximize,
                            step == 0))
        torch._fused_sgd_(ref_p, ref_g, ref_b if mom != 0 else [], weight_decay=wd, momentum=mom,
                          lr=lr, dampening=damp, nesterov=nesterov, maximize=maximize,
                          is_first_step=step == 0)
        for a, b in zip(params + bufs, ref_p + ref_b):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fused_sgd_half_vs_torch_optim(lib, dtype):
    gen = torch.Generator().manual_seed(5)
    lr, mom, wd = 0.1, 0.9, 0.01
    shapes = [(300,), (7, 5)]
    params = [torch.randn(s, generator=gen).to(dtype) for s in shapes]
    ref = [torch.nn.Parameter(p.clone()) for p in params]
    opt = torch.optim.SGD(ref, lr=lr, momentum=mom, weight_decay=wd, foreach=False)
    bufs = [torch.zeros_like(p) for p in params]
    grads = [torch.randn(p.shape, generator=gen).to(dtype) for p in params]
    for r, g in zip(ref, grads):
        r.grad = g.clone()
    opt.step()
    # f32 math from the same inputs, rounded once (what the kernel computes)
    want = [(p.float() - lr * (g.float() + wd * p.float())).to(dtype) for p, g in zip(params, grads)]
    check(lib, kiln_sgd(lib, params, grads, bufs, wd, mom, lr, 0.0, False, False, True))
    for p, w, r in zip(params, want, ref):
        assert_ulps(p, w, dtype, 1)
        # torch.optim rounds each intermediate to the half dtype: a few ulps apart
        torch.testing.assert_close(p, r.detach(), rtol=1.6e-2, atol=1e-3)
