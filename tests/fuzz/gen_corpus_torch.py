# SPDX-License-Identifier: Apache-2.0
"""Adds .kiln programs made by torch.compile(backend="kiln") to the fuzz_load seed corpus.

A tiny TinyLlama training step (forward + backward) and a SmallCNN training step (the models of
tests/python/models.py, on the kiln device) are compiled; every kiln program the backend built is
saved with kiln_exec_save as <out>/torch_<model>_<k>.kiln. Then models are exported with
torch_kiln.export (model files with signatures, weights sections and, for the dynamic ones,
symbols and size expressions) as <out>/export_<model>.kiln. Files over --max-kb are skipped so
the corpus stays small.

    KILN_LIB=$PWD/torch_kiln/libkiln.so .venv/bin/python tests/fuzz/gen_corpus_torch.py \
        tests/fuzz/corpus/fuzz_load
"""
import argparse
import os
import sys

import torch
import torch._dynamo

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import torch_kiln  # noqa: E402,F401
from torch_kiln.compile import compiled_programs  # noqa: E402
from torch_kiln.compile._capi import lib  # noqa: E402

from models import LlamaConfig, SmallCNN, TinyLlama  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--max-kb", type=int, default=48)
    a = ap.parse_args()
    export_seeds(a.out, max(a.max_kb, 160))
    torch.manual_seed(0)
    dev = torch.device("kiln")
    cfg = LlamaConfig(vocab=32, dim=16, layers=1, heads=2, ffn=32, seq=8)
    llama = TinyLlama(cfg).to(dev)
    tokens = torch.randint(0, cfg.vocab, (2, cfg.seq)).to(dev)
    cnn = SmallCNN().to(dev)
    images = torch.randn(2, 3, 16, 16).to(dev)
    labels = torch.randint(0, 10, (2,)).to(dev)
    runs = [("llama", llama.loss, (tokens, tokens)),
            ("cnn", lambda x, y: torch.nn.functional.cross_entropy(cnn(x), y), (images, labels))]
    for name, fn, args in runs:
        torch._dynamo.reset()
        first = len(compiled_programs)
        torch.compile(fn, backend="kiln", dynamic=False)(*args).backward()  # forward + backward
        for k, prog in enumerate(compiled_programs[first:]):
            if not prog.exec:
                continue
            path = os.path.join(a.out, f"torch_{name}_{k}.kiln")
            if lib.kiln_exec_save(prog.exec, path.encode()) != 0:
                raise RuntimeError(f"kiln_exec_save failed for {path}")
            kb = os.path.getsize(path) / 1024
            if kb > a.max_kb:
                os.remove(path)
                print(f"skipped {path}: {kb:.0f} KB")
            else:
                print(f"wrote {path}: {kb:.1f} KB")


def export_seeds(out, max_kb):
    from torch.export import Dim
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab=32, dim=16, layers=1, heads=2, ffn=32, seq=8)
    lm = TinyLlama(cfg).eval()
    tok = torch.randint(0, cfg.vocab, (1, 6))
    mlp = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).eval()
    cnn = SmallCNN().eval()
    seeds = [("lm", lm, (tok,), None), ("lm_dynamic_seq", lm, (tok,), ({1: Dim("seq", min=2, max=8)},)),
             ("mlp_dynamic_batch", mlp, (torch.randn(2, 6),), ({0: Dim("batch", min=1, max=16)},)),
             ("cnn", cnn, (torch.randn(1, 3, 16, 16),), None)]
    for name, model, args, dyn in seeds:
        path = os.path.join(out, f"export_{name}.kiln")
        torch_kiln.export(model, args, path, dynamic_shapes=dyn)
        kb = os.path.getsize(path) / 1024
        if kb > max_kb:
            os.remove(path)
            print(f"skipped {path}: {kb:.0f} KB")
        else:
            print(f"wrote {path}: {kb:.1f} KB")


if __name__ == "__main__":
    main()
