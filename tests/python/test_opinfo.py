# SPDX-License-Identifier: Apache-2.0
"""OpInfo conformance: PyTorch's own OpInfo samples give the same results on kiln as on CPU.

What is checked
---------------
For every selected OpInfo of ``torch.testing._internal.common_methods_invocations.op_db`` and
every dtype of ``DTYPES`` that the OpInfo supports on CPU (``op.supported_dtypes("cpu")``), the
first ``MAX_SAMPLES`` samples of ``op.sample_inputs("cpu", dtype, requires_grad=False)`` run

* on CPU, as the reference, and
* on kiln: every tensor of the sample (input, args, kwargs, tensor lists) is copied to kiln
  with its view geometry kept (whole storage copied, same sizes/strides/storage_offset, so
  non-contiguous samples stay non-contiguous), and a ``"cpu"`` device argument (factory ops,
  ``Tensor.to``) becomes ``"kiln"``; python numbers stay as they are. ``KEEP_ARGS_ON_CPU`` lists the
  ops whose tensor args must be CPU tensors by the aten contract.

Then, recursively through tuples/lists:

* tensors: the kiln result is on kiln, and ``torch.testing.assert_close(kiln.cpu(), cpu)`` holds
  with dtype, shape and layout checked exactly, ``equal_nan=True`` and, per result dtype, the
  larger of ``TOLS`` (torch's defaults for float32/float64; rtol 1e-3/atol 1e-3 for float16 and
  rtol 1.6e-2/atol 1e-2 for bfloat16; exact for integers/bool; complex results use their real
  dtype's row) and the loosest ``toleranceOverride`` the OpInfo itself declares (PyTorch's own
  bound on how much two implementations of that op may differ);
* other values (python scalars, sizes, None, ...) are equal (python floats within the
  tolerances of the sample's dtype);
* if the CPU reference raises, kiln must raise too (any Exception): bad input gets an exception,
  not a silent result. If only kiln raises, that is a failure.

The result of every sample counts, whether the kiln run used native kernels or the CPU fallback:
both must be right. ``torch_kiln.fallback_report()`` is diffed around each kiln run; a sample is
*native* when it ran with zero fallbacks (and did not fail by raising on kiln only); an OpInfo is
*native* when all its samples, in all dtypes, are.

``META_ONLY`` ops (random or uninitialised outputs) are compared by shape, dtype and device only.
``SKIP`` ops are not run; each has its reason and shows up as a pytest skip and in the JSON.
Nothing else is skipped: an OpInfo without any dtype of ``DTYPES`` is listed as such in the JSON.

Selection (runtime budget)
--------------------------
All of op_db (about 700 OpInfos) takes ~3 minutes of CPU on its own, too much for ``make test``
on a shared 2-core machine. By default the file runs

1. every OpInfo whose name matches an aten op that kiln registers natively, i.e. an op listed by
   ``torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")`` (names compared
   without the ``aten::`` prefix, overload, and leading/trailing underscores, against the
   OpInfo's name, aten_name, last dotted component and aliases) -- this set grows by itself as
   native kernels are registered; plus
2. ``COMMON_FALLBACK_OPS``: a fixed sample of ~40 everyday ops (arithmetic, reductions, matmul,
   indexing, shape ops, nn.functional), so that the fallback path is covered too.

``KILN_OPINFO_ALL=1`` runs all of op_db instead (a full sweep; several minutes).

Isolation
---------
The sweep runs in a worker subprocess (this file, run as ``python test_opinfo.py --worker``)
that streams one JSON line per OpInfo. If the worker dies (segfault, abort) or stalls for
``OP_TIMEOUT_S``, the OpInfo it was on is recorded as a failure (with the signal and stderr tail)
and a fresh worker continues with the next one, so a crashing kernel fails its own test instead
of taking pytest down. ``python tests/python/test_opinfo.py --worker add mul`` runs OpInfos by
name in the foreground (one JSON line each) for debugging.

Output
------
``test_opinfo[<op>]`` fails with the list of wrong samples of that OpInfo. At the end of the
session a line ``OPINFO: ops tested=N native_ops=M samples=S passed=P native_samples=Q ...`` is
printed and ``bench/results/opinfo.json`` holds per-op/per-dtype details, the natively
registered aten ops (``NATIVE_ATEN_OPS``, also ``native_aten_ops()``) and the native OpInfos.
"""
import itertools
import json
import math
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
import warnings

