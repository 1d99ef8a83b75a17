# SPDX-License-Identifier: Apache-2.0
"""ctypes binding of libkiln's graph compiler (include/kiln/graph.h) and its op enums.

The op codes are the kernel enums of include/kiln/kernels/*.h; they are read from the headers
(shipped inside the package by the build) so that C stays the single source of truth.
"""
import ctypes
import os
import re

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIB_PATH = os.path.join(_HERE, "libkiln.so")
lib = ctypes.CDLL(_LIB_PATH, mode=ctypes.RTLD_GLOBAL)


def _header_dirs():
    yield os.path.join(_HERE, "include", "kiln")
    yield os.path.join(_HERE, "..", "include", "kiln")


def _parse_enums():
    """{NAME: value} for every enumerator in kiln's public headers."""
    values = {}
    for d in _header_dirs():
        if not os.path.isdir(d):
            continue
        files = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".h")]
        kd = os.path.join(d, "kernels")
        if os.path.isdir(kd):
            files += [os.path.join(kd, f) for f in os.listdir(kd) if f.endswith(".h")]
        for path in sorted(files):
            text = re.sub(r"/\*.*?\*/", "", open(path).read(), flags=re.S)
            for body in re.findall(r"enum\s*\w*\s*\{(.*?)\}", text, flags=re.S):
                nxt = 0
                for item in body.split(","):
                    item = item.strip()
                    if not item:
                        continue
                    if "=" in item:
                        name, expr = (x.strip() for x in item.split("=", 1))
                        expr = re.sub(r"\bKILN_\w+\b", lambda m: str(values[m.group(0)]), expr)
                        val = int(eval(expr, {"__builtins__": {}}))  # integer literals and shifts only
                    else:
                        name, val = item, nxt
                    values[name] = val
                    nxt = val + 1
        if values:
            return values
    raise ImportError("torch_kiln.compile: kiln headers not found (run `make build`)")


E = _parse_enums()

c_int, c_int64, c_double, c_void_p, c_size_t = ctypes.c_int, ctypes.c_int64, ctypes.c_double, ctypes.c_void_p, ctypes.c_size_t
P = ctypes.POINTER
I64P, IP = P(c_int64), P(c_int)

