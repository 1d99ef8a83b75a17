# SPDX-License-Identifier: Apache-2.0
"""Kiln demo: train on the kiln device and on PyTorch CPU, compare losses, time both.

1. A small MLP, 20 AdamW steps, kiln vs CPU (losses must match).
2. A small transformer language model (Llama-style: RMSNorm, RoPE, SwiGLU, causal attention),
   trained a few steps on CPU, on kiln eager and on kiln compiled (torch.compile backend="kiln"),
   then used for greedy generation.
3. The trained model exported (torch_kiln.export, dynamic sequence length) to a .kiln file and
   run without Python by build/kiln-run, its logits compared with PyTorch CPU.
Prints per-step times and the fallback report (ops that ran on the CPU instead of kiln).
"""
import copy
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
import torch_kiln  # noqa: E402
from models import TinyLlama, LlamaConfig  # noqa: E402

warnings.filterwarnings("ignore", message="kiln: .* has no native kiln kernel")


def train(model, device, steps, make_batch, lr=1e-2, compiled=False):
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    loss_fn = model.loss if hasattr(model, "loss") else (lambda x, y: F.cross_entropy(model(x), y))
    if compiled:
        loss_fn = torch.compile(loss_fn, backend="kiln")
    losses, times = [], []
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x, y = make_batch(g)
        x, y = x.to(device), y.to(device)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(x, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())  # .item() synchronizes the device
        times.append(time.perf_counter() - t0)
    return losses, times


def median(xs):
    s = sorted(xs)
    return s[len(s) // 2]


def main():
    torch.set_num_threads(os.cpu_count() or 1)
    print(f"kiln: {torch.kiln.device_count()} device(s); device 0: {torch.kiln.get_device_properties(0)['description']}")

    # 1. MLP
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.Linear(64, 4))
    batch = lambda g: (torch.randn(32, 16, generator=g), torch.randint(0, 4, (32,), generator=g))
    torch_kiln.fallback_reset()
    cpu_l, _ = train(copy.deepcopy(mlp), "cpu", 20, batch)
    kiln_l, _ = train(copy.deepcopy(mlp).to("kiln"), "kiln", 20, batch)
    print("\n[1] MLP, 20 AdamW steps")
    print(f"  step  {'cpu loss':>10}  {'kiln loss':>10}")
    for i in (0, 4, 9, 14, 19):
        print(f"  {i + 1:4d}  {cpu_l[i]:10.6f}  {kiln_l[i]:10.6f}")
    worst = max(abs(a - b) for a, b in zip(cpu_l, kiln_l))
    print(f"  max |cpu - kiln| = {worst:.2e}")
    report = torch_kiln.fallback_report()
    print(f"  fallback report ({len(report)} ops): {report}")

    # 2. transformer
    cfg = LlamaConfig(vocab=256, dim=128, layers=2, heads=4, ffn=256, seq=64)
    torch.manual_seed(0)
    model = TinyLlama(cfg)
    text = torch.randint(0, cfg.vocab, (4096,), generator=torch.Generator().manual_seed(3))

    def lm_batch(g):
        idx = torch.randint(0, text.numel() - cfg.seq - 1, (8,), generator=g)
        x = torch.stack([text[i:i + cfg.seq] for i in idx])
        y = torch.stack([text[i + 1:i + cfg.seq + 1] for i in idx])
        return x, y

    torch_kiln.fallback_reset()
    cpu_l, cpu_t = train(copy.deepcopy(model), "cpu", 8, lm_batch, lr=3e-3)
    kmodel = copy.deepcopy(model).to("kiln")
    kiln_l, kiln_t = train(kmodel, "kiln", 8, lm_batch, lr=3e-3)
    print(f"\n[2] TinyLlama ({sum(p.numel() for p in model.parameters()) / 1e6:.2f}M params), 8 AdamW steps, batch 8 x seq {cfg.seq}")
    print(f"  step  {'cpu loss':>10}  {'kiln loss':>10}")
    for i in range(0, 8, 2):
        print(f"  {i + 1:4d}  {cpu_l[i]:10.6f}  {kiln_l[i]:10.6f}")
    comp_l, comp_t = train(copy.deepcopy(model).to("kiln"), "kiln", 8, lm_batch, lr=3e-3, compiled=True)
    print(f"  kiln compiled losses: {', '.join(f'{v:.6f}' for v in comp_l[::2])} "
          f"(max |eager - compiled| = {max(abs(a - b) for a, b in zip(kiln_l, comp_l)):.2e})")
    print(f"  first compiled step (includes compile): {comp_t[0] * 1e3:.0f} ms")
    print(f"  median step time: cpu eager {median(cpu_t) * 1e3:.1f} ms, kiln eager {median(kiln_t) * 1e3:.1f} ms, "
          f"kiln compiled {median(comp_t[1:]) * 1e3:.1f} ms "
          f"(speed vs cpu eager: kiln eager {median(cpu_t) / median(kiln_t):.2f}x, "
          f"kiln compiled {median(cpu_t) / median(comp_t[1:]):.2f}x)")
    import torch_kiln.compile as kc
    for prog in kc.compiled_programs[-2:]:
        st = prog.stats
        print(f"  compiled {prog.name}: {st['n_nodes_before']} ops -> {st['n_nodes_after']} steps, "
              f"{st['n_fused_groups']} fused groups, {st['n_epilogues']} GEMM epilogues, arena "
              f"{st['arena_bytes'] / 1024:.0f} KiB for {st['intermediates_bytes'] / 1024:.0f} KiB of intermediates, "
              f"compiled in {st['compile_s'] * 1e3:.1f} ms")
    if kc.graph_splits:
        print("  graph splits:", kc.graph_splits)
    with torch.no_grad():
        prompt = text[:8].unsqueeze(0).to("kiln")
        out = kmodel.generate(prompt, 16)
    print(f"  greedy generation on kiln: {out[0].tolist()}")
    report = torch_kiln.fallback_report()
    print(f"  fallback report ({len(report)} ops, {sum(report.values())} calls): "
          + ", ".join(f"{k}={v}" for k, v in sorted(report.items(), key=lambda kv: -kv[1])[:12])
          + (" ..." if len(report) > 12 else ""))
    deploy(kmodel, text, cfg)


