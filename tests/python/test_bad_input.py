# SPDX-License-Identifier: Apache-2.0
"""Regression tests for the shim's bad-input behaviour (issue 23): kiln raises what CPU PyTorch
raises, with aten's messages, and accepts what CPU (or, for device placement, CUDA) accepts.
test_differential.py probes the same classes broadly; these pin each reproduced bug."""
import math
import warnings

import pytest
import torch
import torch.nn.functional as F

import torch_kiln  # noqa: F401

K = "kiln"


def both(fn):
    """fn("cpu"), fn("kiln") -> (cpu result, kiln result moved to the CPU)."""
    ref, got = fn("cpu"), fn(K)
    return ref, (got.cpu() if isinstance(got, torch.Tensor) else got)


def assert_same(fn):
    ref, got = both(fn)
    torch.testing.assert_close(got, ref, equal_nan=True, rtol=0, atol=0)


# ---- bug 4: boolean masks must match the dims they index -----------------------------------

def test_short_mask_getitem_raises_index_error():
    x = torch.arange(12., device=K).view(3, 4)
    with pytest.raises(IndexError, match=r"The shape of the mask \[2\] at index 0 does not match the shape of the "
                                         r"indexed tensor \[3, 4\] at index 0"):
        x[torch.tensor([False, True], device=K)]


@pytest.mark.parametrize("mask_shape, where", [((4,), "dim0"), ((3, 5), "dim0"), ((3,), "dim1"), ((5,), "dim1")])
def test_mismatched_masks_raise_for_get_and_put(mask_shape, where):
    for dev in ("cpu", K):
        x = torch.arange(12., device=dev).view(3, 4)
        m = torch.ones(mask_shape, dtype=torch.bool, device=dev)
        idx = (m,) if where == "dim0" else (slice(None), m)
        with pytest.raises(IndexError, match="The shape of the mask"):
            x[idx]
        with pytest.raises(IndexError, match="The shape of the mask"):
            x[idx] = 1.0
        with pytest.raises(IndexError, match="The shape of the mask"):
            torch.ops.aten.index_put_(x, [m] if where == "dim0" else [None, m], torch.tensor(1.0, device=dev))


def test_matching_masks_still_work():
    assert_same(lambda d: torch.arange(12., device=d).view(3, 4)[torch.tensor([True, False, True], device=d)])
    assert_same(lambda d: torch.arange(12., device=d).view(3, 4)[:, torch.tensor([True, False, True, True], device=d)])

    def put(d):
        x = torch.arange(12., device=d).view(3, 4)
        x[torch.tensor([[True, False, True, False]] * 3, device=d)] = -1.0
        return x
    assert_same(put)


def test_index_tensors_that_do_not_broadcast_raise_index_error():
    x = torch.zeros(3, 4, device=K)
    with pytest.raises(IndexError, match=r"shape mismatch: indexing tensors could not be broadcast together with "
                                         r"shapes \[3\], \[2\]"):
        x[torch.tensor([0, 1, 2], device=K), torch.tensor([0, 1], device=K)]


# ---- bug 5: Python scalars out of the dtype's range raise as on CPU ---------------------------

OVERFLOWS = [
    ("int8_t", lambda d: torch.zeros(3, dtype=torch.int8, device=d).fill_(1000)),
    ("int8_t", lambda d: torch.full((3,), 1000, dtype=torch.int8, device=d)),
    ("int8_t", lambda d: torch.zeros(3, dtype=torch.int8, device=d).masked_fill(torch.ones(3, dtype=torch.bool, device=d), 1000)),
    ("int8_t", lambda d: torch.where(torch.ones(3, dtype=torch.bool, device=d), torch.zeros(3, dtype=torch.int8, device=d), 1000)),
    ("int8_t", lambda d: torch.zeros(3, dtype=torch.int8, device=d).__setitem__(torch.tensor([0], device=d), 1000)),
    ("int8_t", lambda d: torch.zeros(3, dtype=torch.int8, device=d).__setitem__(0, 1000)),
    ("int", lambda d: torch.zeros(3, dtype=torch.int32, device=d).fill_(2**40)),
    ("c10::Half", lambda d: torch.zeros(3, dtype=torch.float16, device=d).fill_(1e6)),
    ("c10::BFloat16", lambda d: torch.zeros(3, dtype=torch.bfloat16, device=d).fill_(1e39)),
    ("float", lambda d: torch.zeros(3, device=d).fill_(1e39)),
    ("uint8_t", lambda d: torch.zeros(3, dtype=torch.uint8, device=d).fill_(-256)),
    ("int8_t", lambda d: torch.zeros(3, dtype=torch.int8, device=d).fill_(math.nan)),
    ("int8_t", lambda d: torch.add(torch.zeros(3, dtype=torch.int8, device=d), torch.zeros(3, dtype=torch.int8, device=d), alpha=1000)),
    ("int8_t", lambda d: torch.zeros(3, dtype=torch.int8, device=d).clamp(max=1000)),
    ("c10::Half", lambda d: torch.zeros(3, dtype=torch.float16, device=d).clamp(min=1e6)),
    ("int8_t", lambda d: torch.zeros(3, dtype=torch.int8, device=d).scatter(0, torch.tensor([0], device=d), 1000)),
    ("float", lambda d: torch.addcmul(torch.zeros(3, device=d), torch.zeros(3, device=d), torch.zeros(3, device=d), value=1e39)),
    ("float", lambda d: torch.addmm(torch.zeros(2, 2, device=d), torch.zeros(2, 2, device=d), torch.zeros(2, 2, device=d), alpha=1e39)),
    ("int8_t", lambda d: torch.pow(torch.zeros(3, dtype=torch.int8, device=d), 1000)),
]


