# SPDX-License-Identifier: Apache-2.0
"""libkiln CNN kernels (include/kiln/kernels/conv.h) vs PyTorch CPU, through ctypes.

The library comes from $KILN_LIB (default: torch_kiln/libkiln.so of this checkout). Tensors are passed
as kiln_tensor_t descriptors over torch CPU storage (strides in elements, data_ptr already
offset), so channels-last and sliced views are exercised without copies.

Tolerances (assert_close atol / rtol): conv f32 1e-4 / 1e-4 (gradients 3e-4), f16 / bf16 vs the
f32 result rounded (2e-3 / 8e-3 and 1.6e-2 / 3e-2), f64 1e-10; pooling and batch norm f32 1e-5 /
1.3e-5 (batch norm gradients 1e-4), f16 1e-3 / 2e-3, bf16 8e-3 / 1.6e-2, f64 1e-10.

Run: KILN_LIB=build-conv/libkiln.so .venv/bin/python -m pytest -q --noconftest \
     tests/python/test_conv_kernels_vs_torch.py     (KILN_BENCH=1 also prints a conv timing)
"""
import ctypes
import os
import time

os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")  # plain CPU torch is the reference

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

LIB_PATH = os.environ.get("KILN_LIB", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "torch_kiln", "libkiln.so"))
MAX_DIMS = 8
DTYPES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float64: 3, torch.int8: 4,
          torch.int16: 5, torch.int32: 6, torch.int64: 7, torch.uint8: 8, torch.bool: 9}
OK, INVALID_ARGUMENT, OUT_OF_RANGE = 0, 1, 8


class KilnTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int32),
                ("shape", ctypes.c_int64 * MAX_DIMS), ("strides", ctypes.c_int64 * MAX_DIMS)]


P = ctypes.POINTER(KilnTensor)
A2 = ctypes.POINTER(ctypes.c_int64)
I, D, L = ctypes.c_int, ctypes.c_double, ctypes.c_int64


