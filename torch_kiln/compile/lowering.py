# SPDX-License-Identifier: Apache-2.0
"""Lowering of core-ATen FX graphs (what aot_autograd produces) to the kiln IR.

`LOWERINGS` maps an aten OpOverload to a function ``(b, node, args, kwargs) -> value`` where
``b`` is a `GraphBuilder` and a value is a kiln value id (int), a python number, None, or a
tuple of those for multi-output ops. `supported(node)` says whether a node can be lowered; the
backend splits graphs at nodes that cannot (they run eagerly on kiln) and names them in its log.
"""
import ctypes
import math
import operator

import torch

from . import _capi
from ._capi import E, check, lib

aten = torch.ops.aten
prims = torch.ops.prims

DTYPES = {torch.float32: E["KILN_DTYPE_F32"], torch.float16: E["KILN_DTYPE_F16"],
          torch.bfloat16: E["KILN_DTYPE_BF16"], torch.float64: E["KILN_DTYPE_F64"],
          torch.int8: E["KILN_DTYPE_I8"], torch.int16: E["KILN_DTYPE_I16"], torch.int32: E["KILN_DTYPE_I32"],
          torch.int64: E["KILN_DTYPE_I64"], torch.uint8: E["KILN_DTYPE_U8"], torch.bool: E["KILN_DTYPE_BOOL"]}


class Unsupported(Exception):
    """This node cannot be lowered (the graph is split here)."""


def _i64s(xs):
    xs = [int(x) for x in xs]
    return (ctypes.c_int64 * max(len(xs), 1))(*xs), len(xs)


def _meta(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def static_val(v):
    """True if `v` (a node's meta value) is a tensor (or tuple of) with kiln dtype, static shape."""
    if isinstance(v, (tuple, list)):
        return all(x is None or isinstance(x, (int, float, bool)) or static_val(x) for x in v)
    if not isinstance(v, torch.Tensor):
        return isinstance(v, (int, float, bool)) and not isinstance(v, torch.SymInt)
    if v.dtype not in DTYPES or v.dim() > 8 or v.layout != torch.strided:
        return False
    return all(isinstance(s, int) for s in v.shape)


class GraphBuilder:
    """Owns one kiln_graph_t while an FX graph is lowered into it."""

    def __init__(self):
        self.g = ctypes.c_void_p()
        check(lib.kiln_graph_create(ctypes.byref(self.g)), "kiln_graph_create")

    def close(self):
        if self.g:
            lib.kiln_graph_destroy(self.g)
            self.g = ctypes.c_void_p()

    def _vid(self, fn, *args):
        out = ctypes.c_int(-1)
        check(fn(self.g, *args, ctypes.byref(out)), fn.__name__)
        return out.value

    # -- leaves
    def input(self, dtype, shape):
        arr, n = _i64s(shape)
        return self._vid(lib.kiln_graph_input, DTYPES[dtype], n, arr)

    def constant(self, t):
        t = t.detach().contiguous().cpu()
        arr, n = _i64s(t.shape)
        return self._vid(lib.kiln_graph_constant, DTYPES[t.dtype], n, arr, ctypes.c_void_p(t.data_ptr()))

    def scalar(self, v, dtype=None):
        """A wrapped-number scalar (torch's python-scalar promotion rules)."""
        if dtype is None:
            dtype = torch.bool if isinstance(v, bool) else torch.int64 if isinstance(v, int) else torch.float64
        if dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8) and isinstance(v, int):
            return self._vid(lib.kiln_graph_scalar_i64, int(v), DTYPES[dtype])
        return self._vid(lib.kiln_graph_scalar, float(v), DTYPES[dtype])

    def info(self, vid):
        dt, nd = ctypes.c_int(), ctypes.c_int()
        shape = (ctypes.c_int64 * 8)()
        check(lib.kiln_graph_value_info(self.g, vid, ctypes.byref(dt), ctypes.byref(nd), shape), "value_info")
        return dt.value, list(shape[: nd.value])

    def tensor(self, v):
        """A value id for an operand that may be a python number (a wrapped-number scalar)."""
        if isinstance(v, _VID):
            return int(v)
        if isinstance(v, (bool, int, float)):
            return self.scalar(v)
        raise Unsupported(f"operand {v!r}")

    # -- ops
    def unary(self, op, x, out_dtype):
        return _VID(self._vid(lib.kiln_graph_unary, E[op], x, DTYPES[out_dtype]))

    def unary_ex(self, op, x, out_dtype, alpha=0.0, scale=1.0, input_scale=1.0, threshold=20.0, lo=None, hi=None):
        return _VID(self._vid(lib.kiln_graph_unary_ex, E[op], x, alpha, scale, input_scale, threshold,
                              0.0 if lo is None else float(lo), 0.0 if hi is None else float(hi),
                              int(lo is not None), int(hi is not None), DTYPES[out_dtype]))

    def binary(self, op, a, b, out_dtype, alpha=1.0):
        return _VID(self._vid(lib.kiln_graph_binary, E[op], self.tensor(a), self.tensor(b), float(alpha),
                              DTYPES[out_dtype]))

    def ternary(self, op, a, b, c, out_dtype, scalar=0.0):
        return _VID(self._vid(lib.kiln_graph_ternary, E[op], a, b, c, float(scalar), DTYPES[out_dtype]))


class _VID(int):
    """A kiln value id (distinguishes graph values from python int operands)."""


def V(x):
    return x if isinstance(x, _VID) else None


def out_dtype(node):
    return _meta(node).dtype


def wrap_dims(dims, rank):
    if dims is None:
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return [d % rank if rank else 0 for d in dims]


def dim_mask(dims, rank):
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return 0 if rank == 0 else (1 << rank) - 1
    m = 0
    for d in wrap_dims(dims, rank):
        m |= 1 << d
    return m


LOWERINGS = {}


def lowers(*ops):
    def deco(fn):
        for op in ops:
            LOWERINGS[op] = fn
        return fn
    return deco


# ---- pointwise ---------------------------------------------------------------------------