@pytest.mark.parametrize("name, fn", OVERFLOWS, ids=[f"{i}-{n}" for i, (n, _) in enumerate(OVERFLOWS)])
def test_out_of_range_scalar_raises_like_cpu(name, fn):
    msg = f"value cannot be converted to type {name} without overflow"
    with pytest.raises(RuntimeError, match=msg):
        fn("cpu")
    with pytest.raises(RuntimeError, match=msg):
        fn(K)


IN_RANGE = [
    lambda d: torch.zeros(3, dtype=torch.uint8, device=d).fill_(-1),        # wraps to 255, as on CPU
    lambda d: torch.zeros(3, dtype=torch.bool, device=d).fill_(7.5),        # anything converts to bool
    lambda d: torch.zeros(1, dtype=torch.float16, device=d).fill_(1e6),     # CPU's one-element fill: inf
    lambda d: torch.zeros(3, dtype=torch.float16, device=d).fill_(math.inf),
    lambda d: torch.zeros(3, dtype=torch.int64, device=d).fill_(2**63 - 1),
    lambda d: torch.where(torch.ones(3, dtype=torch.bool, device=d), torch.zeros(3, dtype=torch.float16, device=d), 1e6),
    lambda d: torch.zeros(3, dtype=torch.int8, device=d).add(1000),         # a wrapped number: wraps, no check
    lambda d: torch.tensor([-24], dtype=torch.int8, device=d).eq(1000),
    lambda d: torch.zeros(3, dtype=torch.float16, device=d).lerp(torch.ones(3, dtype=torch.float16, device=d), 1e6),
    lambda d: torch.zeros(3, dtype=torch.int8, device=d).fill_(torch.tensor(1000, device=d)),  # same device: a cast
]


@pytest.mark.parametrize("fn", IN_RANGE, ids=[str(i) for i in range(len(IN_RANGE))])
def test_accepted_scalars_match_cpu(fn):
    assert_same(fn)


def test_cpu_value_tensor_fills_like_a_same_device_value():
    # A CPU 0-dim value is a host scalar moved to the device: copied in (a cast), as CPU copies it;
    # `x[i] = cpu_scalar_tensor` takes that path too.
    assert_same(lambda d: torch.zeros(3, dtype=torch.int8, device=d).fill_(torch.tensor(1000)))

    def setitem(d):
        x = torch.zeros(2, 3, dtype=torch.uint8, device=d)
        x[0] = torch.tensor(300.5)
        return x
    assert_same(setitem)


# ---- bug 9: what CPU / CUDA accept ------------------------------------------------------------

def test_fill_and_zero_on_expanded_tensors():
    assert_same(lambda d: torch.zeros(3, device=d).expand(4, 3).fill_(2.5))
    assert_same(lambda d: torch.ones(1, 3, dtype=torch.int16, device=d).expand(2, 3).zero_())

    def base(d):
        b = torch.ones(3, device=d)
        b.expand(4, 3).fill_(7)
        return b
    assert_same(base)


def test_masked_fill_on_expanded_tensor():
    def f(d):
        b = torch.zeros(3, device=d)
        m = torch.tensor([[True, False, False], [False, False, True]], device=d)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            b.expand(2, 3).masked_fill_(m, 5.0)
        return b
    assert_same(f)


def test_index_put_into_expanded_tensor():
    def f(d, acc):
        b = torch.zeros(4, device=d)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            b.expand(3, 4).index_put_((torch.tensor([0, 2], device=d),), torch.arange(4., device=d), accumulate=acc)
        return b
    assert_same(lambda d: f(d, False))
    assert_same(lambda d: f(d, True))


