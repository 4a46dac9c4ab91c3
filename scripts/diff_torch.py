#!/usr/bin/env python3
"""Runs programs both with `funcfuse run --engine reference` and in PyTorch eager on the same inputs, and compares.

Usage: diff_torch.py [--funcfuse BIN] [--seed N] PATH...   (PATH: a .py file or a directory searched for *.py)

For trying programs the corpus does not hold: each program is run by funcfuse with seeded inputs, then by PyTorch on
the inputs funcfuse wrote; returns and mutated parameters are compared (the tolerance of src/tensor/close.rs; exact for integers and bools).
A program PyTorch rejects should be rejected by funcfuse too; both messages are printed.
"""
import argparse
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from make_goldens import parse_ann, programs  # noqa: E402
from real_code_check import compare as compare_close  # noqa: E402


def compare(name, got, want):
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{name}: {got.dtype}{list(got.shape)} vs torch {want.dtype}{list(want.shape)}"
    if got.dtype.kind == "f":
        why = compare_close(name, got, want)
        if why:
            return f"{why}; max abs diff {np.nanmax(np.abs(got.astype(np.float64) - want)):.3e}"
    elif not np.array_equal(got, want):
        return f"{name}: {int((got != want).sum())} elements differ"
    return None


def torch_outputs(fn, inputs):
    args = {k: torch.from_numpy(v.copy()) for k, v in inputs.items()}
    before = {k: t._version for k, t in args.items()}
    r = fn(**args)
    out = {}
    if isinstance(r, tuple):
        for i, v in enumerate(r):
            out[f"return.{i}.npy"] = v
    elif r is not None:
        out["return.npy"] = r
    for k, t in args.items():
        if t._version != before[k]:
            out[f"{k}.npy"] = t
    return {k: (v.numpy() if isinstance(v, torch.Tensor) else np.array(v)) for k, v in out.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--funcfuse", default="target/debug/funcfuse")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    torch.set_num_threads(1)
    files = []
    for p in map(Path, a.paths):
        files.extend(sorted(p.rglob("*.py")) if p.is_dir() else [p])
    bad = 0
    for path in files:
        try:
            progs = list(programs(path))
        except Exception as e:  # a file Python itself cannot load
            bad += 1
            print(f"FAIL {path}: Python cannot load it: {type(e).__name__}: {e}".splitlines()[0])
            continue
        for name, fn in progs:
            label = f"{path}::{name}"
            with tempfile.TemporaryDirectory() as tmp:
                r = subprocess.run([a.funcfuse, "run", label, "--engine", "reference", "--seed", str(a.seed), "--output", tmp],
                                   capture_output=True, text=True)
                ours_err = r.stderr.strip() if r.returncode else None
                inputs = {}
                p = 0
                import inspect
                for pname, param in inspect.signature(fn).parameters.items():
                    ann = parse_ann(param.annotation if isinstance(param.annotation, str) else None)
                    if ann is not None:
                        from make_goldens import random_input
                        inputs[pname] = random_input(a.seed, p, *ann)
                        p += 1
                try:
                    want = torch_outputs(fn, inputs)
                    torch_err = None
                except Exception as e:
                    torch_err = f"{type(e).__name__}: {e}".splitlines()[0]
                if torch_err or ours_err:
                    status = "ok  " if (torch_err and ours_err) else "FAIL"
                    bad += status == "FAIL"
                    print(f"{status} {label}\n     torch: {torch_err}\n     ours:  {ours_err}")
                    continue
                got = {f.name: np.load(f) for f in Path(tmp).glob("*.npy")}
                problems = [] if set(got) == set(want) else [f"files {sorted(got)} vs torch {sorted(want)}"]
                problems += [m for k in sorted(set(got) & set(want)) if (m := compare(k, got[k], want[k]))]
                bad += bool(problems)
                print(("FAIL " if problems else "ok   ") + label + "".join(f"\n     {m}" for m in problems))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
