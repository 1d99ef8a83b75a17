# SPDX-License-Identifier: Apache-2.0
"""Compiled-mode benchmark: kiln compiled vs kiln eager vs Inductor (CPU) vs PyTorch CPU eager.

Every row measures all four configurations in the same run, on the same thread count:
  cpu      PyTorch eager on CPU
  inductor torch.compile(backend="inductor") on CPU
  kiln     kiln eager (model on the "kiln" device)
  kilnc    torch.compile(backend="kiln"), model on "kiln"
A configuration that raises is recorded with its error and the row goes on. Also: cold/warm compile
time of the Llama train step (Inductor's cache lives in a fresh temporary directory, so "cold" is
really cold and "warm" hits its FX graph cache), peak kiln memory eager vs compiled, the stats of
every kiln program compiled and every graph split. Writes bench/results/compile.json.
"""
import copy
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
import warnings

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
import torch_kiln  # noqa: E402
from torch_kiln.compile import backend as kiln_backend  # noqa: E402
from models import LlamaConfig, SmallCNN, TinyLlama, apply_rope, rope_tables  # noqa: E402

warnings.filterwarnings("ignore", message="kiln: .* has no native kiln kernel")
THREADS = int(os.environ.get("KILN_NUM_THREADS", os.cpu_count() or 1))
CONFIGS = ("cpu", "inductor", "kiln", "kilnc")
DEVICE = {"cpu": "cpu", "inductor": "cpu", "kiln": "kiln", "kilnc": "kiln"}
BACKEND = {"inductor": "inductor", "kilnc": "kiln"}


def sync(dev):
    if dev == "kiln":
        torch.kiln.synchronize()