def test_cpu_index_tensors_index_kiln_tensors():
    x = torch.arange(12., device=K).view(3, 4)
    xc = x.cpu()
    for idx in [torch.tensor([2, 0]), torch.tensor(1), torch.tensor([True, False, True])]:
        out = x[idx]
        assert out.device.type == K
        torch.testing.assert_close(out.cpu(), xc[idx])
    assert x[:, torch.tensor([3, -1])].device.type == K
    y, yc = x.clone(), xc.clone()
    y[torch.tensor([0, 2])] = -1.0
    yc[torch.tensor([0, 2])] = -1.0
    torch.testing.assert_close(y.cpu(), yc)
    with pytest.raises(IndexError, match="out of bounds"):
        x[torch.tensor([3])]


# ---- classes the differential suite found -------------------------------------------------------

def test_dtype_errors_do_not_depend_on_numel():
    for dev in ("cpu", K):
        with pytest.raises(RuntimeError):  # NotImplementedError on CPU, a RuntimeError subclass
            torch.bitwise_not(torch.zeros(0, device=dev))
        with pytest.raises(RuntimeError):
            torch.bitwise_and(torch.zeros(0, 3, device=dev), torch.zeros(1, 3, dtype=torch.int8, device=dev))


def test_kernel_argument_errors_are_runtime_errors():
    x = torch.arange(6, dtype=torch.int32, device=K)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.remainder(x, torch.zeros_like(x))
    with pytest.raises(RuntimeError, match="index -1 is out of bounds for dimension 1 with size 4"):
        torch.gather(torch.zeros(3, 4, device=K), 1, torch.full((3, 1), -1, device=K))


def test_index_select_checks_in_aten_order():
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.index_select(torch.zeros(5, device=K), 1, torch.zeros(2, dtype=torch.int16, device=K))
    with pytest.raises(IndexError, match="Index is supposed to be a vector"):
        torch.index_select(torch.zeros(5, device=K), 0, torch.zeros(2, 2, dtype=torch.long, device=K))


def test_inplace_output_cannot_be_resized():
    with pytest.raises(RuntimeError, match=r"output with shape \[3, 1\] doesn't match the broadcast shape \[3, 4\]"):
        x = torch.zeros(3, 1, device=K)
        torch.maximum(x, torch.zeros(1, 4, device=K), out=x)


def test_reduced_float_result_is_rounded_before_a_wider_out():
    def f(d):
        a = torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16, device=d)
        b = torch.tensor([0.01, 257.0, 1000.5], device=d).to(torch.int16)
        return torch.add(a, b, out=torch.empty(3, device=d))
    assert_same(f)


