# SPDX-License-Identifier: Apache-2.0
"""torch.compile(model, backend="kiln"): whole-program compilation through libkiln's C compiler.

The backend is found by name through the `torch_dynamo_backends` entry point of the installed
package; without it (a plain source checkout on sys.path) importing this module registers it.
"""
from importlib.metadata import entry_points as _entry_points

from .backend import compiled_programs, graph_splits, kiln_backend, profile, set_profiling  # noqa: F401

if not any(ep.name == "kiln" for ep in _entry_points(group="torch_dynamo_backends")):
    from torch._dynamo import register_backend as _register

    _register(name="kiln")(kiln_backend)