_UNARY = {
    aten.neg.default: "KILN_UNARY_NEG", aten.abs.default: "KILN_UNARY_ABS", aten.exp.default: "KILN_UNARY_EXP",
    aten.expm1.default: "KILN_UNARY_EXPM1", aten.log.default: "KILN_UNARY_LOG",
    aten.log1p.default: "KILN_UNARY_LOG1P", aten.log2.default: "KILN_UNARY_LOG2",
    aten.sqrt.default: "KILN_UNARY_SQRT", aten.rsqrt.default: "KILN_UNARY_RSQRT",
    aten.reciprocal.default: "KILN_UNARY_RECIPROCAL", aten.sin.default: "KILN_UNARY_SIN",
    aten.cos.default: "KILN_UNARY_COS", aten.tan.default: "KILN_UNARY_TAN", aten.tanh.default: "KILN_UNARY_TANH",
    aten.sigmoid.default: "KILN_UNARY_SIGMOID", aten.relu.default: "KILN_UNARY_RELU",
    aten.silu.default: "KILN_UNARY_SILU", aten.erf.default: "KILN_UNARY_ERF",
    aten.floor.default: "KILN_UNARY_FLOOR", aten.ceil.default: "KILN_UNARY_CEIL",
    aten.round.default: "KILN_UNARY_ROUND", aten.trunc.default: "KILN_UNARY_TRUNC",
    aten.sign.default: "KILN_UNARY_SIGN", aten.logical_not.default: "KILN_UNARY_LOGICAL_NOT",
    aten.bitwise_not.default: "KILN_UNARY_BITWISE_NOT", aten.isnan.default: "KILN_UNARY_ISNAN",
    aten.isinf.default: "KILN_UNARY_ISINF", aten.asin.default: "KILN_UNARY_ASIN",
    aten.acos.default: "KILN_UNARY_ACOS", aten.atan.default: "KILN_UNARY_ATAN",
    aten.sinh.default: "KILN_UNARY_SINH", aten.cosh.default: "KILN_UNARY_COSH",
    aten.erfc.default: "KILN_UNARY_ERFC",
}


def _unary(b, node, args, kwargs):
    return b.unary(_UNARY[node.target], V(args[0]), out_dtype(node))


for _op in _UNARY:
    LOWERINGS[_op] = _unary


@lowers(aten.gelu.default)
def _gelu(b, node, args, kwargs):
    approx = kwargs.get("approximate", args[1] if len(args) > 1 else "none")
    return b.unary("KILN_UNARY_GELU_TANH" if approx == "tanh" else "KILN_UNARY_GELU", V(args[0]), out_dtype(node))


@lowers(aten.leaky_relu.default)
def _leaky(b, node, args, kwargs):
    slope = args[1] if len(args) > 1 else kwargs.get("negative_slope", 0.01)
    return b.unary_ex("KILN_UNARY_LEAKY_RELU", V(args[0]), out_dtype(node), alpha=float(slope))


@lowers(aten.clamp.default)
def _clamp(b, node, args, kwargs):
    lo = args[1] if len(args) > 1 else kwargs.get("min")
    hi = args[2] if len(args) > 2 else kwargs.get("max")
    return b.unary_ex("KILN_UNARY_CLAMP", V(args[0]), out_dtype(node), lo=lo, hi=hi)


@lowers(aten.clamp.Tensor)
def _clamp_tensor(b, node, args, kwargs):
    lo = args[1] if len(args) > 1 else kwargs.get("min")
    hi = args[2] if len(args) > 2 else kwargs.get("max")
    if lo is None and hi is None:
        raise Unsupported("clamp without bounds")
    return b.ternary("KILN_TERNARY_CLAMP_TENSOR", V(args[0]), -1 if lo is None else b.tensor(lo),
                     -1 if hi is None else b.tensor(hi), out_dtype(node))


@lowers(aten.clamp_min.default)
def _clamp_min(b, node, args, kwargs):
    return b.unary_ex("KILN_UNARY_CLAMP", V(args[0]), out_dtype(node), lo=args[1])


@lowers(aten.clamp_max.default)
def _clamp_max(b, node, args, kwargs):
    return b.unary_ex("KILN_UNARY_CLAMP", V(args[0]), out_dtype(node), hi=args[1])


@lowers(aten.pow.Tensor_Scalar)
def _pow_scalar(b, node, args, kwargs):
    e = args[1]
    if not isinstance(args[0], _VID):
        raise Unsupported("pow of a python number")
    if not out_dtype(node).is_floating_point and (not isinstance(e, int) or e < 0):
        raise Unsupported("integer pow with a negative/float exponent")
    return b.unary_ex("KILN_UNARY_POW_SCALAR", V(args[0]), out_dtype(node), alpha=float(e))


@lowers(aten.pow.Scalar)
def _pow_base_scalar(b, node, args, kwargs):
    return b.binary("KILN_BINARY_POW", args[0], args[1], out_dtype(node))


_BINARY = {
    aten.add.Tensor: "KILN_BINARY_ADD", aten.add.Scalar: "KILN_BINARY_ADD",
    aten.sub.Tensor: "KILN_BINARY_SUB", aten.sub.Scalar: "KILN_BINARY_SUB",
    aten.mul.Tensor: "KILN_BINARY_MUL", aten.mul.Scalar: "KILN_BINARY_MUL",
    aten.div.Tensor: "KILN_BINARY_DIV", aten.div.Scalar: "KILN_BINARY_DIV",
    aten.pow.Tensor_Tensor: "KILN_BINARY_POW", aten.maximum.default: "KILN_BINARY_MAXIMUM",
    aten.minimum.default: "KILN_BINARY_MINIMUM", aten.atan2.default: "KILN_BINARY_ATAN2",
    aten.remainder.Tensor: "KILN_BINARY_REMAINDER", aten.remainder.Scalar: "KILN_BINARY_REMAINDER",
    aten.fmod.Tensor: "KILN_BINARY_FMOD", aten.fmod.Scalar: "KILN_BINARY_FMOD",
    aten.floor_divide.default: "KILN_BINARY_DIV_FLOOR",
    aten.eq.Tensor: "KILN_BINARY_EQ", aten.eq.Scalar: "KILN_BINARY_EQ",
    aten.ne.Tensor: "KILN_BINARY_NE", aten.ne.Scalar: "KILN_BINARY_NE",
    aten.lt.Tensor: "KILN_BINARY_LT", aten.lt.Scalar: "KILN_BINARY_LT",
    aten.le.Tensor: "KILN_BINARY_LE", aten.le.Scalar: "KILN_BINARY_LE",
    aten.gt.Tensor: "KILN_BINARY_GT", aten.gt.Scalar: "KILN_BINARY_GT",
    aten.ge.Tensor: "KILN_BINARY_GE", aten.ge.Scalar: "KILN_BINARY_GE",
    aten.logical_and.default: "KILN_BINARY_LOGICAL_AND", aten.logical_or.default: "KILN_BINARY_LOGICAL_OR",
    aten.logical_xor.default: "KILN_BINARY_LOGICAL_XOR",
    aten.bitwise_and.Tensor: "KILN_BINARY_BITWISE_AND", aten.bitwise_or.Tensor: "KILN_BINARY_BITWISE_OR",
    aten.bitwise_xor.Tensor: "KILN_BINARY_BITWISE_XOR",
    aten.sigmoid_backward.default: "KILN_BINARY_SIGMOID_BACKWARD",
    aten.tanh_backward.default: "KILN_BINARY_TANH_BACKWARD",
    aten.silu_backward.default: "KILN_BINARY_SILU_BACKWARD",
}


def _binary(b, node, args, kwargs):
    alpha = kwargs.get("alpha", args[2] if len(args) > 2 else 1)
    return b.binary(_BINARY[node.target], args[0], args[1], out_dtype(node), alpha=alpha)


for _op in _BINARY:
    LOWERINGS[_op] = _binary


