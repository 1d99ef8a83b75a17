# SPDX-License-Identifier: Apache-2.0
"""Every libkiln elementwise / copy / reduction kernel vs PyTorch CPU, through ctypes.

The library is found via $KILN_LIB, else ../../build/libkiln.so relative to this file. Each test
builds kiln_tensor_t descriptors straight from torch CPU tensors (data_ptr, shape, strides), runs
the kernel into a torch-allocated output and compares with the torch op. Tolerances:
  exact ops (integer, bool, comparisons, copies, min/max, rounding) -> exact (NaN == NaN);
  f32 transcendental -> rtol 2e-6 / atol 1e-6 (torch's own AVX2 gelu erf has ~4e-7 abs error);
  f64 -> rtol 1e-12; f16 / bf16 -> one unit in the last place of the format (rtol 1e-3 / 8e-3),
  since kiln and torch may round a different f32 intermediate.
"""
import ctypes
import math
import os
import pathlib
import zlib

import pytest
import torch

HERE = pathlib.Path(__file__).resolve().parent
LIB_PATH = os.environ.get("KILN_LIB", str(HERE / "../../build/libkiln.so"))
lib = ctypes.CDLL(LIB_PATH)

MAX_DIMS = 8
DT = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float64: 3, torch.int8: 4,
      torch.int16: 5, torch.int32: 6, torch.int64: 7, torch.uint8: 8, torch.bool: 9}
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
ALL = FLOATS + INTS + [torch.bool]


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int32),
                ("shape", ctypes.c_int64 * MAX_DIMS), ("strides", ctypes.c_int64 * MAX_DIMS)]


class UnaryParams(ctypes.Structure):
    _fields_ = [("alpha", ctypes.c_double), ("scale", ctypes.c_double),
                ("input_scale", ctypes.c_double), ("threshold", ctypes.c_double),
                ("min", ctypes.c_double), ("max", ctypes.c_double),
                ("has_min", ctypes.c_int), ("has_max", ctypes.c_int)]


class ReduceParams(ctypes.Structure):
    _fields_ = [("correction", ctypes.c_double), ("p", ctypes.c_double)]


P = ctypes.POINTER
lib.kiln_status_message.restype = ctypes.c_char_p
lib.kiln_kernel_copy.argtypes = [P(Tensor), P(Tensor)]
lib.kiln_kernel_fill.argtypes = [P(Tensor), ctypes.c_double]
lib.kiln_kernel_fill_i64.argtypes = [P(Tensor), ctypes.c_int64]
lib.kiln_kernel_unary_ex.argtypes = [ctypes.c_int, P(Tensor), P(UnaryParams), ctypes.c_int,
                                     P(Tensor)]
lib.kiln_kernel_binary.argtypes = [ctypes.c_int, P(Tensor), P(Tensor), ctypes.c_double,
                                   ctypes.c_int, P(Tensor)]
lib.kiln_kernel_ternary.argtypes = [ctypes.c_int, P(Tensor), P(Tensor), P(Tensor),
                                    ctypes.c_double, ctypes.c_int, P(Tensor)]
lib.kiln_kernel_reduce.argtypes = [ctypes.c_int, P(Tensor), ctypes.c_uint32, P(ReduceParams),
                                   ctypes.c_int, P(Tensor)]
lib.kiln_kernel_reduce_index.argtypes = [ctypes.c_int, P(Tensor), ctypes.c_int, P(Tensor),
                                         P(Tensor)]
lib.kiln_kernel_cumsum.argtypes = [P(Tensor), ctypes.c_int, ctypes.c_int, P(Tensor)]
lib.kiln_kernel_cumprod.argtypes = [P(Tensor), ctypes.c_int, ctypes.c_int, P(Tensor)]


def desc(t):
    if t is None:
        return None
    d = Tensor()
    d.data = t.data_ptr() if t.numel() else 0
    d.dtype = DT[t.dtype]
    d.ndim = t.dim()
    for i in range(t.dim()):
        d.shape[i] = t.shape[i]
        d.strides[i] = t.stride()[i]
    return ctypes.pointer(d)


class KilnError(Exception):
    pass


def check(status):
    if status != 0:
        raise KilnError(lib.kiln_status_message().decode())


# ---- enums (kiln/kernels/elementwise.h, reduce.h) ----
U = {n: i for i, n in enumerate(
    "NEG ABS EXP EXPM1 LOG LOG1P LOG2 LOG10 SQRT RSQRT RECIPROCAL SIN COS TAN ASIN ACOS ATAN "
    "SINH COSH TANH SIGMOID RELU GELU GELU_TANH SILU MISH HARDSIGMOID HARDSWISH ERF ERFC FLOOR "
    "CEIL ROUND TRUNC SIGN SQUARE LOGICAL_NOT BITWISE_NOT ISNAN ISINF ISFINITE LEAKY_RELU ELU "
    "CLAMP POW_SCALAR SOFTPLUS".split())}
B = {n: i for i, n in enumerate(
    "ADD SUB MUL DIV DIV_TRUNC DIV_FLOOR REMAINDER FMOD POW MAXIMUM MINIMUM ATAN2 EQ NE LT LE GT "
    "GE LOGICAL_AND LOGICAL_OR LOGICAL_XOR BITWISE_AND BITWISE_OR BITWISE_XOR SIGMOID_BACKWARD "
    "TANH_BACKWARD GELU_BACKWARD GELU_TANH_BACKWARD SILU_BACKWARD THRESHOLD_BACKWARD "
    "LEAKY_RELU_BACKWARD".split())}
T3 = {n: i for i, n in enumerate("WHERE LERP ADDCMUL ADDCDIV CLAMP_TENSOR".split())}
R = {n: i for i, n in enumerate("SUM MEAN PROD AMAX AMIN ANY ALL VAR STD NORM LOGSUMEXP".split())}


def kiln_unary(op, x, compute, out_dtype, **params):
    out = torch.empty(x.shape, dtype=out_dtype)
    p = UnaryParams(**params) if params else None
    check(lib.kiln_kernel_unary_ex(U[op], desc(x), ctypes.pointer(p) if p else None,
                                   DT[compute], desc(out)))
    return out


