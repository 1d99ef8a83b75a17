# SPDX-License-Identifier: Apache-2.0
"""The "kiln" torch.compile backend.

dynamo captures the program, aot_autograd (with core-ATen decompositions) splits it into forward
and backward FX graphs, and each graph is lowered to the kiln IR, optimized and planned by the C
compiler (src/graph/) and executed per call by one kiln_exec_run: no Python per op.

Nodes kiln cannot lower split the graph: the lowerable regions become compiled kiln programs and
the rest runs eagerly on the kiln device; every split is logged with its reason (logger
"torch_kiln.compile", and printed under TORCH_KILN_LOG=graph). Shapes are static per compiled
program; dynamo's guards recompile for new shapes, and a graph that arrives with symbolic shapes
(dynamo's automatic dynamic shapes after a second shape, or dynamic=True) is specialized per
concrete call signature: re-traced with those sizes and compiled once per signature (cached).

TORCH_KILN_LOG=graph prints, per compiled program, the IR before and after the passes, the fused
groups and the memory plan, and writes an SVG picture to TORCH_KILN_LOG_DIR (default ./kiln_logs).
TORCH_KILN_LOG=profile times every step of every program from its compile on and prints the
per-op and per-step times of each when the process exits; profile(program) / set_profiling(program)
do the same for one program on demand.
"""
import atexit
import ctypes
import itertools
import logging
import os
import threading
import time

import torch
from torch._dynamo.backends.common import aot_autograd
from torch._decomp import core_aten_decompositions, get_decompositions
from torch._functorch.aot_autograd import make_boxed_func
from torch._functorch.partitioners import min_cut_rematerialization_partition

from . import _capi
from ._capi import E, check, lib
from .lowering import Unsupported, lower_graph, replay_views, unsupported_reason

log = logging.getLogger("torch_kiln.compile")

_STATS_FIELDS = ["arena_bytes", "intermediates_bytes", "n_nodes_before", "n_nodes_after", "n_fused_groups",
                 "n_kernels_per_run", "n_dce", "n_cse", "n_folded", "n_views", "n_view_copies", "n_epilogues",
                 "n_epilogue_ops", "n_fused_nodes", "n_reduce_fused", "n_inplace", "n_output_copies",
                 "constant_bytes", "scratch_bytes", "n_cats_elided", "n_sibling_merges",
                 "n_gemms_merged", "n_groups_hoisted", "n_weight_cats_read_in_place",
                 "n_contiguous_elided", "n_chained_steps"]


class _Stats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in _STATS_FIELDS] + [("reserved", ctypes.c_int64 * 6)]


lib.kiln_exec_stats.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Stats)]
lib.kiln_exec_stats.restype = ctypes.c_int

# Every program compiled in this process (most recent last): stats and split reasons, for tests,
# benchmarks and users who want to see what the compiler did.
compiled_programs = []
graph_splits = []


def _log_enabled(what="graph"):
    return what in os.environ.get("TORCH_KILN_LOG", "").split(",")


def _compile_flags():
    """KILN_COMPILE_* flags from TORCH_KILN_COMPILE_FLAGS, a comma list of pass switches such as
    "no_hfuse,no_fusion" (debugging: turn one pass off to see what it does)."""
    flags = 0
    known = [k for k in E if k.startswith("KILN_COMPILE_NO_")]  # not FLAGS_END_ / ALL_FLAGS
    for name in filter(None, (n.strip() for n in os.environ.get("TORCH_KILN_COMPILE_FLAGS", "").split(","))):
        key = "KILN_COMPILE_" + name.upper()
        if key not in known:
            raise ValueError(f"TORCH_KILN_COMPILE_FLAGS: unknown flag {name!r}; known: "
                             + ", ".join(k[13:].lower() for k in known))
        flags |= E[key]
    return flags


def set_profiling(program, on=True):
    """Start (counters reset) or stop timing every step of a compiled program (KilnProgram)."""
    if program.exec:
        check(lib.kiln_exec_set_profiling(program.exec, 1 if on else 0), "kiln_exec_set_profiling")


def profile(program):
    """The program's step times since set_profiling: totals per op kind and per step, slowest first."""
    if not program.exec:
        return f"{program.name}: no compiled steps"
    return f"{program.name}: " + _capi.text(lib.kiln_exec_dump, program.exec, 5)


def _print_profiles():
    for p in compiled_programs:
        if p.exec:
            print(f"[kiln] ==== {profile(p)}")


if _log_enabled("profile"):
    atexit.register(_print_profiles)


