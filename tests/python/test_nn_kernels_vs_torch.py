# SPDX-License-Identifier: Apache-2.0
"""libkiln nn kernels (include/kiln/kernels/nn.h) vs PyTorch CPU, through ctypes.

The library comes from $KILN_LIB (default: torch_kiln/libkiln.so of this checkout). Tensors are passed
as kiln_tensor_t descriptors over torch CPU storage (strides in elements, data_ptr already
offset), so non-contiguous views are exercised without copies.

Tolerances (torch.testing.assert_close atol / rtol): f32 1e-5 / 1.3e-5 for forwards, 1e-4 / 1e-4
for attention gradients; f16 1e-3 / 2e-3 (gradients 4x); bf16 8e-3 / 1.6e-2 (gradients 4x);
f64 1e-10 / 1e-10. References are torch's own ATen ops (softmax, native_layer_norm,
_fused_rms_norm, embedding_dense_backward, nll_loss*, _scaled_dot_product_flash_attention_for_cpu)
or, for attention, the f64 math path.

Run: KILN_LIB=build-nn/libkiln.so .venv/bin/python -m pytest -q tests/python/test_nn_kernels_vs_torch.py
(add TORCH_DEVICE_BACKEND_AUTOLOAD=0 and --noconftest while the torch_kiln package does not
import). KILN_BENCH=1 also prints a timing.
"""
import ctypes
import math
import os
import time

import pytest
import torch
import torch.nn.functional as F

LIB_PATH = os.environ.get("KILN_LIB", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "torch_kiln", "libkiln.so"))
MAX_DIMS = 8
DTYPES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float64: 3, torch.int8: 4,
          torch.int16: 5, torch.int32: 6, torch.int64: 7, torch.uint8: 8, torch.bool: 9}
OK, INVALID_ARGUMENT, OUT_OF_RANGE = 0, 1, 8


class KilnTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int32),
                ("shape", ctypes.c_int64 * MAX_DIMS), ("strides", ctypes.c_int64 * MAX_DIMS)]


P = ctypes.POINTER(KilnTensor)
I, D, L = ctypes.c_int, ctypes.c_double, ctypes.c_int64


def load_lib(path=LIB_PATH):
    """Opens libkiln and declares the nn entry points."""
    lib = ctypes.CDLL(path)
    sigs = {
        "kiln_kernel_softmax": [P, I, I, P],
        "kiln_kernel_softmax_backward": [P, P, I, I, P],
        "kiln_kernel_layer_norm": [P, I, P, P, D, P, P, P],
        "kiln_kernel_layer_norm_backward": [P, P, P, P, P, I, P, P, P],
        "kiln_kernel_rms_norm": [P, I, P, D, P, P],
        "kiln_kernel_rms_norm_backward": [P, P, P, P, I, P, P],
        "kiln_kernel_sdpa": [P, P, P, P, I, D, P, P],
        "kiln_kernel_sdpa_backward": [P, P, P, P, P, P, P, I, D, P, P, P],
        "kiln_kernel_nll_loss": [P, P, P, I, L, P, P],
        "kiln_kernel_nll_loss_backward": [P, P, P, P, I, L, P, P],
        "kiln_kernel_embedding": [P, P, P],
        "kiln_kernel_embedding_backward_ex": [P, P, L, L, I, P],
    }
    for name, args in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = ctypes.c_int
    lib.kiln_status_message.restype = ctypes.c_char_p
    return lib


@pytest.fixture(scope="module")
def lib():
    if not os.path.exists(LIB_PATH):
        pytest.fail(f"{LIB_PATH} not built: run `make build` (a missing library is a failure, not a skip)")
    return load_lib()


def desc(t):
    """A borrowed descriptor of CPU tensor t (None -> NULL). Keep t alive during the call."""
    if t is None:
        return None
    d = KilnTensor()
    d.data = t.data_ptr() if t.numel() else None
    d.dtype = DTYPES[t.dtype]
    d.ndim = t.dim()
    for i, (s, st) in enumerate(zip(t.shape, t.stride())):
        d.shape[i] = s
        d.strides[i] = st
    return ctypes.pointer(d)


