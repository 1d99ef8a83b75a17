# SPDX-License-Identifier: Apache-2.0
"""The wheel end to end (`make test-wheel`; a full CMake build, minutes): `pip wheel
--no-build-isolation` of the checkout, installed into a fresh venv that gets torch from the
running interpreter's site-packages, then used from another directory: the kiln device through
autoload, `python -m torch_kiln`, and the refusal of a torch the wheel was not built for.

KILN_WHEEL_BUILD_DIR (default ./build-wheel) keeps scikit-build-core's CMake tree between runs.
"""
import glob
import os
import subprocess
import sys
import time
import zipfile

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_DIR = os.environ.get("KILN_WHEEL_BUILD_DIR", os.path.join(ROOT, "build-wheel"))


def run(cmd, timeout=1800, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    assert r.returncode == 0, f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    dist = tmp_path_factory.mktemp("dist")
    t0 = time.time()
    run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
         "-w", str(dist), f"-Cbuild-dir={BUILD_DIR}", ROOT])
    (path,) = glob.glob(str(dist / "torch_kiln-*.whl"))
    print(f"\nwheel: {os.path.basename(path)}, {os.path.getsize(path) / 2**20:.1f} MiB, "
          f"built in {time.time() - t0:.0f} s")
    return path


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    """A new venv with the wheel installed; torch comes from this interpreter's site-packages
    through a .pth line (a plain path: the dev venv's own .pth hooks are not run)."""
    d = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", "--without-pip", str(d)])
    py = str(d / "bin" / "python")
    purelib = run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    torch_site = os.path.dirname(os.path.dirname(torch.__file__))
    with open(os.path.join(purelib, "_kiln_test_torch.pth"), "w") as f:
        f.write(torch_site + "\n")
    t0 = time.time()
    run([sys.executable, "-m", "pip", "--python", py, "install", "--no-deps", "-q", wheel])
    print(f"install: {time.time() - t0:.1f} s")
    return d, py, purelib


def test_wheel_holds_the_package_and_its_license(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for rel in ("torch_kiln/__init__.py", "torch_kiln/__main__.py", "torch_kiln/_build_info.py",
                "torch_kiln/libkiln.so", "torch_kiln/libkiln_shim.so",
                "torch_kiln/include/kiln/graph.h", "torch_kiln/include/kiln/kernels/elementwise.h",
                "torch_kiln/compile/backend.py"):
        assert rel in names, rel
    assert not [n for n in names if "/csrc/" in n or n.endswith(".in")]
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    assert "License-Expression: Apache-2.0" in text
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert any(n.endswith(".dist-info/licenses/NOTICE") for n in names)
    eps = zipfile.ZipFile(wheel).read(meta.replace("METADATA", "entry_points.txt")).decode()
    assert "[torch.backends]\nkiln = torch_kiln:_autoload" in eps


def test_import_torch_autoloads_kiln_from_another_directory(venv, tmp_path):
    d, py, purelib = venv
    # No `import torch_kiln`: torch's autoload must bring the device in.
    code = ("import sys, torch; y = torch.randn(2, device='kiln') * 2; print(y.device); "
            "print(sys.modules['torch_kiln'].__file__); print(y.cpu().shape)")
    r = run([py, "-c", code], cwd=tmp_path,
            env=dict(os.environ, KILN_DEVICES="cpu", TORCH_DEVICE_BACKEND_AUTOLOAD="1"))
    device, path, shape = r.stdout.strip().splitlines()
    assert device == "kiln:0" and shape == "torch.Size([2])"
    assert path.startswith(purelib)  # the installed copy, not the checkout


def test_compiled_mode_reads_the_headers_shipped_in_the_wheel(venv, tmp_path):
    d, py, purelib = venv
    code = ("import torch, torch_kiln.compile._capi as c; f = torch.compile(lambda x: (x * 2).relu(), "
            "backend='kiln'); x = torch.randn(16, device='kiln'); "
            "assert torch.equal(f(x).cpu(), (x.cpu() * 2).relu()); print(c._LIB_PATH)")
    r = run([py, "-c", code], cwd=tmp_path)
    assert r.stdout.strip() == os.path.join(purelib, "torch_kiln", "libkiln.so")


def test_python_m_torch_kiln_reports_the_installed_build(venv, tmp_path):
    d, py, purelib = venv
    r = run([py, "-m", "torch_kiln"], cwd=tmp_path,
            env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="1"))
    out = r.stdout
    print(out)
    assert f"package:     {purelib}" in out
    assert f"torch:       {torch.__version__} (built for {torch.__version__})" in out
    assert "entry point torch_kiln:_autoload; enabled" in out
    assert 'backend "kiln" registered: yes' in out and "kiln:0  cpu:" in out


def test_another_torch_version_is_refused(venv, tmp_path):
    d, py, purelib = venv
    info = os.path.join(purelib, "torch_kiln", "_build_info.py")
    text = open(info).read()
    try:
        with open(info, "w") as f:
            f.write(text.replace(f'TORCH_VERSION = "{torch.__version__}"', 'TORCH_VERSION = "2.12.0"'))
        r = subprocess.run([py, "-c", "import torch_kiln"], capture_output=True, text=True,
                           cwd=tmp_path, timeout=300)
        assert r.returncode != 0
        assert "ImportError: torch_kiln" in r.stderr and "was built for torch 2.12.0" in r.stderr
        # Through autoload, torch names the backend and how to import torch without it.
        r = subprocess.run([py, "-c", "import torch"], capture_output=True, text=True, cwd=tmp_path,
                           env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="1"), timeout=300)
        assert r.returncode != 0 and "was built for torch 2.12.0" in r.stderr
        ok = subprocess.run([py, "-c", "import torch"], capture_output=True, text=True, cwd=tmp_path,
                            env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0"), timeout=300)
        assert ok.returncode == 0, ok.stderr
    finally:
        with open(info, "w") as f:
            f.write(text)