class KilnProgram:
    """One compiled kiln executable for an all-lowerable FX graph."""

    def __init__(self, gm, name):
        t0 = time.perf_counter()
        b, self.inputs, self.outputs, self.single = lower_graph(gm)
        try:
            if _log_enabled():
                print(f"[kiln] ==== {name}: IR before passes ====\n" + _capi.text(lib.kiln_graph_dump, b.g))
            self.exec = ctypes.c_void_p()
            if any(o[0] == "value" for o in self.outputs):
                check(lib.kiln_graph_compile_ex(b.g, _compile_flags(), ctypes.byref(self.exec)),
                      "kiln_graph_compile")
        finally:
            b.close()
        self.compile_s = time.perf_counter() - t0
        st = _Stats()
        if self.exec:
            check(lib.kiln_exec_stats(self.exec, ctypes.byref(st)), "kiln_exec_stats")
        self.stats = {n: getattr(st, n) for n in _STATS_FIELDS}
        self.stats["compile_s"] = self.compile_s
        self.name = name
        compiled_programs.append(self)
        self.n_out = sum(1 for o in self.outputs if o[0] == "value")
        # Intermediates live in a workspace taken from the device's allocator per call (freed when
        # the call returns), so a program holds no memory between calls, the forward's arena is
        # back in the cache before the backward runs, and torch.kiln.memory_* statistics see it.
        self.workspace_bytes = lib.kiln_exec_workspace_size(self.exec) if self.exec else 0
        dev = (self.inputs[0].device if self.inputs else
               next((o[2].device for o in self.outputs if o[0] == "value"), torch.device("cpu")))
        self.workspace_device = dev
        # ctypes array types for the Python call path's buffer lists (an array per call: the
        # program may be called from several threads at once)
        self._in_arr_t = ctypes.c_void_p * max(len(self.inputs), 1)
        self._out_arr_t = ctypes.c_void_p * max(self.n_out, 1)
        # torch.ops.kiln.run_program runs a call in C++ and allocates the results on one device:
        # the device of all value outputs (None: no results, or several devices; Python runs it)
        devs = {o[2].device for o in self.outputs if o[0] == "value"}
        self._run_device = next(iter(devs)) if len(devs) == 1 and self.exec else None
        self._exec_int = self.exec.value if self.exec else 0
        self._all_values = all(o[0] == "value" for o in self.outputs)
        if _log_enabled() and self.exec:
            print(f"[kiln] ==== {name}: after passes ====\n" + _capi.text(lib.kiln_exec_dump, self.exec, 4))
            d = os.environ.get("TORCH_KILN_LOG_DIR", "kiln_logs")
            os.makedirs(d, exist_ok=True)
            path = os.path.join(d, f"{name}.svg")
            with open(path, "w") as f:
                f.write(_capi.text(lib.kiln_exec_dump_svg, self.exec))
            print(f"[kiln] {name}: stats {self.stats}; picture {path}")
        if _log_enabled("profile") and self.exec:
            set_profiling(self)

    def __del__(self, _destroy=lib.kiln_exec_destroy):  # bound at definition: module globals may be gone at exit
        if getattr(self, "exec", None):
            _destroy(self.exec)
            self.exec = None

    def dump(self, stage=4):
        return _capi.text(lib.kiln_exec_dump, self.exec, stage)

    def _specs(self):
        """Per-call metadata, read from the example tensors once (attribute access on fake tensors
        is slow, and this runs on every call). Published as one attribute, so a thread that sees
        it sees both halves (two threads' first calls may both compute it: the same values)."""
        ins = [(torch.Size(m.shape), m.dtype) for m in self.inputs]
        outs = []
        for o in self.outputs:
            if o[0] == "value":
                outs.append(("value", torch.Size(o[2].shape), o[2].dtype, o[2].device))
            elif o[0] == "zeros":
                outs.append(("zeros", torch.Size(o[1].shape), o[1].dtype, self.workspace_device))
            else:
                outs.append(o)
        self._call_specs = (ins, outs)
        return ins, outs

    def __call__(self, *args):
        # Safe to call from several threads at once: per-call state is local (the C run takes a
        # run context of its own, kiln/graph.h), the shared attributes are read only.
        specs = getattr(self, "_call_specs", None)
        ins, outs = specs if specs is not None else self._specs()
        if self._run_device is not None:  # the per-call loop in C++ (torch.ops.kiln.run_program)
            values = _run_program(self._exec_int, args, self._run_device)
            return values if self._all_values else _assemble(outs, args, values)
        if len(args) != len(ins):
            raise RuntimeError(f"kiln program {self.name}: {len(args)} inputs given, compiled for {len(ins)}")
        in_arr, keep = self._in_arr_t(), None
        for i, a in enumerate(args):
            shape, dtype = ins[i]
            if a.shape != shape or a.dtype != dtype:
                raise RuntimeError(f"kiln program {self.name}: input {i} is {tuple(a.shape)} {a.dtype}, "
                                   f"compiled for {tuple(shape)} {dtype}")
            if not a.is_contiguous():
                a = a.contiguous()
                keep = keep or []
                keep.append(a)  # alive until the run returns
            in_arr[i] = a.data_ptr()
        values, out_arr, empty = [], self._out_arr_t(), torch.empty
        for o in outs:
            if o[0] == "value":
                t = empty(o[1], dtype=o[2], device=o[3])
                out_arr[len(values)] = t.data_ptr()
                values.append(t)
        results = _assemble(outs, args, values)
        if self.n_out:
            ws, ws_ptr = None, None
            if self.workspace_bytes:
                ws = empty(self.workspace_bytes + 64, dtype=torch.uint8, device=self.workspace_device)
                ws_ptr = (ws.data_ptr() + 63) & ~63  # allocators align to 64 already; be sure
            check(lib.kiln_exec_run_workspace(self.exec, len(ins), in_arr, self.n_out, out_arr,
                                              ws_ptr, self.workspace_bytes), self.name)
            del ws, keep
        return results