def call(lib, name, *args, expect=OK):
    conv = [desc(a) if (a is None or isinstance(a, torch.Tensor)) else a for a in args]
    rc = getattr(lib, name)(*conv)
    msg = lib.kiln_status_message().decode()
    assert rc == expect, f"{name} -> {rc} ({msg})"
    return msg


def tol(dtype, grad=False):
    t = {torch.float32: (1e-5, 1.3e-5), torch.float16: (1e-3, 2e-3),
         torch.bfloat16: (8e-3, 1.6e-2), torch.float64: (1e-10, 1e-10)}[dtype]
    if grad:
        t = (1e-4, 1e-4) if dtype == torch.float32 else (t[0] * 4, t[1] * 4)
    return dict(atol=t[0], rtol=t[1])


def noncontig(t):
    """The same values in a transposed storage (last two dims swapped in memory)."""
    if t.dim() < 2:
        return t
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)


FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


# ---- softmax ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,dim", [((4, 1000), -1), ((3, 5, 7), 1), ((2, 3, 4, 5), 0),
                                       ((6, 1), 1), ((0, 4), 1), ((), 0)])
def test_softmax(lib, dtype, shape, dim):
    torch.manual_seed(0)
    x = (torch.randn(shape) * 3).to(dtype)
    g = torch.randn(shape).to(dtype)
    for log in (0, 1):
        for xin in (x, noncontig(x)):
            out = torch.empty_like(x)
            call(lib, "kiln_kernel_softmax", xin, dim, log, out)
            ref = (torch._log_softmax if log else torch._softmax)(x, dim, False)
            torch.testing.assert_close(out, ref, **tol(dtype))
        gi = noncontig(torch.zeros_like(x))
        call(lib, "kiln_kernel_softmax_backward", g, ref, dim, log, gi)
        bw = torch._log_softmax_backward_data if log else torch._softmax_backward_data
        torch.testing.assert_close(gi, bw(g, ref, dim, dtype), **tol(dtype, grad=True))


def test_softmax_half_to_float_and_special(lib):
    x = torch.randn(5, 33).half()
    out = torch.empty(5, 33)
    call(lib, "kiln_kernel_softmax", x, 1, 0, out)
    torch.testing.assert_close(out, torch.softmax(x.float(), 1), atol=1e-6, rtol=1e-5)
    x = torch.tensor([[-math.inf] * 4, [1.0, math.inf, 2.0, 3.0], [0.0, 1.0, math.nan, 2.0]])
    for log in (0, 1):
        out = torch.empty_like(x)
        call(lib, "kiln_kernel_softmax", x, 1, log, out)
        ref = torch.log_softmax(x, 1) if log else torch.softmax(x, 1)
        torch.testing.assert_close(out, ref, equal_nan=True)
    msg = call(lib, "kiln_kernel_softmax", torch.randn(2, 3), 0, 0, torch.empty(3, 2),
               expect=INVALID_ARGUMENT)
    assert "[2, 3]" in msg and "[3, 2]" in msg


# ---- layer norm / rms norm -------------------------------------------------------------------

