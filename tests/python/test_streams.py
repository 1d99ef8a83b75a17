# SPDX-License-Identifier: Apache-2.0
"""torch.kiln streams and events: one ordered queue per device behind torch's Stream API."""
import pytest
import torch

import torch_kiln  # noqa: F401


def test_stream_objects():
    s = torch.kiln.Stream()
    assert isinstance(s, torch.Stream) and s.device == torch.device("kiln:0")
    assert torch.kiln.current_stream() == torch.kiln.default_stream()
    t = torch.Stream(device="kiln")
    assert t.device.type == "kiln"
    assert t.query() in (True, False)
    t.synchronize()
    assert t.query()


def test_stream_context_and_ordering():
    s = torch.kiln.Stream()
    x = torch.arange(10000.0, device="kiln")
    with torch.kiln.stream(s):
        assert torch.kiln.current_stream() == s
        y = x * 2
    ev = torch.kiln.Event()
    ev.record(s)
    torch.kiln.current_stream().wait_event(ev)
    z = y + 1
    ev.synchronize()
    assert ev.query()
    assert torch.equal(z.cpu(), torch.arange(10000.0) * 2 + 1)
    with torch.kiln.stream(None):
        pass
    with pytest.raises(ValueError, match="kiln stream"):
        with torch.kiln.stream(torch.Stream(device="cpu")):
            pass


def test_event_timing_refused():
    with pytest.raises(NotImplementedError, match="timestamps"):
        torch.kiln.Event(enable_timing=True)
