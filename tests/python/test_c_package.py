# SPDX-License-Identifier: Apache-2.0
"""The C package: `cmake --install` of the build tree into a fresh prefix, then a program outside
the tree (examples/c_package) found through find_package(Kiln) and through pkg-config, run on a
kiln device. KILN_BUILD_DIR names the build tree (the Makefile passes ./build)."""
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("KILN_BUILD_DIR", os.path.join(ROOT, "build"))
EXAMPLE = os.path.join(ROOT, "examples", "c_package")


def project_version():
    text = open(os.path.join(ROOT, "CMakeLists.txt")).read()
    return re.search(r"project\(kiln VERSION ([0-9.]+)", text).group(1)


def tool(name):
    """The venv's cmake (pip's cmake package) when there is one, else the one on PATH."""
    local = os.path.join(os.path.dirname(sys.executable), name)
    return local if os.path.exists(local) else shutil.which(name)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    assert r.returncode == 0, f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    assert os.path.exists(os.path.join(BUILD, "CMakeCache.txt")), f"no build tree at {BUILD}"
    p = tmp_path_factory.mktemp("kiln-prefix")
    run([tool("cmake"), "--install", BUILD, "--prefix", str(p)])
    return p


def test_install_lays_out_headers_libraries_and_package_files(prefix):
    for rel in ("include/kiln/kiln.h", "include/kiln/graph.h", "include/kiln/version.h",
                "include/kiln/kernels/elementwise.h", "lib/libkiln.so", "lib/libkiln.a",
                "lib/cmake/Kiln/KilnConfig.cmake", "lib/cmake/Kiln/KilnConfigVersion.cmake",
                "lib/cmake/Kiln/KilnTargets.cmake", "lib/pkgconfig/kiln.pc", "bin/kiln-run",
                "include/kiln/model.h"):
        assert (prefix / rel).is_file(), rel
    # the installed kiln-run finds the installed libkiln with an empty environment
    r = subprocess.run([str(prefix / "bin" / "kiln-run"), "--help"], env={}, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "usage" in r.stdout, r.stderr
    # The Python package is the wheel's business, not the C package's.
    assert not list(prefix.rglob("libkiln_shim.so")) and not list(prefix.rglob("*.py"))
    version = project_version()
    assert f'PACKAGE_VERSION "{version}"' in (prefix / "lib/cmake/Kiln/KilnConfigVersion.cmake").read_text()
    assert f"Version: {version}" in (prefix / "lib/pkgconfig/kiln.pc").read_text()


@pytest.mark.parametrize("static", [False, True], ids=["shared", "static"])
def test_example_builds_against_the_installed_package_and_runs(prefix, tmp_path, static):
    gen = ["-G", "Ninja"] if tool("ninja") else []
    cfg = run([tool("cmake"), "-S", EXAMPLE, "-B", str(tmp_path / "b"), *gen,
               f"-DCMAKE_PREFIX_PATH={prefix}", f"-DKILN_EXAMPLE_STATIC={'ON' if static else 'OFF'}"],
              env=dict(os.environ, PATH=os.path.dirname(tool("cmake")) + os.pathsep + os.environ["PATH"]))
    assert f"Found Kiln {project_version()} in {prefix}" in cfg.stdout
    run([tool("cmake"), "--build", str(tmp_path / "b")])
    exe = str(tmp_path / "b" / "kiln_example")
    needed = run(["readelf", "-d", exe]).stdout if shutil.which("readelf") else None
    if needed is not None:
        assert ("libkiln.so" in needed) == (not static)
    out = run([exe], env=dict(os.environ, KILN_DEVICES="cpu"))
    assert re.search(rf"^kiln {re.escape(project_version())} on cpu .* = \[0 0 0 1 \.\.\.\] ok$",
                     out.stdout.strip()), out.stdout


def test_example_asks_for_a_version_the_package_does_not_have(prefix, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(p C)\nfind_package(Kiln 99.0 REQUIRED)\n")
    r = subprocess.run([tool("cmake"), "-S", str(src), "-B", str(tmp_path / "b"),
                        f"-DCMAKE_PREFIX_PATH={prefix}"], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "99.0" in r.stderr and project_version() in r.stderr


def test_pkg_config_compiles_and_links_the_example(prefix, tmp_path):
    if shutil.which("pkg-config") is None:
        # .ci/run installs pkg-config, so CI always runs this; only a bare dev machine skips.
        assert not os.environ.get("CI"), "pkg-config is missing on CI (.ci/run installs it)"
        pytest.skip("pkg-config is not installed")
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    assert run(["pkg-config", "--modversion", "kiln"], env=env).stdout.strip() == project_version()
    flags = run(["pkg-config", "--cflags", "--libs", "kiln"], env=env).stdout.split()
    # kiln.pc finds the prefix from its own location: this temp prefix, not the configured one.
    assert [os.path.normpath(f[2:]) for f in flags if f.startswith("-I")] == [str(prefix / "include")]
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    exe = str(tmp_path / "kiln_example_pc")
    run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", os.path.join(EXAMPLE, "main.c"), *flags,
         "-o", exe])
    out = run([exe], env=dict(os.environ, LD_LIBRARY_PATH=str(prefix / "lib"), KILN_DEVICES="cpu"))
    assert out.stdout.strip().endswith("ok"), out.stdout


def test_embed_example_runs_an_exported_model(prefix, tmp_path):
    """examples/embed_c (kiln/model.h from plain C) against the installed package, on a model
    torch_kiln.export wrote; its printed outputs are PyTorch's on the same inputs."""
    import torch
    from torch.export import Dim

    import torch_kiln
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3)).eval()
    path = torch_kiln.export(m, (torch.randn(2, 8),), tmp_path / "mlp.kiln",
                             dynamic_shapes=({0: Dim("batch", min=1, max=16)},))
    gen = ["-G", "Ninja"] if tool("ninja") else []
    src = os.path.join(ROOT, "examples", "embed_c")
    run([tool("cmake"), "-S", src, "-B", str(tmp_path / "b"), *gen, f"-DCMAKE_PREFIX_PATH={prefix}"],
        env=dict(os.environ, PATH=os.path.dirname(tool("cmake")) + os.pathsep + os.environ["PATH"]))
    run([tool("cmake"), "--build", str(tmp_path / "b")])
    out = run([str(tmp_path / "b" / "embed_c"), str(path)], env={}).stdout
    assert "input 0 input: f32 [batch 1..16, 8]" in out, out
    x = 0.5 * torch.sin(torch.arange(4 * 8, dtype=torch.float32)).reshape(4, 8)  # the example's inputs
    line = next(ln for ln in out.splitlines() if ln.startswith("output 0"))
    assert "[4, 3]" in line, line
    got = [float(v) for v in line.split("]")[1].split()]
    with torch.no_grad():
        ref = m(x).flatten()[:4].tolist()
    assert len(got) == 4 and all(abs(a - b) < 1e-4 for a, b in zip(got, ref)), (got, ref)