def kiln_binary(op, a, b, compute, out_dtype, alpha=1.0, shape=None):
    shape = shape if shape is not None else torch.broadcast_shapes(a.shape, b.shape)
    out = torch.empty(shape, dtype=out_dtype)
    check(lib.kiln_kernel_binary(B[op], desc(a), desc(b), alpha, DT[compute], desc(out)))
    return out


def rand(shape, dtype, lo=-4.0, hi=4.0, gen=None):
    g = gen or torch.Generator().manual_seed(  # deterministic: str hashes vary per process
        zlib.crc32(repr((tuple(shape), str(dtype), lo, hi)).encode()) & 0xffff)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dtype)
    info = torch.iinfo(dtype)
    lo_i, hi_i = max(int(lo * 8), info.min), min(int(hi * 8), info.max)
    return torch.randint(lo_i, hi_i + 1, shape, generator=g, dtype=torch.int64).to(dtype)


def tol(dtype, loose=False):
    if dtype == torch.float32:
        return (2e-6, 1e-6) if loose else (1.3e-6, 1e-30)
    if dtype == torch.float64:
        return (1e-12, 1e-15) if loose else (1e-12, 1e-300)
    if dtype == torch.float16:
        return (1e-3, 1e-5)
    if dtype == torch.bfloat16:
        return (8e-3, 1e-5)
    return (0, 0)


def assert_close(got, want, rtol=0.0, atol=0.0):
    assert got.dtype == want.dtype and got.shape == want.shape
    if not got.dtype.is_floating_point:
        assert torch.equal(got, want), f"\ngot  {got.flatten()[:16]}\nwant {want.flatten()[:16]}"
        return
    g, w = got.double(), want.double()
    nan_ok = torch.isnan(g) == torch.isnan(w)
    assert nan_ok.all(), f"NaN mismatch: got {g[~nan_ok][:8]} want {w[~nan_ok][:8]}"
    fin = torch.isfinite(w) & ~torch.isnan(w)
    assert torch.equal(g[~fin & ~torch.isnan(w)], w[~fin & ~torch.isnan(w)]), "inf mismatch"
    err = (g[fin] - w[fin]).abs()
    bound = atol + rtol * w[fin].abs()
    bad = err > bound
    if bad.any():
        i = bad.nonzero()[0]
        raise AssertionError(f"{int(bad.sum())} of {fin.sum()} off: got {g[fin][i]} want "
                             f"{w[fin][i]} (err {err[i]}, rtol {rtol}, atol {atol})")


SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 1e-30, 88.0, -88.0, 100.0, -110.0,
            float("inf"), float("-inf"), float("nan")]


def with_specials(x):
    s = torch.tensor(SPECIALS, dtype=torch.float64).to(x.dtype)
    flat = x.flatten().clone()
    flat[: len(s)] = s
    return flat.reshape(x.shape)


# ---------------------------------------------------------------- unary
def torch_ref(name, fn, x):
    """fn(x), except for f32 GELU, where torch's AVX2 kernel is the less accurate side: it is off by up
    to 1.2e-6 absolute (0.7% relative in the negative tail) and returns NaN at +inf. There the
    reference is torch's f64 GELU rounded to f32 (kiln is within 4e-7 of it and returns +inf)."""
    if name == "GELU" and x.dtype == torch.float32:
        return fn(x.double()).float()
    want = fn(x)
    if name == "GELU" and x.dtype.is_floating_point:  # half types: same NaN at +inf
        want = torch.where(x == float("inf"), torch.full_like(want, float("inf")), want)
    return want


# name: (torch fn, domain (lo, hi), int ok, exact, params)
F = torch.nn.functional
UNARY = {
    "NEG": (torch.neg, (-5, 5), True, True),
    "ABS": (torch.abs, (-5, 5), True, True),
    "EXP": (torch.exp, (-90, 90), False, False),
    "EXPM1": (torch.expm1, (-5, 5), False, False),
    "LOG": (torch.log, (0, 10), False, False),
    "LOG1P": (torch.log1p, (-0.9, 5), False, False),
    "LOG2": (torch.log2, (0, 10), False, False),
    "LOG10": (torch.log10, (0, 10), False, False),
    "SQRT": (torch.sqrt, (0, 10), False, False),
    "RSQRT": (torch.rsqrt, (0, 10), False, False),
    "RECIPROCAL": (torch.reciprocal, (-5, 5), False, False),
    "SIN": (torch.sin, (-6, 6), False, False),
    "COS": (torch.cos, (-6, 6), False, False),
    "TAN": (torch.tan, (-1.5, 1.5), False, False),
    "ASIN": (torch.asin, (-1, 1), False, False),
    "ACOS": (torch.acos, (-1, 1), False, False),
    "ATAN": (torch.atan, (-5, 5), False, False),
    "SINH": (torch.sinh, (-5, 5), False, False),
    "COSH": (torch.cosh, (-5, 5), False, False),
    "TANH": (torch.tanh, (-10, 10), False, False),
    "SIGMOID": (torch.sigmoid, (-20, 20), False, False),
    "RELU": (torch.relu, (-5, 5), True, True),
    "GELU": (F.gelu, (-8, 8), False, False),
    "GELU_TANH": (lambda x: F.gelu(x, approximate="tanh"), (-8, 8), False, False),
    "SILU": (F.silu, (-20, 20), False, False),
    "MISH": (F.mish, (-10, 10), False, False),
    "HARDSIGMOID": (F.hardsigmoid, (-5, 5), False, False),
    "HARDSWISH": (F.hardswish, (-5, 5), False, False),
    "ERF": (torch.erf, (-4, 4), False, False),
    "ERFC": (torch.erfc, (-4, 4), False, False),
    "FLOOR": (torch.floor, (-5, 5), True, True),
    "CEIL": (torch.ceil, (-5, 5), True, True),
    "ROUND": (torch.round, (-5, 5), True, True),
    "TRUNC": (torch.trunc, (-5, 5), True, True),
    "SIGN": (torch.sign, (-5, 5), True, True),
    "SQUARE": (torch.square, (-5, 5), True, False),
    "LOGICAL_NOT": (torch.logical_not, (-2, 2), True, True),
    "BITWISE_NOT": (torch.bitwise_not, (-5, 5), True, True),
    "ISNAN": (torch.isnan, (-5, 5), True, True),
    "ISINF": (torch.isinf, (-5, 5), True, True),
    "ISFINITE": (torch.isfinite, (-5, 5), True, True),
}