import torch

import torch_kiln

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS_JSON = os.path.join(REPO, "bench", "results", "opinfo.json")

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32,
          torch.bool]
MAX_SAMPLES = 8          # samples per (op, dtype)
OP_TIMEOUT_S = 120       # a worker silent this long on one OpInfo is killed (hang)
MAX_MESSAGES = 12        # failure messages kept per OpInfo

# (rtol, atol) by result dtype. float32/float64: torch.testing defaults. 16-bit floats: torch's
# rtol with atol 1e-3 / 1e-2, since native kernels may round intermediates differently from the
# CPU kernels. Anything not listed (integers, bool) must match exactly.
TOLS = {
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
}
_COMPLEX_REAL = {torch.complex32: torch.float16, torch.complex64: torch.float32,
                 torch.complex128: torch.float64}

# OpInfos that are not run at all, with the reason.
SKIP = {
    "to_sparse": "sparse layouts: kiln has no Sparse/SparseCsr backend (out of scope)",
    "sparse.sampled_addmm": "sparse CSR input: kiln has no SparseCsr backend (out of scope)",
    "sparse.mm.reduce": "sparse CSR input: kiln has no SparseCsr backend (out of scope)",
}

# OpInfos whose values are random (kiln draws CPU generators from its own generator, so values
# legitimately differ from the CPU run) or uninitialised memory: shape/dtype/device only.
META_ONLY = {name: "random values" for name in [
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial", "normal",
    "normal.in_place", "normal.number_mean", "uniform", "rand_like", "randint", "randint_like",
    "randn", "randn_like", "nn.functional.alpha_dropout", "nn.functional.dropout",
    "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.feature_alpha_dropout.with_train", "nn.functional.rrelu",
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d", "svd_lowrank",
    "pca_lowrank"]}
META_ONLY.update({name: "uninitialised memory" for name in [
    "empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided"]})

# OpInfos whose sample args (not the input) must stay CPU tensors by the aten contract, exactly as
# on CUDA.
KEEP_ARGS_ON_CPU = {
    "tensor_split": "indices_or_sections must be a CPU tensor (aten contract, as on CUDA)",
}

# Fixed sample of everyday ops, run whether native or fallback (see the module docstring).
COMMON_FALLBACK_OPS = [
    "add", "sub", "mul", "div.no_rounding_mode", "pow", "neg", "abs", "exp", "log", "sqrt",
    "rsqrt", "tanh", "sigmoid", "clamp", "where", "maximum", "eq", "gt", "sum", "mean",
    "amax", "argmax", "var", "cumsum", "logsumexp", "matmul", "mm", "bmm", "addmm", "cat",
    "stack", "transpose", "permute", "reshape", "index_select", "gather", "masked_fill", "sort",
    "topk", "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu", "softmax",
    "log_softmax", "nn.functional.layer_norm", "nn.functional.linear", "nn.functional.embedding",
    "nn.functional.cross_entropy", "nn.functional.conv2d",
]


def native_aten_ops():
    """aten ops with a kiln (PrivateUse1) kernel, e.g. 'aten::empty_strided'."""
    regs = torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")
    return sorted(r for r in regs if r.startswith("aten::"))


NATIVE_ATEN_OPS = native_aten_ops()