_SIGS = {
    "kiln_graph_create": [P(c_void_p)],
    "kiln_graph_destroy": [c_void_p],
    "kiln_graph_input": [c_void_p, c_int, c_int, I64P, IP],
    "kiln_graph_constant": [c_void_p, c_int, c_int, I64P, c_void_p, IP],
    "kiln_graph_scalar": [c_void_p, c_double, c_int, IP],
    "kiln_graph_scalar_i64": [c_void_p, c_int64, c_int, IP],
    "kiln_graph_full": [c_void_p, c_int, c_int, I64P, c_double, IP],
    "kiln_graph_unary": [c_void_p, c_int, c_int, c_int, IP],
    "kiln_graph_unary_ex": [c_void_p, c_int, c_int, c_double, c_double, c_double, c_double, c_double, c_double,
                            c_int, c_int, c_int, IP],
    "kiln_graph_binary": [c_void_p, c_int, c_int, c_int, c_double, c_int, IP],
    "kiln_graph_binary_ex": [c_void_p, c_int, c_int, c_int, c_double, c_int, c_int, IP],
    "kiln_graph_ternary": [c_void_p, c_int, c_int, c_int, c_int, c_double, c_int, IP],
    "kiln_graph_where": [c_void_p, c_int, c_int, c_int, IP],
    "kiln_graph_cast": [c_void_p, c_int, c_int, IP],
    "kiln_graph_copy": [c_void_p, c_int, c_int, IP],
    "kiln_graph_reduce": [c_void_p, c_int, c_int, ctypes.c_uint32, c_int, c_double, c_int, IP],
    "kiln_graph_reduce_index": [c_void_p, c_int, c_int, c_int, c_int, IP, IP],
    "kiln_graph_scan": [c_void_p, c_int, c_int, c_int, c_int, IP],
    "kiln_graph_matmul": [c_void_p, c_int, c_int, IP],
    "kiln_graph_addmm": [c_void_p, c_int, c_int, c_int, c_double, c_double, IP],
    "kiln_graph_reshape": [c_void_p, c_int, c_int, I64P, IP],
    "kiln_graph_permute": [c_void_p, c_int, IP, IP],
    "kiln_graph_expand": [c_void_p, c_int, c_int, I64P, IP],
    "kiln_graph_slice": [c_void_p, c_int, c_int, c_int64, c_int64, c_int64, IP],
    "kiln_graph_select": [c_void_p, c_int, c_int, c_int64, IP],
    "kiln_graph_contiguous": [c_void_p, c_int, IP],
    "kiln_graph_cat": [c_void_p, c_int, IP, c_int, IP],
    "kiln_graph_softmax": [c_void_p, c_int, c_int, c_int, c_int, IP],
    "kiln_graph_softmax_backward": [c_void_p, c_int, c_int, c_int, c_int, c_int, IP],
    "kiln_graph_layer_norm": [c_void_p, c_int, c_int, c_int, c_int, c_double, IP, IP, IP],
    "kiln_graph_layer_norm_backward": [c_void_p, c_int, c_int, c_int, c_int, c_int, c_int, c_int, IP, IP, IP],
    "kiln_graph_embedding": [c_void_p, c_int, c_int, IP],
    "kiln_graph_embedding_backward": [c_void_p, c_int, c_int, c_int64, c_int64, c_int, IP],
    "kiln_graph_nll_loss": [c_void_p, c_int, c_int, c_int, c_int, c_int64, IP, IP],
    "kiln_graph_nll_loss_backward": [c_void_p, c_int, c_int, c_int, c_int, c_int, c_int64, c_int, IP],
    "kiln_graph_sdpa": [c_void_p, c_int, c_int, c_int, c_int, c_int, c_double, IP, IP],
    "kiln_graph_sdpa_backward": [c_void_p, c_int, c_int, c_int, c_int, c_int, c_int, c_int, c_int, c_double, IP, IP, IP],
    "kiln_graph_conv2d": [c_void_p, c_int, c_int, c_int, I64P, I64P, I64P, c_int64, IP],
    "kiln_graph_conv2d_backward": [c_void_p, c_int, c_int, c_int, I64P, I64P, I64P, c_int64, IP, IP, IP],
    "kiln_graph_max_pool2d": [c_void_p, c_int, I64P, I64P, I64P, I64P, c_int, IP, IP],
    "kiln_graph_max_pool2d_backward": [c_void_p, c_int, c_int, c_int64, c_int64, IP],
    "kiln_graph_avg_pool2d": [c_void_p, c_int, I64P, I64P, I64P, c_int, c_int, c_int64, IP],
    "kiln_graph_avg_pool2d_backward": [c_void_p, c_int, c_int64, c_int64, I64P, I64P, I64P, c_int, c_int, c_int64,
                                       IP],
    "kiln_graph_adaptive_avg_pool2d": [c_void_p, c_int, c_int64, c_int64, IP],
    "kiln_graph_adaptive_avg_pool2d_backward": [c_void_p, c_int, c_int64, c_int64, IP],
    "kiln_graph_gather": [c_void_p, c_int, c_int, c_int, IP],
    "kiln_graph_index_select": [c_void_p, c_int, c_int, c_int, IP],
    "kiln_graph_scatter": [c_void_p, c_int, c_int, c_int, c_int, c_double, c_int, c_int, IP],
    "kiln_graph_index": [c_void_p, c_int, c_int, IP, IP],
    "kiln_graph_index_put": [c_void_p, c_int, c_int, IP, c_int, c_int, IP],
    "kiln_graph_arange": [c_void_p, c_int, c_int64, c_double, c_double, IP],
    "kiln_graph_output": [c_void_p, c_int],
    "kiln_graph_value_info": [c_void_p, c_int, IP, IP, I64P],
    "kiln_graph_compile": [c_void_p, P(c_void_p)],
    "kiln_graph_compile_ex": [c_void_p, c_int, P(c_void_p)],
    "kiln_exec_destroy": [c_void_p],
    "kiln_exec_run": [c_void_p, c_int, P(c_void_p), c_int, P(c_void_p)],
    "kiln_exec_run_workspace": [c_void_p, c_int, P(c_void_p), c_int, P(c_void_p), c_void_p, c_int64],
    "kiln_exec_workspace_size": [c_void_p],
    "kiln_exec_dump": [c_void_p, c_int, ctypes.c_char_p, c_size_t, P(c_size_t)],
    "kiln_graph_dump": [c_void_p, ctypes.c_char_p, c_size_t, P(c_size_t)],
    "kiln_exec_dump_svg": [c_void_p, ctypes.c_char_p, c_size_t, P(c_size_t)],
    "kiln_exec_set_profiling": [c_void_p, c_int],
    "kiln_exec_save": [c_void_p, ctypes.c_char_p],
    "kiln_exec_load": [ctypes.c_char_p, P(c_void_p)],
    "kiln_model_save": [c_void_p, ctypes.c_char_p],
    "kiln_model_load": [ctypes.c_char_p, c_int, P(c_void_p)],
    "kiln_model_destroy": [c_void_p],
    "kiln_model_num_inputs": [c_void_p],
    "kiln_model_num_outputs": [c_void_p],
    "kiln_model_input_info": [c_void_p, c_int, c_void_p],
    "kiln_model_output_info": [c_void_p, c_int, c_void_p],
    "kiln_model_symbol": [c_void_p, c_int, P(ctypes.c_char_p), I64P, I64P],
    "kiln_model_get_info": [c_void_p, c_void_p],
    "kiln_model_output_shapes": [c_void_p, c_int, c_void_p, c_int, c_void_p],
    "kiln_model_run": [c_void_p, c_int, c_void_p, c_int, c_void_p],
}
missing = []  # API functions this libkiln build does not export (reported when used)
for _name, _args in _SIGS.items():
    try:
        _f = getattr(lib, _name)
    except AttributeError:
        missing.append(_name)
        continue
    _f.argtypes = _args
    _f.restype = None if _name.endswith("_destroy") else c_int64 if _name.endswith("_size") else c_int