NORM_CASES = [((7, 33), 1), ((2, 3, 4, 5), 2), ((260, 40), 1), ((4, 1), 1), ((0, 8), 1)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,nd", NORM_CASES)
@pytest.mark.parametrize("affine", ["wb", "none", "mixed"])
def test_layer_norm(lib, dtype, shape, nd, affine):
    if affine == "mixed" and dtype in (torch.float32, torch.float64):
        pytest.skip("mixed = half input with f32 parameters")
    torch.manual_seed(1)
    x = (torch.randn(shape) * 2 + 0.5).to(dtype)
    ns = list(shape[-nd:])
    pdt = torch.float32 if affine == "mixed" else dtype
    w = torch.randn(ns).to(pdt) if affine != "none" else None
    b = torch.randn(ns).to(pdt) if affine in ("wb", "mixed") else None
    out_r, mean_r, rstd_r = torch.native_layer_norm(x, ns, w, b, 1e-5)
    out = torch.empty_like(x)
    mean, rstd = torch.empty_like(mean_r), torch.empty_like(rstd_r)
    call(lib, "kiln_kernel_layer_norm", noncontig(x), nd, w, b, 1e-5, out, mean, rstd)
    torch.testing.assert_close(out, out_r, **tol(dtype))
    torch.testing.assert_close(mean, mean_r, **tol(mean_r.dtype))
    torch.testing.assert_close(rstd, rstd_r, **tol(rstd_r.dtype))
    g = torch.randn(shape).to(dtype)
    mask = [True, w is not None, b is not None]
    gx_r, gw_r, gb_r = torch.ops.aten.native_layer_norm_backward(g, x, ns, mean_r, rstd_r, w, b,
                                                                   mask)
    gx = torch.empty_like(x)
    gw = torch.empty_like(w) if w is not None else None
    gb = torch.empty_like(b) if b is not None else None
    call(lib, "kiln_kernel_layer_norm_backward", g, x, mean_r, rstd_r, w, nd, gx, gw, gb)
    m = max(1, x.numel() // max(1, math.prod(ns)))
    torch.testing.assert_close(gx, gx_r, **tol(dtype, grad=True))
    if w is not None and x.numel():
        # torch sums half-precision parameter gradients in reduced precision; ours are summed in
        # f32/f64 and rounded once, so compare both against f64 sums.
        xh = (x.double() - mean_r.double()) * rstd_r.double()
        red = tuple(range(x.dim() - nd))
        gw_d, gb_d = (g.double() * xh).sum(red), g.double().sum(red)
        t = tol(pdt, grad=True)
        t["atol"] *= math.sqrt(m)
        torch.testing.assert_close(gw.double(), gw_d, **t)
        if b is not None:
            torch.testing.assert_close(gb.double(), gb_d, **t)
        if dtype in (torch.float32, torch.float64):
            torch.testing.assert_close(gw, gw_r, **t)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,nd", NORM_CASES)
@pytest.mark.parametrize("weight,eps", [(True, None), (False, 1e-6)])
def test_rms_norm(lib, dtype, shape, nd, weight, eps):
    torch.manual_seed(2)
    x = (torch.randn(shape) * 2).to(dtype)
    ns = list(shape[-nd:])
    w = torch.randn(ns).to(dtype) if weight else None
    out_r, rstd_r = torch.ops.aten._fused_rms_norm(x, ns, w, eps)
    torch.testing.assert_close(out_r, F.rms_norm(x, ns, w, eps))
    out, rstd = torch.empty_like(out_r), torch.empty_like(rstd_r)
    call(lib, "kiln_kernel_rms_norm", noncontig(x), nd, w, -1.0 if eps is None else eps, out, rstd)
    torch.testing.assert_close(out, out_r, **tol(dtype))
    torch.testing.assert_close(rstd, rstd_r, **tol(rstd_r.dtype))
    g = torch.randn(shape).to(dtype)
    # _fused_rms_norm_backward has no CPU kernel: autograd through the f64 composite instead.
    e = eps if eps is not None else torch.finfo(torch.float64 if dtype == torch.float64
                                                else torch.float32).eps
    xd = x.double().requires_grad_()
    wd = w.double().requires_grad_() if weight else None
    F.rms_norm(xd, ns, wd, e).backward(g.double())
    gx_r, gw_r = xd.grad.to(dtype), wd.grad.to(dtype) if weight else None
    gx = torch.empty_like(x)
    gw = torch.empty_like(w) if weight else None
    call(lib, "kiln_kernel_rms_norm_backward", g, x, rstd_r, w, nd, gx, gw)
    torch.testing.assert_close(gx, gx_r, **tol(dtype, grad=True))
    if weight and x.numel():
        t = tol(dtype, grad=True)
        t["atol"] *= math.sqrt(max(1, x.numel() // max(1, math.prod(ns))))
        torch.testing.assert_close(gw, gw_r, **t)


# ---- embedding -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
@pytest.mark.parametrize("idx_dtype", [torch.int64, torch.int32])
def test_embedding(lib, dtype, idx_dtype):
    torch.manual_seed(3)
    w = (torch.randn(50, 17) * 10).to(dtype)
    idx = torch.randint(0, 50, (3, 9), dtype=idx_dtype)
    for wv in (w, noncontig(w)):
        out = torch.empty(3, 9, 17, dtype=dtype)
        call(lib, "kiln_kernel_embedding", wv, idx, out)
        assert torch.equal(out, F.embedding(idx, w))
    bad = idx.clone()
    bad[1, 2] = 50
    call(lib, "kiln_kernel_embedding", w, bad, out, expect=OUT_OF_RANGE)
    bad[1, 2] = -1
    call(lib, "kiln_kernel_embedding", w, bad, out, expect=OUT_OF_RANGE)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n,V,Dm", [(12, 10, 7), (3000, 64, 16), (300, 1000, 5)])
@pytest.mark.parametrize("padding_idx,freq", [(-1, 0), (3, 0), (-1, 1)])
def test_embedding_backward(lib, dtype, n, V, Dm, padding_idx, freq):
    torch.manual_seed(4)
    idx = torch.randint(0, V, (n,))
    g = torch.randn(n, Dm).to(dtype)
    ref = torch.ops.aten.embedding_dense_backward(g, idx, V, padding_idx, bool(freq))
    # torch accumulates half gradients in half; the f64 sum is the reference for those.
    ref_d = torch.ops.aten.embedding_dense_backward(g.double(), idx, V, padding_idx, bool(freq))
    gw = torch.full((V, Dm), 7.0, dtype=dtype)
    call(lib, "kiln_kernel_embedding_backward_ex", noncontig(g), idx.view(n), V, padding_idx, freq,
         gw)
    t = tol(dtype, grad=True)
    t["atol"] *= math.sqrt(n / V + 1)
    torch.testing.assert_close(gw.double(), ref_d, **t)
    if dtype in (torch.float32, torch.float64):
        torch.testing.assert_close(gw, ref, **t)
    if dtype == torch.float32 and not freq:  # f32: the same sum order as a sequential index_add
        seq = torch.zeros(V, Dm)
        for i in range(n) if n <= 300 else []:
            if idx[i] != padding_idx:
                seq[idx[i]] += g[i]
        if n <= 300:
            assert torch.equal(gw, seq)


# ---- nll loss --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(6, 5), (5,), (2, 3, 4, 5), (9000, 3), (0, 4)])
@pytest.mark.parametrize("weighted,ignore", [(True, -100), (False, 2)])
def test_nll_loss(lib, dtype, shape, weighted, ignore):
    for reduction in (0, 1, 2):
        nll_case(lib, dtype, shape, reduction, weighted, ignore)


def nll_case(lib, dtype, shape, reduction, weighted, ignore):
    torch.manual_seed(5)
    C = shape[0] if len(shape) == 1 else shape[1]
    lp = torch.randn(shape).log_softmax(0 if len(shape) == 1 else 1).to(dtype)
    tshape = () if len(shape) == 1 else (shape[0],) + tuple(shape[2:])
    tgt = torch.randint(0, C, tshape)
    if tgt.numel() > 1:
        tgt.view(-1)[::4] = ignore
    w = (torch.rand(C) + 0.2).to(dtype) if weighted else None
    fwd = torch.ops.aten.nll_loss_forward if len(shape) <= 2 else torch.ops.aten.nll_loss2d_forward
    out_r, tw_r = fwd(lp, tgt, w, reduction, ignore)
    # Sums: torch accumulates f32 in f32 and halves in half (badly, for 15000 terms); kiln sums in
    # double and rounds once, so the f64 result is the reference.
    out_d, tw_d = fwd(lp.double(), tgt, None if w is None else w.double(), reduction, ignore)
    out, tw = torch.empty_like(out_r), torch.empty_like(tw_r)
    call(lib, "kiln_kernel_nll_loss", noncontig(lp), tgt, w, reduction, ignore, out, tw)
    t = tol(dtype)
    torch.testing.assert_close(out, out_d.to(dtype), equal_nan=True, **t)
    torch.testing.assert_close(tw, tw_d.to(dtype), **t)
    if dtype == torch.float32 and reduction == 0:
        torch.testing.assert_close(out, out_r, **t)
    go = torch.randn(out_r.shape).to(dtype)
    if len(shape) <= 2:
        gi_r = torch.ops.aten.nll_loss_backward(go, lp, tgt, w, reduction, ignore, tw_r)
    else:
        gi_r = torch.ops.aten.nll_loss2d_backward(go, lp, tgt, w, reduction, ignore, tw_r)
    gi = noncontig(torch.full_like(lp, 3.0))
    call(lib, "kiln_kernel_nll_loss_backward", go, lp, tgt, w, reduction, ignore, tw_r, gi)
    torch.testing.assert_close(gi, gi_r, equal_nan=True, **tol(dtype))


def test_nll_loss_target_out_of_range(lib):
    lp = torch.randn(3, 4).log_softmax(1)
    out, tw = torch.empty(()), torch.empty(())
    call(lib, "kiln_kernel_nll_loss", lp, torch.tensor([0, 4, 1]), None, 1, -100, out, tw,
         expect=OUT_OF_RANGE)
    with pytest.raises(Exception, match="out of bounds"):
        torch.ops.aten.nll_loss_forward(lp, torch.tensor([0, 4, 1]), None, 1, -100)


# ---- attention -------------------------------------------------------------------------------

def sdpa_ref(q, k, v, mask, causal, scale):
    """f64 math reference: (out, logsumexp) with torch's fully-masked-row convention (0, 0)."""
    q, k, v = q.double(), k.double(), v.double()
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = q @ k.transpose(-1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else s + mask.double()
    if causal:
        L, S = s.shape[-2:]
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), -math.inf)
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
    return p @ v, lse.masked_fill(lse == -math.inf, 0.0)


SDPA_CASES = [  # B, H, Hk, L, S, E, Ev, causal, mask
    (2, 3, 3, 67, 67, 16, 16, False, None),
    (2, 3, 3, 67, 67, 16, 24, True, None),
    (1, 2, 2, 130, 130, 64, 64, True, None),
    (1, 2, 2, 5, 130, 8, 8, True, None),
    (1, 2, 2, 130, 7, 8, 8, True, None),
    (2, 2, 2, 1, 1, 4, 4, False, None),
    (1, 1, 1, 1, 70, 32, 8, False, "bool"),
    (0, 2, 2, 8, 8, 4, 4, False, None),
    (2, 2, 2, 40, 70, 16, 16, False, "bool"),
    (2, 2, 2, 70, 40, 16, 16, False, "float"),
    (2, 2, 2, 70, 70, 16, 16, True, "bool"),
    (1, 4, 2, 67, 67, 16, 16, True, None),
    (1, 4, 1, 33, 20, 8, 8, False, "float"),
]


def make_mask(kind, B, L, S):
    if kind == "bool":
        m = torch.rand(L, S) < 0.7
        m[0] = False  # a fully masked row
        return m
    if kind == "float":
        return torch.randn(B, 1, L, S)
    return None


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", SDPA_CASES)
def test_sdpa_forward_backward(lib, dtype, case):
    B, H, Hk, Lq, S, E, Ev, causal, mkind = case
    if dtype != torch.float32 and (H != Hk or Lq * S > 70 * 70 or B == 0):
        pytest.skip("half/f64 on a subset")
    torch.manual_seed(6)
    # q / out / grad_q as [B, L, H, E].transpose(1, 2), like a projection output.
    q = torch.randn(B, Lq, H, E).to(dtype).transpose(1, 2)
    k = torch.randn(B, Hk, S, E).to(dtype)
    v = torch.randn(B, Hk, S, Ev).to(dtype)
    mask = make_mask(mkind, B, Lq, S)
    if mask is not None and mask.dtype != torch.bool:
        mask = mask.to(dtype)
    out = torch.empty(B, Lq, H, Ev, dtype=dtype).transpose(1, 2)
    lse = torch.empty(B, H, Lq, dtype=torch.float64 if dtype == torch.float64 else torch.float32)
    scale = 0.3 if Lq == 1 else None
    call(lib, "kiln_kernel_sdpa", q, k, v, mask, int(causal), math.nan if scale is None else scale,
         out, lse)
    out_r, lse_r = sdpa_ref(q, k, v, mask, causal, scale)
    t = tol(dtype)
    torch.testing.assert_close(out.double(), out_r, atol=2 * t["atol"], rtol=2 * t["rtol"])
    torch.testing.assert_close(lse.double(), lse_r, atol=max(1e-5, t["atol"]), rtol=t["rtol"])
    if dtype != torch.float64 and H == Hk and E == Ev and B > 0 and S > 0:
        o2, l2 = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, is_causal=causal, scale=scale,
            attn_mask=None if mask is None else (
                torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, -math.inf)
                if mask.dtype == torch.bool else mask))
        torch.testing.assert_close(out, o2, atol=4 * t["atol"], rtol=4 * t["rtol"])
        torch.testing.assert_close(lse, l2, atol=max(1e-5, t["atol"]), rtol=t["rtol"])
    # backward against autograd through the f64 math reference
    go = torch.randn(B, H, Lq, Ev).to(dtype)
    qd, kd, vd = (x.detach().double().requires_grad_() for x in (q, k, v))
    o_d, _ = sdpa_ref(qd, kd, vd, mask, causal, scale)
    o_d.backward(go.double())
    gq = torch.empty(B, Lq, H, E, dtype=dtype).transpose(1, 2)
    gk, gv = torch.full_like(k, 5.0), torch.full_like(v, 5.0)
    call(lib, "kiln_kernel_sdpa_backward", go, q, k, v, out, lse, mask, int(causal),
         math.nan if scale is None else scale, gq, gk, gv)
    for got, want in ((gq, qd.grad), (gk, kd.grad), (gv, vd.grad)):
        t = tol(dtype, grad=True)
        scale_ = 1 + want.abs().max().item() if want.numel() else 1
        torch.testing.assert_close(got.double(), want.nan_to_num(0.0), atol=t["atol"] * scale_,
                                   rtol=t["rtol"])


def test_sdpa_matches_torch_sdpa_fully_masked_row(lib):
    torch.manual_seed(7)
    q, k, v = torch.randn(1, 2, 3, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    m = torch.ones(3, 5, dtype=torch.bool)
    m[1] = False
    out, lse = torch.empty(1, 2, 3, 8), torch.empty(1, 2, 3)
    call(lib, "kiln_kernel_sdpa", q, k, v, m, 0, math.nan, out, lse)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=m))
    assert torch.all(out[:, :, 1] == 0) and torch.all(lse[:, :, 1] == 0)
    msg = call(lib, "kiln_kernel_sdpa", q, k[..., :7], v, None, 0, math.nan, out, None,
               expect=INVALID_ARGUMENT)
    assert "[1, 2, 5, 7]" in msg


