# SPDX-License-Identifier: Apache-2.0
"""tools/spdx.py: the SPDX line in each comment syntax, after a shebang, idempotent; --check
fails on a file without it; and the repository itself carries the line everywhere."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tools", "spdx.py")
TAG = "SPDX-License-Identifier: Apache-2.0"


def spdx(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=60)


@pytest.fixture
def tree(tmp_path):
    files = {
        "a.c": "/* a.c - x */\nint a;\n",
        "b.h": "#ifndef B\n#define B\n#endif\n",
        "c.cpp": "// c\n",
        "d.py": '"""Doc."""\nx = 1\n',
        "e.py": "#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\nprint(1)\n",
        "run": "#!/bin/sh\necho hi",
        "CMakeLists.txt": "project(x C)\n",
        "cfg.cmake.in": "@PACKAGE_INIT@\n",
        "empty.py": "",
        "mention.py": f'"""Says {TAG} in prose, not in a comment."""\n',
        "README.md": "# title\n",
        "data.bin": "\0\1\2",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_adds_the_line_in_each_syntax(tree):
    r = spdx(str(tree))
    assert r.returncode == 0, r.stderr
    read = lambda n: (tree / n).read_text()  # noqa: E731
    assert read("a.c") == f"/* {TAG} */\n/* a.c - x */\nint a;\n"
    assert read("b.h").startswith(f"/* {TAG} */\n#ifndef B")
    assert read("c.cpp") == f"/* {TAG} */\n// c\n"
    assert read("d.py") == f'# {TAG}\n"""Doc."""\nx = 1\n'
    assert read("e.py") == f"#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n# {TAG}\nprint(1)\n"
    assert read("run") == f"#!/bin/sh\n# {TAG}\necho hi"
    assert read("CMakeLists.txt") == f"# {TAG}\nproject(x C)\n"
    assert read("cfg.cmake.in") == f"# {TAG}\n@PACKAGE_INIT@\n"
    assert read("empty.py") == f"# {TAG}\n"
    assert read("mention.py").startswith(f"# {TAG}\n\"\"\"Says")
    assert read("README.md") == "# title\n"  # not source: untouched
    assert (tree / "data.bin").read_bytes() == b"\0\1\2"
    compile(read("d.py"), "d.py", "exec")
    before = {p.name: p.read_bytes() for p in tree.iterdir()}
    assert spdx(str(tree)).returncode == 0
    assert {p.name: p.read_bytes() for p in tree.iterdir()} == before  # idempotent


def test_check_mode_names_files_without_the_line(tree):
    r = spdx("--check", str(tree))
    assert r.returncode == 1
    for name in ("a.c", "e.py", "run", "CMakeLists.txt"):
        assert name in r.stdout
    assert "README.md" not in r.stdout
    assert (tree / "a.c").read_text() == "/* a.c - x */\nint a;\n"  # --check writes nothing
    spdx(str(tree))
    r = spdx("--check", str(tree))
    assert r.returncode == 0 and r.stdout == ""


def test_every_source_file_of_the_repository_has_the_line():
    r = spdx("--check")
    assert r.returncode == 0, "add the line with `python3 tools/spdx.py`:\n" + r.stdout
