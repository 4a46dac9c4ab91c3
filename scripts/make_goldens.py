#!/usr/bin/env python3
"""Runs every corpus program in PyTorch eager on seeded inputs and stores its outputs as .npy goldens.

Usage: make_goldens.py [--corpus DIR] [--out DIR] [--seed N] [PROGRAM_FILTER...]

Inputs come from the same seeded generator as `funcfuse run --seed N` (specified in src/io.rs and reproduced here),
so large inputs need not be stored: the goldens keep the outputs, and the inputs only where they are small (they are
then also a check of the generator). For each program `FILE.py::FUNC` the folder `OUT/<FILE without .py>/<FUNC>/`
holds `return.npy` or `return.K.npy`, `NAME.npy` for every tensor parameter PyTorch's version counter says was written
in place or whose values changed (a write through `.data`, which the version counter does not see), `inputs/NAME.npy` when small, and `meta.json`.
"""
import argparse
import importlib.util
import inspect
import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import torch

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
STORE_INPUTS_UNDER = 256 * 1024  # bytes
DTYPES = {
    "f32": np.float32,
    "f64": np.float64,
    "i64": np.int64,
    "i32": np.int32,
    "i16": np.int16,
    "i8": np.int8,
    "u8": np.uint8,
    "bool": np.bool_,
}
ANN = re.compile(r"^\s*(f32|f64|i64|i32|i16|i8|u8|bool)\[(.*)\]\s*$")


def mix(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def random_input(seed, p, dtype, shape):
    """The generator of src/io.rs: key = mix(seed*G + p + 1); u_i = mix(key + (i+1)*G), all modulo 2^64."""
    with np.errstate(over="ignore"):
        key = mix(np.uint64((seed * GOLDEN + p + 1) & M64))
        n = int(np.prod(shape, dtype=np.int64))
        i = np.arange(1, n + 1, dtype=np.uint64)
        u = mix(key + i * np.uint64(GOLDEN))
    if dtype in ("f32", "f64"):
        vals = (u >> np.uint64(40)).astype(np.float64) / float(1 << 23) - 1.0
    elif dtype in ("i64", "i32", "i16", "i8", "u8"):
        vals = ((u >> np.uint64(32)) % np.uint64(10)).astype(np.int64)
    else:
        vals = (u >> np.uint64(63)) == 1
    return vals.astype(DTYPES[dtype]).reshape(shape)


def parse_ann(text):
    m = ANN.match(text or "")
    if not m:
        return None
    dims = [d.strip() for d in m.group(2).split(",") if d.strip() and d.strip() != "()"]
    return m.group(1), tuple(int(d) for d in dims)


def programs(path):
    # Registered under a name of its own before it runs: `@dataclass` resolves the string annotations of
    # `from __future__ import annotations` through sys.modules (two files may share a stem).
    name = f"_funcfuse_golden_{len(sys.modules)}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    for name, fn in inspect.getmembers(mod, inspect.isfunction):
        if fn.__module__ == mod.__name__ and not name.startswith("_"):
            yield name, fn


def save(path, value):
    if isinstance(value, torch.Tensor):
        np.save(path, value.detach().contiguous().numpy())
    elif isinstance(value, bool):
        np.save(path, np.array(value))
    elif isinstance(value, int):
        np.save(path, np.array(value, dtype=np.int64))
    elif isinstance(value, float):
        np.save(path, np.array(value, dtype=np.float64))
    else:
        raise TypeError(f"cannot store a {type(value).__name__} as a golden")


def written_through_data(t, arr):
    """Whether a parameter's values differ from its input's (bit for bit, so NaNs compare equal to themselves)."""
    now = t.detach().numpy()
    return now.shape != arr.shape or now.tobytes() != np.ascontiguousarray(arr).tobytes()


def run_one(path, name, fn, out_dir, seed):
    sig = inspect.signature(fn)
    args = {}
    before = {}
    inputs = {}
    p = 0
    for pname, param in sig.parameters.items():
        ann = parse_ann(param.annotation if isinstance(param.annotation, str) else None)
        if ann is None:
            continue
        arr = random_input(seed, p, *ann)
        p += 1
        inputs[pname] = arr
        t = torch.from_numpy(arr.copy())
        args[pname] = t
        before[pname] = t._version
    result = fn(**args)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    if isinstance(result, tuple):
        kind = "tuple"
        for k, v in enumerate(result):
            save(out_dir / f"return.{k}.npy", v)
    elif result is None:
        kind = "none"
    else:
        kind = "single"
        save(out_dir / "return.npy", result)
    # Written in place: PyTorch's version counter says so, or the values changed (a write through `p.data`, which
    # the version counter does not see, as optimizers write parameters).
    mutated = [n for n, t in args.items() if t._version != before[n] or written_through_data(t, inputs[n])]
    for n in mutated:
        save(out_dir / f"{n}.npy", args[n])
    stored = sum(a.nbytes for a in inputs.values()) < STORE_INPUTS_UNDER
    if stored:
        (out_dir / "inputs").mkdir()
        for n, a in inputs.items():
            np.save(out_dir / "inputs" / f"{n}.npy", a)
    meta = {"program": f"{path.as_posix()}::{name}", "seed": seed, "returns": kind, "mutated": mutated,
            "inputs_stored": stored, "torch": torch.__version__}
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return kind, mutated


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="corpus")
    ap.add_argument("--out", default="corpus/goldens")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("filter", nargs="*", help="only programs whose FILE::FUNC contains one of these")
    a = ap.parse_args()
    torch.set_num_threads(1)
    corpus = Path(a.corpus)
    failures = 0
    for path in sorted(corpus.rglob("*.py")):
        if Path(a.out) in path.parents:
            continue
        rel = path.relative_to(corpus).with_suffix("")
        for name, fn in programs(path):
            label = f"{path.as_posix()}::{name}"
            if a.filter and not any(f in label for f in a.filter):
                continue
            try:
                kind, mutated = run_one(path, name, fn, Path(a.out) / rel / name, a.seed)
                print(f"ok    {label}  returns={kind} mutated={mutated}")
            except Exception as e:  # a program PyTorch rejects is reported, not stored
                failures += 1
                print(f"FAIL  {label}: {type(e).__name__}: {e}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
