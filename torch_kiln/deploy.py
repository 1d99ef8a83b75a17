# SPDX-License-Identifier: Apache-2.0
"""torch_kiln.export / torch_kiln.load: a PyTorch model as one .kiln file that runs without Python.

export() runs torch.export, the core-ATen decompositions kiln's compiler uses, lowers the graph
to the C graph compiler (the same lowering as torch.compile's backend) with the parameters and
buffers as constants, and writes a model file (kiln/model.h, format version 3): the program, the
plan, the signature (names, dtypes, shapes, dynamic dims with their bounds) and the weights,
64-byte aligned so a mapped file is used in place. `build/kiln-run` and the C API run it.

Dynamic dims (torch.export.Dim with a max) make one file serve every size within the bounds.
The program is lowered at several sample sizes; every attribute that differs between them is
tied to one of the program's own symbolic sizes (the shapes torch.export inferred), so the C
runtime rebuilds the program exactly for any size in range, compiled once per size. A program
whose structure or constants depend on the size (a size-dependent factory folded to a
constant, say) is refused with the node named, never exported approximately.
"""
import ctypes
import os
import warnings

import torch

from .compile import _capi
from .compile._capi import E, check, lib

__all__ = ["export", "load", "ExportError", "KilnModel"]


class ExportError(RuntimeError):
    """The program cannot be exported to a .kiln file (the message says which node and why)."""


_ASSERT_OPS = {"_assert_scalar", "_assert_tensor_metadata", "sym_constrain_range_for_size", "sym_constrain_range",
               "_assert_async"}


def _strip_asserts(gm):
    """Drops the runtime-assertion nodes torch.export adds (the bounds are checked by the C runtime)."""
    changed = False
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and getattr(node.target, "__name__", "").split(".")[0] in _ASSERT_OPS \
                and not node.users:
            gm.graph.erase_node(node)
            changed = True
    if changed:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return gm


def _sym_expr(d):
    return d.node.expr if isinstance(d, torch.SymInt) else None


def _rpn(expr, sym_index):
    """The postfix program (kiln/model.h) of a sympy integer expression, or None."""
    import sympy
    from torch.utils._sympy.functions import FloorDiv, Mod, PythonMod
    out = []

    def emit(e):
        if isinstance(e, sympy.Integer) or (e.is_number and e.is_integer):
            out.extend([E["KILN_EXPR_CONST"], int(e)])
        elif isinstance(e, sympy.Symbol):
            if e not in sym_index:
                raise ValueError(e)
            out.extend([E["KILN_EXPR_SYM"], sym_index[e]])
        elif isinstance(e, (sympy.Add, sympy.Mul, sympy.Max, sympy.Min)):
            op = {sympy.Add: "ADD", sympy.Mul: "MUL", sympy.Max: "MAX", sympy.Min: "MIN"}[type(e)]
            args = list(e.args)
            emit(args[0])
            for a in args[1:]:
                emit(a)
                out.append(E["KILN_EXPR_" + op])
        elif isinstance(e, FloorDiv):
            emit(e.args[0])
            emit(e.args[1])
            out.append(E["KILN_EXPR_FLOORDIV"])
        elif isinstance(e, (Mod, PythonMod)):
            emit(e.args[0])
            emit(e.args[1])
            out.append(E["KILN_EXPR_MOD"])
        elif isinstance(e, sympy.Pow) and e.args[1].is_Integer and 1 <= int(e.args[1]) <= 8:
            emit(e.args[0])
            for _ in range(int(e.args[1]) - 1):
                emit(e.args[0])
                out.append(E["KILN_EXPR_MUL"])
        else:
            raise ValueError(e)

    try:
        emit(expr)
    except (ValueError, TypeError, KeyError):
        return None
    return out if len(out) <= E.get("KILN_EXPR_MAX_TOKENS", 64) else None


def _candidates(gm, sym_index):
    """The distinct symbolic sizes of the program: every dim of every value, the products of
    adjacent dims and each value's element count, simplest first."""
    import sympy
    seen, exprs = set(), []

    def add(e):
        e = sympy.expand(e) if not e.has(sympy.Function) else e
        if e.is_number:
            return
        key = str(e)
        if key not in seen:
            seen.add(key)
            exprs.append(e)

    for s in sym_index:
        add(s)
    for node in gm.graph.nodes:
        vals = node.meta.get("val")
        for v in (vals if isinstance(vals, (tuple, list)) else [vals]):
            if isinstance(v, torch.SymInt):
                add(v.node.expr)
            elif isinstance(v, torch.Tensor):
                dims = [_sym_expr(d) if isinstance(d, torch.SymInt) else sympy.Integer(int(d)) for d in v.shape]
                for d in dims:
                    add(d)
                for i in range(len(dims) - 1):
                    add(dims[i] * dims[i + 1])
                if dims:
                    add(sympy.Mul(*dims))
    exprs.sort(key=lambda e: (sympy.count_ops(e), len(str(e))))
    return exprs