def op_key(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def _norm(names):
    return {n.strip("_") for n in names if n} | {n for n in names if n}


def _opinfo_names(op):
    names = {op.name, op.aten_name, op.name.split(".")[-1], op.name.replace(".", "_")}
    names |= {a.name for a in getattr(op, "aliases", ()) if getattr(a, "name", None)}
    return _norm(names)


def _native_base_names():
    return _norm({r[len("aten::"):].split(".")[0] for r in NATIVE_ATEN_OPS})


def _load_op_db():
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def select_ops(op_db):
    """(keys in op_db order, {key: why selected})."""
    full = os.environ.get("KILN_OPINFO_ALL", "") not in ("", "0")
    native = _native_base_names()
    common = set(COMMON_FALLBACK_OPS)
    why = {}
    for op in op_db:
        key = op_key(op)
        if full:
            why[key] = "all"
        elif _opinfo_names(op) & native:
            why[key] = "native-name"
        elif key in common:
            why[key] = "common"
    return [op_key(op) for op in op_db if op_key(op) in why], why


# ---------------------------------------------------------------------------------------------
# The worker: runs OpInfos and returns one result dict each.
# ---------------------------------------------------------------------------------------------

KILN = torch.device("kiln")


def _is_cpu_device(v):
    return (isinstance(v, str) and v == "cpu") or (isinstance(v, torch.device) and v.type == "cpu")


def tensor_to_kiln(t):
    """Copies `t` to kiln keeping its view geometry: the whole CPU storage goes over and the kiln
    tensor is the same (sizes, strides, storage_offset) view of it, so non-contiguous and
    partial-view samples stay so on kiln (``t.to("kiln")`` would compact a sliced view, which
    changes what e.g. as_strided sees)."""
    if t.layout != torch.strided or t.is_conj() or t.is_neg():
        return t.to(KILN)
    storage = t.untyped_storage()
    if storage.nbytes() % t.element_size():
        return t.to(KILN)
    base = torch.empty(0, dtype=t.dtype).set_(storage, 0, (storage.nbytes() // t.element_size(),), (1,))
    return base.to(KILN).as_strided(t.shape, t.stride(), t.storage_offset())


def to_kiln(x, keep_tensors_on_cpu=False):
    if isinstance(x, torch.Tensor):
        return x if keep_tensors_on_cpu else tensor_to_kiln(x)
    if _is_cpu_device(x):  # e.g. Tensor.to("cpu", ...) samples: the kiln run targets kiln
        return KILN
    if isinstance(x, (list, tuple)) and type(x) in (list, tuple):
        return type(x)(to_kiln(v, keep_tensors_on_cpu) for v in x)
    if isinstance(x, dict):
        return {k: (KILN if k == "device" and _is_cpu_device(v) else to_kiln(v, keep_tensors_on_cpu))
                for k, v in x.items()}
    return x


def describe(x):
    if isinstance(x, torch.Tensor):
        s = f"T{list(x.shape)}:{str(x.dtype).replace('torch.', '')}"
        if x.numel() > 1 and not x.is_contiguous():
            s += f":stride{list(x.stride())}"
        return s
    if isinstance(x, (list, tuple)):
        inner = ", ".join(describe(v) for v in x[:6]) + (", ..." if len(x) > 6 else "")
        return ("[%s]" if isinstance(x, list) else "(%s)") % inner
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k}={describe(v)}" for k, v in x.items()) + "}"
    r = repr(x)
    return r if len(r) <= 40 else r[:37] + "..."


def op_tolerances(op):
    """{dtype: (rtol, atol)}: the loosest toleranceOverride the OpInfo declares (any test, any
    device): PyTorch's own bound on how far two implementations of this op may differ."""
    from torch.testing._internal.common_device_type import toleranceOverride
    out = {}
    for info in getattr(op, "decorators", ()) or ():
        for dec in getattr(info, "decorators", (info,)):
            if isinstance(dec, toleranceOverride):
                for dtype, t in dec.d.items():
                    r, a = out.get(dtype, (0.0, 0.0))
                    out[dtype] = (max(r, t.rtol), max(a, t.atol))
    return out


_OP_TOLS = {}  # the tolerances of the OpInfo being run (set by run_opinfo)


def _tols(dtype):
    dtype = _COMPLEX_REAL.get(dtype, dtype)
    r, a = TOLS.get(dtype, (0.0, 0.0))
    r2, a2 = _OP_TOLS.get(dtype, (0.0, 0.0))
    return max(r, r2), max(a, a2)


def _value_diff(got, want):
    """Short 'got vs expected' text for two CPU tensors of the same shape."""
    try:
        if got.numel() == 0:
            return ""
        g, w = got.detach().to(torch.float64 if not got.is_complex() else torch.complex128), \
            want.detach().to(torch.float64 if not want.is_complex() else torch.complex128)
        bad = ~(torch.isclose(g, w, rtol=_tols(want.dtype)[0], atol=_tols(want.dtype)[1],
                              equal_nan=True))
        n_bad = int(bad.sum())
        if n_bad == 0:
            return ""
        idx = tuple(int(i) for i in bad.nonzero()[0])
        return f"; {n_bad}/{got.numel()} differ, first at {list(idx)}: got {g[idx].item()} expected {w[idx].item()}"
    except Exception:  # noqa: BLE001 - diagnostics only
        return ""


def compare(got, want, meta_only, sample_dtype=torch.float32, path="out"):
    """Raises AssertionError describing the first mismatch between kiln `got` and CPU `want`."""
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), f"{path}: kiln returned {type(got).__name__}, expected a Tensor"
        if want.device.type == "cpu":
            assert got.device.type == "kiln", f"{path}: kiln result is on {got.device}, expected kiln"
        assert got.dtype == want.dtype, f"{path}: dtype {got.dtype} != {want.dtype}"
        assert got.shape == want.shape, f"{path}: shape {list(got.shape)} != {list(want.shape)}"
        assert got.layout == want.layout, f"{path}: layout {got.layout} != {want.layout}"
        if meta_only:
            return
        g = got.detach().cpu()
        w = want.detach()
        rtol, atol = _tols(w.dtype)
        try:
            torch.testing.assert_close(g, w, rtol=rtol, atol=atol, equal_nan=True, check_dtype=True,
                                       check_layout=True, check_stride=False)
        except AssertionError as e:
            first = str(e).strip().splitlines()[0]
            raise AssertionError(f"{path}: {first}{_value_diff(g, w)}") from None
        return
    if isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)), f"{path}: kiln returned {type(got).__name__}, expected a sequence"
        assert len(got) == len(want), f"{path}: length {len(got)} != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            compare(g, w, meta_only, sample_dtype, f"{path}[{i}]")
        return
    if isinstance(want, torch.device):
        return  # a device-valued result differs by construction
    if isinstance(want, float) and not meta_only:
        assert isinstance(got, (float, int)), f"{path}: kiln returned {got!r}, expected {want!r}"
        rtol, atol = _tols(sample_dtype if sample_dtype in TOLS else torch.float32)
        ok = (math.isnan(want) and math.isnan(got)) or math.isclose(got, want, rel_tol=rtol, abs_tol=atol)
        assert ok, f"{path}: got {got!r} expected {want!r}"
        return
    if meta_only:
        assert type(got) is type(want), f"{path}: kiln returned {type(got).__name__}, expected {type(want).__name__}"
        return
    assert got == want, f"{path}: got {got!r} expected {want!r}"


