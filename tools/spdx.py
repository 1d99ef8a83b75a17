#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Adds (or, with --check, requires) an `SPDX-License-Identifier: Apache-2.0` line at the top of
every source file of the repository.

    python3 tools/spdx.py             # add the line where it is missing (all tracked files)
    python3 tools/spdx.py --check     # list the files without it; exit status 1 if any
    python3 tools/spdx.py FILE...     # only these files (or the files under these folders)

Which files: what `git ls-files` lists, with the untracked files git does not ignore (outside
a git checkout: every file not under a build / venv folder), kept when the name says it is
source: C and C++ (.c .h .cpp ...: a `/* ... */` line), Python, CMake, shell, TOML,
pkg-config (`# ...`), Makefile, CMakeLists.txt, any file starting with `#!`, and templates
`X.in` as X. The line goes first, after a `#!` line
and a Python coding line where they are. A file that has the identifier in a comment among its
first lines already is left alone, so running twice changes nothing.
"""
import argparse
import os
import re
import subprocess
import sys

LICENSE = "Apache-2.0"
TAG = "SPDX-License-Identifier:"
HEAD_LINES = 5  # the identifier must appear within the first HEAD_LINES lines

C_STYLE = {".c", ".h", ".cpp", ".cc", ".cxx", ".hpp", ".hh", ".cu", ".m", ".mm"}
HASH_STYLE = {".py", ".pyi", ".cmake", ".sh", ".bash", ".toml", ".pc", ".yml", ".yaml", ".mk"}
HASH_NAMES = {"CMakeLists.txt", "Makefile", "GNUmakefile"}
SKIP_DIRS = {".git", ".venv", "build", "__pycache__", "kiln_logs", ".pytest_cache"}
TAG_LINE = re.compile(r"^\s*(#|/\*|//)\s*" + re.escape(TAG))
CODING = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*[-\w.]+")


def comment_for(path: str, text: str):
    """The SPDX line for `path` in its comment syntax, or None when it is not a source file."""
    name = os.path.basename(path)
    if name.endswith(".in"):
        name = name[:-3]
    ext = os.path.splitext(name)[1]
    if ext in C_STYLE:
        return f"/* {TAG} {LICENSE} */"
    if ext in HASH_STYLE or name in HASH_NAMES or text.startswith("#!"):
        return f"# {TAG} {LICENSE}"
    return None


def has_tag(text: str) -> bool:
    return any(TAG_LINE.match(line) for line in text.splitlines()[:HEAD_LINES])


def with_tag(text: str, line: str) -> str:
    """`text` with `line` inserted after a shebang and a coding line, if any."""
    nl = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    at = 0
    if lines and lines[0].startswith("#!"):
        at = 1
    if at < len(lines) and at < 2 and CODING.match(lines[at]):
        at += 1
    if at > 0 and not lines[at - 1].endswith(("\n", "\r")):
        lines[at - 1] += nl
    lines.insert(at, line + nl)
    return "".join(lines)


def tracked_files(root: str):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], capture_output=True,
                             check=True).stdout.decode()
        return [os.path.join(root, p) for p in out.split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        found = []
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith("build-")]
            found += [os.path.join(d, f) for f in files]
        return found


def expand(paths):
    for p in paths:
        if os.path.isdir(p):
            yield from tracked_files(p)
        else:
            yield p


def read(path: str):
    """The file's text, or None for binary / unreadable files."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        if b"\0" in data:
            return None
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="only report files without the line")
    ap.add_argument("paths", nargs="*", help="files or folders (default: the whole repository)")
    args = ap.parse_args(argv)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = sorted(set(expand(args.paths))) if args.paths else sorted(tracked_files(root))
    missing = []
    for path in files:
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        text = read(path)
        if text is None:
            continue
        line = comment_for(path, text)
        if line is None or has_tag(text):
            continue
        missing.append(path)
        if not args.check:
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(with_tag(text, line))
    rel = [os.path.relpath(p) for p in missing]
    if args.check:
        for p in rel:
            print(f"{p}: no '{TAG} {LICENSE}' line (add it with tools/spdx.py)")
        return 1 if missing else 0
    for p in rel:
        print(f"added: {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
