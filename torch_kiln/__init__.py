"""torch_kiln: the Kiln device for PyTorch.

``import torch_kiln`` (or torch's backend autoload, once the package is installed) makes
``"kiln"`` a real torch device backed by libkiln, adds the ``torch.kiln`` module and the
``Tensor.kiln()`` / ``Module.kiln()`` helpers.
"""
import os as _os


def _autoload():
    """Entry point of the ``torch.backends`` group: importing this package does the work.

    Defined before ``import torch``: when a program imports torch_kiln first, torch's own import
    runs this entry point on the partly initialized package, and the setup below follows once
    torch is imported."""


import torch as _torch  # noqa: E402

_HERE = _os.path.dirname(_os.path.abspath(__file__))
_SHIM = _os.path.join(_HERE, "libkiln_shim.so")

if not _os.path.exists(_SHIM):
    raise ImportError(
        f"torch_kiln: {_SHIM} is missing; build it with `make build` from the repository root")

_torch.ops.load_library(_SHIM)

_torch.utils.rename_privateuse1_backend("kiln")

from torch_kiln import device as _device_module  # noqa: E402

_torch._register_device_module("kiln", _device_module)
_torch.utils.generate_methods_for_privateuse1_backend(
    for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True)


def fallback_report():
    """{aten op name: number of calls} for every op that ran through the CPU fallback."""
    names, counts = _torch.ops.kiln.fallback_report()
    return dict(zip(names, counts))


def fallback_reset():
    """Clears the fallback counters (and re-arms the once-per-op warning)."""
    _torch.ops.kiln.fallback_reset()


__all__ = ["fallback_report", "fallback_reset"]
