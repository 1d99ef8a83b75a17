# SPDX-License-Identifier: Apache-2.0
"""Differential harness: run one probe on kiln and on CPU PyTorch and require the same outcome.

A probe (``Case``) is an op applied to inputs. Tensor inputs are ``Spec``s: a shape, a dtype, a
layout and a value recipe, built deterministically (``torch.Generator`` seeded per spec) first on
the CPU and then copied to the probed device with the same view geometry, so a transposed,
strided, expanded or offset input is that on both devices. Python values (scalars, dims, index
tuples) are passed as they are.

Outcome rule (``check``)
------------------------
* Both raise: the exception types must agree. Same class passes; so do two classes that are both
  ``RuntimeError`` subclasses (torch reports most checks as ``RuntimeError``, a few as its
  subclasses ``NotImplementedError``, ``torch.OutOfMemoryError``...; which one is an implementation
  detail). ``IndexError``, ``ValueError`` and ``TypeError`` are not in that family: raising
  ``RuntimeError`` where CPU raises ``IndexError`` fails.
* Only one side raises: failure (kiln accepting bad input, or rejecting good input).
* Both return: the results (tensors, or tuples/lists of them, or python values) must agree.
  Tensors: the kiln result lives on kiln, dtype and shape are equal, and the values agree by
  ``torch.testing.assert_close(equal_nan=True)``: NaN positions are the same, +-inf the same
  values at the same positions, integers and bools exactly, floats within the tolerance of the
  result dtype in ``TOLS`` (scaled by the case's ``tol`` factor, 1 for exact-ish ops; larger for
  transcendental ops, reductions and matmul, whose summation order / polynomial differs).
"""
import dataclasses
import math
from typing import Any, Callable, Optional, Sequence

import torch

KILN = "kiln"
DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64]
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
LAYOUTS = ["contig", "transposed", "strided", "expanded", "offset"]

# (rtol, atol) per result dtype for tol factor 1.
TOLS = {torch.float16: (1e-3, 1e-3), torch.bfloat16: (1.6e-2, 1e-2),
        torch.float32: (1.3e-6, 1e-5), torch.float64: (1e-7, 1e-7)}

# Python scalars that probe range checks and special values.
SCALARS = [0, 1, -1, 3, 2.5, -0.5, 127, 128, -129, 255, 256, -256, 1000, 2**31, 2**40,
           2**63 - 1, 65504.0, 65520.0, 1e6, 1e39, 1e300, math.nan, math.inf, -math.inf,
           True, False]


@dataclasses.dataclass(frozen=True)
class Spec:
    """A tensor input. values: 'normal' (dtype-typical random values), 'special' (floats with
    NaN, +-inf, -0.0 and huge values mixed in), 'index' (int64 in [lo, hi)), 'mask' (bool),
    'perm' (distinct values: a permutation of 0..n-1, no ties). cpu: always built on the CPU,
    also for the kiln run (a host tensor handed to a kiln op)."""
    shape: tuple
    dtype: torch.dtype = torch.float32
    layout: str = "contig"
    values: str = "normal"
    lo: int = 0
    hi: int = 1
    seed: int = 0
    cpu: bool = False

    def __repr__(self):
        s = f"{self.dtype}".replace("torch.", "") + "[" + ",".join(map(str, self.shape)) + "]"
        if self.layout != "contig":
            s += ":" + self.layout
        if self.values != "normal":
            s += ":" + self.values + (f"({self.lo},{self.hi})" if self.values == "index" else "")
        return s + (":cpu" if self.cpu else "")


