# SPDX-License-Identifier: Apache-2.0
"""One version everywhere (CMakeLists.txt's project(), libkiln, torch_kiln, the installed
metadata), the torch-version guard, and the `python -m torch_kiln` report."""
import ctypes
import os
import re
import subprocess
import sys
from importlib import metadata

import pytest
import torch

import torch_kiln
from torch_kiln import _build_info, diagnostics

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_one_version_everywhere():
    text = open(os.path.join(ROOT, "CMakeLists.txt")).read()
    version = re.search(r"project\(kiln VERSION ([0-9]+\.[0-9]+\.[0-9]+)", text).group(1)
    lib = ctypes.CDLL(os.path.join(os.path.dirname(torch_kiln.__file__), "libkiln.so"))
    lib.kiln_version.restype = ctypes.c_char_p
    assert lib.kiln_version().decode() == version
    assert torch_kiln.__version__ == version == _build_info.VERSION
    assert metadata.version("torch_kiln") == version


def test_build_records_the_torch_it_was_compiled_against():
    assert _build_info.TORCH_VERSION == torch.__version__
    assert _build_info.C_COMPILER.strip() and _build_info.CXX_COMPILER.strip()


@pytest.mark.parametrize("running", ["2.12.1", "2.14.0+cpu", "3.0.0"])
def test_another_torch_is_refused_with_a_clear_message(running):
    with pytest.raises(ImportError) as e:
        torch_kiln._check_torch("2.13.0+cpu", running)
    msg = str(e.value)
    assert "built for torch 2.13.0+cpu" in msg and f"torch {running} is installed" in msg
    assert "torch==2.13.0" in msg and "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in msg


def test_same_release_with_another_local_tag_loads():
    torch_kiln._check_torch("2.13.0+cpu", "2.13.0")
    torch_kiln._check_torch("2.13.0", "2.13.0+cpu")


def test_info_reports_what_the_process_uses():
    f = diagnostics.info()
    assert f["version"] == f["libkiln_version"] == torch_kiln.__version__
    assert f["torch_version"] == torch.__version__
    assert f["isa"] in ("avx512", "avx2", "generic")
    assert f["threads"] >= 1 and f["threads"] == f["devices"][0]["compute_units"]
    assert len(f["devices"]) == torch.kiln.device_count()
    assert f["autoload_entry_point"] == "torch_kiln:_autoload"
    assert f["dynamo_entry_point"] == "torch_kiln.compile:kiln_backend" and f["dynamo_registered"]


def test_python_m_torch_kiln_prints_the_report(tmp_path):
    env = dict(os.environ, KILN_DEVICES="cpu,ref", KILN_NUM_THREADS="3", KILN_DISABLE_AVX512="1",
               KILN_NUM_THREAD="4", TORCH_DEVICE_BACKEND_AUTOLOAD="1")
    env.pop("KILN_MEMORY_LIMIT", None)
    r = subprocess.run([sys.executable, "-m", "torch_kiln"], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=180)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith(f"torch_kiln {torch_kiln.__version__} (libkiln {torch_kiln.__version__}")
    assert f"torch:       {torch.__version__} (built for {_build_info.TORCH_VERSION})" in out
    assert f"compilers:   C {_build_info.C_COMPILER}, C++ {_build_info.CXX_COMPILER}" in out
    assert re.search(r"ISA:         (avx2|generic) kernels", out)  # AVX-512 turned off above
    assert "threads:     3 (kiln thread pool)" in out
    assert "devices:     2" in out and "kiln:0  cpu: host CPU, 3 threads" in out and "kiln:1  ref:" in out
    assert "entry point torch_kiln:_autoload; enabled" in out
    assert 'backend "kiln" registered: yes' in out
    assert "KILN_DEVICES=cpu,ref  (devices to create" in out
    assert "KILN_NUM_THREAD=4  (not a variable kiln reads: a typo?)" in out
    assert "unset: KILN_MEMORY_LIMIT" in out


def test_report_says_when_autoload_is_off(tmp_path):
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    r = subprocess.run([sys.executable, "-m", "torch_kiln"], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=180)
    assert r.returncode == 0, r.stderr
    assert "entry point torch_kiln:_autoload; disabled (TORCH_DEVICE_BACKEND_AUTOLOAD)" in r.stdout
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0  (0: `import torch` does not load kiln)" in r.stdout
