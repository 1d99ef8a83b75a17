# SPDX-License-Identifier: Apache-2.0
"""Foundation: "kiln" is a real torch device (allocation, copies, views, dtypes, module API)."""
import warnings

import pytest
import torch

import torch_kiln

ALL_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.int16,
              torch.int32, torch.int64, torch.uint8, torch.bool]


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    lo = 0 if dtype == torch.uint8 else -50
    return torch.randint(lo, 50, shape, generator=g).to(dtype)


def test_device_module():
    assert torch.kiln.is_available()
    assert torch.kiln.device_count() >= 1
    props = torch.kiln.get_device_properties(0)
    assert props["name"] == "cpu"
    assert props["compute_units"] >= 1
    assert torch.device("kiln").type == "kiln"
    assert torch.kiln.current_device() == 0


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_roundtrip_all_dtypes(dtype):
    x = make((5, 7), dtype)
    k = x.to("kiln")
    assert k.device == torch.device("kiln:0")
    assert k.dtype == dtype
    assert torch.equal(k.cpu(), x)
    # non-contiguous both ways
    assert torch.equal(k.t().cpu(), x.t())
    assert torch.equal(x.t().to("kiln").cpu(), x.t())
    assert torch.equal(k[1:4:2, ::3].cpu(), x[1:4:2, ::3])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool])
def test_arithmetic_matches_cpu(dtype):
    a, b = make((4, 6), dtype, 1), make((4, 6), dtype, 2)
    ka, kb = a.to("kiln"), b.to("kiln")
    if dtype == torch.bool:
        pairs = [(ka & kb, a & b), (ka | kb, a | b), (~ka, ~a), (ka == kb, a == b)]
    else:
        pairs = [(ka + kb, a + b), (ka * kb, a * b), (ka - kb, a - b), (ka * 3, a * 3),
                 (ka.sum(0), a.sum(0)), (ka > kb, a > b), (torch.maximum(ka, kb), torch.maximum(a, b))]
        if dtype.is_floating_point:
            pairs += [(ka / (kb.abs() + 1), a / (b.abs() + 1)), (ka.exp(), a.exp()), (ka @ kb.t(), a @ b.t())]
    for got, want in pairs:
        assert got.device.type == "kiln"
        # native kernels may sum in another order / use other vector math: torch's default
        # per-dtype tolerances (f32 rtol 1.3e-6, f16 1e-3, bf16 1.6e-2; integers and bool exact)
        torch.testing.assert_close(got.cpu(), want)


def test_factories_and_scalars():
    z = torch.zeros(3, 4, device="kiln")
    o = torch.ones(2, dtype=torch.int64, device="kiln")
    f = torch.full((2, 2), 7.5, device="kiln")
    e = torch.empty(0, device="kiln")
    a = torch.arange(10, device="kiln")
    r = torch.randn(64, 64, device="kiln")
    assert torch.equal(z.cpu(), torch.zeros(3, 4))
    assert torch.equal(o.cpu(), torch.ones(2, dtype=torch.int64))
    assert torch.equal(f.cpu(), torch.full((2, 2), 7.5))
    assert e.numel() == 0 and e.cpu().shape == (0,)
    assert torch.equal(a.cpu(), torch.arange(10))
    assert abs(r.mean().item()) < 0.1 and 0.9 < r.std().item() < 1.1
    assert torch.tensor(3.25, device="kiln").item() == 3.25
    assert torch.tensor([True], device="kiln").item() is True


def test_print_and_repr():
    k = torch.arange(6, dtype=torch.float32, device="kiln").reshape(2, 3)
    s = str(k)
    assert "device='kiln:0'" in s and "5." in s


