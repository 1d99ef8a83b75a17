# SPDX-License-Identifier: Apache-2.0
"""The committed fuzz seeds are real programs: every .kiln seed must still load and report a
signature. The replay ctest cannot check this (the loader may reject a mutated input), so a
format or compiler change that makes the seeds unloadable would otherwise leave the fuzzer
starting from files it rejects at the header. Regenerate with tests/fuzz/gen_corpus (README)."""
import ctypes
import glob
import os

import pytest

from torch_kiln.compile import _capi

SEEDS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "fuzz", "corpus",
                                      "fuzz_load", "*.kiln")))


def test_there_are_seeds():
    assert len(SEEDS) >= 10


@pytest.mark.parametrize("path", SEEDS, ids=os.path.basename)
def test_seed_loads(path):
    lib = _capi.lib
    e = ctypes.c_void_p()
    _capi.check(lib.kiln_exec_load(path.encode(), ctypes.byref(e)), f"loading {path}")
    try:
        assert lib.kiln_exec_num_outputs(e) >= 1
    finally:
        lib.kiln_exec_destroy(e)
