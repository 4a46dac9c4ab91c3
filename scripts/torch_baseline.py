#!/usr/bin/env python3
"""Times every corpus program under PyTorch eager and torch.compile on this machine and writes a JSON file that
`funcfuse compare --baseline-file FILE` puts beside our plans.

    python3 scripts/torch_baseline.py [PATHS...] [--device cpu|cuda] [--runs N] [--no-compile] [--out FILE]

Inputs are the seed-0 inputs `funcfuse compare` uses (the generator of src/io.rs). Each timing is the median of N
runs after warm-up runs, on fresh copies of the inputs (programs mutate them; copying is not timed). On CUDA every
run ends with torch.cuda.synchronize(). A program torch.compile cannot handle is recorded with the error, not
skipped silently. Programs are named FILE.py::FUNC as given on the command line (relative to where you run it).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_goldens import parse_ann, programs, random_input  # noqa: E402


def files_of(paths):
    for p in paths:
        p = Path(p)
        if p.is_dir():
            yield from sorted(f for f in p.rglob("*.py") if "goldens" not in f.parts)
        else:
            yield p


def inputs_of(fn, device):
    import inspect

    args, p = {}, 0
    for name, param in inspect.signature(fn).parameters.items():
        ann = parse_ann(param.annotation if isinstance(param.annotation, str) else None)
        if ann is None:
            continue
        args[name] = torch.from_numpy(random_input(0, p, *ann).copy()).to(device)
        p += 1
    return args


def timed(fn, base, runs, device):
    sets = [{k: v.clone() for k, v in base.items()} for _ in range(runs + 3)]
    times = []
    for i, args in enumerate(sets):
        if device == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn(**args)
        if device == "cuda":
            torch.cuda.synchronize()
        if i >= 3:
            times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", default=["corpus"])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--no-compile", action="store_true", help="time eager only")
    ap.add_argument("--out", default="out/torch_baseline.json")
    a = ap.parse_args()
    torch.set_num_threads(1) if a.device == "cpu" else None
    result = {"torch": torch.__version__, "device": a.device, "runs": a.runs, "programs": {}}
    if a.device == "cuda":
        result["gpu"] = torch.cuda.get_device_name(0)
    for f in files_of(a.paths):
        for name, fn in programs(f):
            label = f"{f.as_posix()}::{name}"
            base = inputs_of(fn, a.device)
            row = {}
            try:
                with torch.no_grad():
                    row["eager_s"] = timed(fn, base, a.runs, a.device)
            except Exception as e:  # a program PyTorch rejects is reported, not hidden
                row["eager_error"] = f"{type(e).__name__}: {e}"
            if not a.no_compile:
                try:
                    torch._dynamo.reset()
                    compiled = torch.compile(fn)
                    with torch.no_grad():
                        row["compile_s"] = timed(compiled, base, a.runs, a.device)
                except Exception as e:
                    row["compile_error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            result["programs"][label] = row
            shown = {k: (f"{v * 1e3:.3f} ms" if k.endswith("_s") else v[:60]) for k, v in row.items()}
            print(label, shown, flush=True)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