def unary_dtypes(name):
    fn, dom, int_ok, exact = UNARY[name]
    if name == "BITWISE_NOT":
        return INTS + [torch.bool]
    ds = list(FLOATS)
    if int_ok:
        ds += INTS
    if name in ("LOGICAL_NOT", "ISNAN", "ISINF", "ISFINITE", "SIGN"):
        ds += [torch.bool]
    return ds


@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name):
    fn, (lo, hi), int_ok, exact = UNARY[name]
    for dt in unary_dtypes(name):
        for shape, make in [((1000,), lambda t: t), ((37, 41), lambda t: t.t()),
                            ((70000,), lambda t: t), ((6, 50), lambda t: t[:, ::3]),
                            ((), lambda t: t), ((0, 3), lambda t: t)]:
            x = make(rand(shape, dt, lo, hi))
            if dt.is_floating_point and x.numel() >= 1000:
                x = with_specials(x.contiguous())
            want = torch_ref(name, fn, x)
            got = kiln_unary(name, x, want.dtype if want.dtype != torch.bool else x.dtype,
                             want.dtype)
            r, a = tol(want.dtype, loose=not exact)
            if name in ("SQUARE",) and want.dtype in (torch.float32, torch.float64):
                r, a = tol(want.dtype)
            assert_close(got, want, r, a)


lib.kiln_cpu_force_generic.argtypes = [ctypes.c_int]


@pytest.fixture
def generic_kernels():
    """Runs a test on the portable C kernels instead of the AVX2 ones."""
    lib.kiln_cpu_force_generic(1)
    yield
    lib.kiln_cpu_force_generic(0)


@pytest.mark.parametrize("name", ["EXP", "TANH", "SIGMOID", "GELU", "GELU_TANH", "SILU", "RELU",
                                  "NEG", "ABS", "SQRT", "SQUARE"])
def test_unary_generic_path(name, generic_kernels):
    test_unary(name)


@pytest.mark.parametrize("name", ["ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM",
                                  "SIGMOID_BACKWARD", "TANH_BACKWARD", "THRESHOLD_BACKWARD"])
def test_binary_generic_path(name, generic_kernels):
    test_binary(name)


def test_copy_and_sum_generic_path(generic_kernels):
    test_copy_layouts()
    test_reduce("SUM")


def test_unary_int_to_float_promotion():
    x = torch.arange(-50, 50, dtype=torch.int32)
    assert_close(kiln_unary("EXP", x, torch.float32, torch.float32), torch.exp(x), 1.3e-6)
    assert_close(kiln_unary("SQRT", x.abs().to(torch.uint8), torch.float32, torch.float32),
                 torch.sqrt(x.abs().to(torch.uint8)), 1.3e-6)


def test_unary_inplace_and_half_out():
    x = rand((1000,), torch.float32)
    want = torch.sigmoid(x)
    check(lib.kiln_kernel_unary_ex(U["SIGMOID"], desc(x), None, DT[torch.float32], desc(x)))
    assert_close(x, want, 2e-6, 1e-6)
    xh = rand((999,), torch.float16)
    out = torch.empty(999, dtype=torch.float32)  # computed in f16, stored as f32
    check(lib.kiln_kernel_unary_ex(U["EXP"], desc(xh), None, DT[torch.float16], desc(out)))
    assert_close(out, torch.exp(xh).float(), 1e-3, 1e-5)


PARAM_CASES = [
    ("LEAKY_RELU", dict(alpha=0.01), lambda x: F.leaky_relu(x, 0.01)),
    ("LEAKY_RELU", dict(alpha=0.2), lambda x: F.leaky_relu(x, 0.2)),
    ("ELU", dict(alpha=1.0, scale=1.0, input_scale=1.0), F.elu),
    ("ELU", dict(alpha=1.6732632423543772, scale=1.0507009873554805, input_scale=1.0), F.selu),
    ("ELU", dict(alpha=0.5, scale=1.0, input_scale=2.0), lambda x: F.celu(x, 0.5)),
    ("CLAMP", dict(min=-1.0, max=2.0, has_min=1, has_max=1), lambda x: torch.clamp(x, -1, 2)),
    ("CLAMP", dict(min=-1.5, has_min=1), lambda x: torch.clamp(x, min=-1.5)),
    ("CLAMP", dict(max=0.25, has_max=1), lambda x: torch.clamp(x, max=0.25)),
    ("CLAMP", dict(min=1.0, max=-1.0, has_min=1, has_max=1), lambda x: torch.clamp(x, 1, -1)),
    ("POW_SCALAR", dict(alpha=2.0), lambda x: torch.pow(x, 2.0)),
    ("POW_SCALAR", dict(alpha=3.0), lambda x: torch.pow(x, 3.0)),
    ("POW_SCALAR", dict(alpha=0.5), lambda x: torch.pow(x, 0.5)),
    ("POW_SCALAR", dict(alpha=-0.5), lambda x: torch.pow(x, -0.5)),
    ("POW_SCALAR", dict(alpha=-1.0), lambda x: torch.pow(x, -1.0)),
    ("POW_SCALAR", dict(alpha=-2.0), lambda x: torch.pow(x, -2.0)),
    ("POW_SCALAR", dict(alpha=1.7), lambda x: torch.pow(x, 1.7)),
    ("POW_SCALAR", dict(alpha=1.0), lambda x: torch.pow(x, 1.0)),  # aten copies
    ("POW_SCALAR", dict(alpha=0.0), lambda x: torch.pow(x, 0.0)),  # aten fills 1 (NaN too)
    ("SOFTPLUS", dict(alpha=1.0, threshold=20.0), F.softplus),
    ("SOFTPLUS", dict(alpha=2.0, threshold=5.0), lambda x: F.softplus(x, 2.0, 5.0)),
]


@pytest.mark.parametrize("case", range(len(PARAM_CASES)))
def test_unary_params(case):
    name, params, fn = PARAM_CASES[case]
    for dt in FLOATS:
        x = with_specials(rand((3000,), dt, -6, 6))
        if name == "POW_SCALAR":
            x = x.abs() if params["alpha"] in (0.5, -0.5, 1.7) else x
        want = fn(x)
        got = kiln_unary(name, x, dt, dt, **params)
        exact = name in ("CLAMP",) or (name == "POW_SCALAR" and params["alpha"] in (0.0, 1.0))
        r, a = tol(dt, loose=not exact)
        assert_close(got, want, r, a)


