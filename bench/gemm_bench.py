#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""kiln_sgemm vs torch.mm: GFLOP/s and % of AVX2 FMA peak, interleaved in one run.

usage: .venv/bin/python bench/gemm_bench.py [path/to/libkiln.so] [--threads N] [--reps R]
       [--sizes 256,1024,2048] [--trans]

The library is found from argv, else build-gemm/, build/ under the repo root. Both libraries
run with the same thread count (KILN_NUM_THREADS / torch.set_num_threads). Each size is timed
in alternating blocks (kiln block, torch block, several rounds; the first call of a block is
not timed), so background load hits both alike while neither library's idle threads (OpenMP
spin-waits, the kiln pool) compete with the other's timed calls. The median is reported.
Peak = threads * GHz * 32 flop/cycle (two 8-wide FMA pipes), GHz from /proc/cpuinfo "cpu MHz".
"""
import argparse
import ctypes
import os
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def find_lib(arg):
    if arg:
        return pathlib.Path(arg)
    for d in ("build-gemm", "build"):
        p = ROOT / d / "libkiln.so"
        if p.exists():
            return p
    sys.exit("libkiln.so not found: build it or pass its path")


def cpu_ghz():
    mhz = []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("cpu MHz"):
                    mhz.append(float(line.split(":")[1]))
    except OSError:
        pass
    return (sum(mhz) / len(mhz) / 1000.0) if mhz else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib", nargs="?")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=0, help="0 = by size")
    ap.add_argument("--sizes", default="256,1024,2048")
    ap.add_argument("--trans", action="store_true", help="also time A @ B^T (trans_b)")
    args = ap.parse_args()

    os.environ["KILN_NUM_THREADS"] = str(args.threads)  # read when the pool is created
    # Plain CPU torch: do not auto-load torch_kiln (it would bring in a second libkiln).
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    import torch

    torch.set_num_threads(args.threads)
    lib = ctypes.CDLL(str(find_lib(args.lib)))
    f, i64, p = ctypes.c_float, ctypes.c_int64, ctypes.c_void_p
    lib.kiln_sgemm.argtypes = [ctypes.c_int, ctypes.c_int, i64, i64, i64, f, p, i64, p, i64, f, p, i64]
    lib.kiln_sgemm.restype = ctypes.c_int
    lib.kiln_status_message.restype = ctypes.c_char_p

    ghz = cpu_ghz()
    peak = args.threads * ghz * 32
    print(f"threads={args.threads} cpu={ghz:.2f} GHz peak={peak:.1f} GFLOP/s torch={torch.__version__}")
    print("GF/s are medians over reps (best rep in parentheses); ratio = kiln / torch medians")
    print(f"{'case':>14} {'kiln GF/s':>16} {'torch GF/s':>16} {'ratio':>6} {'kiln %pk':>8} {'torch %pk':>9} {'max rel err':>11}")
    cases = []
    for s in args.sizes.split(","):
        cases.append((int(s), 0))
        if args.trans:
            cases.append((int(s), 1))
    for n, tb in cases:
        torch.manual_seed(0)
        a = torch.randn(n, n)
        b = torch.randn(n, n)
        c = torch.empty(n, n)

        def kiln():
            rc = lib.kiln_sgemm(0, tb, n, n, n, 1.0, a.data_ptr(), n, b.data_ptr(), n, 0.0,
                                c.data_ptr(), n)
            if rc != 0:
                sys.exit("kiln_sgemm failed: " + lib.kiln_status_message().decode())

        bt = b.t() if tb else b
        out = torch.empty(n, n)

        def ref():
            torch.mm(a, bt, out=out)

        reps = args.reps or (60 if n <= 256 else (15 if n <= 1024 else 6))
        rounds = 3
        tk, tt = [], []
        for _ in range(rounds):
            for fn, ts in ((kiln, tk), (ref, tt)):
                fn()  # warm: pool / OpenMP threads awake, scratch and caches
                for _ in range(max(1, reps // rounds)):
                    t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
        flop = 2.0 * n ** 3
        gk = flop / statistics.median(tk) / 1e9
        gt = flop / statistics.median(tt) / 1e9
        bk = flop / min(tk) / 1e9
        bt_ = flop / min(tt) / 1e9
        err = ((c - out).abs().max() / out.abs().max()).item()
        name = f"{n}{' (A@B^T)' if tb else ''}"
        print(f"{name:>14} {gk:7.1f} ({bk:6.1f}) {gt:7.1f} ({bt_:6.1f}) {gk / gt:6.2f} {100 * gk / peak:7.1f}% {100 * gt / peak:8.1f}% {err:11.2e}")


if __name__ == "__main__":
    main()