def deploy(kmodel, text, cfg):
    """[3] export -> .kiln -> kiln-run (no Python, no libtorch), logits against PyTorch CPU."""
    import numpy as np
    from torch.export import Dim
    model = copy.deepcopy(kmodel).to("cpu").eval()
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "kiln-run")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "lm.kiln")
        t0 = time.perf_counter()
        torch_kiln.export(model, (text[:cfg.seq].unsqueeze(0),), path,
                          dynamic_shapes=({1: Dim("seq", min=2, max=cfg.seq)},))
        export_s = time.perf_counter() - t0
        tokens = text[5:5 + 17].unsqueeze(0)  # a length no export sample used
        np.save(os.path.join(tmp, "tokens.npy"), tokens.numpy())
        r = subprocess.run([exe, path, "--input", os.path.join(tmp, "tokens.npy"), "--output",
                            os.path.join(tmp, "logits.npy"), "--bench", "50"], env={}, capture_output=True,
                           text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"kiln-run failed: {r.stderr}")
        logits = torch.from_numpy(np.load(os.path.join(tmp, "logits.npy")))
        with torch.no_grad():
            diff = (logits - model(tokens)).abs().max().item()
        p50 = re.search(r"p50 ([\d.]+)", r.stdout).group(1)
        load = re.search(r"loaded in ([\d.]+) ms", r.stdout).group(1)
        print(f"\n[3] exported in {export_s:.1f} s to {os.path.getsize(path) / 1024:.0f} KiB (dynamic seq 2..{cfg.seq}); "
              f"kiln-run (empty environment): loaded in {load} ms, seq 17 p50 {p50} ms, "
              f"max |logits - PyTorch CPU| = {diff:.1e}")


if __name__ == "__main__":
    main()
