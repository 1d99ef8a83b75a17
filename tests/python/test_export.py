# SPDX-License-Identifier: Apache-2.0
"""torch_kiln.export -> .kiln model file -> torch_kiln.load / build/kiln-run, against PyTorch CPU.

Models: an MLP, the Llama-style LM of models.py (int64 tokens in, logits out), SmallCNN (eval),
and a MiniLM-style encoder (token + position embeddings, post-LN blocks, a padding mask input,
mean pooling). Static and bounded dynamic shapes (sizes no sample used included), and the
errors: unlowerable nodes named, state mutation, unbounded dims, bad inputs, corrupt files.
"""
import math
import os
import shutil
import subprocess

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.export import Dim

import torch_kiln
from models import LlamaConfig, SmallCNN, TinyLlama
from torch_kiln.deploy import ExportError

torch.manual_seed(0)


class MiniLM(nn.Module):
    """A MiniLM-style encoder: learned positions, post-LN blocks, padding mask, mean pooling."""

    def __init__(self, vocab=100, dim=32, heads=4, layers=2, ffn=64, max_pos=64):
        super().__init__()
        self.h = heads
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_pos, dim)
        self.ln0 = nn.LayerNorm(dim)
        self.qkv = nn.ModuleList(nn.Linear(dim, 3 * dim) for _ in range(layers))
        self.o = nn.ModuleList(nn.Linear(dim, dim) for _ in range(layers))
        self.ln1 = nn.ModuleList(nn.LayerNorm(dim) for _ in range(layers))
        self.f1 = nn.ModuleList(nn.Linear(dim, ffn) for _ in range(layers))
        self.f2 = nn.ModuleList(nn.Linear(ffn, dim) for _ in range(layers))
        self.ln2 = nn.ModuleList(nn.LayerNorm(dim) for _ in range(layers))

    def forward(self, ids, mask):
        b, t = ids.shape
        pos = torch.arange(t, device=ids.device)
        x = self.ln0(self.tok(ids) + self.pos(pos))
        bias = (1.0 - mask[:, None, None, :].to(x.dtype)) * -1e4
        for qkv, o, ln1, f1, f2, ln2 in zip(self.qkv, self.o, self.ln1, self.f1, self.f2, self.ln2):
            q, k, v = qkv(x).view(b, t, 3, self.h, -1).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
            x = ln1(x + o(a.transpose(1, 2).reshape(b, t, -1)))
            x = ln2(x + f2(F.gelu(f1(x))))
        m = mask.to(x.dtype)[..., None]
        return (x * m).sum(1) / m.sum(1).clamp(min=1.0)


class GPTBlock(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.h, -1).transpose(1, 2) for z in self.attn(self.ln1(x)).split(d, dim=2))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.h) + mask
        y = att.softmax(-1) @ v
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    """GPT-2 style: learned positions, a fused qkv split, an explicit triu(-inf) causal mask."""

    def __init__(self, vocab=300, d=48, h=4, layers=2, max_pos=64):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(max_pos, d)
        self.blocks = nn.ModuleList(GPTBlock(d, h) for _ in range(layers))
        self.lnf, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        b, t = ids.shape
        x = self.wte(ids) + self.wpe(torch.arange(t, device=ids.device).unsqueeze(0).expand(b, t))
        mask = torch.full((t, t), float("-inf"), device=ids.device).triu(1)
        for blk in self.blocks:
            x = blk(x, mask)
        return self.head(self.lnf(x))


def mlp():
    return nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4)).eval()


def assert_close(got, ref, atol=1e-4, rtol=1e-4):
    torch.testing.assert_close(got.cpu(), ref.detach(), atol=atol, rtol=rtol)