_counter = itertools.count(1)  # next() is atomic: compiles may run on several threads
_run_program = torch.ops.kiln.run_program


def _assemble(outs, args, values):
    """A program's results in order: its computed `values`, views of inputs, zeros, constants."""
    results, k = [], 0
    for o in outs:
        kind = o[0]
        if kind == "value":
            results.append(values[k])
            k += 1
        elif kind == "alias":
            results.append(replay_views(args[o[1]], o[2]))
        elif kind == "zeros":
            results.append(torch.zeros(o[1], dtype=o[2], device=o[3]))
        else:
            results.append(o[1])
    return results


def _compile_fx(gm, example_inputs, kind):
    """aot_autograd's fw/bw compiler: a kiln program, or a split graph with kiln submodules."""
    name = f"{kind}{next(_counter)}"
    dynamic = any(isinstance(n.meta.get("val"), torch.SymInt) or
                  (isinstance(getattr(n.meta.get("val"), "shape", None), torch.Size) and
                   not all(isinstance(s, int) for s in n.meta["val"].shape))
                  for n in gm.graph.nodes if n.op == "placeholder")
    if dynamic:
        # kiln programs have static shapes: specialize per concrete call signature (cached); each
        # specialization is checked for unlowered ops when it is compiled
        return make_boxed_func(_Specializing(gm, name, kind))
    reasons = {}
    for node in gm.graph.nodes:
        r = unsupported_reason(node)
        if r is not None:
            reasons.setdefault(r, []).append(node.name)
    if not reasons:
        try:
            prog = KilnProgram(gm, name)
            return make_boxed_func(prog)
        except Unsupported as e:
            reasons[str(e)] = ["(lowering)"]
    for r, nodes in reasons.items():
        _log_split(f"kiln: graph {name} split at {len(nodes)} node(s): {r} [{', '.join(nodes[:5])}]")
    return make_boxed_func(_partition(gm, name))


def _log_split(msg):
    """Record a part of a graph that runs eagerly: graph_splits, the logger, TORCH_KILN_LOG=graph."""
    graph_splits.append(msg)
    log.warning(msg)
    if _log_enabled():
        print("[kiln] " + msg)