def _dim_names(dynamic_shapes, user_nodes, sym_index):
    """{symbol: the name of the torch.export.Dim the user declared for it} where it can be told
    (dynamic_shapes given per positional input as a tuple/list, or by input name as a dict)."""
    specs = []
    if isinstance(dynamic_shapes, (tuple, list)):
        specs = list(dynamic_shapes)
    elif isinstance(dynamic_shapes, dict):
        specs = list(dynamic_shapes.values()) if len(dynamic_shapes) == len(user_nodes) else []
    names = {}
    for n, spec in zip(user_nodes, specs):
        items = spec.items() if isinstance(spec, dict) else enumerate(spec) if isinstance(spec, (tuple, list)) else []
        shape = n.meta["val"].shape
        for d, dim in items:
            name = getattr(dim, "__name__", None)
            if name and isinstance(d, int) and d < len(shape):
                e = _sym_expr(shape[d])
                if e in sym_index and name not in names.values():
                    names[e] = name
    return names


def _lift_constants(ep):
    """{placeholder name: tensor} for the parameters, buffers and constants torch.export lifted,
    and the user-input placeholder names in order."""
    from torch.export.graph_signature import InputKind, OutputKind, TensorArgument
    sig = ep.graph_signature
    consts, users = {}, []
    for spec in sig.input_specs:
        name = getattr(spec.arg, "name", None)
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            t = ep.state_dict[spec.target] if spec.target in ep.state_dict else ep.constants[spec.target]
            consts[name] = t.detach()
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            consts[name] = ep.constants[spec.target].detach()
        elif spec.kind == InputKind.USER_INPUT:
            if not isinstance(spec.arg, TensorArgument):
                raise ExportError(f"kiln export: input {name or spec.arg!r} is not a tensor (only tensor inputs "
                                  "can be fed from C; close over constants instead)")
            users.append(name)
        else:
            raise ExportError(f"kiln export: input {name} of kind {spec.kind.name} is not supported")
    for spec in sig.output_specs:
        if spec.kind != OutputKind.USER_OUTPUT:
            raise ExportError(f"kiln export: the program mutates {spec.target} ({spec.kind.name}); a deployed "
                              "program must be pure (call model.eval(), or drop the in-place state update)")
    for k, t in consts.items():
        if t.dtype not in _DTYPES:
            raise ExportError(f"kiln export: constant {k} has dtype {t.dtype}, which kiln lacks")
    return consts, users


def _unsupported(gm):
    from .compile.lowering import unsupported_reason
    reasons = {}
    for node in gm.graph.nodes:
        if node.op == "call_function":
            r = unsupported_reason(node)
            if r is not None:
                reasons.setdefault(r, []).append(node.name)
    return reasons


def _lower(gm, consts, what):
    """A GraphBuilder holding gm lowered for export (every output a program value)."""
    from .compile.lowering import Unsupported, lower_graph
    reasons = _unsupported(gm)
    if reasons:
        lines = [f"  {r} [{', '.join(ns[:6])}{', ...' if len(ns) > 6 else ''}]" for r, ns in reasons.items()]
        raise ExportError(f"kiln export: {sum(len(v) for v in reasons.values())} node(s) of {what} cannot be "
                          "lowered to kiln:\n" + "\n".join(lines))
    try:
        b, inputs, outs, single = lower_graph(gm, constants=consts, export=True)
    except Unsupported as e:
        raise ExportError(f"kiln export: {what}: {e}") from None
    return b, inputs, outs, single


_DTYPES = None


def _dtypes():
    global _DTYPES
    if _DTYPES is None:
        from .compile.lowering import DTYPES
        _DTYPES = DTYPES
    return _DTYPES