def test_unary_params_int():
    for dt in INTS:
        x = rand((500,), dt)
        assert_close(kiln_unary("CLAMP", x, dt, dt, min=-3, max=5, has_min=1, has_max=1),
                     torch.clamp(x, -3, 5) if dt != torch.uint8 else torch.clamp(x, 0, 5))
        assert_close(kiln_unary("POW_SCALAR", x, dt, dt, alpha=3), torch.pow(x, 3))
    with pytest.raises(KilnError, match="negative integer powers"):
        kiln_unary("POW_SCALAR", rand((4,), torch.int32), torch.int32, torch.int32, alpha=-1)


def test_unary_rejects():
    with pytest.raises(KilnError):
        kiln_unary("EXP", rand((4,), torch.int32), torch.int32, torch.int32)
    with pytest.raises(KilnError):
        kiln_unary("NEG", rand((4,), torch.bool), torch.bool, torch.bool)
    with pytest.raises(KilnError, match="params"):
        kiln_unary("CLAMP", rand((4,), torch.float32), torch.float32, torch.float32)


# ---------------------------------------------------------------- binary
A = torch.ops.aten
BINARY = {
    # name: (torch fn(a, b), dtypes, exact, b domain)
    "ADD": (lambda a, b: torch.add(a, b), ALL, True, None),
    "SUB": (lambda a, b: torch.sub(a, b), FLOATS + INTS, True, None),
    "MUL": (torch.mul, ALL, True, None),
    "DIV": (torch.div, FLOATS, True, None),
    "DIV_TRUNC": (lambda a, b: torch.div(a, b, rounding_mode="trunc"), FLOATS + INTS, True, "nz"),
    "DIV_FLOOR": (lambda a, b: torch.div(a, b, rounding_mode="floor"), FLOATS + INTS, True, "nz"),
    "REMAINDER": (torch.remainder, FLOATS + INTS, True, "nz"),
    "FMOD": (torch.fmod, FLOATS + INTS, True, "nz"),
    "POW": (torch.pow, FLOATS + INTS, False, "pow"),
    "MAXIMUM": (torch.maximum, ALL, True, None),
    "MINIMUM": (torch.minimum, ALL, True, None),
    "ATAN2": (torch.atan2, FLOATS, False, None),
    "EQ": (torch.eq, ALL, True, None),
    "NE": (torch.ne, ALL, True, None),
    "LT": (torch.lt, ALL, True, None),
    "LE": (torch.le, ALL, True, None),
    "GT": (torch.gt, ALL, True, None),
    "GE": (torch.ge, ALL, True, None),
    "LOGICAL_AND": (torch.logical_and, ALL, True, None),
    "LOGICAL_OR": (torch.logical_or, ALL, True, None),
    "LOGICAL_XOR": (torch.logical_xor, ALL, True, None),
    "BITWISE_AND": (torch.bitwise_and, INTS + [torch.bool], True, None),
    "BITWISE_OR": (torch.bitwise_or, INTS + [torch.bool], True, None),
    "BITWISE_XOR": (torch.bitwise_xor, INTS + [torch.bool], True, None),
    "SIGMOID_BACKWARD": (A.sigmoid_backward, FLOATS, False, None),
    "TANH_BACKWARD": (A.tanh_backward, FLOATS, False, None),
    "GELU_BACKWARD": (lambda g, x: A.gelu_backward(g, x), FLOATS, False, None),
    "GELU_TANH_BACKWARD": (lambda g, x: A.gelu_backward(g, x, approximate="tanh"), FLOATS,
                           False, None),
    "SILU_BACKWARD": (A.silu_backward, FLOATS, False, None),
    "THRESHOLD_BACKWARD": (lambda g, x: A.threshold_backward(g, x, 0.0), FLOATS + INTS, True,
                           None),
    "LEAKY_RELU_BACKWARD": (lambda g, x: A.leaky_relu_backward(g, x, 0.01, False), FLOATS,
                            False, None),
}
ALPHA = {"LEAKY_RELU_BACKWARD": 0.01, "THRESHOLD_BACKWARD": 0.0}
LAYOUTS = [
    ((1000,), (1000,), None),
    ((70001,), (70001,), None),             # threaded
    ((3, 1, 5), (4, 5), None),              # broadcast both ways
    ((16, 9), (), None),                    # tensor op rank-0 scalar
    ((), (), None),
    ((0, 4), (4,), None),
    ((12, 10), (12, 10), "t"),              # transposed operands
    ((8, 30), (8, 10), "step"),             # a sliced with step 3
    ((400, 2), (400, 1), None),             # tiny inner dim: walked as strided long rows
    ((5, 60, 3), (3,), None),
]


def make_pair(name, dt, sa, sb, kind):
    fn, dts, exact, bdom = BINARY[name]
    a = rand(sa, dt, -6, 6)
    b = rand(sb, dt, -6, 6, gen=torch.Generator().manual_seed(7))
    if bdom == "nz" and not dt.is_floating_point:
        b = torch.where(b == 0, torch.ones_like(b), b)
    if bdom == "pow":
        if dt.is_floating_point:
            a = a.abs() + 0.1
            b = b.clamp(-3, 3)
        else:
            b = b.abs() % 5
    if kind == "t":
        a, b = a.t(), b.t()
    elif kind == "step":
        a = a[:, ::3]
    if dt.is_floating_point and a.numel() >= 1000 and name not in ("POW",):
        a = with_specials(a)
        if b.numel() >= len(SPECIALS):
            b = torch.flip(with_specials(b), [0])
    return a, b


@pytest.mark.parametrize("name", list(BINARY))
def test_binary(name):
    fn, dts, exact, bdom = BINARY[name]
    for dt in dts:
        for sa, sb, kind in LAYOUTS:
            a, b = make_pair(name, dt, sa, sb, kind)
            if name == "GELU_BACKWARD":  # torch's oneDNN path rejects broadcast operands
                want = fn(*[t.contiguous() for t in torch.broadcast_tensors(a, b)])
            else:
                want = fn(a, b)
            compute = torch.result_type(a, b)
            got = kiln_binary(name, a, b, compute, want.dtype, alpha=ALPHA.get(name, 1.0))
            r, at = tol(want.dtype, loose=not exact)
            if name == "GELU_TANH_BACKWARD":
                # 1 - tanh(u)^2 near |tanh| = 1 amplifies a 1-ulp tanh difference by |x|
                at = max(at, 1e-5)
            assert_close(got, want, r, at)


