# SPDX-License-Identifier: Apache-2.0
"""torch.kiln's device module against torch.cuda's API: device properties, CUDA-named memory
statistics with the allocator's real values, mem_get_info, and torch.accelerator.memory (which
needs the kiln allocator to be a c10::DeviceAllocator)."""
import os

import pytest
import torch

import torch_kiln  # noqa: F401

MIB = 1 << 20

CUDA_KEYS = [f"{stat}.all.{part}"
             for stat in ("active", "active_bytes", "allocated_bytes", "allocation", "reserved_bytes")
             for part in ("current", "peak", "allocated", "freed")]
CUDA_KEYS += ["num_alloc_retries", "num_device_alloc", "num_device_free", "num_ooms"]


def test_device_properties_object():
    p = torch.kiln.get_device_properties(0)
    assert p.name == "cpu"
    assert p.multi_processor_count == p.compute_units >= 1
    assert p.host_visible is True  # the cpu driver reports KILN_CAP_HOST_VISIBLE
    assert p.total_memory > 0
    assert p.total_memory == torch.kiln.mem_get_info(0)[1]
    assert p.alignment >= 64 and p.alignment & (p.alignment - 1) == 0
    # dict-style access keeps working, and the same attributes answer
    assert p["name"] == "cpu" and p["total_memory"] == p.total_memory
    with pytest.raises(KeyError):
        p["no_such_field"]
    assert "cpu" in repr(p)
    assert torch.kiln.get_device_name(0) == "cpu"


def test_memory_stats_have_cuda_names():
    stats = torch.kiln.memory_stats()
    assert sorted(stats) == sorted(CUDA_KEYS)
    assert all(isinstance(v, int) and v >= 0 for v in stats.values())


def test_memory_stats_track_an_allocation():
    torch.kiln.synchronize()
    torch.kiln.reset_accumulated_memory_stats()
    torch.kiln.reset_peak_memory_stats()
    s0 = torch.kiln.memory_stats()
    t = torch.empty(MIB, dtype=torch.uint8, device="kiln")
    s1 = torch.kiln.memory_stats()
    # the cpu allocator rounds 1 MiB to a size class of exactly 1 MiB
    assert s1["allocated_bytes.all.current"] - s0["allocated_bytes.all.current"] == MIB
    assert s1["allocated_bytes.all.allocated"] - s0["allocated_bytes.all.allocated"] == MIB
    assert s1["allocation.all.current"] - s0["allocation.all.current"] == 1
    assert s1["allocated_bytes.all.peak"] >= s1["allocated_bytes.all.current"]
    assert s1["active_bytes.all.current"] == s1["allocated_bytes.all.current"]
    assert s1["reserved_bytes.all.current"] >= s1["allocated_bytes.all.current"]
    del t
    s2 = torch.kiln.memory_stats()
    assert s2["allocated_bytes.all.current"] == s0["allocated_bytes.all.current"]
    assert s2["allocated_bytes.all.freed"] - s1["allocated_bytes.all.freed"] == MIB
    assert s2["allocation.all.freed"] - s1["allocation.all.freed"] == 1
    assert s2["allocated_bytes.all.peak"] >= s0["allocated_bytes.all.current"] + MIB
    torch.kiln.reset_peak_memory_stats()
    s3 = torch.kiln.memory_stats()
    assert s3["allocated_bytes.all.peak"] == s3["allocated_bytes.all.current"]
    assert s3["allocation.all.peak"] == s3["allocation.all.current"]
    torch.kiln.reset_accumulated_memory_stats()
    s4 = torch.kiln.memory_stats()
    assert s4["allocated_bytes.all.allocated"] == s4["allocated_bytes.all.freed"] == 0
    assert s4["num_ooms"] == 0


def test_empty_cache_releases_reserved():
    t = torch.empty(3 * MIB, dtype=torch.uint8, device="kiln")
    del t
    before = torch.kiln.memory_stats()
    torch.kiln.empty_cache()
    after = torch.kiln.memory_stats()
    assert after["reserved_bytes.all.current"] < before["reserved_bytes.all.current"]
    assert after["reserved_bytes.all.freed"] > before["reserved_bytes.all.freed"]
    assert after["num_device_free"] > before["num_device_free"]
    assert after["reserved_bytes.all.current"] >= after["allocated_bytes.all.current"]