def _fallback_diff(before, after):
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0) > 0}


def run_opinfo(op):
    """Runs one OpInfo on CPU and kiln; returns a JSON-able result dict."""
    key = op_key(op)
    meta_only = key in META_ONLY
    keep_args = key in KEEP_ARGS_ON_CPU
    t0 = time.time()
    supported = op.supported_dtypes("cpu")
    _OP_TOLS.clear()
    _OP_TOLS.update(op_tolerances(op))
    res = {"op": key, "aten_name": op.aten_name, "meta_only": meta_only, "dtypes": {},
           "op_tolerances": {str(k).replace("torch.", ""): list(v) for k, v in _OP_TOLS.items()},
           "messages": [], "n_failures": 0}
    seen = {}  # failure text -> [first sample, count]
    for dtype in [d for d in DTYPES if d in supported]:
        dname = str(dtype).replace("torch.", "")
        d = {"samples": 0, "passed": 0, "native_samples": 0, "cpu_errors": 0, "fallback_ops": {}}
        res["dtypes"][dname] = d

        def fail(where, what):
            res["n_failures"] += 1
            if what in seen:  # the same error again: count it, keep the first sample's text
                seen[what][1] += 1
            elif len(seen) < MAX_MESSAGES:
                seen[what] = [where, 1]

        torch.manual_seed(0)
        try:
            samples = list(itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=False),
                                            MAX_SAMPLES))
        except Exception as e:  # noqa: BLE001
            fail(dname, f"sample_inputs raised {type(e).__name__}: {str(e)[:200]}")
            continue
        for i, s in enumerate(samples):
            d["samples"] += 1
            where = f"{dname} sample {i} input={describe(s.input)} args={describe(s.args)} kwargs={describe(s.kwargs)}"
            try:
                k_in = to_kiln(s.input)
                k_args = to_kiln(s.args, keep_tensors_on_cpu=keep_args)
                k_kwargs = to_kiln(s.kwargs, keep_tensors_on_cpu=keep_args)
            except Exception as e:  # noqa: BLE001
                fail(where, f"copying the sample to kiln raised {type(e).__name__}: {str(e)[:300]}")
                continue
            if _PROGRESS:  # lets the parent name the sample if the kiln run kills the worker
                sys.stdout.write("OPINFO_AT " + where.replace("\n", " ") + "\n")
                sys.stdout.flush()
            cpu_err = kiln_err = None
            try:
                want = op(s.input, *s.args, **s.kwargs)
            except Exception as e:  # noqa: BLE001
                cpu_err = e
            before = torch_kiln.fallback_report()
            try:
                got = op(k_in, *k_args, **k_kwargs)
            except Exception as e:  # noqa: BLE001
                kiln_err = e
            fb = _fallback_diff(before, torch_kiln.fallback_report())
            for name, n in fb.items():
                d["fallback_ops"][name] = d["fallback_ops"].get(name, 0) + n
            if not fb and (kiln_err is None or cpu_err is not None):
                d["native_samples"] += 1  # no fallback, and not a kiln-only error
            if cpu_err is not None:
                d["cpu_errors"] += 1
                if kiln_err is None:
                    fail(where, f"CPU raised {type(cpu_err).__name__}: {str(cpu_err).strip()[:150]!r} "
                                f"but kiln returned {describe(got)}")
                else:
                    d["passed"] += 1
                continue
            if kiln_err is not None:
                fail(where, f"kiln raised {type(kiln_err).__name__}: {str(kiln_err).strip()[:300]}")
                continue
            try:
                compare(got, want, meta_only, dtype)
            except Exception as e:  # noqa: BLE001
                fail(where, f"{type(e).__name__ + ': ' if not isinstance(e, AssertionError) else ''}{str(e)[:400]}")
                continue
            d["passed"] += 1
    res["messages"] = [f"{where}: {what}" + (f"  [same error in {n - 1} more sample(s)]" if n > 1 else "")
                       for what, (where, n) in seen.items()]
    res["samples"] = sum(d["samples"] for d in res["dtypes"].values())
    res["passed"] = sum(d["passed"] for d in res["dtypes"].values())
    res["native_samples"] = sum(d["native_samples"] for d in res["dtypes"].values())
    res["native"] = res["samples"] > 0 and res["native_samples"] == res["samples"]
    res["fallback_ops"] = sorted({n for d in res["dtypes"].values() for n in d["fallback_ops"]})
    res["seconds"] = round(time.time() - t0, 3)
    if not res["dtypes"]:
        res["note"] = "no dtype of DTYPES is supported on CPU; nothing to run"
    return res