def timeit(fn, dev, min_time=1.0, reps=5):
    """Median seconds per call of fn() over reps samples of >= min_time/reps each (one more warm-up
    call first: the first call after a compile still pays for caches and GC)."""
    fn()
    sync(dev)
    n = 1
    while True:  # calibrate calls per sample
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync(dev)
        if time.perf_counter() - t0 >= min_time / reps or n >= 1 << 16:
            break
        n *= 2
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync(dev)
        samples.append((time.perf_counter() - t0) / n)
    samples.sort()
    return samples[len(samples) // 2]


def compile_fn(fn, cfg):
    """A fresh compilation of fn for cfg (identity for the eager configurations)."""
    if cfg not in BACKEND:
        return fn
    torch._dynamo.reset()
    return torch.compile(fn, backend=BACKEND[cfg], dynamic=False)


def err_str(e):
    s = f"{type(e).__name__}: {e}"
    return s if len(s) < 2000 else s[:2000] + " ..."


rows = []


def bench_row(name, setup, reps=5, extra=None):
    """setup(cfg) -> zero-arg step callable (compiled for the compiled configs, not yet called).

    The first call is timed separately (for compiled configs it includes compilation).
    extra(cfg, step, res) may add measurements to res after timing."""
    res = {"name": name}
    for cfg in CONFIGS:
        dev = DEVICE[cfg]
        r = {}
        n_prog, n_split = len(kiln_backend.compiled_programs), len(kiln_backend.graph_splits)
        n_prog_end = n_split_end = None
        try:
            torch_kiln.fallback_reset()
            step = setup(cfg)
            t0 = time.perf_counter()
            step()
            sync(dev)
            r["first_call_s"] = time.perf_counter() - t0
            r["s"] = timeit(step, dev, reps=reps)
            n_prog_end, n_split_end = len(kiln_backend.compiled_programs), len(kiln_backend.graph_splits)
            if extra is not None:
                extra(cfg, step, r)
        except Exception as e:  # noqa: BLE001 - a failing configuration must not end the benchmark
            r["error"] = err_str(e)
            r["traceback"] = traceback.format_exc()[-4000:]
            print(f"  [{name}] {cfg} FAILED: {r['error'][:300]}")
        if dev == "kiln":
            r["fallback_ops"] = sorted(torch_kiln.fallback_report())
        if cfg == "kilnc":
            progs = kiln_backend.compiled_programs[n_prog:n_prog_end]  # the row's own compile (not extra's)
            r["programs"] = [dict(name=p.name, **p.stats) for p in progs]
            r["graph_splits"] = list(kiln_backend.graph_splits[n_split:n_split_end])
        res[cfg] = r
    t = {c: res[c].get("s") for c in CONFIGS}
    if t["kilnc"]:
        if t["inductor"]:
            res["kilnc_speed_vs_inductor"] = t["inductor"] / t["kilnc"]
        if t["cpu"]:
            res["kilnc_speed_vs_cpu"] = t["cpu"] / t["kilnc"]
        if t["kiln"]:
            res["kilnc_speed_vs_kiln_eager"] = t["kiln"] / t["kilnc"]
    rows.append(res)
    print_row(res)
    return res


def fmt_t(s):
    if s is None:
        return f"{'ERR':>10s}"
    return f"{s * 1e3:10.3f}"


def fmt_x(v):
    return f"{v:7.2f}x" if v is not None else f"{'-':>8s}"


HEADER = (f"{'row':36s} {'cpu ms':>10s} {'induct ms':>10s} {'kiln ms':>10s} {'kilnc ms':>10s} "
          f"{'kc/ind':>8s} {'kc/cpu':>8s} {'kc/kiln':>8s}")


def print_row(res):
    notes = []
    kc = res["kilnc"]
    if kc.get("programs") is not None:
        notes.append(f"progs={len(kc['programs'])} splits={len(kc.get('graph_splits', []))}")
    fb = sorted(set(res["kiln"].get("fallback_ops", []) + kc.get("fallback_ops", [])))
    if fb:
        notes.append("fallback:" + ",".join(fb))
    print(f"{res['name']:36s} " + " ".join(fmt_t(res[c].get("s")) for c in CONFIGS) + " " +
          fmt_x(res.get("kilnc_speed_vs_inductor")) + " " + fmt_x(res.get("kilnc_speed_vs_cpu")) + " " +
          fmt_x(res.get("kilnc_speed_vs_kiln_eager")) + ("  " + "; ".join(notes) if notes else ""), flush=True)


def to(dev, *ts):
    return [t.to(dev) for t in ts]


# ---------------------------------------------------------------- decode step with a static KV cache
def make_decode(m, B, T):
    """One decode step of TinyLlama m at position T-1: the cache holds T-1 keys/values per layer
    ([L, B, H, T-1, hd]), the new token's k/v are concatenated (static shape T), attention is one
    query over T keys. Returns the logits and the new k/v rows."""
    cfg = m.cfg
    H, D = cfg.heads, cfg.dim
    cos, sin = rope_tables(cfg, T, m.tok.weight.device)
    cos, sin = cos[T - 1:T].contiguous(), sin[T - 1:T].contiguous()

    def decode(tok, kc, vc):
        x = m.tok(tok)  # [B, 1, D]
        new_k, new_v = [], []
        for i, blk in enumerate(m.blocks):
            a = blk.attn
            h = blk.attn_norm(x)
            q = a.wq(h).view(B, 1, H, -1).transpose(1, 2)
            k = a.wk(h).view(B, 1, H, -1).transpose(1, 2)
            v = a.wv(h).view(B, 1, H, -1).transpose(1, 2)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
            K = torch.cat([kc[i], k], dim=2)
            V = torch.cat([vc[i], v], dim=2)
            o = F.scaled_dot_product_attention(q, K, V)
            x = x + a.wo(o.transpose(1, 2).reshape(B, 1, D))
            x = x + blk.ffn(blk.ffn_norm(x))
            new_k.append(k)
            new_v.append(v)
        return m.out(m.norm(x)), torch.stack(new_k), torch.stack(new_v)
    return decode


def main():
    t_start = time.perf_counter()
    torch.set_num_threads(THREADS)
    # A fresh Inductor cache so the cold compile is cold (set before Inductor's first use).
    ind_cache = tempfile.mkdtemp(prefix="kiln_bench_inductor_")
    prev_cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = ind_cache
    load0 = os.getloadavg()[0]
    print(f"\n== compiled mode: threads={THREADS}  torch {torch.__version__}  load avg {load0:.1f}  "
          f"(times: median per call)")

    # Load dynamo + aot_autograd machinery once, so neither backend's cold compile pays for it.
    try:
        w = torch.randn(4, requires_grad=True)
        torch.compile(lambda x: (x * 2).sum(), backend="aot_eager")(w).backward()
    except Exception as e:  # noqa: BLE001
        print("  dynamo warmup failed:", err_str(e))
    torch._dynamo.reset()
    print(HEADER)

    g = torch.Generator().manual_seed(0)
    cfg = LlamaConfig(vocab=512, dim=128, layers=2, heads=4, ffn=384, seq=128)
    torch.manual_seed(0)
    base = TinyLlama(cfg)
    idx8 = torch.randint(0, cfg.vocab, (8, cfg.seq), generator=g)
    tgt8 = torch.randint(0, cfg.vocab, (8, cfg.seq), generator=g)
    compile_times = {}
    memory = {}

    # 1 + 5 + 6: Llama train step, compile time cold/warm, peak memory
    state = {}

    def llama_train(c):
        d = DEVICE[c]
        m = copy.deepcopy(base).to(d)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
        x, y = to(d, idx8, tgt8)
        loss_fn = compile_fn(m.loss, c)
        state[c] = (m, opt, x, y, len(kiln_backend.compiled_programs))

        def step():
            opt.zero_grad(set_to_none=True)
            loss_fn(x, y).backward()
            opt.step()
        return step

    def llama_train_extra(c, step, r):
        d = DEVICE[c]
        if d == "kiln":  # 6: peak memory of one (warm) step
            sync(d)
            before = torch.kiln.memory_allocated()
            torch.kiln.reset_peak_memory_stats()
            step()
            sync(d)
            peak = torch.kiln.max_memory_allocated()
            memory[c] = {"allocated_before_step": before, "peak_allocated": peak, "peak_above_before": peak - before}
        if c in BACKEND:  # 5: compile time. cold = first call of the row (the first compile in this process)
            m, opt, x, y, n_cold = state[c]
            ct = {"cold_first_call_s": r["first_call_s"], "steady_step_s": r["s"]}
            n_prog = len(kiln_backend.compiled_programs)
            torch._dynamo.reset()
            loss_fn = torch.compile(m.loss, backend=BACKEND[c], dynamic=False)
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss_fn(x, y).backward()
            opt.step()
            sync(d)
            ct["warm_first_call_s"] = time.perf_counter() - t0
            ct["cold_compile_overhead_s"] = ct["cold_first_call_s"] - r["s"]
            ct["warm_compile_overhead_s"] = ct["warm_first_call_s"] - r["s"]
            if c == "kilnc":
                ct["kiln_graph_compile_s_cold"] = sum(p.stats["compile_s"]
                                                      for p in kiln_backend.compiled_programs[n_cold:n_prog])
                ct["kiln_graph_compile_s_warm"] = sum(p.stats["compile_s"]
                                                      for p in kiln_backend.compiled_programs[n_prog:])
            compile_times[c] = ct

    bench_row("llama train step B8 T128", llama_train, reps=5, extra=llama_train_extra)

    # 2: Llama forward (inference)
    for B in (1, 8):
        idx = idx8[:B].contiguous()

        def llama_fwd(c, idx=idx):
            d = DEVICE[c]
            m = copy.deepcopy(base).to(d).eval()
            x, = to(d, idx)
            fwd = compile_fn(m, c)

            def step():
                with torch.no_grad():
                    return fwd(x)
            return step
        bench_row(f"llama forward B{B} T128 (no_grad)", llama_fwd, reps=7)

    # 3: decode step, KV cache of 127 + 1 new token, attention of 1 query over 128 keys
    T = cfg.seq
    hd = cfg.dim // cfg.heads
    for B in (1,):
        kc0 = torch.randn(cfg.layers, B, cfg.heads, T - 1, hd, generator=g)
        vc0 = torch.randn(cfg.layers, B, cfg.heads, T - 1, hd, generator=g)
        tok0 = torch.randint(0, cfg.vocab, (B, 1), generator=g)

        def decode_setup(c, B=B, kc0=kc0, vc0=vc0, tok0=tok0):
            d = DEVICE[c]
            m = copy.deepcopy(base).to(d).eval()
            tok, kc, vc = to(d, tok0, kc0, vc0)
            fn = compile_fn(make_decode(m, B, T), c)

            def step():
                with torch.no_grad():
                    return fn(tok, kc, vc)
            return step
        bench_row(f"llama decode B{B} (1 query x {T} keys)", decode_setup, reps=7)

    # 4: SmallCNN train step. SmallCNN's head is Linear(32*4*4): two 2x poolings of a 16x16 input (a 32x32
    # input does not fit the model), so the row uses 3x16x16.
    torch.manual_seed(0)
    cnn = SmallCNN()
    xi = torch.randn(16, 3, 16, 16, generator=g)
    yi = torch.randint(0, 10, (16,), generator=g)

    def cnn_train(c):
        d = DEVICE[c]
        m = copy.deepcopy(cnn).to(d).train()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
        x, y = to(d, xi, yi)

        def loss(x, y):
            return F.cross_entropy(m(x), y)
        loss_fn = compile_fn(loss, c)

        def step():
            opt.zero_grad(set_to_none=True)
            loss_fn(x, y).backward()
            opt.step()
        return step
    bench_row("smallcnn train step B16 3x16x16", cnn_train, reps=5)

    # Summary: compile time, memory
    print("\ncompile time, llama train step (first fwd+bwd+step call, s):")
    for c in ("inductor", "kilnc"):
        ct = compile_times.get(c)
        if ct:
            print(f"  {c:9s} cold {ct['cold_first_call_s']:8.2f}   warm {ct['warm_first_call_s']:8.2f}   "
                  f"(steady step {ct['steady_step_s'] * 1e3:.1f} ms)")
        else:
            print(f"  {c:9s} not measured (see errors)")
    ratios = {}
    if "inductor" in compile_times and "kilnc" in compile_times:
        ratios["compile_cold_kiln_over_inductor"] = (compile_times["kilnc"]["cold_first_call_s"] /
                                                     compile_times["inductor"]["cold_first_call_s"])
        ratios["compile_warm_kiln_over_inductor"] = (compile_times["kilnc"]["warm_first_call_s"] /
                                                     compile_times["inductor"]["warm_first_call_s"])
        print(f"  kiln_cold / inductor_cold = {ratios['compile_cold_kiln_over_inductor']:.3f}   "
              f"kiln_warm / inductor_warm = {ratios['compile_warm_kiln_over_inductor']:.3f}")
    if "kilnc" in compile_times and "kiln_graph_compile_s_cold" in compile_times["kilnc"]:
        print(f"  kiln C graph compiler share of the cold compile: "
              f"{compile_times['kilnc']['kiln_graph_compile_s_cold'] * 1e3:.1f} ms")
    print("peak kiln memory, one llama train step (MiB):")
    for c in ("kiln", "kilnc"):
        mm = memory.get(c)
        if mm:
            print(f"  {c:6s} peak {mm['peak_allocated'] / 2**20:8.2f}   above pre-step {mm['peak_above_before'] / 2**20:8.2f}"
                  f"   (pre-step {mm['allocated_before_step'] / 2**20:.2f})")
    if "kiln" in memory and "kilnc" in memory and memory["kilnc"]["peak_above_before"] > 0:
        ratios["memory_peak_above_kiln_eager_over_compiled"] = (memory["kiln"]["peak_above_before"] /
                                                               memory["kilnc"]["peak_above_before"])
        print(f"  eager/compiled (above pre-step) = {ratios['memory_peak_above_kiln_eager_over_compiled']:.2f}x")
    print("kiln programs (llama train step): " + "; ".join(
        f"{p['name']}: arena {p['arena_bytes'] / 2**20:.1f} MiB vs intermediates {p['intermediates_bytes'] / 2**20:.1f} MiB, "
        f"{p['n_nodes_before']}->{p['n_nodes_after']} nodes, {p['n_fused_groups']} fused groups"
        for p in rows[0]["kilnc"].get("programs", [])))
    splits = list(kiln_backend.graph_splits)
    print(f"graph splits (all rows): {len(splits)}")
    for s in splits[:10]:
        print("  " + s[:200])
    errors = [(r["name"], c, r[c]["error"]) for r in rows for c in CONFIGS if "error" in r[c]]
    for n, c, e in errors:
        print(f"  ERROR {n} / {c}: {e[:200]}")
    total = time.perf_counter() - t_start

    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    out = os.path.join(HERE, "results", "compile.json")
    with open(out, "w") as f:
        json.dump({"threads": THREADS, "torch": torch.__version__,
                   "loadavg_start": load0, "loadavg_end": os.getloadavg()[0], "configs": list(CONFIGS), "rows": rows,
                   "compile_time": compile_times, "memory": memory, "ratios": ratios,
                   "graph_splits": splits, "errors": [{"row": n, "config": c, "error": e} for n, c, e in errors],
                   "total_s": total}, f, indent=1, default=str)
    print(f"wrote {out}  (compile bench {total:.0f} s)")
    shutil.rmtree(ind_cache, ignore_errors=True)
    if prev_cache is None:
        os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
    else:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = prev_cache


if __name__ == "__main__":
    main()
