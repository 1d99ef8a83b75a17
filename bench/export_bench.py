# SPDX-License-Identifier: Apache-2.0
"""Deployment benchmark: an exported LM run by `build/kiln-run --bench` against the same .kiln file
called from Python (torch_kiln.load), PyTorch CPU eager and Inductor, measured in the same run;
plus export time, file size vs weight bytes and load time (mmap + checksum + compile) for a
larger model. Writes bench/results/export.json.

    .venv/bin/python bench/export_bench.py [--runs N]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
import torch_kiln  # noqa: E402
from models import LlamaConfig, TinyLlama  # noqa: E402
from torch.export import Dim  # noqa: E402

KILN_RUN = os.path.join(os.environ.get("KILN_BUILD_DIR", os.path.join(ROOT, "build")), "kiln-run")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def time_calls(fn, runs, warmup=5):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        fn()
        ts.append((time.perf_counter_ns() - t0) / 1e6)
    return {"min": min(ts), "p50": pct(ts, 50), "p90": pct(ts, 90), "p99": pct(ts, 99), "mean": statistics.mean(ts)}


def kiln_run_bench(path, npy, runs):
    r = subprocess.run([KILN_RUN, path, "--input", npy, "--bench", str(runs), "--warmup", "5"], env={},
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    m = re.search(r"min ([\d.]+)\s+p50 ([\d.]+)\s+p90 ([\d.]+)\s+p99 ([\d.]+)\s+max ([\d.]+) ms \(mean ([\d.]+)\)",
                  r.stdout)
    load = re.search(r"loaded in ([\d.]+) ms", r.stdout)
    peak = re.search(r"timed runs\): peak allocated (\d+)", r.stdout)
    return {"min": float(m.group(1)), "p50": float(m.group(2)), "p90": float(m.group(3)),
            "p99": float(m.group(4)), "mean": float(m.group(6)), "load_ms": float(load.group(1)),
            "peak_allocated": int(peak.group(1)) if peak else None}


def lm_latency(cfg, batch, seq, runs, tmp, dynamic):
    torch.manual_seed(0)
    lm = TinyLlama(cfg).eval()
    tok = torch.randint(0, cfg.vocab, (batch, seq))
    path = os.path.join(tmp, f"lm_{cfg.dim}_{seq}_{'dyn' if dynamic else 'static'}.kiln")
    t0 = time.perf_counter()
    torch_kiln.export(lm, (tok,), path,
                      dynamic_shapes=({1: Dim("seq", min=2, max=cfg.seq)},) if dynamic else None)
    export_s = time.perf_counter() - t0
    npy = os.path.join(tmp, "tokens.npy")
    np.save(npy, tok.numpy())
    row = {"model": f"TinyLlama dim={cfg.dim} layers={cfg.layers} vocab={cfg.vocab}", "batch": batch, "seq": seq,
           "dynamic_seq": dynamic, "export_s": export_s}
    km = torch_kiln.load(path)
    kt = tok.to("kiln")
    row["python_kiln"] = time_calls(lambda: km(kt), runs)
    row["kiln_run"] = kiln_run_bench(path, npy, runs)
    with torch.no_grad():
        row["torch_cpu"] = time_calls(lambda: lm(tok), runs)
        comp = torch.compile(lm, backend="inductor")
        comp(tok)
        row["inductor"] = time_calls(lambda: comp(tok), runs)
        ref = lm(tok)
    row["max_abs_diff_vs_cpu"] = float((km(kt).cpu() - ref).abs().max())
    row["file_bytes"] = os.path.getsize(path)
    row["weight_bytes"] = km.info["weight_bytes"]
    row["param_bytes"] = sum(p.numel() * p.element_size() for p in lm.parameters())
    return row


def load_time(tmp):
    """A ~90 MB model: export time, file size vs weights, kiln-run's load (mmap, checksum, compile)."""
    cfg = LlamaConfig(vocab=8192, dim=512, layers=4, heads=8, ffn=1536, seq=128)
    torch.manual_seed(0)
    lm = TinyLlama(cfg).eval()
    tok = torch.randint(0, cfg.vocab, (1, 64))
    path = os.path.join(tmp, "big.kiln")
    t0 = time.perf_counter()
    torch_kiln.export(lm, (tok,), path, dynamic_shapes=({1: Dim("seq", min=2, max=cfg.seq)},))
    export_s = time.perf_counter() - t0
    loads = []
    for _ in range(5):
        r = subprocess.run([KILN_RUN, path, "--info"], env={}, capture_output=True, text=True, timeout=600)
        loads.append(float(re.search(r"loaded in ([\d.]+) ms", r.stdout).group(1)))
    t0 = time.perf_counter()
    km = torch_kiln.load(path)
    py_load = (time.perf_counter() - t0) * 1e3
    return {"model": f"TinyLlama dim={cfg.dim} layers={cfg.layers} vocab={cfg.vocab} (dynamic seq 2..{cfg.seq})",
            "export_s": export_s, "file_bytes": os.path.getsize(path), "weight_bytes": km.info["weight_bytes"],
            "param_bytes": sum(p.numel() * p.element_size() for p in lm.parameters()),
            "kiln_run_load_ms": loads, "python_load_ms": py_load}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    a = ap.parse_args(argv)
    out = {"threads": torch.get_num_threads(), "loadavg": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        out["latency"] = [lm_latency(LlamaConfig(), 1, 32, a.runs, tmp, False),
                          lm_latency(LlamaConfig(seq=64), 1, 32, a.runs, tmp, True),
                          lm_latency(LlamaConfig(dim=256, layers=4, heads=8, ffn=768, vocab=2048, seq=128), 1, 128,
                                     max(a.runs // 4, 20), tmp, False)]
        out["load"] = load_time(tmp)
    for r in out["latency"]:
        print(f"{r['model']} b={r['batch']} seq={r['seq']} dynamic={r['dynamic_seq']}: p50 ms  kiln-run "
              f"{r['kiln_run']['p50']:.3f}  python(kiln) {r['python_kiln']['p50']:.3f}  torch cpu "
              f"{r['torch_cpu']['p50']:.3f}  inductor {r['inductor']['p50']:.3f}  (kiln-run/python "
              f"{r['kiln_run']['p50'] / r['python_kiln']['p50']:.2f}x; file {r['file_bytes']} B for "
              f"{r['param_bytes']} B of parameters; max |diff| {r['max_abs_diff_vs_cpu']:.1e})")
    ld = out["load"]
    print(f"{ld['model']}: export {ld['export_s']:.1f} s, file {ld['file_bytes'] / 2**20:.1f} MiB for "
          f"{ld['param_bytes'] / 2**20:.1f} MiB of parameters, kiln-run load {min(ld['kiln_run_load_ms']):.1f} ms "
          f"(min of 5), torch_kiln.load {ld['python_load_ms']:.1f} ms")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "export.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