_PROGRESS = False


def worker_main(keys):
    global _PROGRESS
    _PROGRESS = os.environ.get("KILN_OPINFO_PROGRESS") == "1"  # set by run_sweep
    warnings.filterwarnings("ignore")
    by_key = {op_key(op): op for op in _load_op_db()}
    for key in keys:
        if key not in by_key:
            res = {"op": key, "samples": 0, "passed": 0, "native_samples": 0, "native": False,
                   "n_failures": 1, "messages": [f"no OpInfo named {key!r}"], "dtypes": {}}
        else:
            res = run_opinfo(by_key[key])
        sys.stdout.write("OPINFO_RESULT " + json.dumps(res) + "\n")
        sys.stdout.flush()


# ---------------------------------------------------------------------------------------------
# The parent (pytest) side.
# ---------------------------------------------------------------------------------------------

def _crash_result(key, why, at, stderr_tail):
    return {"op": key, "samples": 0, "passed": 0, "native_samples": 0, "native": False,
            "n_failures": 1, "crashed": why, "crashed_at": at, "dtypes": {},
            "messages": [f"{why} at {at or 'start'}; worker stderr tail:\n{stderr_tail}"]}


def run_sweep(keys):
    """Runs `keys` in worker subprocesses (restarting after a crash); {key: result}."""
    results = {}
    todo = list(keys)
    env = dict(os.environ)
    env.setdefault("PYTHONWARNINGS", "ignore")
    env["KILN_OPINFO_PROGRESS"] = "1"
    while todo:
        with tempfile.TemporaryFile(mode="w+") as err:
            proc = subprocess.Popen([sys.executable, "-X", "faulthandler", os.path.abspath(__file__),
                                     "--worker", *todo],
                                    stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=REPO)
            lines = queue.Queue()

            def pump(out=proc.stdout):
                for line in out:
                    lines.put(line)
                lines.put(None)

            threading.Thread(target=pump, daemon=True).start()
            n_done = 0
            why = at = None
            while n_done < len(todo):
                try:
                    line = lines.get(timeout=OP_TIMEOUT_S)
                except queue.Empty:
                    why = f"no result after {OP_TIMEOUT_S}s (hang); worker killed"
                    proc.kill()
                    break
                if line is None:
                    break
                if line.startswith("OPINFO_AT "):
                    at = line[len("OPINFO_AT "):].strip()
                elif line.startswith("OPINFO_RESULT "):
                    res = json.loads(line[len("OPINFO_RESULT "):])
                    results[res["op"]] = res
                    n_done += 1
                    at = None
            rc = proc.wait()
            if n_done < len(todo):
                if why is None:
                    why = (f"worker killed by signal {-rc}" if rc < 0 else f"worker exited with status {rc}")
                err.seek(0)
                tail = "\n".join(l for l in err.read().splitlines() if "fallback.cpp" not in l)[-1500:]
                results[todo[n_done]] = _crash_result(todo[n_done], why, at, tail)
                todo = todo[n_done + 1:]
            else:
                todo = []
    return results


