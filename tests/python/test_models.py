# SPDX-License-Identifier: Apache-2.0
"""Model-level checks: a Llama-style model (TorchTitan llama3 debug-model structure) and a small CNN
train on kiln with losses matching PyTorch CPU."""
import copy

import torch

import torch_kiln
from models import LlamaConfig, SmallCNN, TinyLlama


def train(model, device, batches, steps):
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for i in range(steps):
        x, y = (t.to(device) for t in batches[i % len(batches)])
        opt.zero_grad()
        loss = model.loss(x, y) if hasattr(model, "loss") else torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_llama_style_30_steps_matches_cpu():
    cfg = LlamaConfig(vocab=128, dim=64, layers=2, heads=4, ffn=128, seq=32)
    torch.manual_seed(0)
    model = TinyLlama(cfg)
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randint(0, cfg.vocab, (4, cfg.seq), generator=g),
                torch.randint(0, cfg.vocab, (4, cfg.seq), generator=g)) for _ in range(4)]
    cpu = train(copy.deepcopy(model), "cpu", batches, 30)
    torch_kiln.fallback_reset()
    kiln = train(copy.deepcopy(model).to("kiln"), "kiln", batches, 30)
    report = torch_kiln.fallback_report()
    print("llama-style fallback report:", report)
    for a, b in zip(cpu, kiln):
        assert abs(a - b) <= 1e-4 * abs(a), (cpu, kiln)
    assert kiln[-1] < kiln[0]
    # every op of the forward, backward and AdamW step runs natively on kiln
    assert report == {}, report


def test_small_cnn_step_matches_cpu():
    torch.manual_seed(0)
    model = SmallCNN()
    g = torch.Generator().manual_seed(2)
    batches = [(torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, 10, (8,), generator=g)) for _ in range(2)]
    cpu = train(copy.deepcopy(model), "cpu", batches, 5)
    torch_kiln.fallback_reset()
    kiln = train(copy.deepcopy(model).to("kiln"), "kiln", batches, 5)
    assert torch_kiln.fallback_report() == {}, torch_kiln.fallback_report()
    for a, b in zip(cpu, kiln):
        assert abs(a - b) <= 1e-4 * abs(a), (cpu, kiln)
