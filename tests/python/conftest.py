# SPDX-License-Identifier: Apache-2.0
import os
import subprocess
import sys
import warnings

import pytest
import torch

import torch_kiln  # noqa: F401  (registers the device even where autoload is off)

warnings.filterwarnings("ignore", message="kiln: .* has no native kiln kernel")


def run_python(code: str, env_extra=None, timeout=120):
    """Runs `code` in a fresh interpreter (for env-dependent behaviour); returns CompletedProcess."""
    env = dict(os.environ)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=timeout)


@pytest.fixture
def python_subprocess():
    return run_python