def test_views_share_memory():
    base = torch.zeros(4, 5, device="kiln")
    v = base[1:3, 2:]
    v.fill_(1.0)
    base.view(20)[0] = 5.0
    want = torch.zeros(4, 5)
    want[1:3, 2:] = 1.0
    want.view(20)[0] = 5.0
    assert torch.equal(base.cpu(), want)
    t = base.t()
    assert not t.is_contiguous() and t.stride() == (1, 5)
    assert torch.equal(t.contiguous().cpu(), want.t())
    assert torch.equal(base.unfold(1, 2, 2).cpu(), want.unfold(1, 2, 2))
    assert torch.equal(base.reshape(2, 10).cpu(), want.reshape(2, 10))
    assert base.untyped_storage().data_ptr() == v.untyped_storage().data_ptr()


def test_copy_between_devices_and_dtypes():
    x = make((3, 4), torch.float32)
    k = torch.empty(3, 4, dtype=torch.float16, device="kiln")
    k.copy_(x)  # CPU f32 -> kiln f16
    assert torch.equal(k.cpu(), x.half())
    c = torch.empty(3, 4, dtype=torch.float64)
    c.copy_(k)  # kiln f16 -> CPU f64
    assert torch.equal(c, x.half().double())
    row = torch.arange(4.0)
    k2 = torch.empty(3, 4, device="kiln")
    k2.copy_(row)  # broadcast
    assert torch.equal(k2.cpu(), row.expand(3, 4))
    k3 = k2.clone()
    k3.copy_(k2.t().t() * 2)
    assert torch.equal(k3.cpu(), row.expand(3, 4) * 2)


def test_resize_and_set():
    k = torch.empty(0, device="kiln")
    k.resize_(10)
    assert k.shape == (10,)
    k.fill_(2)
    k.resize_(20)
    assert torch.equal(k[:10].cpu(), torch.full((10,), 2.0))
    s = torch.empty(0, device="kiln").set_(k.untyped_storage(), 0, (5,), (2,))
    assert torch.equal(s.cpu(), torch.full((5,), 2.0))


def test_module_helpers():
    lin = torch.nn.Linear(3, 2)
    lin.kiln()
    assert lin.weight.device.type == "kiln"
    assert torch.zeros(2).kiln().is_kiln


def test_memory_stats():
    torch.kiln.synchronize()
    torch.kiln.empty_cache()
    base = torch.kiln.memory_allocated()
    torch.kiln.reset_peak_memory_stats()
    t = torch.empty(1 << 20, dtype=torch.uint8, device="kiln")
    assert torch.kiln.memory_allocated() >= base + (1 << 20)
    assert torch.kiln.memory_reserved() >= torch.kiln.memory_allocated()
    assert torch.kiln.max_memory_allocated() >= base + (1 << 20)
    del t
    assert torch.kiln.memory_allocated() == base
    assert torch.kiln.max_memory_allocated() >= base + (1 << 20)
    reserved = torch.kiln.memory_reserved()
    torch.kiln.empty_cache()
    assert torch.kiln.memory_reserved() < reserved
    stats = torch.kiln.memory_stats()
    assert stats["allocation.all.allocated"] >= stats["allocation.all.freed"] > 0


def test_manual_seed_reproducible():
    torch.kiln.manual_seed(1234)
    a = torch.randn(100, device="kiln").cpu()
    b = torch.rand(10, device="kiln").cpu()
    torch.kiln.manual_seed(1234)
    assert torch.equal(torch.randn(100, device="kiln").cpu(), a)
    assert torch.equal(torch.rand(10, device="kiln").cpu(), b)
    assert torch.kiln.initial_seed() == 1234
    torch.kiln.manual_seed(4321)
    assert not torch.equal(torch.randn(100, device="kiln").cpu(), a)
    torch.manual_seed(99)  # torch's global seed reaches the kiln generator as well
    c = torch.randn(10, device="kiln").cpu()
    torch.manual_seed(99)
    assert torch.equal(torch.randn(10, device="kiln").cpu(), c)