def load_lib(path=LIB_PATH):
    """Opens libkiln and declares the CNN entry points."""
    lib = ctypes.CDLL(path)
    sigs = {
        "kiln_kernel_conv2d": [P, P, P, A2, A2, A2, L, P],
        "kiln_kernel_conv2d_backward": [P, P, P, A2, A2, A2, L, P, P, P],
        "kiln_kernel_max_pool2d": [P, A2, A2, A2, A2, I, P, P],
        "kiln_kernel_max_pool2d_backward": [P, P, P],
        "kiln_kernel_avg_pool2d": [P, A2, A2, A2, I, I, L, P],
        "kiln_kernel_avg_pool2d_backward": [P, A2, A2, A2, I, I, L, P],
        "kiln_kernel_adaptive_avg_pool2d": [P, P],
        "kiln_kernel_adaptive_avg_pool2d_backward": [P, P],
        "kiln_kernel_batch_norm": [P, P, P, P, P, I, D, D, P, P, P],
        "kiln_kernel_batch_norm_backward": [P, P, P, P, P, P, P, I, D, P, P, P],
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


def pair(v):
    if v is None:
        return None
    v = (v, v) if isinstance(v, int) else tuple(v)
    return (ctypes.c_int64 * 2)(*v)


def call(lib, name, *args, expect=OK):
    conv = [desc(a) if (a is None or isinstance(a, torch.Tensor)) else a for a in args]
    rc = getattr(lib, name)(*conv)
    msg = lib.kiln_status_message().decode()
    assert rc == expect, f"{name} -> {rc} ({msg})"
    return msg


def tol(dtype, kind="pool"):
    base = {torch.float32: (1e-5, 1.3e-5), torch.float16: (1e-3, 2e-3),
            torch.bfloat16: (8e-3, 1.6e-2), torch.float64: (1e-10, 1e-10)}[dtype]
    if kind == "conv":
        base = {torch.float32: (1e-4, 1e-4), torch.float16: (2e-3, 8e-3),
                torch.bfloat16: (1.6e-2, 3e-2), torch.float64: (1e-10, 1e-10)}[dtype]
    elif kind == "convgrad":
        base = {torch.float32: (3e-4, 3e-4), torch.float16: (4e-3, 1.6e-2),
                torch.bfloat16: (3.2e-2, 6e-2), torch.float64: (1e-10, 1e-10)}[dtype]
    elif kind == "bngrad" and dtype == torch.float32:
        base = (1e-4, 1e-4)
    return dict(atol=base[0], rtol=base[1])


def channels_last(t):
    return t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else t


FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


# ---- convolution ------------------------------------------------------------------------------

CONV_CASES = [  # (N, C, H, W), (O, kH, kW), stride, padding, dilation, groups
    ((2, 3, 9, 9), (4, 3, 3), 1, 1, 1, 1),
    ((2, 4, 10, 7), (6, 3, 2), (2, 1), (1, 0), 1, 2),
    ((1, 6, 11, 11), (6, 3, 3), 2, 2, 2, 6),       # depthwise, dilated
    ((3, 8, 5, 5), (16, 1, 1), 1, 0, 1, 1),        # 1x1 fast path
    ((2, 8, 6, 6), (4, 1, 1), 2, 0, 1, 2),         # 1x1 strided, grouped
    ((2, 2, 4, 4), (3, 4, 4), 1, 0, 1, 1),         # kernel covers the input
    ((0, 3, 5, 5), (2, 3, 3), 1, 1, 1, 1),         # empty batch
    ((1, 5, 7, 13), (7, 5, 3), (3, 2), (2, 1), (1, 3), 1),
]


def ref_conv(x, w, b, s, p, d, g):
    """torch's conv in f32 for half inputs (compare against the f32 answer rounded)."""
    if x.dtype in (torch.float16, torch.bfloat16):
        return F.conv2d(x.float(), w.float(), None if b is None else b.float(), s, p, d, g)
    return F.conv2d(x, w, b, s, p, d, g)


def some_cases(n, half_cases):
    """Every case for f32/f64, a few for the half dtypes (their path only differs in staging)."""
    return [(d, i) for d in FLOATS for i in range(n)
            if d in (torch.float32, torch.float64) or i in half_cases]


@pytest.mark.parametrize("dtype,case", some_cases(len(CONV_CASES), (0, 2, 3)))
def test_conv2d_forward_backward(lib, dtype, case):
    (n, c, h, wd), (o, kh, kw), s, p, d, g = CONV_CASES[case]
    torch.manual_seed(case)
    x = torch.randn(n, c, h, wd, dtype=torch.float64).to(dtype)
    w = torch.randn(o, c // g, kh, kw, dtype=torch.float64).to(dtype)
    b = torch.randn(o, dtype=torch.float64).to(dtype)
    ref = ref_conv(x, w, b, s, p, d, g)
    for layout in (lambda t: t, channels_last):
        out = layout(torch.full(ref.shape, float("nan"), dtype=dtype))
        call(lib, "kiln_kernel_conv2d", layout(x), layout(w), b, pair(s), pair(p), pair(d), g, out)
        torch.testing.assert_close(out, ref.to(dtype), **tol(dtype, "conv"))
    out = torch.empty(ref.shape, dtype=dtype)
    call(lib, "kiln_kernel_conv2d", x, w, None, pair(s), pair(p), pair(d), g, out)
    torch.testing.assert_close(out, ref_conv(x, w, None, s, p, d, g).to(dtype), **tol(dtype, "conv"))
    # backward vs autograd (in f32 for half dtypes)
    cd = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    xr, wr, br = (t.to(cd).requires_grad_() for t in (x, w, b))
    gy = torch.randn(ref.shape, dtype=torch.float64).to(dtype)
    F.conv2d(xr, wr, br, s, p, d, g).backward(gy.to(cd))
    for layout in (lambda t: t, channels_last):
        gx, gw = (layout(torch.full_like(t, float("nan"))) for t in (x, w))
        gb = torch.full_like(b, float("nan"))
        call(lib, "kiln_kernel_conv2d_backward", layout(gy), layout(x), layout(w), pair(s),
             pair(p), pair(d), g, gx, gw, gb)
        for got, want in ((gx, xr.grad), (gw, wr.grad), (gb, br.grad)):
            torch.testing.assert_close(got, want.to(dtype), **tol(dtype, "convgrad"))
    gw = torch.empty_like(w)  # output_mask: grad_w only
    call(lib, "kiln_kernel_conv2d_backward", gy, x, w, pair(s), pair(p), pair(d), g, None, gw, None)
    torch.testing.assert_close(gw, wr.grad.to(dtype), **tol(dtype, "convgrad"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_conv1d(lib, dtype):
    torch.manual_seed(1)
    x = torch.randn(3, 4, 20, dtype=dtype)
    w = torch.randn(6, 2, 3, dtype=dtype)
    b = torch.randn(6, dtype=dtype)
    ref = F.conv1d(x, w, b, 2, 1, 2, 2)
    out = torch.empty_like(ref)
    call(lib, "kiln_kernel_conv2d", x, w, b, pair((2, 7)), pair((1, 7)), pair((2, 7)), 2, out)
    torch.testing.assert_close(out, ref, **tol(dtype, "conv"))
    xr, wr, br = (t.clone().requires_grad_() for t in (x, w, b))
    gy = torch.randn_like(ref)
    F.conv1d(xr, wr, br, 2, 1, 2, 2).backward(gy)
    gx, gw, gb = torch.empty_like(x), torch.empty_like(w), torch.empty_like(b)
    call(lib, "kiln_kernel_conv2d_backward", gy, x, w, pair((2, 7)), pair((1, 7)), pair((2, 7)), 2,
         gx, gw, gb)
    for got, want in ((gx, xr.grad), (gw, wr.grad), (gb, br.grad)):
        torch.testing.assert_close(got, want, **tol(dtype, "convgrad"))


def test_conv2d_sliced_views(lib):
    torch.manual_seed(2)
    big = torch.randn(4, 10, 12, 14)
    x = big[::2, 1:7, 1::2, 2:12]  # no dim unit-stride except w
    w = torch.randn(5, 6, 3, 3).transpose(2, 3)
    ref = F.conv2d(x, w, None, 1, 1)
    outbig = torch.zeros(2, 5, 18, 20)
    out = outbig[:, :, ::3, 1:11]
    call(lib, "kiln_kernel_conv2d", x, w, None, pair(1), pair(1), pair(1), 1, out)
    torch.testing.assert_close(out, ref, **tol(torch.float32, "conv"))


def test_conv2d_errors(lib):
    x, w = torch.randn(1, 4, 5, 5), torch.randn(2, 4, 3, 3)
    out = torch.empty(1, 2, 3, 3)
    call(lib, "kiln_kernel_conv2d", x, w, None, pair(1), pair(0), pair(1), 1, out)
    msg = call(lib, "kiln_kernel_conv2d", x, w, None, pair(1), pair(1), pair(1), 1, out,
               expect=INVALID_ARGUMENT)
    assert "[1, 2, 5, 5]" in msg and "[1, 2, 3, 3]" in msg
    call(lib, "kiln_kernel_conv2d", x, w, None, pair(1), pair(0), pair(1), 3, out,
         expect=INVALID_ARGUMENT)
    call(lib, "kiln_kernel_conv2d", x, w, None, pair(0), pair(0), pair(1), 1, out,
         expect=INVALID_ARGUMENT)
    call(lib, "kiln_kernel_conv2d", x, w.double(), None, pair(1), pair(0), pair(1), 1, out,
         expect=INVALID_ARGUMENT)
    call(lib, "kiln_kernel_conv2d", x, torch.randn(2, 4, 7, 7), None, pair(1), pair(0), pair(1), 1,
         torch.empty(1, 2, 1, 1), expect=INVALID_ARGUMENT)
    call(lib, "kiln_kernel_conv2d", x, w, torch.randn(3), pair(1), pair(0), pair(1), 1, out,
         expect=INVALID_ARGUMENT)
    call(lib, "kiln_kernel_conv2d_backward", out, x, w, pair(1), pair(0), pair(1), 1,
         torch.empty(1, 4, 5, 4), None, None, expect=INVALID_ARGUMENT)


# ---- pooling -----------------------------------------------------------------------------------

MAXPOOL_CASES = [  # shape, kernel, stride, padding, dilation, ceil_mode
    ((2, 3, 8, 8), 2, None, 0, 1, False),
    ((2, 3, 9, 7), 3, 2, 1, 1, False),
    ((1, 2, 9, 7), 3, 2, 1, 1, True),
    ((2, 2, 10, 11), (3, 2), (2, 3), (1, 1), (2, 1), True),
    ((3, 11, 6), 2, 1, 1, 2, False),               # unbatched
    ((0, 3, 5, 5), 2, 2, 0, 1, False),             # empty batch
    ((1, 1, 5, 5), 4, 3, 2, 1, True),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", range(len(MAXPOOL_CASES)))
def test_max_pool2d(lib, dtype, case):
    shape, k, s, p, d, cm = MAXPOOL_CASES[case]
    torch.manual_seed(case)
    x = torch.randn(shape, dtype=torch.float64).to(dtype)
    if x.numel() > 4:
        x.view(-1)[3] = float("nan")
        x.view(-1)[-1] = float("inf")
    ref, rind = torch.ops.aten.max_pool2d_with_indices(x, k, s or [], p, d, cm)
    gy = torch.randn(ref.shape, dtype=torch.float64).to(dtype)
    gref = torch.ops.aten.max_pool2d_with_indices_backward(gy, x, k, s or [], p, d, cm, rind)
    for layout in (lambda t: t, channels_last):
        out = layout(torch.full(ref.shape, 7.0, dtype=dtype))
        ind = layout(torch.full(ref.shape, -5, dtype=torch.int64))
        call(lib, "kiln_kernel_max_pool2d", layout(x), pair(k), pair(s), pair(p), pair(d), int(cm),
             out, ind)
        torch.testing.assert_close(out, ref, equal_nan=True, **tol(dtype))
        assert torch.equal(ind, rind)
        gx = layout(torch.full(x.shape, 7.0, dtype=dtype))
        call(lib, "kiln_kernel_max_pool2d_backward", layout(gy), ind, gx)
        torch.testing.assert_close(gx, gref, **tol(dtype))


def test_max_pool2d_errors(lib):
    x = torch.randn(1, 2, 5, 5)
    call(lib, "kiln_kernel_max_pool2d", x, pair(2), pair(2), pair(2), pair(1), 0,
         torch.empty(1, 2, 4, 4), None, expect=INVALID_ARGUMENT)  # padding > kernel/2
    msg = call(lib, "kiln_kernel_max_pool2d", x, pair(2), pair(2), pair(0), pair(1), 0,
               torch.empty(1, 2, 3, 3), None, expect=INVALID_ARGUMENT)
    assert "[1, 2, 2, 2]" in msg
    call(lib, "kiln_kernel_max_pool2d", x, pair(7), pair(1), pair(0), pair(1), 0,
         torch.empty(1, 2, 1, 1), None, expect=INVALID_ARGUMENT)  # output too small
    call(lib, "kiln_kernel_max_pool2d", x, pair(2), pair(2), pair(0), pair(1), 0,
         torch.empty(1, 2, 2, 2), torch.empty(1, 2, 2, 2), expect=INVALID_ARGUMENT)  # f32 indices
    ind = torch.tensor([[[[0, 1], [2, 25]]]])
    call(lib, "kiln_kernel_max_pool2d_backward", torch.randn(1, 1, 2, 2), ind,
         torch.empty(1, 1, 5, 5), expect=OUT_OF_RANGE)


AVGPOOL_CASES = [  # shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor
    ((2, 3, 8, 8), 2, None, 0, False, True, 0),
    ((2, 3, 9, 7), 3, 2, 1, False, True, 0),
    ((2, 3, 9, 7), 3, 2, 1, True, False, 0),
    ((1, 2, 10, 11), (3, 2), (2, 3), (1, 1), True, True, 0),
    ((1, 2, 10, 11), (3, 2), (2, 3), (1, 1), True, False, 5),
    ((3, 6, 7), 3, 1, 1, False, False, 0),         # unbatched
    ((0, 2, 4, 4), 2, 2, 0, False, True, 0),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", range(len(AVGPOOL_CASES)))
def test_avg_pool2d(lib, dtype, case):
    shape, k, s, p, cm, cip, div = AVGPOOL_CASES[case]
    torch.manual_seed(case)
    x = torch.randn(shape, dtype=torch.float64).to(dtype)
    ref = torch.ops.aten.avg_pool2d(x, k, s or [], p, cm, cip, div or None)
    gy = torch.randn(ref.shape, dtype=torch.float64).to(dtype)
    gref = torch.ops.aten.avg_pool2d_backward(gy, x, k, s or [], p, cm, cip, div or None)
    for layout in (lambda t: t, channels_last):
        out = layout(torch.full(ref.shape, 7.0, dtype=dtype))
        call(lib, "kiln_kernel_avg_pool2d", layout(x), pair(k), pair(s), pair(p), int(cm), int(cip),
             div, out)
        torch.testing.assert_close(out, ref, **tol(dtype))
        gx = layout(torch.full(x.shape, 7.0, dtype=dtype))
        call(lib, "kiln_kernel_avg_pool2d_backward", layout(gy), pair(k), pair(s), pair(p), int(cm),
             int(cip), div, gx)
        torch.testing.assert_close(gx, gref, **tol(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,osize", [((2, 3, 9, 7), (4, 3)), ((2, 3, 8, 8), (1, 1)),
                                         ((3, 5, 5), (7, 2)), ((1, 2, 6, 6), (6, 6))])
def test_adaptive_avg_pool2d(lib, dtype, shape, osize):
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=torch.float64).to(dtype)
    ref = torch.ops.aten._adaptive_avg_pool2d(x, osize)
    gy = torch.randn(ref.shape, dtype=torch.float64).to(dtype)
    gref = torch.ops.aten._adaptive_avg_pool2d_backward(gy, x)
    for layout in (lambda t: t, channels_last):
        out = layout(torch.full(ref.shape, 7.0, dtype=dtype))
        call(lib, "kiln_kernel_adaptive_avg_pool2d", layout(x), out)
        torch.testing.assert_close(out, ref, **tol(dtype))
        gx = layout(torch.full(x.shape, 7.0, dtype=dtype))
        call(lib, "kiln_kernel_adaptive_avg_pool2d_backward", layout(gy), gx)
        torch.testing.assert_close(gx, gref, **tol(dtype))


# ---- batch norm ----------------------------------------------------------------------------------

BN_SHAPES = [(4, 3, 5, 6), (8, 5), (2, 4, 7), (3, 2, 2, 3, 4), (1, 3, 1, 1)]


@pytest.mark.parametrize("dtype,shape", [(d, BN_SHAPES[i]) for d, i in
                                         some_cases(len(BN_SHAPES), (0, 1))])
@pytest.mark.parametrize("training,affine", [(True, True), (False, True), (True, False),
                                             (False, False)])
def test_batch_norm(lib, dtype, shape, training, affine):
    torch.manual_seed(len(shape))
    c = shape[1]
    pd = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype  # mixed params
    x = (torch.randn(shape, dtype=torch.float64) * 2 + 0.5).to(dtype)
    w = torch.randn(c, dtype=pd) if affine else None
    b = torch.randn(c, dtype=pd) if affine else None
    rm, rv = torch.randn(c, dtype=pd), torch.rand(c, dtype=pd) + 0.5
    rm_ref, rv_ref = rm.clone(), rv.clone()
    out_ref, sm_ref, si_ref = torch.native_batch_norm(x, w, b, rm_ref, rv_ref, training, 0.1, 1e-5)
    layouts = [lambda t: t] + ([channels_last] if x.dim() == 4 else [])
    for layout in layouts:
        rm2, rv2 = rm.clone(), rv.clone()
        out = layout(torch.full(shape, 7.0, dtype=dtype))
        sm, si = torch.full((c,), 7.0, dtype=pd), torch.full((c,), 7.0, dtype=pd)
        call(lib, "kiln_kernel_batch_norm", layout(x), w, b, rm2, rv2, int(training), 0.1, 1e-5,
             out, sm, si)
        degenerate = training and shape[0] * x[0, 0].numel() == 1  # var 0: roundoff * 1/sqrt(eps)
        torch.testing.assert_close(out, out_ref, **(dict(atol=1e-3, rtol=0) if degenerate
                                                    else tol(dtype)))
        if training:
            torch.testing.assert_close(sm, sm_ref, **tol(pd))
            torch.testing.assert_close(si, si_ref, **tol(pd))
            if shape[0] * x[0, 0].numel() > 1:
                torch.testing.assert_close(rm2, rm_ref, **tol(pd))
                torch.testing.assert_close(rv2, rv_ref, **tol(pd))
        else:
            assert torch.equal(rm2, rm) and torch.equal(rv2, rv) and (sm == 7).all()
    if shape[0] * x[0, 0].numel() == 1:
        return  # torch's backward divides by n - 1 paths; skip the degenerate case
    gy = torch.randn(shape, dtype=torch.float64).to(dtype)
    if not training:
        sm_ref, si_ref = torch.empty(0, dtype=pd), torch.empty(0, dtype=pd)
    grads = torch.ops.aten.native_batch_norm_backward(gy, x, w, rm, rv, sm_ref, si_ref, training,
                                                      1e-5, [True, affine, affine])
    for layout in layouts:
        gx = layout(torch.full(shape, 7.0, dtype=dtype))
        gw = torch.full((c,), 7.0, dtype=pd) if affine else None
        gb = torch.full((c,), 7.0, dtype=pd) if affine else None
        call(lib, "kiln_kernel_batch_norm_backward", layout(gy), layout(x), w, rm, rv,
             sm_ref if training else None, si_ref if training else None, int(training), 1e-5,
             gx, gw, gb)
        torch.testing.assert_close(gx, grads[0], **tol(dtype, "bngrad"))
        if affine:
            torch.testing.assert_close(gw, grads[1], **tol(pd, "bngrad"))
            torch.testing.assert_close(gb, grads[2], **tol(pd, "bngrad"))


def test_batch_norm_errors(lib):
    x = torch.randn(2, 3, 4)
    out = torch.empty_like(x)
    msg = call(lib, "kiln_kernel_batch_norm", x, torch.randn(4), None, None, None, 1, 0.1, 1e-5,
               out, None, None, expect=INVALID_ARGUMENT)
    assert "[4]" in msg and "[3]" in msg
    call(lib, "kiln_kernel_batch_norm", x, None, None, None, None, 0, 0.1, 1e-5, out, None, None,
         expect=INVALID_ARGUMENT)  # eval needs running stats
    call(lib, "kiln_kernel_batch_norm", torch.randn(0, 3, 4), None, None, None, None, 1, 0.1,
         1e-5, torch.empty(0, 3, 4), None, None, expect=INVALID_ARGUMENT)
    call(lib, "kiln_kernel_batch_norm", x, None, None, None, None, 1, 0.1, 1e-5,
         torch.empty(2, 3, 5), None, None, expect=INVALID_ARGUMENT)
    call(lib, "kiln_kernel_batch_norm_backward", x, x, None, None, None, None, None, 1, 1e-5,
         out, None, None, expect=INVALID_ARGUMENT)  # training needs saved stats


def test_conv2d_bench(lib):
    if not os.environ.get("KILN_BENCH"):
        pytest.skip("set KILN_BENCH=1")
    x, w, b = torch.randn(8, 64, 32, 32), torch.randn(64, 64, 3, 3), torch.randn(64)
    out = torch.empty(8, 64, 32, 32)
    args = (desc(x), desc(w), desc(b), pair(1), pair(1), pair(1), 1, desc(out))

    def best(f, reps=20):
        f()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
        return min(ts) * 1e3
    tk = best(lambda: lib.kiln_kernel_conv2d(*args))
    tt = best(lambda: F.conv2d(x, w, b, 1, 1))
    torch.testing.assert_close(out, F.conv2d(x, w, b, 1, 1), atol=1e-3, rtol=1e-4)
    gx, gw, gb = torch.empty_like(x), torch.empty_like(w), torch.empty_like(b)
    bargs = (desc(out), desc(x), desc(w), pair(1), pair(1), pair(1), 1, desc(gx), desc(gw),
             desc(gb))
    tkb = best(lambda: lib.kiln_kernel_conv2d_backward(*bargs), 10)
    ttb = best(lambda: torch.ops.aten.convolution_backward(
        out, x, w, [64], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True]), 10)
    print(f"\nconv2d 3x3 N8 C64 32x32 O64 ({torch.get_num_threads()} threads): forward kiln "
          f"{tk:.2f} ms, torch {tt:.2f} ms; backward kiln {tkb:.2f} ms, torch {ttb:.2f} ms")