def _samples(bounds):
    """Symbol values to lower at: the bounds first (the reference), then values that tell each
    symbol's effect apart (every symbol moved on its own from a base of distinct values)."""
    n = len(bounds)
    hi = [b[1] for b in bounds]
    base = []
    for k, (lo, h) in enumerate(bounds):
        v = lo + (h - lo) * (k + 1) // (n + 2)
        base.append(v if v != h or lo == h else max(lo, h - 1))
    out = [hi, [b[0] for b in bounds], base]
    for k, (lo, h) in enumerate(bounds):
        alt = list(base)
        for cand in (base[k] + 1, base[k] - 1, lo, h):
            if lo <= cand <= h and cand != base[k]:
                alt[k] = cand
                break
        out.append(alt)
    uniq = []
    for s in out:
        if s not in uniq:
            uniq.append(s)
    return uniq


def export(model, example_args, path, *, device="kiln", dynamic_shapes=None, example_kwargs=None,
           input_names=None, output_names=None, check=True, strict=False):
    """Exports `model` (an nn.Module, or a torch.export.ExportedProgram) called on `example_args`
    to a .kiln model file at `path` and returns the path.

    dynamic_shapes: as torch.export's; every dynamic dim needs an upper bound (Dim(..., max=N)),
    and the file then serves every size in [min, max]. input_names / output_names: names in the
    signature (default: the forward's parameter names; "output", or "output0", ...). check: load
    the file on `device` and compare it with the
    exported program on the example inputs (raises ExportError on a mismatch).
    Raises ExportError naming every node that cannot be lowered, and for mutated state."""
    from .compile.backend import _compile_flags, _decompositions
    _dtypes()
    with warnings.catch_warnings():
        # torch.export's own pytree deprecation notice (torch 2.13), not the caller's concern
        warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\).*", category=FutureWarning)
        return _export(model, example_args, path, device, dynamic_shapes, example_kwargs, input_names, output_names,
                       check, strict, _compile_flags, _decompositions)