def test_fallback_report_counts_and_warns_once():
    torch_kiln.fallback_reset()
    x = torch.randn(8, device="kiln")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(3):
            torch.special.bessel_j0(x)
    report = torch_kiln.fallback_report()
    assert report.get("aten::special_bessel_j0.out") == 3
    assert sum("special_bessel_j0" in str(m.message) for m in w) == 1
    torch.testing.assert_close(torch.special.bessel_j0(x).cpu(), torch.special.bessel_j0(x.cpu()))


def test_copy_shape_mismatch_raises():
    k = torch.empty(3, 4, device="kiln")
    with pytest.raises(RuntimeError, match="broadcast"):
        k.copy_(torch.ones(5))
    c = torch.empty(2, 2)
    with pytest.raises(RuntimeError):
        c.copy_(torch.ones(3, device="kiln"))


def test_unknown_device_index_raises():
    with pytest.raises((IndexError, RuntimeError), match="out of range"):
        torch.empty(2, device="kiln:7")
    with pytest.raises((IndexError, RuntimeError), match="out of range"):
        torch.ones(2).to("kiln:7")
    with pytest.raises((IndexError, RuntimeError), match="out of range"):
        torch.kiln.set_device(7)


def test_out_of_memory_is_torch_oom(python_subprocess):
    code = """
import torch, torch_kiln
small = torch.empty(1024, device='kiln')
try:
    torch.empty(64 * 1024 * 1024, dtype=torch.uint8, device='kiln')
except torch.OutOfMemoryError as e:
    assert 'out of memory' in str(e), str(e)
    print('OOM-OK')
after = torch.ones(1024, device='kiln') + 1  # still usable
print(int(after.sum().item()))
"""
    r = python_subprocess(code, {"KILN_MEMORY_LIMIT": "16M"})
    assert r.returncode == 0, r.stderr
    assert "OOM-OK" in r.stdout and "2048" in r.stdout


def test_bad_memory_limit_env_is_clear_error(python_subprocess):
    r = python_subprocess("import torch, torch_kiln; torch.zeros(1, device='kiln')",
                          {"KILN_MEMORY_LIMIT": "lots"})
    assert r.returncode != 0
    assert "KILN_MEMORY_LIMIT" in r.stderr and "Segmentation" not in r.stderr


def test_autoload_entry_point(python_subprocess):
    r = python_subprocess("import torch; t = torch.ones(2, device='kiln'); print(t.device, 'torch_kiln' in __import__('sys').modules)",
                          {"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"})
    assert r.returncode == 0, r.stderr
    assert "kiln:0 True" in r.stdout


def test_two_devices(python_subprocess):
    code = """
import torch, torch_kiln
assert torch.kiln.device_count() == 2, torch.kiln.device_count()
assert torch.kiln.get_device_properties(1)['name'] == 'ref'
a = torch.arange(6.0, device='kiln:0')
b = a.to('kiln:1')
assert b.device == torch.device('kiln:1')
c = (b * 2).to('kiln:0')
assert torch.equal(c.cpu(), torch.arange(6.0) * 2)
with torch.kiln.device(1):
    assert torch.kiln.current_device() == 1
    d = torch.empty(3, device='kiln')
    assert d.device.index == 1
assert torch.kiln.current_device() == 0
assert torch.kiln.memory_allocated(1) > 0
print('TWO-OK')
"""
    r = python_subprocess(code, {"KILN_DEVICES": "cpu,ref"})
    assert r.returncode == 0, r.stderr
    assert "TWO-OK" in r.stdout


def test_import_torch_kiln_before_torch(python_subprocess):
    """`import torch_kiln` as a program's first import: torch's autoload then runs the entry point
    on the partly imported package, which must not fail."""
    r = python_subprocess("import torch_kiln\nimport torch\nprint(torch.ones(3, device='kiln').sum().item())",
                          {"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"})
    assert r.returncode == 0, r.stderr
    assert "3.0" in r.stdout