def test_binary_alpha_and_scalars():
    a, b = rand((5000,), torch.float32), rand((5000,), torch.float32, -1, 1)
    assert_close(kiln_binary("ADD", a, b, torch.float32, torch.float32, alpha=2.5),
                 torch.add(a, b, alpha=2.5), 1.3e-6, 1e-6)
    assert_close(kiln_binary("SUB", a, b, torch.float32, torch.float32, alpha=-0.5),
                 torch.sub(a, b, alpha=-0.5), 1.3e-6, 1e-6)
    ai = rand((300,), torch.int32)
    assert_close(kiln_binary("ADD", ai, ai, torch.int32, torch.int32, alpha=3),
                 torch.add(ai, ai, alpha=3))
    # half tensor + python float: the scalar is rounded to half first, math in f32
    h = rand((999,), torch.float16)
    s = torch.tensor(0.1, dtype=torch.float64)
    assert_close(kiln_binary("ADD", h, s, torch.float16, torch.float16), h + 0.1)
    assert_close(kiln_binary("MUL", h, s, torch.float16, torch.float16), h * 0.1)
    # mixed dtypes: int tensor * float tensor promoted to f32; f32 out of bf16 compute
    bf = rand((777,), torch.bfloat16)
    assert_close(kiln_binary("MUL", ai[:1].expand(777), bf, torch.bfloat16, torch.bfloat16),
                 ai[:1] * bf)
    out = kiln_binary("ADD", bf, bf, torch.bfloat16, torch.float32)
    assert_close(out, (bf + bf).float())
    # comparisons with a float scalar against an int tensor (compute f32)
    assert_close(kiln_binary("LT", ai, torch.tensor(2.5, dtype=torch.float64), torch.float32,
                             torch.bool), ai < 2.5)


def test_binary_int_overflow_wraps():
    a = torch.tensor([2**31 - 1, -2**31, 100, -128], dtype=torch.int32)
    b = torch.tensor([1, -1, 2**30, 1], dtype=torch.int32)
    for op, fn in [("ADD", torch.add), ("SUB", torch.sub), ("MUL", torch.mul)]:
        assert_close(kiln_binary(op, a, b, torch.int32, torch.int32), fn(a, b))
    a8 = torch.tensor([127, -128, 100], dtype=torch.int8)
    assert_close(kiln_binary("MUL", a8, a8, torch.int8, torch.int8), a8 * a8)
    neg = torch.tensor([-2**63, 7, -7], dtype=torch.int64)
    m1 = torch.tensor([-1, -2, 2], dtype=torch.int64)
    got = kiln_binary("DIV_FLOOR", neg, m1, torch.int64, torch.int64)
    assert got.tolist() == [-2**63, -4, -4]
    assert kiln_binary("REMAINDER", neg, m1, torch.int64, torch.int64).tolist() == \
        torch.remainder(neg, m1).tolist()


def test_binary_int_div_by_zero():
    a = torch.tensor([1, 2, 3], dtype=torch.int32)
    z = torch.tensor([1, 0, 1], dtype=torch.int32)
    for op in ("DIV_TRUNC", "DIV_FLOOR", "REMAINDER", "FMOD"):
        with pytest.raises(KilnError, match="ZeroDivisionError"):
            kiln_binary(op, a, z, torch.int32, torch.int32)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.div(a, z, rounding_mode="floor")


def test_binary_inplace_and_errors():
    a = rand((4096,), torch.float32)
    b = rand((4096,), torch.float32)
    want = a * b
    check(lib.kiln_kernel_binary(B["MUL"], desc(a), desc(b), 1.0, DT[torch.float32], desc(a)))
    assert_close(a, want)
    h = rand((300, 7), torch.float16).t()          # in-place on a transposed f16 tensor
    want = h + 1.5
    one = torch.tensor(1.5, dtype=torch.float64)
    check(lib.kiln_kernel_binary(B["ADD"], desc(h), desc(one), 1.0, DT[torch.float16], desc(h)))
    assert_close(h, want)
    with pytest.raises(KilnError, match=r"\[3\].*\[4\]"):
        kiln_binary("ADD", rand((3,), torch.float32), rand((4,), torch.float32), torch.float32,
                    torch.float32, shape=(4,))
    with pytest.raises(KilnError):
        kiln_binary("SUB", rand((3,), torch.bool), rand((3,), torch.bool), torch.bool, torch.bool)
    with pytest.raises(KilnError):
        kiln_binary("BITWISE_AND", rand((3,), torch.float32), rand((3,), torch.float32),
                    torch.float32, torch.float32)


# ---------------------------------------------------------------- ternary
def kiln_ternary(op, a, b, c, compute, out_dtype, scalar=1.0):
    shape = torch.broadcast_shapes(*[t.shape for t in (a, b, c) if t is not None])
    out = torch.empty(shape, dtype=out_dtype)
    check(lib.kiln_kernel_ternary(T3[op], desc(a), desc(b), desc(c), scalar, DT[compute],
                                  desc(out)))
    return out