def _export(model, example_args, path, device, dynamic_shapes, example_kwargs, input_names, output_names, check,
            strict, _compile_flags, _decompositions):
    if isinstance(model, torch.export.ExportedProgram):
        ep = model
    else:
        if isinstance(model, torch.nn.Module):
            model = model.eval()
        ep = torch.export.export(model, tuple(example_args), kwargs=example_kwargs, dynamic_shapes=dynamic_shapes,
                                 strict=strict)
    ep = ep.run_decompositions(_decompositions())
    consts, user_names = _lift_constants(ep)
    gm = _strip_asserts(ep.graph_module)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    by_name = {n.name: n for n in placeholders}
    user_nodes = [by_name[n] for n in user_names]
    for n in user_nodes:
        v = n.meta.get("val")
        if not isinstance(v, torch.Tensor) or v.dtype not in _DTYPES:
            raise ExportError(f"kiln export: input {n.name} has dtype {getattr(v, 'dtype', v)}, which kiln lacks")
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    out_vals = out_node.args[0] if isinstance(out_node.args[0], (tuple, list)) else [out_node.args[0]]

    # the symbols of the dynamic dims, with their bounds
    syms = {}
    for n in user_nodes:
        for d in n.meta["val"].shape:
            e = _sym_expr(d)
            if e is not None:
                for s in e.free_symbols:
                    syms[s] = None
    sym_list = sorted(syms, key=str)
    bounds = []
    for s in sym_list:
        r = ep.range_constraints.get(s)
        lo, hi = (r.lower, r.upper) if r is not None else (0, None)
        try:
            lo = int(lo)
            hi = int(hi) if hi is not None and bool(getattr(hi, "is_finite", True)) else None
        except (TypeError, ValueError, OverflowError, AttributeError):  # sympy's int_oo
            hi = None
        if hi is None or hi > (1 << 40):
            raise ExportError(f"kiln export: dynamic dim {s} has no upper bound; declare one "
                              f"(torch.export.Dim(name, max=N)) so the memory plan can be sized for it")
        bounds.append((max(lo, 0), hi))
    sym_index = {s: k for k, s in enumerate(sym_list)}
    names = _dim_names(dynamic_shapes, user_nodes, sym_index)
    for n in user_nodes:
        for i, d in enumerate(n.meta["val"].shape):
            e = _sym_expr(d)
            if e is not None and e not in sym_index:
                raise ExportError(f"kiln export: input {n.name} dim {i} is {e}, not a plain dynamic dim; give the "
                                  "input a Dim of its own")
    if not sym_list:
        builders = [(_lower(gm, consts, "the program"), [])]
    else:
        from torch.fx.experimental.proxy_tensor import make_fx
        builders = []
        for vals in _samples(bounds):
            subs = dict(zip(sym_list, vals))
            args = []
            for n in placeholders:
                if n.name in consts:
                    args.append(consts[n.name])
                else:
                    v = n.meta["val"]
                    shape = [int(_sym_expr(d).subs(subs)) if isinstance(d, torch.SymInt) else int(d) for d in v.shape]
                    args.append(torch.zeros(shape, dtype=v.dtype))
            static = _strip_asserts(make_fx(gm, tracing_mode="fake")(*args))
            sp = [n for n in static.graph.nodes if n.op == "placeholder"]
            sconsts = {sp[i].name: consts[n.name] for i, n in enumerate(placeholders) if n.name in consts}
            what = "the program at " + ", ".join(f"{s}={v}" for s, v in subs.items())
            builders.append((_lower(static, sconsts, what), vals))
    try:
        n_g = len(builders)
        graphs = (ctypes.c_void_p * n_g)(*[b[0][0].g.value for b in builders])
        n_s = len(sym_list)
        symbols = (_capi.ModelSymbol * max(n_s, 1))(
            *[_capi.ModelSymbol(names.get(s, str(s)).encode(), lo, hi) for s, (lo, hi) in zip(sym_list, bounds)])
        samples = (ctypes.c_int64 * max(n_g * n_s, 1))(*[v for b in builders for v in b[1]])
        codes, lens = [], []
        if n_s:
            for e in _candidates(gm, sym_index):
                r = _rpn(e, sym_index)
                if r is not None:
                    codes.extend(r)
                    lens.append(len(r))
        code_arr = (ctypes.c_int64 * max(len(codes), 1))(*codes)
        len_arr = (ctypes.c_int * max(len(lens), 1))(*lens)
        in_names = list(input_names) if input_names is not None else [n.name for n in user_nodes]
        default_out = ["output"] if len(out_vals) == 1 else [f"output{i}" for i in range(len(out_vals))]
        out_names = list(output_names) if output_names is not None else default_out
        if len(in_names) != len(user_nodes) or len(out_names) != len(out_vals):
            raise ExportError(f"kiln export: {len(in_names)} input names for {len(user_nodes)} inputs, "
                              f"{len(out_names)} output names for {len(out_vals)} outputs")
        in_arr = (ctypes.c_char_p * max(len(in_names), 1))(*[s.encode() for s in in_names])
        out_arr = (ctypes.c_char_p * max(len(out_names), 1))(*[s.encode() for s in out_names])
        desc = _capi.ModelDesc(ctypes.sizeof(_capi.ModelDesc), n_g, graphs, n_s, symbols, samples, len(lens),
                               code_arr, len_arr, in_arr, out_arr, _compile_flags())
        path = os.fspath(path)
        st = lib.kiln_model_save(ctypes.byref(desc), path.encode())
        if st != 0:
            msg = lib.kiln_status_message().decode(errors="replace")
            raise ExportError(f"kiln export: {msg}")
    finally:
        for b in builders:
            b[0][0].close()
    if check:
        _check(ep, example_args, example_kwargs, path, device)
    return path


def _check(ep, example_args, example_kwargs, path, device):
    """The written file, run on `device`, against the exported program on the example inputs."""
    with torch.no_grad():
        ref = ep.module()(*example_args, **(example_kwargs or {}))
    refs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
    m = load(path, device=device)
    flat = list(example_args) + list((example_kwargs or {}).values())
    got = m(*flat)
    gots = list(got) if isinstance(got, (tuple, list)) else [got]
    for i, (r, g) in enumerate(zip(refs, gots)):
        r = r.detach().cpu()
        g = g.cpu()
        tol = (1e-3, 1e-4) if r.dtype in (torch.float32, torch.float64) else (2e-2, 2e-2)
        try:
            torch.testing.assert_close(g, r, rtol=tol[0], atol=tol[1] * max(1.0, float(r.abs().max())) if r.numel()
                                       and r.is_floating_point() else 0, check_device=False)
        except AssertionError as e:
            raise ExportError(f"kiln export: output {i} of {path} differs from the exported program on the example "
                              f"inputs (pass check=False to keep the file anyway):\n{e}") from None


def _device_index(device):
    d = torch.device(device)
    if d.type != "kiln":
        raise ValueError(f"torch_kiln.load: device must be a kiln device, got {d}")
    return d.index if d.index is not None else torch.kiln.current_device()


def _dtype_of(code):
    for t, c in _dtypes().items():
        if c == code:
            return t
    raise ExportError(f"kiln model: unknown dtype code {code}")


