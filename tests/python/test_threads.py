# SPDX-License-Identifier: Apache-2.0
"""Thread safety: compiled kiln programs and eager kiln ops called from several threads at once.

What is checked
---------------
1. One ``torch.compile(backend="kiln")`` TinyLlama (embedding, RMSNorm, RoPE, attention, SwiGLU
   MLP: GEMMs, fused groups, tile chains, softmax) called from 4 threads x 200 calls, each thread
   with its own inputs: every output matches the eager CPU result of the same inputs.
2. The same through KilnProgram's Python call path (the one taken when results span devices).
3. A compiled transformer block's forward and backward (torch.autograd.grad with respect to the
   input) from 4 threads: the forward and backward programs both run concurrently.
4. Eager kiln ops (matmul, softmax, layer_norm, gelu, sum) from 4 threads at once match CPU.
A run that raises in a thread fails the test with that error.
"""
import copy
import threading

import torch
import torch._dynamo
import torch.nn as nn
import torch.nn.functional as F

import torch_kiln  # noqa: F401
from torch_kiln.compile import compiled_programs

from models import LlamaConfig, TinyLlama

KILN = torch.device("kiln")
N_THREADS = 4
CFG = LlamaConfig(vocab=128, dim=64, layers=2, heads=4, ffn=128, seq=32)


def _run_threads(fn, n=N_THREADS):
    """Runs fn(thread_index) on n threads started together; re-raises the first failure."""
    errors, start = [], threading.Barrier(n)

    def body(t):
        try:
            start.wait()
            fn(t)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=body, args=(t,)) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]


def _check_calls(call, inputs, wants, calls, rtol=1e-5, atol=1e-5):
    """Each thread t calls call(x) `calls` times cycling through inputs[t]; every result is
    compared to wants[t][k]. Returns the number of wrong results (with the worst difference)."""
    bad, worst = [0], [0.0]
    lock = threading.Lock()

    def worker(t):
        for i in range(calls):
            k = i % len(inputs[t])
            got = call(inputs[t][k]).cpu()
            want = wants[t][k]
            if not torch.allclose(got, want, rtol=rtol, atol=atol):
                with lock:
                    bad[0] += 1
                    worst[0] = max(worst[0], (got - want).abs().max().item())

    _run_threads(worker)
    return bad[0], worst[0]


def _llama():
    torch.manual_seed(0)
    model = TinyLlama(CFG).eval()
    g = torch.Generator().manual_seed(1)
    inputs = [[torch.randint(0, CFG.vocab, (2, CFG.seq), generator=g) for _ in range(3)] for _ in range(N_THREADS)]
    with torch.no_grad():
        wants = [[model(x) for x in xs] for xs in inputs]
    return model, [[x.to(KILN) for x in xs] for xs in inputs], wants


def test_compiled_model_from_threads_matches_eager():
    torch._dynamo.reset()
    model, inputs, wants = _llama()
    m = copy.deepcopy(model).to(KILN)
    compiled = torch.compile(m, backend="kiln", fullgraph=True)
    n_prog = len(compiled_programs)
    with torch.no_grad():
        torch.testing.assert_close(compiled(inputs[0][0]).cpu(), wants[0][0], rtol=1e-5, atol=1e-5)
    assert len(compiled_programs) == n_prog + 1  # one kiln program, compiled on this thread
    prog = compiled_programs[-1]
    assert prog._run_device is not None and prog.workspace_bytes > 0
    assert prog.stats["n_fused_groups"] > 0 and prog.stats["n_chained_steps"] > 0, prog.stats

    def call(x):
        with torch.no_grad():
            return compiled(x)

    bad, worst = _check_calls(call, inputs, wants, 200)
    assert bad == 0, f"{bad} of {N_THREADS * 200} threaded calls wrong (max |diff| {worst})"
    assert len(compiled_programs) == n_prog + 1  # no recompiles from the threads

    # 2. The Python call path (per-call buffer lists and workspace), on the same program.
    prog._run_device = None
    try:
        bad, worst = _check_calls(call, inputs, wants, 50)
    finally:
        prog._run_device = KILN
    assert bad == 0, f"{bad} of {N_THREADS * 50} threaded calls wrong on the Python path (max |diff| {worst})"


class _Block(nn.Module):
    """Pre-norm transformer block: LayerNorm, attention, GELU MLP."""

    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def test_compiled_forward_backward_from_threads():
    torch._dynamo.reset()
    torch.manual_seed(2)
    block = _Block().requires_grad_(False)
    g = torch.Generator().manual_seed(3)
    xs = [[torch.randn(2, 16, 64, generator=g) for _ in range(2)] for _ in range(N_THREADS)]

    def fwd_bwd(m, x):
        x = x.detach().requires_grad_(True)
        y = m(x)
        (gx,) = torch.autograd.grad((y * y).sum(), x)
        return torch.cat([y.detach().flatten(), gx.flatten()])

    wants = [[fwd_bwd(block, x) for x in row] for row in xs]
    compiled = torch.compile(copy.deepcopy(block).to(KILN), backend="kiln")
    inputs = [[x.to(KILN) for x in row] for row in xs]
    n_prog = len(compiled_programs)
    torch.testing.assert_close(fwd_bwd(compiled, inputs[0][0]).cpu(), wants[0][0], rtol=1e-4, atol=1e-4)
    assert len(compiled_programs) == n_prog + 2  # forward and backward
    bad, worst = _check_calls(lambda x: fwd_bwd(compiled, x), inputs, wants, 40, rtol=1e-4, atol=1e-4)
    assert bad == 0, f"{bad} of {N_THREADS * 40} threaded forward+backward calls wrong (max |diff| {worst})"


def test_eager_ops_from_threads_match_cpu():
    g = torch.Generator().manual_seed(4)
    cases = [[(torch.randn(96, 128, generator=g), torch.randn(128, 80, generator=g), torch.randn(128, generator=g))
              for _ in range(2)] for _ in range(N_THREADS)]

    def ops(a, b, w):
        h = F.gelu(a @ b)
        s = torch.softmax(h, dim=-1)
        n = F.layer_norm(a, (128,), weight=w)
        return torch.cat([s.flatten(), n.flatten(), h.sum(dim=0)])

    wants = [[ops(*c) for c in row] for row in cases]
    inputs = [[tuple(x.to(KILN) for x in c) for c in row] for row in cases]
    bad, worst = _check_calls(lambda c: ops(*c), inputs, wants, 60, rtol=1e-4, atol=1e-5)
    assert bad == 0, f"{bad} of {N_THREADS * 60} threaded eager calls wrong (max |diff| {worst})"