def test_ternary():
    for dt in ALL:
        cond = rand((6, 1, 7), torch.bool)
        a, b = rand((5, 7), dt), rand((6, 5, 7), dt).transpose(0, 1).transpose(0, 1)
        assert_close(kiln_ternary("WHERE", cond, a, b, dt, dt), torch.where(cond, a, b))
        ci = rand((5, 7), torch.int32)  # non-bool condition
        assert_close(kiln_ternary("WHERE", ci, a, b[0], dt, dt), torch.where(ci != 0, a, b[0]))
    for dt in FLOATS:
        a, b = rand((2000,), dt), rand((2000,), dt)
        w = rand((2000,), dt, -1, 2)
        r, at = tol(dt, loose=True)
        assert_close(kiln_ternary("LERP", a, b, w, dt, dt), torch.lerp(a, b, w), r, at)
        ws = torch.tensor(0.3, dtype=dt)
        assert_close(kiln_ternary("LERP", a, b, ws, dt, dt), torch.lerp(a, b, ws), r, at)
        # vector tail (1999 = 8k + 7), the |w| = 0.5 switch between the two forms, specials
        a7, b7 = with_specials(rand((1999,), dt)), torch.flip(with_specials(rand((1999,), dt)), [0])
        w7 = rand((1999,), dt, -1, 2)
        w7[:8] = torch.tensor([0.5, -0.5, 0.4999, 0.5001, 0.0, 1.0, -1.0, 2.0], dtype=dt)
        assert_close(kiln_ternary("LERP", a7, b7, w7, dt, dt), torch.lerp(a7, b7, w7), r, at)
        for wv in (0.5, 0.9, -0.25):
            wt = torch.tensor(wv, dtype=dt)
            assert_close(kiln_ternary("LERP", a7, b7, wt, dt, dt), torch.lerp(a7, b7, wt), r, at)
        c = rand((2000,), dt, 0.5, 3)
        assert_close(kiln_ternary("ADDCMUL", a, b, c, dt, dt, 0.5),
                     torch.addcmul(a, b, c, value=0.5), r, at)
        assert_close(kiln_ternary("ADDCDIV", a, b, c, dt, dt, -2.0),
                     torch.addcdiv(a, b, c, value=-2.0), r, at)
        x = with_specials(rand((2000,), dt))
        lo, hi = rand((2000,), dt, -3, 0), rand((1,), dt, 0, 3)
        lo[5] = float("nan")
        assert_close(kiln_ternary("CLAMP_TENSOR", x, lo, hi, dt, dt), torch.clamp(x, lo, hi))
        assert_close(kiln_ternary("CLAMP_TENSOR", x, lo, None, dt, dt), torch.clamp(x, min=lo))
        assert_close(kiln_ternary("CLAMP_TENSOR", x, None, hi, dt, dt), torch.clamp(x, max=hi))
    for dt in INTS:
        a, b, c = rand((300,), dt), rand((300,), dt), rand((300,), dt)
        assert_close(kiln_ternary("ADDCMUL", a, b, c, dt, dt, 2), torch.addcmul(a, b, c, value=2))
        lo, hi = torch.minimum(b, c), torch.maximum(b, c)
        assert_close(kiln_ternary("CLAMP_TENSOR", a, lo, hi, dt, dt), torch.clamp(a, lo, hi))


# ---------------------------------------------------------------- copy / fill
def copy_values(dt):
    if dt.is_floating_point:
        return with_specials(rand((3000,), torch.float64, -300, 300)).to(dt)
    return rand((3000,), dt, -1e6, 1e6)


@pytest.mark.parametrize("src_dt", ALL)
def test_copy_all_pairs(src_dt):
    src = copy_values(src_dt)
    for dst_dt in ALL:
        if src_dt.is_floating_point and not dst_dt.is_floating_point and dst_dt != torch.bool:
            # NaN/inf/out-of-range -> int is UB in C++; kiln follows x86 cvtt like torch, but
            # compare only values torch defines.
            info = torch.iinfo(dst_dt)
            lo, hi = float(info.min) - 1.0, float(info.max) + 1.0
            ok = torch.isfinite(src) & (src.double() > lo) & (src.double() < hi)
            s = src[ok]
        else:
            s = src
        want = s.to(dst_dt)
        got = torch.empty(s.shape, dtype=dst_dt)
        check(lib.kiln_kernel_copy(desc(s), desc(got)))
        assert_close(got, want)


def test_copy_specials_match_torch_x86():
    src = torch.tensor([300., -1., float("nan"), 1e10, -1e10, float("inf"), -129., 2.7, -2.7])
    for dt in INTS:
        got = torch.empty(src.shape, dtype=dt)
        check(lib.kiln_kernel_copy(desc(src), desc(got)))
        assert got.tolist() == src.to(dt).tolist(), dt


def test_copy_layouts():
    x = rand((40, 50, 3), torch.float32)
    for src, dst in [(x.permute(2, 0, 1), torch.empty(3, 40, 50)),
                     (x, torch.empty(50, 40, 3).transpose(0, 1)),
                     (x[::2, 1::3], torch.empty(20, 17, 3, dtype=torch.bfloat16)),
                     (x[:1, :, :1], torch.empty(40, 50, 3, dtype=torch.float16)),  # broadcast
                     (torch.tensor(3.5), torch.empty(7, 3, dtype=torch.int64))]:
        check(lib.kiln_kernel_copy(desc(src), desc(dst)))
        assert_close(dst, src.expand(dst.shape).to(dst.dtype))
    big = rand((1 << 20,), torch.float32)
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        dst = torch.empty(big.shape, dtype=dt)
        check(lib.kiln_kernel_copy(desc(big), desc(dst)))
        assert_close(dst, big.to(dt))
        back = torch.empty(big.shape)
        check(lib.kiln_kernel_copy(desc(dst), desc(back)))
        assert_close(back, dst.float())


def test_fill():
    for dt in ALL:
        for v in (0.0, -3.7, 1e10, float("nan")):
            t = torch.empty(33, 5, dtype=dt).t()
            check(lib.kiln_kernel_fill(desc(t), v))
            # copy_ semantics of a double (x86 cvtt for out-of-range ints, inf for f16)
            want = torch.tensor(v, dtype=torch.float64).to(dt).expand(5, 33)
            assert_close(t, want.contiguous())
    t = torch.empty(100, dtype=torch.int64)
    check(lib.kiln_kernel_fill_i64(desc(t), 2**62 + 1))
    assert (t == 2**62 + 1).all()


# ---------------------------------------------------------------- reductions
def kiln_reduce(op, x, dims, compute, out_dtype, correction=1.0, p=2.0):
    dims = tuple(d % max(x.dim(), 1) for d in dims) if x.dim() else ()
    mask = sum(1 << d for d in dims)
    oshape = [1 if (i in dims or not dims) else s for i, s in enumerate(x.shape)]
    out = torch.empty(oshape, dtype=out_dtype)
    rp = ReduceParams(correction, p)
    check(lib.kiln_kernel_reduce(R[op], desc(x), mask, ctypes.pointer(rp), DT[compute],
                                 desc(out)))
    return out