def test_mem_get_info():
    free, total = torch.kiln.mem_get_info()
    assert 0 < free <= total
    # no limit: kiln device memory is host memory
    assert total == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def test_torch_accelerator_memory():
    acc = torch.accelerator
    assert acc.current_accelerator().type == "kiln"
    torch.kiln.synchronize()
    base = acc.memory.memory_allocated()
    acc.memory.reset_peak_memory_stats()
    t = torch.empty(2 * MIB, dtype=torch.uint8, device="kiln")
    assert acc.memory.memory_allocated() == base + 2 * MIB == torch.kiln.memory_allocated()
    assert acc.memory.max_memory_allocated() >= base + 2 * MIB
    assert acc.memory.memory_reserved() >= acc.memory.memory_allocated()
    stats = acc.memory.memory_stats()
    for k in CUDA_KEYS:
        assert stats[k] == torch.kiln.memory_stats()[k], k
    del t
    acc.memory.reset_peak_memory_stats()
    assert acc.memory.max_memory_allocated() == acc.memory.memory_allocated() == base
    acc.memory.empty_cache()
    free, total = acc.memory.get_memory_info()
    assert 0 < free <= total


def test_memory_limit_oom_counted(python_subprocess):
    code = """
import torch, torch_kiln
p = torch.kiln.get_device_properties(0)
assert p.memory_limit == 8 << 20 and p.total_memory == 8 << 20, (p.memory_limit, p.total_memory)
free, total = torch.kiln.mem_get_info()
assert total == 8 << 20 and free <= total
t = torch.empty(4 << 20, dtype=torch.uint8, device='kiln')
assert torch.kiln.mem_get_info()[0] <= (4 << 20)
try:
    torch.empty(6 << 20, dtype=torch.uint8, device='kiln')
    raise SystemExit('no OOM')
except torch.OutOfMemoryError:
    pass
s = torch.kiln.memory_stats()
assert s['num_ooms'] == 1 and s['num_alloc_retries'] >= 1, s
print('LIMIT-OK')
"""
    r = python_subprocess(code, {"KILN_MEMORY_LIMIT": "8M"})
    assert r.returncode == 0, r.stderr
    assert "LIMIT-OK" in r.stdout


def test_ref_device_properties(python_subprocess):
    code = """
import torch, torch_kiln
p = torch.kiln.get_device_properties(1)
assert p.name == 'ref' and p.host_visible and not p.async_streams and p.multi_processor_count == 1
t = torch.ones(1000, device='kiln:1')
s = torch.kiln.memory_stats(1)
assert s['allocated_bytes.all.current'] >= 4000 and s['reserved_bytes.all.current'] == s['allocated_bytes.all.current']
print('REF-OK')
"""
    r = python_subprocess(code, {"KILN_DEVICES": "cpu,ref"})
    assert r.returncode == 0, r.stderr
    assert "REF-OK" in r.stdout


def test_pin_memory():
    x = torch.arange(1000.0).reshape(10, 100)
    assert not x.is_pinned()
    p = x.pin_memory()
    assert p.is_pinned() and p.device.type == "cpu"
    assert torch.equal(p, x)
    assert p[3:].is_pinned()  # a pointer inside a pinned block
    assert not x.is_pinned() and not torch.empty(5).is_pinned()
    assert torch.empty(7, pin_memory=True).is_pinned()
    assert torch.empty(0).pin_memory().shape == (0,)
    k = p.to("kiln", non_blocking=True)
    back = torch.empty_like(p, pin_memory=True)
    back.copy_(k * 2, non_blocking=True)
    torch.kiln.synchronize()
    assert torch.equal(back, x * 2)


def test_pinned_dataloader():
    ds = torch.utils.data.TensorDataset(torch.arange(32.0).reshape(16, 2))
    loader = torch.utils.data.DataLoader(ds, batch_size=4, pin_memory=True)  # the accelerator
    batches = [b for (b,) in loader]
    assert all(b.is_pinned() for b in batches)
    assert torch.equal(torch.cat(batches), ds.tensors[0])