# KILN_MAX_DIMS (kiln/tensor.h)
MAX_DIMS = 8


class Tensor(ctypes.Structure):  # kiln_tensor_t
    _fields_ = [("data", c_void_p), ("dtype", c_int), ("ndim", ctypes.c_int32),
                ("shape", c_int64 * MAX_DIMS), ("strides", c_int64 * MAX_DIMS)]


class ModelIO(ctypes.Structure):  # kiln_model_io_t
    _fields_ = [("name", ctypes.c_char_p), ("dtype", c_int), ("ndim", c_int), ("shape", c_int64 * MAX_DIMS),
                ("min", c_int64 * MAX_DIMS), ("dynamic_mask", ctypes.c_uint32),
                ("dim_names", ctypes.c_char_p * MAX_DIMS)]


class ModelInfo(ctypes.Structure):  # kiln_model_info_t
    _fields_ = [("format_version", ctypes.c_uint32), ("n_inputs", c_int), ("n_outputs", c_int),
                ("n_symbols", c_int), ("file_bytes", ctypes.c_uint64), ("weight_bytes", ctypes.c_uint64),
                ("weights_in_place", c_int), ("workspace_bytes", c_int64), ("n_specializations", c_int),
                ("device", c_int)]


class ModelSymbol(ctypes.Structure):  # kiln_model_symbol_t
    _fields_ = [("name", ctypes.c_char_p), ("min", c_int64), ("max", c_int64)]


class ModelDesc(ctypes.Structure):  # kiln_model_desc_t
    _fields_ = [("struct_size", c_size_t), ("n_graphs", c_int), ("graphs", P(c_void_p)),
                ("n_symbols", c_int), ("symbols", P(ModelSymbol)), ("samples", I64P),
                ("n_exprs", c_int), ("expr_code", I64P), ("expr_len", IP),
                ("input_names", P(ctypes.c_char_p)), ("output_names", P(ctypes.c_char_p)),
                ("compile_flags", c_int)]

lib.kiln_status_message.restype = ctypes.c_char_p
lib.kiln_status_message.argtypes = []


class KilnError(RuntimeError):
    """A libkiln call failed; the message is libkiln's."""


def check(status: int, what: str = "") -> None:
    if status != 0:
        msg = lib.kiln_status_message().decode(errors="replace")
        raise KilnError(f"kiln: {what}: {msg}" if what else f"kiln: {msg}")


def text(fn, handle, *args) -> str:
    """Calls a kiln_*_dump function with the size-then-fill convention and returns the text."""
    needed = c_size_t(0)
    check(fn(handle, *args, None, 0, ctypes.byref(needed)), fn.__name__)
    buf = ctypes.create_string_buffer(needed.value)
    check(fn(handle, *args, buf, needed.value, None), fn.__name__)
    return buf.value.decode(errors="replace")