def torch_reduce(op, x, dims, correction=1.0, p=2.0):
    kw = dict(dim=dims, keepdim=True) if dims else {}
    if op == "SUM":
        return torch.sum(x, **kw)
    if op == "MEAN":
        return torch.mean(x, **kw)
    if op == "PROD":
        return torch.prod(x) if not dims else prod_dims(x, dims)
    if op == "AMAX":
        return torch.amax(x, **kw)
    if op == "AMIN":
        return torch.amin(x, **kw)
    if op == "ANY":
        return torch.any(x, **kw) if dims else torch.any(x)
    if op == "ALL":
        return torch.all(x, **kw) if dims else torch.all(x)
    if op == "VAR":
        return torch.var(x, correction=correction, **kw)
    if op == "STD":
        return torch.std(x, correction=correction, **kw)
    if op == "NORM":
        return torch.linalg.vector_norm(x, ord=p, **kw)
    if op == "LOGSUMEXP":
        return torch.logsumexp(x, dim=dims if dims else tuple(range(x.dim())), keepdim=True)


def prod_dims(x, dims):
    for d in sorted(dims, reverse=True):
        x = torch.prod(x, dim=d, keepdim=True)
    return x


RED_LAYOUTS = [
    ((1000,), (), None), ((37, 41), (1,), None), ((37, 41), (0,), None),
    ((4, 5, 6, 7), (0, 2), None), ((4, 5, 6, 7), (1, 3), "perm"), ((300, 20), (0,), "t"),
    ((9, 130), (1,), "step"), ((), (), None), ((0, 5), (0,), None), ((3, 0), (1,), None),
    ((200000,), (), None), ((3, 70000), (1,), None), ((70000, 3), (0,), None),
    ((513, 300), (0,), None),
]


def red_input(shape, dt, kind, op):
    lo, hi = (0.5, 1.5) if op == "PROD" else (-4, 4)
    x = rand(shape, dt, lo, hi)
    if kind == "perm":
        x = x.permute(3, 1, 0, 2).contiguous().permute(2, 1, 3, 0)
    elif kind == "t":
        x = x.t().contiguous().t()
    elif kind == "step":
        x = rand((shape[0], shape[1] * 2), dt, lo, hi)[:, ::2]
    return x


RED_DTYPES = {
    "SUM": ALL, "MEAN": FLOATS, "PROD": FLOATS + INTS, "AMAX": ALL, "AMIN": ALL,
    "ANY": ALL, "ALL": ALL, "VAR": FLOATS, "STD": FLOATS, "NORM": FLOATS, "LOGSUMEXP": FLOATS,
}


@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
@pytest.mark.parametrize("op", list(R))
def test_reduce(op):
    for dt in RED_DTYPES[op]:
        for shape, dims, kind in RED_LAYOUTS:
            if op == "PROD" and math.prod(shape) > 5000:
                continue
            x = red_input(shape, dt, kind, op)
            empty = x.numel() == 0 or any(x.shape[d] == 0 for d in dims)
            if op in ("AMAX", "AMIN") and (empty or (not dims and x.numel() == 0)):
                with pytest.raises(KilnError, match="non-zero size"):
                    kiln_reduce(op, x, dims, dt, dt)
                continue
            if op == "LOGSUMEXP" and x.numel() == 0:
                continue  # torch.logsumexp of an empty dim is -inf; checked in test_reduce_edges
            want = torch_reduce(op, x, dims)
            if op == "PROD" and dt in (torch.float16, torch.bfloat16):
                # torch multiplies in the 16-bit type (one rounding per element); kiln
                # accumulates in double: compare with the exact product rounded once.
                want = torch_reduce(op, x.double(), dims).to(dt)
            if op in ("SUM", "PROD") and not dt.is_floating_point:
                compute = torch.int64
            elif op in ("ANY", "ALL"):
                compute = dt
            else:
                compute = dt
            got = kiln_reduce(op, x, dims, compute, want.dtype)
            if not dims:
                want = want.reshape([1] * x.dim())
            r, at = tol(want.dtype, loose=True)
            if want.dtype == torch.float32:
                r, at = 2e-5, 1e-5
            if want.dtype in (torch.float16, torch.bfloat16):
                r, at = r * 2, 1e-2
            assert_close(got, want, r, at)


def test_reduce_norm_orders():
    x = with_specials(rand((3000,), torch.float32))[13:]   # drop the NaN
    x2 = rand((50, 60), torch.float64)
    for p in (0.0, 1.0, 2.0, 3.0, 0.5, float("inf"), float("-inf")):
        assert_close(kiln_reduce("NORM", x, (), torch.float32, torch.float32, p=p),
                     torch.linalg.vector_norm(x, ord=p).reshape(1), 2e-5, 1e-6)
        assert_close(kiln_reduce("NORM", x2, (1,), torch.float64, torch.float64, p=p),
                     torch.linalg.vector_norm(x2, ord=p, dim=1, keepdim=True), 1e-10)


@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
def test_reduce_vertical_row_split():
    """Few outputs over many rows (a norm's weight gradient) split the rows into fixed chunks."""
    cases = [((8, 128, 128), (0, 1), torch.float32), ((3000, 70), (0,), torch.float32),
             ((2, 9000, 33), (0, 1), torch.float64), ((4, 4096, 100), (0, 1), torch.float16)]
    for shape, dims, dt in cases:
        x = rand(shape, dt, -2, 3)
        for op in ("SUM", "MEAN"):
            compute = torch.float32 if dt == torch.float16 else dt
            got = kiln_reduce(op, x, dims, compute, dt)
            want = torch_reduce(op, x, dims)
            r, a = tol(dt, loose=True)
            assert_close(got, want, r, max(a, 1e-5 if dt == torch.float32 else a))
            # a transposed (non-unit column stride) copy takes the staged rows
            xt = x.transpose(-1, -2).contiguous().transpose(-1, -2)
            assert_close(kiln_reduce(op, xt, dims, compute, dt), want, r, max(a, 1e-5 if dt == torch.float32 else a))