@pytest.mark.skipif(not os.environ.get("KILN_BENCH"), reason="set KILN_BENCH=1 to time")
def test_sdpa_timing(lib):
    torch.manual_seed(8)
    q, k, v = (torch.randn(1, 8, 1024, 64) for _ in range(3))
    out, lse = torch.empty_like(q), torch.empty(1, 8, 1024)

    def best(fn, n=5):
        fn()
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return min(ts) * 1e3

    tk = best(lambda: call(lib, "kiln_kernel_sdpa", q, k, v, None, 1, math.nan, out, lse))
    tt = best(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    go = torch.randn_like(q)
    gq, gk, gv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    tkb = best(lambda: call(lib, "kiln_kernel_sdpa_backward", go, q, k, v, out, lse, None, 1,
                            math.nan, gq, gk, gv))
    o2, l2 = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, is_causal=True)
    ttb = best(lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
        go, q, k, v, o2, l2, 0.0, True))
    print(f"\nsdpa B=1 H=8 L=S=1024 E=64 f32 causal, torch threads={torch.get_num_threads()}, "
          f"KILN_NUM_THREADS={os.environ.get('KILN_NUM_THREADS', 'all')}: "
          f"fwd kiln {tk:.2f} ms torch {tt:.2f} ms; bwd kiln {tkb:.2f} ms torch {ttb:.2f} ms")
