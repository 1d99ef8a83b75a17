#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tools/npy.c against numpy: arrays saved by np.save are read by the C reader and written back
# by the C writer (`test_npy copy`); the copy must load in numpy with the same dtype, shape and
# values and be byte for byte the file np.save wrote. bf16 is checked with ml_dtypes when it is
# installed (np.save of an ml_dtypes.bfloat16 array writes '<V2', as the C writer does).
#   tools/test_npy_numpy.sh [TEST_NPY_BINARY]   (PYTHON=... picks the interpreter; exit 77,
#   skipped, when it has no numpy)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d /tmp/test_npy_numpy.XXXXXX)"
trap 'rm -rf "$work"' EXIT
bin="${1:-}"
if [ -z "$bin" ]; then
  bin="$work/test_npy"
  "${CC:-cc}" -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I"$root/include" \
    "$root/tools/npy.c" "$root/tools/test_npy.c" -o "$bin"
fi
py="${PYTHON:-}"
if [ -z "$py" ]; then
  if [ -x "$root/.venv/bin/python" ]; then py="$root/.venv/bin/python"; else py=python3; fi
fi
if ! "$py" -c "import numpy" 2>/dev/null; then
  echo "test_npy_numpy: skipped ($py has no numpy)"
  exit 77  # ctest SKIP_RETURN_CODE
fi
"$py" - "$bin" "$work" <<'PY'
import itertools, os, subprocess, sys
import numpy as np
bin_, work = sys.argv[1], sys.argv[2]
try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None

rng = np.random.default_rng(0)
def sample(dt, shape):
    if dt == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)
    a = (rng.standard_normal(shape) * 100).astype(dt)
    flat = a.reshape(-1)
    specials = np.array([np.inf, -np.inf, np.nan, -0.0], dtype=dt)
    flat[: min(len(flat), 4)] = specials[: min(len(flat), 4)]
    return a

dtypes = [np.float32, np.float16, np.float64, np.int64, np.int32, np.int16, np.int8, np.uint8,
          np.bool_]
if ml_dtypes is not None:
    dtypes.append(ml_dtypes.bfloat16)
shapes = [(), (0,), (1,), (7,), (2, 3), (0, 3), (3, 0), (2, 3, 4), (2, 0, 4), (1, 2, 1, 2, 1, 2, 1, 2),
          (100003,)]
checked = 0
for dt, shape in itertools.product(dtypes, shapes):
    a = sample(dt, shape)
    src, dst = os.path.join(work, "src.npy"), os.path.join(work, "dst.npy")
    np.save(src, a)
    subprocess.run([bin_, "copy", src, dst], check=True)
    with open(src, "rb") as f, open(dst, "rb") as g:
        assert f.read() == g.read(), f"{np.dtype(dt)} {shape}: bytes differ from np.save"
    b = np.load(dst)
    if ml_dtypes is not None and dt is ml_dtypes.bfloat16:
        assert b.dtype == np.dtype("V2"), b.dtype
        b = b.view(ml_dtypes.bfloat16)
    assert b.dtype == a.dtype and b.shape == a.shape, (dt, shape, b.dtype, b.shape)
    assert a.tobytes() == b.tobytes(), f"{np.dtype(dt)} {shape}: values differ"
    checked += 1

# files numpy writes that the reader refuses, with a message
refused = {
    "big-endian": np.arange(3, dtype=">f4"),
    "fortran": np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)),
    "complex": np.zeros(2, np.complex64),
    "unicode": np.array(["ab"]),
    "uint16": np.zeros(2, np.uint16),
}
for name, a in refused.items():
    src = os.path.join(work, name + ".npy")
    np.save(src, a)
    r = subprocess.run([bin_, "copy", src, os.path.join(work, "x.npy")], capture_output=True,
                       text=True)
    assert r.returncode == 1 and "test_npy copy:" in r.stderr, (name, r.returncode, r.stderr)
    checked += 1
# versions 2.0 and 3.0 as numpy writes them
for version in [(2, 0), (3, 0)]:
    src = os.path.join(work, "v.npy")
    a = np.arange(5, dtype=np.int64)
    with open(src, "wb") as f:
        np.lib.format.write_array(f, a, version=version)
    subprocess.run([bin_, "copy", src, os.path.join(work, "x.npy")], check=True)
    assert (np.load(os.path.join(work, "x.npy")) == a).all()
    checked += 1
print(f"test_npy_numpy: {checked} passed, 0 failed"
      + ("" if ml_dtypes is not None else " (bf16 not checked: no ml_dtypes)"))
PY