def summarize(results, selected, why, skipped, seconds):
    ran = [r for r in results.values() if r.get("samples", 0) > 0 or r.get("crashed")]
    s = {
        "ops_tested": len(ran),
        "native_ops": sum(1 for r in ran if r.get("native")),
        "samples": sum(r.get("samples", 0) for r in ran),
        "passed": sum(r.get("passed", 0) for r in ran),
        "native_samples": sum(r.get("native_samples", 0) for r in ran),
        "failed_ops": sum(1 for r in ran if r.get("n_failures")),
        "crashed_ops": sum(1 for r in ran if r.get("crashed")),
        "skipped_ops": len(skipped),
        "seconds": round(seconds, 1),
    }
    line = (f"OPINFO: ops tested={s['ops_tested']} native_ops={s['native_ops']} samples={s['samples']} "
            f"passed={s['passed']} native_samples={s['native_samples']} failed_ops={s['failed_ops']} "
            f"crashed_ops={s['crashed_ops']} skipped_ops={s['skipped_ops']} ({s['seconds']}s)")
    doc = {
        "summary": s,
        "summary_line": line,
        "selection": "all" if os.environ.get("KILN_OPINFO_ALL", "") not in ("", "0") else "native+common",
        "dtypes": [str(d).replace("torch.", "") for d in DTYPES],
        "max_samples": MAX_SAMPLES,
        "tolerances": {str(k).replace("torch.", ""): v for k, v in TOLS.items()},
        "fallback_mode": os.environ.get("TORCH_KILN_FALLBACK", ""),
        "native_aten_ops": NATIVE_ATEN_OPS,
        "native_opinfos": sorted(k for k, r in results.items() if r.get("native")),
        "skipped": {k: SKIP[k] for k in skipped},
        "meta_only": {k: META_ONLY[k] for k in selected if k in META_ONLY},
        "ops": {k: dict(results[k], selected_because=why.get(k)) for k in selected if k in results},
    }
    return line, doc


