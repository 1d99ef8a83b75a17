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
    keys = ("allocated_bytes", "reserved_bytes", "peak_allocated_bytes", "peak_reserved_bytes",
            "num_allocs", "num_frees", "num_cache_hits")
    return dict(zip(keys, _ops.memory_stats(_index(device))))


def memory_allocated(device=None) -> int:
    return _ops.memory_stats(_index(device))[0]


def memory_reserved(device=None) -> int:
    return _ops.memory_stats(_index(device))[1]


def max_memory_allocated(device=None) -> int:
    return _ops.memory_stats(_index(device))[2]


def max_memory_reserved(device=None) -> int:
    return _ops.memory_stats(_index(device))[3]


def reset_peak_memory_stats(device=None) -> None:
    _ops.reset_peak_memory_stats(_index(device))


def empty_cache() -> None:
    for i in range(device_count()):
        _ops.empty_cache(i)


def get_device_properties(device=None) -> dict:
    name, desc, limit, units, caps = _ops.device_props(_index(device))
    return {"name": name, "description": desc, "memory_limit": limit, "compute_units": units,
            "capabilities": caps}


def get_device_name(device=None) -> str:
    return get_device_properties(device)["name"]


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
    return [torch.float16, torch.bfloat16]