def test_reduce_edges():
    x = torch.tensor([1.0, float("nan"), 3.0])
    for op in ("SUM", "MEAN", "AMAX", "AMIN", "VAR", "LOGSUMEXP"):
        assert math.isnan(kiln_reduce(op, x, (), torch.float32, torch.float32).item()), op
    inf = torch.tensor([1.0, float("inf"), 3.0])
    assert_close(kiln_reduce("LOGSUMEXP", inf, (), torch.float32, torch.float32),
                 torch.logsumexp(inf, 0).reshape(1))
    ninf = torch.full((4,), float("-inf"))
    assert_close(kiln_reduce("LOGSUMEXP", ninf, (), torch.float32, torch.float32),
                 torch.logsumexp(ninf, 0).reshape(1))
    e = torch.empty(0, 3)
    assert_close(kiln_reduce("LOGSUMEXP", e, (0,), torch.float32, torch.float32),
                 torch.logsumexp(e, 0, keepdim=True))
    for c in (0.0, 1.0, 2.0, 5.0):
        y = rand((4, 3), torch.float64)
        assert_close(kiln_reduce("VAR", y, (0,), torch.float64, torch.float64, correction=c),
                     torch.var(y, 0, correction=c, keepdim=True), 1e-12)
    one = torch.tensor([2.0])
    assert math.isnan(kiln_reduce("STD", one, (), torch.float32, torch.float32).item())
    # sum of a large f32 vector (accuracy vs a double reference)
    big = rand((1 << 24,), torch.float32, -1, 3)
    got = kiln_reduce("SUM", big, (), torch.float32, torch.float32).item()
    ref = big.double().sum().item()
    assert abs(got - ref) <= 1e-6 * abs(ref)
    assert abs(torch.sum(big).item() - ref) <= 1e-5 * abs(ref)
    # int sum wraps in int64, int32 input promotes to int64
    xi = torch.full((10,), 2**62, dtype=torch.int64)
    assert kiln_reduce("SUM", xi, (), torch.int64, torch.int64).item() == torch.sum(xi).item()
    # keepdim=False view: out is a 1-d view with a size-1 dim re-inserted (stride 0)
    y = rand((6, 7), torch.float32)
    res = torch.empty(6)
    o = desc(res)
    o.contents.ndim = 2
    o.contents.shape[1], o.contents.strides[1] = 1, 0
    check(lib.kiln_kernel_reduce(R["SUM"], desc(y), 2, None, DT[torch.float32], o))
    assert_close(res, y.sum(1), 1e-6, 1e-6)
    # full reduction into a rank-0 out, with f16 compute from f32 input
    res0 = torch.empty((), dtype=torch.float16)
    check(lib.kiln_kernel_reduce(R["MEAN"], desc(y), 0, None, DT[torch.float16], desc(res0)))
    assert_close(res0, y.half().mean(), 1e-3, 1e-3)
    with pytest.raises(KilnError, match="output shape"):
        kiln_reduce_bad = torch.empty(3)
        check(lib.kiln_kernel_reduce(R["SUM"], desc(y), 1, None, DT[torch.float32],
                                     desc(kiln_reduce_bad)))
    with pytest.raises(KilnError, match="floating"):
        kiln_reduce("MEAN", rand((4,), torch.int32), (), torch.int32, torch.int32)


def kiln_index(op, x, dim, with_values=True):
    all_dims = dim is None
    if all_dims:
        oshape = []
    else:
        oshape = list(x.shape)
        if x.dim():
            oshape[dim] = 1
    idx = torch.empty(oshape, dtype=torch.int64)
    val = torch.empty(oshape, dtype=x.dtype) if with_values else None
    d = -(2**31) if all_dims else dim
    check(lib.kiln_kernel_reduce_index(0 if op == "MAX" else 1, desc(x), d, desc(val), desc(idx)))
    return val, idx


@pytest.mark.parametrize("op", ["MAX", "MIN"])
def test_reduce_index(op):
    for dt in ALL:
        for shape, dim, kind in [((50,), 0, None), ((30, 40), 1, None), ((30, 40), 0, None),
                                 ((300, 70), 0, "t"), ((5, 6, 7), -2, None), ((), 0, None),
                                 ((40000, 2), 0, None)]:
            x = rand(shape, dt, -3, 3)  # many ties: first index must win
            if kind == "t":
                x = x.t().contiguous().t()
            if dt.is_floating_point and x.dim() == 2 and x.shape[0] > 4:
                x[3, 1] = float("nan")
                x[4, 1] = float("nan")
            fn = torch.max if op == "MAX" else torch.min
            wv, wi = fn(x, dim, keepdim=True) if x.dim() else fn(x, 0, keepdim=True)
            val, idx = kiln_index(op, x, dim)
            assert_close(val, wv)
            assert torch.equal(idx, wi), (dt, shape, dim)
            _, idx2 = kiln_index(op, x, dim, with_values=False)
            assert torch.equal(idx2, wi)
        if dt == torch.bool:
            continue  # torch.argmax/argmin reject bool
        x = rand((13, 17), dt, -3, 3).t()
        _, idx = kiln_index(op, x, None)
        want = torch.argmax(x) if op == "MAX" else torch.argmin(x)
        assert idx.item() == want.item()
    with pytest.raises(KilnError, match="non-zero size"):
        kiln_index(op, torch.empty(0, 3), 0)


@pytest.mark.parametrize("prod", [False, True])
def test_cumulative(prod):
    fn, kfn = (torch.cumprod, lib.kiln_kernel_cumprod) if prod else (torch.cumsum,
                                                                      lib.kiln_kernel_cumsum)
    for dt in FLOATS + INTS + [torch.bool]:
        for shape, dim, kind in [((100,), 0, None), ((30, 40), 1, None), ((30, 40), 0, None),
                                 ((40, 30), 1, "t"), ((4, 5, 6), -1, None), ((), 0, None),
                                 ((0, 3), 0, None), ((3000, 20), 0, None)]:
            x = rand(shape, dt, 0.8, 1.25) if prod and dt.is_floating_point else rand(shape, dt)
            if kind == "t":
                x = x.t().contiguous().t()
            want = fn(x, dim)
            compute = want.dtype
            out = torch.empty(want.shape, dtype=want.dtype)
            check(kfn(desc(x), dim, DT[compute], desc(out)))
            r, at = tol(want.dtype, loose=True)
            if want.dtype in (torch.float16, torch.bfloat16):
                r, at = r * 4, 1e-2
            assert_close(out, want, r, at)
    x = rand((64, 64), torch.float32)
    want = fn(x, 0)
    check(kfn(desc(x), 0, DT[torch.float32], desc(x)))  # in place
    assert_close(x, want, 2e-6, 1e-6)
