# SPDX-License-Identifier: Apache-2.0
"""What this torch_kiln is and sees: `python -m torch_kiln` prints it (a bug report's first lines).

info() gathers the facts as a dict; report() formats them. Nothing here changes any state, except
that the first query of the thread pool creates it (as the first kernel would).
"""
import ctypes
import os
import platform
import sys
from importlib import metadata

import torch

import torch_kiln
from torch_kiln import _build_info

# Every variable libkiln or torch_kiln reads, with what it does (the README has the details).
KNOWN_ENV = {
    "KILN_DEVICES": "devices to create, e.g. cpu,ref (default cpu)",
    "KILN_MEMORY_LIMIT": "per-device memory limit, e.g. 512M",
    "KILN_NUM_THREADS": "thread-pool size (default: online CPUs)",
    "KILN_POOL_SPIN_US": "idle spin of pool workers before they sleep (us)",
    "KILN_DISABLE_AVX2": "1: portable C kernels only",
    "KILN_DISABLE_AVX512": "1: no AVX-512 kernels",
    "KILN_CONV_CHUNK_FLOATS": "convolution im2col chunk size",
    "TORCH_KILN_FALLBACK": "error: a CPU fallback raises NotImplementedError",
    "TORCH_KILN_LOG": "graph / profile logging of compiled programs",
    "TORCH_KILN_LOG_DIR": "where graph logs go (default ./kiln_logs)",
    "TORCH_KILN_COMPILE_FLAGS": "graph passes to turn off (no_hfuse, ...)",
    "TORCH_DEVICE_BACKEND_AUTOLOAD": "0: `import torch` does not load kiln",
}

_CAPS = ("host_visible", "async_streams", "caching_allocator", "multithreaded")


def _lib():
    """libkiln as the shim loaded it (same path, so the same handle)."""
    lib = ctypes.CDLL(os.path.join(os.path.dirname(torch_kiln.__file__), "libkiln.so"))
    for name in ("kiln_version", "kiln_build_compiler", "kiln_cpu_isa"):
        getattr(lib, name).restype = ctypes.c_char_p
        getattr(lib, name).argtypes = []
    lib.kiln_threadpool_default.restype = ctypes.c_void_p
    lib.kiln_threadpool_default.argtypes = []
    lib.kiln_threadpool_size.restype = ctypes.c_int
    lib.kiln_threadpool_size.argtypes = [ctypes.c_void_p]
    return lib


def _entry_point(group: str, name: str):
    for ep in metadata.entry_points(group=group):
        if ep.name == name:
            return ep.value
    return None


def _cpu_features():
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((ln.split(":", 1)[1].split() for ln in f if ln.startswith("flags")), [])
    except OSError:
        return []
    return [f for f in ("avx512f", "avx2", "fma", "f16c") if f in flags]


def info() -> dict:
    """The facts report() prints, as plain Python values."""
    lib = _lib()
    devices = []
    for i in range(torch.kiln.device_count()):
        p = torch.kiln.get_device_properties(i)
        d = {k: getattr(p, k) for k in type(p).__slots__}
        d["compute_units"] = p.multi_processor_count
        d["capabilities"] = [c for b, c in enumerate(_CAPS) if p.capabilities >> b & 1]
        devices.append(dict(d, index=i))
    try:
        dist_version = metadata.version("torch_kiln")
    except metadata.PackageNotFoundError:
        dist_version = None
    from torch._dynamo import list_backends
    return {
        "version": torch_kiln.__version__,
        "libkiln_version": lib.kiln_version().decode(),
        "dist_version": dist_version,
        "package_dir": os.path.dirname(os.path.abspath(torch_kiln.__file__)),
        "torch_version": torch.__version__,
        "torch_built_for": _build_info.TORCH_VERSION,
        "python": f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})",
        "c_compiler": _build_info.C_COMPILER,
        "cxx_compiler": _build_info.CXX_COMPILER,
        "libkiln_compiler": lib.kiln_build_compiler().decode(),
        "build_type": _build_info.BUILD_TYPE,
        "isa": lib.kiln_cpu_isa().decode(),
        "cpu_features": _cpu_features(),
        "threads": lib.kiln_threadpool_size(lib.kiln_threadpool_default()),
        "devices": devices,
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(("KILN_", "TORCH_KILN_"))
                or k == "TORCH_DEVICE_BACKEND_AUTOLOAD"},
        "autoload_entry_point": _entry_point("torch.backends", "kiln"),
        "autoload_enabled": os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD", "1") == "1",
        "dynamo_entry_point": _entry_point("torch_dynamo_backends", "kiln"),
        "dynamo_registered": "kiln" in list_backends(exclude_tags=()),
    }


def _yes(flag) -> str:
    return "yes" if flag else "NO"


def report(facts=None) -> str:
    """The human-readable report of info() (or of `facts`)."""
    f = info() if facts is None else facts
    lines = [
        f"torch_kiln {f['version']} (libkiln {f['libkiln_version']}, installed metadata "
        f"{f['dist_version'] or 'none'})",
        f"  package:     {f['package_dir']}",
        f"  torch:       {f['torch_version']} (built for {f['torch_built_for']})",
        f"  python:      {f['python']}",
        f"  compilers:   C {f['c_compiler']}, C++ {f['cxx_compiler']} ({f['build_type']})",
        f"  ISA:         {f['isa']} kernels (CPU has: {' '.join(f['cpu_features']) or 'none of avx2/avx512f'})",
        f"  threads:     {f['threads']} (kiln thread pool)",
        f"  devices:     {len(f['devices'])}",
    ]
    for d in f["devices"]:
        limit = f"{d['memory_limit'] / 2**20:.0f} MiB" if d["memory_limit"] else "none"
        lines.append(f"    kiln:{d['index']}  {d['name']}: {d['description']}; compute units "
                     f"{d['compute_units']}, memory limit {limit}, {', '.join(d['capabilities']) or '-'}")
    lines.append(f"  autoload:    entry point {f['autoload_entry_point'] or 'NOT registered'}; "
                 f"{'enabled' if f['autoload_enabled'] else 'disabled (TORCH_DEVICE_BACKEND_AUTOLOAD)'}")
    lines.append(f"  dynamo:      backend \"kiln\" registered: {_yes(f['dynamo_registered'])} "
                 f"(entry point {f['dynamo_entry_point'] or 'none'})")
    lines.append("  environment:")
    for k, v in f["env"].items():
        lines.append(f"    {k}={v}  ({KNOWN_ENV.get(k, 'not a variable kiln reads: a typo?')})")
    if not f["env"]:
        lines.append("    (no KILN_* / TORCH_KILN_* variable set)")
    unset = [k for k in KNOWN_ENV if k not in f["env"]]
    if unset:
        lines.append(f"    unset: {', '.join(unset)}")
    return "\n".join(lines)