def test_fallback_with_a_leading_cpu_scalar_returns_on_kiln():
    x = torch.arange(1., 5., device=K)
    out = 7 // x
    assert out.device.type == K
    torch.testing.assert_close(out.cpu(), 7 // x.cpu())


def test_pooling_with_zero_kernel_raises():
    with pytest.raises(RuntimeError, match="stride should not be zero"):
        F.max_pool2d(torch.zeros(1, 2, 5, 5, device=K), 0)
    with pytest.raises(RuntimeError, match="kernel size should be greater than zero"):
        F.avg_pool2d(torch.zeros(1, 2, 5, 5, device=K), 0, stride=1)


def test_batch_norm_mixed_parameter_dtypes_raise_as_on_cpu():
    x = torch.randn(4, 3, dtype=torch.float64, device=K)
    rm, rv = torch.zeros(3, device=K), torch.ones(3, device=K)
    with pytest.raises(RuntimeError, match="mixed dtype"):
        F.batch_norm(x, rm, rv)
    assert_same(lambda d: F.batch_norm(torch.ones(4, 3, dtype=torch.bfloat16, device=d), torch.zeros(3, device=d),
                                       torch.ones(3, device=d)))


def test_std_mean_with_infinities_matches_cpu_welford():
    def f(d):
        x = torch.tensor([[1.0, math.inf, 2.0, 3.0], [1.0, 2.0, 3.0, math.inf], [1.0, 2.0, 3.0, 4.0]], device=d)
        return torch.stack(torch.std_mean(x, 1) + torch.var_mean(x, 1))
    ref, got = both(f)
    torch.testing.assert_close(got, ref, equal_nan=True)


def test_lerp_promotes_a_zero_dim_weight_as_on_cpu():
    assert_same(lambda d: torch.lerp(torch.arange(4, dtype=torch.int32, device=d), torch.ones(4, dtype=torch.int32, device=d),
                                     torch.tensor(0.5, dtype=torch.float16)))
    assert_same(lambda d: torch.lerp(torch.arange(4., device=d), torch.ones(4, device=d), torch.tensor(0.25, dtype=torch.float64)))
    with pytest.raises(RuntimeError, match="for `weight`"):
        torch.lerp(torch.zeros(2, device=K), torch.zeros(2, device=K), torch.zeros(2, dtype=torch.float64, device=K))


@pytest.mark.parametrize("fn, msg", [
    (lambda x, d: torch.amax(x, 1, out=torch.empty(3, dtype=torch.float64, device=d)), "dtype for input and out to match"),
    (lambda x, d: torch.mean(x.long(), 1, out=torch.empty(3, device=d)), "could not infer output dtype"),
    (lambda x, d: torch.mean(x, 1, out=torch.empty(3, dtype=torch.long, device=d)), "can't be cast"),
    (lambda x, d: torch.logsumexp(x, 1, out=torch.empty(3, dtype=torch.int16, device=d)), "Expected floating point type"),
    (lambda x, d: torch.any(x, 1, out=torch.empty(3, dtype=torch.int32, device=d)), "only supports bool tensor"),
    (lambda x, d: torch.linalg.vector_norm(x, 2, 1, out=torch.empty(3, dtype=torch.float16, device=d)), "Expected out tensor to have dtype"),
    (lambda x, d: torch.std(x, 1, out=torch.empty(3, dtype=torch.long, device=d)), "can't be cast"),
])
def test_reduction_out_dtype_rules(fn, msg):
    for d in ("cpu", K):
        with pytest.raises(RuntimeError, match=msg):
            fn(torch.randn(3, 4, device=d), d)


def test_pow_exponent_range_rule_matches_cpu():
    for dt in (torch.float32, torch.uint8, torch.int32):
        assert_same(lambda d, dt=dt: torch.pow(torch.full((2,), 2, dtype=dt, device=d), 1e39))
    for dt in (torch.float16, torch.bfloat16):
        with pytest.raises(RuntimeError, match="without overflow"):
            torch.pow(torch.full((2,), 2, dtype=dt, device=K), 1e39)


def test_any_all_over_no_dims_and_bool_cumsum():
    assert_same(lambda d: torch.any(torch.tensor([[0.0, 2.0], [math.nan, 0.0]], device=d), ()))
    assert_same(lambda d: torch.all(torch.zeros(3, 0, dtype=torch.uint8, device=d), ()))
    for d in ("cpu", K):
        with pytest.raises(RuntimeError, match="not implemented for 'Bool'"):
            torch.cumsum(torch.ones(3, dtype=torch.int16, device=d), 0, out=torch.empty(3, dtype=torch.bool, device=d))


def test_log_softmax_keeps_precision_for_large_rows():
    base = torch.tensor([[1e5], [-1e38], [0.5]])
    assert_same(lambda d: F.log_softmax(base.to(d).expand(3, 6), -1))
    assert_same(lambda d: F.cross_entropy(base.to(d).expand(3, 6), torch.zeros(3, dtype=torch.long, device=d)))


def test_roll_of_a_scalar_rejects_a_dim_and_wide_random_ranges_work():
    for d in ("cpu", K):
        with pytest.raises(IndexError, match="has no dimensions"):
            torch.roll(torch.tensor(1.0, device=d), 1, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = torch.empty(50, dtype=torch.bfloat16, device=K).random_(300)
    assert x.device.type == K and float(x.min()) >= 0 and float(x.max()) <= 300


def test_integer_scalars_beyond_double_precision_and_bool_argmax():
    big = 2**63 - 1
    assert_same(lambda d: torch.sub(torch.arange(6, device=d), torch.ones(6, dtype=torch.long, device=d), alpha=big))
    assert_same(lambda d: torch.zeros(3, dtype=torch.long, device=d).scatter(0, torch.tensor([1], device=d), big))
    assert_same(lambda d: torch.full((3,), 2**62 + 1, device=d).clamp(max=2**62 + 1))
    for d in ("cpu", K):
        with pytest.raises(RuntimeError, match="does not support bool"):
            torch.argmax(torch.ones(3, 4, dtype=torch.bool, device=d), 1)


def test_clamp_with_a_nan_bound_fills_nan_without_range_checks():
    assert_same(lambda d: torch.clamp(torch.zeros(0, dtype=torch.int32, device=d), 1e39, math.nan))
    assert_same(lambda d: torch.clamp(torch.arange(3., device=d), math.nan, 1e39))