def _values(spec: Spec, shape) -> torch.Tensor:
    g = torch.Generator().manual_seed(spec.seed)
    n = math.prod(shape)
    dt = spec.dtype
    if spec.values == "index":
        return torch.randint(spec.lo, spec.hi, shape, generator=g, dtype=torch.int64).to(dt)
    if spec.values == "mask" or dt == torch.bool:
        return torch.rand(shape, generator=g) < 0.5
    if spec.values == "perm":
        return torch.randperm(n, generator=g).reshape(shape).to(dt)
    if dt.is_floating_point:
        x = torch.randn(shape, generator=g, dtype=torch.float64) * 3
        if spec.values == "special" and n:
            flat = x.view(-1)
            pool = [math.nan, math.inf, -math.inf, -0.0, 1e5, -1e38, 0.0]
            for i in range(0, n, 3):
                flat[i] = pool[(i // 3 + spec.seed) % len(pool)]
        return x.to(dt)
    info = torch.iinfo(dt)
    lo, hi = max(info.min, -100), min(info.max, 100)
    return torch.randint(lo, hi + 1, shape, generator=g, dtype=torch.int64).to(dt)


def build(spec: Spec, device: str) -> torch.Tensor:
    """The tensor `spec` describes, on `device` (or the CPU for a cpu spec)."""
    dev = "cpu" if spec.cpu else device
    shape = tuple(spec.shape)
    layout = spec.layout
    if layout == "transposed" and len(shape) >= 2:
        base = _values(spec, shape[:-2] + (shape[-1], shape[-2]))
        return base.to(dev).transpose(-1, -2)
    if layout == "strided" and len(shape) >= 1:
        base = _values(spec, shape[:-1] + (2 * shape[-1],))
        return base.to(dev)[..., ::2]
    if layout == "expanded" and any(s > 1 for s in shape):
        d = max(i for i, s in enumerate(shape) if s > 1)
        base = _values(spec, shape[:d] + (1,) + shape[d + 1:])
        return base.to(dev).expand(shape)
    if layout == "offset":
        n = math.prod(shape)
        base = _values(spec, (n + 1,))
        return base.to(dev)[1:].view(shape)
    return _values(spec, shape).to(dev)


@dataclasses.dataclass
class Case:
    """fn(*built_inputs) on each device; tol scales TOLS; id names the probe."""
    id: str
    fn: Callable
    inputs: Sequence[Any]
    tol: float = 1.0


def run(case: Case, device: str):
    """("ok", result) or ("err", exception) of the case on `device`."""
    args = [build(a, device) if isinstance(a, Spec) else a for a in case.inputs]
    try:
        return "ok", case.fn(*args)
    except Exception as e:  # noqa: BLE001 - the outcome is what is compared
        return "err", e


def same_error_kind(a: BaseException, b: BaseException) -> bool:
    ta, tb = type(a), type(b)
    return ta is tb or (issubclass(ta, RuntimeError) and issubclass(tb, RuntimeError))


def _first_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]


def compare(ref: Any, got: Any, tol: float, path: str = "result") -> Optional[str]:
    """None if `got` (kiln) matches `ref` (CPU), else a description of the first difference."""
    if isinstance(ref, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"{path}: expected a tensor, got {type(got).__name__}"
        if got.device.type != KILN and ref.device.type == "cpu":
            return f"{path}: result on {got.device}, expected kiln"
        if got.dtype != ref.dtype:
            return f"{path}: dtype {got.dtype} != {ref.dtype}"
        if got.shape != ref.shape:
            return f"{path}: shape {tuple(got.shape)} != {tuple(ref.shape)}"
        rtol, atol = TOLS.get(ref.dtype, (0.0, 0.0))
        try:
            torch.testing.assert_close(got.cpu(), ref, rtol=rtol * tol, atol=atol * tol,
                                       equal_nan=True, check_device=False)
        except AssertionError as e:
            return f"{path}: values differ: {' '.join(str(e).split())[:400]}"
        return None
    if isinstance(ref, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(ref):
            return f"{path}: expected a sequence of {len(ref)}, got {got!r:.80}"
        for i, (r, g) in enumerate(zip(ref, got)):
            msg = compare(r, g, tol, f"{path}[{i}]")
            if msg:
                return msg
        return None
    if isinstance(ref, float) and isinstance(got, float):
        if math.isnan(ref) and math.isnan(got):
            return None
        if ref == got or math.isclose(ref, got, rel_tol=1e-6 * tol, abs_tol=1e-6 * tol):
            return None
        return f"{path}: {got!r} != {ref!r}"
    if ref != got or type(ref) is not type(got):
        return f"{path}: {got!r} != {ref!r}"
    return None


def check(case: Case) -> None:
    """Runs `case` on CPU and kiln; raises AssertionError describing any disagreement."""
    ref = run(case, "cpu")
    got = run(case, KILN)
    if ref[0] == "err" and got[0] == "err":
        assert same_error_kind(ref[1], got[1]), (
            f"{case.id}: CPU raised {_first_line(ref[1])} but kiln raised {_first_line(got[1])}")
        return
    if ref[0] == "err":
        assert False, f"{case.id}: CPU raised {_first_line(ref[1])} but kiln returned {got[1]!r:.200}"
    if got[0] == "err":
        assert False, f"{case.id}: kiln raised {_first_line(got[1])} but CPU returned {ref[1]!r:.200}"
    msg = compare(ref[1], got[1], case.tol)
    assert msg is None, f"{case.id}: {msg}"