class _Specializing:
    """A graph traced with symbolic shapes (dynamo's automatic dynamic shapes, or dynamic=True).

    Each new call signature (input shapes and dtypes, values of symbolic-int inputs) re-traces the
    graph with those concrete values into a static FX graph and compiles it like any other
    (kiln program, or split graph); later calls with the same signature reuse it. Past
    MAX_SPECIALIZATIONS signatures the graph runs eagerly on kiln (logged once)."""

    MAX_SPECIALIZATIONS = 64

    def __init__(self, gm, name, kind):
        self.gm, self.name, self.kind = gm, name, kind
        self.cache = {}
        self.overflowed = False
        self._lock = threading.Lock()  # one thread compiles a new signature; the others wait

    @staticmethod
    def _key(args):
        return tuple((tuple(a.shape), a.dtype, a.device) if isinstance(a, torch.Tensor) else (type(a), a)
                     for a in args)

    def __call__(self, *args):
        key = self._key(args)
        fn = self.cache.get(key)
        if fn is None:
            fn = self._specialize(key, args)
        if fn is None:
            return self.gm(*args)
        compiled, idx = fn
        return compiled([args[i] for i in idx])

    def _specialize(self, key, args):
        """The compiled function for a new signature (None past MAX_SPECIALIZATIONS: eager)."""
        with self._lock:
            fn = self.cache.get(key)
            if fn is not None:  # compiled by another thread meanwhile
                return fn
            if len(self.cache) >= self.MAX_SPECIALIZATIONS:
                if not self.overflowed:
                    self.overflowed = True
                    _log_split(f"kiln: graph {self.name} saw more than {self.MAX_SPECIALIZATIONS} shape "
                               "signatures; further ones run eagerly on kiln")
                return None
            from torch.fx.experimental.proxy_tensor import make_fx
            idx = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]

            def concrete(*tensors):  # the non-tensor inputs (symbolic sizes) are fixed by the key
                full = list(args)
                for i, t in zip(idx, tensors):
                    full[i] = t
                return self.gm(*full)

            tensors = [args[i] for i in idx]
            static = make_fx(concrete, tracing_mode="fake")(*tensors)
            fn = (_compile_fx(static, tensors, self.kind), idx)
            self.cache[key] = fn
            return fn


def _partition(gm, name):
    """Lowerable regions become kiln programs; the rest of gm runs eagerly."""
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    from torch.fx.passes.operator_support import OperatorSupportBase

    class Support(OperatorSupportBase):
        def is_node_supported(self, submodules, node):
            return node.op == "call_function" and unsupported_reason(node) is None

    part = CapabilityBasedPartitioner(gm, Support(), allows_single_node_partition=True)
    fused = part.fuse_partitions(part.propose_partitions())
    for sub_name, sub in list(fused.named_children()):
        try:
            prog = KilnProgram(sub, f"{name}_{sub_name}")
        except Unsupported as e:
            _log_split(f"kiln: graph {name}_{sub_name} stays eager: {e}")
            continue
        setattr(fused, sub_name, _ProgramModule(prog))
    fused.recompile()
    return fused.forward


class _ProgramModule(torch.nn.Module):
    def __init__(self, prog):
        super().__init__()
        self.prog = prog

    def forward(self, *args):
        out = self.prog(*args)
        return out[0] if self.prog.single else tuple(out)


def _fw(gm, example_inputs):
    return _compile_fx(gm, example_inputs, "forward")


def _bw(gm, example_inputs):
    return _compile_fx(gm, example_inputs, "backward")


def _decompositions():
    decomp = dict(core_aten_decompositions())
    # kiln has fused kernels for these: keep them whole.
    for op in (torch.ops.aten._softmax.default, torch.ops.aten._log_softmax.default,
               torch.ops.aten.native_layer_norm.default, torch.ops.aten.native_layer_norm_backward.default,
               torch.ops.aten._softmax_backward_data.default, torch.ops.aten._log_softmax_backward_data.default,
               torch.ops.aten.embedding_dense_backward.default, torch.ops.aten.gelu_backward.default,
               torch.ops.aten.silu_backward.default, torch.ops.aten.addmm.default, torch.ops.aten.mm.default,
               torch.ops.aten.nll_loss_forward.default, torch.ops.aten.nll_loss_backward.default,
               torch.ops.aten.embedding.default):
        decomp.pop(op, None)
    # Batch norm has no kiln graph op: its decomposition (var_mean, lowered as two reductions;
    # pointwise; running-stat updates) fuses into a few reductions and pointwise groups, as Inductor does it.
    decomp.update(get_decompositions([
        torch.ops.aten._native_batch_norm_legit_functional.default,
        torch.ops.aten._native_batch_norm_legit_no_training.default,
        torch.ops.aten._native_batch_norm_legit.default, torch.ops.aten._native_batch_norm_legit.no_stats,
        torch.ops.aten.native_batch_norm.default]))
    return decomp


# The min-cut partitioner (Inductor's) saves fewer activations for backward and recomputes cheap
# pointwise chains there instead; kiln fuses the recomputation into the backward's kernels. With
# the default partitioner a compiled train step held ~30% more memory than eager.
kiln_backend = aot_autograd(fw_compiler=_fw, bw_compiler=_bw, decompositions=_decompositions(),
                            partition_fn=min_cut_rematerialization_partition)
