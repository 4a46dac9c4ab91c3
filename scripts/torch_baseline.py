#!/usr/bin/env python3
"""Times every corpus program under PyTorch eager and torch.compile on this machine and writes a JSON file that
`funcfuse compare --baseline-file FILE` puts beside our plans.

    python3 scripts/torch_baseline.py [PATHS...] [--device cpu|cuda] [--runs N] [--no-compile] [--out FILE]
    python3 scripts/torch_baseline.py --worker [--device cpu|cuda]

`--worker` is how `funcfuse compare --measure --torch PYTHON` times PyTorch in its own run (the binary embeds this
file and make_goldens.py): it answers one line `@@funcfuse {"ok": true, "torch": VERSION, ...}` (or `"ok": false`
with the `error`, e.g. a Python without torch), then reads requests, one JSON object a line
(`{"file": F, "func": NAME, "runs": N, "compile": BOOL}`), and answers each with one line `@@funcfuse {...}`:
`eager_s`, `compile_s` (or `eager_error`, `compile_error`, or `error` when the program does not load) and `inputs`
(name, shape and sum of every generated input, so that the caller can check they are its own). Whatever the
programs or torch print goes to standard error, never among the answers.

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

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import torch
    from make_goldens import parse_ann, programs, random_input
    IMPORT_ERROR = None
except Exception as e:  # noqa: BLE001 -- reported by the worker, raised by the batch mode
    IMPORT_ERROR = e

MARK = "@@funcfuse "


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


def one_line(e):
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def time_program(path, func, runs, device, compile_too):
    """One worker request: eager (and torch.compile) times of FILE::FUNC, or the errors."""
    try:
        fns = dict(programs(Path(path)))
        if func not in fns:
            return {"error": f"PyTorch found no function `{func}` in {path}"}
        fn = fns[func]
        base = inputs_of(fn, device)
    except Exception as e:  # noqa: BLE001 -- a program Python cannot load is reported
        return {"error": f"PyTorch could not load the program: {one_line(e)}"}
    row = {"inputs": [[k, list(v.shape), float(v.double().sum().item())] for k, v in base.items()]}
    try:
        with torch.no_grad():
            row["eager_s"] = timed(fn, base, runs, device)
    except Exception as e:  # noqa: BLE001
        row["eager_error"] = one_line(e)
    if compile_too:
        try:
            torch._dynamo.reset()
            compiled = torch.compile(fn)
            with torch.no_grad():
                row["compile_s"] = timed(compiled, base, runs, device)
        except Exception as e:  # noqa: BLE001
            row["compile_error"] = one_line(e)
    return row


def worker(device):
    import os

    # Answers go to a private copy of standard output; everything else printed (by programs, torch, compilers
    # started by torch.compile) goes to standard error.
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(obj):
        answers.write(MARK + json.dumps(obj) + "\n")
        answers.flush()

    if IMPORT_ERROR is not None:
        send({"ok": False, "error": f"{sys.executable} cannot import torch: {one_line(IMPORT_ERROR)}"})
        return
    if device == "cuda" and not torch.cuda.is_available():
        send({"ok": False, "error": f"torch {torch.__version__} sees no CUDA device"})
        return
    if device == "cpu":
        torch.set_num_threads(1)
    send({"ok": True, "torch": torch.__version__, "device": device, "python": sys.version.split()[0]})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            send(time_program(req["file"], req["func"], int(req["runs"]), device, bool(req["compile"])))
        except Exception as e:  # noqa: BLE001 -- a bad request is answered, the worker goes on
            send({"error": f"bad request: {one_line(e)}"})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", default=["corpus"])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--no-compile", action="store_true", help="time eager only")
    ap.add_argument("--out", default="out/torch_baseline.json")
    ap.add_argument("--worker", action="store_true", help="answer timing requests on stdin (for funcfuse compare)")
    a = ap.parse_args()
    if a.worker:
        worker(a.device)
        return
    if IMPORT_ERROR is not None:
        sys.exit(f"{sys.executable} cannot import torch: {one_line(IMPORT_ERROR)}")
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