@lowers(aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div_mode(b, node, args, kwargs):
    mode = kwargs.get("rounding_mode", args[2] if len(args) > 2 else None)
    op = {None: "KILN_BINARY_DIV", "trunc": "KILN_BINARY_DIV_TRUNC", "floor": "KILN_BINARY_DIV_FLOOR"}[mode]
    return b.binary(op, args[0], args[1], out_dtype(node))


@lowers(aten.rsub.Scalar, aten.rsub.Tensor)
def _rsub(b, node, args, kwargs):
    alpha = kwargs.get("alpha", args[2] if len(args) > 2 else 1)
    return b.binary("KILN_BINARY_SUB", args[1], args[0], out_dtype(node), alpha=alpha)


@lowers(aten.threshold_backward.default)
def _threshold_backward(b, node, args, kwargs):
    return b.binary("KILN_BINARY_THRESHOLD_BACKWARD", args[0], args[1], out_dtype(node), alpha=float(args[2]))


@lowers(aten.gelu_backward.default)
def _gelu_backward(b, node, args, kwargs):
    approx = kwargs.get("approximate", args[2] if len(args) > 2 else "none")
    op = "KILN_BINARY_GELU_TANH_BACKWARD" if approx == "tanh" else "KILN_BINARY_GELU_BACKWARD"
    return b.binary(op, args[0], args[1], out_dtype(node))


@lowers(aten.where.self)
def _where(b, node, args, kwargs):
    return _VID(b._vid(lib.kiln_graph_where, b.tensor(args[0]), b.tensor(args[1]), b.tensor(args[2])))


@lowers(aten.addcmul.default, aten.addcdiv.default)
def _addc(b, node, args, kwargs):
    value = kwargs.get("value", args[3] if len(args) > 3 else 1)
    op = "KILN_TERNARY_ADDCMUL" if node.target is aten.addcmul.default else "KILN_TERNARY_ADDCDIV"
    return b.ternary(op, b.tensor(args[0]), b.tensor(args[1]), b.tensor(args[2]), out_dtype(node), scalar=value)


@lowers(aten.lerp.Scalar, aten.lerp.Tensor)
def _lerp(b, node, args, kwargs):
    return b.ternary("KILN_TERNARY_LERP", b.tensor(args[0]), b.tensor(args[1]), b.tensor(args[2]), out_dtype(node))


@lowers(aten._to_copy.default, prims.convert_element_type.default)
def _cast(b, node, args, kwargs):
    # kiln memory is host-visible, so a cpu <-> kiln copy is an ordinary copy inside the program.
    dst = _meta(node)
    vid = b._vid(lib.kiln_graph_cast, V(args[0]), DTYPES[dst.dtype])
    if vid == int(args[0]):
        vid = b._vid(lib.kiln_graph_contiguous, vid)
    return _VID(vid)


@lowers(aten.clone.default)
def _clone(b, node, args, kwargs):
    return _VID(b._vid(lib.kiln_graph_contiguous, V(args[0])))


@lowers(aten.copy.default)
def _copy(b, node, args, kwargs):
    return _VID(b._vid(lib.kiln_graph_copy, V(args[0]), b.tensor(args[1])))


@lowers(aten.alias.default, aten.detach.default, aten.lift_fresh_copy.default)
def _identity(b, node, args, kwargs):
    return args[0]


# ---- factories ---------------------------------------------------------------------------

@lowers(aten.arange.default, aten.arange.start, aten.arange.start_step)
def _arange(b, node, args, kwargs):
    """A graph op (not a folded constant), so an exported program's positions follow its
    dynamic sizes; the compiler still folds it when the program is compiled."""
    m = _meta(node)
    a = list(args) + [None] * 3
    if node.target is aten.arange.default:
        start, step = 0, 1
    elif node.target is aten.arange.start:
        start, step = a[0], 1
    else:
        start, step = a[0], a[2] if a[2] is not None else kwargs.get("step", 1)
    integral = not m.dtype.is_floating_point
    if integral and (float(start) != int(start) or float(step) != int(step)):
        kw = dict(kwargs)
        kw["device"] = "cpu"
        return _VID(b.constant(node.target(*args, **kw)))
    return _VID(b._vid(lib.kiln_graph_arange, DTYPES[m.dtype], int(m.shape[0]), float(start), float(step)))


@lowers(aten.full.default, aten.full_like.default, aten.zeros_like.default, aten.ones_like.default,
        aten.zeros.default, aten.ones.default, aten.empty_like.default, aten.empty.memory_format,
        aten.scalar_tensor.default, aten.new_zeros.default, aten.new_ones.default, aten.new_full.default,
        aten.empty_permuted.default, aten.empty_strided.default)
def _full(b, node, args, kwargs):
    t = node.target
    m = _meta(node)
    if t in (aten.full.default, aten.full_like.default):
        value = args[1]
    elif t is aten.new_full.default:
        value = args[2]
    elif t is aten.scalar_tensor.default:
        value = args[0]
    elif t in (aten.ones_like.default, aten.ones.default, aten.new_ones.default):
        value = 1
    else:
        value = 0
    arr, n = _i64s(m.shape)
    return _VID(b._vid(lib.kiln_graph_full, DTYPES[m.dtype], n, arr, float(value)))


# ---- reductions --------------------------------------------------------------------------

def _reduce(b, op, x, dims, keepdim, dtype, param=0.0):
    _, shape = b.info(x)
    return _VID(b._vid(lib.kiln_graph_reduce, E[op], x, dim_mask(dims, len(shape)), int(bool(keepdim)),
                       float(param), DTYPES[dtype]))


@lowers(aten.sum.dim_IntList, aten.sum.default)
def _sum(b, node, args, kwargs):
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    keep = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    return _reduce(b, "KILN_REDUCE_SUM", V(args[0]), dims, keep, out_dtype(node))


@lowers(aten.mean.dim, aten.mean.default)
def _mean(b, node, args, kwargs):
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    keep = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    return _reduce(b, "KILN_REDUCE_MEAN", V(args[0]), dims, keep, out_dtype(node))


@lowers(aten.amax.default, aten.amin.default)
def _amax(b, node, args, kwargs):
    dims = args[1] if len(args) > 1 else kwargs.get("dim", [])
    keep = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    op = "KILN_REDUCE_AMAX" if node.target is aten.amax.default else "KILN_REDUCE_AMIN"
    return _reduce(b, op, V(args[0]), dims, keep, out_dtype(node))


@lowers(aten.max.default, aten.min.default)
def _max_all(b, node, args, kwargs):
    """torch.max(x) / torch.min(x): a reduction over every dim (empty x raises, as eager does)."""
    op = "KILN_REDUCE_AMAX" if node.target is aten.max.default else "KILN_REDUCE_AMIN"
    return _reduce(b, op, V(args[0]), None, False, out_dtype(node))


@lowers(aten.prod.default)
def _prod_all(b, node, args, kwargs):
    dt = kwargs.get("dtype") or out_dtype(node)
    return _reduce(b, "KILN_REDUCE_PROD", V(args[0]), None, False, dt)


@lowers(aten.prod.dim_int)
def _prod(b, node, args, kwargs):
    keep = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    return _reduce(b, "KILN_REDUCE_PROD", V(args[0]), [args[1]], keep, out_dtype(node))


@lowers(aten.var.correction)
def _var(b, node, args, kwargs):
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    corr = kwargs.get("correction", 1)
    corr = 1 if corr is None else corr
    return _reduce(b, "KILN_REDUCE_VAR", V(args[0]), dims, kwargs.get("keepdim", False), out_dtype(node), corr)


@lowers(aten.var_mean.correction)
def _var_mean(b, node, args, kwargs):
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    corr = kwargs.get("correction", 1)
    corr = 1 if corr is None else corr
    keep = kwargs.get("keepdim", False)
    dt = _meta(node)[0].dtype
    return (_reduce(b, "KILN_REDUCE_VAR", V(args[0]), dims, keep, dt, corr),
            _reduce(b, "KILN_REDUCE_MEAN", V(args[0]), dims, keep, dt))


@lowers(aten.any.dim, aten.any.dims, aten.any.default, aten.all.dim, aten.all.dims, aten.all.default)
def _anyall(b, node, args, kwargs):
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    keep = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    op = "KILN_REDUCE_ANY" if node.target.overloadpacket is aten.any else "KILN_REDUCE_ALL"
    return _reduce(b, op, V(args[0]), dims, keep, torch.bool)


@lowers(aten.argmax.default, aten.argmin.default)
def _argmax(b, node, args, kwargs):
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    keep = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    op = E["KILN_REDUCE_INDEX_MAX"] if node.target is aten.argmax.default else E["KILN_REDUCE_INDEX_MIN"]
    idx = ctypes.c_int(-1)
    d = -2147483648 if dim is None else int(dim)
    check(lib.kiln_graph_reduce_index(b.g, op, V(args[0]), d, int(bool(keep)), None, ctypes.byref(idx)), "argmax")
    return _VID(idx.value)


@lowers(aten.max.dim, aten.min.dim)
def _maxdim(b, node, args, kwargs):
    keep = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    op = E["KILN_REDUCE_INDEX_MAX"] if node.target is aten.max.dim else E["KILN_REDUCE_INDEX_MIN"]
    val, idx = ctypes.c_int(-1), ctypes.c_int(-1)
    check(lib.kiln_graph_reduce_index(b.g, op, V(args[0]), int(args[1]), int(bool(keep)), ctypes.byref(val),
                                      ctypes.byref(idx)), "max.dim")
    return (_VID(val.value), _VID(idx.value))


@lowers(aten.cumsum.default)
def _cumsum(b, node, args, kwargs):
    return _VID(b._vid(lib.kiln_graph_scan, 0, V(args[0]), int(args[1]), DTYPES[out_dtype(node)]))


# ---- linear algebra ----------------------------------------------------------------------

@lowers(aten.mm.default, aten.bmm.default, aten.matmul.default)
def _mm(b, node, args, kwargs):
    return _VID(b._vid(lib.kiln_graph_matmul, V(args[0]), V(args[1])))


@lowers(aten.addmm.default, aten.baddbmm.default)
def _addmm(b, node, args, kwargs):
    beta = kwargs.get("beta", 1)
    alpha = kwargs.get("alpha", 1)
    return _VID(b._vid(lib.kiln_graph_addmm, V(args[0]), V(args[1]), V(args[2]), float(beta), float(alpha)))


# ---- views -------------------------------------------------------------------------------

@lowers(aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.squeeze.dim, aten.squeeze.dims,
        aten.squeeze.default, aten.unsqueeze.default, aten.flatten.using_ints)
def _reshape(b, node, args, kwargs):
    arr, n = _i64s(_meta(node).shape)
    return _VID(b._vid(lib.kiln_graph_reshape, V(args[0]), n, arr))


@lowers(aten.permute.default)
def _permute(b, node, args, kwargs):
    perm = [int(d) for d in args[1]]
    return _VID(b._vid(lib.kiln_graph_permute, V(args[0]), (ctypes.c_int * max(len(perm), 1))(*perm)))


@lowers(aten.t.default, aten.transpose.int)
def _transpose(b, node, args, kwargs):
    _, shape = b.info(V(args[0]))
    r = len(shape)
    perm = list(range(r))
    if r >= 2:
        d0, d1 = (args[1] % r, args[2] % r) if node.target is aten.transpose.int else (0, 1)
        perm[d0], perm[d1] = perm[d1], perm[d0]
    return _VID(b._vid(lib.kiln_graph_permute, V(args[0]), (ctypes.c_int * max(r, 1))(*perm)))


@lowers(aten.expand.default)
def _expand(b, node, args, kwargs):
    arr, n = _i64s(_meta(node).shape)
    return _VID(b._vid(lib.kiln_graph_expand, V(args[0]), n, arr))


@lowers(aten.slice.Tensor)
def _slice(b, node, args, kwargs):
    dim = args[1] if len(args) > 1 else 0
    start = args[2] if len(args) > 2 and args[2] is not None else 0
    end = args[3] if len(args) > 3 and args[3] is not None else 2 ** 62
    step = args[4] if len(args) > 4 else 1
    return _VID(b._vid(lib.kiln_graph_slice, V(args[0]), int(dim), int(start), int(min(end, 2 ** 62)), int(step)))


@lowers(aten.split_with_sizes.default, aten.split.Tensor)
def _split(b, node, args, kwargs):
    """Consecutive slices (views) along dim: the pieces of torch.split / split_with_sizes."""
    shape = _meta(node.args[0]).shape
    dim = args[2] if len(args) > 2 else kwargs.get("dim", 0)
    d = wrap_dims([dim], len(shape))[0]
    n = int(shape[d])
    if node.target is aten.split.Tensor:
        size = int(args[1])
        sizes = [min(size, n - s) for s in range(0, n, size)] if size > 0 else [n]
    else:
        sizes = [int(s) for s in args[1]]
    if sum(sizes) != n:
        raise Unsupported(f"{node.target}: sizes {sizes} do not add up to {n}")
    outs, start = [], 0
    for s in sizes:
        outs.append(_VID(b._vid(lib.kiln_graph_slice, V(args[0]), d, start, start + s, 1)))
        start += s
    return tuple(outs)


@lowers(aten.slice_scatter.default)
def _slice_scatter(b, node, args, kwargs):
    """input with input[dim][start:end:step] = src, as views + cat (step 1) or a one-hot where."""
    x, src = V(args[0]), V(args[1])
    _, shape = b.info(x)
    r = len(shape)
    dim = (args[2] if len(args) > 2 else kwargs.get("dim", 0)) % r
    D = shape[dim]
    start = args[3] if len(args) > 3 and args[3] is not None else kwargs.get("start") or 0
    end = args[4] if len(args) > 4 and args[4] is not None else kwargs.get("end")
    step = args[5] if len(args) > 5 else kwargs.get("step", 1)
    start = max(0, min(D, start + D if start < 0 else start))
    end = D if end is None else max(0, min(D, end + D if end < 0 else end))
    n_sel = max(0, (end - start + step - 1) // step)
    if step == 1:
        parts = []
        if start > 0:
            parts.append(b._vid(lib.kiln_graph_slice, x, dim, 0, start, 1))
        parts.append(src)
        if end < D:
            parts.append(b._vid(lib.kiln_graph_slice, x, dim, end, D, 1))
        if len(parts) == 1:
            return _VID(b._vid(lib.kiln_graph_cast, src, DTYPES[out_dtype(node)]))
        return _VID(b._vid(lib.kiln_graph_cat, len(parts), (ctypes.c_int * len(parts))(*parts), dim))
    _, sshape = b.info(src)
    if D % step or start >= step or n_sel != D // step or sshape[dim] != n_sel:
        raise Unsupported("slice_scatter with a partial strided window")
    inner = shape[:dim] + [D // step, step] + shape[dim + 1:]
    sinner = shape[:dim] + [D // step, 1] + shape[dim + 1:]
    xa, xn = _i64s(inner)
    sa, sn = _i64s(sinner)
    xv = b._vid(lib.kiln_graph_reshape, x, xn, xa)
    sv = b._vid(lib.kiln_graph_reshape, src, sn, sa)
    onehot = torch.zeros([step] + [1] * (r - dim - 1), dtype=torch.bool)
    onehot.view(-1)[start] = True
    mask = b.constant(onehot)
    w = b._vid(lib.kiln_graph_where, mask, sv, xv)
    oa, on = _i64s(shape)
    return _VID(b._vid(lib.kiln_graph_reshape, w, on, oa))


@lowers(aten.select.int)
def _select(b, node, args, kwargs):
    return _VID(b._vid(lib.kiln_graph_select, V(args[0]), int(args[1]), int(args[2])))


@lowers(aten.cat.default)
def _cat(b, node, args, kwargs):
    # torch.cat skips 1-d empty inputs whatever the other inputs' rank (the legacy rule HF
    # decoders rely on when they cat onto an empty cache)
    keep = [x for x in args[0] if not (b.info(V(x))[1] == [0])]
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    m = _meta(node)
    if not keep or m.numel() == 0 and len(keep) < len(args[0]):
        arr, n = _i64s(m.shape)
        return _VID(b._vid(lib.kiln_graph_full, DTYPES[m.dtype], n, arr, 0.0))
    ids = [V(x) for x in keep]
    if len(ids) == 1 and len(keep) < len(args[0]):
        return _VID(b._vid(lib.kiln_graph_contiguous, ids[0]))
    return _VID(b._vid(lib.kiln_graph_cat, len(ids), (ctypes.c_int * len(ids))(*ids), int(dim)))


@lowers(aten.constant_pad_nd.default)
def _constant_pad(b, node, args, kwargs):
    """F.pad(mode="constant"): per padded dim, slices for negative pads and full(value) blocks
    concatenated for positive ones (the pad list runs from the last dim backwards)."""
    x = V(args[0])
    pad = list(args[1])
    value = float(args[2]) if len(args) > 2 and args[2] is not None else float(kwargs.get("value", 0.0))
    dt, shape = b.info(x)
    if len(pad) % 2 or len(pad) // 2 > len(shape):
        raise Unsupported(f"constant_pad_nd: pad {pad} for rank {len(shape)}")
    for k in range(len(pad) // 2):
        d = len(shape) - 1 - k
        lo, hi = int(pad[2 * k]), int(pad[2 * k + 1])
        n = shape[d]
        start, end = max(-lo, 0), n - max(-hi, 0)
        if start > 0 or end < n:
            x = _VID(b._vid(lib.kiln_graph_slice, x, d, start, max(end, start), 1))
            dt, shape = b.info(x)
        parts = []
        for amount in (lo, hi):
            if amount > 0:
                s = list(shape)
                s[d] = amount
                arr, nd = _i64s(s)
                parts.append(_VID(b._vid(lib.kiln_graph_full, dt, nd, arr, value)))
            else:
                parts.append(None)
        ids = [p for p in (parts[0], x, parts[1]) if p is not None]
        if len(ids) > 1:
            x = _VID(b._vid(lib.kiln_graph_cat, len(ids), (ctypes.c_int * len(ids))(*ids), d))
            dt, shape = b.info(x)
    return x


# ---- nn ----------------------------------------------------------------------------------

@lowers(aten._softmax.default, aten._log_softmax.default)
def _softmax(b, node, args, kwargs):
    log = int(node.target is aten._log_softmax.default)
    return _VID(b._vid(lib.kiln_graph_softmax, V(args[0]), int(args[1]), log, DTYPES[out_dtype(node)]))


@lowers(aten._softmax_backward_data.default, aten._log_softmax_backward_data.default)
def _softmax_bwd(b, node, args, kwargs):
    log = int(node.target is aten._log_softmax_backward_data.default)
    return _VID(b._vid(lib.kiln_graph_softmax_backward, V(args[0]), V(args[1]), int(args[2]), log,
                       DTYPES[out_dtype(node)]))


def _opt(v):
    return -1 if v is None else V(v)


@lowers(aten.native_layer_norm.default)
def _layer_norm(b, node, args, kwargs):
    out, mean, rstd = ctypes.c_int(-1), ctypes.c_int(-1), ctypes.c_int(-1)
    check(lib.kiln_graph_layer_norm(b.g, V(args[0]), _opt(args[2]), _opt(args[3]), len(args[1]), float(args[4]),
                                    ctypes.byref(out), ctypes.byref(mean), ctypes.byref(rstd)), "layer_norm")
    return (_VID(out.value), _VID(mean.value), _VID(rstd.value))


@lowers(aten.native_layer_norm_backward.default)
def _layer_norm_bwd(b, node, args, kwargs):
    gx, gw, gb = ctypes.c_int(-1), ctypes.c_int(-1), ctypes.c_int(-1)
    mask = args[7]
    m = int(mask[0]) | (int(mask[1]) << 1) | (int(mask[2]) << 2)
    check(lib.kiln_graph_layer_norm_backward(b.g, V(args[0]), V(args[1]), V(args[3]), V(args[4]), _opt(args[5]),
                                             len(args[2]), m, ctypes.byref(gx), ctypes.byref(gw), ctypes.byref(gb)),
          "layer_norm_backward")
    return tuple(_VID(v.value) if v.value >= 0 else None for v in (gx, gw, gb))


@lowers(aten.embedding.default)
def _embedding(b, node, args, kwargs):
    return _VID(b._vid(lib.kiln_graph_embedding, V(args[0]), V(args[1])))


@lowers(aten.embedding_dense_backward.default)
def _embedding_bwd(b, node, args, kwargs):
    return _VID(b._vid(lib.kiln_graph_embedding_backward, V(args[0]), V(args[1]), int(args[2]), int(args[3]),
                       int(bool(args[4]))))


@lowers(aten.nll_loss_forward.default)
def _nll(b, node, args, kwargs):
    out, tw = ctypes.c_int(-1), ctypes.c_int(-1)
    check(lib.kiln_graph_nll_loss(b.g, V(args[0]), V(args[1]), _opt(args[2]), int(args[3]), int(args[4]),
                                  ctypes.byref(out), ctypes.byref(tw)), "nll_loss")
    return (_VID(out.value), _VID(tw.value))


@lowers(aten.nll_loss_backward.default)
def _nll_bwd(b, node, args, kwargs):
    return _VID(b._vid(lib.kiln_graph_nll_loss_backward, V(args[0]), V(args[1]), V(args[2]), _opt(args[3]),
                       int(args[4]), int(args[5]), V(args[6])))


def _sdpa_scale(kwargs):
    s = kwargs.get("scale")
    return math.nan if s is None else float(s)


@lowers(aten._scaled_dot_product_fused_attention_overrideable.default)
def _sdpa(b, node, args, kwargs):
    if (args[4] if len(args) > 4 else kwargs.get("dropout_p", 0.0)) != 0.0:
        raise Unsupported("attention dropout")
    mask = args[3] if len(args) > 3 else kwargs.get("attn_bias")
    causal = args[5] if len(args) > 5 else kwargs.get("is_causal", False)
    out, lse = ctypes.c_int(-1), ctypes.c_int(-1)
    check(lib.kiln_graph_sdpa(b.g, V(args[0]), V(args[1]), V(args[2]), _opt(mask), int(bool(causal)),
                              _sdpa_scale(kwargs), ctypes.byref(out), ctypes.byref(lse)), "sdpa")
    # (output, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, philox_seed, philox_offset, debug)
    return (_VID(out.value), _VID(lse.value), None, None, None, None, None, None, None)


@lowers(aten._scaled_dot_product_fused_attention_overrideable_backward.default)
def _sdpa_bwd(b, node, args, kwargs):
    if args[12] != 0.0:
        raise Unsupported("attention dropout")
    gq, gk, gv = ctypes.c_int(-1), ctypes.c_int(-1), ctypes.c_int(-1)
    mask = args[4]
    check(lib.kiln_graph_sdpa_backward(b.g, V(args[0]), V(args[1]), V(args[2]), V(args[3]), V(args[6]), V(args[7]),
                                       _opt(mask), int(bool(args[13])), _sdpa_scale(kwargs), ctypes.byref(gq),
                                       ctypes.byref(gk), ctypes.byref(gv)), "sdpa_backward")
    return (_VID(gq.value), _VID(gk.value), _VID(gv.value), None)


# ---- indexing --------------------------------------------------------------------------------

def _i64_index(b, ix):
    """kiln's gather / scatter kernels take i64 indices; torch also accepts i32 ones."""
    dt, _ = b.info(ix)
    return ix if dt == DTYPES[torch.int64] else b._vid(lib.kiln_graph_cast, ix, DTYPES[torch.int64])


@lowers(aten.gather.default)
def _gather(b, node, args, kwargs):
    return _VID(b._vid(lib.kiln_graph_gather, V(args[0]), int(args[1]), _i64_index(b, V(args[2]))))


@lowers(aten.index_select.default)
def _index_select(b, node, args, kwargs):
    return _VID(b._vid(lib.kiln_graph_index_select, V(args[0]), int(args[1]), V(args[2])))


_SCATTER_REDUCE = {"add": "KILN_SCATTER_ADD", "multiply": "KILN_SCATTER_MULTIPLY", "sum": "KILN_SCATTER_SUM",
                   "prod": "KILN_SCATTER_PROD", "mean": "KILN_SCATTER_MEAN", "amax": "KILN_SCATTER_AMAX",
                   "amin": "KILN_SCATTER_AMIN"}


@lowers(aten.scatter.src, aten.scatter.value, aten.scatter_add.default, aten.scatter_reduce.two,
        aten.scatter.reduce, aten.scatter.value_reduce)
def _scatter(b, node, args, kwargs):
    t = node.target
    src, value = (args[3], 0.0) if isinstance(args[3], _VID) else (None, args[3])
    if t is aten.scatter_add.default:
        mode = "KILN_SCATTER_ADD"
    elif t in (aten.scatter.src, aten.scatter.value):
        mode = "KILN_SCATTER_NONE"
    else:
        mode = _SCATTER_REDUCE.get(args[4] if len(args) > 4 else kwargs.get("reduce"))
        if mode is None:
            raise Unsupported(f"scatter reduce {args[4] if len(args) > 4 else kwargs.get('reduce')!r}")
    include_self = kwargs.get("include_self", True)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, int) and abs(value) > 2 ** 53):
        raise Unsupported(f"scatter value {value!r}")
    return _VID(b._vid(lib.kiln_graph_scatter, V(args[0]), int(args[1]), _i64_index(b, V(args[2])), _opt(src),
                       float(value),
                       E[mode], int(bool(include_self))))


def _index_list(b, node, indices):
    """The index list of aten.index / index_put as value ids (-1 = full slice), the non-absent
    entries expanded to their common shape (kiln's kernels take pre-broadcast indices)."""
    metas = [_meta(n) if n is not None else None for n in node.args[1]]
    shape = torch.broadcast_shapes(*[m.shape for m in metas if m is not None])
    ids = []
    for v, m in zip(indices, metas):
        if v is None:
            ids.append(-1)
        elif tuple(m.shape) == tuple(shape):
            ids.append(int(v))
        else:
            arr, n = _i64s(shape)
            ids.append(b._vid(lib.kiln_graph_expand, V(v), n, arr))
    return (ctypes.c_int * max(len(ids), 1))(*ids), len(ids)


@lowers(aten.index.Tensor)
def _index(b, node, args, kwargs):
    arr, n = _index_list(b, node, args[1])
    return _VID(b._vid(lib.kiln_graph_index, V(args[0]), n, arr))


@lowers(aten.index_put.default)
def _index_put(b, node, args, kwargs):
    arr, n = _index_list(b, node, args[1])
    acc = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
    return _VID(b._vid(lib.kiln_graph_index_put, V(args[0]), n, arr, b.tensor(args[2]), int(bool(acc))))


# ---- CNN ops -------------------------------------------------------------------------------

def _pair(v, name, default=None):
    """A (c_int64 * 2) array from an int or a 1/2-element list (a 1-element list repeats, as ATen
    expands it); None / [] give `default` (None: a NULL pointer)."""
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return None if default is None else _pair(default, name)
    if isinstance(v, int):
        v = [v]
    v = [int(x) for x in v]
    if len(v) == 1:
        v = v * 2
    if len(v) != 2:
        raise Unsupported(f"{name} {v}: only 1-D and 2-D pooling / convolution")
    return (ctypes.c_int64 * 2)(*v)


def _spatial(node, x, ranks=(3, 4)):
    v = _meta(x) if isinstance(x, torch.fx.Node) else None
    if v is None:
        v = _meta(node.args[0])
    if v is None or v.dim() not in ranks:
        raise Unsupported(f"{node.target}: rank {None if v is None else v.dim()} input")
    return v


# CNN op -> position of the input tensor whose dtype and rank decide whether kiln lowers it
_CNN_OPS = {aten.convolution.default: 0, aten.convolution_backward.default: 1,
            aten.max_pool2d_with_indices.default: 0, aten.max_pool2d_with_indices_backward.default: 1,
            aten.avg_pool2d.default: 0, aten.avg_pool2d_backward.default: 1,
            aten._adaptive_avg_pool2d.default: 0, aten._adaptive_avg_pool2d_backward.default: 1}


def _cnn_reason(node):
    """Why a CNN op cannot be lowered (the kernels take floating [N, C, H, W] / [C, H, W] inputs,
    3-D / 4-D for convolution, not transposed), or None."""
    x = _meta(node.args[_CNN_OPS[node.target]])
    if not isinstance(x, torch.Tensor) or not x.dtype.is_floating_point:
        return f"{node.target}: {getattr(x, 'dtype', None)} input (kiln's CNN kernels are floating only)"
    if (node.target == aten.convolution.default and node.args[6]) or (
            node.target == aten.convolution_backward.default and node.args[7]):
        return f"{node.target}: transposed convolution"
    if x.dim() not in (3, 4):
        return f"{node.target}: rank-{x.dim()} input (kiln lowers 1-D and 2-D)"
    return None


def _conv_params(node, stride, padding, dilation, transposed):
    if transposed:
        raise Unsupported("transposed convolution")
    x = _meta(node.args[0])
    nd = x.dim() - 2 if x is not None else 0
    if nd not in (1, 2):
        raise Unsupported(f"{nd}-D convolution")
    for name, v in (("stride", stride), ("padding", padding), ("dilation", dilation)):
        if len(v) not in (1, nd):
            raise Unsupported(f"convolution {name} {v}")
    return _pair(stride, "stride"), _pair(padding, "padding"), _pair(dilation, "dilation")


@lowers(aten.convolution.default)
def _conv(b, node, args, kwargs):
    x, w, bias, stride, padding, dilation, transposed, _output_padding, groups = args[:9]
    st, pd, dl = _conv_params(node, stride, padding, dilation, transposed)
    return _VID(b._vid(lib.kiln_graph_conv2d, V(x), V(w), _opt(bias), st, pd, dl, int(groups)))


@lowers(aten.convolution_backward.default)
def _conv_bwd(b, node, args, kwargs):
    g, x, w, _bias_sizes, stride, padding, dilation, transposed, _output_padding, groups, mask = args[:11]
    st, pd, dl = _conv_params(node, stride, padding, dilation, transposed)
    outs = [ctypes.c_int(-1) for _ in range(3)]
    ptrs = [ctypes.byref(o) if m else None for o, m in zip(outs, mask)]
    check(lib.kiln_graph_conv2d_backward(b.g, V(g), V(x), V(w), st, pd, dl, int(groups), *ptrs),
          "conv2d_backward")
    return tuple(_VID(o.value) if m else None for o, m in zip(outs, mask))


def _arg(args, kwargs, i, name, default):
    if len(args) > i:
        return args[i]
    return kwargs.get(name, default)


@lowers(aten.max_pool2d_with_indices.default)
def _max_pool(b, node, args, kwargs):
    _spatial(node, node.args[0])
    k = _pair(args[1], "kernel_size")
    st = _pair(_arg(args, kwargs, 2, "stride", []), "stride")
    pd = _pair(_arg(args, kwargs, 3, "padding", 0), "padding")
    dl = _pair(_arg(args, kwargs, 4, "dilation", 1), "dilation")
    ceil = int(bool(_arg(args, kwargs, 5, "ceil_mode", False)))
    out, ind = ctypes.c_int(-1), ctypes.c_int(-1)
    check(lib.kiln_graph_max_pool2d(b.g, V(args[0]), k, st, pd, dl, ceil, ctypes.byref(out), ctypes.byref(ind)),
          "max_pool2d")
    return (_VID(out.value), _VID(ind.value))


@lowers(aten.max_pool2d_with_indices_backward.default)
def _max_pool_bwd(b, node, args, kwargs):
    x = _spatial(node, node.args[1])
    return _VID(b._vid(lib.kiln_graph_max_pool2d_backward, V(args[0]), V(args[7]), int(x.shape[-2]),
                       int(x.shape[-1])))


def _avg_params(args, kwargs, at):
    k = _pair(args[at], "kernel_size")
    st = _pair(_arg(args, kwargs, at + 1, "stride", []), "stride")
    pd = _pair(_arg(args, kwargs, at + 2, "padding", 0), "padding")
    ceil = int(bool(_arg(args, kwargs, at + 3, "ceil_mode", False)))
    cip = int(bool(_arg(args, kwargs, at + 4, "count_include_pad", True)))
    div = _arg(args, kwargs, at + 5, "divisor_override", None)
    if div is not None and int(div) <= 0:
        raise Unsupported(f"divisor_override {div}")
    return k, st, pd, ceil, cip, 0 if div is None else int(div)


@lowers(aten.avg_pool2d.default)
def _avg_pool(b, node, args, kwargs):
    _spatial(node, node.args[0])
    return _VID(b._vid(lib.kiln_graph_avg_pool2d, V(args[0]), *_avg_params(args, kwargs, 1)))


@lowers(aten.avg_pool2d_backward.default)
def _avg_pool_bwd(b, node, args, kwargs):
    x = _spatial(node, node.args[1])
    return _VID(b._vid(lib.kiln_graph_avg_pool2d_backward, V(args[0]), int(x.shape[-2]), int(x.shape[-1]),
                       *_avg_params(args, kwargs, 2)))


@lowers(aten._adaptive_avg_pool2d.default)
def _adaptive_pool(b, node, args, kwargs):
    _spatial(node, node.args[0])
    oh, ow = list(_pair(args[1], "output_size"))
    return _VID(b._vid(lib.kiln_graph_adaptive_avg_pool2d, V(args[0]), oh, ow))


@lowers(aten._adaptive_avg_pool2d_backward.default)
def _adaptive_pool_bwd(b, node, args, kwargs):
    x = _spatial(node, node.args[1])
    return _VID(b._vid(lib.kiln_graph_adaptive_avg_pool2d_backward, V(args[0]), int(x.shape[-2]),
                       int(x.shape[-1])))


# ---- support query -----------------------------------------------------------------------

_MULTI_OUTPUT_OPS = {aten.native_layer_norm.default, aten.native_layer_norm_backward.default,
                     aten.nll_loss_forward.default, aten.max.dim, aten.min.dim,
                     aten._scaled_dot_product_fused_attention_overrideable.default,
                     aten._scaled_dot_product_fused_attention_overrideable_backward.default,
                     aten.convolution_backward.default, aten.max_pool2d_with_indices.default,
                     aten.var_mean.correction, aten.split_with_sizes.default, aten.split.Tensor}


def unsupported_reason(node):
    """None if `node` can be lowered, else a short reason."""
    if node.op != "call_function":
        return None
    if node.target is operator.getitem:
        src = node.args[0]
        if isinstance(src, torch.fx.Node) and src.target in _MULTI_OUTPUT_OPS:
            v = _meta(node)
            if v is None or isinstance(v, torch.Tensor) and static_val(v):
                return None
        return "getitem"
    if node.target not in LOWERINGS:
        if foldable_factory(node):
            return None
        return f"no kiln lowering for {node.target}"
    if node.target in _CNN_OPS:
        r = _cnn_reason(node)
        if r:
            return r
    if node.target in (aten.index.Tensor, aten.index_put.default):
        for ix in node.args[1]:
            m = _meta(ix) if ix is not None else None
            if m is not None and m.dtype not in (torch.int32, torch.int64):
                return f"{node.target}: {m.dtype} index (kiln lowers integer indices)"
        if node.target is aten.index_put.default and not isinstance(node.args[2], torch.fx.Node):
            return f"{node.target}: scalar values"
    v = _meta(node)
    if v is None or not static_val(v):
        return f"{node.target}: dynamic shape or dtype kiln lacks"
    for a in node.all_input_nodes:
        av = _meta(a)
        if av is not None and not static_val(av):
            return f"{node.target}: input with dynamic shape or dtype kiln lacks"
    if node.target in (aten._to_copy.default,):
        devs = {_meta(node.args[0]).device.type, _meta(node).device.type}
        if not devs <= {"cpu", "kiln"}:
            return f"copy between devices {devs}"
    return None


def foldable_factory(node):
    """A deterministic op without tensor inputs (arange, linspace, ...) whose result is a constant."""
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return False
    if node.all_input_nodes or node.target in LOWERINGS:
        return False
    if torch.Tag.nondeterministic_seeded in node.target.tags:
        return False
    v = _meta(node)
    return isinstance(v, torch.Tensor) and static_val(v) and v.numel() <= (1 << 20)


_VIEW_OPS = {aten.view.default, aten._unsafe_view.default, aten.permute.default, aten.t.default,
             aten.transpose.int, aten.expand.default, aten.slice.Tensor, aten.select.int, aten.squeeze.dim,
             aten.squeeze.dims, aten.squeeze.default, aten.unsqueeze.default, aten.alias.default,
             aten.detach.default}


def _input_view_chain(o):
    """[placeholder, view nodes...] if FX value `o` is a graph input or a chain of views of one."""
    chain = []
    n = o
    while isinstance(n, torch.fx.Node) and n.op == "call_function" and n.target in _VIEW_OPS:
        chain.append(n)
        n = n.args[0]
    if isinstance(n, torch.fx.Node) and n.op == "placeholder":
        return [n] + chain[::-1]
    return None


def replay_views(t, chain):
    """Applies the recorded view nodes to tensor t (the runtime input they were traced from)."""
    for n in chain:
        t = n.target(t, *n.args[1:], **n.kwargs)
    return t


def _is_unused_rng_state(o):
    """True for the philox seed / offset outputs (6, 7) of the fused attention op."""
    return (isinstance(o, torch.fx.Node) and o.target is operator.getitem and o.args[1] in (6, 7) and
            isinstance(o.args[0], torch.fx.Node) and
            o.args[0].target is aten._scaled_dot_product_fused_attention_overrideable.default and
            isinstance(_meta(o), torch.Tensor))


def lower_graph(gm, constants=None, export=False):
    """Lowers gm outside any fake-tensor mode (constants are built for real); see _lower_graph."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    with unset_fake_temporarily():
        return _lower_graph(gm, constants or {}, export)


def _lower_graph(gm, constants, export):
    """Lowers every node of `gm` (all supported) into a new kiln graph.

    Returns (builder, input_meta, output_meta, single) where output_meta lists, per FX output,
    ('value', vid, meta), ('alias', input index, view chain), ('zeros', meta) for an
    rng-state placeholder or ('const', python value); single is True when the graph returns one
    value rather than a tuple. `constants` maps placeholder names to tensors that become
    constants of the program (torch.export's lifted parameters and buffers). With export=True
    every output is a program value (inputs and views of them are copied; other outputs are an
    Unsupported error), as a deployed program has no Python to assemble results."""
    b = GraphBuilder()
    env = {}
    inputs = []
    try:
        for node in gm.graph.nodes:
            if node.op == "placeholder" and node.name in constants:
                env[node] = _VID(b.constant(constants[node.name]))
            elif node.op == "placeholder":
                v = _meta(node)
                if isinstance(v, torch.Tensor):
                    env[node] = _VID(b.input(v.dtype, v.shape))
                    inputs.append(v)
                else:
                    raise Unsupported(f"non-tensor graph input {node.name}")
            elif node.op == "get_attr":
                t = getattr(gm, node.target)
                env[node] = _VID(b.constant(t))
            elif node.op == "call_function":
                args = torch.fx.node.map_arg(node.args, lambda n: env[n])
                kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n])
                if node.target is operator.getitem:
                    env[node] = args[0][args[1]]
                    continue
                reason = unsupported_reason(node)
                if reason:
                    raise Unsupported(reason)
                if node.target not in LOWERINGS:  # a constant factory: evaluate it now
                    kw = dict(kwargs)
                    kw["device"] = "cpu"
                    env[node] = _VID(b.constant(node.target(*args, **kw)))
                    continue
                env[node] = LOWERINGS[node.target](b, node, args, kwargs)
            elif node.op == "output":
                outs = []
                res = node.args[0]
                single = not isinstance(res, (tuple, list))
                placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
                for o in ([res] if single else res):
                    val = env[o] if isinstance(o, torch.fx.Node) else o
                    chain = None if export else _input_view_chain(o)
                    if export and not isinstance(val, _VID):
                        raise Unsupported(f"output {o!r} is not a tensor the program computes")
                    if chain is not None:
                        # an input (or a view of one): returned as a view of the caller's tensor,
                        # never copied, as eager autograd would save it
                        outs.append(("alias", placeholders.index(chain[0]), chain[1:]))
                    elif isinstance(val, _VID):
                        check(lib.kiln_graph_output(b.g, val), "output")
                        outs.append(("value", int(val), _meta(o)))
                    elif val is None and _is_unused_rng_state(o):
                        # attention's philox seed / offset: kiln's fused attention has no dropout
                        # and its backward ignores them; aot still saves them as tensors
                        outs.append(("zeros", _meta(o)))
                    else:
                        outs.append(("const", val))
                return b, inputs, outs, single
            else:
                raise Unsupported(f"fx node kind {node.op}")
    except Exception:
        b.close()
        raise
    raise Unsupported("graph without output")
