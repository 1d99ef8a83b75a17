# SPDX-License-Identifier: Apache-2.0
"""torch.kiln: device-module functions for the kiln device (mirrors torch.cuda's names)."""
import contextlib

import torch

_ops = torch.ops.kiln


def _index(device=None) -> int:
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    d = torch.device(device)
    if d.type != "kiln":
        raise ValueError(f"expected a kiln device, got {d}")
    return d.index if d.index is not None else current_device()


def is_available() -> bool:
    return device_count() > 0


def is_initialized() -> bool:
    return True


def _lazy_init() -> None:
    pass


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    return int(_ops.device_count())


def current_device() -> int:
    return int(_ops.current_device())


def set_device(device) -> None:
    _ops.set_device(_index(device))


@contextlib.contextmanager
def device(dev):
    """Context manager that makes `dev` the current kiln device."""
    prev = current_device()
    set_device(dev)
    try:
        yield
    finally:
        set_device(prev)


def synchronize(device=None) -> None:
    _ops.synchronize(_index(device))


def memory_stats(device=None) -> dict:
    """The kiln allocator's statistics under torch.cuda.memory_stats()'s names.

    Kiln has one pool per device, so only the ``.all.`` entries exist; ``active_bytes`` equals
    ``allocated_bytes`` (a freed block is reusable at once) and ``num_device_alloc/free`` count
    the blocks taken from and returned to the system."""
    names, values = _ops.memory_stats(_index(device))
    return dict(sorted(zip(names, values)))


def _stat(device, key: str) -> int:
    return memory_stats(device)[key]


def memory_allocated(device=None) -> int:
    return _stat(device, "allocated_bytes.all.current")


def memory_reserved(device=None) -> int:
    return _stat(device, "reserved_bytes.all.current")


def max_memory_allocated(device=None) -> int:
    return _stat(device, "allocated_bytes.all.peak")


def max_memory_reserved(device=None) -> int:
    return _stat(device, "reserved_bytes.all.peak")


def reset_peak_memory_stats(device=None) -> None:
    _ops.reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device=None) -> None:
    _ops.reset_accumulated_memory_stats(_index(device))


def empty_cache() -> None:
    for i in range(device_count()):
        _ops.empty_cache(i)


def mem_get_info(device=None) -> tuple:
    """(free, total) bytes: the device's memory limit where it has one, else the host's memory
    (kiln device memory is host memory)."""
    free, total = _ops.mem_get_info(_index(device))
    return free, total


_CAP_HOST_VISIBLE, _CAP_ASYNC_STREAMS, _CAP_CACHING_ALLOCATOR, _CAP_MULTITHREADED = 1, 2, 4, 8


class KilnDeviceProperties:
    """What get_device_properties returns: torch.cuda's attribute names where they apply
    (name, total_memory, multi_processor_count) plus the HAL's own fields. Item access
    (props["name"]) reads the same attributes."""

    __slots__ = ("name", "description", "total_memory", "memory_limit", "multi_processor_count",
                 "alignment", "capabilities", "host_visible", "async_streams",
                 "caching_allocator", "multithreaded")

    def __init__(self, index: int):
        name, desc, limit, units, alignment, caps = _ops.device_props(index)
        self.name = name
        self.description = desc
        self.total_memory = mem_get_info(index)[1]
        self.memory_limit = limit  # 0: no limit (the device shares the host's memory)
        self.multi_processor_count = units
        self.alignment = alignment
        self.capabilities = caps
        self.host_visible = bool(caps & _CAP_HOST_VISIBLE)
        self.async_streams = bool(caps & _CAP_ASYNC_STREAMS)
        self.caching_allocator = bool(caps & _CAP_CACHING_ALLOCATOR)
        self.multithreaded = bool(caps & _CAP_MULTITHREADED)

    @property
    def compute_units(self) -> int:
        return self.multi_processor_count

    def __getitem__(self, key: str):
        try:
            return getattr(self, key)
        except AttributeError:
            raise KeyError(key) from None

    def __repr__(self) -> str:
        return (f"KilnDeviceProperties(name='{self.name}', total_memory="
                f"{self.total_memory >> 20}MB, multi_processor_count="
                f"{self.multi_processor_count}, host_visible={self.host_visible})")


def get_device_properties(device=None) -> KilnDeviceProperties:
    return KilnDeviceProperties(_index(device))


def get_device_name(device=None) -> str:
    return get_device_properties(device).name


def manual_seed(seed: int) -> None:
    """Seeds the current kiln device's generator."""
    _ops.manual_seed(current_device(), int(seed))


def manual_seed_all(seed: int) -> None:
    for i in range(device_count()):
        _ops.manual_seed(i, int(seed))


def seed() -> None:
    _ops.seed(current_device())


def seed_all() -> None:
    for i in range(device_count()):
        _ops.seed(i)


def initial_seed() -> int:
    return int(_ops.initial_seed(current_device()))


def get_rng_state(device=None) -> torch.Tensor:
    return _ops.get_rng_state(_index(device))


def set_rng_state(new_state: torch.Tensor, device=None) -> None:
    _ops.set_rng_state(_index(device), new_state)


def get_amp_supported_dtype():
    """The dtypes torch.autocast("kiln") accepts (kiln has native f16 and bf16 kernels)."""
    return [torch.float16, torch.bfloat16, torch.float32]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


# ---- streams and events ----------------------------------------------------------------------
# Eager kiln work runs in order on one queue per device. Every kiln Stream is that queue, so work
# "on two streams" stays ordered (stricter than asked, never wrong); events record, wait and
# synchronize on it.

class Stream(torch.Stream):
    """torch.kiln.Stream(device=None, priority=0): the device's queue as a torch.Stream."""

    def __new__(cls, device=None, priority: int = 0):
        return super().__new__(cls, device=torch.device("kiln", _index(device)), priority=priority)


class Event(torch.Event):
    """torch.kiln.Event(): a torch.Event on the current kiln device."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        if enable_timing or interprocess:
            raise NotImplementedError(
                "kiln events have no timestamps or interprocess handles "
                "(enable_timing / interprocess are unsupported)")
        return super().__new__(cls, device=torch.device("kiln", current_device()),
                               blocking=blocking)


def current_stream(device=None) -> torch.Stream:
    return torch.accelerator.current_stream(_index(device))


def default_stream(device=None) -> torch.Stream:
    return current_stream(device)


def set_stream(s: torch.Stream) -> None:
    if s.device.type != "kiln":
        raise ValueError(f"expected a kiln stream, got one on {s.device}")
    torch.accelerator.set_stream(s)


@contextlib.contextmanager
def stream(s):
    """Makes `s` the current stream of its device inside the block (None: no change)."""
    if s is None:
        yield
        return
    if s.device.type != "kiln":
        raise ValueError(f"expected a kiln stream, got one on {s.device}")
    prev = current_stream(s.device.index)
    set_stream(s)
    try:
        yield
    finally:
        set_stream(prev)