def test_mlp_static(tmp_path):
    m = mlp()
    x = torch.randn(5, 8)
    path = torch_kiln.export(m, (x,), tmp_path / "mlp.kiln")
    km = torch_kiln.load(path)
    out = km(x)
    assert out.device.type == "kiln" and out.shape == (5, 4)
    assert_close(out, m(x), atol=1e-5, rtol=1e-5)
    assert km(x.to("kiln")).device.type == "kiln"  # kiln inputs too
    assert km.inputs == [("input", torch.float32, (5, 8), {})]
    info = km.info
    assert info["format_version"] == 3 and info["weights_in_place"] == 1 and info["n_symbols"] == 0
    weights = sum(p.numel() * p.element_size() for p in m.parameters())
    assert weights <= info["weight_bytes"] <= weights + 64 * 16
    assert info["file_bytes"] < info["weight_bytes"] + 16384


def test_llama_lm_static(tmp_path):
    cfg = LlamaConfig()
    lm = TinyLlama(cfg).eval()
    tok = torch.randint(0, cfg.vocab, (2, 16))
    km = torch_kiln.load(torch_kiln.export(lm, (tok,), tmp_path / "lm.kiln"))
    assert km.inputs[0][1] == torch.int64 and km.outputs[0][2] == (2, 16, cfg.vocab)
    other = torch.randint(0, cfg.vocab, (2, 16))  # not the example input
    with torch.no_grad():
        assert_close(km(other), lm(other), atol=1e-4, rtol=0)


def test_cnn_eval(tmp_path):
    cnn = SmallCNN().eval()
    with torch.no_grad():  # non-trivial running statistics
        for bn in (mm for mm in cnn.modules() if isinstance(mm, nn.BatchNorm2d)):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    x = torch.randn(2, 3, 16, 16)
    km = torch_kiln.load(torch_kiln.export(cnn, (x,), tmp_path / "cnn.kiln"))
    y = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert_close(km(y), cnn(y), atol=1e-4, rtol=1e-4)


def test_minilm_encoder_two_dynamic_dims(tmp_path):
    enc = MiniLM().eval()
    ids = torch.randint(0, 100, (2, 12))
    mask = torch.ones(2, 12, dtype=torch.int64)
    mask[1, 9:] = 0
    batch, seq = Dim("batch", min=1, max=8), Dim("seq", min=2, max=64)
    path = torch_kiln.export(enc, (ids, mask), tmp_path / "enc.kiln",
                             dynamic_shapes=({0: batch, 1: seq}, {0: batch, 1: seq}))
    km = torch_kiln.load(path)
    assert km.inputs[0][3] == {0: ("batch", 1, 8), 1: ("seq", 2, 64)}
    assert km.info["n_symbols"] == 2
    for b, t in [(2, 12), (1, 2), (3, 7), (8, 64), (5, 33)]:
        i = torch.randint(0, 100, (b, t))
        mk = (torch.rand(b, t) > 0.3).to(torch.int64)
        mk[:, 0] = 1
        with torch.no_grad():
            assert_close(km(i, mk), enc(i, mk), atol=1e-4, rtol=1e-4)
    with pytest.raises(RuntimeError, match="seq|batch|dim 1"):
        km(torch.randint(0, 100, (2, 65)), torch.ones(2, 65, dtype=torch.int64))
    with pytest.raises(RuntimeError, match="other inputs"):  # dims tied by one symbol must agree
        km(torch.randint(0, 100, (2, 10)), torch.ones(2, 11, dtype=torch.int64))


def test_llama_dynamic_seq_every_size(tmp_path):
    cfg = LlamaConfig(seq=32)
    lm = TinyLlama(cfg).eval()
    tok = torch.randint(0, cfg.vocab, (1, 16))
    path = torch_kiln.export(lm, (tok,), tmp_path / "lm.kiln", dynamic_shapes=({1: Dim("seq", min=2, max=32)},))
    km = torch_kiln.load(path)
    assert km.inputs[0][2] == (1, None) and km.outputs[0][2] == (1, None, cfg.vocab)
    for t in range(2, 33):
        x = torch.randint(0, cfg.vocab, (1, t))
        with torch.no_grad():
            assert_close(km(x), lm(x), atol=1e-4, rtol=0)
    info = km.info
    assert info["n_specializations"] == 31
    # the plan is sized at the bound: the workspace is the seq=32 program's
    static = torch_kiln.load(torch_kiln.export(lm, (torch.randint(0, cfg.vocab, (1, 32)),), tmp_path / "s.kiln"))
    assert info["workspace_bytes"] == static.info["workspace_bytes"]


