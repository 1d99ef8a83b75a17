# SPDX-License-Identifier: Apache-2.0
"""make bench: kiln eager vs PyTorch CPU eager, measured in the same run.

Each row times the same op on kiln tensors and on CPU tensors (median of repeats, both on the
same thread count) and reports the ratio. A row whose kiln run went through the CPU fallback is
marked so (see torch_kiln.fallback_report). Writes bench/results/eager.json.
"""
import copy
import json
import os
import sys
import time
import warnings

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
import torch_kiln  # noqa: E402
from models import LlamaConfig, TinyLlama  # noqa: E402

warnings.filterwarnings("ignore", message="kiln: .* has no native kiln kernel")
THREADS = int(os.environ.get("KILN_NUM_THREADS", os.cpu_count() or 1))
torch.set_num_threads(THREADS)


def timeit(fn, device, min_time=0.3, reps=7):
    """Median seconds per call of fn() (synchronizing kiln after each batch of calls)."""
    sync = (lambda: torch.kiln.synchronize()) if device == "kiln" else (lambda: None)
    fn()
    sync()
    n, t = 1, 0.0
    while True:  # calibrate calls per sample
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        t = time.perf_counter() - t0
        if t >= min_time / reps or n >= 1 << 20:
            break
        n *= 2
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        samples.append((time.perf_counter() - t0) / n)
    samples.sort()
    return samples[len(samples) // 2]


def peak_gflops():
    mhz = 0.0
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("cpu MHz"):
                mhz = max(mhz, float(line.split(":")[1]))
    except OSError:
        pass
    return THREADS * mhz / 1000.0 * 32.0  # AVX2: 2 FMA ports x 8 lanes x 2 flops


rows = []


def row(name, make, unit, work=None, higher_is_better=False):
    """make(device) -> zero-arg callable. work: units of work per call (flops, bytes) or None."""
    res = {"name": name}
    for dev in ("cpu", "kiln"):
        fn = make(dev)
        torch_kiln.fallback_reset()
        res[dev + "_s"] = timeit(fn, dev)
        if dev == "kiln":
            res["kiln_fallback_ops"] = sorted(torch_kiln.fallback_report())
    if work is not None:
        res["cpu_" + unit] = work / res["cpu_s"] / 1e9
        res["kiln_" + unit] = work / res["kiln_s"] / 1e9
    res["kiln_speed_vs_cpu"] = res["cpu_s"] / res["kiln_s"]
    rows.append(res)
    fb = " [fallback: " + ",".join(res["kiln_fallback_ops"]) + "]" if res["kiln_fallback_ops"] else ""
    if work is not None:
        print(f"{name:34s} cpu {res['cpu_' + unit]:8.2f} {unit:7s} kiln {res['kiln_' + unit]:8.2f} {unit:7s} "
              f"kiln/cpu {res['kiln_speed_vs_cpu']:5.2f}x{fb}")
    else:
        print(f"{name:34s} cpu {res['cpu_s'] * 1e6:10.1f} us    kiln {res['kiln_s'] * 1e6:10.1f} us    "
              f"kiln/cpu {res['kiln_speed_vs_cpu']:5.2f}x{fb}")
    return res


def on(dev, *ts):
    return [t.to(dev) for t in ts]


def main():
    g = torch.Generator().manual_seed(0)
    print(f"threads={THREADS}  FMA peak ~{peak_gflops():.0f} GFLOP/s  torch {torch.__version__}")
    a1, b1 = torch.randn(1, generator=g), torch.randn(1, generator=g)
    row("add 1 elem (dispatch overhead)", lambda d: (lambda x=on(d, a1, b1): torch.add(*x)), "us")
    for n in (256, 1024, 2048):
        A, B = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
        r = row(f"sgemm {n}", lambda d, A=A, B=B: (lambda x=on(d, A, B): torch.mm(*x)), "GFLOP/s", 2 * n ** 3)
        r["kiln_pct_peak"] = 100 * r["kiln_GFLOP/s"] / max(peak_gflops(), 1e-9)
    N = 16 * 1024 * 1024
    X, Y = torch.randn(N, generator=g), torch.randn(N, generator=g)
    row("add f32 16M (GB/s, 3 streams)", lambda d: (lambda x=on(d, X, Y): torch.add(*x)), "GB/s", 12 * N)
    row("mul f32 16M (GB/s, 3 streams)", lambda d: (lambda x=on(d, X, Y): torch.mul(*x)), "GB/s", 12 * N)
    row("sum f32 16M (GB/s)", lambda d: (lambda x=on(d, X)[0]: x.sum()), "GB/s", 4 * N)
    S = torch.randn(4096, 1024, generator=g)
    row("softmax 4096x1024", lambda d: (lambda x=on(d, S)[0]: torch.softmax(x, -1)), "GB/s", 8 * S.numel())
    w, bb = torch.randn(1024, generator=g), torch.randn(1024, generator=g)
    row("layer_norm 4096x1024", lambda d: (lambda x=on(d, S, w, bb): F.layer_norm(x[0], (1024,), x[1], x[2])),
        "GB/s", 8 * S.numel())
    q, k, v = (torch.randn(1, 8, 1024, 64, generator=g) for _ in range(3))
    row("sdpa causal B1 H8 L1024 E64", lambda d: (lambda x=on(d, q, k, v): F.scaled_dot_product_attention(*x, is_causal=True)),
        "GFLOP/s", 2 * 2 * 8 * 1024 * 1024 * 64 / 2)

    cfg = LlamaConfig(vocab=512, dim=128, layers=2, heads=4, ffn=384, seq=128)
    torch.manual_seed(0)
    base = TinyLlama(cfg)
    idx = torch.randint(0, cfg.vocab, (8, cfg.seq), generator=g)
    tgt = torch.randint(0, cfg.vocab, (8, cfg.seq), generator=g)

    def train_step(d):
        m = copy.deepcopy(base).to(d)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
        x, y = on(d, idx, tgt)

        def step():
            opt.zero_grad(set_to_none=True)
            m.loss(x, y).backward()
            opt.step()
        return step
    row("llama-style train step (B8 T128)", train_step, "s")

    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    out = os.path.join(HERE, "results", "eager.json")
    with open(out, "w") as f:
        json.dump({"threads": THREADS, "torch": torch.__version__, "peak_gflops": peak_gflops(), "rows": rows}, f, indent=1)
    print(f"wrote {out}")
    sys.path.insert(0, HERE); import compile_bench; compile_bench.main()  # noqa: E702,E401 compiled-mode rows
    import export_bench; export_bench.main([])  # noqa: E702,E401 deployment: kiln-run vs Python, load time


if __name__ == "__main__":
    main()