# ---------------------------------------------------------------------------------------------
# pytest
# ---------------------------------------------------------------------------------------------

if __name__ != "__main__":
    import pytest

    _OP_DB = _load_op_db()
    SELECTED, _WHY = select_ops(_OP_DB)
    _TO_RUN = [k for k in SELECTED if k not in SKIP]
    _SKIPPED = [k for k in SELECTED if k in SKIP]

    @pytest.fixture(scope="session")
    def opinfo_results(request):
        # Only the OpInfos whose tests were collected (so `-k name` runs just those).
        wanted = {item.callspec.params["key"] for item in request.session.items
                  if getattr(item, "originalname", None) == "test_opinfo" and hasattr(item, "callspec")}
        keys = [k for k in _TO_RUN if k in wanted]
        t0 = time.time()
        results = run_sweep(keys)
        seconds = time.time() - t0
        line, doc = summarize(results, [k for k in SELECTED if k in wanted], _WHY,
                              [k for k in _SKIPPED if k in wanted], seconds)
        os.makedirs(os.path.dirname(RESULTS_JSON), exist_ok=True)
        with open(RESULTS_JSON, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=False)

        def report():
            # Printed past pytest's output capture, so it shows with -q and when all pass.
            capman = request.config.pluginmanager.getplugin("capturemanager")
            text = f"\n{line}\nOPINFO: details in {os.path.relpath(RESULTS_JSON, REPO)}"
            if capman is not None:
                with capman.global_and_fixture_disabled():
                    print(text, flush=True)
            else:
                print(text, file=sys.__stderr__, flush=True)

        request.addfinalizer(report)
        return results

    @pytest.mark.parametrize("key", [
        pytest.param(k, marks=pytest.mark.skip(reason=SKIP[k])) if k in SKIP else k for k in SELECTED])
    def test_opinfo(key, opinfo_results):
        res = opinfo_results[key]
        if res.get("n_failures"):
            msgs = "\n  ".join(res["messages"])
            pytest.fail(f"{key}: {res['n_failures']} failing sample(s), passed {res['passed']}/{res['samples']} "
                        f"(fallback ops used: {res.get('fallback_ops')}); distinct errors:\n  {msgs}",
                        pytrace=False)
        assert res["samples"] > 0 or res.get("note"), f"{key}: no sample ran"

    def test_opinfo_selection_sane():
        """The selection is not empty and every fixed common op exists in this torch's op_db."""
        keys = {op_key(op) for op in _OP_DB}
        missing = [k for k in COMMON_FALLBACK_OPS if k not in keys]
        assert not missing, f"COMMON_FALLBACK_OPS not in op_db: {missing}"
        assert NATIVE_ATEN_OPS, "no aten op registered for PrivateUse1 (kiln shim not loaded?)"
        assert set(COMMON_FALLBACK_OPS) <= set(SELECTED)


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--worker":
        worker_main(sys.argv[2:])
    else:
        sys.exit("usage: test_opinfo.py --worker OPINFO_NAME... (or run it through pytest)")