class KilnModel:
    """A loaded .kiln model file, callable on tensors (results on its kiln device).

    `inputs` / `outputs` describe the signature: (name, dtype, shape with None for dynamic
    dims, {dim: (symbol, min, max)}); `info` has the file's sizes and the workspace. Safe to
    call from several threads at once (kiln/model.h)."""

    def __init__(self, path, device="kiln"):
        _dtypes()
        self.path = os.fspath(path)
        self.device = torch.device("kiln", _device_index(device))
        self._m = ctypes.c_void_p()
        st = lib.kiln_model_load(self.path.encode(), self.device.index, ctypes.byref(self._m))
        if st != 0:
            raise RuntimeError(f"torch_kiln.load: {lib.kiln_status_message().decode(errors='replace')}")
        self._n_in = lib.kiln_model_num_inputs(self._m)
        self._n_out = lib.kiln_model_num_outputs(self._m)
        self.inputs = [self._io(lib.kiln_model_input_info, i) for i in range(self._n_in)]
        self.outputs = [self._io(lib.kiln_model_output_info, i) for i in range(self._n_out)]

    def _io(self, fn, i):
        io = _capi.ModelIO()
        check(fn(self._m, i, ctypes.byref(io)), fn.__name__)
        shape, dyn = [], {}
        for d in range(io.ndim):
            if io.dynamic_mask >> d & 1:
                shape.append(None)
                name = io.dim_names[d].decode() if io.dim_names[d] else None
                dyn[d] = (name, io.min[d], io.shape[d])
            else:
                shape.append(io.shape[d])
        return (io.name.decode(), _dtype_of(io.dtype), tuple(shape), dyn)

    @property
    def info(self):
        inf = _capi.ModelInfo()
        check(lib.kiln_model_get_info(self._m, ctypes.byref(inf)), "kiln_model_get_info")
        return {f: getattr(inf, f) for f, _ in _capi.ModelInfo._fields_}

    def __call__(self, *args):
        if len(args) != self._n_in:
            raise TypeError(f"{self.path}: {len(args)} inputs given, the model takes {self._n_in}")
        ins = (_capi.Tensor * max(self._n_in, 1))()
        keep = []
        for i, a in enumerate(args):
            if not isinstance(a, torch.Tensor):
                raise TypeError(f"{self.path}: input {i} ({self.inputs[i][0]}) is {type(a).__name__}, not a tensor")
            if a.device.type not in ("cpu", "kiln"):
                a = a.to(self.device)
            a = a.contiguous()
            keep.append(a)
            t = ins[i]
            t.data = a.data_ptr() if a.numel() else None
            t.dtype = _dtypes().get(a.dtype, -1)
            if t.dtype < 0:
                raise TypeError(f"{self.path}: input {i} ({self.inputs[i][0]}) has dtype {a.dtype}, which kiln lacks")
            t.ndim = a.dim()
            if a.dim() > _capi.MAX_DIMS:
                raise ValueError(f"{self.path}: input {i} has {a.dim()} dims")
            for d in range(a.dim()):
                t.shape[d] = a.shape[d]
                t.strides[d] = a.stride(d)
        outs = (_capi.Tensor * max(self._n_out, 1))()
        st = lib.kiln_model_output_shapes(self._m, self._n_in, ins, self._n_out, outs)
        if st != 0:
            raise RuntimeError(f"{self.path}: {lib.kiln_status_message().decode(errors='replace')}")
        results = []
        for k in range(self._n_out):
            o = outs[k]
            r = torch.empty([o.shape[d] for d in range(o.ndim)], dtype=_dtype_of(o.dtype), device=self.device)
            o.data = r.data_ptr() if r.numel() else None
            if not r.numel():  # a zero-size output still needs an address for the run's checks
                pad = torch.empty(1, dtype=torch.uint8, device=self.device)
                keep.append(pad)
                o.data = pad.data_ptr()
            results.append(r)
        st = lib.kiln_model_run(self._m, self._n_in, ins, self._n_out, outs)
        if st != 0:
            raise RuntimeError(f"{self.path}: {lib.kiln_status_message().decode(errors='replace')}")
        del keep
        return results[0] if self._n_out == 1 else tuple(results)

    def __del__(self, _destroy=lib.kiln_model_destroy):
        if getattr(self, "_m", None):
            _destroy(self._m)
            self._m = None

    def __repr__(self):
        return f"KilnModel({self.path!r}, inputs={self.inputs}, outputs={self.outputs}, device={self.device})"


def load(path, device="kiln"):
    """Loads a .kiln model file (written by export or kiln_exec_save) as a callable on `device`."""
    return KilnModel(path, device)