def test_gpt_decoder_dynamic_batch_and_seq(tmp_path):
    gpt = GPT().eval()
    ids = torch.randint(0, 300, (2, 10))
    path = torch_kiln.export(gpt, (ids,), tmp_path / "gpt.kiln",
                             dynamic_shapes=({0: Dim("batch", min=1, max=4), 1: Dim("seq", min=2, max=64)},))
    km = torch_kiln.load(path)
    for b, t in [(1, 2), (2, 10), (3, 17), (4, 64)]:
        x = torch.randint(0, 300, (b, t))
        with torch.no_grad():
            assert_close(km(x), gpt(x), atol=1e-4, rtol=1e-4)


def test_exported_program_input(tmp_path):
    m = mlp()
    x = torch.randn(3, 8)
    ep = torch.export.export(m, (x,))
    km = torch_kiln.load(torch_kiln.export(ep, (x,), tmp_path / "ep.kiln", input_names=["features"],
                                           output_names=["scores"]))
    assert km.inputs[0][0] == "features" and km.outputs[0][0] == "scores"
    assert_close(km(x), m(x), atol=1e-5, rtol=1e-5)


def test_multiple_outputs_and_input_passthrough(tmp_path):
    class Two(nn.Module):
        def forward(self, x, y):
            return x * 2, (x @ y).relu(), y

    x, y = torch.randn(3, 4), torch.randn(4, 5)
    km = torch_kiln.load(torch_kiln.export(Two(), (x, y), tmp_path / "two.kiln"))
    a, b, c = km(x, y)
    assert_close(a, x * 2)
    assert_close(b, (x @ y).relu())
    assert_close(c, y)


def test_unsupported_nodes_are_named(tmp_path):
    class Fft(nn.Module):
        def forward(self, x):
            return torch.fft.rfft(x).abs() + x.sum()

    with pytest.raises(ExportError, match="cannot be lowered") as e:
        torch_kiln.export(Fft(), (torch.randn(8),), tmp_path / "fft.kiln")
    assert "fft" in str(e.value)
    assert not os.path.exists(tmp_path / "fft.kiln")


def test_mutation_is_refused(tmp_path):
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("n", torch.zeros(()))

        def forward(self, x):
            self.n.add_(1)
            return x + self.n

    with pytest.raises(ExportError, match="mutates"):
        torch_kiln.export(Counter(), (torch.randn(3),), tmp_path / "c.kiln")


def test_unbounded_dim_is_refused(tmp_path):
    with pytest.raises(ExportError, match="upper bound"):
        torch_kiln.export(mlp(), (torch.randn(3, 8),), tmp_path / "u.kiln", dynamic_shapes=({0: Dim("b")},))


def test_bad_inputs_and_files(tmp_path):
    m = mlp()
    path = torch_kiln.export(m, (torch.randn(3, 8),), tmp_path / "m.kiln")
    km = torch_kiln.load(path)
    with pytest.raises(RuntimeError, match="dim 0 is 4"):
        km(torch.randn(4, 8))
    with pytest.raises(RuntimeError, match="is Half|f16|float16"):
        km(torch.randn(3, 8).half())
    with pytest.raises(TypeError, match="inputs given"):
        km()
    with pytest.raises(TypeError, match="not a tensor"):
        km(3)
    with pytest.raises(RuntimeError, match="cannot open"):
        torch_kiln.load(tmp_path / "missing.kiln")
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x40
    bad = tmp_path / "bad.kiln"
    bad.write_bytes(bytes(data))
    with pytest.raises(RuntimeError, match="checksum"):
        torch_kiln.load(bad)
    (tmp_path / "short.kiln").write_bytes(bytes(data[:100]))
    with pytest.raises(RuntimeError, match="kiln"):
        torch_kiln.load(tmp_path / "short.kiln")
    with pytest.raises(ValueError, match="kiln device"):
        torch_kiln.load(path, device="cpu")


