# SPDX-License-Identifier: Apache-2.0
"""Autograd through kiln: gradients and a 20-step MLP training match CPU."""
import copy

import torch


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 32),
                               torch.nn.ReLU(), torch.nn.Linear(32, 4))


def test_mlp_gradients_match_cpu():
    model = mlp()
    kmodel = copy.deepcopy(model).to("kiln")
    x = torch.randn(8, 16)
    y = torch.randint(0, 4, (8,))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    kloss = torch.nn.functional.cross_entropy(kmodel(x.to("kiln")), y.to("kiln"))
    kloss.backward()
    torch.testing.assert_close(kloss.cpu(), loss, rtol=1e-6, atol=1e-6)
    for p, kp in zip(model.parameters(), kmodel.parameters()):
        assert kp.grad.device.type == "kiln"
        torch.testing.assert_close(kp.grad.cpu(), p.grad, rtol=1e-5, atol=1e-6)


def test_mlp_training_matches_cpu_20_steps():
    model = mlp()
    kmodel = copy.deepcopy(model).to("kiln")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    kopt = torch.optim.AdamW(kmodel.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    losses, klosses = [], []
    for _ in range(20):
        x = torch.randn(32, 16, generator=g)
        y = torch.randint(0, 4, (32,), generator=g)
        for m, o, xs, ys, out in ((model, opt, x, y, losses),
                                  (kmodel, kopt, x.to("kiln"), y.to("kiln"), klosses)):
            o.zero_grad()
            loss = torch.nn.functional.cross_entropy(m(xs), ys)
            loss.backward()
            o.step()
            out.append(loss.item())
    for a, b in zip(losses, klosses):
        assert abs(a - b) <= 1e-5 * max(1.0, abs(a)), (losses, klosses)
    assert klosses[-1] < klosses[0]
