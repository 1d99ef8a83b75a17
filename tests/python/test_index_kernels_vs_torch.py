# SPDX-License-Identifier: Apache-2.0
"""libkiln index / shape / factory / sort kernels (kiln/kernels/index.h) vs PyTorch CPU, via ctypes.

The library is $KILN_LIB, else torch_kiln/libkiln.so of this checkout. Descriptors are built straight
from torch CPU tensors (data_ptr, shape, strides), the kernel writes into a torch-allocated output,
and the result is compared with the torch op. Data movement is compared bit-exactly; reductions
exactly where kiln and torch combine in the same order, else within a dtype tolerance.
Runs standalone: pytest --noconftest tests/python/test_index_kernels_vs_torch.py
"""
import ctypes
import os

import pytest
import torch

LIB_PATH = os.environ.get("KILN_LIB", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "torch_kiln", "libkiln.so"))
lib = ctypes.CDLL(LIB_PATH)

MAX_DIMS = 8
DT = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float64: 3, torch.int8: 4,
      torch.int16: 5, torch.int32: 6, torch.int64: 7, torch.uint8: 8, torch.bool: 9}
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
ALL = FLOATS + INTS + [torch.bool]
OK, INVALID, OUT_OF_RANGE = 0, 1, 8
SC = {n: i for i, n in enumerate("NONE ADD MULTIPLY SUM PROD MEAN AMAX AMIN".split())}
pytestmark = pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """torch's reference ops are tiny here; its thread pool only adds wake-up latency."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int32),
                ("shape", ctypes.c_int64 * MAX_DIMS), ("strides", ctypes.c_int64 * MAX_DIMS)]


P = ctypes.POINTER
PT = P(Tensor)
c_i64, c_int, c_dbl = ctypes.c_int64, ctypes.c_int, ctypes.c_double
lib.kiln_status_message.restype = ctypes.c_char_p
SIG = {
    "cat": [P(PT), c_int, c_int, PT],
    "index_select": [PT, c_int, PT, PT],
    "gather": [PT, c_int, PT, PT],
    "scatter": [PT, c_int, PT, PT, c_dbl, c_int, c_int],
    "index_add": [PT, c_int, PT, PT, c_dbl],
    "index": [PT, P(PT), c_int, PT],
    "index_put": [PT, P(PT), c_int, PT, c_int],
    "masked_select_count": [PT, PT, P(c_i64)],
    "masked_select": [PT, PT, PT],
    "nonzero_count": [PT, P(c_i64)],
    "nonzero": [PT, PT],
    "triu": [PT, c_i64, PT],
    "tril": [PT, c_i64, PT],
    "arange": [PT, c_dbl, c_dbl],
    "arange_i64": [PT, c_i64, c_i64],
    "linspace": [PT, c_dbl, c_dbl],
    "eye": [PT],
    "sort": [PT, c_int, c_int, c_int, PT, PT],
    "argsort": [PT, c_int, c_int, c_int, PT],
    "topk": [PT, c_i64, c_int, c_int, c_int, PT, PT],
    "flip": [PT, ctypes.c_uint32, PT],
    "roll": [PT, P(c_i64), P(c_int), c_int, PT],
    "constant_pad": [PT, P(c_i64), c_int, c_dbl, PT],
    "repeat_interleave": [PT, PT, c_int, PT],
}
for _n, _a in SIG.items():
    getattr(lib, "kiln_kernel_" + _n).argtypes = _a


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
    d.keep = t  # the tensor must outlive the call even when it is a temporary
    return ctypes.pointer(d)


def desc_list(ts):
    arr = (PT * max(len(ts), 1))()
    for i, t in enumerate(ts):
        arr[i] = desc(t) if t is not None else None
    return arr


class KilnError(Exception):
    def __init__(self, code, msg):
        super().__init__(f"{code}: {msg}")
        self.code, self.msg = code, msg


def call(name, *args):
    s = getattr(lib, "kiln_kernel_" + name)(*args)
    if s != 0:
        raise KilnError(s, lib.kiln_status_message().decode())


def fails(code, name, *args):
    with pytest.raises(KilnError) as e:
        call(name, *args)
    assert e.value.code == code, e.value.msg
    return e.value.msg


def rand(shape, dtype, seed=0, lo=-8, hi=8):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(max(lo, info.min), min(hi, info.max) + 1, shape, generator=g).to(dtype)


def noncontig(t):
    """The same values in a transposed buffer (strides not row-major) when rank >= 2."""
    if t.dim() < 2:
        buf = torch.empty(t.shape[0] * 2 if t.dim() else 1, dtype=t.dtype)
        v = buf[::2] if t.dim() else buf[0]
        v.copy_(t)
        return v
    return t.transpose(0, -1).contiguous().transpose(0, -1)


def same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
    if got.dtype.is_floating_point:
        assert torch.equal(got.isnan(), want.isnan())
        m = ~want.isnan()
        assert torch.equal(got[m], want[m]), \
            f"\ngot  {got.flatten()[:12]}\nwant {want.flatten()[:12]}"
    else:
        assert torch.equal(got, want), f"\ngot  {got.flatten()[:12]}\nwant {want.flatten()[:12]}"


def close(got, want):
    if not got.dtype.is_floating_point:
        return same(got, want)
    rtol = {torch.float32: 1e-6, torch.float64: 1e-12, torch.float16: 2e-3,
            torch.bfloat16: 1.6e-2}[got.dtype]
    assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
    g, w = got.double(), want.double()
    assert torch.equal(g.isnan(), w.isnan())
    m = ~w.isnan()
    bad = (g[m] - w[m]).abs() > rtol * (1 + w[m].abs())
    assert not bad.any(), f"got {g[m][bad][:8]} want {w[m][bad][:8]}"


# ---------------------------------------------------------------- cat
@pytest.mark.parametrize("dtype", ALL)
def test_cat(dtype):
    a, b = rand((3, 4, 5), dtype, 1), noncontig(rand((3, 2, 5), dtype, 2))
    c = rand((3, 0, 5), dtype, 3)
    for dim in (1, -2):
        out = noncontig(torch.empty(3, 6, 5, dtype=dtype))
        call("cat", desc_list([a, torch.empty(0, dtype=dtype), b, c]), 4, dim, desc(out))
        same(out, torch.cat([a, b, c], dim))


def test_cat_casts_and_errors():
    a, b = rand((2, 3), torch.int32, 1), rand((2, 3), torch.float64, 2)
    out = torch.empty(4, 3)
    call("cat", desc_list([a, b]), 2, 0, desc(out))
    same(out, torch.cat([a, b]).float())
    out = torch.empty(0)
    call("cat", desc_list([torch.empty(0), torch.empty(0)]), 2, 0, desc(out))
    msg = fails(INVALID, "cat", desc_list([a, rand((3, 3), torch.int32)]), 2, 1,
                desc(torch.empty(2, 6, dtype=torch.int32)))
    assert "[3, 3]" in msg
    fails(INVALID, "cat", desc_list([torch.tensor(1.0)]), 1, 0, desc(torch.empty(1)))
    fails(INVALID, "cat", desc_list([a]), 1, 2, desc(torch.empty(2, 3, dtype=torch.int32)))
    fails(INVALID, "cat", desc_list([a]), 1, 0, desc(torch.empty(3, 3, dtype=torch.int32)))


# ---------------------------------------------------------------- index_select / gather
@pytest.mark.parametrize("dtype", ALL)
def test_index_select(dtype):
    x = rand((4, 5, 6), dtype, 4)
    for xx in (x, noncontig(x)):
        for dim in (0, 1, 2, -1):
            n = xx.shape[dim]
            for idt in (torch.int64, torch.int32):
                idx = torch.randint(0, n, (7,), generator=torch.Generator().manual_seed(dim),
                                    dtype=idt)
                want = torch.index_select(xx, dim, idx)
                out = noncontig(torch.empty_like(want))
                call("index_select", desc(xx), dim, desc(idx), desc(out))
                same(out, want)


def test_index_select_edge():
    x = rand((3, 4), torch.float32, 5)
    idx = torch.tensor(2)
    out = torch.empty(3, 1)
    call("index_select", desc(x), 1, desc(idx), desc(out))
    same(out, torch.index_select(x, 1, idx))
    s = torch.tensor(5.0)
    out = torch.empty(())
    call("index_select", desc(s), 0, desc(torch.tensor([0])), desc(out))
    same(out, torch.index_select(s, 0, torch.tensor([0])))
    out = torch.empty(0, 4)
    call("index_select", desc(x), 0, desc(torch.empty(0, dtype=torch.long)), desc(out))
    msg = fails(OUT_OF_RANGE, "index_select", desc(x), 0, desc(torch.tensor([0, 3])),
                desc(torch.empty(2, 4)))
    assert "3" in msg and "size 3" in msg
    fails(OUT_OF_RANGE, "index_select", desc(x), 0, desc(torch.tensor([-1])),
          desc(torch.empty(1, 4)))
    fails(INVALID, "index_select", desc(x), 0, desc(torch.tensor([[0]])), desc(torch.empty(1, 4)))
    fails(INVALID, "index_select", desc(x), 0, desc(torch.tensor([0.0])), desc(torch.empty(1, 4)))
    fails(INVALID, "index_select", desc(x), 2, desc(torch.tensor([0])), desc(torch.empty(1, 4)))
    fails(INVALID, "index_select", desc(x), 0, desc(torch.tensor([0])), desc(torch.empty(2, 4)))


@pytest.mark.parametrize("dtype", ALL)
def test_gather(dtype):
    x = rand((4, 5, 6), dtype, 6)
    g = torch.Generator().manual_seed(1)
    for xx in (x, noncontig(x)):
        for dim in (0, 1, -1):
            ishape = [3, 4, 5]
            ishape[dim] = 7
            idx = torch.randint(0, xx.shape[dim], ishape, generator=g)
            for ii in (idx, noncontig(idx)):
                want = torch.gather(xx, dim, ii)
                out = torch.empty_like(want)
                call("gather", desc(xx), dim, desc(ii), desc(out))
                same(out, want)
    bad = torch.tensor([[0, 9]])
    msg = fails(OUT_OF_RANGE, "gather", desc(x[0]), 1, desc(bad),
                desc(torch.empty(1, 2, dtype=dtype)))
    assert "9" in msg and "size 6" in msg
    fails(INVALID, "gather", desc(x), 0, desc(torch.zeros(5, 6, 6, dtype=torch.long)),
          desc(torch.empty(5, 6, 6, dtype=dtype)))
    fails(INVALID, "gather", desc(x), 0, desc(torch.zeros(1, 1, 1, dtype=torch.int32)),
          desc(torch.empty(1, 1, 1, dtype=dtype)))


# ---------------------------------------------------------------- scatter family
def scatter_ref(self, dim, index, src, value, mode, include_self):
    r = self.clone()
    if mode == "NONE":
        return r.scatter_(dim, index, src) if src is not None else r.scatter_(dim, index, value)
    if mode in ("ADD", "MULTIPLY"):
        red = "add" if mode == "ADD" else "multiply"
        if src is None:
            return r.scatter_(dim, index, value, reduce=red)
        return r.scatter_add_(dim, index, src) if mode == "ADD" else r.scatter_(dim, index, src,
                                                                                 reduce=red)
    return r.scatter_reduce_(dim, index, src, mode.lower(), include_self=bool(include_self))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64,
                                   torch.float16, torch.bfloat16, torch.int8, torch.uint8])
@pytest.mark.parametrize("mode", list(SC))
def test_scatter(dtype, mode):
    g = torch.Generator().manual_seed(7)
    for dim in (0, 1, -1):
        self = rand((5, 6, 4), dtype, 8, lo=1, hi=4)
        ishape = [3, 4, 3]
        ishape[dim] = 8 if mode != "NONE" else 3
        if mode == "NONE":  # unique targets along dim so the result is defined
            idx = torch.randperm(self.shape[dim], generator=g)[:3].reshape(
                [3 if d == dim % 3 else 1 for d in range(3)]).expand(ishape).contiguous()
        else:
            idx = torch.randint(0, self.shape[dim], ishape, generator=g)
        src = rand([9, 9, 9], dtype, 9, lo=1, hi=3)
        if mode in ("PROD", "MULTIPLY") and dtype.is_floating_point:
            src = src / 2
        for inc in ((0, 1) if mode in ("SUM", "PROD", "MEAN", "AMAX", "AMIN") else (1,)):
            want = scatter_ref(self, dim, idx, src, None, mode, inc)
            got = noncontig(self.clone())
            call("scatter", desc(got), dim, desc(idx), desc(noncontig(src)), 0.0, SC[mode], inc)
            same(got, want)  # f16/bf16 too: kiln reduces them in f32 like torch
        if mode in ("NONE", "ADD", "MULTIPLY"):
            want = scatter_ref(self, dim, idx, None, 2.0, mode, 1)
            got = self.clone()
            call("scatter", desc(got), dim, desc(idx), None, 2.0, SC[mode], 1)
            same(got, want)


def test_scatter_nan_and_errors():
    self = torch.tensor([1.0, 2.0, 3.0])
    src = torch.tensor([float("nan"), 5.0, 0.5])
    idx = torch.tensor([0, 1, 1])
    for mode in ("AMAX", "AMIN"):
        got = self.clone()
        call("scatter", desc(got), 0, desc(idx), desc(src), 0.0, SC[mode], 1)
        same(got, self.clone().scatter_reduce_(0, idx, src, mode.lower()))
    msg = fails(OUT_OF_RANGE, "scatter", desc(self.clone()), 0, desc(torch.tensor([3])),
                desc(src), 0.0, 0, 1)
    assert "index 3" in msg and "size 3" in msg
    fails(OUT_OF_RANGE, "scatter", desc(self.clone()), 0, desc(torch.tensor([-1])), desc(src),
          0.0, 0, 1)
    fails(INVALID, "scatter", desc(self.clone()), 0, desc(torch.tensor([0, 1, 2, 0])), desc(src),
          0.0, 1, 1)
    fails(INVALID, "scatter", desc(self.clone()), 0, desc(idx), desc(src.double()), 0.0, 1, 1)
    fails(INVALID, "scatter", desc(torch.zeros(3, dtype=torch.bool)), 0, desc(idx),
          desc(torch.ones(3, dtype=torch.bool)), 0.0, SC["MEAN"], 1)


def test_scatter_add_deterministic_large():
    g = torch.Generator().manual_seed(3)
    self = torch.zeros(64, 300)
    idx = torch.randint(0, 64, (5000, 300), generator=g)
    src = torch.randn(5000, 300, generator=g)
    got = self.clone()
    call("scatter", desc(got), 0, desc(idx), desc(src), 0.0, SC["ADD"], 1)
    got2 = self.clone()
    call("scatter", desc(got2), 0, desc(idx), desc(src), 0.0, SC["ADD"], 1)
    assert torch.equal(got, got2)
    same(got, self.clone().scatter_add_(0, idx, src))  # same order of additions as torch


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64,
                                   torch.float16, torch.bfloat16, torch.bool, torch.int8])
def test_index_add(dtype):
    g = torch.Generator().manual_seed(11)
    for dim in (0, 1, -1):
        self = rand((5, 6, 7), dtype, 12, lo=-3, hi=3)
        n = 9
        sshape = list(self.shape)
        sshape[dim] = n
        src = rand(sshape, dtype, 13, lo=-3, hi=3)
        for idt in (torch.int64, torch.int32):
            idx = torch.randint(0, self.shape[dim], (n,), generator=g, dtype=idt)
            for alpha in ((1.0, 2.0) if dtype != torch.bool else (1.0,)):
                want = self.clone().index_add_(dim, idx, src, alpha=alpha)
                got = noncontig(self.clone())
                call("index_add", desc(got), dim, desc(idx), desc(noncontig(src)), alpha)
                close(got, want) if alpha != 1.0 else same(got, want)
    x = torch.zeros(4)
    fails(OUT_OF_RANGE, "index_add", desc(x), 0, desc(torch.tensor([4])), desc(torch.ones(1)), 1.0)
    fails(OUT_OF_RANGE, "index_add", desc(x), 0, desc(torch.tensor([-1])), desc(torch.ones(1)), 1.0)
    fails(INVALID, "index_add", desc(x), 0, desc(torch.tensor([1])), desc(torch.ones(2)), 1.0)


def test_zero_dim_and_empty():
    s, i0 = torch.tensor(5.0), torch.tensor(0)
    out = torch.empty(())
    call("gather", desc(s), 0, desc(i0), desc(out))
    same(out, torch.gather(s, 0, i0))
    got = s.clone()
    call("scatter", desc(got), -1, desc(i0), desc(torch.tensor(2.0)), 0.0, SC["ADD"], 1)
    same(got, s.clone().scatter_add_(-1, i0, torch.tensor(2.0)))
    got = s.clone()
    call("index_add", desc(got), 0, desc(i0), desc(torch.tensor(3.0)), 2.0)
    same(got, s.clone().index_add_(0, i0, torch.tensor(3.0), alpha=2.0))
    x = rand((3, 0, 4), torch.float32, 1)
    idx = torch.zeros(3, 0, 2, dtype=torch.long)
    out = torch.empty(3, 0, 2)
    call("gather", desc(x), 2, desc(idx), desc(out))
    got = x.clone()
    call("scatter", desc(got), 2, desc(idx), desc(out), 0.0, SC["SUM"], 0)
    v, i = torch.empty_like(x), torch.empty(x.shape, dtype=torch.long)
    call("sort", desc(x), 1, 0, 1, desc(v), desc(i))
    call("index", desc(x), desc_list([torch.tensor([2, 0])]), 1, desc(torch.empty(2, 0, 4)))


# ---------------------------------------------------------------- advanced indexing
def adv_cases():
    g = torch.Generator().manual_seed(21)
    x = rand((5, 6, 7, 3), torch.float32, 22)
    i5 = torch.randint(-5, 5, (4, 2), generator=g)
    i6 = torch.randint(-6, 6, (4, 2), generator=g)
    i7 = torch.randint(-7, 7, (4, 2), generator=g)
    return x, [
        [i5], [None, i6], [i5, i6], [None, i6, i7], [i5, None, i7], [i5, None, None, i7[:, :1].
                                                                      expand(4, 2) % 3],
        [None, None, i7], [i5, i6, i7], [torch.tensor(2)], [i5[:, 0]], [None, noncontig(i6)],
        [None, i6.to(torch.int32)], [i5, i6.expand(4, 2)], [None] * 2,
        [torch.empty(0, dtype=torch.long)],
    ]


def torch_key(indices):
    return tuple(slice(None) if i is None else i.long() for i in indices)


def test_index():
    x, cases = adv_cases()
    for dtype in ALL:
        xd = noncontig(rand(x.shape, dtype, 23))
        for ind in cases:
            want = xd[torch_key(ind)]
            out = torch.empty_like(want)
            call("index", desc(xd), desc_list(ind), len(ind), desc(out))
            same(out, want)


def test_index_put():
    x, cases = adv_cases()
    for dtype in (torch.float32, torch.int64, torch.float16, torch.bool, torch.uint8):
        for ind in cases:
            base = rand(x.shape, dtype, 24)
            rshape = base[torch_key(ind)].shape
            for vshape in (rshape, rshape[-1:], ()):
                vals = rand(vshape, dtype, 25)
                for acc in (0, 1):
                    key = torch_key(ind)
                    ind = [i.long() if i is not None else None for i in ind]
                    if acc == 0 and any(i is not None and i.numel() > 1 for i in ind):
                        # duplicates: torch leaves the winner unspecified, use unique positions
                        flat = torch.arange(base.numel()).reshape(base.shape)[key]
                        if flat.unique().numel() != flat.numel():
                            continue
                    if all(i is None for i in ind):  # aten asserts on an all-None list
                        want = base + vals if acc else vals.expand(base.shape).clone()
                        want = want.to(dtype) if dtype != torch.bool or not acc else base | vals
                    else:
                        want = torch.ops.aten.index_put(base, list(ind), vals, bool(acc))
                    got = noncontig(base.clone())
                    call("index_put", desc(got), desc_list(ind), len(ind), desc(vals), acc)
                    same(got, want)


def test_index_put_duplicates_last_wins():
    x = torch.zeros(4)
    idx = torch.tensor([1, 1, -3, 2])
    vals = torch.tensor([5.0, 6.0, 7.0, 8.0])
    call("index_put", desc(x), desc_list([idx]), 1, desc(vals), 0)
    same(x, torch.tensor([0.0, 7.0, 8.0, 0.0]))
    call("index_put", desc(x), desc_list([idx]), 1, desc(vals), 1)
    same(x, torch.tensor([0.0, 25.0, 16.0, 0.0]))


def test_index_errors():
    x = torch.zeros(3, 4)
    msg = fails(OUT_OF_RANGE, "index", desc(x), desc_list([torch.tensor([0, 3])]), 1,
                desc(torch.empty(2, 4)))
    assert "index 3" in msg and "size 3" in msg
    fails(OUT_OF_RANGE, "index", desc(x), desc_list([None, torch.tensor([-5])]), 2,
          desc(torch.empty(3, 1)))
    fails(INVALID, "index", desc(x), desc_list([torch.tensor([0])] * 3), 3, desc(torch.empty(1)))
    fails(INVALID, "index", desc(x), desc_list([torch.tensor([0]), torch.tensor([0, 1])]), 2,
          desc(torch.empty(2)))
    fails(INVALID, "index", desc(x), desc_list([torch.tensor([True, False, True])]), 1,
          desc(torch.empty(2, 4)))
    fails(INVALID, "index", desc(x), desc_list([torch.tensor([0])]), 1, desc(torch.empty(2, 4)))
    msg = fails(INVALID, "index_put", desc(x), desc_list([torch.tensor([0])]), 1,
                desc(torch.ones(1, 1, 4)), 0)
    assert "shape mismatch" in msg
    fails(INVALID, "index_put", desc(x), desc_list([torch.tensor([0])]), 1, desc(torch.ones(3)), 0)
    fails(OUT_OF_RANGE, "index_put", desc(x), desc_list([torch.tensor([9])]), 1,
          desc(torch.ones(4)), 0)


# ---------------------------------------------------------------- masked_select / nonzero
@pytest.mark.parametrize("dtype", ALL)
def test_masked_select(dtype):
    x = rand((4, 5, 6), dtype, 31)
    for xs, ms in [((4, 5, 6), (4, 5, 6)), ((4, 5, 6), (5, 1)), ((5, 1), (4, 5, 6)),
                   ((4, 5, 6), ()), ((0, 3), (3,)), ((), ())]:
        xx = noncontig(rand(xs, dtype, 32))
        m = rand(ms, torch.bool, 33)
        want = torch.masked_select(xx, m)
        cnt = c_i64()
        call("masked_select_count", desc(xx), desc(m), ctypes.byref(cnt))
        assert cnt.value == want.numel()
        out = torch.empty(cnt.value, dtype=dtype)
        call("masked_select", desc(xx), desc(m), desc(out))
        same(out, want)
    fails(INVALID, "masked_select", desc(x), desc(torch.ones(4, 5, 6, dtype=torch.uint8)),
          desc(torch.empty(120, dtype=dtype)))
    fails(INVALID, "masked_select", desc(x), desc(torch.ones(4, 5, 6, dtype=torch.bool)),
          desc(torch.empty(119, dtype=dtype)))
    fails(INVALID, "masked_select_count", desc(x), desc(torch.ones(3, dtype=torch.bool)),
          ctypes.byref(c_i64()))


@pytest.mark.parametrize("dtype", ALL)
def test_nonzero(dtype):
    for shape in [(4, 5, 6), (7,), (), (3, 0), (1, 5, 1), (300, 257)]:
        x = rand(shape, dtype, 41, lo=-1, hi=1)
        if dtype.is_floating_point and x.numel() > 4:
            x.view(-1)[:4] = torch.tensor([-0.0, float("nan"), 0.0, float("-inf")]).to(dtype)
        xx = noncontig(x)
        want = torch.nonzero(xx)
        cnt = c_i64()
        call("nonzero_count", desc(xx), ctypes.byref(cnt))
        assert cnt.value == want.shape[0]
        out = torch.empty(cnt.value, x.dim(), dtype=torch.long)
        call("nonzero", desc(xx), desc(out))
        same(out, want)
    fails(INVALID, "nonzero", desc(torch.ones(3)), desc(torch.empty(3, 1, dtype=torch.int32)))
    fails(INVALID, "nonzero", desc(torch.ones(3)), desc(torch.empty(2, 1, dtype=torch.long)))


# ---------------------------------------------------------------- triangles, factories
@pytest.mark.parametrize("dtype", ALL)
def test_triu_tril(dtype):
    for shape in [(5, 7), (2, 3, 6, 4), (1, 0), (3, 1, 1)]:
        x = rand(shape, dtype, 51)
        for diag in (-9, -2, 0, 1, 3, 100):
            for name, fn in (("triu", torch.triu), ("tril", torch.tril)):
                want = fn(x, diag)
                out = noncontig(torch.empty_like(x))
                call(name, desc(noncontig(x)), diag, desc(out))
                same(out, want)
                inplace = x.clone()
                call(name, desc(inplace), diag, desc(inplace))
                same(inplace, want)
    fails(INVALID, "triu", desc(torch.ones(3)), 0, desc(torch.ones(3)))


@pytest.mark.parametrize("dtype", [d for d in ALL if d != torch.bool])
def test_arange_linspace_eye(dtype):
    for start, end, step in [(0, 10, 1), (-3, 7, 2), (0.5, 5, 0.5), (1, -2, -0.25), (0, 1, 0.1),
                             (-7, 7, 3)]:
        try:
            want = torch.arange(start, end, step, dtype=dtype)
        except (RuntimeError, ValueError):  # integer dtype, step truncating to 0
            continue
        got = torch.empty_like(want)
        call("arange", desc(got), float(start), float(step))
        close(got, want)
        if float(start).is_integer() and float(step).is_integer():
            call("arange_i64", desc(got), int(start), int(step))
            close(got, want)
    for start, end, n in [(0, 10, 5), (-1, 1, 7), (3, 3, 4), (0, 1, 1), (0, 1, 0), (2, -5, 11),
                          (0, 100, 1000)]:
        want = torch.linspace(start, end, n, dtype=dtype)
        got = torch.empty_like(want)
        call("linspace", desc(got), float(start), float(end))
        close(got, want)
    for n, m in [(3, 3), (2, 5), (4, 1), (0, 3)]:
        want = torch.eye(n, m, dtype=dtype)
        got = noncontig(torch.empty(n, m, dtype=dtype))
        call("eye", desc(got))
        same(got, want)
    fails(INVALID, "arange", desc(torch.empty(2, 2, dtype=dtype)), 0.0, 1.0)
    fails(INVALID, "arange", desc(torch.empty(2, dtype=torch.bool)), 0.0, 1.0)


def test_arange_exact_large_ints():
    got = torch.empty(4, dtype=torch.int64)
    call("arange_i64", desc(got), 2**62, 2**40 + 1)
    same(got, torch.arange(2**62, 2**62 + 4 * (2**40 + 1), 2**40 + 1))
    got = torch.empty(1000, dtype=torch.float32)
    call("arange", desc(got), -1.0, 0.01)
    assert (got - torch.arange(-1.0, 9.0, 0.01)[:1000]).abs().max() <= 1e-6


# ---------------------------------------------------------------- sorting
def with_ties(dtype, shape, seed):
    x = rand(shape, dtype, seed, lo=-4, hi=4)
    if dtype.is_floating_point:
        x = x.round()
        f = x.view(-1)
        if f.numel() > 6:
            f[:6] = torch.tensor([float("nan"), -0.0, 0.0, float("inf"), float("nan"),
                                  float("-inf")]).to(dtype)
    return x


@pytest.mark.parametrize("dtype", ALL)
def test_sort(dtype):
    for shape, dim in [((6, 40), 1), ((300, 3), 0), ((2, 3, 5), 1), ((700,), 0), ((), 0),
                       ((3, 0), 1), ((4, 1), 1)]:
        x = noncontig(with_ties(dtype, shape, 61))
        for desc_ in (0, 1):
            want_v, want_i = torch.sort(x, dim=dim, descending=bool(desc_), stable=True)
            v, i = torch.empty_like(want_v), torch.empty_like(want_i)
            call("sort", desc(x), dim, desc_, 1, desc(v), desc(i))
            same(v, want_v)
            same(i, want_i)
            ai = torch.empty_like(want_i)
            call("argsort", desc(x), dim - x.dim() if x.dim() else 0, desc_, 0, desc(ai))
            same(ai, want_i)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bfloat16,
                                   torch.uint8, torch.float64, torch.int32])
def test_topk(dtype):
    for shape, dim in [((8, 200), 1), ((130, 5), 0), ((3, 4, 1000), -1), ((50,), 0), ((), 0)]:
        x = noncontig(with_ties(dtype, shape, 71))
        if shape == (8, 200):
            x = x.contiguous()  # torch may take a different loop for stride-1 slices
        n = x.shape[dim] if x.dim() else 1
        for k in sorted({0, 1, 2, n // 3, n // 2, n - 1, n} & set(range(n + 1))):
            for largest in (1, 0):
                for sorted_ in (1, 0):
                    want_v, want_i = torch.topk(x, k, dim, bool(largest), bool(sorted_))
                    v, i = torch.empty_like(want_v), torch.empty_like(want_i)
                    call("topk", desc(x), k, dim, largest, sorted_, desc(v), desc(i))
                    if sorted_:
                        same(v, want_v)
                    else:
                        same(v.sort(dim)[0], want_v.sort(dim)[0])
                    if x.dim():
                        same(torch.gather(x, dim, i), v)  # indices point at the values
                    same(i, want_i)  # and are torch's exact choice among ties
    fails(INVALID, "topk", desc(torch.ones(3)), 4, 0, 1, 1, desc(torch.empty(4)),
          desc(torch.empty(4, dtype=torch.long)))


# ---------------------------------------------------------------- flip / roll / pad / repeat
@pytest.mark.parametrize("dtype", ALL)
def test_flip_roll(dtype):
    x = noncontig(rand((4, 5, 6), dtype, 81))
    for dims in [(0,), (1, 2), (0, 1, 2), ()]:
        out = torch.empty_like(x)
        call("flip", desc(x), sum(1 << d for d in dims), desc(out))
        same(out, torch.flip(x, dims))
    for shifts, dims in [((1,), (0,)), ((-7, 2), (1, -1)), ((3, 3), (0, 0)), ((13,), None),
                         ((-4,), None), ((0, 5), (1, 2))]:
        out = noncontig(torch.empty_like(x))
        sh = (c_i64 * len(shifts))(*shifts)
        dm = (c_int * len(dims))(*dims) if dims is not None else None
        call("roll", desc(x), sh, dm, len(shifts), desc(out))
        same(out, torch.roll(x, shifts, dims) if dims is not None else torch.roll(x, shifts))
    out = torch.empty_like(x)
    call("roll", desc(x.contiguous()), (c_i64 * 1)(5), None, 1, desc(out))
    same(out, torch.roll(x, 5))
    fails(INVALID, "flip", desc(x), 1 << 3, desc(torch.empty_like(x)))
    fails(INVALID, "roll", desc(x), (c_i64 * 2)(1, 2), None, 2, desc(torch.empty_like(x)))


@pytest.mark.parametrize("dtype", ALL)
def test_constant_pad(dtype):
    x = noncontig(rand((3, 4, 5), dtype, 91))
    for pad in [(1, 2), (0, 0, 2, 1), (-1, 2, 1, -2), (1, 1, 1, 1, 1, 1), (-2, -2), (3, -3, 0, 0),
                ()]:
        want = torch.nn.functional.pad(x, pad, value=1.0 if dtype != torch.bool else 1)
        out = noncontig(torch.empty_like(want)) if want.numel() else torch.empty_like(want)
        arr = (c_i64 * max(len(pad), 1))(*pad)
        call("constant_pad", desc(x), arr, len(pad), 1.0, desc(out))
        same(out, want)
    fails(INVALID, "constant_pad", desc(x), (c_i64 * 1)(1), 1, 0.0, desc(x))
    fails(INVALID, "constant_pad", desc(x), (c_i64 * 2)(-3, -3), 2, 0.0, desc(torch.empty(3, 4, 0)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.bool, torch.float16])
def test_repeat_interleave(dtype):
    x = noncontig(rand((3, 4, 5), dtype, 95))
    g = torch.Generator().manual_seed(5)
    for dim in (0, 1, -1):
        for reps in (torch.randint(0, 4, (x.shape[dim],), generator=g), torch.tensor([2]),
                     torch.tensor(3)):
            want = torch.repeat_interleave(x, reps, dim)
            out = torch.empty_like(want)
            call("repeat_interleave", desc(x), desc(reps), dim, desc(out))
            same(out, want)
    fails(INVALID, "repeat_interleave", desc(x), desc(torch.tensor([1, -1, 1])), 0,
          desc(torch.empty(1, 4, 5, dtype=dtype)))