def test_half_and_bf16_models(tmp_path):
    for dt, tol in ((torch.float16, 2e-2), (torch.bfloat16, 5e-2)):
        m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to(dt).eval()
        x = torch.randn(3, 8, dtype=dt)
        km = torch_kiln.load(torch_kiln.export(m, (x,), tmp_path / f"{dt}.kiln"))
        out = km(x)
        assert out.dtype == dt
        assert_close(out, m(x), atol=tol, rtol=tol)


# ---- kiln-run ----------------------------------------------------------------------------------

def _kiln_run():
    build = os.environ.get("KILN_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
    exe = os.path.join(build, "kiln-run")
    if not os.path.exists(exe):
        pytest.fail(f"{exe} is missing: `make build` builds it")
    return exe


def test_kiln_run_lm_empty_environment(tmp_path):
    cfg = LlamaConfig()
    lm = TinyLlama(cfg).eval()
    tok = torch.randint(0, cfg.vocab, (2, 16))
    path = torch_kiln.export(lm, (tok,), tmp_path / "lm.kiln", dynamic_shapes=({1: Dim("seq", min=2, max=32)},))
    x = torch.randint(0, cfg.vocab, (2, 11))
    np.save(tmp_path / "tokens.npy", x.numpy())
    exe = _kiln_run()
    r = subprocess.run([exe, str(path), "--input", str(tmp_path / "tokens.npy"), "--output",
                        str(tmp_path / "logits.npy")], env={}, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    logits = torch.from_numpy(np.load(tmp_path / "logits.npy"))
    with torch.no_grad():
        assert_close(logits, lm(x), atol=1e-4, rtol=0)
    info = subprocess.run([exe, str(path), "--info"], env={}, capture_output=True, text=True, timeout=60)
    assert info.returncode == 0, info.stderr
    assert "idx" in info.stdout and "i64[2, seq[2..32]]" in info.stdout
    bench = subprocess.run([exe, str(path), "--input", str(tmp_path / "tokens.npy"), "--bench", "5"], env={},
                           capture_output=True, text=True, timeout=120)
    assert bench.returncode == 0, bench.stderr
    assert "p50" in bench.stdout and "peak" in bench.stdout.lower()


def test_kiln_run_errors(tmp_path):
    exe = _kiln_run()
    m = mlp()
    path = torch_kiln.export(m, (torch.randn(3, 8),), tmp_path / "m.kiln")
    np.save(tmp_path / "wrong.npy", np.zeros((4, 8), dtype=np.float32))
    r = subprocess.run([exe, str(path), "--input", str(tmp_path / "wrong.npy")], env={}, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "[4, 8]" in r.stderr and "[3, 8]" in r.stderr  # does not fit the signature
    np.save(tmp_path / "ints.npy", np.zeros((3, 8), dtype=np.int64))
    r = subprocess.run([exe, str(path), "--input", str(tmp_path / "ints.npy")], env={}, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "i64" in r.stderr
    (tmp_path / "junk.kiln").write_bytes(b"KILNGRF\0" + os.urandom(200))
    r = subprocess.run([exe, str(tmp_path / "junk.kiln"), "--info"], env={}, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and r.stderr
    r = subprocess.run([exe], env={}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    np.save(tmp_path / "x.npy", np.random.randn(3, 8).astype(np.float32))
    r = subprocess.run([exe, str(path), "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy")],
                       env={}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    y = np.load(tmp_path / "y.npy")
    with torch.no_grad():
        assert_close(torch.from_numpy(y), m(torch.from_numpy(np.load(tmp_path / "x.npy"))), atol=1e-5, rtol=1e-5)
